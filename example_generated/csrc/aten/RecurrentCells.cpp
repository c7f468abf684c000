// Recurrent cells: the fused LSTM and GRU cell kernels nn.LSTM, nn.GRU, nn.LSTMCell and nn.GRUCell
// use on accelerators (_thnn_fused_lstm_cell, _thnn_fused_gru_cell and their backward kernels).
//
// PyTorch's RNN code computes the gate matrix products with ordinary matmuls and, on CUDA, XPU and
// PrivateUse1 devices, hands the elementwise rest of each time step to these operators. They have
// CUDA kernels only, so the CPU fallback cannot run them: a backend must. Each is one kernel over
// (batch, hidden) that reads the gate pre-activations and writes the new states plus a workspace
// (the activated gates) that the backward kernel reads instead of recomputing them.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <tuple>

#include "../core/Launch.h"

namespace torch_foo {
namespace {

constexpr int64_t kGrain = 4096;

// ---- device code --------------------------------------------------------------------------

template <typename T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// Gate k (of `gates`) of element (b, h): input + hidden pre-activations plus both biases.
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
struct GateInputs {
  const scalar_t* input_gates;
  const scalar_t* hidden_gates;
  const scalar_t* input_bias; // null without bias
  const scalar_t* hidden_bias;
  int64_t gates;
  int64_t hidden;

  acc_t input(int64_t b, int64_t k, int64_t h) const {
    const acc_t bias = input_bias != nullptr ? acc_t(input_bias[k * hidden + h]) : acc_t(0);
    return acc_t(input_gates[(b * gates + k) * hidden + h]) + bias;
  }
  acc_t hidden_part(int64_t b, int64_t k, int64_t h) const {
    const acc_t bias = hidden_bias != nullptr ? acc_t(hidden_bias[k * hidden + h]) : acc_t(0);
    return acc_t(hidden_gates[(b * gates + k) * hidden + h]) + bias;
  }
};

template <typename scalar_t>
struct LstmForward {
  GateInputs<scalar_t> in;
  const scalar_t* cx;
  scalar_t* hy;
  scalar_t* cy;
  scalar_t* workspace; // (batch, 4 * hidden): i, f, g, o after activation
  int64_t batch;

  void operator()() {
    to_kernel_addresses(in.input_gates, in.hidden_gates, in.input_bias, in.hidden_bias, cx, hy, cy, workspace);
    using acc_t = at::opmath_type<scalar_t>;
    const int64_t hidden = in.hidden;
    at::parallel_for(0, batch * hidden, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        const int64_t b = e / hidden;
        const int64_t h = e % hidden;
        acc_t gate[4];
        for (int64_t k = 0; k < 4; ++k) {
          gate[k] = in.input(b, k, h) + in.hidden_part(b, k, h);
        }
        const acc_t i = sigmoid(gate[0]);
        const acc_t f = sigmoid(gate[1]);
        const acc_t g = std::tanh(gate[2]);
        const acc_t o = sigmoid(gate[3]);
        const acc_t c = f * acc_t(cx[e]) + i * g;
        cy[e] = static_cast<scalar_t>(c);
        hy[e] = static_cast<scalar_t>(o * std::tanh(c));
        const acc_t activated[4] = {i, f, g, o};
        for (int64_t k = 0; k < 4; ++k) {
          workspace[(b * 4 + k) * hidden + h] = static_cast<scalar_t>(activated[k]);
        }
      }
    });
  }
};

template <typename scalar_t>
struct LstmBackward {
  const scalar_t* grad_hy; // null: zero
  const scalar_t* grad_cy; // null: zero
  const scalar_t* cx;
  const scalar_t* cy;
  const scalar_t* workspace;
  scalar_t* grad_gates; // (batch, 4 * hidden)
  scalar_t* grad_cx;
  int64_t batch;
  int64_t hidden;

