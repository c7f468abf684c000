// Gradient-scaling kernels of the emulated device (torch.amp.GradScaler): they read the scale and
// the flag where they live, in device memory, so the host never waits for the device.
#include <atomic>
#include <cmath>

#include "../native.h"
#include "device.h"

namespace torch_foo::kernels {
namespace {

template <typename T>
struct UnscaleLoop {
  float* found_inf;
  const float* inv_scale;
  void run(const fooEmuKernelContext* ctx, char** data, const int64_t* strides, int64_t n, int64_t) const;
};

template <typename T>
void UnscaleLoop<T>::run(
    const fooEmuKernelContext* ctx, char** data, const int64_t* strides, int64_t n, int64_t) const {
  using M = opmath_t<T>;
  const auto factor = static_cast<M>(*device_address(ctx, inv_scale));
  bool non_finite = false;
  for (int64_t i = 0; i < n; ++i) {
    auto* x = reinterpret_cast<T*>(data[0] + i * strides[0]);
    const auto value = static_cast<M>(*x);
    non_finite |= !std::isfinite(value);
    *x = static_cast<T>(factor == M(1) ? value : value * factor);
  }
  if (non_finite) {
    std::atomic_ref<float>(*device_address(ctx, found_inf)).store(1.0f, std::memory_order_relaxed);
  }
}

struct UpdateScaleParams {
  float* scale;
  int32_t* tracker;
  const float* found_inf;
  float growth;
  float backoff;
  int64_t interval;
};

void update_scale_kernel(const fooEmuKernelContext* ctx, const void* raw) {
  const auto& p = *static_cast<const UpdateScaleParams*>(raw);
  float* scale = device_address(ctx, p.scale);
  int32_t* tracker = device_address(ctx, p.tracker);
  const float found = *device_address(ctx, p.found_inf);
  if (found != 0.0f) {
    *scale *= p.backoff;
    *tracker = 0;
    return;
  }
  const int64_t successful = *tracker + 1;
  if (successful == p.interval) {
    const float grown = *scale * p.growth;
    if (std::isfinite(grown)) {
      *scale = grown;
    }
    *tracker = 0;
  } else {
    *tracker = static_cast<int32_t>(successful);
  }
}

} // namespace
} // namespace torch_foo::kernels

using namespace torch_foo::kernels;

extern "C" {

fooError_t fooOpUnscale(const fooIter* it, float* found, const float* inv, fooStream_t stream) {
  if (it == nullptr || it->noperands != 1 || found == nullptr || inv == nullptr) {
    return invalid_argument(__func__);
  }
  return dispatch<Types::Floating>(it->dtype[0], [&](auto tag) {
    using T = decltype(tag);
    return launch_elementwise("unscale", it, 1, UnscaleLoop<T>{found, inv}, stream);
  });
}

fooError_t fooOpUpdateScale(
    float* scale,
    int32_t* tracker,
    const float* found_inf,
    float growth,
    float backoff,
    int64_t interval,
    fooStream_t stream) {
  if (scale == nullptr || tracker == nullptr || found_inf == nullptr) {
    return invalid_argument(__func__);
  }
  const UpdateScaleParams params{scale, tracker, found_inf, growth, backoff, interval};
  return launch(function<&update_scale_kernel>("update_scale"), 1, &params, sizeof(params), stream);
}

} // extern "C"
