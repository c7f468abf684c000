#include "MemoryHistory.h"

#include "../runtime/runtime.h"
#include "Device.h"

#include <chrono>
#include <mutex>

namespace torch_foo::memory_history {

std::atomic<bool> recording{false};

namespace {

struct State {
  std::mutex mutex; // guards everything below
  bool history = false;
  Context context = Context::Never;
  size_t max_entries = 0;
  Recorder recorder = nullptr;
  // A ring per device: `next` is where the next entry goes once the ring is full.
  std::vector<Entry> rings[kMaxDevices];
  size_t next[kMaxDevices] = {};
};

// Never destroyed: tensors may be freed by other libraries' static destructors at exit.
State& state() {
  static auto* s = new State();
  return *s;
}

// The entries of `device`, oldest first. Caller holds s.mutex.
std::vector<Entry> ordered(const State& s, size_t device) {
  const auto& ring = s.rings[device];
  const size_t start = ring.size() < s.max_entries ? 0 : s.next[device];
  std::vector<Entry> result;
  result.reserve(ring.size());
  for (size_t i = 0; i < ring.size(); ++i) {
    result.push_back(ring[(start + i) % ring.size()]);
  }
  return result;
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

void configure(bool history, Context context, size_t max_entries, Recorder recorder, bool clear) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.history = history && max_entries > 0;
  s.context = recorder != nullptr ? context : Context::Never;
  s.max_entries = max_entries;
  s.recorder = recorder;
  for (size_t d = 0; d < kMaxDevices; ++d) {
    std::vector<Entry> kept = clear || !s.history ? std::vector<Entry>() : ordered(s, d);
    if (kept.size() > max_entries) { // a smaller limit keeps the newest entries
      kept.erase(kept.begin(), kept.end() - static_cast<std::ptrdiff_t>(max_entries));
    }
    s.rings[d] = std::move(kept);
    s.next[d] = 0;
  }
  recording.store(s.history || s.context != Context::Never, std::memory_order_relaxed);
}

std::shared_ptr<c10::GatheredContext> context_for(Action action) {
  if (!is_recording()) {
    return nullptr;
  }
  Recorder recorder = nullptr;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    const bool wanted = action == Action::Alloc ? s.context >= Context::State : s.context == Context::All;
    recorder = wanted ? s.recorder : nullptr;
  }
  return recorder != nullptr ? recorder() : nullptr;
}

void record(Entry entry) {
  if (!is_recording()) {
    return;
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.history || entry.device < 0 || static_cast<size_t>(entry.device) >= kMaxDevices) {
    return;
  }
  if (s.context < Context::Alloc) {
    entry.context = nullptr; // "state": stack traces only for live allocations, not in the history
  }
  entry.time_us = now_us();
  auto& ring = s.rings[entry.device];
  size_t& next = s.next[entry.device];
  if (ring.size() < s.max_entries) {
    ring.push_back(std::move(entry));
  } else {
    ring[next] = std::move(entry);
    next = (next + 1) % s.max_entries;
  }
}

std::vector<std::vector<Entry>> entries(size_t device_count) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<std::vector<Entry>> result(device_count);
  for (size_t d = 0; d < device_count && d < kMaxDevices; ++d) {
    result[d] = ordered(s, d);
  }
  return result;
}

} // namespace torch_foo::memory_history
