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
    actual: torch.Tensor, expected: torch.Tensor, elementary: bool = False, division: bool = False
) -> None:
    """`actual` (a result of the device, on any device) equals the CPU's `expected` as the profile
    promises: bit for bit where the driver is exact for that computation (`elementary`: it is one
    elementary float operation per element; `division`: that operation is a division), else within
    FLOAT_TOLERANCE."""
    actual = actual.cpu()
    exact_elementary = EXACT_ELEMENTARY and (EXACT_DIVISION or not division)
    exact = EXACT_EVERYWHERE or (elementary and exact_elementary) or not expected.is_floating_point()
    if exact:
        torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    else:
        torch.testing.assert_close(actual, expected, equal_nan=True, **FLOAT_TOLERANCE[expected.dtype])
