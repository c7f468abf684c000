// Kernels on the emulated foo device: kernel handles, modules and how a grid runs.
//
// A kernel is a host function (emulation.h). A launch lays its typed arguments out as the kernel's
// parameter block (emulation.h: a slot per argument) in the task (inline when small), and the
// stream's worker runs the grid: one block inline, several on the worker's OpenMP team, the way a
// device spreads blocks over its compute units. Each block gets a context with its coordinates, its
// shared memory, the address translation of strict memory mode and a way to fail (which raises an
// ErrorFlag). Modules are shared libraries (dlopen), loaded from a file, from an image in memory or
// built from C++ source by the host compiler; their kernels are symbols of the fooEmuKernel type.
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>
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

void store_params(Task& task, const void* data, size_t size) {
  task.params_size = static_cast<uint32_t>(size);
  if (size > kInlineParams) {
    task.params_heap = static_cast<unsigned char*>(::operator new[](size, std::align_val_t{16}));
    std::memcpy(task.params_heap, data, size);
  } else if (size > 0) {
    std::memcpy(task.params, data, size);
  }
}

const char* intern(const char* text) {
  // Launches repeat their messages and names: the thread's last answer usually is this one.
  thread_local const char* last = nullptr;
  if (last != nullptr && std::strcmp(last, text) == 0) {
    return last;
  }
  static std::mutex mutex;
  static auto* texts = new std::unordered_set<std::string>(); // never destroyed: tasks point into it
  std::lock_guard<std::mutex> lock(mutex);
  last = texts->emplace(text).first->c_str();
  return last;
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

fooError_t adopt_library(void* library, fooModule_t* module) {
  auto* m = new Module();
  m->library = library;
  keep(m);
  *module = add_handle<fooModule_t>(HandleKind::Module, m);
  return fooSuccess;
}

fooError_t module_load(const char* path, fooModule_t* module) {
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    return runtime::fail(fooErrorNotFound, "cannot load module %s: %s", path, reason != nullptr ? reason : "");
  }
  return adopt_library(library, module);
}

namespace {

// A directory of its own under $TMPDIR (or /tmp) for building one module; removed with its files.
constexpr const char* kModuleFileName = "foo-module";

class BuildDirectory {
 public:
  BuildDirectory() = default;
  ~BuildDirectory() {
    for (const std::string& file : files_) {
      unlink(file.c_str());
    }
    if (!path_.empty()) {
      rmdir(path_.c_str());
    }
  }
  BuildDirectory(const BuildDirectory&) = delete;
  BuildDirectory& operator=(const BuildDirectory&) = delete;

  // Creates the directory (once); false if it cannot.
  bool create() {
    if (path_.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      std::string pattern =
          std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") + "/" + kModuleFileName + "-XXXXXX";
      if (mkdtemp(pattern.data()) != nullptr) {
        path_ = pattern;
      }
    }
    return !path_.empty();
  }
  // The path of `name` in the directory (removed with it).
  std::string file(const char* name) {
    files_.push_back(path_ + "/" + name);
    return files_.back();
  }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

// Writes all `size` bytes at `data` to `fd`.
bool write_all(int fd, const void* data, size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool write_file(const std::string& path, const void* data, size_t size) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return false;
  }
  const bool written = write_all(fd, data, size);
  return close(fd) == 0 && written;
}

std::string read_file(const std::string& path) {
  std::string text;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buffer[4096];
    size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) {
      text.append(buffer, n);
    }
    std::fclose(f);
  }
  return text;
}

// Appends the words of `text` (separated by blanks) to `words`.
void split_words(const char* text, std::vector<std::string>* words) {
  std::string word;
  for (const char* c = text;; ++c) {
    if (*c == '\0' || *c == ' ' || *c == '\t' || *c == '\n') {
      if (!word.empty()) {
        words->push_back(word);
        word.clear();
      }
      if (*c == '\0') {
        return;
      }
    } else {
      word += *c;
    }
  }
}

fooError_t invalid_image(const char* what, const char* reason) {
  return runtime::fail(fooErrorInvalidKernelImage, "%s: %s", what, reason != nullptr ? reason : "");
}

