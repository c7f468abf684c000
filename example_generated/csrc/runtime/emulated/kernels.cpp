// Kernels on the emulated foo device: kernel handles, modules and how a grid runs.
//
// A kernel is a host function (emulation.h). fooLaunchKernel copies the parameter block into the
// task (inline when small), and the stream's worker runs the grid: one block inline, several on the
// worker's OpenMP team, the way a device spreads blocks over its compute units. Each block gets a
// context with its coordinates, the address translation of strict memory mode and a way to fail.
// Modules are shared libraries (dlopen); their kernels are symbols of the fooEmuKernel type.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../internal.h"
#include "emulated.h"
#include "handles.h"

namespace torch_foo::emulated {
struct Function {
  fooFunction_t handle = nullptr; // what the runtime's users name it by (handles.h)
  std::string name;
  fooEmuKernel kernel = nullptr;
};

namespace {

struct Module {
  void* library = nullptr;
  std::mutex mutex; // guards functions
  std::map<std::string, Function*> functions;
};

Function* function_from_handle(fooFunction_t handle) {
  return find_handle<Function>(HandleKind::Function, handle);
}

Module* module_from_handle(fooModule_t handle) {
  return find_handle<Module>(HandleKind::Module, handle);
}

// The launch a block belongs to, for fail(): set on each thread that runs blocks.
struct LaunchState {
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::string message;
};

thread_local LaunchState* current_launch = nullptr;

void kernel_fail(const char* message) {
  LaunchState* launch = current_launch;
  if (launch == nullptr) {
    return; // not inside a kernel
  }
  std::lock_guard<std::mutex> lock(launch->mutex);
  if (!launch->failed.exchange(true)) {
    launch->message = message != nullptr ? message : "(no message)";
  }
}

void* kernel_address(const void* ptr) {
  return runtime_address(ptr);
}

// Scratch memory standing in for a block's shared memory: one buffer per host thread.
void* shared_memory(size_t bytes) {
  thread_local std::unique_ptr<unsigned char[]> buffer(new unsigned char[kSharedMemPerBlock]);
  return bytes > 0 ? buffer.get() : nullptr;
}

void run_block(const Task& task, const fooEmuKernelContext& base, uint64_t index) {
  fooEmuKernelContext ctx = base;
  ctx.blockIdx.x = static_cast<unsigned>(index % task.grid.x);
  ctx.blockIdx.y = static_cast<unsigned>(index / task.grid.x % task.grid.y);
  ctx.blockIdx.z = static_cast<unsigned>(index / (static_cast<uint64_t>(task.grid.x) * task.grid.y));
  ctx.sharedMem = shared_memory(task.shared_bytes);
  task.function->kernel(&ctx, task.params_data());
}

} // namespace

bool run_kernel(const Task& task, std::string* message) {
  if (task.fault != 0) { // fault injection: the launch fails without running the kernel
    *message = "kernel " + task.function->name + ": " + fault_message(Fault::Kernel, task.fault);
    return false;
  }
  LaunchState launch;
  fooEmuKernelContext base{};
  base.gridDim = task.grid;
  base.blockDim = task.block;
  base.address = &kernel_address;
  base.fail = &kernel_fail;
  const uint64_t blocks = static_cast<uint64_t>(task.grid.x) * task.grid.y * task.grid.z;
  const auto run_blocks = [&](uint64_t begin, uint64_t end) {
    LaunchState* outer = current_launch;
    current_launch = &launch;
    for (uint64_t b = begin; b < end; ++b) {
      run_block(task, base, b);
    }
    current_launch = outer;
  };
#ifdef _OPENMP
  if (blocks > 1 && omp_get_max_threads() > 1) {
    Stream* stream = worker_stream();
#pragma omp parallel
    {
      const WorkerScope as_worker(stream); // team threads count as the stream's worker too
      const auto threads = static_cast<uint64_t>(omp_get_num_threads());
      const auto rank = static_cast<uint64_t>(omp_get_thread_num());
      run_blocks(blocks * rank / threads, blocks * (rank + 1) / threads);
    }
  } else {
    run_blocks(0, blocks);
  }
#else
  run_blocks(0, blocks);
#endif
  if (launch.failed.load()) {
    *message = "kernel " + task.function->name + ": " + launch.message;
    return false;
  }
  return true;
}

const char* kernel_name(const Function* function) {
  return function->name.c_str();
}

void discard_params(Task& task) {
  if (task.params_heap != nullptr) {
    ::operator delete[](task.params_heap, std::align_val_t{16});
    task.params_heap = nullptr;
  }
}

} // namespace torch_foo::emulated

namespace torch_foo::driver {

using namespace emulated;

namespace {

// Every module loaded, with its kernels' handles, as a device's context owns its modules: one the
// program never unloads is still the runtime's at exit, not lost (LeakSanitizer checks that at
// exit). An unloaded one stays allocated, though its handles name nothing any more: a graph recorded
// before the unload still points at its kernels. Never destroyed: static destruction runs before that check.
void keep(Module* m) {
  static std::mutex mutex;
  static auto* modules = new std::vector<Module*>();
  std::lock_guard<std::mutex> lock(mutex);
  modules->push_back(m);
}

} // namespace

fooError_t module_load(const char* path, fooModule_t* module) {
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    return runtime::fail(fooErrorNotFound, "cannot load module %s: %s", path, reason != nullptr ? reason : "");
  }
  auto* m = new Module();
  m->library = library;
  keep(m);
  *module = add_handle<fooModule_t>(HandleKind::Module, m);
  return fooSuccess;
}

