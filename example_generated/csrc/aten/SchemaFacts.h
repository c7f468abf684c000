// What the CPU fallback (Fallback.cpp) needs to know about an operator's schema on every call, worked
// out on its first call and kept for the life of the process: parsing the schema's types and alias
// sets again each time costs as much as the copies of small tensors. The same table keeps the names
// of the operators that have run through the fallback (fallback_ops(), Fallback.h).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace torch_foo {

struct OpFacts {
  explicit OpFacts(c10::OperatorName n) : name(std::move(n)) {}

  c10::OperatorName name;
  std::vector<size_t> generators; // positions of the Generator arguments (seeded from the device's)
  // Every tensor argument is a single Tensor (no lists), there is no Device argument, and every
  // return is a new tensor, a written argument or not a tensor: the fallback's direct path handles the call.
  bool direct = true;
  std::vector<size_t> tensors; // positions of the Tensor arguments
  std::vector<bool> written; // for each of them: the operator writes it (in place, out=)
  std::vector<int> returns; // for each return: the entry of `tensors` it is, kNewTensor or kNoTensor
  // Positions of the Tensor[] arguments the operator only reads (cat, stack), and whether they are the
  // only reason the call is not direct: a graph capture stages their elements as it does single tensors.
  std::vector<size_t> read_lists;
  bool direct_but_read_lists = false;
  // Calls so far on each path of the fallback (fallback_paths(), Fallback.h): the synchronous one, and
  // the asynchronous one (set_async_fallback) when it served the call.
  mutable std::atomic<uint64_t> sync_calls{0};
  mutable std::atomic<uint64_t> async_calls{0};
};

constexpr int kNewTensor = -1;
constexpr int kNoTensor = -2;

// The facts of `op`, made on its first call, which is also when it joins fallback_ops() (and, with
// FOO_WARN_FALLBACK=1, warns). The reference stays valid until the process ends, whichever
// thread made the facts and whatever library is unloaded meanwhile.
const OpFacts& facts_for(const c10::OperatorHandle& op);

} // namespace torch_foo
