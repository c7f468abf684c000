// Recurrent cells: the fused LSTM and GRU cell kernels nn.LSTM, nn.GRU, nn.LSTMCell and nn.GRUCell
// use on accelerators (_thnn_fused_lstm_cell, _thnn_fused_gru_cell and their backward kernels).
//
// PyTorch's RNN code computes the gate matrix products with ordinary matmuls and, on CUDA, XPU and
// PrivateUse1 devices, hands the elementwise rest of each time step to these operators. They have
// CUDA kernels only, so the CPU fallback cannot run them: a backend must. Each is one kernel over
// (batch, hidden) that reads the gate pre-activations and writes the new states plus a workspace
// (the activated gates) that the backward kernel reads instead of recomputing them; the operator
// library runs them (fooOpLstmCell and friends). The host checks shapes and makes operands
// contiguous.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <tuple>

#include "../aten/OpLibrary.h"
#include "../kernels/recurrent.h"

namespace torch_foo {
namespace {

// The checks of ATen's RNN cells (rnn_cell_checkSizes): gates (batch, G * hidden), state
// (batch, hidden), biases (G * hidden), one device and dtype.
void check_cell(
    const at::Tensor& input_gates,
    const at::Tensor& hidden_gates,
    const std::optional<at::Tensor>& input_bias,
    const std::optional<at::Tensor>& hidden_bias,
    int64_t gates,
    const at::Tensor& state) {
  TORCH_CHECK(input_gates.dim() == 2, "input_gates must be 2-dimensional, got ", input_gates.dim(), " dimensions");
  TORCH_CHECK(
      input_gates.sizes() == hidden_gates.sizes(),
      "input_gates and hidden_gates must have the same size, got ",
      input_gates.sizes(),
      " and ",
      hidden_gates.sizes());
  const int64_t width = input_gates.size(1);
  TORCH_CHECK(width % gates == 0, "the gates dimension (", width, ") must be a multiple of ", gates);
  TORCH_CHECK(
      state.dim() == 2 && state.size(0) == input_gates.size(0) && state.size(1) * gates == width,
      "the state must have size (",
      input_gates.size(0),
      ", ",
      width / gates,
      "), got ",
      state.sizes());
  for (const auto* bias : {&input_bias, &hidden_bias}) {
    if (bias->has_value() && (*bias)->defined()) {
      TORCH_CHECK(
          (*bias)->dim() == 1 && (*bias)->size(0) == width,
          "a bias must have size (",
          width,
          "), got ",
          (*bias)->sizes());
    }
  }
  for (const at::Tensor* t : {&hidden_gates, &state}) {
    TORCH_CHECK(t->device() == input_gates.device(), "expected all inputs on ", input_gates.device());
    TORCH_CHECK(t->scalar_type() == input_gates.scalar_type(), "expected all inputs of dtype ", input_gates.dtype());
  }
}

// A contiguous version of an optional bias (undefined stays undefined).
at::Tensor contiguous_bias(const std::optional<at::Tensor>& bias, const at::Tensor& like) {
  if (!bias.has_value() || !bias->defined()) {
    return at::Tensor();
  }
  TORCH_CHECK(
      bias->device() == like.device() && bias->scalar_type() == like.scalar_type(), "bias must match the gates");
  return bias->contiguous();
}

const void* maybe_data(const at::Tensor& t) {
  return t.defined() ? t.const_data_ptr() : nullptr;
}

// The gate operands of a forward cell, contiguous (biases may be undefined).
struct CellOperands {
  at::Tensor input_gates, hidden_gates, input_bias, hidden_bias;