// dlopen of a shared library image in memory: through an anonymous memory file (memfd_create,
// opened as /proc/self/fd/N), or a private file in `dir`, removed once loaded, where the kernel has
// no memfd or /proc is not mounted.
fooError_t load_binary(const void* image, size_t size, BuildDirectory& dir, fooModule_t* module) {
  std::string path;
  int fd = access("/proc/self/fd", X_OK) == 0 ? memfd_create(kModuleFileName, MFD_CLOEXEC) : -1;
  if (fd >= 0) {
    if (!write_all(fd, image, size)) {
      close(fd);
      return runtime::fail(fooErrorUnknown, "cannot write a module image of %zu bytes to memory", size);
    }
    path = "/proc/self/fd/" + std::to_string(fd);
  } else {
    if (!dir.create()) {
      return runtime::fail(fooErrorUnknown, "cannot create a directory for a module: %s", std::strerror(errno));
    }
    path = dir.file("module.so");
    if (!write_file(path, image, size)) {
      return runtime::fail(fooErrorUnknown, "cannot write a module image to %s", path.c_str());
    }
  }
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  const char* reason = library == nullptr ? dlerror() : nullptr;
  if (fd >= 0) {
    close(fd); // the mapping keeps the image
  }
  if (library == nullptr) {
    return invalid_image("the image is not a loadable shared library", reason);
  }
  return adopt_library(library, module);
}

// Builds C++ `source` with the host compiler ($CXX, else c++) into a shared library and loads it.
fooError_t build_source(
    const void* source, size_t size, const char* options, BuildDirectory& dir, fooModule_t* module) {
  if (!dir.create()) {
    return runtime::fail(fooErrorUnknown, "cannot create a directory for a module: %s", std::strerror(errno));
  }
  const std::string source_path = dir.file("module.cpp");
  const std::string library_path = dir.file("module.so");
  const std::string log_path = dir.file("build.log");
  if (!write_file(source_path, source, size)) {
    return runtime::fail(fooErrorUnknown, "cannot write the module's source to %s", source_path.c_str());
  }
  std::vector<std::string> words;
  const char* cxx = std::getenv("CXX");
  split_words(cxx != nullptr && cxx[0] != '\0' ? cxx : "c++", &words);
  for (const char* flag : {"-shared", "-fPIC", "-O2"}) {
    words.emplace_back(flag);
  }
  if (options != nullptr) {
    split_words(options, &words);
  }
  for (const std::string& word : {std::string("-o"), library_path, source_path}) {
    words.push_back(word);
  }
  std::vector<char*> argv;
  for (std::string& word : words) {
    argv.push_back(word.data());
  }
  argv.push_back(nullptr);
  // The compiler's output goes to the log; it runs as a spawned child (no fork of this process's threads).
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    return invalid_image("cannot run the compiler", (words[0] + ": " + std::strerror(spawned)).c_str());
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string log = read_file(log_path);
    return invalid_image(("the module does not build (" + words[0] + ")").c_str(), log.c_str());
  }
  void* library = dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return invalid_image("the built module does not load", dlerror());
  }
  return adopt_library(library, module);
}

} // namespace

