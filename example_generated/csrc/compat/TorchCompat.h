// Every private PyTorch C++ API the extension uses goes through csrc/compat/ (the Python side:
// torch_foo/_compat.py; docs/integration/compat.md in the template repository lists both).
//
// "Private" here means headers under torch/csrc/ that are libtorch's or libtorch_python's internals
// (not the C++ frontend, not a documented backend extension point), macros a header needs that the
// wheel does not define, and symbols declared by hand because their header cannot be included. Each
// one is named below with the public alternative that the supported releases lack, and checked at
// compile time where that is possible (an #error naming the touchpoint when torch moved it).
//
// Touchpoints (header: what for; the public alternative that does not exist yet):
//
//  - compat/Kineto.h, for csrc/profiler/ (KinetoSession.cpp, LegacyProfiler.cpp): REGISTER_PRIVATEUSE1_PROFILER
//    (torch/csrc/profiler/standalone/privateuse1_profiler.h), the Kineto interfaces it takes
//    (libkineto::IActivityProfiler, shipped in the wheel's include/kineto) and ProfilerStubs with
//    registerPrivateUse1Methods (torch/csrc/profiler/stubs/base.h). The headers need USE_KINETO,
//    which the wheels are built with but do not export, and fmt's header-only build (libtorch does
//    not export fmt). Missing: a PrivateUse1 profiler API in a public header that carries its
//    configuration.
//  - compat/PythonBindings.h, for csrc/python/Module.cpp and csrc/distributed/Backend.cpp (which binds
//    its constructor): THPEvent (torch/csrc/Event.h: the c10::Event
//    inside a torch.Event), THPGenerator_initDefaultGenerator (torch/csrc/Generator.h: wraps a
//    device's default generator for Python), CapturedTraceback (torch/csrc/profiler/combined_traceback.h:
//    the stacks of the memory history), wrap_pybind_function_no_gil and the pybind11 casters of torch's
//    types (torch/csrc/utils/pybind.h), and
//    torch::installCapturedTracebackPython, declared by hand: its header,
//    torch/csrc/profiler/python/combined_traceback.h, includes nlohmann/json, which the wheels lack.
//    Missing: a public C++ API to unwrap torch.Event / wrap a torch.Generator, and a public capture
//    of Python stacks for a device's memory history (CUDA's is built into torch).
//  - compat/OperatorHelpers.h, for csrc/aten/Elementwise.cpp and Resize.cpp: at::native::alpha_check and
//    sub_check (ATen/native/BinaryOps.h), the argument checks of torch's add and sub, called rather than
//    copied so that the device raises what the CPU raises under every torch release (2.14 made bool
//    subtraction a NotImplementedError); at::native::ResultTypeState (ATen/native/TypeProperties.h),
//    type promotion over two tensors without building a list; at::native::checkSetStorage
//    (ATen/native/Resize.h), set_'s checks. Missing: public argument checks of the structured
//    operators, and a public incremental type promotion (at::result_type takes tensors only).
//  - compat/Distributions.h, for csrc/aten/Random.cpp: at::native::templates
//    (ATen/native/DistributionTemplates.h), the argument checks and the TensorIterator set-up of the
//    random operators, shared with the CPU and CUDA kernels. Missing: the same as above.
//  - compat/StructuredMeta.h, for csrc/aten/Blas.cpp: at::meta::structured_<op>
//    (ATen/ops/{mm,addmm,bmm,baddbmm}_meta.h), the
//    meta functions torch's CPU kernels of the matrix products run first (the argument checks, with
//    their messages, and the result's shape and dtype), run by the device's kernels so that they
//    raise what the CPU raises under every torch release (2.15 prefixed the messages with the
//    operator's name). Missing: the same as above.
//  - compat/Attention.h, for csrc/families/Attention.cpp: at::native::_fused_sdp_choice_stub
//    (ATen/native/transformers/attention.h), the stub through which scaled_dot_product_attention asks
//    the device which implementation to run. Missing: a public header declaring the stub (the
//    overrideable backend it answers is public: at::_scaled_dot_product_fused_attention_overrideable).
//  - compat/Serialization.h, for csrc/core/BackendMeta.cpp: torch::jit::TensorBackendMetaRegistry
//    (torch/csrc/jit/serialization/pickler_helper.h), the PrivateUse1-only hook that saves a tensor's
//    backend metadata with torch.save. Missing: a public header for it.
//
// Documented backend extension points, used directly (PyTorch's PrivateUse1 and accelerator
// documentation names them; their headers are internal-looking but they are the intended API; each
// file that includes one is named in PRIVATE_HEADERS_ALLOWED of tests/test_layering.py, with why):
// c10::impl::DeviceGuardImplInterface with C10_REGISTER_GUARD_IMPL (core/GuardImpl.cpp),
// at::PrivateUse1HooksInterface (core/Hooks.cpp), REGISTER_PRIVATEUSE1_DISPATCH
// (ATen/native/DispatchStub.h, families/Attention.cpp), at::native::cpu_fallback (aten/Fallback),
// c10d::Backend and c10d::Work (torch/csrc/distributed/c10d/, csrc/distributed/: the custom c10d
// backend tutorial's API),
// c10::CachingDeviceAllocator and at::CachingHostAllocator (core/), c10::impl::ExcludeDispatchKeyGuard
// (kernels/emulated/host_math.cpp: the dispatcher tutorial's autocast exclusion).
//
// The compiled-kernel ABI (what code generated at run time declares) is stated once too:
// csrc/compile/CompiledKernels.h says how.
#pragma once

// The torch releases these touchpoints were checked against (torch_foo._compat.CHECKED_WITH).
#define FOO_TORCH_CHECKED_WITH "2.15.0, 2.14.1"

// Stringizes its argument after macro expansion.
#define FOO_STRINGIZE_(...) #__VA_ARGS__
#define FOO_STRINGIZE(...) FOO_STRINGIZE_(__VA_ARGS__)
