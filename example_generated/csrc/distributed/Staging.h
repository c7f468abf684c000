// Staging of the fooccl backend (Backend.cpp): checked tensors (Arguments.h) as the buffers a
// Communicator reads and writes. Complex numbers travel as pairs of reals; the list-of-tensor
// variants of a collective go through one flat buffer, copied on the collective's stream. Only
// headers: Backend.cpp is its one user.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/StreamGuard.h>

#include <cstddef>
#include <vector>

namespace torch_foo::distributed {

// A tensor as the communicator sees it: complex numbers as pairs of reals.
struct Flat {
  void* data;
  size_t count;
  c10::ScalarType dtype;
};

inline Flat flat(const at::Tensor& t) {
  if (t.is_complex()) {
    return {t.data_ptr(), static_cast<size_t>(t.numel()) * 2, c10::toRealValueType(t.scalar_type())};
  }
  return {t.data_ptr(), static_cast<size_t>(t.numel()), t.scalar_type()};
}

// Runs `fn` with `stream` current (device work it launches goes there), returning its value.
template <typename Fn>
auto on_stream(c10::Stream stream, Fn&& fn) {
  const c10::StreamGuard guard(stream);
  return fn();
}

// Flattens `tensors` into one new tensor on the current stream (list-of-tensor variants).
inline at::Tensor concatenated(const std::vector<at::Tensor>& tensors) {
  int64_t total = 0;
  for (const at::Tensor& t : tensors) {
    total += t.numel();
  }
  at::Tensor out = at::empty({total}, tensors.front().options());
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    out.narrow(0, offset, t.numel()).view(t.sizes()).copy_(t);
    offset += t.numel();
  }
  return out;
}

// Copies consecutive blocks of `flat_result` into `tensors`, on the current stream.
inline void split_into(const at::Tensor& flat_result, const std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    at::Tensor(t).copy_(flat_result.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

} // namespace torch_foo::distributed
