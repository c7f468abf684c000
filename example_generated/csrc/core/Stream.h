// Streams: which stream each host thread's work goes to, and the pool torch.Stream draws from.
//
// PyTorch names a stream with a c10::Stream (device, id); this file maps those names to runtime
// handles. Id 0 is the default stream of the device; the other ids are a fixed pool per device and
// priority (torch.Stream(), torch.foo.Stream(), the autograd engine and c10d all draw from it),
// created in the runtime the first time they are used. PyTorch never destroys a stream, so a pool
// bounds how many exist, as with CUDA. Ids past the pool are dedicated streams, which one owner
// (the c10d backend) has to itself; after them come streams created outside PyTorch (external).
// The current stream is per host thread and per device.
// Runtime calls on a stream must run with its device current: NULL, the handle of every default
// stream, means "the default stream of the current device" (c10::DeviceGuard does that).
#pragma once

#include <c10/core/Stream.h>
#include <c10/macros/Macros.h>

#include <atomic>
#include <string>

#include "../runtime/runtime.h"

namespace torch_foo {

// The runtime handle of `stream` (creating a pool stream on first use); raises for an unknown id.
fooStream_t native_stream(const c10::Stream& stream);

// The current stream of this thread on `device`, on the current device, and its runtime handle.
c10::Stream current_stream(c10::DeviceIndex device);
c10::Stream current_stream_of_current_device();
fooStream_t current_stream();
// current_stream() when the caller knows the current device (it made `device` current with a
// c10::DeviceGuard): one runtime call less on every kernel launch.
fooStream_t current_stream_on(c10::DeviceIndex device);

c10::Stream default_stream(c10::DeviceIndex device);

// A stream from the pool of `device`; priority < 0 asks for a high-priority one.
c10::Stream stream_from_pool(c10::DeviceIndex device, int priority);

// A stream no one else is handed, for work that blocks its stream for long stretches (the
// collectives of a process group wait there for the other ranks): the pool's streams are shared,
// and two such users on one stream could wait for each other. Give it back with
// release_dedicated_stream() when done; it is reused, never destroyed.
c10::Stream acquire_dedicated_stream(c10::DeviceIndex device, int priority);
void release_dedicated_stream(const c10::Stream& stream);

// The c10::Stream that names `handle`, a stream of `device` created outside PyTorch
// (torch.foo.get_stream_from_external); NULL names the default stream. Raises if the runtime does
// not know the handle or it belongs to another device. PyTorch does not own it: work queued through
// it after its owner destroyed it fails. Up to 64 external streams per device at a time.
c10::Stream external_stream(fooStream_t handle, c10::DeviceIndex device);

// Makes `stream` the current stream of its device for this thread; returns the previous one.
c10::Stream exchange_stream(const c10::Stream& stream);

// The priority of `stream` (0 normal, -1 high), as torch.foo.Stream.priority reports it.
int stream_priority(const c10::Stream& stream);

// Synchronisation debugging, torch.foo.set_sync_debug_mode (torch.cuda's): operations that make
// the host wait for the device (blocking copies between host and device, .item(), stream and device
// synchronisation) call note_synchronization(), which warns or raises as the mode says.
enum class SyncDebugMode : int { Disabled = 0, Warn = 1, Error = 2 };
void set_sync_debug_mode(SyncDebugMode mode);
SyncDebugMode sync_debug_mode();
void note_synchronization();

// Failures of host work that ran on a stream's worker, where nothing can raise and the runtime cannot
// be called (runtime.h: a host function has no way to fail its stream): the asynchronous CPU fallback's
// CPU kernel raising (an nll_loss target out of range). report_deferred_error() keeps the first
// failure; raise_deferred_error() raises it, once, and is called after every synchronisation the
// backend makes (streams, events, the device, blocking copies, .item()), so that the error surfaces
// at the next synchronisation, as a device-side assert does on CUDA. A synchronisation that waits for
// the failed work always finds it; one that does not may find it too (the error is the process's, as
// CUDA's sticky errors are the context's). report_deferred_error() never calls the runtime: a host
// function may call it.
void report_deferred_error(std::string message);
void raise_deferred_error_slow();
extern std::atomic<bool> deferred_error_pending;
inline void raise_deferred_error() {
  if (C10_UNLIKELY(deferred_error_pending.load(std::memory_order_acquire))) {
    raise_deferred_error_slow();
  }
}

} // namespace torch_foo
