// The Python entry point of the fooccl c10d backend (Backend.cpp), added to torch_foo._C by
// csrc/python/Module.cpp. Declared without Python's headers: this header is all Module.cpp needs.
#pragma once

struct _object; // PyObject

namespace torch_foo::distributed {

// Adds _ccl_backend(collectives, p2p, host, rank, size, timeout_ms, check_calls) to `module`: a new
// backend whose staged communicator exchanges over the Gloo groups `collectives` and `p2p` (checking
// that ranks agree on collectives as check_calls says: "all", "changes" or "off"), and which hands CPU tensors to the
// Gloo group `host` (torch_foo/distributed.py creates all three).
void add_bindings(_object* module);

} // namespace torch_foo::distributed