  void operator()() {
    to_kernel_addresses(grad_hy, grad_cy, cx, cy, workspace, grad_gates, grad_cx);
    using acc_t = at::opmath_type<scalar_t>;
    at::parallel_for(0, batch * hidden, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        const int64_t b = e / hidden;
        const int64_t h = e % hidden;
        const auto ws = [&](int64_t k) { return acc_t(workspace[(b * 4 + k) * hidden + h]); };
        const acc_t i = ws(0);
        const acc_t f = ws(1);
        const acc_t g = ws(2);
        const acc_t o = ws(3);
        const acc_t ghy = grad_hy != nullptr ? acc_t(grad_hy[e]) : acc_t(0);
        const acc_t gcy = grad_cy != nullptr ? acc_t(grad_cy[e]) : acc_t(0);
        const acc_t tanh_cy = std::tanh(acc_t(cy[e]));
        const acc_t gc = gcy + ghy * o * (acc_t(1) - tanh_cy * tanh_cy);
        const acc_t grads[4] = {
            gc * g * i * (acc_t(1) - i),
            gc * acc_t(cx[e]) * f * (acc_t(1) - f),
            gc * i * (acc_t(1) - g * g),
            ghy * tanh_cy * o * (acc_t(1) - o)};
        for (int64_t k = 0; k < 4; ++k) {
          grad_gates[(b * 4 + k) * hidden + h] = static_cast<scalar_t>(grads[k]);
        }
        grad_cx[e] = static_cast<scalar_t>(gc * f);
      }
    });
  }
};

template <typename scalar_t>
struct GruForward {
  GateInputs<scalar_t> in;
  const scalar_t* hx;
  scalar_t* hy;
  scalar_t* workspace; // (batch, 5 * hidden): r, z, n, hx, hidden n-gate with bias
  int64_t batch;

  void operator()() {
    to_kernel_addresses(in.input_gates, in.hidden_gates, in.input_bias, in.hidden_bias, hx, hy, workspace);
    using acc_t = at::opmath_type<scalar_t>;
    const int64_t hidden = in.hidden;
    at::parallel_for(0, batch * hidden, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        const int64_t b = e / hidden;
        const int64_t h = e % hidden;
        const acc_t r = sigmoid(in.input(b, 0, h) + in.hidden_part(b, 0, h));
        const acc_t z = sigmoid(in.input(b, 1, h) + in.hidden_part(b, 1, h));
        const acc_t hn = in.hidden_part(b, 2, h);
        const acc_t n = std::tanh(in.input(b, 2, h) + r * hn);
        const acc_t h_prev = acc_t(hx[e]);
        hy[e] = static_cast<scalar_t>(n + z * (h_prev - n));
        const acc_t saved[5] = {r, z, n, h_prev, hn};
        for (int64_t k = 0; k < 5; ++k) {
          workspace[(b * 5 + k) * hidden + h] = static_cast<scalar_t>(saved[k]);
        }
      }
    });
  }
};

template <typename scalar_t>
struct GruBackward {
  const scalar_t* grad_hy;
  const scalar_t* workspace;
  scalar_t* grad_input_gates; // (batch, 3 * hidden)
  scalar_t* grad_hidden_gates;
  scalar_t* grad_hx;
  int64_t batch;
  int64_t hidden;

  void operator()() {
    to_kernel_addresses(grad_hy, workspace, grad_input_gates, grad_hidden_gates, grad_hx);
    using acc_t = at::opmath_type<scalar_t>;
    at::parallel_for(0, batch * hidden, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        const int64_t b = e / hidden;
        const int64_t h = e % hidden;
        const auto ws = [&](int64_t k) { return acc_t(workspace[(b * 5 + k) * hidden + h]); };
        const acc_t r = ws(0);
        const acc_t z = ws(1);
        const acc_t n = ws(2);
        const acc_t h_prev = ws(3);
        const acc_t hn = ws(4);
        const acc_t g = acc_t(grad_hy[e]);
        const acc_t gz = g * (h_prev - n) * z * (acc_t(1) - z);
        const acc_t gn = g * (acc_t(1) - z) * (acc_t(1) - n * n);
        const acc_t gr = gn * hn * r * (acc_t(1) - r);
        const auto index = [&](int64_t k) { return (b * 3 + k) * hidden + h; };
        grad_input_gates[index(0)] = static_cast<scalar_t>(gr);
        grad_input_gates[index(1)] = static_cast<scalar_t>(gz);
        grad_input_gates[index(2)] = static_cast<scalar_t>(gn);
        grad_hidden_gates[index(0)] = static_cast<scalar_t>(gr);
        grad_hidden_gates[index(1)] = static_cast<scalar_t>(gz);
        grad_hidden_gates[index(2)] = static_cast<scalar_t>(gn * r);
        grad_hx[e] = static_cast<scalar_t>(g * z);
      }
    });
  }
};

