// Copies between the host and foo devices: _copy_from, _copy_from_and_resize and
// _local_scalar_dense (tensor.item()).
//
// tensor.to(...), tensor.copy_(...), printing, the CPU fallback and every host<->device transfer
// come through _copy_from. A copy of a dense tensor whose layout already matches is one runtime
// memcpy; anything else (another dtype, non-contiguous, broadcast, conjugate/negative views) is
// first brought into a matching dense layout on the side where that is cheap: dtype and layout
// conversion of host data on the host, of device data by the operator library's copy kernel.
//
// Ordering, as with CUDA: copies on one device run on its current stream. A transfer from or to
// pageable host memory is complete when copy_ returns, except one to the device with
// non_blocking=True: that one returns once the host memory may be reused (the runtime may stage the
// bytes) and the device's copy runs in the stream's order, as CUDA's does. With non_blocking=True
// and pinned host memory a copy only enqueues, so the host must synchronise before it reads the
// result (and the pinned block is kept from reuse until the copy ran). A copy between two devices runs on the
// source device's stream after the work already queued on the destination's stream, and the
// destination's stream continues after it; the host does not wait.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <vector>

#include "../core/DeviceAllocator.h"
#include "../core/HostAllocator.h"
#include "../core/Stream.h"
#include "Copy.h"
#include "OpLibrary.h"

