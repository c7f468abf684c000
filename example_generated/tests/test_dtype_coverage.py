"""CUDA's dtype coverage: operators whose CUDA kernels accept more dtypes than their CPU kernels
work on the foo device in those dtypes too.

Generated from PyTorch's OpInfo database: each operator whose CUDA dtypes include dtypes that its CPU
dtypes do not (complex32 arithmetic, half pooling, histc of integers, abs of bool, half FFTs, ...)
runs its sample inputs on the device in each such dtype. The reference is the CPU computing the same
sample in a wider dtype that holds every value exactly (float32 for half and bfloat16, complex64
for complex32, uint8 for bool, float64 for integers), its results converted to the dtype CUDA
returns; the device's results must have that dtype and equal them within OpInfo's tolerances
(those it declares for CUDA in its own reference tests, else the dtype's defaults). Gradients
likewise, for CUDA's backward dtypes. The device gets these dtypes from the fallback's widening
table (csrc/families/WiderDtypes.cpp) or from kernels of its own (csrc/families/WiderDtypeOps.cpp); a new
torch that widens CUDA's coverage adds cases here.
"""

import contextlib
import itertools
import os

import pytest
import torch
import torch.utils._pytree as pytree
from torch.testing._internal.common_device_type import toleranceOverride
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._python_dispatch import TorchDispatchMode

pytestmark = pytest.mark.slow  # a minute or more on two cores: pytest -m "not slow" leaves this file out

DEVICE = "foo"
# Sample inputs per operator and dtype (FOO_OPINFO=full: all of them, as in test_opinfo.py).
MAX_SAMPLES = None if os.environ.get("FOO_OPINFO", "") == "full" else 8

WIDER = {
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
    torch.complex32: torch.complex64,
    torch.bool: torch.uint8,
    torch.uint8: torch.float64,
    torch.int8: torch.float64,
    torch.int16: torch.float64,
    torch.int32: torch.float64,
    torch.int64: torch.float64,
    torch.float32: torch.float32,
    torch.float64: torch.float64,
    # float8 (CUDA scatters them from torch 2.15): float32 holds every value of each.
    torch.float8_e4m3fn: torch.float32,
    torch.float8_e4m3fnuz: torch.float32,
    torch.float8_e5m2: torch.float32,
    torch.float8_e5m2fnuz: torch.float32,
    torch.complex64: torch.complex64,
    torch.complex128: torch.complex128,
}
# The dtype CUDA returns where the wide computation returned a dtype: the narrow dtype for the wide
# one, and the matching real or complex dtype (|complex32| is half; an FFT of half is complex32).
COUNTERPART = {
    (torch.complex32, torch.float32): torch.float16,
    (torch.float16, torch.complex64): torch.complex32,
}

SKIP = {
    "torch.ops.aten._flash_attention_forward": "CUDA's own flash-attention kernel, which other devices do not have: "
    "scaled_dot_product_attention reaches this device's kernel through the overrideable operator (test_attention.py)",
    "torch.ops.aten._efficient_attention_forward": "CUDA's own memory-efficient attention kernel, which other devices "
    "do not have: scaled_dot_product_attention reaches this device's kernel through the overrideable operator",
}
SKIP["nn.functional.batch_norm.without_cudnn"] = (
    "nn.functional.batch_norm with cuDNN disabled, which only CUDA has; the CPU has batch_norm's dtypes "
    "(test_opinfo.py compares them)"
)
XFAIL: dict[str, str] = {}  # failures to investigate: operator -> reason (strict: an entry that passes fails)
# The same for the gradients of one case, "<operator>-<dtype>" (CUDA dtypes new in torch 2.14:
# docs/updating.md in the template repository says what is left).
XFAIL_GRADIENTS: dict[str, str] = {
    "stft-bfloat16": "4 of 100 gradient elements differ from the reference by one bfloat16 step beyond the "
    "tolerance: the overlapping frames' gradients add up in bfloat16 on the device, one operator at a time "
    "in float in the reference",
    "sparse.sampled_addmm-float16": "the CPU fallback's sparse matrix product of half (the gradient's "
    "addmm_out_sparse_csr_impl_mkl) has no kernel, and is called inside the CPU kernel, past the widening",
}
# Samples that draw random numbers cannot equal the CPU's: only the others are compared.
DETERMINISTIC_SAMPLES = {
    "nn.functional.rrelu": lambda sample: not sample.kwargs.get("training", False),
}


