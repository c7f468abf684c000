// Interpreter exit and torch's autograd device threads.
//
// PyTorch runs the backward pass of device tensors on one autograd thread per device index
// (torch/csrc/autograd/engine.cpp, Engine::thread_main), for every device type with a guard, so
// foo devices get them as CUDA devices do. A backward pass is a GraphTask; it records the
// caller's thread-local state, and since torch 2.13 that state holds a Python object
// (torch.autograd.graph._engine_run_backward stashes a contextvars.Context in it). The device
// thread marks the task complete, which wakes the caller, and only then drops its own reference to
// the task. When the caller's reference went first, the device thread's drop is the last: it frees
// the Python object and so needs the GIL. If the program has meanwhile reached interpreter
// finalization, Python ends a thread that asks for the GIL with pthread_exit, and the forced unwind
// through the task's noexcept destructor calls std::terminate: the process aborts with
// "terminate called without an active exception" after doing all its work.
//
// The race is torch's (docs: the template's known-issues page has the reproduction). What a backend
// can do is make sure no device thread still holds a task when finalization begins: at exit, while
// Python still runs (an atexit handler, torch_foo/__init__.py), give each device thread one more
// backward pass, started from C++ so that its own task holds no Python object, and wait for it with
// the GIL released. A device thread runs its tasks one at a time, so by the time it completes that
// pass it has dropped every earlier task, taking the GIL we released to do so.
//
// Per-operator headers only: torch/autograd.h reaches ATen/ExpandUtils.h, which without
// AT_PER_OPERATOR_HEADERS includes all of ATen/Functions.h (3.5 MB of the module's 12.5 MB unit;
// the template's docs/build-speed.md).
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#ifndef AT_PER_OPERATOR_HEADERS
#define AT_PER_OPERATOR_HEADERS
#endif

#include "AutogradThreads.h"

#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <pybind11/pybind11.h>
#include <torch/autograd.h>

namespace torch_foo {

void finish_autograd_device_thread(c10::DeviceIndex device) {
  const pybind11::gil_scoped_release no_gil;
  // Exit may come inside torch.no_grad() or inference mode: the pass needs autograd on.
  const c10::InferenceMode no_inference_mode(false);
  const c10::AutoGradMode grad_mode(true);
  const auto leaf =
      at::zeros({1}, at::TensorOptions().device(c10::DeviceType::PrivateUse1, device)).requires_grad_(true);
  // Its root gradient lives on `device`, so the engine runs the pass on that device's thread.
  torch::autograd::backward({leaf.sum()});
}

} // namespace torch_foo
