// Fault injection of the emulated foo device: FOO_FAULTS makes chosen operations fail the
// way a real device's do, so that tests can show that each failure reaches Python as a clear exception
// at the right place, and that the process keeps working and leaks nothing afterwards. Read once, when
// first needed (like config.cpp); a value that does not parse injects nothing and says so on stderr.
//
// The value is a comma-separated list of items (a KIND may appear in several):
//
//   KIND:N      the N-th operation of KIND fails (counted from 1 per kind, in the order of the calls)
//   KIND:N-M    the N-th to the M-th fail
//   KIND:p=P    each fails with probability P (0 to 1), drawn from a seeded generator: the same seed
//               and the same sequence of calls fail the same operations
//   seed:S      that generator's seed (default 0)
//
// KIND, where its one check is (each marked "fault injection") and how the operation fails:
//
//   malloc   device allocations (driver::malloc, memory.cpp): fooErrorMemoryAllocation, which
//            the caching allocator answers by freeing its cache and retrying, then torch.OutOfMemoryError
//   memcpy   copies, blocking or on a stream (driver::memcpy, driver::memcpy_async, memory.cpp):
//            fooErrorUnknown from the call, as a failed DMA transfer
//   kernel   kernel launches (driver::launch_kernel, kernels.cpp): the launch succeeds, the kernel
//            does not run, and the next call that synchronises with its stream reports
//            fooErrorLaunchFailure with the kernel's name, as a device reports a kernel fault
//   event    event records (driver::event_record, events.cpp): fooErrorUnknown from the call,
//            as a device whose event resources ran out
//
// A port deletes this file with the rest of emulated/: real devices fail on their own.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../internal.h"
#include "emulated.h"

namespace torch_foo::emulated {
namespace {

constexpr int kKinds = 4;
constexpr const char* kKindNames[kKinds] = {"malloc", "memcpy", "kernel", "event"};
constexpr const char* kOperations[kKinds] = {"device allocation", "copy", "kernel launch", "event record"};

constexpr int kMaxRanges = 8; // "KIND:N" items per kind

struct Range {
  uint64_t first = 0;
  uint64_t last = 0;
};

struct Selection {
  Range ranges[kMaxRanges]; // operations that fail
  int count = 0;
  double probability = 0; // or each fails with this probability
};

// Trivially destructible: operations may still be counted while static destructors run at exit.
struct Faults {
  bool any = false;
  uint64_t seed = 0;
  Selection selections[kKinds];
  char text[160] = {}; // the variable's value, for messages
};

struct Counters {
  std::atomic<uint64_t> operations[kKinds];
};

Counters counters; // trivially destructible too

bool parse_count(const char* text, const char* end, uint64_t* out) {
  char* stop = nullptr;
  const unsigned long long value = std::strtoull(text, &stop, 10);
  if (stop != end || stop == text || text[0] == '-' || value == 0) {
    return false;
  }
  *out = value;
  return true;
}

// Parses one "name:value" item of [item, end) into `faults`; false (with `why`) if it does not parse.
bool parse_item(const char* item, const char* end, Faults* faults, const char** why) {
  const char* colon = static_cast<const char*>(std::memchr(item, ':', static_cast<size_t>(end - item)));
  if (colon == nullptr) {
    *why = "an item is not KIND:VALUE";
    return false;
  }
  const auto name_length = static_cast<size_t>(colon - item);
  const char* value = colon + 1;
  const auto is = [&](const char* name) {
    return std::strlen(name) == name_length && std::strncmp(item, name, name_length) == 0;
  };
  if (is("seed")) {
    char* stop = nullptr;
    faults->seed = std::strtoull(value, &stop, 10);
    *why = "seed needs a number";
    return stop == end && stop != value;
  }
  for (int kind = 0; kind < kKinds; ++kind) {
    if (!is(kKindNames[kind])) {
      continue;
    }
    Selection& s = faults->selections[kind];
    if (end - value > 2 && value[0] == 'p' && value[1] == '=') {
      char* stop = nullptr;
      s.probability = std::strtod(value + 2, &stop);
      *why = "a probability is a number from 0 to 1";
      return stop == end && s.probability >= 0 && s.probability <= 1;
    }
    if (s.count == kMaxRanges) {
      *why = "too many items of one kind";
      return false;
    }
    Range& r = s.ranges[s.count++];
    const char* dash = static_cast<const char*>(std::memchr(value, '-', static_cast<size_t>(end - value)));
    *why = "a count is N or N-M with 1 <= N <= M";
    if (dash == nullptr) {
      const bool ok = parse_count(value, end, &r.first);
      r.last = r.first;
      return ok;
    }
    return parse_count(value, dash, &r.first) && parse_count(dash + 1, end, &r.last) && r.first <= r.last;
  }
  *why = "unknown kind (malloc, memcpy, kernel, event or seed)";
  return false;
}

Faults read_faults() {
  Faults faults;
  const char* env = std::getenv("FOO_FAULTS");
  if (env == nullptr || env[0] == '\0') {
    return faults;
  }
  std::snprintf(faults.text, sizeof(faults.text), "%s", env);
  for (const char* item = env; *item != '\0';) {
    const char* end = std::strchr(item, ',');
    end = end != nullptr ? end : item + std::strlen(item);
    const char* why = nullptr;
    if (!parse_item(item, end, &faults, &why)) {
      std::fprintf(stderr, "foo: ignoring FOO_FAULTS=%s (%s); no faults are injected\n", env, why);
      return Faults();
    }
    item = *end == ',' ? end + 1 : end;
  }
  faults.any = true;
  return faults;
}

const Faults& faults() {
  static const Faults parsed = read_faults();
  return parsed;
}

// A uniform number in [0, 1) for operation `n` of `kind` (splitmix64 of the seed, kind and count).
double draw(uint64_t seed, int kind, uint64_t n) {
  uint64_t z = seed ^ (static_cast<uint64_t>(kind + 1) << 56) ^ n;
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

} // namespace

uint64_t injected_fault(Fault kind) {
  const Faults& f = faults();
  if (!f.any) {
    return 0;
  }
  const int k = static_cast<int>(kind);
  const uint64_t n = counters.operations[k].fetch_add(1, std::memory_order_relaxed) + 1;
  const Selection& s = f.selections[k];
  bool fails = s.probability > 0 && draw(f.seed, k, n) < s.probability;
  for (int i = 0; i < s.count && !fails; ++i) {
    fails = n >= s.ranges[i].first && n <= s.ranges[i].last;
  }
  return fails ? n : 0;
}

fooError_t inject(Fault kind, fooError_t code) {
  const uint64_t n = injected_fault(kind);
  if (n == 0) {
    return fooSuccess;
  }
  return runtime::fail(code, "%s", fault_message(kind, n).c_str());
}

std::string fault_message(Fault kind, uint64_t n) {
  const int k = static_cast<int>(kind);
  return "injected fault: " + std::string(kOperations[k]) + " " + std::to_string(n) +
      " failed (FOO_FAULTS=" + faults().text + ")";
}

} // namespace torch_foo::emulated
