// Histograms of integer tensors on the emulated device: the kernel of histogram.h.
//
// One block counts every element in order, adding into the output in place (a GPU kernel splits
// the input over blocks that count into shared memory and add with atomics; histc of integers is
// rare enough for one block).
#include "../histogram.h"
#include "device.h"

namespace torch_foo::kernels {
namespace {

struct HistogramParams {
  const char* input;
  int64_t numel;
  int64_t input_stride; // elements
  char* output;
  int64_t bins;
  int64_t output_stride;
  int64_t min;
  int64_t max;
};

template <typename T>
void histogram_kernel(const fooEmuKernelContext* ctx, const void* raw) {
  const auto& p = *static_cast<const HistogramParams*>(raw);
  const auto* input = reinterpret_cast<const T*>(device_address(ctx, p.input));
  auto* output = reinterpret_cast<T*>(device_address(ctx, p.output));
  using Count = std::make_unsigned_t<T>; // counts wrap in narrow types instead of overflowing
  for (int64_t b = 0; b < p.bins; ++b) {
    output[b * p.output_stride] = T(0);
  }
  const auto range = static_cast<unsigned __int128>(static_cast<__int128>(p.max) - p.min);
  for (int64_t i = 0; i < p.numel; ++i) {
    const auto x = static_cast<int64_t>(input[i * p.input_stride]);
    if (x < p.min || x > p.max) {
      continue;
    }
    const auto offset = static_cast<unsigned __int128>(static_cast<__int128>(x) - p.min);
    auto bin = static_cast<int64_t>(offset * static_cast<unsigned __int128>(p.bins) / range);
    bin = bin == p.bins ? p.bins - 1 : bin; // max belongs to the last bin
    T& count = output[bin * p.output_stride];
    count = static_cast<T>(static_cast<Count>(static_cast<Count>(count) + 1u));
  }
}

template <typename T>
struct Histogram {
  static void run(const fooEmuKernelContext* ctx, const void* raw) {
    histogram_kernel<T>(ctx, raw);
  }
};

} // namespace
} // namespace torch_foo::kernels

using namespace torch_foo::kernels;

extern "C" fooError_t fooOpHistogramIntegers(
    const fooTensor* input, int64_t bins, int64_t min, int64_t max, fooTensor* output, fooStream_t stream) {
  if (input == nullptr || output == nullptr || input->ndim != 1 || output->ndim != 1 || output->data == nullptr ||
      (input->data == nullptr && input->sizes[0] > 0)) {
    return fail(fooErrorInvalidValue, "%s: input and output must be 1-d tensors", __func__);
  }
  if (bins <= 0 || output->sizes[0] != bins || min >= max || input->dtype != output->dtype) {
    return fail(
        fooErrorInvalidValue, "%s: needs bins > 0 output elements of the input's dtype and min < max", __func__);
  }
  const HistogramParams params{
      static_cast<const char*>(input->data),
      input->sizes[0],
      input->strides[0],
      static_cast<char*>(output->data),
      bins,
      output->strides[0],
      min,
      max};
  return dispatch<Types::Real>(input->dtype, [&](auto tag) -> fooError_t {
    using T = decltype(tag);
    if constexpr (
        std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t> || std::is_same_v<T, int16_t> ||
        std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
      return launch(function<&Histogram<T>::run>("histogram_integers"), 1, &params, sizeof(params), stream);
    } else {
      return not_supported("a histogram of this dtype");
    }
  });
}