namespace torch_foo {
namespace {

size_t nbytes(const at::Tensor& t) {
  return static_cast<size_t>(t.numel()) * t.element_size();
}

// True when the raw bytes of `a` and `b` can be copied as one block.
bool same_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.is_conj() == b.is_conj() && a.is_neg() == b.is_neg() &&
      a.is_non_overlapping_and_dense() && b.is_non_overlapping_and_dense() && a.strides() == b.strides();
}

// An uninitialised tensor shaped like `like`: same strides when `like` is dense, else contiguous;
// same conjugate/negative bits, so that its bytes mean what `like`'s bytes mean. A host tensor's
// memory comes from `host_allocator` (the CPU's allocator when null).
at::Tensor empty_matching(
    const at::Tensor& like, c10::ScalarType dtype, c10::Device device, c10::Allocator* host_allocator = nullptr) {
  const bool dense = like.is_non_overlapping_and_dense();
  at::Tensor t;
  if (device.is_cpu() && host_allocator != nullptr) {
    const c10::DispatchKeySet cpu(c10::DispatchKey::CPU);
    t = dense ? at::detail::empty_strided_generic(like.sizes(), like.strides(), host_allocator, cpu, dtype)
              : at::detail::empty_generic(like.sizes(), host_allocator, cpu, dtype, std::nullopt);
  } else if (device.is_cpu()) {
    t = dense ? at::detail::empty_strided_cpu(like.sizes(), like.strides(), dtype)
              : at::detail::empty_cpu(like.sizes(), dtype);
  } else {
    const c10::DeviceGuard guard(device);
    t = dense ? at::detail::empty_strided_generic(like.sizes(), like.strides(), device_allocator(), kDeviceKeys, dtype)
              : at::detail::empty_generic(like.sizes(), device_allocator(), kDeviceKeys, dtype, std::nullopt);
  }
  t._set_conj(like.is_conj());
  t._set_neg(like.is_neg());
  return t;
}

void memcpy_on_stream(void* dst, const void* src, size_t count, fooMemcpyKind kind, bool wait) {
  const fooStream_t stream = current_stream();
  FOO_CHECK(fooMemcpyAsync(dst, src, count, kind, stream));
  if (wait) {
    note_synchronization();
    FOO_CHECK(fooStreamSynchronize(stream));
    raise_deferred_error();
  }
}

// A transfer between pageable host memory and the device, complete when this returns, or with
// `non_blocking` (host to device only) once the host memory may be reused. One asynchronous copy on
// the current stream does it: with pageable memory the runtime returns once it has read the host
// memory (a driver may stage the bytes and copy them in the stream's order) or, to the host, once
// the copy is done; the synchronisation after it then finds the stream idle (or waits for the
// staged copy) and reports a failed kernel. On OpenCL that is one round trip to the device where a
// synchronisation and a copy on another queue were two when work was queued. Emulated device
// memory is host memory, so a transfer is a memcpy; large ones are split across PyTorch's intra-op
// threads, as a CPU-to-CPU copy is, to reach the same bandwidth. (A driver moves the data with DMA
// engines instead; one fooMemcpyAsync would do.)
void transfer(void* dst, const void* src, size_t count, fooMemcpyKind kind, bool non_blocking = false) {
  constexpr int64_t kChunk = int64_t{256} << 10;
  const fooStream_t stream = current_stream();
  if (static_cast<int64_t>(count) < 2 * kChunk || at::get_num_threads() == 1) {
    const bool wait = kind == fooMemcpyDeviceToHost || !non_blocking;
    if (wait) {
      note_synchronization();
    }
    FOO_CHECK(fooMemcpyAsync(dst, src, count, kind, stream));
    if (wait) { // a staged copy to the device may still run; and a failed kernel is reported here
      FOO_CHECK(fooStreamSynchronize(stream));
      raise_deferred_error();
    }
    return;
  }
  note_synchronization();
  FOO_CHECK(fooStreamSynchronize(stream)); // queued work may use the memory
  raise_deferred_error();
  auto* to = static_cast<char*>(dst);
  const auto* from = static_cast<const char*>(src);
  at::parallel_for(0, static_cast<int64_t>(count), kChunk, [&](int64_t begin, int64_t end) {
    FOO_CHECK(fooMemcpy(to + begin, from + begin, end - begin, kind));
  });
}

void copy_device_to_host(const at::Tensor& dst, const at::Tensor& src, bool non_blocking);
void copy_host_to_device(const at::Tensor& dst, const at::Tensor& src, bool non_blocking);

// dst = src for two tensors of one device and one shape, any dtypes, strides, conjugate and negative
// bits: one kernel of the operator library (fooOpCopy). What the library does not take (float8,
// complex32 and bit dtypes; anything it answers NotSupported) is converted on the host on the way
// through host memory.
void copy_on_device(const at::Tensor& dst, const at::Tensor& src) {
  const c10::DeviceGuard guard(dst.device());
  if (same_layout(dst, src)) {
    memcpy_on_stream(dst.data_ptr(), src.const_data_ptr(), nbytes(dst), fooMemcpyDeviceToDevice, false);
    return;
  }
  at::assert_no_internal_overlap(dst);
  at::assert_no_partial_overlap(dst, src);
  // Elements of one dtype with the same conjugate and negative bits move unchanged: any dtype of
  // their size describes them, so the library moves float8 and complex32 too (the way back from the
  // host below relies on it for a strided dst).
  const bool move =
      dst.scalar_type() == src.scalar_type() && dst.is_conj() == src.is_conj() && dst.is_neg() == src.is_neg();
  if (move || (op_dtype(dst.scalar_type()) && op_dtype(src.scalar_type()))) {
    // The iterator merges dimensions and orders them for the output; it copies nothing.
    const at::TensorIterator iter = at::TensorIteratorConfig()
                                        .set_check_mem_overlap(false)
                                        .check_all_same_dtype(false)
                                        .resize_outputs(false)
                                        .add_output(dst)
                                        .add_const_input(src)
                                        .build();
    OpIter op_iter(iter, {0, 1}, 2);
    if (move) {
      op_iter.set_dtype(0, word_dtype(dst.element_size()));
      op_iter.set_dtype(1, word_dtype(src.element_size()));
    }
    const int conjugate = src.is_conj() != dst.is_conj() ? 1 : 0;
    const int negate = src.is_neg() != dst.is_neg() ? 1 : 0;
    const fooError_t error = fooOpCopy(op_iter.get(), conjugate, negate, current_stream());
    if (error != fooErrorNotSupported) {
      FOO_OP_CHECK(error);
      return;
    }
  }
  // Not on the device: convert on the host, on the way through host memory.
  at::Tensor host = empty_matching(src, src.scalar_type(), at::kCPU);
  copy_device_to_host(host, src, false);
  copy_host_to_device(dst, host, false);
}

// An asynchronous copy with pinned host memory on the current stream of the current device.
void copy_pinned_async(void* dst, const void* src, size_t count, fooMemcpyKind kind, const at::Tensor& host) {
  FOO_CHECK(fooMemcpyAsync(dst, src, count, kind, current_stream()));
  record_host_use(host.storage().data_ptr(), current_stream_of_current_device());
}

void copy_host_to_device(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  if (!dst.is_non_overlapping_and_dense()) {
    const at::Tensor staging = empty_matching(dst, dst.scalar_type(), dst.device());
    copy_host_to_device(staging, src, non_blocking);
    copy_on_device(dst, staging);
    return;
  }
  at::Tensor host = src;
  const bool direct = same_layout(dst, src);
  if (!direct) {
    host = empty_matching(dst, dst.scalar_type(), at::kCPU);
    host.copy_(src);
  }
  const c10::DeviceGuard guard(dst.device());
  if (non_blocking && direct && is_pinned(host.const_data_ptr())) {
    copy_pinned_async(dst.data_ptr(), host.const_data_ptr(), nbytes(dst), fooMemcpyHostToDevice, host);
    return;
  }
  transfer(dst.data_ptr(), host.const_data_ptr(), nbytes(dst), fooMemcpyHostToDevice, non_blocking);
}

void copy_device_to_host(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  at::Tensor dense = src;
  if (!src.is_non_overlapping_and_dense()) {
    dense = empty_matching(src, src.scalar_type(), src.device());
    copy_on_device(dense, src);
  }
  const bool direct = same_layout(dst, dense);
  const at::Tensor host = direct ? dst : empty_matching(dense, dense.scalar_type(), at::kCPU);
  {
    const c10::DeviceGuard guard(dense.device());
    if (non_blocking && direct && is_pinned(host.const_data_ptr())) {
      copy_pinned_async(host.data_ptr(), dense.const_data_ptr(), nbytes(dense), fooMemcpyDeviceToHost, host);
      return;
    }
    transfer(host.data_ptr(), dense.const_data_ptr(), nbytes(dense), fooMemcpyDeviceToHost);
  }
  if (!direct) {
    dst.copy_(host);
  }
}

void copy_between_devices(const at::Tensor& dst, const at::Tensor& src) {
  // Convert on the source device into dst's dtype and layout, then move the bytes.
  at::Tensor staged = src;
  if (!same_layout(dst, src)) {
    staged = empty_matching(dst, dst.scalar_type(), src.device());
    copy_on_device(staged, src);
  }
  at::Tensor target = dst;
  if (!dst.is_non_overlapping_and_dense()) {
    target = empty_matching(dst, dst.scalar_type(), dst.device());
  }
  const c10::Stream src_stream = current_stream(src.device().index());
  const c10::Stream dst_stream = current_stream(dst.device().index());
  c10::Event target_ready(c10::DeviceType::PrivateUse1); // work queued on the target is done
  target_ready.record(dst_stream);
  target_ready.block(src_stream);
  {
    const c10::DeviceGuard guard(src.device());
    FOO_CHECK(fooMemcpyAsync(
        target.data_ptr(),
        staged.const_data_ptr(),
        nbytes(target),
        fooMemcpyDeviceToDevice,
        native_stream(src_stream)));
  }
  c10::Event copied(c10::DeviceType::PrivateUse1);
  copied.record(src_stream);
  copied.block(dst_stream);
  if (!target.is_same(dst)) {
    copy_on_device(dst, target);
  }
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "copy_: both tensors must be defined");
  if (dst.numel() == 0 || self.is_same(dst)) {
    return dst;
  }
  const at::Tensor src = self.sizes() == dst.sizes() ? self : self.expand(dst.sizes());
  const bool src_device = src.is_privateuseone();
  const bool dst_device = dst.is_privateuseone();
  TORCH_CHECK(
      (src_device || src.is_cpu()) && (dst_device || dst.is_cpu()),
      "foo can copy to and from the CPU only, not between ",
      src.device(),
      " and ",
      dst.device());
  if (src_device && dst_device) {
    if (src.device() == dst.device()) {
      // As the CPU's copy_, whose iterator checks the tensors as given: broadcast, the source may
      // look like the destination (x.unsqueeze(0).copy_(x): same memory, same strides), and the
      // copy below would run where the CPU refuses a partial overlap (found by tests/test_fuzz.py).
      at::assert_no_internal_overlap(dst);
      at::assert_no_partial_overlap(dst, self);
      copy_on_device(dst, src);
    } else {
      copy_between_devices(dst, src);
    }
  } else if (dst_device) {
    copy_host_to_device(dst, src, non_blocking);
  } else {
    copy_device_to_host(dst, src, non_blocking);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    // Resized by the kernel that made `self` (the CPU fallback's out= arguments): with its layout
    // too, which the CPU's kernels take from their inputs (x.t().abs() is transposed; found by
    // tests/test_fuzz.py). A dense layout fits the storage the resize made for a contiguous one.
    dst.resize_(self.sizes());
    if (self.is_non_overlapping_and_dense() && dst.strides() != self.strides()) {
      dst.set_(dst.storage(), dst.storage_offset(), self.sizes(), self.strides());
    }
  }
  return copy_from(self, dst, false);
}

