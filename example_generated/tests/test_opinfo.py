"""PyTorch's device-generic operator tests on the foo device.

PyTorch describes its operators in an OpInfo database (torch.testing._internal.common_methods_invocations
.op_db: about 700 entries with sample inputs, supported dtypes and known tolerances) and runs tests
generated from it on every backend through instantiate_device_type_tests, which knows PrivateUse1
backends (PrivateUse1TestBase). Like PyTorch's test_compare_cpu, these tests run each sample on the
device and on the CPU and compare the results; a second test compares the gradients of every
differentiable output with respect to every input that requires grad.

What runs by default (a few minutes on two cores):
  - forward: every operator of op_db, in float32, and in int64, bool and bfloat16 where supported;
  - gradients: every differentiable operator, in float32 and bfloat16.
Set FOO_OPINFO=full to run every dtype each operator supports (much longer).
Operators that cannot match the CPU (random numbers, uninitialised memory, CUDA-only or sparse
layouts) are skipped with the reason in SKIP; a failure to investigate would be listed in XFAIL, which
is strict: an entry that starts passing fails, so the list stays true. Where the device and the CPU
differ beyond tolerance, the operator is computed again on the CPU in double precision and the device
passes if it is at least as accurate as the CPU (assert_at_least_as_accurate).
"""

import itertools
import os

import pytest
import torch
import torch.utils._pytree as pytree
from random_opinfos import RANDOM_OPINFOS
from torch.testing._internal.common_device_type import OpDTypes, instantiate_device_type_tests, ops  # noqa: E402
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402
from torch.testing._internal.common_utils import TestCase  # noqa: E402

import torch_foo  # noqa: F401  before common_device_type, which looks for the PrivateUse1 backend

pytestmark = pytest.mark.slow  # minutes per run: pytest -m "not slow" leaves this file out

FULL = os.environ.get("FOO_OPINFO", "") == "full"
FORWARD_DTYPES = None if FULL else (torch.float32, torch.int64, torch.bool, torch.bfloat16)
GRAD_DTYPES = None if FULL else (torch.float32, torch.bfloat16)
# Sample inputs per operator and dtype (the first ones: the generators start with the typical cases).
MAX_SAMPLES = None if FULL else 8

RANDOM = "draws random numbers: the device generator is not the CPU's (tests/test_random.py checks it)"
UNINITIALISED = "returns uninitialised memory"
SKIP = {
    **dict.fromkeys(RANDOM_OPINFOS, RANDOM),
    **dict.fromkeys(
        ["empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided"], UNINITIALISED
    ),
    **dict.fromkeys(
        [
            "jiterator_2inputs_2outputs",
            "jiterator_4inputs_with_extra_args",
            "jiterator_binary",
            "jiterator_binary_return_by_ref",
            "jiterator_unary",
        ],
        "jiterator compiles CUDA source at run time: CUDA only",
    ),
    "nn.functional.scaled_dot_product_attention": "PyTorch's OpInfo skips test_compare_cpu for it on every device: "
    "a fused kernel and the CPU's differ by rounding that exp() amplifies at the samples' magnitudes, and samples with "
    "dropout draw random numbers (tests/test_attention.py compares the device's kernel with the math path)",
    "as_strided.partial_views": "reads storage outside the input view, which a CPU copy of the view does not contain",
}
XFAIL: dict[str, str] = {}
# Tolerances wider than torch.testing's defaults, per operator and dtype, with the reason.
CPU_TAIL = (
    "the CPU computes the elements after its last full vector (a 5x5 sample has 9 of them) in half-precision "
    "arithmetic, rounding alpha * other before the sum; the device, like CUDA and the CPU's vector loop, rounds once "
    "(its result is the exact sum rounded). With cancellation, the CPU's tail is off by up to half an ulp of "
    "alpha * other (0.0625 in bfloat16, 0.008 in float16 at the samples' magnitudes)"
)
TOLERANCE = {
    ("add", torch.bfloat16): ({"atol": 0.07, "rtol": 1.6e-2}, CPU_TAIL),
    ("add", torch.float16): ({"atol": 1e-2, "rtol": 2e-3}, CPU_TAIL),
    ("sub", torch.float16): ({"atol": 1e-2, "rtol": 2e-3}, CPU_TAIL),
}


