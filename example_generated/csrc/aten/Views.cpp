// Views: operators that return a tensor sharing its input's memory.
//
// A view only changes sizes, strides and offset, so no device work is needed; the generic ATen
// implementations are reused. These are the view operators without a device-generic kernel:
// through the CPU fallback they would return copies and break aliasing (x.view(...) writes
// would not reach x). Every other view (transpose, select, slice, expand, ...) is built on them.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

namespace torch_foo {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
}

} // namespace torch_foo
