// Entry points: modules, kernel launches, host functions and vendor-library work. The rules a port
// keeps: argument checks (non-empty geometry, typed arguments as runtime.h describes them, Value
// bytes that fit FOO_MAX_PARAM_BYTES, module images of a known format), the fork state, and a
// NULL stream is the default stream of the current device. fooLaunchKernel is the typed launch
// of its parameter block as one Value (and its shared memory as one Local): both reach the device
// through driver::launch_kernel().
#include <cstring>
#include <type_traits>

#include "driver.h"
#include "internal.h"
#include "tracing_records.h"

using namespace torch_foo;
using namespace torch_foo::runtime;

extern "C" {

fooError_t fooModuleLoad(fooModule_t* module, const char* path) {
  if (module == nullptr || path == nullptr) {
    return result(null_argument(module == nullptr ? "module" : "path"));
  }
  if (forked()) {
    return result(forked_child());
  }
  ensure_initialized();
  return result(driver::module_load(path, module));
}

fooError_t fooModuleLoadData(
    fooModule_t* module, const void* image, size_t size, fooModuleFormat format, const char* options) {
  if (module == nullptr || image == nullptr) {
    return result(null_argument(module == nullptr ? "module" : "image"));
  }
  if (size == 0) {
    return result(fail(fooErrorInvalidValue, "a module image of 0 bytes"));
  }
  if (format != fooModuleSource && format != fooModuleBinary) {
    return result(fail(fooErrorInvalidValue, "%d is not a fooModuleFormat", static_cast<int>(format)));
  }
  if (forked()) {
    return result(forked_child());
  }
  const tracing::ApiScope trace("fooModuleLoadData");
  ensure_initialized();
  return result(driver::module_load_data(image, size, format, options, module));
}

fooError_t fooModuleGetFunction(fooFunction_t* function, fooModule_t module, const char* name) {
  if (function == nullptr || name == nullptr) {
    return result(null_argument(function == nullptr ? "function" : "name"));
  }
  if (forked()) {
    return result(forked_child());
  }
  return result(driver::module_get_function(module, name, function));
}

fooError_t fooModuleUnload(fooModule_t module) {
  if (forked()) {
    return result(forked_child());
  }
  return result(driver::module_unload(module));
}

fooError_t fooFuncGetName(const char** name, fooFunction_t function) {
  if (name == nullptr) {
    return result(null_argument("name"));
  }
  return result(driver::function_name(function, name));
}

namespace {

bool empty_geometry(fooDim3 grid, fooDim3 block) {
  return grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0;
}

fooError_t empty_launch() {
  return fail(fooErrorInvalidValue, "a launch needs at least one block of at least one thread");
}

fooError_t too_many_param_bytes(size_t bytes) {
  const int most = FOO_MAX_PARAM_BYTES;
  return fail(fooErrorInvalidValue, "%zu bytes of Value arguments exceed the %d a launch takes", bytes, most);
}

// Argument `i` of a typed launch, as runtime.h describes the kinds; adds a Value's bytes to *value_bytes.
fooError_t check_argument(const fooKernelArg& arg, unsigned int i, size_t* value_bytes) {
  // The kind is read as the integer it is stored as: a caller may pass any int, and loading one
  // outside the enumeration's range through the enum type is undefined (UBSan reports it).
  std::underlying_type_t<fooKernelArgKind> kind;
  std::memcpy(&kind, &arg.kind, sizeof(kind));
  switch (kind) {
    case fooKernelArgValue:
      if (arg.pointer == nullptr || arg.size == 0) {
        return fail(fooErrorInvalidValue, "argument %u: a Value needs a pointer and a size > 0", i);
      }
      *value_bytes += arg.size;
      return fooSuccess;
    case fooKernelArgBuffer:
    case fooKernelArgErrorFlag:
      if (arg.pointer == nullptr || arg.size != 0) {
        return fail(
            fooErrorInvalidValue,
            "argument %u: a %s needs a pointer and size 0",
            i,
            arg.kind == fooKernelArgBuffer ? "Buffer" : "ErrorFlag");
      }
      return fooSuccess;
    case fooKernelArgLocal:
      if (arg.size == 0) {
        return fail(fooErrorInvalidValue, "argument %u: a Local needs a size > 0", i);
      }
      return fooSuccess;
  }
  return fail(fooErrorInvalidValue, "argument %u: %d is not a fooKernelArgKind", i, static_cast<int>(kind));
}

} // namespace

fooError_t fooLaunchKernelArgs(
    fooFunction_t function,
    fooDim3 gridDim,
    fooDim3 blockDim,
    const fooKernelArg* args,
    unsigned int nargs,
    fooStream_t stream) {
  if (function == nullptr) {
    return result(null_argument("function"));
  }
  if (args == nullptr && nargs > 0) {
    return result(null_argument("args"));
  }
  if (nargs > FOO_MAX_KERNEL_ARGS) {
    const int most = FOO_MAX_KERNEL_ARGS;
    return result(fail(fooErrorInvalidValue, "%u arguments exceed the %d a launch takes", nargs, most));
  }
  size_t value_bytes = 0;
  for (unsigned int i = 0; i < nargs; ++i) {
    if (const auto err = check_argument(args[i], i, &value_bytes); err != fooSuccess) {
      return result(err);
    }
  }
  if (value_bytes > FOO_MAX_PARAM_BYTES) {
    return result(too_many_param_bytes(value_bytes));
  }
  if (empty_geometry(gridDim, blockDim)) {
    return result(empty_launch());
  }
  if (forked()) {
    return result(forked_child());
  }
  const tracing::ApiScope trace("fooLaunchKernelArgs");
  if (const auto err = resolve_stream(&stream); err != fooSuccess) {
    return result(err);
  }
  return result(driver::launch_kernel(function, gridDim, blockDim, args, nargs, stream));
}

fooError_t fooLaunchKernel(
    fooFunction_t function,
    fooDim3 gridDim,
    fooDim3 blockDim,
    const void* params,
    size_t paramsSize,
    size_t sharedMemBytes,
    fooStream_t stream) {
  if (function == nullptr) {
    return result(null_argument("function"));
  }
  if (params == nullptr && paramsSize > 0) {
    return result(null_argument("params"));
  }
  if (paramsSize > FOO_MAX_PARAM_BYTES) {
    return result(too_many_param_bytes(paramsSize));
  }
  if (empty_geometry(gridDim, blockDim)) {
    return result(empty_launch());
  }
  if (forked()) {
    return result(forked_child());
  }
  const tracing::ApiScope trace("fooLaunchKernel");
  if (const auto err = resolve_stream(&stream); err != fooSuccess) {
    return result(err);
  }
  // The typed launch of the block as one Value (none if empty), then the shared memory as one Local.
  fooKernelArg args[2];
  unsigned int nargs = 0;
  if (paramsSize > 0) {
    args[nargs].kind = fooKernelArgValue;
    args[nargs].pointer = params;
    args[nargs++].size = paramsSize;
  }
  if (sharedMemBytes > 0) {
    args[nargs].kind = fooKernelArgLocal;
    args[nargs].pointer = nullptr;
    args[nargs++].size = sharedMemBytes;
  }
  return result(driver::launch_kernel(function, gridDim, blockDim, args, nargs, stream));
}

fooError_t fooLaunchHostFunc(fooStream_t stream, fooHostFn_t fn, void* userData) {
  if (fn == nullptr) {
    return result(null_argument("fn"));
  }
  if (forked()) {
    return result(forked_child());
  }
  const tracing::ApiScope trace("fooLaunchHostFunc");
  if (const auto err = resolve_stream(&stream); err != fooSuccess) {
    return result(err);
  }
  return result(driver::launch_host_func(stream, fn, userData));
}

fooError_t fooLaunchNative(
    fooStream_t stream, const char* name, fooNativeFn_t fn, const void* arguments, size_t argumentsSize) {
  if (fn == nullptr || name == nullptr) {
    return result(null_argument(fn == nullptr ? "fn" : "name"));
  }
  if (arguments == nullptr && argumentsSize > 0) {
    return result(null_argument("args"));
  }
  if (forked()) {
    return result(forked_child());
  }
  const tracing::ApiScope trace("fooLaunchNative");
  if (const auto err = resolve_stream(&stream); err != fooSuccess) {
    return result(err);
  }
  return result(driver::launch_native(stream, name, fn, arguments, argumentsSize));
}

} // extern "C"
