// Sparse tensors on the device: COO (torch.sparse_coo) and compressed layouts (CSR, CSC, BSR, BSC).
//
// A sparse tensor is a small host object (SparseTensorImpl, SparseCsrTensorImpl: sizes, nnz, a
// "coalesced" flag) over dense tensors that hold its data: indices and values for COO, compressed
// indices, plain indices and values for the compressed layouts. On the device those dense tensors
// are ordinary foo tensors, and operators on a sparse foo tensor dispatch on its own keys,
// Sparsefoo and SparseCsrfoo (PyTorch's SparsePrivateUse1 and SparseCsrPrivateUse1).
//
// Native here: what only builds or inspects that host object, or works on its dense parts through
// other operators: creation (torch.sparse_coo_tensor, the target of tensor.to("foo") and of the
// fallback's results), the accessors and other views (indices(), values(), crow_indices(),
// permute, ...: a fallback cannot return views), nnz and dimensions, the coalesced flag, resizing,
// zeroing, copy_ and clone. PyTorch's own device-generic implementations (those it registers for
// CPU, CUDA and Meta alike) are reused.
//
// Everything else that computes (coalesce, sparse + sparse, sparse @ dense, sampled_addmm, layout
// conversions, to_dense, reductions, elementwise operators) runs on the CPU fallback with the CPU's
// sparse kernel (Fallback.cpp): sparse and dense arguments are copied to the CPU, the kernel that
// the same call on CPU tensors would run (SparseCPU, SparseCsrCPU) runs, and results come back as
// foo tensors. A device with sparse kernels registers them for these keys; they take precedence.
// That routing fills a seam of the fallback (csrc/aten/Fallback.h), run once when the Python module
// loads, after all kernels of this library are registered.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_dimI_native.h>
#include <ATen/ops/_dimV_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_broadcast_to_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/permute_native.h>
#include <ATen/ops/resize_as_sparse_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/select_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/zero_native.h>
#include <ATen/ops/zeros_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "../aten/Fallback.h"

namespace torch_foo {
namespace {

// A COO tensor's host object starts with empty indices and values on the *current* device
// (SparseTensorImpl's constructor knows only the device type), and its data must then be on that
// device. PyTorch's generated registrations for CPU and CUDA make the operator's device current
// first; registered directly, these creators do it here: the device of the operator is its device
// argument, else the device of the tensor it copies.
std::optional<c10::Device> device_for(std::optional<c10::Device> device, const at::Tensor& like) {
  if (device && device->type() == c10::DeviceType::PrivateUse1 && device->has_index()) {
    return device;
  }
  if (like.defined() && like.device().type() == c10::DeviceType::PrivateUse1) {
    return like.device();
  }
  return std::nullopt;
}

at::Tensor coo_with_dims_and_tensors(
    int64_t sparse_dim,
    int64_t dense_dim,
    c10::SymIntArrayRef size,
    const at::Tensor& indices,
    const at::Tensor& values,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory,
    std::optional<bool> is_coalesced) {
  const c10::OptionalDeviceGuard guard(device_for(device, values));
  return at::native::new_with_dims_and_tensor_sparse_symint(
      sparse_dim, dense_dim, size, indices, values, dtype, layout, device, pin_memory, is_coalesced);
}

at::Tensor coo_with_dims(
    int64_t sparse_dim,
    int64_t dense_dim,
    at::IntArrayRef size,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory) {
  const c10::OptionalDeviceGuard guard(device_for(device, at::Tensor()));
  return at::native::new_with_dims_sparse(sparse_dim, dense_dim, size, dtype, layout, device, pin_memory);
}

at::Tensor coo_empty(
    c10::SymIntArrayRef size,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory,
    std::optional<c10::MemoryFormat> memory_format) {
  const c10::OptionalDeviceGuard guard(device_for(device, at::Tensor()));
  return at::native::empty_sparse_symint(size, dtype, layout, device, pin_memory, memory_format);
}

at::Tensor coo_empty_like(
    const at::Tensor& self,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory,
    std::optional<c10::MemoryFormat> memory_format) {
  const c10::OptionalDeviceGuard guard(device_for(device, self));
  return at::native::empty_like_sparse_coo(self, dtype, layout, device, pin_memory, memory_format);
}

at::Tensor coo_clone(const at::Tensor& self, std::optional<c10::MemoryFormat> memory_format) {
  const c10::OptionalDeviceGuard guard(device_for(std::nullopt, self));
  return at::native::clone_sparse(self, memory_format);
}

void sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  cpu_fallback_for(op, stack, c10::DispatchKey::SparseCPU);
}

void sparse_compressed_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  cpu_fallback_for(op, stack, c10::DispatchKey::SparseCsrCPU);
}

// How the fallback writes a result back into a sparse argument the operator mutated (add_, mul_,
// ...): copy_ into it after resizing it to the result's shape and number of elements.
at::Tensor copy_from_and_resize_sparse(const at::Tensor& self, const at::Tensor& dst) {
  at::Tensor out = dst;
  at::native::copy_sparse_(out, self, /*non_blocking=*/false); // resizes
  return dst;
}

at::Tensor copy_from_and_resize_sparse_compressed(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_as_sparse_compressed_(dst, self);
  at::Tensor out = dst;
  at::native::copy_sparse_compressed_(out, self, /*non_blocking=*/false);
  return dst;
}

bool returns_view(const c10::FunctionSchema& schema) {
  const auto& returns = schema.returns();
  return std::any_of(returns.begin(), returns.end(), [](const c10::Argument& r) {
    return r.alias_info() != nullptr && !r.alias_info()->isWrite();
  });
}

