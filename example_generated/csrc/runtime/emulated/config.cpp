// Configuration of the emulated devices, from the environment (docs: the environment variables
// table). Read once, when first needed; a value that does not parse keeps the default and says so
// on stderr: configuration is read before any caller could receive an error, and a typo must not go
// unnoticed.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "emulated.h"

namespace torch_foo::emulated {
namespace {

// Parses "1024", "512M", "8G"; returns false on anything else.
bool parse_bytes(const char* text, size_t* out) {
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (end == text) {
    return false;
  }
  unsigned shift = 0;
  switch (*end) {
    case '\0': break;
    case 'K':
    case 'k':
      shift = 10;
      ++end;
      break;
    case 'M':
    case 'm':
      shift = 20;
      ++end;
      break;
    case 'G':
    case 'g':
      shift = 30;
      ++end;
      break;
    default: return false;
  }
  if (*end == 'B' || *end == 'b') {
    ++end;
  }
  if (*end != '\0' || value > (~0ull >> shift)) {
    return false;
  }
  *out = static_cast<size_t>(value) << shift;
  return true;
}

Config read_config() {
  Config c;
  if (const char* env = std::getenv("FOO_DEVICE_COUNT")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 0 && n <= FOO_MAX_DEVICES) {
      c.device_count = static_cast<int>(n);
    } else {
      std::fprintf(
          stderr,
          "foo: ignoring FOO_DEVICE_COUNT=%s (expected 0 to %d); using %d devices\n",
          env,
          FOO_MAX_DEVICES,
          c.device_count);
    }
  }
  if (const char* env = std::getenv("FOO_DEVICE_MEMORY")) {
    size_t bytes = 0;
    if (parse_bytes(env, &bytes) && bytes > 0 && bytes <= (size_t{1} << 40)) {
      c.capacity = bytes;
    } else {
      std::fprintf(
          stderr,
          "foo: ignoring FOO_DEVICE_MEMORY=%s (expected a size such as 512M or 8G, "
          "at most 1T); using the default\n",
          env);
    }
  }
  if (const char* env = std::getenv("FOO_STRICT_MEMORY")) {
    c.strict = env[0] != '\0' && std::strcmp(env, "0") != 0;
  }
  return c;
}

} // namespace

const Config& config() {
  static const Config cfg = read_config();
  return cfg;
}

} // namespace torch_foo::emulated
