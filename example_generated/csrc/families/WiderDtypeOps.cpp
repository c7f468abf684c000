// The operators of CUDA's dtype coverage that the fallback's widening table (WiderDtypes.cpp)
// cannot serve, each for its own reason:
//
//  - torch.histc of integer tensors: widening to float64 would be exact only below 2^53, and CUDA
//    bins integers with integer arithmetic; the operator library does it (csrc/kernels/histogram.h).
//  - FFTs of half and complex32 tensors: PyTorch's FFT front ends (CompositeImplicitAutograd) reject
//    half precision on every device but CUDA before any kernel runs, so the fallback never sees
//    them. The front ends are registered here to transform a half tensor in float (complex64), as
//    cuFFT computes it, and to return CUDA's half-precision result (and, from torch 2.14 on, a
//    bfloat16 tensor in float, returning float's result as CUDA does); everything else goes to
//    PyTorch's own front end. They are registered for the autograd key too, where the front end's
//    decomposition provides the gradient.
//  - nansum (and nanmean, built on it) of complex tensors: the CPU kernel refuses complex inputs on
//    purpose; CUDA adds the elements that are not NaN (a complex number is NaN when either part is),
//    which this kernel expresses with where() and sum().
// Every other dtype of these operators runs on the CPU fallback as before.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/fft_fft2_native.h>
#include <ATen/ops/fft_fft_native.h>
#include <ATen/ops/fft_fftn_native.h>
#include <ATen/ops/fft_hfft2_native.h>
#include <ATen/ops/fft_hfft_native.h>
#include <ATen/ops/fft_hfftn_native.h>
#include <ATen/ops/fft_ifft2_native.h>
#include <ATen/ops/fft_ifft_native.h>
#include <ATen/ops/fft_ifftn_native.h>
#include <ATen/ops/fft_ihfft2_native.h>
#include <ATen/ops/fft_ihfft_native.h>
#include <ATen/ops/fft_ihfftn_native.h>
#include <ATen/ops/fft_irfft2_native.h>
#include <ATen/ops/fft_irfft_native.h>
#include <ATen/ops/fft_irfftn_native.h>
#include <ATen/ops/fft_rfft2_native.h>
#include <ATen/ops/fft_rfft_native.h>
#include <ATen/ops/fft_rfftn_native.h>
#include <ATen/ops/histc_ops.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/nansum_ops.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "../aten/Fallback.h"
#include "../aten/OpLibrary.h"
#include "../kernels/histogram.h"

namespace torch_foo {
namespace {

// An out= variant's tail: the result into `out`, with the CPU kernels' dtype check and resize.
at::Tensor& write_out(const at::Tensor& result, at::Tensor& out) {
  TORCH_CHECK(
      c10::canCast(result.scalar_type(), out.scalar_type()),
      "result type ",
      result.scalar_type(),
      " can't be cast to the desired output type ",
      out.scalar_type());
  out.resize_(result.sizes());
  out.copy_(result);
  return out;
}

// ---- histc of integers ------------------------------------------------------------------------

bool integer_histc(const at::Tensor& self) {
  return c10::isIntegralType(self.scalar_type(), /*includeBool=*/false);
}

// CUDA's histc of an integer tensor: the range converted to the tensor's type, the data's own range
// when min == max, and one more on each side of a single value.
at::Tensor histc_integers(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  TORCH_CHECK(bins > 0, "bins must be > 0");
  int64_t lo = 0;
  int64_t hi = 0;
  AT_DISPATCH_INTEGRAL_TYPES(self.scalar_type(), "histc", [&] {
    lo = static_cast<int64_t>(min.to<scalar_t>());
    hi = static_cast<int64_t>(max.to<scalar_t>());
  });
  if (lo == hi && self.numel() > 0) {
    lo = self.min().item<int64_t>();
    hi = self.max().item<int64_t>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  TORCH_CHECK(lo < hi, "max must be larger than min");
  const c10::DeviceGuard guard(self.device());
  at::Tensor output = at::empty({bins}, self.options());
  const fooTensor input = op_tensor(self.reshape({-1}));
  fooTensor counts = op_tensor(output);
  FOO_OP_CHECK(fooOpHistogramIntegers(&input, bins, lo, hi, &counts, current_stream()));
  return output;
}

at::Tensor histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  if (!integer_histc(self)) {
    return run_on_cpu<at::_ops::histc>(self, bins, min, max);
  }
  return histc_integers(self, bins, min, max);
}

at::Tensor& histc_out(
    const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max, at::Tensor& out) {
  if (!integer_histc(self)) {
    return run_on_cpu<at::_ops::histc_out>(self, bins, min, max, out);
  }
  const at::Tensor result = histc_integers(self, bins, min, max);
  out.resize_(result.sizes());
  out.copy_(result);
  return out;
}

// ---- FFTs of half and complex32 -----------------------------------------------------------------

bool half_precision(const at::Tensor& t) {
  return t.scalar_type() == c10::kHalf || t.scalar_type() == c10::kComplexHalf;
}

// Whether CUDA transforms this input in float and returns float's result: bfloat16 (there is no
// complex bfloat16, so a transform of bfloat16 gives complex64 or float32, as for a float input).
bool bfloat16_as_float(const at::Tensor& t) {
  return t.scalar_type() == c10::kBFloat16;
}

// The result dtype of a transform computed in float for a half-precision input.
at::Tensor to_half_precision(const at::Tensor& t) {
  return t.to(c10::isComplexType(t.scalar_type()) ? c10::kComplexHalf : c10::kHalf);
}

at::Tensor to_single_precision(const at::Tensor& t) {
  return t.to(c10::isComplexType(t.scalar_type()) ? c10::kComplexFloat : c10::kFloat);
}

// Wraps PyTorch's front end `transform` (and its out= variant `transform_out`) of one FFT, whose
// arguments after the input are A...
template <typename F>
struct FftArguments;

template <typename... A>
struct FftArguments<at::Tensor (*)(const at::Tensor&, A...)> {
  template <
      at::Tensor (*transform)(const at::Tensor&, A...),
      at::Tensor& (*transform_out)(const at::Tensor&, A..., at::Tensor&)>
  struct HalfFft {
    static at::Tensor call(const at::Tensor& self, A... args) {
      if (bfloat16_as_float(self)) {
        return transform(self.to(c10::kFloat), args...);
      }
      if (!half_precision(self)) {
        return transform(self, args...);
      }
      return to_half_precision(transform(to_single_precision(self), args...));
    }

