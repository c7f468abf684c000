"""Every operator of PyTorch's OpInfo database on the device, forward and backward, dense and in the sparse layouts,
compared with the CPU, with each batch of operators in a child process (tests/fallback_sweep.py): a
kernel that crashes the process, typically a CPU kernel the fallback calls with arguments it cannot
handle, is a failure naming the operator, not the end of the test run.

The whole sweep (every OpInfo entry in float32) is marked slow; the sparse layouts, the sparse operators
and the case that crashed once run in every test run.
"""

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "sanitizers"))
import harness  # noqa: E402

SWEEP = Path(__file__).with_name("fallback_sweep.py")
TIMEOUT = 1200  # seconds for a whole sweep; the sweep bounds each child itself


def sweep(*args: str, **env: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, str(SWEEP), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def problems(results: list[dict]) -> list[str]:
    """The cases that crashed or differ from the CPU, each with its operator and reason."""
    return [
        f"{r['case']}: forward {r['forward']}, backward {r['backward']}: {r['detail']}"
        for r in results
        if {"crashed", "fail"} & {r["forward"], r["backward"]}
    ]


def report(results: list[dict]) -> str:
    counts = collections.Counter(r["forward"] for r in results) + collections.Counter(
        f"backward {r['backward']}" for r in results
    )
    reached = set().union(*(r["fallback_ops"] for r in results))
    return f"{len(results)} cases, {len(reached)} operators through the fallback, {dict(counts)}"


def test_sparse_layouts_never_crash_and_match_the_cpu():
    results = sweep("--fast")
    print(report(results))
    assert problems(results) == []
    by_case = {r["case"]: r for r in results}
    # The case of issue 27: sparse.mm's "amax" and "amin" backward read indices the forward records only
    # when an input requires grad.
    assert by_case["sparse.mm.reduce@strided"]["backward"] == "pass"
    assert {"sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc"} <= {
        r["case"].split("@")[1] for r in results if r["forward"] == "pass"
    }


def test_a_crash_is_a_failure_naming_the_operator():
    """A child killed by a signal fails its case alone: the sweep runs the batch again one case per
    child, and the other cases of the batch keep their outcomes."""
    crash_at = ("--crash-at", "abs@strided")
    results = sweep(*crash_at, "add@strided", "abs@strided", "mul@strided", **harness.crash_environment())
    assert [(r["case"], r["forward"]) for r in results] == [
        ("add@strided", "pass"),
        ("abs@strided", "crashed"),
        ("mul@strided", "pass"),
    ]
    assert "SIGSEGV" in results[1]["detail"]


def test_fallback_operators_under_the_asynchronous_fallback_match_the_cpu():
    """A few operators with the asynchronous fallback on: results equal the CPU's, forward and backward; those
    it can serve took its path, the others (data-dependent shapes) the synchronous one."""
    queued = ["abs", "sgn", "nn.functional.gelu", "nn.functional.mse_loss", "nn.functional.cross_entropy", "cat"]
    cases = [*queued, "nonzero", "masked_select", "nn.functional.nll_loss", "bernoulli"]
    results = sweep("--async", *(f"{c}@strided" for c in cases))
    print(report(results))
    assert problems(results) == []
    assert {r["case"] for r in results} == {f"{c}@strided" for c in cases}
    queued_ops = set().union(*(r["async_ops"] for r in results))
    assert {"aten::sgn", "aten::gelu", "aten::mse_loss", "aten::cat"} <= queued_ops, queued_ops
    assert not {"aten::nonzero", "aten::masked_select"} & queued_ops


@pytest.mark.slow
def test_every_opinfo_operator_matches_the_cpu_under_the_asynchronous_fallback():
    results = sweep("--async")
    print(report(results))
    assert problems(results) == []
    assert len(set().union(*(r["async_ops"] for r in results))) > 200


@pytest.mark.slow
def test_every_opinfo_operator_never_crashes_and_matches_the_cpu():
    results = sweep()
    print(report(results))
    assert problems(results) == []
    assert len(set().union(*(r["fallback_ops"] for r in results))) > 300


def test_captured_fallback_operators_replay_with_new_values_or_raise_clearly():
    """A few operators under --capture: fallback ones replay equal to the CPU for new input values, those
    a graph cannot record raise naming themselves."""
    replayed = [
        *("abs", "sgn", "nn.functional.gelu", "nn.functional.mse_loss", "nn.functional.cross_entropy", "mean"),
        "cat",  # a Tensor[] it only reads
    ]
    refused = {"nonzero": "aten::nonzero", "masked_select": "aten::masked_select"}
    cases = [*replayed, "index_select", *refused, "bernoulli"]
    results = {r["case"]: r for r in sweep("--capture", *(f"{c}@strided" for c in cases))}
    for case in [*replayed, "index_select"]:
        assert results[f"{case}@strided"]["forward"] == "pass", results[f"{case}@strided"]
    for case, operator in refused.items():
        result = results[f"{case}@strided"]
        assert result["forward"] == "raises clearly", result
        assert f"operator {operator} " in result["detail"] and "depends on the values" in result["detail"], result
    assert results["bernoulli@strided"]["forward"] == "raises clearly"  # random
    reached = set().union(*(r["fallback_ops"] for r in results.values()))
    assert {"aten::abs.out", "aten::sgn", "aten::gelu", "aten::mse_loss", "aten::cat"} <= reached


@pytest.mark.slow
def test_every_opinfo_operator_replays_like_the_cpu_or_raises_clearly_under_capture():
    results = sweep("--capture")
    print(report(results))
    assert problems(results) == []
    assert sum(r["forward"] == "pass" for r in results) > 300
