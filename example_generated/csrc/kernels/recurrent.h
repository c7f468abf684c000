// The fused recurrent cells (the kernel_families answer), part of the operator library (kernels.h
// states its conventions): what nn.LSTM and nn.GRU run on this device (csrc/families/RecurrentCells.cpp
// calls them).
#pragma once

#include <stdint.h>

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- recurrent cells (contiguous row-major matrices) --------------------------------------------

// LSTM: gates (batch, 4 * hidden) in the order i, f, g, o; biases (4 * hidden) or NULL; states
// (batch, hidden); workspace (batch, 4 * hidden) receives the activated gates for the backward pass.
fooError_t fooOpLstmCell(
    fooDataType dtype,
    int64_t batch,
    int64_t hidden,
    const void* input_gates,
    const void* hidden_gates,
    const void* input_bias,
    const void* hidden_bias,
    const void* cx,
    void* hy,
    void* cy,
    void* workspace,
    fooStream_t stream);
// grad_hy and grad_cy may be NULL (zero).
fooError_t fooOpLstmCellBackward(
    fooDataType dtype,
    int64_t batch,
    int64_t hidden,
    const void* grad_hy,
    const void* grad_cy,
    const void* cx,
    const void* cy,
    const void* workspace,
    void* grad_gates,
    void* grad_cx,
    fooStream_t stream);
// GRU: gates (batch, 3 * hidden) in the order r, z, n; workspace (batch, 5 * hidden).
fooError_t fooOpGruCell(
    fooDataType dtype,
    int64_t batch,
    int64_t hidden,
    const void* input_gates,
    const void* hidden_gates,
    const void* input_bias,
    const void* hidden_bias,
    const void* hx,
    void* hy,
    void* workspace,
    fooStream_t stream);
fooError_t fooOpGruCellBackward(
    fooDataType dtype,
    int64_t batch,
    int64_t hidden,
    const void* grad_hy,
    const void* workspace,
    void* grad_input_gates,
    void* grad_hidden_gates,
    void* grad_hx,
    fooStream_t stream);

#ifdef __cplusplus
} // extern "C"
#endif