# OpInfo's tests that compare an operator on CUDA with a reference, as this file does; their
# tolerances for an operator and dtype are the ones that apply here.
REFERENCE_TESTS = {"test_complex_half_reference_testing", "test_compare_cpu"}


def tolerance(op, dtype) -> dict:
    """The loosest tolerance OpInfo declares for `op` in `dtype` on CUDA in its reference tests (none:
    torch.testing's default for the dtype)."""
    atol = rtol = None
    for info in op.decorators:
        if getattr(info, "device_type", "cpu") not in (None, "cuda") or info.cls_name not in (None, "TestCommon"):
            continue
        if info.test_name not in (None, *REFERENCE_TESTS) or (info.dtypes is not None and dtype not in info.dtypes):
            continue
        for decorator in info.decorators:
            if isinstance(decorator, toleranceOverride) and dtype in decorator.d:
                atol = max(atol or 0, decorator.d[dtype].atol)
                rtol = max(rtol or 0, decorator.d[dtype].rtol)
    return {} if atol is None else {"atol": atol, "rtol": rtol}


def nansum_definition(x, dim=None, keepdim=False, *, dtype=None):
    """nansum where the CPU has no kernel in any dtype (complex): the sum of the elements that are not
    NaN (a complex number is NaN when either part is), as CUDA's kernel and NumPy's nansum define it."""
    return torch.sum(torch.where(torch.isnan(x), 0, x), dim, keepdim, dtype=dtype)


def nanmean_definition(x, dim=None, keepdim=False, *, dtype=None):
    return nansum_definition(x, dim, keepdim, dtype=dtype) / torch.sum(~torch.isnan(x), dim, keepdim)


DEFINITIONS = {"nansum": nansum_definition, "nanmean": nanmean_definition}


