// Per-tensor backend metadata (see BackendMeta.h): the format tag as a c10::BackendMeta, and the
// functions torch.save / torch.load call to put it into a checkpoint and take it out again.
//
// PyTorch's serialization keeps a tensor's extra metadata as a dictionary of string -> bool
// (torch._utils.get_tensor_metadata; "conj" and "neg" are PyTorch's own entries), which it saves
// with the tensor and passes back to torch._utils.set_tensor_metadata after loading. A backend may
// register one pair of functions that add its entries to that dictionary and read them back
// (torch::jit::TensorBackendMetaRegistry, allowed for PrivateUse1 only). The tag is saved as one
// entry, "foo_format_<name>": True. A checkpoint loaded onto the CPU (map_location="cpu") drops
// it, as the host has no formats; loaded back onto a foo device it is restored.
#include "BackendMeta.h"

#include <string>
#include <unordered_map>

#include <c10/core/TensorImpl.h>

#include "../compat/Serialization.h" // torch::jit::TensorBackendMetaRegistry

namespace torch_foo {
namespace {

// Immutable: a new tag replaces the object, so the shallow copies that share it (PyTorch's default
// BackendMeta::clone returns the same object) never see each other's changes.
struct FormatMeta final : c10::BackendMeta {
  explicit FormatMeta(TensorFormat f) : format(f) {}
  const TensorFormat format;
};

constexpr const char* kKeyPrefix = "foo_format_";

struct FormatName {
  TensorFormat format;
  const char* name;
};
constexpr FormatName kFormats[] = {
    {TensorFormat::Plain, "plain"},
    {TensorFormat::Tiled, "tiled"},
    {TensorFormat::Blocked, "blocked"},
};

const char* name_of(TensorFormat format) {
  for (const auto& entry : kFormats) {
    if (entry.format == format) {
      return entry.name;
    }
  }
  TORCH_CHECK(false, "unknown foo tensor format ", static_cast<int>(format));
}

TensorFormat format_named(const std::string& name) {
  for (const auto& entry : kFormats) {
    if (name == entry.name) {
      return entry.format;
    }
  }
  std::string known;
  for (const auto& entry : kFormats) {
    known += known.empty() ? "" : ", ";
    known += entry.name;
  }
  TORCH_CHECK(false, "Unknown foo tensor format '", name, "' (known formats: ", known, ")");
}

// Formats belong to dense (strided) foo tensors; sparse tensors are made of dense ones.
bool is_device_tensor(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 && t.layout() == c10::kStrided;
}

// torch.save, torch._utils.get_tensor_metadata: adds the tag of a foo tensor.
void serialize(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  const TensorFormat format = tensor_format(t);
  if (format != TensorFormat::Plain) {
    metadata[std::string(kKeyPrefix) + name_of(format)] = true;
  }
}

// torch.load, torch._utils.set_tensor_metadata: tags a foo tensor from the dictionary's entries.
void deserialize(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  std::string found;
  for (const auto& [key, value] : metadata) {
    if (!value || key.rfind(kKeyPrefix, 0) != 0) {
      continue;
    }
    const std::string name = key.substr(std::char_traits<char>::length(kKeyPrefix));
    TORCH_CHECK(
        found.empty() || found == name,
        "The tensor's metadata names two foo formats, '",
        found,
        "' and '",
        name,
        "'; a tensor has one");
    found = name;
  }
  if (!found.empty()) {
    set_tensor_format(t, format_named(found));
  }
}

const bool serialization_registered = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &serialize, &deserialize);
  return true;
}();

} // namespace

TensorFormat tensor_format(const at::Tensor& t) {
  if (!is_device_tensor(t)) {
    return TensorFormat::Plain;
  }
  const auto* meta = dynamic_cast<const FormatMeta*>(t.unsafeGetTensorImpl()->get_backend_meta());
  return meta == nullptr ? TensorFormat::Plain : meta->format;
}

void set_tensor_format(const at::Tensor& t, TensorFormat format) {
  TORCH_CHECK(
      is_device_tensor(t),
      "Only dense foo tensors have a foo format (the host has none, and a sparse tensor's parts ",
      "are dense tensors), not a ",
      t.layout(),
      " tensor on ",
      t.device());
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (format == TensorFormat::Plain) {
    if (impl->get_backend_meta() != nullptr) {
      impl->set_backend_meta(c10::intrusive_ptr<c10::BackendMeta>());
    }
    return;
  }
  impl->set_backend_meta(c10::make_intrusive<FormatMeta>(format));
}

void copy_tensor_format(const at::Tensor& src, const at::Tensor& dst) {
  if (is_device_tensor(src) && is_device_tensor(dst)) {
    const auto meta = src.unsafeGetTensorImpl()->get_backend_meta_intrusive_ptr();
    if (meta) {
      dst.unsafeGetTensorImpl()->set_backend_meta(meta);
    }
  }
}

} // namespace torch_foo
