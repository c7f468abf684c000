// Sparse tensors on the device (Sparse.cpp).
#pragma once

namespace torch_foo {

// Sends every operator that has a sparse CPU kernel (SparseCPU, SparseCsrCPU) and no sparse
// foo kernel to the CPU fallback with that kernel, ahead of PyTorch's generic dense
// implementations. Called once when the Python module loads, after all kernels of this library
// are registered.
void route_sparse_ops_to_fallback();

} // namespace torch_foo