def op_key(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def cuda_only(op, backward: bool) -> list[torch.dtype]:
    if backward:
        return sorted(op.supported_backward_dtypes("cuda") - op.supported_backward_dtypes("cpu"), key=str)
    return sorted(op.supported_dtypes("cuda") - op.supported_dtypes("cpu"), key=str)


def case(op, dtype, backward=False):
    key = op_key(op)
    case_id = f"{key}-{str(dtype).removeprefix('torch.')}"
    reason = XFAIL.get(key) or (XFAIL_GRADIENTS.get(case_id) if backward else None)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(op, dtype, id=case_id, marks=marks)


CASES = [case(op, dtype) for op in op_db for dtype in cuda_only(op, backward=False)]
GRAD_CASES = [
    case(op, dtype, backward=True) for op in op_db if op.supports_autograd for dtype in cuda_only(op, backward=True)
]


def samples(op, dtype, requires_grad=False):
    key = op_key(op)
    if key in SKIP:
        pytest.skip(SKIP[key])
    keep = DETERMINISTIC_SAMPLES.get(key, lambda sample: True)
    found = [s for s in itertools.islice(op.sample_inputs(DEVICE, dtype, requires_grad=requires_grad), MAX_SAMPLES)]
    return [s for s in found if keep(s)]


class WidenEachOperator(TorchDispatchMode):
    """CUDA's arithmetic on the CPU: each ATen operator with an argument of the narrow dtype computes
    in the wide dtype and rounds its results back to the narrow one, as CUDA's kernels compute in
    their wider "opmath" type. An operator with an argument of a dtype that outranks the narrow one
    (complex32 * float32 is complex64), views and explicit dtype requests run as they are. Bool and
    integer operators compute in the wide dtype only where the CPU has no kernel."""

    def __init__(self, narrow):
        super().__init__()
        self.narrow = narrow
        self.wide = WIDER[narrow]

    def keeps_narrow(self, dtype) -> bool:
        """Whether an argument of `dtype` leaves the call's result type the narrow dtype."""
        try:
            return torch.promote_types(dtype, self.narrow) == self.narrow
        except RuntimeError:  # float8 promotes with no other dtype: an integer is an index (scatter's)
            return not (dtype.is_floating_point or dtype.is_complex)

    def applies(self, func, args, kwargs) -> bool:
        leaves = pytree.tree_leaves((args, kwargs))
        tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
        requested = [d for d in leaves if isinstance(d, torch.dtype)]
        return (
            not func.is_view
            and any(t.dtype == self.narrow for t in tensors) | (self.narrow in requested)
            # zero-dimensional tensors do not outrank tensors of the same category in type promotion
            and all(self.keeps_narrow(t.dtype) for t in tensors if t.dim() > 0)
            and all(d == self.narrow for d in requested)
        )

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.applies(func, args, kwargs):
            return func(*args, **kwargs)
        if not (self.narrow.is_floating_point or self.narrow.is_complex):
            # bool and integers have no wider arithmetic: only a missing CPU kernel needs the wide dtype
            try:
                return func(*args, **kwargs)
            except NotImplementedError:
                pass
        written = {}  # id of a wide copy -> the narrow tensor the operator writes

        def widen(x, writes=False):
            if isinstance(x, torch.dtype):
                return self.wide if x == self.narrow else x
            if not isinstance(x, torch.Tensor) or x.dtype != self.narrow:
                return x
            wide = x.to(self.wide)
            if writes:
                written[id(wide)] = (x, wide)
            return wide

        schema = func._schema.arguments
        writes = {a.name for a in schema if a.alias_info is not None and a.alias_info.is_write}
        wide_args = [
            pytree.tree_map(lambda x, w=(schema[i].name in writes): widen(x, w), a) for i, a in enumerate(args)
        ]
        wide_kwargs = {k: pytree.tree_map(lambda x, w=(k in writes): widen(x, w), v) for k, v in kwargs.items()}
        result = func(*wide_args, **wide_kwargs)
        for narrow, wide in written.values():
            narrow.resize_(wide.shape).copy_(wide)

        def narrow_result(t):
            if not isinstance(t, torch.Tensor):
                return t
            if id(t) in written:
                return written[id(t)][0]
            return narrowed_tensor(t, self.narrow)

        return pytree.tree_map(narrow_result, result)


def narrowed_tensor(t, dtype):
    """A result of the wide computation in the dtype CUDA returns for `dtype`."""
    if t.dtype == WIDER[dtype] and t.dtype != dtype:
        return t.to(dtype)
    if (dtype, t.dtype) in COUNTERPART:
        return t.to(COUNTERPART[(dtype, t.dtype)])
    return t


def cpu_sample(sample, dtype=None):
    """The sample on the CPU (tensors of `dtype` converted to the wide dtype), each tensor once: a
    tensor used twice stays one tensor, so gradients accumulate the same way."""
    copies = {}

    def to_cpu(t):
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) not in copies:
            copy = t.detach().cpu()
            if copy.dtype == dtype:
                copy = copy.to(WIDER[dtype])
            copies[id(t)] = copy.requires_grad_(t.requires_grad)
        return copies[id(t)]

    return sample.transform(to_cpu)


