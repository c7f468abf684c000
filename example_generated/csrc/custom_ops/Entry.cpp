// The extension's side of the custom operator library (Entry.h): the table of the operator
// library's functions that _custom_ops.so calls. Compiled into the extension (torch_foo._C), without
// torch's headers.
#include "Entry.h"

extern "C" {

const fooCustomOpsEntry* fooCustomOpsGetEntry(void) {
  static const fooCustomOpsEntry entry = {
      FOO_CUSTOM_OPS_ENTRY_VERSION,
      sizeof(fooCustomOpsEntry),
      &fooOpBiasGelu,
      &fooOpBiasGeluBackward,
      &fooOpGetLastErrorMessage,
      &fooGetErrorString,
  };
  return &entry;
}

} // extern "C"
