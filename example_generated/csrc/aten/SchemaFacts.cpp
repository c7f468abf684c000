// The CPU fallback's cache of schema facts (SchemaFacts.h) and its list of the operators that ran
// through it (fallback_ops(), Fallback.h).
#include "SchemaFacts.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <c10/util/Exception.h>

#include "Fallback.h"

namespace torch_foo {
namespace {

bool warn_on_fallback() {
  static const bool enabled = [] {
    const char* env = std::getenv("FOO_WARN_FALLBACK");
    return env != nullptr && env[0] != '\0' && env[0] != '0';
  }();
  return enabled;
}

// Whether a schema type is `kind`, or an optional of it.
bool is_type_or_optional(const c10::TypePtr& type, c10::TypeKind kind) {
  if (type->kind() == c10::TypeKind::OptionalType) {
    return type->castRaw<c10::OptionalType>()->getElementType()->kind() == kind;
  }
  return type->kind() == kind;
}

bool is_tensor_type(const c10::TypePtr& type) {
  return is_type_or_optional(type, c10::TypeKind::TensorType);
}

// True when a schema type holds tensors in another form than a single Tensor (lists, tuples) or is
// a device (which the general path replaces by the CPU).
bool needs_general_path(const c10::TypePtr& type) {
  if (is_tensor_type(type)) {
    return false;
  }
  if (type->kind() == c10::TypeKind::DeviceObjType) {
    return true;
  }
  for (const auto& contained : type->containedTypes()) {
    if (is_tensor_type(contained) || contained->kind() == c10::TypeKind::DeviceObjType ||
        needs_general_path(contained)) { // Tensor[], Tensor?[], (Tensor, ...) ...
      return true;
    }
  }
  return false;
}

std::unique_ptr<OpFacts> facts_of(const c10::FunctionSchema& schema) {
  auto facts = std::make_unique<OpFacts>(schema.operator_name());
  const auto& arguments = schema.arguments();
  bool other_general = false; // a reason for the general path other than a read-only Tensor[]
  for (size_t i = 0; i < arguments.size(); ++i) {
    const auto& type = arguments[i].type();
    if (is_type_or_optional(type, c10::TypeKind::GeneratorType)) {
      facts->generators.push_back(i);
    }
    if (is_tensor_type(type)) {
      facts->tensors.push_back(i);
      const auto* alias = arguments[i].alias_info();
      facts->written.push_back(alias != nullptr && alias->isWrite());
    } else if (needs_general_path(type)) {
      facts->direct = false;
      const auto* alias = arguments[i].alias_info();
      if (type->kind() == c10::TypeKind::ListType && type->containedType(0)->kind() == c10::TypeKind::TensorType &&
          (alias == nullptr || !alias->isWrite())) {
        facts->read_lists.push_back(i);
      } else {
        other_general = true;
      }
    }
  }
  for (const auto& r : schema.returns()) {
    const auto* alias = r.alias_info();
    if (!is_tensor_type(r.type())) {
      if (needs_general_path(r.type()) || alias != nullptr) {
        facts->direct = false;
        other_general = true;
      }
      facts->returns.push_back(kNoTensor);
    } else if (alias == nullptr) {
      facts->returns.push_back(kNewTensor);
    } else if (!alias->isWrite()) {
      facts->direct = false; // a view: the general path warns
      other_general = true;
      facts->returns.push_back(kNoTensor);
    } else {
      int found = kNoTensor; // the written argument with the same alias set
      for (size_t t = 0; t < facts->tensors.size() && found == kNoTensor; ++t) {
        const auto* input = arguments[facts->tensors[t]].alias_info();
        if (input != nullptr && (input == alias || *input == *alias)) {
          found = static_cast<int>(t);
        }
      }
      if (found == kNoTensor) {
        facts->direct = false;
        other_general = true;
      }
      facts->returns.push_back(found);
    }
  }
  facts->direct_but_read_lists = !facts->direct && !other_general && !facts->read_lists.empty();
  return facts;
}

// Every operator's facts, by the address of its schema. Facts are never destroyed while the process
// runs: a caller keeps a reference to them for the whole call, so a second thread that worked out the
// same facts concurrently keeps the first ones, and an entry whose schema was freed with its library
// (another schema now at that address) moves to `retired` instead of being deleted. The table itself
// is never destroyed either (a thread still inside an operator while the process exits must not find
// it torn down by static destructors). The names of the operators seen so far (fallback_ops()) live
// here for the same reason.
struct FactsTable {
  std::shared_mutex mutex;
  std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OpFacts>> by_schema;
  std::vector<std::unique_ptr<OpFacts>> retired;
  std::mutex seen_mutex;
  std::unordered_set<c10::OperatorName> seen;
};

FactsTable& facts_table() {
  static auto* table = new FactsTable();
  return *table;
}

} // namespace

const OpFacts& facts_for(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  FactsTable& table = facts_table();
  {
    std::shared_lock<std::shared_mutex> lock(table.mutex);
    const auto it = table.by_schema.find(&schema);
    // The name guards against a schema freed with its library and another one made at its address.
    if (it != table.by_schema.end() && it->second->name == schema.operator_name()) {
      return *it->second;
    }
  }
  auto facts = facts_of(schema);
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(table.seen_mutex);
    first = table.seen.insert(facts->name).second;
  }
  if (first && warn_on_fallback()) {
    TORCH_WARN("foo: ", facts->name, " has no foo kernel and runs on the CPU fallback");
  }
  std::unique_lock<std::shared_mutex> lock(table.mutex);
  auto [it, inserted] = table.by_schema.try_emplace(&schema);
  if (!inserted) {
    if (it->second->name == facts->name) {
      return *it->second; // another thread got here first, and its caller may be using them
    }
    table.retired.push_back(std::move(it->second));
  }
  it->second = std::move(facts);
  return *it->second;
}

std::vector<std::string> fallback_ops() {
  std::vector<std::string> names;
  FactsTable& table = facts_table();
  {
    std::lock_guard<std::mutex> lock(table.seen_mutex);
    for (const auto& name : table.seen) {
      names.push_back(c10::toString(name));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::tuple<std::string, uint64_t, uint64_t>> fallback_paths() {
  std::map<std::string, std::pair<uint64_t, uint64_t>> calls;
  FactsTable& table = facts_table();
  {
    const std::shared_lock<std::shared_mutex> lock(table.mutex);
    const auto add = [&](const OpFacts& facts) {
      auto& entry = calls[c10::toString(facts.name)];
      entry.first += facts.sync_calls.load(std::memory_order_relaxed);
      entry.second += facts.async_calls.load(std::memory_order_relaxed);
    };
    for (const auto& [schema, facts] : table.by_schema) {
      add(*facts);
    }
    for (const auto& facts : table.retired) {
      add(*facts);
    }
  }
  std::vector<std::tuple<std::string, uint64_t, uint64_t>> paths;
  paths.reserve(calls.size());
  for (auto& [name, counts] : calls) {
    paths.emplace_back(name, counts.first, counts.second);
  }
  return paths;
}

} // namespace torch_foo
