"""Compiled kernels at run time: the two functions the code torch.compile generates for foo calls.

Inductor's wrapper module (see wrapper.py) defines each kernel once with
``cpp_fused_..._0 = compile_kernel(async_compile, "cpp_fused_..._0", <parameter count>, r'''<C++ source>''')``
(the source defines the kernel's entry point under that name) and runs
it with ``launch_kernel(cpp_fused_..._0, <device index>, <tensors and sizes>...)``.

``compile_kernel`` builds the source with Inductor's own C++ toolchain and cache (the compile
workers, the on-disk cache keyed by source and flags, the CPU's vector ISA) into a shared library:
on the emulated device, a code object is a shared library. It then loads the library's entry point
(scheduling.py writes it) through the extension, which returns a kernel handle.

``launch_kernel`` packs the arguments into the kernel's parameter block (device pointers as PyTorch
stores them in tensors, sizes as integers) and launches it on the current stream of the device,
through the same runtime launch as every eager kernel (csrc/compile/CompiledKernels.cpp): in stream
order, asynchronously to the host. A device with its own compiler replaces both with its code-object
format and its driver's module loading.
"""

from typing import Any

from .. import _C, _compat

get_compile_threads = _compat.resolve("inductor.get_compile_threads")
CppCodeCache = _compat.resolve("inductor.CppCodeCache")
LambdaFuture = _compat.resolve("inductor.LambdaFuture")
_get_cpp_prefix_header = _compat.resolve("inductor.get_cpp_prefix_header")
clear_on_fresh_cache = _compat.resolve("inductor.clear_on_fresh_cache")

launch_kernel = _C._launch_compiled_kernel


class _KernelLibrary:
    """A compiled kernel library (a code object) and its kernel handles, loaded on first use."""

    def __init__(self, path: str):
        self.path = path
        self._handles: dict[tuple[str, int], int] = {}

    def kernel(self, name: str, param_count: int) -> int:
        if (name, param_count) not in self._handles:
            self._handles[name, param_count] = _C._load_compiled_kernel(self.path, name, param_count)
        return self._handles[name, param_count]


@clear_on_fresh_cache
class FooKernelCodeCache(CppCodeCache):
    """Inductor's C++ code cache, producing plain shared libraries (no Python bindings: the
    extension loads and launches them) for the foo device."""

    cache: dict[str, Any] = {}
    cache_clear = staticmethod(cache.clear)
    # Kernels use torch's headers (vector types, math) but link nothing from it.
    cpp_compile_command_flags = {"include_pytorch": False, "shared": True}

    @staticmethod
    def _load_library_inner(path: str, key: str) -> _KernelLibrary:
        return _KernelLibrary(path)

    @classmethod
    def _get_uncompiled_header(cls, device: str) -> str | None:
        # The header every kernel starts with, precompiled once as Inductor does for CPU kernels
        # (most of a kernel's compile time is this header).
        return _get_cpp_prefix_header(device)


def compile_kernel(async_compile: Any, name: str, param_count: int, source: str) -> Any:
    """Compiles `source` (a kernel and its entry point `name`, which takes `param_count` parameters)
    and returns its handle for launch_kernel.

    With parallel compilation on, the compile runs in Inductor's workers and this returns a future,
    which the generated module's ``async_compile.wait(globals())`` replaces by the handle.
    """
    # Built as CPU code: the emulated device runs on the host ("cpu" also selects -O3 and the vector ISA).
    if get_compile_threads() <= 1:
        return FooKernelCodeCache.load(source, "cpu").kernel(name, param_count)
    get_library = FooKernelCodeCache.load_async(source, "cpu", submit_fn=async_compile.submit)
    return LambdaFuture(lambda: get_library().kernel(name, param_count))