class Observed(TorchDispatchMode):
    """Runs every operator as it is. The device side of a comparison runs under it because the
    reference runs under a dispatch mode, and some autograd formulas choose their arithmetic by
    whether a tensor is a subclass (prod's backward divides by the input, or multiplies cumulative
    products under a mode): both sides then compute the same formula."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class Reference:
    """How the CPU computes the reference of an operator in `dtype`: every operator in the wide dtype
    (WidenEachOperator), or the whole operator in the wide dtype for the front ends that the device
    widens as a whole (the FFTs: csrc/families/WiderDtypeOps.cpp)."""

    def __init__(self, op, dtype):
        self.op = op
        self.dtype = dtype
        self.whole = op.name.startswith("fft.")
        # CUDA's FFTs of bfloat16 (torch 2.14 on, when OpInfo starts listing them, torch.stft's
        # included) transform in float and return float's result: there is no complex bfloat16.
        self.float_results = dtype == torch.bfloat16 and (self.whole or op.name == "stft")
        self.function = DEFINITIONS.get(op_key(op), op)

    def sample(self, sample):
        return cpu_sample(sample, self.dtype if self.whole else None)

    def mode(self):
        return contextlib.nullcontext() if self.whole else WidenEachOperator(self.dtype)

    def narrowed(self, tree):
        return pytree.tree_map(lambda t: narrowed_tensor(t, self.dtype) if isinstance(t, torch.Tensor) else t, tree)

    def results(self, tree):
        """The reference's results in the dtypes CUDA returns (their gradients are narrowed, as the
        inputs are)."""
        return tree if self.float_results else self.narrowed(tree)


def on_cpu(tree):
    return pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, tree)


def run(op, sample):
    return sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))


def tensors(tree):
    return [t for t in pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]


def test_cases_are_generated():
    """The audit finds what it should: histc of int32 (mixture-of-experts routing) is one case."""
    assert "histc-int32" in [case.id for case in CASES]
    assert "nn.functional.avg_pool3d-bfloat16" in [case.id for case in GRAD_CASES]


@pytest.mark.parametrize("op,dtype", CASES)
def test_forward(op, dtype):
    checked = 0
    reference = Reference(op, dtype)
    for sample in samples(op, dtype):
        with reference.mode():
            expected = reference.results(run(reference.function, reference.sample(sample)))
        result = run(op, sample)
        assert all(t.device.type == DEVICE for t in tensors(result)), "a result left the device"
        torch.testing.assert_close(
            on_cpu(result), expected, equal_nan=True, **tolerance(op, dtype), msg=lambda m, s=sample: f"{s}: {m}"
        )
        checked += 1
    assert checked > 0, "no sample input to compare"


@pytest.mark.parametrize("op,dtype", GRAD_CASES)
def test_gradients(op, dtype):
    checked = 0
    reference = Reference(op, dtype)
    for sample in samples(op, dtype, requires_grad=True):
        cpu = reference.sample(sample)
        with Observed():
            outputs = [t for t in tensors(run(op, sample)) if t.requires_grad]
        inputs = [t for t in tensors([sample.input, sample.args, sample.kwargs]) if t.requires_grad]
        with reference.mode():
            expected_outputs = [t for t in tensors(run(reference.function, cpu)) if t.requires_grad]
        expected_inputs = [t for t in tensors([cpu.input, cpu.args, cpu.kwargs]) if t.requires_grad]
        if not outputs or not inputs:
            continue
        # Output gradients drawn on the CPU in float, rounded to the device's output dtype.
        grads = [
            torch.randn(t.shape, dtype=torch.cdouble if t.is_complex() else torch.double).to(t.dtype) for t in outputs
        ]
        with Observed():
            result = torch.autograd.grad(outputs, inputs, [g.to(DEVICE) for g in grads], allow_unused=True)
        with reference.mode():
            expected = torch.autograd.grad(
                expected_outputs,
                expected_inputs,
                [g.to(t.dtype) for g, t in zip(grads, expected_outputs, strict=True)],
                allow_unused=True,
            )
        torch.testing.assert_close(
            on_cpu(result),
            reference.narrowed(expected),
            equal_nan=True,
            **tolerance(op, dtype),
            msg=lambda m, s=sample: f"{s}: {m}",
        )
        checked += 1
    assert checked > 0, "no sample input with gradients to compare"
