// What every kernel of the emulated operator library uses on the host side: launching, error
// messages, and packing an elementwise iteration (fooIter) into a kernel's parameter block.
#include <cstdarg>
#include <cstdio>

#include "device.h"

namespace torch_foo::kernels {
namespace {

thread_local char last_message[1024];

} // namespace

fooError_t fail(fooError_t code, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(last_message, sizeof(last_message), format, args);
  va_end(args);
  return code;
}

fooError_t launch(fooFunction_t f, uint64_t blocks, const void* params, size_t size, fooStream_t stream) {
  constexpr uint64_t kMaxX = 0x7fffffff;
  if (f == nullptr) {
    return fail(fooErrorUnknown, "the kernel could not be registered with the runtime");
  }
  const fooDim3 grid{
      static_cast<unsigned>(std::min(blocks, kMaxX)), static_cast<unsigned>((blocks + kMaxX - 1) / kMaxX), 1};
  const fooError_t error = fooLaunchKernel(f, grid, fooDim3{1, 1, 1}, params, size, 0, stream);
  if (error != fooSuccess) {
    return fail(error, "%s", fooGetLastErrorMessage());
  }
  return fooSuccess;
}

fooError_t pack(const fooIter* it, int noperands, PackedIter* packed, int64_t* numel) {
  if (it == nullptr || it->noperands != noperands || it->ndim < 0) {
    return fail(fooErrorInvalidValue, "an iteration of %d operands was expected", noperands);
  }
  if (it->ndim > FOO_OP_MAX_DIMS) {
    return fail(fooErrorNotSupported, "%d iteration dimensions exceed FOO_OP_MAX_DIMS", it->ndim);
  }
  IterParams& p = packed->header();
  p.ndim = it->ndim;
  p.noperands = noperands;
  int64_t n = 1;
  for (int d = 0; d < it->ndim; ++d) {
    n *= it->sizes[d];
  }
  p.numel = n;
  p.grain = kGrain;
  *numel = n;
  auto* dims = reinterpret_cast<int64_t*>(packed->bytes + sizeof(IterParams));
  for (int d = 0; d < it->ndim; ++d) {
    dims[d] = it->sizes[d];
  }
  int64_t* strides = dims + it->ndim;
  for (int a = 0; a < noperands; ++a) {
    p.data[a] = static_cast<char*>(it->data[a]);
    p.values[a][0] = it->value[a][0];
    p.values[a][1] = it->value[a][1];
    for (int d = 0; d < it->ndim; ++d) {
      strides[d * noperands + a] = it->data[a] != nullptr ? it->strides[a][d] : 0;
    }
  }
  packed->size = sizeof(IterParams) + sizeof(int64_t) * static_cast<size_t>(it->ndim) * (1 + noperands);
  return fooSuccess;
}

void walk(const fooEmuKernelContext* ctx, const IterParams& p, RunFn run, const void* loop) {
  const int64_t begin = static_cast<int64_t>(block_index(ctx)) * p.grain;
  const int64_t end = std::min(begin + p.grain, p.numel);
  const int ndim = p.ndim;
  const int n_ops = p.noperands;
  char* base[kMaxOperands];
  for (int a = 0; a < n_ops; ++a) {
    base[a] = p.data[a] != nullptr ? device_address(ctx, p.data[a])
                                   : reinterpret_cast<char*>(const_cast<uint64_t*>(p.values[a]));
  }
  if (ndim == 0) {
    const int64_t zero[kMaxOperands] = {};
    run(loop, ctx, base, zero, end - begin, begin);
    return;
  }
  const int64_t* sizes = p.sizes();
  const int64_t* strides = p.strides();
  int64_t counter[kMaxDims] = {};
  int64_t rest = begin;
  for (int d = 0; d < ndim; ++d) {
    counter[d] = rest % sizes[d];
    rest /= sizes[d];
  }
  int64_t inner[kMaxOperands];
  for (int a = 0; a < n_ops; ++a) {
    inner[a] = p.data[a] != nullptr ? strides[a] : 0;
  }
  char* ptrs[kMaxOperands];
  for (int64_t i = begin; i < end;) {
    for (int a = 0; a < n_ops; ++a) {
      int64_t offset = 0;
      if (p.data[a] != nullptr) {
        for (int d = 0; d < ndim; ++d) {
          offset += counter[d] * strides[d * n_ops + a];
        }
      }
      ptrs[a] = base[a] + offset;
    }
    const int64_t n = std::min(sizes[0] - counter[0], end - i);
    run(loop, ctx, ptrs, inner, n, i);
    i += n;
    counter[0] += n;
    for (int d = 0; d + 1 < ndim && counter[d] == sizes[d]; ++d) {
      counter[d] = 0;
      ++counter[d + 1];
    }
  }
}

} // namespace torch_foo::kernels

extern "C" const char* fooOpGetLastErrorMessage(void) {
  return torch_foo::kernels::last_message;
}