at::Scalar _local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  at::Tensor host = at::detail::empty_cpu({}, self.scalar_type());
  host._set_conj(self.is_conj());
  host._set_neg(self.is_neg());
  const c10::DeviceGuard guard(self.device());
  memcpy_on_stream(host.data_ptr(), self.const_data_ptr(), self.element_size(), fooMemcpyDeviceToHost, true);
  return host.item();
}

// Host memory for host_copy(), the CPU fallback's copies of device arguments, which live for one
// operator. The CPU's allocator takes each block from glibc's posix_memalign, which (glibc 2.36, measured)
// bypasses the thread cache, splitting a chunk around every aligned block and freeing the pieces (about
// 1,000 instructions an allocation and free, a twentieth of a small fallback call). Blocks up to 64
// KiB are kept for the next call instead: a few of each power-of-two size, in slots taken and filled
// with one atomic exchange, so that a tensor freed on any thread, or a fork at any moment, finds no
// lock. Larger tensors take the CPU's allocator; a block given back to full slots goes back to glibc.
// Being freed on return, these blocks do not reach the profiler's CPU memory records.
class StagingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const size_t cls = size_class(nbytes);
    if (cls == kClasses) {
      return c10::GetCPUAllocator()->allocate(nbytes);
    }
    void* block = nullptr;
    for (auto& slot : slots_[cls]) {
      if (slot.load(std::memory_order_relaxed) != nullptr) {
        block = slot.exchange(nullptr, std::memory_order_acquire);
        if (block != nullptr) {
          break;
        }
      }
    }
    if (block == nullptr) {
      const size_t bytes = kHeader + (kSmallest << cls); // a multiple of 64, as aligned_alloc requires
      block = std::aligned_alloc(kHeader, bytes);
      TORCH_CHECK_WITH(
          OutOfMemoryError, block != nullptr, "the host refused ", bytes, " bytes for a copy of a device tensor");
    }
    static_cast<Header*>(block)->cls = cls;
    return {static_cast<char*>(block) + kHeader, block, &give_back, c10::Device(c10::kCPU)};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  static StagingAllocator& instance() {
    static auto* allocator = new StagingAllocator(); // leaked: tensors may be freed during exit
    return *allocator;
  }

 private:
  static constexpr size_t kSmallest = 64;
  static constexpr size_t kClasses = 11; // 64 B to 64 KiB
  static constexpr size_t kSlots = 4;
  static constexpr size_t kHeader = 64; // keeps the data 64-byte aligned
  struct Header {
    size_t cls;
  };

  static size_t size_class(size_t nbytes) {
    size_t cls = 0;
    while (cls < kClasses && (kSmallest << cls) < nbytes) {
      ++cls;
    }
    return cls;
  }

  static void give_back(void* block) {
    auto& slots = instance().slots_[static_cast<Header*>(block)->cls];
    for (auto& slot : slots) {
      void* empty = nullptr;
      if (slot.compare_exchange_strong(empty, block, std::memory_order_release, std::memory_order_relaxed)) {
        return;
      }
    }
    std::free(block);
  }

  std::array<std::array<std::atomic<void*>, kSlots>, kClasses> slots_{};
};

} // namespace