# The name of a dtype in the CPU's "not implemented for" errors.
CPU_DTYPE_NAMES = {torch.complex32: "ComplexHalf"}
# When the device and the CPU differ beyond tolerance, both are measured against the operator computed
# on the CPU in double precision: a device result at least as close to it as the CPU's is rounding that
# the sample's conditioning amplified (a gradient of 17,000 made of cancelling terms, half-precision
# steps where the device computes in float as CUDA does), not an error. assert_at_least_as_accurate.
# complex32 gradients without a CPU reference: the device's distance from the double-precision result,
# in unit roundoffs of half precision (2**-11) of the gradient's largest element.
HALF_UNIT_ROUNDOFFS = 8
REFERENCE_DTYPES = {
    torch.float16: torch.float64,
    torch.bfloat16: torch.float64,
    torch.float32: torch.float64,
    torch.complex32: torch.complex128,
    torch.complex64: torch.complex128,
}


def op_key(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def leaves_on(device=None, widen=False):
    """A function for SampleInput.transform: each tensor to a new leaf on `device` (None: where it is),
    each tensor once (a tensor used twice in a sample stays one tensor, so gradients accumulate the same
    way). The gradient test gives both sides leaves: a sample's own tensors may be views that autograd
    does not reach (istft's window slices), and a copy is a leaf it does reach. widen: floating and
    complex tensors in double precision (the reference of `assert_at_least_as_accurate`)."""
    copies = {}

    def to_leaf(t):
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) not in copies:
            leaf = t.detach() if device is None else t.detach().to(device)
            if widen:
                leaf = leaf.to(REFERENCE_DTYPES.get(leaf.dtype, leaf.dtype))
            copies[id(t)] = leaf.requires_grad_(t.requires_grad)
        return copies[id(t)]

    return to_leaf


def run(op, sample):
    return sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))


def tensors(tree):
    return [t for t in pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]


def samples(op, device, dtype, requires_grad=False):
    return itertools.islice(op.sample_inputs(device, dtype, requires_grad=requires_grad), MAX_SAMPLES)


def tolerance(op, dtype) -> dict:
    return TOLERANCE.get((op_key(op), dtype), ({}, ""))[0]


def farther_than_cpu(result, expected, reference, dtype):
    """The tensors whose device result is farther from the double-precision reference than twice the
    CPU's plus torch.testing's tolerance for `dtype`, as (index, device's error, CPU's error). Errors are
    the largest over the tensor (normwise): in an ill-conditioned computation rounding spreads over every
    element, and which elements come out closer is chance."""
    rtol, atol = torch.testing._comparison.default_tolerances(dtype)
    worse = []
    for index, (actual, cpu, exact) in enumerate(
        zip(tensors(result), tensors(expected), tensors(reference), strict=True)
    ):
        exact = exact.detach()
        if exact.numel() == 0:
            continue
        device_error = float((actual.detach().cpu().to(exact.dtype) - exact).abs().nan_to_num(float("inf")).max())
        cpu_error = float((cpu.detach().to(exact.dtype) - exact).abs().nan_to_num(float("inf")).max())
        if not device_error <= 2 * cpu_error + atol + rtol * float(exact.abs().max()):
            worse.append((index, device_error, cpu_error))
    return worse


