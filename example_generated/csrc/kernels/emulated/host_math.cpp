// Dense math of the emulated device: matrix products, convolutions and softmax; and square roots and powers.
//
// A device takes these from its vendor's math library (cuBLAS and cuDNN for CUDA). The emulated
// device runs on the host, whose best math library is the one PyTorch's CPU operators use (oneDNN,
// MKL or OpenBLAS, with their threading), so its kernels wrap the device memory of each operand as
// a CPU tensor and call the CPU operator on it: results equal the CPU's, at the CPU's speed. This
// is the only file of the operator library that includes PyTorch, and it does so only as the
// emulated device's math library: the interface (kernels.h) stays free of it, and a hardware port
// replaces this file with calls into its own library.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_log_softmax_backward_data.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/sqrt.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "../native.h"
#include "device.h"
#include "host_math.h"

namespace torch_foo::kernels {
namespace {

std::optional<c10::ScalarType> scalar_type(fooDataType dtype) {
  c10::ScalarType t = c10::ScalarType::Undefined;
  switch (dtype) {
#define FOO_SCALAR_TYPE(DTYPE, TYPE, SCALAR_TYPE) \
  case DTYPE: t = c10::ScalarType::SCALAR_TYPE; break;
    FOO_OP_DTYPES(FOO_SCALAR_TYPE)
#undef FOO_SCALAR_TYPE
  }
  // The floating and complex dtypes, and int64 as PyTorch's CPU kernels compute it (its convolutions
  // and products accept it; CUDA's do not); the narrower integers and bool are not this library's.
  if (c10::isFloatingType(t) || c10::isComplexType(t) || t == c10::ScalarType::Long) {
    return t;
  }
  return std::nullopt;
}

bool supported(const fooTensor* t) {
  return t == nullptr || t->data == nullptr || scalar_type(t->dtype).has_value();
}

// Inside a kernel: the operand's device memory as a CPU tensor (no copy).
at::Tensor as_cpu(const fooEmuKernelContext* ctx, const fooTensor& t) {
  return at::from_blob(
      ctx->address(t.data),
      c10::IntArrayRef(t.sizes, t.ndim),
      c10::IntArrayRef(t.strides, t.ndim),
      at::TensorOptions().dtype(*scalar_type(t.dtype)));
}

// The library call sees plain tensors whatever the calling thread's state: no autograd recording
// and no autocast of the CPU operands.
struct LibraryCall {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  c10::impl::ExcludeDispatchKeyGuard no_autocast{c10::autocast_dispatch_keyset};
};

// Runs `body` and turns a C++ exception into a device fault.
template <typename Body>
void guarded(const fooEmuKernelContext* ctx, const Body& body) {
  try {
    const LibraryCall call;
    body();
  } catch (const c10::Error& e) {
    ctx->fail(e.what_without_backtrace());
  } catch (const std::exception& e) {
    ctx->fail(e.what());
  }
}

struct GemmParams {
  fooTensor a;
  fooTensor b;
  fooTensor c;
  double alpha;
  double beta;
};

void gemm_kernel(const fooEmuKernelContext* ctx, const void* raw) {
  const auto& p = *static_cast<const GemmParams*>(raw);
  guarded(ctx, [&] {
    at::Tensor c = as_cpu(ctx, p.c);
    if (p.c.ndim == 2) {
      c.addmm_(as_cpu(ctx, p.a), as_cpu(ctx, p.b), p.beta, p.alpha);
    } else {
      c.baddbmm_(as_cpu(ctx, p.a), as_cpu(ctx, p.b), p.beta, p.alpha);
    }
  });
}

std::vector<int64_t> first(const int64_t* values, int n) {
  return std::vector<int64_t>(values, values + n);
}

struct ConvolutionParams {
  fooConvolutionParams conv;
  fooTensor input;
  fooTensor weight;
  fooTensor bias; // data null: none
  fooTensor output;
};

void convolution_kernel(const fooEmuKernelContext* ctx, const void* raw) {
  const auto& p = *static_cast<const ConvolutionParams*>(raw);
  const int n = p.conv.spatial_dims;
  guarded(ctx, [&] {
    const std::optional<at::Tensor> bias =
        p.bias.data != nullptr ? std::optional<at::Tensor>(as_cpu(ctx, p.bias)) : std::nullopt;
    as_cpu(ctx, p.output)
        .copy_(
            at::convolution(
                as_cpu(ctx, p.input),
                as_cpu(ctx, p.weight),
                bias,
                first(p.conv.stride, n),
                first(p.conv.padding, n),
                first(p.conv.dilation, n),
                p.conv.transposed != 0,
                first(p.conv.output_padding, n),
                p.conv.groups));
  });
}

struct ConvolutionBackwardParams {
  fooConvolutionParams conv;
  fooTensor grad_output;
  fooTensor input;
  fooTensor weight;
  fooTensor grads[3]; // input, weight, bias; data null: not wanted
};

void convolution_backward_kernel(const fooEmuKernelContext* ctx, const void* raw) {
  const auto& p = *static_cast<const ConvolutionBackwardParams*>(raw);
  const int n = p.conv.spatial_dims;
  guarded(ctx, [&] {
    const std::array<bool, 3> mask{p.grads[0].data != nullptr, p.grads[1].data != nullptr, p.grads[2].data != nullptr};
    const std::vector<int64_t> bias_sizes{p.grad_output.sizes[1]};
    const auto grads = at::convolution_backward(
        as_cpu(ctx, p.grad_output),
        as_cpu(ctx, p.input),
        as_cpu(ctx, p.weight),
        mask[2] ? at::OptionalIntArrayRef(bias_sizes) : std::nullopt,
        first(p.conv.stride, n),
        first(p.conv.padding, n),
        first(p.conv.dilation, n),
        p.conv.transposed != 0,
        first(p.conv.output_padding, n),
        p.conv.groups,
        mask);
    const std::array<const at::Tensor*, 3> computed{&std::get<0>(grads), &std::get<1>(grads), &std::get<2>(grads)};
    for (size_t i = 0; i < 3; ++i) {
      if (mask[i]) {
        as_cpu(ctx, p.grads[i]).copy_(*computed[i]);
      }
    }
  });
}

struct SoftmaxParams {
  fooTensor tensors[3]; // forward: input, output; backward: grad_output, output, grad_input
  int dim;
  int log;
};

void softmax_kernel(const fooEmuKernelContext* ctx, const void* raw) {
  const auto& p = *static_cast<const SoftmaxParams*>(raw);
  guarded(ctx, [&] {
    at::Tensor output = as_cpu(ctx, p.tensors[1]);
    if (p.log != 0) {
      at::_log_softmax_out(output, as_cpu(ctx, p.tensors[0]), p.dim, false);
    } else {
      at::_softmax_out(output, as_cpu(ctx, p.tensors[0]), p.dim, false);
    }
  });
}

void softmax_backward_kernel(const fooEmuKernelContext* ctx, const void* raw) {
  const auto& p = *static_cast<const SoftmaxParams*>(raw);
  guarded(ctx, [&] {
    at::Tensor grad_input = as_cpu(ctx, p.tensors[2]);
    const at::Tensor grad_output = as_cpu(ctx, p.tensors[0]);
    const at::Tensor output = as_cpu(ctx, p.tensors[1]);
    if (p.log != 0) {
      at::_log_softmax_backward_data_out(grad_input, grad_output, output, p.dim, output.scalar_type());
    } else {
      at::_softmax_backward_data_out(grad_input, grad_output, output, p.dim, output.scalar_type());
    }
  });
}

// The tensors of a softmax: one shape, one floating dtype, `dim` among their dimensions.
bool softmax_operands(std::initializer_list<const fooTensor*> tensors, int dim) {
  const fooTensor& first = **tensors.begin();
  for (const fooTensor* t : tensors) {
    if (t->dtype != first.dtype || t->ndim != first.ndim || !std::equal(t->sizes, t->sizes + t->ndim, first.sizes)) {
      return false;
    }
  }
  return dim >= 0 && dim < std::max(first.ndim, 1);
}

bool floating(fooDataType dtype) {
  return dtype == fooFloat16 || dtype == fooBFloat16 || dtype == fooFloat32 || dtype == fooFloat64;
}

fooTensor or_none(const fooTensor* t) {
  if (t != nullptr) {
    return *t;
  }
  fooTensor none{};
  return none;
}

} // namespace

void host_unary(
    const fooEmuKernelContext* ctx,
    HostUnary op,
    double value,
    fooDataType dtype,
    char* out,
    int64_t out_stride,
    const char* in,
    int64_t in_stride,
    int64_t n) {
  guarded(ctx, [&] {
    const auto type = *scalar_type(dtype);
    const auto itemsize = static_cast<int64_t>(c10::elementSize(type));
    const auto options = at::TensorOptions().dtype(type);
    at::Tensor result = at::from_blob(out, {n}, {out_stride / itemsize}, options);
    const at::Tensor input = at::from_blob(const_cast<char*>(in), {n}, {in_stride / itemsize}, options);
    switch (op) {
      case HostUnary::Sqrt: at::sqrt_out(result, input); break;
      case HostUnary::Pow: at::pow_out(result, input, value); break;
    }
  });
}

} // namespace torch_foo::kernels

