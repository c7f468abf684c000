// Recurrent cell kernels of the emulated device: the elementwise part of one LSTM or GRU time
// step over (batch, hidden), after the gate matrix products. Each block takes kCellGrain elements.
#include <cmath>

#include "../recurrent.h"
#include "device.h"

namespace torch_foo::kernels {
namespace {

constexpr int64_t kCellGrain = 4096;

template <typename M>
M sigmoid(M x) {
  return M(1) / (M(1) + std::exp(-x));
}

// The elements [begin, end) of a block over batch * hidden.
struct Range {
  int64_t begin;
  int64_t end;
};

Range block_range(const fooEmuKernelContext* ctx, int64_t total) {
  const int64_t begin = static_cast<int64_t>(block_index(ctx)) * kCellGrain;
  return {begin, std::min(begin + kCellGrain, total)};
}

uint64_t cell_blocks(int64_t total) {
  return static_cast<uint64_t>((total + kCellGrain - 1) / kCellGrain);
}

// The gate inputs of a forward cell: pre-activations from the input and hidden matrix products,
// and the two optional biases.
struct Gates {
  const void* input_gates;
  const void* hidden_gates;
  const void* input_bias; // null without bias
  const void* hidden_bias;
};

template <typename T>
struct GateReader {
  const T* input_gates;
  const T* hidden_gates;
  const T* input_bias;
  const T* hidden_bias;
  int64_t gates;
  int64_t hidden;

  GateReader(const fooEmuKernelContext* ctx, const Gates& g, int64_t gates_, int64_t hidden_)
      : input_gates(static_cast<const T*>(ctx->address(g.input_gates))),
        hidden_gates(static_cast<const T*>(ctx->address(g.hidden_gates))),
        input_bias(static_cast<const T*>(ctx->address(g.input_bias))),
        hidden_bias(static_cast<const T*>(ctx->address(g.hidden_bias))),
        gates(gates_),
        hidden(hidden_) {}