// ---- host code ----------------------------------------------------------------------------

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

template <typename scalar_t>
const scalar_t* maybe_data(const at::Tensor& t) {
  return t.defined() ? t.const_data_ptr<scalar_t>() : nullptr;
}

// The gate operands of a forward cell, contiguous, and the kernel's view of them.
struct CellOperands {
  at::Tensor input_gates, hidden_gates, input_bias, hidden_bias; // biases may be undefined

  CellOperands(
      const at::Tensor& ig,
      const at::Tensor& hg,
      const std::optional<at::Tensor>& ib,
      const std::optional<at::Tensor>& hb)
      : input_gates(ig.contiguous()),
        hidden_gates(hg.contiguous()),
        input_bias(contiguous_bias(ib, ig)),
        hidden_bias(contiguous_bias(hb, ig)) {}

  template <typename scalar_t>
  GateInputs<scalar_t> gate_inputs(int64_t gates, int64_t hidden) const {
    return {
        input_gates.const_data_ptr<scalar_t>(),
        hidden_gates.const_data_ptr<scalar_t>(),
        maybe_data<scalar_t>(input_bias),
        maybe_data<scalar_t>(hidden_bias),
        gates,
        hidden};
  }
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
  if (hy.numel() > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, c.scalar_type(), "_thnn_fused_lstm_cell", [&] {
      launch(
          LstmForward<scalar_t>{
              operands.gate_inputs<scalar_t>(4, c.size(1)),
              c.const_data_ptr<scalar_t>(),
              hy.mutable_data_ptr<scalar_t>(),
              cy.mutable_data_ptr<scalar_t>(),
              workspace.mutable_data_ptr<scalar_t>(),
              c.size(0)});
    });
  }
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
  if (grad_cx.numel() > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, c.scalar_type(), "_thnn_fused_lstm_cell_backward", [&] {
      launch(
          LstmBackward<scalar_t>{
              maybe_data<scalar_t>(grad_hy),
              maybe_data<scalar_t>(grad_cy),
              c.const_data_ptr<scalar_t>(),
              c_new.const_data_ptr<scalar_t>(),
              ws.const_data_ptr<scalar_t>(),
              grad_gates.mutable_data_ptr<scalar_t>(),
              grad_cx.mutable_data_ptr<scalar_t>(),
              c.size(0),
              c.size(1)});
    });
  }
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
  if (hy.numel() > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, h.scalar_type(), "_thnn_fused_gru_cell", [&] {
      launch(
          GruForward<scalar_t>{
              operands.gate_inputs<scalar_t>(3, h.size(1)),
              h.const_data_ptr<scalar_t>(),
              hy.mutable_data_ptr<scalar_t>(),
              workspace.mutable_data_ptr<scalar_t>(),
              h.size(0)});
    });
  }
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
  if (grad_hx.numel() > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, g.scalar_type(), "_thnn_fused_gru_cell_backward", [&] {
      launch(
          GruBackward<scalar_t>{
              g.const_data_ptr<scalar_t>(),
              ws.const_data_ptr<scalar_t>(),
              grad_input_gates.mutable_data_ptr<scalar_t>(),
              grad_hidden_gates.mutable_data_ptr<scalar_t>(),
              grad_hx.mutable_data_ptr<scalar_t>(),
              batch,
              hidden});
    });
  }
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
