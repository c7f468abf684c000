"""What the tests know of the driver this project was rendered with (emulated): its name, how
many devices it should have, and its numerics profile, which says where the device's results may
be compared with the CPU's bit for bit and where within a tolerance.

The emulated device computes with the CPU's own arithmetic (its kernels are C++ run on the host),
so every result equals the CPU's. On OpenCL, copies, fills, casts, integer arithmetic and the random
numbers (Philox's integer draws, turned into floats by the same formulas) are exact, and so are
the elementary float operations: addition, subtraction, multiplication and the fused multiply-add of
add(alpha=) (fma() in OpenCL C, as the CPU's vector code computes it): each is one correctly
rounded IEEE operation. Division is one where the device promises it (CL_DEVICE_SINGLE_FP_CONFIG has
CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT: the operator library then builds division with
-cl-fp32-correctly-rounded-divide-sqrt); OpenCL's default division may be 2.5 ulp off. What a device
may compute otherwise (a transcendental function, a sum in another order) is compared within
FLOAT_TOLERANCE.
"""

import os

import torch

DRIVER = "emulated"

# The number of devices the tests expect, or None where only the machine knows (OpenCL without
# FOO_DEVICE_COUNT: every device the chosen platform has).
_COUNT = os.environ.get("FOO_DEVICE_COUNT")
EXPECTED_DEVICE_COUNT: int | None = int(_COUNT or "2")

# Whether the device's elementary float operations (+, -, *, / of two operands, add's a + alpha * b)
# equal the CPU's bit for bit.
EXACT_ELEMENTARY = True
# Whether float division equals the CPU's bit for bit (part of the elementary operations above).
EXACT_DIVISION = True
# Whether square roots equal the CPU's bit for bit. PyTorch's CPU takes its float and double roots
# from a vector math library, which may be one unit in the last place off the exact root;
# OpenCL's is correctly rounded (float: where the device has CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT,
# with which the operator library builds it; double: always), so a root may differ from the CPU's by
# that unit. (The 16-bit types' roots, rounded from float's, have equalled the CPU's.)
EXACT_SQRT = True
# Whether everything else (math functions, sums, products) equals the CPU's bit for bit.
EXACT_EVERYWHERE = True
# Where it does not: relative and absolute tolerance, per dtype, for results compared with the CPU's.
FLOAT_TOLERANCE = {
    torch.float64: {"rtol": 1e-12, "atol": 1e-12},
    torch.float32: {"rtol": 1.3e-6, "atol": 1e-5},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 1e-5},
    torch.float16: {"rtol": 1e-3, "atol": 1e-5},
}


def assert_matches_cpu(
    actual: torch.Tensor,
    expected: torch.Tensor,
    elementary: bool = False,
    division: bool = False,
    reference: torch.Tensor | None = None,
    cpu_reference: torch.Tensor | None = None,
) -> None:
    """`actual` (a result of the device, on any device) equals the CPU's `expected` as the profile
    promises: bit for bit where the driver is exact for that computation (`elementary`: it is one
    elementary float operation per element; `division`: that operation is a division), else within
    FLOAT_TOLERANCE. Given `reference` (the same computation in float64 on the CPU), an element
    outside FLOAT_TOLERANCE still passes if it is as accurate as the CPU's: its error against the
    reference at most twice the CPU's plus two units in the last place of the dtype. (A 16-bit
    result computed in float and rounded once can land one unit away from the CPU's; where the
    result is a difference of larger terms, as log-softmax's largest element or a gradient, that
    unit is large against the result, which only the reference tells from a wrong one.)
    `cpu_reference` is the float64 value the CPU's result approximates where it is not the
    device's: a gradient computed from each side's own forward
    output."""
    actual = actual.cpu()
    exact_elementary = EXACT_ELEMENTARY and (EXACT_DIVISION or not division)
    exact = EXACT_EVERYWHERE or (elementary and exact_elementary) or not expected.is_floating_point()
    if exact:
        torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    elif reference is None:
        torch.testing.assert_close(actual, expected, equal_nan=True, **FLOAT_TOLERANCE[expected.dtype])
    else:
        assert actual.shape == expected.shape == reference.shape and actual.dtype == expected.dtype
        exact_value = reference.cpu().double()
        got, cpu = actual.double(), expected.double()
        info = torch.finfo(expected.dtype)
        # One unit in the last place of the dtype at the exact value (the smallest subnormal's spacing below).
        magnitude = exact_value.abs().clamp_min(info.tiny)
        unit = torch.exp2(torch.floor(torch.log2(magnitude))) * info.eps
        cpu_exact = exact_value if cpu_reference is None else cpu_reference.cpu().double()
        allowed = 2 * (cpu - cpu_exact).abs() + 2 * unit.clamp_min(info.smallest_normal * info.eps)
        error = (got - exact_value).abs()
        tolerance = FLOAT_TOLERANCE[expected.dtype]
        close = (got - cpu).abs() <= tolerance["atol"] + tolerance["rtol"] * cpu.abs()
        fine = close | (error <= allowed) | (got.isnan() & cpu.isnan()) | (got == cpu)
        if not bool(fine.all()):
            worst = int((error - allowed).flatten().argmax())
            raise AssertionError(
                f"{int((~fine).sum())} of {fine.numel()} elements less accurate than the CPU's: at flat index {worst}, "
                f"device {got.flatten()[worst].item()!r}, CPU {cpu.flatten()[worst].item()!r}, "
                f"float64 {exact_value.flatten()[worst].item()!r}"
            )
