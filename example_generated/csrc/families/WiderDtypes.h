// CUDA's dtype coverage for operators that run on the CPU fallback.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torch_foo {

// Runs `op` through the CPU fallback in a wider dtype when its arguments hold a dtype that CUDA's
// kernel accepts and the CPU's does not (complex32 arithmetic, half and bfloat16 pooling, abs of
// bool, ...; the table is in WiderDtypes.cpp), and narrows the results back to what CUDA returns.
// `cpu_key` is the CPU kernel's key (CPU, or SparseCPU / SparseCsrCPU for sparse arguments).
// Returns false, with the stack untouched, when no widening applies.
bool run_widened(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key);

} // namespace torch_foo