fooError_t module_get_function(fooModule_t module, const char* name, fooFunction_t* function) {
  Module* m = module_from_handle(module);
  if (m == nullptr) {
    return runtime::fail(fooErrorInvalidResourceHandle, "unknown module %p", static_cast<void*>(module));
  }
  std::lock_guard<std::mutex> lock(m->mutex);
  auto it = m->functions.find(name);
  if (it == m->functions.end()) {
    void* symbol = dlsym(m->library, name);
    if (symbol == nullptr) {
      return runtime::fail(fooErrorNotFound, "the module has no kernel named %s", name);
    }
    auto* f = new Function();
    f->name = name;
    f->kernel = reinterpret_cast<fooEmuKernel>(symbol);
    f->handle = add_handle<fooFunction_t>(HandleKind::Function, f);
    it = m->functions.emplace(name, f).first;
  }
  *function = it->second->handle;
  return fooSuccess;
}

fooError_t module_unload(fooModule_t module) {
  Module* m = module_from_handle(module);
  if (m == nullptr) {
    return runtime::fail(fooErrorInvalidResourceHandle, "unknown module %p", static_cast<void*>(module));
  }
  if (worker_stream() != nullptr) {
    return runtime::fail(fooErrorNotPermitted, "a module cannot be unloaded by work running on a stream");
  }
  wait_all_devices(); // queued launches may still run its kernels
  if (remove_handle<Module>(HandleKind::Module, module) == nullptr) {
    return runtime::fail(fooErrorInvalidResourceHandle, "unknown module %p", static_cast<void*>(module));
  }
  {
    std::lock_guard<std::mutex> lock(m->mutex);
    for (auto& entry : m->functions) {
      remove_handle<Function>(HandleKind::Function, entry.second->handle);
    }
  }
  dlclose(m->library);
  return fooSuccess;
}

fooError_t function_name(fooFunction_t function, const char** name) {
  Function* f = function_from_handle(function);
  if (f == nullptr) {
    return runtime::fail(fooErrorInvalidResourceHandle, "unknown kernel %p", static_cast<void*>(function));
  }
  *name = f->name.c_str();
  return fooSuccess;
}

fooError_t launch_kernel(
    fooFunction_t function,
    fooDim3 grid,
    fooDim3 block,
    const void* params,
    size_t params_size,
    size_t shared_bytes,
    fooStream_t stream) {
  Function* f = function_from_handle(function);
  if (f == nullptr) {
    return runtime::fail(fooErrorInvalidResourceHandle, "unknown kernel %p", static_cast<void*>(function));
  }
  Stream* s = stream_from_handle(stream);
  if (s == nullptr) {
    return runtime::fail(fooErrorInvalidResourceHandle, "unknown stream %p", static_cast<void*>(stream));
  }
  if (const auto err = capture_check(s); err != fooSuccess) {
    return err;
  }
  if (static_cast<uint64_t>(block.x) * block.y * block.z > kMaxThreadsPerBlock) {
    return runtime::fail(
        fooErrorInvalidValue,
        "kernel %s: a block of %ux%ux%u threads exceeds %d",
        f->name.c_str(),
        block.x,
        block.y,
        block.z,
        kMaxThreadsPerBlock);
  }
  if (shared_bytes > kSharedMemPerBlock) {
    return runtime::fail(
        fooErrorInvalidValue,
        "kernel %s: %zu bytes of shared memory exceed %zu",
        f->name.c_str(),
        shared_bytes,
        kSharedMemPerBlock);
  }
  Task task;
  task.kind = Task::Kind::Kernel;
  task.function = f;
  task.grid = grid;
  task.block = block;
  task.shared_bytes = static_cast<uint32_t>(shared_bytes);
  task.params_size = static_cast<uint32_t>(params_size);
  task.fault = injected_fault(Fault::Kernel); // fault injection
  if (params_size > kInlineParams) {
    task.params_heap = static_cast<unsigned char*>(::operator new[](params_size, std::align_val_t{16}));
    std::memcpy(task.params_heap, params, params_size);
  } else if (params_size > 0) {
    std::memcpy(task.params, params, params_size);
  }
  enqueue(s, std::move(task), trace_tag(s, fooActivityKindKernel, f->name.c_str()));
  return fooSuccess;
}

} // namespace torch_foo::driver

extern "C" fooError_t fooEmuFunctionCreate(fooFunction_t* f, const char* name, fooEmuKernel entry) {
  using namespace torch_foo;
  if (f == nullptr || name == nullptr || entry == nullptr) {
    return runtime::result(
        runtime::fail(fooErrorInvalidValue, "fooEmuFunctionCreate needs a handle, a name and a kernel"));
  }
  auto* function = new emulated::Function();
  function->name = name;
  function->kernel = entry;
  function->handle = emulated::add_handle<fooFunction_t>(emulated::HandleKind::Function, function);
  *f = function->handle;
  return runtime::result(fooSuccess);
}
