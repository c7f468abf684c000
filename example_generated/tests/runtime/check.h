// A minimal check harness for the runtime's C++ tests (no test framework to install or port).
#pragma once

#include <cstdio>
#include <vector>

inline int failures = 0;

#define EXPECT(condition) \
  do { \
    if (!(condition)) { \
      std::fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #condition); \
      ++failures; \
    } \
  } while (0)

#define EXPECT_CODE(call, code) \
  do { \
    const auto actual_ = (call); \
    if (actual_ != (code)) { \
      std::fprintf( \
          stderr, \
          "%s:%d: %s returned %d (%s), expected %s\n", \
          __FILE__, \
          __LINE__, \
          #call, \
          static_cast<int>(actual_), \
          fooGetLastErrorMessage(), \
          #code); \
      ++failures; \
    } \
  } while (0)

#define OK(call) EXPECT_CODE(call, fooSuccess)

// The checks of a feature's own file (<feature>_contract.cpp): each registers its entry point with a
// RegisterCheck at namespace scope, and the program runs those its build has.
using Check = void (*)();
inline std::vector<Check>& registered_checks() {
  static std::vector<Check> checks;
  return checks;
}
struct RegisterCheck {
  explicit RegisterCheck(Check check) {
    registered_checks().push_back(check);
  }
};

inline int finish(const char* suite) {
  if (failures == 0) {
    std::printf("%s: all checks passed\n", suite);
    return 0;
  }
  std::printf("%s: %d checks failed\n", suite, failures);
  return 1;
}