  CellOperands(
      const at::Tensor& ig,
      const at::Tensor& hg,
      const std::optional<at::Tensor>& ib,
      const std::optional<at::Tensor>& hb)
      : input_gates(ig.contiguous()),
        hidden_gates(hg.contiguous()),
        input_bias(contiguous_bias(ib, ig)),
        hidden_bias(contiguous_bias(hb, ig)) {}
};

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell(
    const at::Tensor& input_gates,
    const at::Tensor& hidden_gates,
    const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias,
    const std::optional<at::Tensor>& hidden_bias) {
  check_cell(input_gates, hidden_gates, input_bias, hidden_bias, 4, cx);
  const c10::DeviceGuard guard(input_gates.device());
  const CellOperands operands(input_gates, hidden_gates, input_bias, hidden_bias);
  const at::Tensor c = cx.contiguous();
  at::Tensor workspace = at::empty_like(operands.input_gates, c10::MemoryFormat::Contiguous);
  at::Tensor hy = at::empty_like(c, c10::MemoryFormat::Contiguous);
  at::Tensor cy = at::empty_like(c, c10::MemoryFormat::Contiguous);
  FOO_OP_CHECK(fooOpLstmCell(
      checked_dtype(c.scalar_type()),
      c.size(0),
      c.size(1),
      operands.input_gates.const_data_ptr(),
      operands.hidden_gates.const_data_ptr(),
      maybe_data(operands.input_bias),
      maybe_data(operands.hidden_bias),
      c.const_data_ptr(),
      hy.mutable_data_ptr(),
      cy.mutable_data_ptr(),
      workspace.mutable_data_ptr(),
      current_stream()));
  return {hy, cy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell_backward(
    const std::optional<at::Tensor>& grad_hy_opt,
    const std::optional<at::Tensor>& grad_cy_opt,
    const at::Tensor& cx,
    const at::Tensor& cy,
    const at::Tensor& workspace,
    bool has_bias) {
  const at::Tensor grad_hy =
      grad_hy_opt.has_value() && grad_hy_opt->defined() ? grad_hy_opt->contiguous() : at::Tensor();
  const at::Tensor grad_cy =
      grad_cy_opt.has_value() && grad_cy_opt->defined() ? grad_cy_opt->contiguous() : at::Tensor();
  if (!grad_hy.defined() && !grad_cy.defined()) {
    return {};
  }
  TORCH_CHECK(cx.dim() == 2 && cy.sizes() == cx.sizes(), "cx and cy must be (batch, hidden) matrices of one size");
  TORCH_CHECK(
      workspace.dim() == 2 && workspace.size(0) == cx.size(0) && workspace.size(1) == 4 * cx.size(1),
      "the workspace must have size (batch, 4 * hidden)");
  for (const at::Tensor* g : {&grad_hy, &grad_cy}) {
    TORCH_CHECK(!g->defined() || g->sizes() == cx.sizes(), "gradients must have the size of cx");
  }
  const c10::DeviceGuard guard(cx.device());
  const at::Tensor c = cx.contiguous();
  const at::Tensor c_new = cy.contiguous();
  const at::Tensor ws = workspace.contiguous();
  at::Tensor grad_gates = at::empty_like(ws, c10::MemoryFormat::Contiguous);
  at::Tensor grad_cx = at::empty_like(c, c10::MemoryFormat::Contiguous);
  FOO_OP_CHECK(fooOpLstmCellBackward(
      checked_dtype(c.scalar_type()),
      c.size(0),
      c.size(1),
      maybe_data(grad_hy),
      maybe_data(grad_cy),
      c.const_data_ptr(),
      c_new.const_data_ptr(),
      ws.const_data_ptr(),
      grad_gates.mutable_data_ptr(),
      grad_cx.mutable_data_ptr(),
      current_stream()));
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

std::tuple<at::Tensor, at::Tensor> gru_cell(
    const at::Tensor& input_gates,
    const at::Tensor& hidden_gates,
    const at::Tensor& hx,
    const std::optional<at::Tensor>& input_bias,
    const std::optional<at::Tensor>& hidden_bias) {
  check_cell(input_gates, hidden_gates, input_bias, hidden_bias, 3, hx);
  const c10::DeviceGuard guard(input_gates.device());
  const CellOperands operands(input_gates, hidden_gates, input_bias, hidden_bias);
  const at::Tensor h = hx.contiguous();
  at::Tensor hy = at::empty_like(h, c10::MemoryFormat::Contiguous);
  at::Tensor workspace = at::empty({h.size(0), 5 * h.size(1)}, h.options());
  FOO_OP_CHECK(fooOpGruCell(
      checked_dtype(h.scalar_type()),
      h.size(0),
      h.size(1),
      operands.input_gates.const_data_ptr(),
      operands.hidden_gates.const_data_ptr(),
      maybe_data(operands.input_bias),
      maybe_data(operands.hidden_bias),
      h.const_data_ptr(),
      hy.mutable_data_ptr(),
      workspace.mutable_data_ptr(),
      current_stream()));
  return {hy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  TORCH_CHECK(grad_hy.dim() == 2, "grad_hy must be a (batch, hidden) matrix");
  TORCH_CHECK(
      workspace.dim() == 2 && workspace.size(0) == grad_hy.size(0) && workspace.size(1) == 5 * grad_hy.size(1),
      "the workspace must have size (batch, 5 * hidden)");
  const c10::DeviceGuard guard(grad_hy.device());
  const at::Tensor g = grad_hy.contiguous();
  const at::Tensor ws = workspace.contiguous();
  const int64_t batch = g.size(0);
  const int64_t hidden = g.size(1);
  at::Tensor grad_input_gates = at::empty({batch, 3 * hidden}, ws.options());
  at::Tensor grad_hidden_gates = at::empty({batch, 3 * hidden}, ws.options());
  at::Tensor grad_hx = at::empty_like(g, c10::MemoryFormat::Contiguous);
  FOO_OP_CHECK(fooOpGruCellBackward(
      checked_dtype(g.scalar_type()),
      batch,
      hidden,
      g.const_data_ptr(),
      ws.const_data_ptr(),
      grad_input_gates.mutable_data_ptr(),
      grad_hidden_gates.mutable_data_ptr(),
      grad_hx.mutable_data_ptr(),
      current_stream()));
  at::Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward);
  m.impl("_thnn_fused_gru_cell", gru_cell);
  m.impl("_thnn_fused_gru_cell_backward", gru_cell_backward);
}

} // namespace torch_foo