using namespace torch_foo::kernels;

extern "C" {

fooError_t fooOpGemm(
    const fooTensor* a,
    const fooTensor* b,
    fooTensor* c, // read when beta != 0, then written
    double alpha,
    double beta,
    fooStream_t stream) {
  if (a == nullptr || b == nullptr || c == nullptr || a->ndim != c->ndim || b->ndim != c->ndim ||
      (c->ndim != 2 && c->ndim != 3)) {
    return invalid_argument(__func__);
  }
  if (!supported(a) || a->dtype != b->dtype || a->dtype != c->dtype) {
    return not_supported("this data type");
  }
  const GemmParams params{*a, *b, *c, alpha, beta};
  return launch(function<&gemm_kernel>("gemm"), 1, &params, sizeof(params), stream);
}

fooError_t fooOpConvolution(
    const fooConvolutionParams* conv,
    const fooTensor* input,
    const fooTensor* weight,
    const fooTensor* bias,
    fooTensor* output,
    fooStream_t stream) {
  if (conv == nullptr || input == nullptr || weight == nullptr || output == nullptr || conv->spatial_dims < 1 ||
      conv->spatial_dims > 3) {
    return invalid_argument(__func__);
  }
  if (!supported(input) || !supported(weight) || !supported(bias) || !supported(output)) {
    return not_supported("this data type");
  }
  const ConvolutionParams params{*conv, *input, *weight, or_none(bias), *output};
  return launch(function<&convolution_kernel>("convolution"), 1, &params, sizeof(params), stream);
}

fooError_t fooOpConvolutionBackward(
    const fooConvolutionParams* conv,
    const fooTensor* grad_output,
    const fooTensor* input,
    const fooTensor* weight,
    fooTensor* grad_input,
    fooTensor* grad_weight,
    fooTensor* grad_bias,
    fooStream_t stream) {
  if (conv == nullptr || grad_output == nullptr || input == nullptr || weight == nullptr || conv->spatial_dims < 1 ||
      conv->spatial_dims > 3) {
    return invalid_argument(__func__);
  }
  if (!supported(grad_output) || !supported(input) || !supported(weight)) {
    return not_supported("this data type");
  }
  const ConvolutionBackwardParams params{
      *conv, *grad_output, *input, *weight, {or_none(grad_input), or_none(grad_weight), or_none(grad_bias)}};
  return launch(function<&convolution_backward_kernel>("convolution_backward"), 1, &params, sizeof(params), stream);
}

fooError_t fooOpSoftmax(
    const fooTensor* input,
    fooTensor* output,
    int dim,
    int log, // 1: log-softmax
    fooStream_t stream) {
  if (input == nullptr || output == nullptr || !softmax_operands({input, output}, dim)) {
    return invalid_argument(__func__);
  }
  if (!floating(input->dtype)) {
    return not_supported("this data type");
  }
  SoftmaxParams params{};
  params.tensors[0] = *input;
  params.tensors[1] = *output;
  params.dim = dim;
  params.log = log;
  return launch(function<&softmax_kernel>(log != 0 ? "log_softmax" : "softmax"), 1, &params, sizeof(params), stream);
}

fooError_t fooOpSoftmaxBackward(
    const fooTensor* grad_output,
    const fooTensor* output,
    fooTensor* grad_input,
    int dim,
    int log,
    fooStream_t stream) {
  if (grad_output == nullptr || output == nullptr || grad_input == nullptr ||
      !softmax_operands({grad_output, output, grad_input}, dim)) {
    return invalid_argument(__func__);
  }
  if (!floating(output->dtype)) {
    return not_supported("this data type");
  }
  SoftmaxParams params{};
  params.tensors[0] = *grad_output;
  params.tensors[1] = *output;
  params.tensors[2] = *grad_input;
  params.dim = dim;
  params.log = log;
  const char* name = log != 0 ? "log_softmax_backward" : "softmax_backward";
  return launch(function<&softmax_backward_kernel>(name), 1, &params, sizeof(params), stream);
}

} // extern "C"
