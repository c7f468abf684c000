"""Derives the coefficients of ``cl_erf``, the float erf of the OpenCL C kernels Inductor generates
(template/{{package_name}}/_inductor/opencl_scheduling.py.jinja, PRELUDE), and checks its error.

Why a function of our own: PoCL's ``erf`` builtin does not vectorise across work-items (29 ns an
element on this machine's CPU, against 3 ns for ``exp``), and GELU and its backward call it for every
element (docs/integration/compile.md). The function is branch-free, so a CPU driver vectorises it:

- for |x| < 1, erf(x) = x * P(x^2), P of degree 6;
- for 1 <= |x| <= 3.92, erf(x) = 1 - exp(-x^2) * R(1/|x|), R of degree 8 fitted to erfc(a) exp(a^2),
  which is smooth there; beyond 3.92 erf(x) rounds to 1 in float;
- both are evaluated and one is selected; NaN passes through, the sign is copied.

Each polynomial is a least-squares fit of the relative error, reweighted towards its largest errors
(an approximation of the minimax polynomial), with erf and erfc from mpmath at 30 digits. The check
then evaluates the function as the kernel does, in float32 with Horner's rule and no fused
multiply-add (the kernels say ``#pragma OPENCL FP_CONTRACT OFF``), and prints its largest error in
units in the last place against the correctly rounded erf.

    python scripts/fit_erf.py        prints the coefficients and the largest error (about a minute)
"""

import mpmath
import numpy as np

mpmath.mp.dps = 30
SPLIT = 1.0
TOP = 3.92
SMALL_DEGREE = 6
LARGE_DEGREE = 8


def _erf(v: float) -> float:
    return float(mpmath.erf(mpmath.mpf(float(v))))


def _scaled_erfc(v: float) -> float:
    a = mpmath.mpf(float(v))
    return float(mpmath.erfc(a) * mpmath.exp(a * a))


def _fit(columns: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Coefficients c minimising max |columns @ c / target - 1|, approximately: least squares of the
    relative error, each point's weight raised by its error, sixty times."""
    design = columns / target[:, None]
    weight = np.ones(len(target))
    for _ in range(60):
        coefficients, *_ = np.linalg.lstsq(design * weight[:, None], weight, rcond=None)
        error = np.abs(design @ coefficients - 1)
        weight = weight * (1 + 50 * error / error.max())
        weight /= weight.mean()
    return coefficients


def coefficients() -> tuple[np.ndarray, np.ndarray]:
    """P's and R's coefficients, lowest degree first, rounded to float32."""
    a = np.linspace(1e-4, SPLIT, 3000)
    small = _fit(np.stack([a * (a * a) ** i for i in range(SMALL_DEGREE + 1)], 1), np.array([_erf(v) for v in a]))
    a = np.linspace(SPLIT, TOP, 3000)
    large = _fit(np.stack([(1 / a) ** i for i in range(LARGE_DEGREE + 1)], 1), np.array([_scaled_erfc(v) for v in a]))
    return small.astype(np.float32), large.astype(np.float32)


def _horner(c: np.ndarray, x: np.ndarray) -> np.ndarray:
    result = np.full_like(x, c[-1])
    for coefficient in c[-2::-1]:
        result = result * x + coefficient
    return result


def cl_erf(x: np.ndarray, small: np.ndarray, large: np.ndarray) -> np.ndarray:
    """The kernel's function, step by step in float32."""
    a = np.minimum(np.abs(x), np.float32(TOP))
    s = a * a
    near_zero = a * _horner(small, s)
    with np.errstate(over="ignore", invalid="ignore"):
        near_one = np.float32(1) - np.exp(-s) * _horner(large, np.float32(1) / np.maximum(a, np.float32(SPLIT)))
    return np.where(np.isnan(x), x, np.copysign(np.where(a < np.float32(SPLIT), near_zero, near_one), x))


def largest_error_in_ulp(small: np.ndarray, large: np.ndarray) -> tuple[float, float]:
    """The largest error of cl_erf in units in the last place, and where, over a dense grid of
    [0, 4.5] and the powers of two from 2^-60 (erf is odd: the negative half mirrors it)."""
    grid = np.concatenate([np.linspace(0, 4.5, 150001), 2.0 ** np.arange(-60, 2.1, 0.01)]).astype(np.float32)
    exact = np.array([_erf(v) for v in grid])
    ulp = np.abs(cl_erf(grid, small, large).astype(np.float64) - exact)
    ulp /= np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return float(ulp.max()), float(grid[ulp.argmax()])


def main() -> None:
    small, large = coefficients()
    print("P:", ", ".join(f"{c:.9e}f" for c in small))
    print("R:", ", ".join(f"{c:.9e}f" for c in large))
    ulp, where = largest_error_in_ulp(small, large)
    print(f"largest error: {ulp:.2f} ulp, at x = {where}")


if __name__ == "__main__":
    main()
