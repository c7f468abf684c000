// The handle table of the emulated foo device (handles.h says what a handle is).
#include "handles.h"

#include <cstdio>
#include <cstdlib>

namespace torch_foo::emulated {

uintptr_t HandleTable::add(HandleKind kind, void* object) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t index = 0;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    if (used_ == kCapacity) {
      std::fprintf(stderr, "foo: more than %llu live handles\n", static_cast<unsigned long long>(kCapacity));
      std::abort();
    }
    index = used_++;
    if ((index & (kChunkSize - 1)) == 0) { // the first slot of a chunk not made yet
      chunks_[index >> kChunkBits].store(new Slot[kChunkSize], std::memory_order_release);
    }
  }
  Slot& s = slot(index);
  const uint32_t generation = static_cast<uint32_t>(s.state.load(std::memory_order_relaxed) >> 8);
  // The object before the state: a thread that reads the new state reads this object. Released, so
  // that a reader who sees this object also sees the state change that emptied the slot before.
  s.object.store(object, std::memory_order_release);
  s.state.store(make_state(generation, kind), std::memory_order_release);
  return uintptr_t{generation} << 32 | (index + 1);
}

void* HandleTable::remove(HandleKind kind, const void* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  void* object = find(kind, handle);
  if (object == nullptr) {
    return nullptr;
  }
  const uint64_t index = (reinterpret_cast<uintptr_t>(handle) & kIndexMask) - 1;
  Slot& s = slot(index);
  uint32_t next = generation_of(reinterpret_cast<uintptr_t>(handle)) + 1;
  if (next == 0) {
    next = 1; // generation 0 is never handed out, so that a small integer is never a handle
  }
  s.state.store(make_state(next, HandleKind{}), std::memory_order_release);
  free_.push_back(static_cast<uint32_t>(index));
  return object;
}

constinit HandleTableStorage handle_table_storage;

} // namespace torch_foo::emulated
