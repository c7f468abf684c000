// Memory history: what the caching allocator did and where in the program, for memory snapshots.
//
// torch.foo.memory._record_memory_history() turns it on: it installs itself as the
// allocator's observer (DeviceAllocator.h), so that the allocator keeps the stack trace of each
// allocation with its block, and appends an entry for each action (allocation, free, segment taken
// from or given back to the device, out-of-memory) to a bounded history per device; torch.foo.memory._snapshot()
// reads both, in CUDA's snapshot format, so PyTorch's memory visualizer and torch.cuda._memory_viz read it. Stack
// traces are gathered by a recorder function the Python bindings install (csrc/python/Module.cpp: PyTorch's
// CapturedTraceback, Python frames and optionally C++ ones). While recording is off, no observer is
// installed: the allocator pays one atomic load per allocation and free. Nothing here is
// device-specific.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "DeviceAllocator.h"

namespace torch_foo::memory_history {

// The allocator's actions, as CUDA's snapshot names them ("alloc", "free_requested", ...).
using Action = AllocatorAction;

// Which stack traces are kept: none; for live allocations only; also in the history's allocation
// entries; also in its free entries (the context argument: None, "state", "alloc", "all").
enum class Context { Never, State, Alloc, All };

using Recorder = std::shared_ptr<c10::GatheredContext> (*)();

struct Entry {
  Action action = Action::Alloc;
  c10::DeviceIndex device = 0;
  uintptr_t address = 0; // for Oom: the device's free bytes
  size_t size = 0;
  c10::StreamId stream = 0;
  int64_t time_us = 0; // microseconds since the epoch
  std::shared_ptr<c10::GatheredContext> context;
};

// Starts (or changes) recording: `history` keeps entries (the enabled argument "all"), at most
// `max_entries` per device, the oldest dropped first. `recorder` gathers stack traces. Stops it
// (and uninstalls the observer) when neither history nor contexts are wanted.
void configure(bool history, Context context, size_t max_entries, Recorder recorder, bool clear);

// The history of each device, oldest first.
std::vector<std::vector<Entry>> entries(size_t device_count);

} // namespace torch_foo::memory_history
