// Entry points: activity tracing (tracing.h). The rules a port keeps: argument checks, one
// subscriber at a time, the tool's ids kept per host thread. The records themselves are made by
// tracing_records.cpp, stamped with the device layer's clock.
#include "driver.h"
#include "internal.h"
#include "tracing_records.h"

using namespace torch_foo;
using namespace torch_foo::runtime;

namespace {

fooError_t bad_kind(const char* what, int kind) {
  return fail(fooErrorInvalidValue, "%d is not a %s", kind, what);
}

bool valid_external_kind(fooExternalCorrelationKind kind) {
  return kind >= 0 && kind < fooExternalCorrelationKindCount;
}

} // namespace

extern "C" {

fooError_t fooTracingSubscribe(fooTracingCallback callback, void* userData) {
  if (tracing::subscribe(callback, userData) != fooSuccess) {
    return result(fail(fooErrorNotPermitted, "another tool is subscribed to tracing"));
  }
  return result(fooSuccess);
}

fooError_t fooTracingEnable(fooActivityKind kind, int enable) {
  if (kind < 0 || kind >= fooActivityKindCount) {
    return result(bad_kind("fooActivityKind", kind));
  }
  tracing::enable(kind, enable != 0);
  return result(fooSuccess);
}

fooError_t fooTracingFlush(void) {
  tracing::flush();
  return result(fooSuccess);
}

fooError_t fooTracingGetTimestamp(uint64_t* nanoseconds) {
  if (nanoseconds == nullptr) {
    return result(null_argument("nanoseconds"));
  }
  *nanoseconds = driver::timestamp();
  return result(fooSuccess);
}

fooError_t fooTracingGetStreamId(fooStream_t stream, uint32_t* id) {
  if (id == nullptr) {
    return result(null_argument("id"));
  }
  if (forked()) {
    return result(forked_child());
  }
  if (const auto err = resolve_stream(&stream); err != fooSuccess) {
    return result(err);
  }
  return result(driver::stream_trace_id(stream, id));
}

fooError_t fooTracingPushExternalId(fooExternalCorrelationKind kind, uint64_t id) {
  if (!valid_external_kind(kind)) {
    return result(bad_kind("fooExternalCorrelationKind", kind));
  }
  tracing::push_external(kind, id);
  return result(fooSuccess);
}

fooError_t fooTracingPopExternalId(fooExternalCorrelationKind kind, uint64_t* id) {
  if (!valid_external_kind(kind)) {
    return result(bad_kind("fooExternalCorrelationKind", kind));
  }
  if (!tracing::pop_external(kind, id)) {
    return result(fail(fooErrorInvalidValue, "no external id of kind %d was pushed on this thread", kind));
  }
  return result(fooSuccess);
}

} // extern "C"
