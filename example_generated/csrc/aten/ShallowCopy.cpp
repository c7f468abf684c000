// Shallow-copy compatibility: whether a tensor may take over another tensor's data in place.
//
// PyTorch asks aten::_has_compatible_shallow_copy_type(self, from) in two places:
//  - the `.data` setter (`param.data = other`), which makes self's TensorImpl share from's storage,
//    sizes, device and dispatch keys, and refuses ("incompatible tensor type") when the answer is no;
//  - nn.Module._apply (module.to(), .to_empty(), .half(), ...), which keeps each Parameter object
//    and swaps its data when the answer is yes, and replaces it with a new Parameter when it is no.
// torch's own answer (TensorImpl::has_compatible_shallow_copy_type) counts only its built-in
// backends as dense, so for foo it would be no: module.to("foo") would replace every
// Parameter, weights tied between modules would come apart, and an optimizer created before .to()
// would hold parameters the model no longer uses.
//
// The answer here is CUDA's: a dense tensor in host memory and a dense foo tensor are compatible
// (a plain TensorImpl in both), so module.to("foo") keeps every Parameter object, as it does for
// CUDA. Every other pair keeps torch's answer; in particular sparse tensors, whose TensorImpl
// subclass (SparseTensorImpl) checks torch's answer itself when data is swapped, so Module.to()
// replaces a sparse parameter by a new one. Registered for PrivateUse1, so the dispatcher calls it
// whenever either tensor is a dense foo tensor. A real device keeps this file as it is unless its
// tensors use their own TensorImpl subclass: data cannot be swapped between two TensorImpl types,
// and the answer for such a pair must be no.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace torch_foo {
namespace {

// A plain (dense, strided) tensor in host memory or on a foo device.
bool dense_on_host_or_device(const at::Tensor& t) {
  const auto type = t.device().type();
  return t.key_set().has_any(c10::DispatchKeySet(c10::DispatchKey::Dense)) &&
      (type == c10::DeviceType::CPU || type == c10::DeviceType::PrivateUse1);
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (dense_on_host_or_device(self) && dense_on_host_or_device(from)) {
    return true;
  }
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

} // namespace torch_foo