at::Tensor host_copy(const at::Tensor& src) {
  at::Tensor host = empty_matching(src, src.scalar_type(), at::kCPU, &StagingAllocator::instance());
  if (src.numel() > 0) {
    copy_device_to_host(host, src, false);
  }
  return host;
}

at::Tensor device_copy(const at::Tensor& src, c10::Device device) {
  at::Tensor dst = empty_matching(src, src.scalar_type(), device);
  if (src.numel() > 0) {
    copy_host_to_device(dst, src, /*non_blocking=*/true);
  }
  return dst;
}

void copy_into_device(const at::Tensor& dst, const at::Tensor& src) {
  TORCH_INTERNAL_ASSERT(dst.sizes() == src.sizes() && dst.is_privateuseone() && src.is_cpu());
  if (dst.numel() > 0 && !src.is_same(dst)) {
    copy_host_to_device(dst, src, /*non_blocking=*/true);
  }
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", _local_scalar_dense);
}

// These kernels honour the conjugate and negative bits themselves (see same_layout). Without the
// fallthroughs, PyTorch would first materialise such views by cloning them, and clone copies
// through _copy_from again: infinite recursion.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
  m.impl("_local_scalar_dense", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
  m.impl("_local_scalar_dense", torch::CppFunction::makeFallthrough());
}

} // namespace torch_foo