  // Gate k of element (b, h), input part (with its bias) and hidden part (with its bias).
  opmath_t<T> input(int64_t b, int64_t k, int64_t h) const {
    using M = opmath_t<T>;
    const M bias = input_bias != nullptr ? M(input_bias[k * hidden + h]) : M(0);
    return M(input_gates[(b * gates + k) * hidden + h]) + bias;
  }
  opmath_t<T> hidden_part(int64_t b, int64_t k, int64_t h) const {
    using M = opmath_t<T>;
    const M bias = hidden_bias != nullptr ? M(hidden_bias[k * hidden + h]) : M(0);
    return M(hidden_gates[(b * gates + k) * hidden + h]) + bias;
  }
};

struct LstmParams {
  Gates gates;
  const void* cx;
  void* hy;
  void* cy;
  void* workspace; // (batch, 4 * hidden): i, f, g, o after activation
  int64_t batch;
  int64_t hidden;
};

template <typename T>
struct Lstm {
  static void run(const fooEmuKernelContext* ctx, const void* raw) {
    using M = opmath_t<T>;
    const auto& p = *static_cast<const LstmParams*>(raw);
    const GateReader<T> in(ctx, p.gates, 4, p.hidden);
    const T* cx = static_cast<const T*>(ctx->address(p.cx));
    T* hy = static_cast<T*>(ctx->address(p.hy));
    T* cy = static_cast<T*>(ctx->address(p.cy));
    T* workspace = static_cast<T*>(ctx->address(p.workspace));
    const Range r = block_range(ctx, p.batch * p.hidden);
    for (int64_t e = r.begin; e < r.end; ++e) {
      const int64_t b = e / p.hidden;
      const int64_t h = e % p.hidden;
      M gate[4];
      for (int64_t k = 0; k < 4; ++k) {
        gate[k] = in.input(b, k, h) + in.hidden_part(b, k, h);
      }
      const M i = sigmoid(gate[0]);
      const M f = sigmoid(gate[1]);
      const M g = std::tanh(gate[2]);
      const M o = sigmoid(gate[3]);
      const M c = f * M(cx[e]) + i * g;
      cy[e] = static_cast<T>(c);
      hy[e] = static_cast<T>(o * std::tanh(c));
      const M activated[4] = {i, f, g, o};
      for (int64_t k = 0; k < 4; ++k) {
        workspace[(b * 4 + k) * p.hidden + h] = static_cast<T>(activated[k]);
      }
    }
  }
};

struct LstmBackwardParams {
  const void* grad_hy; // null: zero
  const void* grad_cy; // null: zero
  const void* cx;
  const void* cy;
  const void* workspace;
  void* grad_gates; // (batch, 4 * hidden)
  void* grad_cx;
  int64_t batch;
  int64_t hidden;
};

template <typename T>
struct LstmBackward {
  static void run(const fooEmuKernelContext* ctx, const void* raw) {
    using M = opmath_t<T>;
    const auto& p = *static_cast<const LstmBackwardParams*>(raw);
    const T* grad_hy = static_cast<const T*>(ctx->address(p.grad_hy));
    const T* grad_cy = static_cast<const T*>(ctx->address(p.grad_cy));
    const T* cx = static_cast<const T*>(ctx->address(p.cx));
    const T* cy = static_cast<const T*>(ctx->address(p.cy));
    const T* workspace = static_cast<const T*>(ctx->address(p.workspace));
    T* grad_gates = static_cast<T*>(ctx->address(p.grad_gates));
    T* grad_cx = static_cast<T*>(ctx->address(p.grad_cx));
    const int64_t hidden = p.hidden;
    const Range r = block_range(ctx, p.batch * hidden);
    for (int64_t e = r.begin; e < r.end; ++e) {
      const int64_t b = e / hidden;
      const int64_t h = e % hidden;
      const auto ws = [&](int64_t k) { return M(workspace[(b * 4 + k) * hidden + h]); };
      const M i = ws(0);
      const M f = ws(1);
      const M g = ws(2);
      const M o = ws(3);
      const M ghy = grad_hy != nullptr ? M(grad_hy[e]) : M(0);
      const M gcy = grad_cy != nullptr ? M(grad_cy[e]) : M(0);
      const M tanh_cy = std::tanh(M(cy[e]));
      const M gc = gcy + ghy * o * (M(1) - tanh_cy * tanh_cy);
      const M grads[4] = {
          gc * g * i * (M(1) - i),
          gc * M(cx[e]) * f * (M(1) - f),
          gc * i * (M(1) - g * g),
          ghy * tanh_cy * o * (M(1) - o)};
      for (int64_t k = 0; k < 4; ++k) {
        grad_gates[(b * 4 + k) * hidden + h] = static_cast<T>(grads[k]);
      }
      grad_cx[e] = static_cast<T>(gc * f);
    }
  }
};

struct GruParams {
  Gates gates;
  const void* hx;
  void* hy;
  void* workspace; // (batch, 5 * hidden): r, z, n, hx, hidden n-gate with bias
  int64_t batch;
  int64_t hidden;
};

template <typename T>
struct Gru {
  static void run(const fooEmuKernelContext* ctx, const void* raw) {
    using M = opmath_t<T>;
    const auto& p = *static_cast<const GruParams*>(raw);
    const GateReader<T> in(ctx, p.gates, 3, p.hidden);
    const T* hx = static_cast<const T*>(ctx->address(p.hx));
    T* hy = static_cast<T*>(ctx->address(p.hy));
    T* workspace = static_cast<T*>(ctx->address(p.workspace));
    const Range r = block_range(ctx, p.batch * p.hidden);
    for (int64_t e = r.begin; e < r.end; ++e) {
      const int64_t b = e / p.hidden;
      const int64_t h = e % p.hidden;
      const M rg = sigmoid(in.input(b, 0, h) + in.hidden_part(b, 0, h));
      const M z = sigmoid(in.input(b, 1, h) + in.hidden_part(b, 1, h));
      const M hn = in.hidden_part(b, 2, h);
      const M n = std::tanh(in.input(b, 2, h) + rg * hn);
      const M h_prev = M(hx[e]);
      hy[e] = static_cast<T>(n + z * (h_prev - n));
      const M saved[5] = {rg, z, n, h_prev, hn};
      for (int64_t k = 0; k < 5; ++k) {
        workspace[(b * 5 + k) * p.hidden + h] = static_cast<T>(saved[k]);
      }
    }
  }
};

struct GruBackwardParams {
  const void* grad_hy;
  const void* workspace;
  void* grad_input_gates; // (batch, 3 * hidden)
  void* grad_hidden_gates;
  void* grad_hx;
  int64_t batch;
  int64_t hidden;
};

template <typename T>
struct GruBackward {
  static void run(const fooEmuKernelContext* ctx, const void* raw) {
    using M = opmath_t<T>;
    const auto& p = *static_cast<const GruBackwardParams*>(raw);
    const T* grad_hy = static_cast<const T*>(ctx->address(p.grad_hy));
    const T* workspace = static_cast<const T*>(ctx->address(p.workspace));
    T* grad_input_gates = static_cast<T*>(ctx->address(p.grad_input_gates));
    T* grad_hidden_gates = static_cast<T*>(ctx->address(p.grad_hidden_gates));
    T* grad_hx = static_cast<T*>(ctx->address(p.grad_hx));
    const int64_t hidden = p.hidden;
    const Range range = block_range(ctx, p.batch * hidden);
    for (int64_t e = range.begin; e < range.end; ++e) {
      const int64_t b = e / hidden;
      const int64_t h = e % hidden;
      const auto ws = [&](int64_t k) { return M(workspace[(b * 5 + k) * hidden + h]); };
      const M r = ws(0);
      const M z = ws(1);
      const M n = ws(2);
      const M h_prev = ws(3);
      const M hn = ws(4);
      const M g = M(grad_hy[e]);
      const M gz = g * (h_prev - n) * z * (M(1) - z);
      const M gn = g * (M(1) - z) * (M(1) - n * n);
      const M gr = gn * hn * r * (M(1) - r);
      const auto index = [&](int64_t k) { return (b * 3 + k) * hidden + h; };
      grad_input_gates[index(0)] = static_cast<T>(gr);
      grad_input_gates[index(1)] = static_cast<T>(gz);
      grad_input_gates[index(2)] = static_cast<T>(gn);
      grad_hidden_gates[index(0)] = static_cast<T>(gr);
      grad_hidden_gates[index(1)] = static_cast<T>(gz);
      grad_hidden_gates[index(2)] = static_cast<T>(gn * r);
      grad_hx[e] = static_cast<T>(g * z);
    }
  }
};

// Launches Kernel<T>::run for the floating dtype over batch * hidden elements.
template <template <typename> class Kernel, typename Params>
fooError_t launch_cell(
    const char* name, fooDataType dtype, int64_t batch, int64_t hidden, const Params& p, fooStream_t s) {
  if (batch * hidden == 0) {
    return fooSuccess;
  }
  return dispatch<Types::Floating>(dtype, [&](auto tag) {
    using T = decltype(tag);
    return launch(function<&Kernel<T>::run>(name), cell_blocks(batch * hidden), &p, sizeof(p), s);
  });
}

} // namespace
} // namespace torch_foo::kernels

