// Entry points: streams and events. The rules a port keeps: argument checks, the fork state, a NULL
// stream is the default stream of the current device, new streams and events belong to the current
// device, and default streams cannot be destroyed.
#include "driver.h"
#include "internal.h"
#include "tracing_records.h"

using namespace torch_foo;
using namespace torch_foo::runtime;

namespace {

// The checks shared by calls that take one stream: not a bad fork, and NULL resolved.
fooError_t enter(fooStream_t* stream) {
  if (forked()) {
    return forked_child();
  }
  return resolve_stream(stream);
}

// The current device, initialised for a new stream or event.
fooError_t use_current_device(int* device) {
  if (forked()) {
    return forked_child();
  }
  *device = current_device();
  if (!valid_device(*device)) {
    return bad_device(*device);
  }
  use_device(*device);
  return fooSuccess;
}

} // namespace

extern "C" {

fooError_t fooStreamCreate(fooStream_t* stream) {
  return fooStreamCreateWithPriority(stream, fooStreamDefault, driver::kLeastPriority);
}

fooError_t fooStreamCreateWithPriority(fooStream_t* stream, unsigned int flags, int priority) {
  if (stream == nullptr) {
    return result(null_argument("stream"));
  }
  if ((flags & ~static_cast<unsigned>(fooStreamNonBlocking)) != 0) {
    return result(fail(fooErrorInvalidValue, "unknown stream flags 0x%x", flags));
  }
  int device = 0;
  if (const auto err = use_current_device(&device); err != fooSuccess) {
    return result(err);
  }
  return result(driver::stream_create(device, priority, stream));
}

fooError_t fooStreamDestroy(fooStream_t stream) {
  if (forked()) {
    return result(forked_child());
  }
  if (stream == nullptr) {
    return result(fail(fooErrorInvalidResourceHandle, "the default stream of a device cannot be destroyed"));
  }
  return result(driver::stream_destroy(stream));
}

fooError_t fooStreamQuery(fooStream_t stream) {
  if (const auto err = enter(&stream); err != fooSuccess) {
    return result(err);
  }
  return result(driver::stream_query(stream));
}

fooError_t fooStreamSynchronize(fooStream_t stream) {
  if (const auto err = enter(&stream); err != fooSuccess) {
    return result(err);
  }
  return result(driver::stream_synchronize(stream));
}

fooError_t fooStreamWaitEvent(fooStream_t stream, fooEvent_t event, unsigned int flags) {
  if (flags != 0) {
    return result(fail(fooErrorInvalidValue, "fooStreamWaitEvent takes no flags (got 0x%x)", flags));
  }
  if (const auto err = enter(&stream); err != fooSuccess) {
    return result(err);
  }
  return result(driver::stream_wait_event(stream, event));
}

fooError_t fooStreamGetPriority(fooStream_t stream, int* priority) {
  if (priority == nullptr) {
    return result(null_argument("priority"));
  }
  if (const auto err = enter(&stream); err != fooSuccess) {
    return result(err);
  }
  return result(driver::stream_priority(stream, priority));
}

fooError_t fooStreamGetDevice(fooStream_t stream, int* device) {
  if (device == nullptr) {
    return result(null_argument("device"));
  }
  if (const auto err = enter(&stream); err != fooSuccess) {
    return result(err);
  }
  return result(driver::stream_device(stream, device));
}

fooError_t fooDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  if (leastPriority != nullptr) {
    *leastPriority = driver::kLeastPriority;
  }
  if (greatestPriority != nullptr) {
    *greatestPriority = driver::kGreatestPriority;
  }
  return result(fooSuccess);
}

fooError_t fooEventCreate(fooEvent_t* event) {
  return fooEventCreateWithFlags(event, fooEventDefault);
}

fooError_t fooEventCreateWithFlags(fooEvent_t* event, unsigned int flags) {
  if (event == nullptr) {
    return result(null_argument("event"));
  }
  if ((flags & ~static_cast<unsigned>(fooEventBlockingSync | fooEventDisableTiming)) != 0) {
    return result(fail(fooErrorInvalidValue, "unknown event flags 0x%x", flags));
  }
  int device = 0;
  if (const auto err = use_current_device(&device); err != fooSuccess) {
    return result(err);
  }
  return result(driver::event_create(device, (flags & fooEventDisableTiming) == 0, event));
}

fooError_t fooEventRecord(fooEvent_t event, fooStream_t stream) {
  if (const auto err = enter(&stream); err != fooSuccess) {
    return result(err);
  }
  const tracing::ApiScope trace("fooEventRecord");
  return result(driver::event_record(event, stream));
}

fooError_t fooEventQuery(fooEvent_t event) {
  if (forked()) {
    return result(forked_child());
  }
  return result(driver::event_query(event));
}

fooError_t fooEventSynchronize(fooEvent_t event) {
  if (forked()) {
    return result(forked_child());
  }
  return result(driver::event_synchronize(event));
}

fooError_t fooEventElapsedTime(float* ms, fooEvent_t start, fooEvent_t end) {
  if (ms == nullptr) {
    return result(null_argument("ms"));
  }
  if (forked()) {
    return result(forked_child());
  }
  return result(driver::event_elapsed_time(ms, start, end));
}

fooError_t fooEventDestroy(fooEvent_t event) {
  if (forked()) {
    return result(forked_child());
  }
  return result(driver::event_destroy(event));
}

} // extern "C"
