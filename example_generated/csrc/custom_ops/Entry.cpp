// The extension's side of the custom operator library: the table of the operator library's
// functions that _custom_ops.so calls (fooCustomOpsEntry, csrc/kernels/custom_ops.h). Compiled into
// the extension (torch_foo._C), without torch's headers; it is also what links the custom operator's
// kernels into the extension, which calls none of them itself.
#include "../kernels/custom_ops.h"

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
