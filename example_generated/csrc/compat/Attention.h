// at::native::_fused_sdp_choice_stub (ATen/native/transformers/attention.h), the dispatch stub through
// which scaled_dot_product_attention asks a device which implementation to run;
// csrc/families/Attention.cpp registers the device's answer with REGISTER_PRIVATEUSE1_DISPATCH.
// A touchpoint of compat/TorchCompat.h.
#pragma once

#include "TorchCompat.h"

#if !__has_include(<ATen/native/transformers/attention.h>)
#error "torch_foo: torch moved ATen/native/transformers/attention.h (see compat/TorchCompat.h)"
#endif

#include <ATen/native/transformers/attention.h>
