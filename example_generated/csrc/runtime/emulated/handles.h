// Handles of the emulated foo device: what a fooStream_t, fooEvent_t, fooModule_t,
// fooFunction_t, fooGraph_t or fooGraphExec_t holds.
//
// A handle is never the address of its object: it is a slot of one process-wide table and the
// generation that slot had when the object was registered. Removing the object moves the slot to
// the next generation, so a handle that outlived its object names nothing, whether it is destroyed
// twice, used after its destroy, or held while a new object took the same slot; so does a value that
// was never a handle, or a handle of another kind (each slot records the kind of its object).
// Resolving a handle reads only the table, never memory the value might point at, and takes no
// lock: the slots live in chunks that are allocated once and never move or go away, so the stream
// lookup of every launch costs a few loads. Registering and removing take a mutex.
//
// What resolving does not do is keep the object alive: destroying an object while another thread
// still uses its handle is the program's race (as with any driver), not something the table orders.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace torch_foo::emulated {

enum class HandleKind : uint8_t { Stream = 1, Event, Module, Function, Graph, GraphExec };

class HandleTable {
 public:
  constexpr HandleTable() = default;

  // Registers `object` of `kind`; returns its handle (never null).
  uintptr_t add(HandleKind kind, void* object);

  // The object `handle` names if it is a live handle of `kind`, else null. Lock-free.
  void* find(HandleKind kind, const void* handle) const {
    const auto value = reinterpret_cast<uintptr_t>(handle);
    const uint64_t index = (value & kIndexMask) - 1; // a null handle wraps to a huge index
    if (index >= kCapacity) {
      return nullptr;
    }
    const Slot* chunk = chunks_[index >> kChunkBits].load(std::memory_order_acquire);
    if (chunk == nullptr) {
      return nullptr;
    }
    const Slot& slot = chunk[index & (kChunkSize - 1)];
    const uint64_t expected = make_state(generation_of(value), kind);
    if (slot.state.load(std::memory_order_acquire) != expected) {
      return nullptr;
    }
    void* object = slot.object.load(std::memory_order_acquire);
    // The slot may have been emptied and given to another object between the two loads: only a
    // state that is still the handle's vouches for the object read.
    return slot.state.load(std::memory_order_acquire) == expected ? object : nullptr;
  }

  // Unregisters the object `handle` names and returns it, or null if it is not a live handle of
  // `kind`. Of two threads removing one handle, one gets the object.
  void* remove(HandleKind kind, const void* handle);

 private:
  static_assert(sizeof(uintptr_t) == 8, "a handle holds a 32-bit slot number and a 32-bit generation");
  static constexpr unsigned kChunkBits = 10;
  static constexpr uint64_t kChunkSize = uint64_t{1} << kChunkBits; // slots per chunk
  static constexpr uint64_t kChunks = uint64_t{1} << 14;
  static constexpr uint64_t kCapacity = kChunks * kChunkSize; // live objects at once
  static constexpr uintptr_t kIndexMask = 0xffffffff;

  static constexpr uint64_t make_state(uint32_t generation, HandleKind kind) {
    return uint64_t{generation} << 8 | static_cast<uint8_t>(kind);
  }
  static constexpr uint32_t generation_of(uintptr_t handle) {
    return static_cast<uint32_t>(handle >> 32);
  }

  // A slot's state is its generation and the kind of the object it holds (0: empty).
  struct Slot {
    std::atomic<uint64_t> state{make_state(1, HandleKind{})};
    std::atomic<void*> object{nullptr};
  };

  Slot& slot(uint64_t index) const {
    return chunks_[index >> kChunkBits].load(std::memory_order_relaxed)[index & (kChunkSize - 1)];
  }

  std::atomic<Slot*> chunks_[kChunks]{}; // each made when its first slot is handed out, never freed
  std::mutex mutex_; // guards the fields below and every change of a slot
  uint64_t used_ = 0; // slots handed out at least once
  std::vector<uint32_t> free_; // emptied slots, the last emptied reused first
};

// The table of every handle of the process: initialised at compile time (so usable from any static
// initialiser) and never destroyed (workers resolve handles during exit).
union HandleTableStorage {
  HandleTable table;
  constexpr HandleTableStorage() : table() {}
  ~HandleTableStorage() {} // leaves the table alone
};
extern constinit HandleTableStorage handle_table_storage;

inline HandleTable& handles() {
  return handle_table_storage.table;
}

// The typed forms the device's files use.
template <typename Handle>
Handle add_handle(HandleKind kind, void* object) {
  return reinterpret_cast<Handle>(handles().add(kind, object));
}

template <typename T>
T* find_handle(HandleKind kind, const void* handle) {
  return static_cast<T*>(handles().find(kind, handle));
}

template <typename T>
T* remove_handle(HandleKind kind, const void* handle) {
  return static_cast<T*>(handles().remove(kind, handle));
}

} // namespace torch_foo::emulated