class TestOpInfo(TestCase):
    def check(self, op, body):
        key = op_key(op)
        if key in SKIP:
            self.skipTest(SKIP[key])
        if key not in XFAIL:
            body()
            return
        try:
            body()
        except Exception:
            pytest.xfail(XFAIL[key])
        self.fail(f"{key} passes now: remove it from XFAIL")

    def assert_at_least_as_accurate(self, op, dtype, result, expected, reference_fn):
        """result (device) equals expected (CPU) within tolerance, or is at least as close as the CPU's
        to the double-precision result reference_fn() computes (REFERENCE_DTYPES says why)."""
        try:
            self.assertEqual(result, expected, exact_device=False, **tolerance(op, dtype))
        except AssertionError as mismatch:
            if dtype not in REFERENCE_DTYPES:
                raise
            try:
                reference = reference_fn()
                worse = farther_than_cpu(result, expected, reference, dtype)
            except (RuntimeError, ValueError, NotImplementedError):
                # no double-precision kernel to judge by, or results of different structure or shape
                raise mismatch from None
            if worse:
                details = ", ".join(f"result {i}: device off by {d:.3g}, CPU by {c:.3g}" for i, d, c in worse)
                raise AssertionError(
                    f"{mismatch}\n\nAgainst the result in double precision the device is less accurate than "
                    f"the CPU ({details})"
                ) from None

    @ops(op_db, dtypes=OpDTypes.supported, allowed_dtypes=FORWARD_DTYPES)
    def test_compare_cpu(self, device, dtype, op):
        def body():
            for sample in samples(op, device, dtype):
                cpu_sample = sample.transform(leaves_on("cpu"))
                self.assert_at_least_as_accurate(
                    op,
                    dtype,
                    run(op, sample),
                    run(op, cpu_sample),
                    lambda sample=sample: run(op, sample.transform(leaves_on("cpu", widen=True))),
                )

        self.check(op, body)

    @ops([op for op in op_db if op.supports_autograd], dtypes=OpDTypes.supported_backward, allowed_dtypes=GRAD_DTYPES)
    def test_compare_cpu_grad(self, device, dtype, op):
        def body():
            for original in samples(op, device, dtype, requires_grad=True):
                cpu_sample = original.transform(leaves_on("cpu"))
                sample = original.transform(leaves_on())
                outputs = [t for t in tensors(run(op, sample)) if t.requires_grad]
                cpu_outputs = [t for t in tensors(run(op, cpu_sample)) if t.requires_grad]
                self.assertEqual(len(outputs), len(cpu_outputs))
                inputs = [t for t in tensors([sample.input, sample.args, sample.kwargs]) if t.requires_grad]
                cpu_inputs = [
                    t for t in tensors([cpu_sample.input, cpu_sample.args, cpu_sample.kwargs]) if t.requires_grad
                ]
                if not outputs or not inputs:
                    continue
                grads = [torch.randn_like(t) for t in cpu_outputs]
                result = torch.autograd.grad(outputs, inputs, [g.to(device) for g in grads], allow_unused=True)

                def reference(original=original, grads=grads):
                    wide = original.transform(leaves_on("cpu", widen=True))
                    wide_outputs = [t for t in tensors(run(op, wide)) if t.requires_grad]
                    wide_inputs = [t for t in tensors([wide.input, wide.args, wide.kwargs]) if t.requires_grad]
                    wide_grads = [g.to(o.dtype) for g, o in zip(grads, wide_outputs, strict=True)]
                    return torch.autograd.grad(wide_outputs, wide_inputs, wide_grads, allow_unused=True)

                try:
                    expected = torch.autograd.grad(cpu_outputs, cpu_inputs, grads, allow_unused=True)
                except NotImplementedError as error:
                    # complex32: the CPU has the forward kernels of a few operators, and not the
                    # reductions and divisions their backward formulas call. The device computes them (in
                    # complex64, as CUDA does) and is compared with the gradient in double precision,
                    # normwise: its steps round to complex32 (a broadcast product, then the sum over the
                    # broadcast dimension), so each element is off by a few of complex32's unit roundoffs
                    # of the largest terms, not of its own magnitude.
                    if f"not implemented for '{CPU_DTYPE_NAMES.get(dtype)}'" not in str(error):
                        raise
                    exact = reference()
                    self.assertEqual(len(result), len(exact))
                    for actual, wide in zip(result, exact, strict=True):
                        self.assertEqual(actual is None, wide is None)
                        if wide is not None and wide.numel():
                            atol = HALF_UNIT_ROUNDOFFS * 2.0**-11 * float(wide.abs().max())
                            self.assertEqual(actual, wide, exact_device=False, exact_dtype=False, atol=atol, rtol=0)
                    continue
                self.assert_at_least_as_accurate(op, dtype, result, expected, reference)

        self.check(op, body)


instantiate_device_type_tests(TestOpInfo, globals(), only_for="privateuse1")


def test_rounding_is_judged_against_double_precision():
    exact = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    cpu = torch.tensor([1.0, 2.0, 3.01, 4.0])
    assert farther_than_cpu([torch.tensor([1.0, 2.0, 3.0, 4.0])], [cpu], [exact], torch.float32) == []
    assert farther_than_cpu([torch.tensor([1.0, 2.0, 3.015, 4.0])], [cpu], [exact], torch.float32) == []
    worse = farther_than_cpu([torch.tensor([1.0, 2.05, 3.0, 4.0])], [cpu], [exact], torch.float32)
    assert [index for index, *_ in worse] == [0]
    assert farther_than_cpu([torch.tensor([1.0, float("nan"), 3.0, 4.0])], [cpu], [exact], torch.float32)
