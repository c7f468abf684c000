"""The public names of torch.cuda that this device module does not provide, each with the reason.

Code ported from CUDA by replacing the device name finds every other public name of torch.cuda
here, with CUDA's signature and behaviour. tests/test_cuda_parity.py compares the two modules
against this table, and the docs show it (docs/integration/python-package.md): a name torch.cuda
gains in a new torch release fails that test until it is implemented or listed here.
"""

CUDA_ONLY = "CUDA-only"
GRAPHS = "graphs"
NOT_YET = "not yet"

# name -> (category, reason)
NOT_PROVIDED: dict[str, tuple[str, str]] = {
    # Graph capture and replay, and the memory pools graphs allocate from.
    "CUDAGraph": (GRAPHS, "CUDA's name: the class here is <Name>Graph (graphs.py), a torch.accelerator.Graph"),
    "MemPool": (GRAPHS, "memory pools of the caching allocator, which graph capture also allocates from"),
    "use_mem_pool": (GRAPHS, "routes allocations to a MemPool"),
    "export_dot": (GRAPHS, "a capture-end hook that writes a captured graph as Graphviz DOT"),
    "export_graph_data": (GRAPHS, "a post-instantiate hook that pickles a graph's data"),
    "graph_annotations": (GRAPHS, "annotations of the kernels captured in graphs, for profiler traces"),
    # Allocator features the device allocator does not have yet.
    "CUDAPluggableAllocator": (
        NOT_YET,
        "an allocator loaded from a user's shared library; the caching allocator is fixed",
    ),
    "change_current_allocator": (NOT_YET, "swaps in a CUDAPluggableAllocator"),
    "caching_allocator_enable": (
        NOT_YET,
        "turns caching off (PYTORCH_NO_CUDA_MEMORY_CACHING); the allocator always caches",
    ),
    "caching_allocator_disabled": (NOT_YET, "context manager around caching_allocator_enable"),
    "AcceleratorError": (
        NOT_YET,
        "runtime errors raise RuntimeError with the runtime's message, not torch.AcceleratorError with its code",
    ),
    "ipc_collect": (NOT_YET, "frees memory shared with other processes through CUDA IPC; device memory is not shared"),
    # CUDA's own libraries, tools and build.
    "cudart": (CUDA_ONLY, "the CUDA runtime library's bindings (the driver here is csrc/runtime/runtime.h, a C API)"),
    "check_error": (CUDA_ONLY, "raises for a cudaError_t returned by cudart() calls"),
    "cudaStatus": (CUDA_ONLY, "cudaError_t codes for cudart() calls"),
    "CudaError": (CUDA_ONLY, "the exception of check_error"),
    "DeferredCudaCallError": (
        CUDA_ONLY,
        "CUDA's failed deferred lazy-initialisation calls; initialisation here raises at once",
    ),
    "current_blas_handle": (CUDA_ONLY, "the cuBLAS handle"),
    "current_solver_handle": (CUDA_ONLY, "the cuSOLVER handle"),
    "get_arch_list": (CUDA_ONLY, "the CUDA architectures (sm_XX) torch was built for"),
    "get_gencode_flags": (CUDA_ONLY, "nvcc -gencode flags torch was built with"),
    "has_half": (CUDA_ONLY, "a build flag of the CUDA build (always True)"),
    "has_magma": (CUDA_ONLY, "whether torch was built with MAGMA"),
    "jiterator": (CUDA_ONLY, "elementwise kernels compiled at run time with NVRTC"),
    "nccl": (CUDA_ONLY, "NCCL collectives (the c10d backend of this device is in distributed.py)"),
    "nvtx": (CUDA_ONLY, "NVIDIA's NVTX ranges (torch.profiler.record_function works on every device)"),
    "profiler": (CUDA_ONLY, "starts and stops NVIDIA's profilers (torch.profiler traces this device)"),
    "tunable": (CUDA_ONLY, "TunableOp: choosing among cuBLAS/hipBLASLt GEMM implementations"),
    "gds": (CUDA_ONLY, "GPUDirect Storage (cuFile)"),
    "GreenContext": (CUDA_ONLY, "CUDA green contexts (partitions of the SMs)"),
    "green_contexts": (CUDA_ONLY, "the module of GreenContext"),
    "sparse": (CUDA_ONLY, "legacy typed sparse tensor classes (torch.cuda.sparse.FloatTensor)"),
}

# The legacy typed tensor and storage classes (torch.cuda.FloatTensor, torch.cuda.FloatStorage):
# torch makes them for its built-in backends only. Tensors of this device are created with
# device=..., storages with torch.UntypedStorage / torch.TypedStorage.
LEGACY_TYPES = (
    "BFloat16Storage", "BFloat16Tensor", "BoolStorage", "BoolTensor", "ByteStorage", "ByteTensor",
    "CharStorage", "CharTensor", "ComplexDoubleStorage", "ComplexFloatStorage", "DoubleStorage",
    "DoubleTensor", "FloatStorage", "FloatTensor", "HalfStorage", "HalfTensor", "IntStorage",
    "IntTensor", "LongStorage", "LongTensor", "ShortStorage", "ShortTensor",
)  # fmt: skip
NOT_PROVIDED.update((name, (CUDA_ONLY, "legacy typed tensor and storage classes")) for name in LEGACY_TYPES)

# The names of torch.cuda that appeared after the oldest torch release the backend supports, with the
# release (major, minor) that added each: under an older torch they are listed but absent. None
# today: every name above is in torch.cuda of each supported release.
SINCE: dict[str, tuple[int, int]] = {}

# The parameters of torch.cuda's functions and classes that appeared after the oldest supported
# release, with the release that added each: this module takes them under every release (what they
# mean on this device is in each docstring), torch.cuda under that release on.
PARAMETERS_SINCE: dict[str, dict[str, tuple[int, int]]] = {
    "graph": {"annotation_config": (2, 15)},
}