// Registers `fallback` for `device_key` on every aten operator that has a kernel for `cpu_key` and
// none for `device_key`. Without this, an operator that also has a generic kernel
// (CompositeExplicitAutograd: sum, abs, mul.Scalar, ...) would run that dense implementation on a
// sparse tensor instead of the sparse kernel a CPU tensor gets. Views are left out: a fallback
// returns copies, so they are native (every sparse view PyTorch has is registered below).
template <c10::BoxedKernel::BoxedKernelFunction* fallback>
void route(c10::DispatchKey cpu_key, c10::DispatchKey device_key) {
  // Leaked on purpose: the registrations must outlive static destruction. Held by a static (one per
  // instantiation; each runs once), so that LeakSanitizer sees it reachable rather than lost.
  static auto* library = new torch::Library(torch::Library::IMPL, "aten", device_key, __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name : dispatcher.getAllOpNamesForDispatchKey(cpu_key)) {
    const auto op = dispatcher.findOp(name);
    if (!op || name.name.rfind("aten::", 0) != 0 || op->hasKernelForDispatchKey(device_key) ||
        returns_view(op->schema())) {
      continue;
    }
    const std::string qualified = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    library->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<fallback>());
  }
}

// Sends every operator that has a sparse CPU kernel (SparseCPU, SparseCsrCPU) and no sparse
// foo kernel to the CPU fallback with that kernel, ahead of PyTorch's generic dense
// implementations.
void route_sparse_ops_to_fallback() {
  static std::once_flag once;
  std::call_once(once, [] {
    route<&sparse_fallback>(c10::DispatchKey::SparseCPU, c10::DispatchKey::SparsePrivateUse1);
    route<&sparse_compressed_fallback>(c10::DispatchKey::SparseCsrCPU, c10::DispatchKey::SparseCsrPrivateUse1);
  });
}

const FallbackExtension sparse_routing("kernel_families (sparse tensors)", nullptr, &route_sparse_ops_to_fallback);

} // namespace

// COO.
TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", coo_with_dims_and_tensors);
  m.impl("_sparse_coo_tensor_with_dims", coo_with_dims);
  m.impl("empty.memory_format", coo_empty);
  m.impl("empty_like", coo_empty_like);
  m.impl("zeros.out", at::native::zeros_sparse_out);
  m.impl("_indices", at::native::_indices_sparse);
  m.impl("_values", at::native::_values_sparse);
  m.impl("indices", at::native::indices_sparse);
  m.impl("values", at::native::values_sparse);
  m.impl("permute", at::native::permute_sparse_coo);
  m.impl("unsqueeze", at::native::unsqueeze_sparse);
  m.impl("_sparse_broadcast_to", at::native::sparse_broadcast_to);
  m.impl("view_as_real", at::native::view_as_real_sparse);
  m.impl("view_as_complex", at::native::view_as_complex_sparse);
  m.impl("_nnz", at::native::_nnz_sparse);
  m.impl("sparse_dim", at::native::sparse_dim_sparse);
  m.impl("dense_dim", at::native::dense_dim_sparse);
  m.impl("_dimI", at::native::sparse_dim_sparse);
  m.impl("_dimV", at::native::dense_dim_sparse);
  m.impl("is_coalesced", at::native::is_coalesced_sparse);
  m.impl("_coalesced_", at::native::_coalesced_sparse_);
  m.impl("sparse_resize_", at::native::sparse_resize_);
  m.impl("sparse_resize_and_clear_", at::native::sparse_resize_and_clear_);
  m.impl("resize_as_sparse_", at::native::resize_as_sparse_);
  m.impl("zero_", at::native::zero_sparse_);
  m.impl("copy_", at::native::copy_sparse_wrapper_);
  m.impl("copy_sparse_to_sparse_", at::native::copy_sparse_);
  m.impl("_copy_from_and_resize", copy_from_and_resize_sparse);
  m.impl("clone", coo_clone);
}

// CSR, CSC, BSR, BSC.
TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("empty.memory_format", at::native::empty_sparse_compressed_symint);
  m.impl("empty_like", at::native::empty_like_sparse_csr);
  m.impl("crow_indices", at::native::crow_indices_sparse_csr);
  m.impl("col_indices", at::native::col_indices_sparse_csr);
  m.impl("ccol_indices", at::native::ccol_indices_sparse_csr);
  m.impl("row_indices", at::native::row_indices_sparse_csr);
  m.impl("values", at::native::values_sparse_csr);
  m.impl("select.int", at::native::select_sparse_csr);
  m.impl("_nnz", at::native::_nnz_sparse_csr);
  m.impl("sparse_dim", at::native::sparse_dim_sparse_csr);
  m.impl("dense_dim", at::native::dense_dim_sparse_csr);
  m.impl("resize_", at::native::resize_sparse_csr_);
  m.impl("resize_as_sparse_", at::native::resize_as_sparse_compressed_);
  m.impl("zero_", at::native::zero_sparse_csr_);
  m.impl("fill_.Scalar", at::native::fill_sparse_csr_);
  m.impl("copy_", at::native::copy_sparse_compressed_);
  m.impl("_copy_from_and_resize", copy_from_and_resize_sparse_compressed);
  m.impl("clone", at::native::clone_sparse_compressed);
}

// Every other operator on a sparse foo tensor.
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_compressed_fallback>());
}

} // namespace torch_foo
