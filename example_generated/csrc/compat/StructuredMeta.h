// The structured meta functions of the matrix products (at::meta::structured_mm, _addmm, _bmm,
// _baddbmm), which torch's CPU kernels run first and csrc/aten/Blas.cpp runs too, so that the device
// raises what the CPU raises: a touchpoint of compat/TorchCompat.h.
#pragma once

#include "TorchCompat.h"

#if !__has_include(<ATen/ops/mm_meta.h>)
#error "torch_foo: torch no longer generates ATen/ops/<op>_meta.h (see compat/TorchCompat.h)"
#endif

#include <ATen/ops/addmm_meta.h>
#include <ATen/ops/baddbmm_meta.h>
#include <ATen/ops/bmm_meta.h>
#include <ATen/ops/mm_meta.h>
