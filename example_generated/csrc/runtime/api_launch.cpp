// Entry points: modules, kernel launches and host functions. The rules a port keeps: argument
// checks (non-empty geometry, a parameter block that fits FOO_MAX_PARAM_BYTES), the fork state,
// and a NULL stream is the default stream of the current device.
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
    return result(fail(
        fooErrorInvalidValue,
        "a parameter block of %zu bytes exceeds FOO_MAX_PARAM_BYTES (%d)",
        paramsSize,
        FOO_MAX_PARAM_BYTES));
  }
  if (gridDim.x == 0 || gridDim.y == 0 || gridDim.z == 0 || blockDim.x == 0 || blockDim.y == 0 || blockDim.z == 0) {
    return result(fail(fooErrorInvalidValue, "a launch needs at least one block of at least one thread"));
  }
  if (forked()) {
    return result(forked_child());
  }
  const tracing::ApiScope trace("fooLaunchKernel");
  if (const auto err = resolve_stream(&stream); err != fooSuccess) {
    return result(err);
  }
  return result(driver::launch_kernel(function, gridDim, blockDim, params, paramsSize, sharedMemBytes, stream));
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

} // extern "C"