    static at::Tensor& call_out(const at::Tensor& self, A... args, at::Tensor& out) {
      if (!half_precision(self) && !half_precision(out) && !bfloat16_as_float(self)) {
        return transform_out(self, args..., out);
      }
      const at::Tensor result = call(self, args...);
      return write_out(result, out);
    }
  };
};

#define FOO_HALF_FFT(name) \
  FftArguments< \
      decltype(&at::native::name##_symint)>::HalfFft<&at::native::name##_symint, &at::native::name##_symint_out>

template <typename Fft>
void register_half_fft(torch::Library& m, const char* name, const char* out_name) {
  m.impl(name, TORCH_FN(Fft::call));
  m.impl(out_name, TORCH_FN(Fft::call_out));
}

#define FOO_REGISTER_HALF_FFT(m, name) register_half_fft<FOO_HALF_FFT(name)>(m, #name, #name ".out")

void register_half_ffts(torch::Library& m) {
  FOO_REGISTER_HALF_FFT(m, fft_fft);
  FOO_REGISTER_HALF_FFT(m, fft_ifft);
  FOO_REGISTER_HALF_FFT(m, fft_rfft);
  FOO_REGISTER_HALF_FFT(m, fft_irfft);
  FOO_REGISTER_HALF_FFT(m, fft_hfft);
  FOO_REGISTER_HALF_FFT(m, fft_ihfft);
  FOO_REGISTER_HALF_FFT(m, fft_fft2);
  FOO_REGISTER_HALF_FFT(m, fft_ifft2);
  FOO_REGISTER_HALF_FFT(m, fft_rfft2);
  FOO_REGISTER_HALF_FFT(m, fft_irfft2);
  FOO_REGISTER_HALF_FFT(m, fft_hfft2);
  FOO_REGISTER_HALF_FFT(m, fft_ihfft2);
  FOO_REGISTER_HALF_FFT(m, fft_fftn);
  FOO_REGISTER_HALF_FFT(m, fft_ifftn);
  FOO_REGISTER_HALF_FFT(m, fft_rfftn);
  FOO_REGISTER_HALF_FFT(m, fft_irfftn);
  FOO_REGISTER_HALF_FFT(m, fft_hfftn);
  FOO_REGISTER_HALF_FFT(m, fft_ihfftn);
}

// ---- nansum of complex tensors ----------------------------------------------------------------

at::Tensor nansum_complex(
    const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  return at::sum(at::where(at::isnan(self), 0, self), dim, keepdim, dtype);
}

at::Tensor nansum(
    const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  if (!c10::isComplexType(self.scalar_type())) {
    return run_on_cpu<at::_ops::nansum>(self, dim, keepdim, dtype);
  }
  return nansum_complex(self, dim, keepdim, dtype);
}

at::Tensor& nansum_out(
    const at::Tensor& self,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    std::optional<at::ScalarType> dtype,
    at::Tensor& out) {
  if (!c10::isComplexType(self.scalar_type())) {
    return run_on_cpu<at::_ops::nansum_out>(self, dim, keepdim, dtype, out);
  }
  const at::Tensor result = nansum_complex(self, dim, keepdim, dtype);
  return write_out(result, out);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histc", histc);
  m.impl("histc.out", histc_out);
  m.impl("nansum", nansum);
  m.impl("nansum.out", nansum_out);
  register_half_ffts(m);
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  register_half_ffts(m);
}

} // namespace torch_foo
