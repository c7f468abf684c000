// Per-tensor backend metadata: a storage-format tag the device keeps for each tensor.
//
// Accelerators often store a tensor's elements in a layout of their own (tiles for a matrix unit,
// channel blocks for convolutions) and must remember per tensor which one. PyTorch gives every
// TensorImpl a slot for such data, c10::BackendMeta, and carries it in three places: shallow copies
// (detach(), .data, nn.Parameter(t), `param.data = t`), torch.save/torch.load (through the
// serialization functions registered in BackendMeta.cpp, which turn it into entries of the tensor's
// metadata dictionary) and torch._utils.get_tensor_metadata / set_tensor_metadata, which read and
// write that dictionary. New tensors made like a tagged one on the device keep its tag as well
// (empty_like and everything built on it, new_empty, .to(): aten/BackendMetaCopies.cpp).
//
// The emulated device stores every format the same way (plain row-major elements), so the tag
// never changes where an element lives: it is the example of what a device keeps per tensor and
// how that survives PyTorch's copies and checkpoints. A device with real formats converts the data
// when a tag changes and has its kernels read the tag.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace torch_foo {

// Plain is the default: a tensor without metadata has it.
enum class TensorFormat : int8_t {
  Plain = 0,
  Tiled = 1, // matrix-unit tiles
  Blocked = 2, // channel blocks
};

// The format of a dense foo tensor (Plain for any other tensor).
TensorFormat tensor_format(const at::Tensor& t);

// Tags a dense foo tensor (raises for others); Plain removes the tag.
void set_tensor_format(const at::Tensor& t, TensorFormat format);

// Gives `dst` the format of `src` when both are dense foo tensors and `src` has one.
void copy_tensor_format(const at::Tensor& src, const at::Tensor& dst);

} // namespace torch_foo
