#include "MemoryHistory.h"

#include "../runtime/runtime.h"
#include "Device.h"

#include <chrono>
#include <mutex>

namespace torch_foo::memory_history {
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

// The stack trace to keep for an allocation or free happening now (null unless wanted).
std::shared_ptr<c10::GatheredContext> context_for(Action action) {
  Recorder recorder = nullptr;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    const bool wanted = action == Action::Alloc ? s.context >= Context::State : s.context == Context::All;
    recorder = wanted ? s.recorder : nullptr;
  }
  return recorder != nullptr ? recorder() : nullptr;
}

// Appends an entry for `event` (a no-op unless the history is on).
void record(const AllocatorEvent& event) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.history || event.device < 0 || static_cast<size_t>(event.device) >= kMaxDevices) {
    return;
  }
  Entry entry{event.action, event.device, event.address, event.size, event.stream, now_us(), nullptr};
  if (s.context >= Context::Alloc) { // "state": stack traces only for live allocations, not in the history
    entry.context = event.context;
  }
  auto& ring = s.rings[entry.device];
  size_t& next = s.next[entry.device];
  if (ring.size() < s.max_entries) {
    ring.push_back(std::move(entry));
  } else {
    ring[next] = std::move(entry);
    next = (next + 1) % s.max_entries;
  }
}

constexpr AllocatorObserver kObserver{&context_for, &record};

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
  set_allocator_observer(s.history || s.context != Context::Never ? &kObserver : nullptr);
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