fooError_t module_load_data(
    const void* image, size_t size, fooModuleFormat format, const char* options, fooModule_t* module) {
  BuildDirectory dir;
  if (format == fooModuleBinary) {
    return load_binary(image, size, dir, module);
  }
  return build_source(image, size, options, dir, module);
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

namespace {

// The alignment of a Value slot: that of a C object of its size (the largest power of two that
// divides the size, at most 8), so that one Value argument per field lays out as the struct would.
size_t value_alignment(size_t size) {
  const size_t lowest_bit = size & (~size + 1);
  return lowest_bit < 8 ? lowest_bit : 8;
}

constexpr size_t kSlotBytes = sizeof(void*); // a Buffer, an ErrorFlag or a Local's offset
constexpr size_t kLocalAlignment = 16;

// `n` rounded up to a multiple of `alignment`, a power of two (the launch path avoids a division).
size_t align_up(size_t n, size_t alignment) {
  return (n + alignment - 1) & ~(alignment - 1);
}

fooError_t bad_buffer(const Function* f, unsigned int i, const void* ptr, int device) {
  return runtime::fail(
      fooErrorInvalidDevicePointer,
      "kernel %s: argument %u (%p) is not inside a live allocation of device %d",
      f->name.c_str(),
      i,
      ptr,
      device);
}

} // namespace

fooError_t launch_kernel(
    fooFunction_t function,
    fooDim3 grid,
    fooDim3 block,
    const fooKernelArg* args,
    unsigned int nargs,
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
  // The layout (emulation.h): each argument's slot at the next offset aligned for it, in order;
  // the Local regions one after the other in the block's shared memory, each aligned to 16.
  size_t block_bytes = 0;
  size_t local_bytes = 0;
  // fooLaunchKernel's shape (every launch of the operator library): one Value, then perhaps a
  // Local. The hot path: its layout needs no walk over the arguments.
  const bool value_first = nargs > 0 && args[0].kind == fooKernelArgValue;
  const bool one_block = value_first && (nargs == 1 || (nargs == 2 && args[1].kind == fooKernelArgLocal));
  if (one_block) {
    block_bytes = args[0].size;
    if (nargs == 2) {
      block_bytes = align_up(block_bytes, kSlotBytes) + kSlotBytes;
      local_bytes = args[1].size;
    }
  } else {
    for (unsigned int i = 0; i < nargs; ++i) {
      const fooKernelArg& arg = args[i];
      if (arg.kind == fooKernelArgValue) {
        block_bytes = align_up(block_bytes, value_alignment(arg.size)) + arg.size;
        continue;
      }
      block_bytes = align_up(block_bytes, kSlotBytes) + kSlotBytes;
      if (arg.kind == fooKernelArgLocal) {
        local_bytes = align_up(local_bytes, kLocalAlignment) + arg.size;
      } else if (arg.kind == fooKernelArgBuffer) {
        fooPointerAttributes a;
        pointer_attributes(arg.pointer, &a);
        if (a.type != fooMemoryTypeDevice || a.device != stream_device_of(s)) {
          return bad_buffer(f, i, arg.pointer, stream_device_of(s));
        }
      }
    }
  }
  if (local_bytes > kSharedMemPerBlock) {
    return runtime::fail(
        fooErrorInvalidValue,
        "kernel %s: %zu bytes of shared memory exceed %zu",
        f->name.c_str(),
        local_bytes,
        kSharedMemPerBlock);
  }
  Task task;
  task.kind = Task::Kind::Kernel;
  task.function = f;
  task.grid = grid;
  task.block = block;
  task.shared_bytes = static_cast<uint32_t>(local_bytes);
  task.params_size = static_cast<uint32_t>(block_bytes);
  task.fault = injected_fault(Fault::Kernel); // fault injection
  unsigned char* params = task.params;
  if (block_bytes > kInlineParams) {
    task.params_heap = static_cast<unsigned char*>(::operator new[](block_bytes, std::align_val_t{16}));
    params = task.params_heap;
  }
  if (one_block) {
    std::memcpy(params, args[0].pointer, args[0].size);
    if (nargs == 2) {
      std::memset(params + block_bytes - kSlotBytes, 0, kSlotBytes); // the Local's offset: 0
    }
  } else {
    size_t offset = 0;
    size_t local_offset = 0;
    for (unsigned int i = 0; i < nargs; ++i) {
      const fooKernelArg& arg = args[i];
      if (arg.kind == fooKernelArgValue) {
        offset = align_up(offset, value_alignment(arg.size));
        std::memcpy(params + offset, arg.pointer, arg.size);
        offset += arg.size;
        continue;
      }
      offset = align_up(offset, kSlotBytes);
      if (arg.kind == fooKernelArgLocal) {
        local_offset = align_up(local_offset, kLocalAlignment);
        std::memcpy(params + offset, &local_offset, kSlotBytes);
        local_offset += arg.size;
      } else {
        const void* slot =
            arg.kind == fooKernelArgErrorFlag ? intern(static_cast<const char*>(arg.pointer)) : arg.pointer;
        std::memcpy(params + offset, &slot, kSlotBytes);
      }
      offset += kSlotBytes;
    }
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