using namespace torch_foo::kernels;

extern "C" {

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
    fooStream_t stream) {
  const Gates gates{input_gates, hidden_gates, input_bias, hidden_bias};
  const LstmParams params{gates, cx, hy, cy, workspace, batch, hidden};
  return launch_cell<Lstm>("lstm_cell", dtype, batch, hidden, params, stream);
}

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
    fooStream_t stream) {
  const LstmBackwardParams params{grad_hy, grad_cy, cx, cy, workspace, grad_gates, grad_cx, batch, hidden};
  return launch_cell<LstmBackward>("lstm_cell_backward", dtype, batch, hidden, params, stream);
}

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
    fooStream_t stream) {
  const Gates gates{input_gates, hidden_gates, input_bias, hidden_bias};
  const GruParams params{gates, hx, hy, workspace, batch, hidden};
  return launch_cell<Gru>("gru_cell", dtype, batch, hidden, params, stream);
}

fooError_t fooOpGruCellBackward(
    fooDataType dtype,
    int64_t batch,
    int64_t hidden,
    const void* grad_hy,
    const void* workspace,
    void* grad_input_gates,
    void* grad_hidden_gates,
    void* grad_hx,
    fooStream_t stream) {
  const GruBackwardParams params{grad_hy, workspace, grad_input_gates, grad_hidden_gates, grad_hx, batch, hidden};
  return launch_cell<GruBackward>("gru_cell_backward", dtype, batch, hidden, params, stream);
}

} // extern "C"
