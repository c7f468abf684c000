"""The sweep of tests/test_fallback_sweep.py: runs the operators of PyTorch's OpInfo database on the foo
device and on the CPU, forward and backward, in float32, dense and in the sparse layouts each supports,
each case in a child process, so that a crash is an outcome naming the operator.

    python tests/fallback_sweep.py [--fast] [--capture | --async] [--workers N]     prints one JSON line per case

A case is "<op>[.<variant>]@<layout>". This process imports torch, the backend and the OpInfo database
once and never uses the device; it forks a child for each batch of BATCH cases (a process forked
before the device is initialised uses it normally: docs/device/fork-safety.md), WORKERS at a time. A
child writes {"start": case} before each case and the outcome after it. When a child dies (a signal,
an exit without all its outcomes, or BATCH_TIMEOUT), each case of its batch runs again alone in a
child of its own: a case that crashes alone is "crashed" with the signal, and if none does, the case
that was running when the batch died is "crashed" after the cases before it.

Outcomes, for the forward and the backward of each case: "pass" (equal to the CPU within TOLERANCE, or
for the operators of NOT_COMPARED the same structure, layouts, shapes and dtypes), "raises like the
CPU" (both raise), "raises clearly" (the device raises NotImplementedError for an operator of
CUDA_UNSUPPORTED), "fail" (anything else, with the reason), "crashed", "no gradient" (nothing
differentiable) and "no sample" (the OpInfo has no sample for that layout).

With --capture, each dense sample is captured into a graph instead (docs/graphs.md), its floating-point
inputs are then scaled by NEW_VALUES, and the graph is replayed: the results must equal the CPU's for the
new values, so that a stale result (work that ran at capture time, or not at all) fails. "raises
clearly" is then a capture that raises one of CAPTURE_REFUSALS (an operator a graph cannot record, a
call a capture does not permit), and "raises like the CPU" a capture or replay that raises where the CPU
raises too. There is no backward.

With --async, the asynchronous eager fallback is on (torch.foo.set_async_fallback, docs/integration/
cpu-fallback.md): each device call ends with a synchronisation, where the CPU kernel's errors surface, and
each outcome lists in "async_ops" the operators that took the asynchronous path.
"""

import argparse
import ctypes
import json
import os
import selectors
import signal
import time
import warnings

import torch
import torch.utils._pytree as pytree
from random_opinfos import RANDOM_OPINFOS
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import SampleInput

import torch_foo

DEVICE = torch.device("foo", 0)
DTYPE = torch.float32
LAYOUTS = {
    "strided": torch.strided,
    "sparse_coo": torch.sparse_coo,
    "sparse_csr": torch.sparse_csr,
    "sparse_csc": torch.sparse_csc,
    "sparse_bsr": torch.sparse_bsr,
    "sparse_bsc": torch.sparse_bsc,
}
# Samples per case: the first, and each later one that brings a string argument not seen yet (a
# reduction, a padding or interpolation mode, a norm's name: they choose other kernels), at most this many.
MAX_SAMPLES = 6
# The device's results differ from the CPU's by rounding where a native kernel computes them in
# another order (the fallback runs the CPU's kernel and gives its results exactly).
TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}

RANDOM = "draws random numbers: the device generator is not the CPU's"
NOT_COMPARED = {
    # With the random factories, and attention, whose samples with dropout draw random numbers.
    **dict.fromkeys((*RANDOM_OPINFOS, "randint", "randn", "nn.functional.scaled_dot_product_attention"), RANDOM),
    **dict.fromkeys(
        ["empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided"],
        "returns uninitialised memory",
    ),
}
# Operators that CUDA does not run either, with the reason: the device may raise NotImplementedError for
# them where the CPU runs them. None today (jiterator's operators are CUDA-only, and the CPU raises too).
CUDA_UNSUPPORTED: dict[str, str] = {}


def op_key(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def cases() -> list[str]:
    """Every case of the sweep: each operator of op_db in float32, dense and in each sparse layout
    its OpInfo supports."""
    result = []
    for op in op_db:
        if DTYPE not in op.supported_dtypes("cpu"):
            continue
        for name, layout in LAYOUTS.items():
            if layout == torch.strided or op.supports_sparse_layout(layout):
                result.append(f"{op_key(op)}@{name}")
    return result


def strings(sample) -> set:
    return {repr(x) for x in pytree.tree_leaves([sample.args, sample.kwargs]) if isinstance(x, str)}


def to_layout(sample, layout, requires_grad):
    """A dense sample with its input in a sparse layout (blocks of 1 x 1 for BSR and BSC), or None where
    the input has no such form (compressed layouts need two dimensions)."""
    x = sample.input
    if not isinstance(x, torch.Tensor) or x.dim() < (1 if layout == torch.sparse_coo else 2):
        return None
    blocksize = (1, 1) if layout in (torch.sparse_bsr, torch.sparse_bsc) else None
    dense_dim = 0 if layout == torch.sparse_coo else None
    if layout == torch.sparse_coo:
        converted = x.detach().to_sparse()
    else:
        converted = x.detach().to_sparse(layout=layout, blocksize=blocksize, dense_dim=dense_dim)
    return SampleInput(
        converted.requires_grad_(requires_grad and x.requires_grad),
        args=sample.args,
        kwargs=sample.kwargs,
        output_process_fn_grad=sample.output_process_fn_grad,
    )


def generated_samples(op, layout, requires_grad):
    """Samples made on the device (arguments that an operator takes on the CPU, tensor_split's indices,
    stay there), as the OpInfo tests make them."""
    if layout == torch.strided:
        return op.sample_inputs(DEVICE, DTYPE, requires_grad=requires_grad)
    try:
        return list(op.sample_inputs_sparse(layout, DEVICE, DTYPE, requires_grad=requires_grad))
    except NotImplementedError:  # the OpInfo has no sparse samples of its own: the dense ones, converted
        dense_samples = op.sample_inputs(DEVICE, DTYPE, requires_grad=requires_grad)
        return [s for s in (to_layout(s, layout, requires_grad) for s in dense_samples) if s is not None]


def chosen_samples(op, layout, requires_grad):
    torch.manual_seed(0)
    generated = generated_samples(op, layout, requires_grad)
    seen: set = set()
    chosen = []
    for sample in generated:
        new = strings(sample) - seen
        if not chosen or new:
            chosen.append(sample)
            seen |= new
        if len(chosen) == MAX_SAMPLES:
            break
    return chosen


def leaves_on(device=None):
    """Each tensor of a sample to a new leaf on `device` (None: where it is), each tensor once (a tensor
    used twice stays one, so gradients accumulate the same way)."""
    copies = {}

    def to_leaf(t):
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) not in copies:
            leaf = t.detach() if device is None else t.detach().to(device)
            copies[id(t)] = leaf.requires_grad_(t.requires_grad)
        return copies[id(t)]

    return to_leaf


def tensors(tree) -> list:
    return [t for t in pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]


def run(op, sample):
    return sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))


def dense(t):
    return t.to_dense() if t.layout != torch.strided else t


def compare(key, got, expected) -> None:
    got_tensors, expected_tensors = tensors(got), tensors(expected)
    assert len(got_tensors) == len(expected_tensors), f"{len(got_tensors)} tensors, the CPU {len(expected_tensors)}"
    if not got_tensors:
        assert_close(got, expected, equal_nan=True, **TOLERANCE)
        return
    for g, e in zip(got_tensors, expected_tensors, strict=True):
        assert g.device.type == "foo" or e.device.type == g.device.type, f"a result on {g.device}"
        assert g.layout == e.layout, f"layout {g.layout}, the CPU {e.layout}"
        assert g.shape == e.shape and g.dtype == e.dtype, f"{g.dtype}{list(g.shape)}, the CPU {e.dtype}{list(e.shape)}"
        if key not in NOT_COMPARED:
            assert_close(dense(g.detach()).cpu(), dense(e.detach()).cpu(), equal_nan=True, **TOLERANCE)


def outcome(key, device_fn, cpu_fn) -> tuple[str, str]:
    """Runs both sides and classifies; the detail names the reason."""
    try:
        got = device_fn()
        if ASYNC:
            torch.foo.synchronize()  # where an error of the asynchronous fallback surfaces
    except Exception as error:  # noqa: BLE001  every exception is an outcome to classify
        reason = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
        try:
            cpu_fn()
        except Exception:  # noqa: BLE001
            return "raises like the CPU", reason
        if isinstance(error, NotImplementedError) and key in CUDA_UNSUPPORTED:
            return "raises clearly", f"{reason} ({CUDA_UNSUPPORTED[key]})"
        return "fail", f"the CPU runs it, the device raises {reason}"
    try:
        expected = cpu_fn()
    except Exception as error:  # noqa: BLE001
        return "fail", f"the CPU raises {type(error).__name__}, the device does not"
    try:
        compare(key, got, expected)
    except AssertionError as error:
        return "fail", f"differs from the CPU: {str(error).splitlines()[0][:300]}"
    return "pass", ""


def gradients(op, sample, outputs_seed=0):
    """The gradients of the sample's differentiable outputs with respect to its inputs that require grad,
    for the same output gradients on both sides (made on the CPU)."""
    outputs = [dense(t) for t in tensors(run(op, sample)) if t.requires_grad]
    inputs = [t for t in tensors([sample.input, sample.args, sample.kwargs]) if t.requires_grad]
    generator = torch.Generator().manual_seed(outputs_seed)
    grads = [torch.randn(t.shape, generator=generator, dtype=t.dtype).to(t.device) for t in outputs]
    return [dense(g) if g is not None else None for g in torch.autograd.grad(outputs, inputs, grads, allow_unused=True)]


# When samples of one case end differently, the case reports the worst.
RANK = ["no gradient", "pass", "raises like the CPU", "raises clearly", "fail"]


CAPTURE = False  # --capture: each sample captured into a graph and replayed with new input values
ASYNC = False  # --async: the asynchronous eager fallback on
# What a capture raises, as docs/graphs.md documents: an operator that a graph cannot record (random,
# data-dependent shapes, tensor lists, ...), a call that a capture does not permit (a copy to pageable
# memory, a synchronisation), and the end of a capture such a call invalidated.
CAPTURE_REFUSALS = ("cannot be captured", "not permitted while a stream captures", "capture failed")
NEW_VALUES = 0.75  # the factor of the floating-point inputs between the capture and the replay


def statics(device=None):
    """Each tensor of a sample to a new tensor on `device` (None: where it is) that does not require grad,
    each tensor once."""
    copies = {}

    def to_static(t):
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) not in copies:
            copies[id(t)] = t.detach().clone() if device is None else t.detach().to(device)
        return copies[id(t)]

    return to_static


def first_line(error) -> str:
    return f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"


def captured_outcome(key, op, sample) -> tuple[str, str]:
    """Captures the sample on the device, scales the inputs of both sides, replays, and classifies."""
    device, cpu = sample.transform(statics()), sample.transform(statics("cpu"))
    if "device" in cpu.kwargs:
        cpu.kwargs["device"] = "cpu"
    graph, stream = torch.accelerator.Graph(), torch.Stream(device=DEVICE)
    try:
        with stream, graph:  # torch's device-generic form: captures on a stream that is not the default one
            got = run(op, device)
    except Exception as error:  # noqa: BLE001  every exception is an outcome to classify
        try:
            run(op, cpu)
        except Exception:  # noqa: BLE001
            return "raises like the CPU", first_line(error)
        if any(refusal in str(error) for refusal in CAPTURE_REFUSALS):
            return "raises clearly", first_line(error)
        return "fail", f"the CPU runs it, the capture raises {first_line(error)}"
    for t in tensors([device.input, device.args, device.kwargs, cpu.input, cpu.args, cpu.kwargs]):
        if t.is_floating_point() or t.is_complex():
            t.mul_(NEW_VALUES)
    try:
        graph.replay()
        torch.accelerator.synchronize()
        replayed = pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, got)
        graph.replay()  # raises if work of the first replay failed
        torch.accelerator.synchronize()
    except Exception as error:  # noqa: BLE001
        try:
            run(op, cpu)
        except Exception:  # noqa: BLE001
            return "raises like the CPU", first_line(error)
        return "fail", f"the CPU runs it, the replay raises {first_line(error)}"
    finally:
        graph.reset()
    try:
        expected = run(op, cpu)
    except Exception as error:  # noqa: BLE001
        return "fail", f"the CPU raises {type(error).__name__} for the new values, the replay does not"
    try:
        compare(key, replayed, expected)
    except AssertionError as error:
        return "fail", f"the replay differs from the CPU: {str(error).splitlines()[0][:300]}"
    return "pass", ""


def run_case(case: str) -> dict:
    key, layout_name = case.split("@")
    op = OPS[key]
    result = {"case": case, "forward": "pass", "backward": "no gradient", "detail": ""}
    if CAPTURE and layout_name != "strided":
        return {**result, "forward": "no sample", "backward": "no sample", "detail": "captured: dense only"}
    try:
        samples = chosen_samples(op, LAYOUTS[layout_name], requires_grad=op.supports_autograd and not CAPTURE)
    except Exception as error:  # noqa: BLE001  no sample function for this layout
        samples, result["detail"] = [], f"{type(error).__name__}: {error}"[:200]
    if not samples:
        return {**result, "forward": "no sample", "backward": "no sample"}

    def merge(side, status, detail):
        if RANK.index(status) > RANK.index(result[side]):
            result[side] = status
            result["detail"] = result["detail"] or f"{side}: {detail}" if detail else result["detail"]

    for sample in samples:
        if CAPTURE:
            merge("forward", *captured_outcome(key, op, sample))
            continue
        device, cpu = sample.transform(leaves_on()), sample.transform(leaves_on("cpu"))
        if "device" in cpu.kwargs:  # factories (arange, ones, signal windows) make their result there
            cpu.kwargs["device"] = "cpu"
        merge("forward", *outcome(key, lambda s=device: run(op, s), lambda s=cpu: run(op, s)))
        if op.supports_autograd and any(t.requires_grad for t in tensors([sample.input, sample.args, sample.kwargs])):
            merge("backward", *outcome(key, lambda s=device: gradients(op, s), lambda s=cpu: gradients(op, s)))
    return result


OPS = {op_key(op): op for op in op_db}
BATCH = 25
WORKERS = 2
BATCH_TIMEOUT = 300  # seconds; a case alone gets CASE_TIMEOUT
CASE_TIMEOUT = 120
# The fast subset (not marked slow): the sparse layouts, and the dense cases of these operators, whose
# CPU kernels return indices (of maxima, of bags) that their backward kernels read.
FAST_DENSE = {
    "sparse.mm.reduce",
    "sparse.sampled_addmm",
    "to_sparse",
    "nn.functional.embedding_bag",
    "nn.functional.max_pool2d",
    "max_pool2d_with_indices_backward",
    "nn.functional.ctc_loss",
}


def fast_cases() -> list[str]:
    chosen = [c for c in cases() if not c.endswith("@strided") or c.split("@")[0] in FAST_DENSE]
    assert FAST_DENSE <= {c.split("@")[0] for c in chosen}, "an operator of FAST_DENSE is not in op_db"
    return chosen


CRASH_AT = None  # --crash-at: the test that a crash names its case kills the child there


def run_cases(batch: list[str], out) -> None:
    """Runs each case and writes its outcome to `out` (in a child)."""
    warnings.simplefilter("ignore")
    seen: set = set()
    for case in batch:
        print(json.dumps({"start": case}), file=out, flush=True)
        if case == CRASH_AT:
            ctypes.string_at(0)  # reads address 0: SIGSEGV, as a kernel reading past its memory
        torch.manual_seed(0)
        if ASYNC:
            torch_foo.set_async_fallback(True)
        before = torch_foo.fallback_paths()
        result = run_case(case)
        reached = set(torch_foo.fallback_ops())
        result["fallback_ops"] = sorted(reached - seen)  # the operators this case reached first
        seen |= reached
        if ASYNC:
            after = torch_foo.fallback_paths()
            result["async_ops"] = sorted(
                name for name, calls in after.items() if calls["async"] > before.get(name, {"async": 0})["async"]
            )
        print(json.dumps(result), file=out, flush=True)


class Child:
    """A forked child running a batch; its outcomes arrive on a pipe."""

    def __init__(self, batch: list[str], timeout: float):
        self.batch, self.deadline, self.buffer = batch, time.monotonic() + timeout, b""
        read, write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: run the batch, never return into the sweep
            os.close(read)
            code = 0
            try:
                with os.fdopen(write, "w") as out:
                    run_cases(batch, out)
            except BaseException:  # noqa: BLE001  reported as the exit status
                code = 70
            os._exit(code)
        os.close(write)
        self.fd = read

    def finish(self, timed_out: bool) -> tuple[dict, str | None, str]:
        """Outcomes by case, the case running when the child died (None when it ended normally), and how it ended."""
        if timed_out:
            os.kill(self.pid, signal.SIGKILL)
        os.close(self.fd)
        _, status = os.waitpid(self.pid, 0)
        outcomes, running = {}, None
        for line in self.buffer.decode().splitlines():
            record = json.loads(line)
            if "start" in record:
                running = record["start"]
            else:
                outcomes[record["case"]] = record
                running = None
        if timed_out:
            how = f"timed out after {BATCH_TIMEOUT if len(self.batch) > 1 else CASE_TIMEOUT} s"
        elif os.WIFSIGNALED(status):
            how = f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
        else:
            how = f"exit status {os.WEXITSTATUS(status)}"
        complete = not timed_out and status == 0 and len(outcomes) == len(self.batch)
        if complete:
            return outcomes, None, how
        return outcomes, running or next((c for c in self.batch if c not in outcomes), self.batch[0]), how


def crashed(case: str, detail: str) -> dict:
    return {"case": case, "forward": "crashed", "backward": "crashed", "detail": detail, "fallback_ops": []}


def sweep(all_cases: list[str], workers: int = WORKERS) -> list[dict]:
    queue = [all_cases[i : i + BATCH] for i in range(0, len(all_cases), BATCH)]
    results: dict[str, dict] = {}
    died: list[tuple[list[str], str, str]] = []  # batches that died: (batch, running case, how)
    selector = selectors.DefaultSelector()
    running: dict[int, Child] = {}
    while queue or running:
        while queue and len(running) < workers:
            batch = queue.pop(0)
            child = Child(batch, BATCH_TIMEOUT if len(batch) > 1 else CASE_TIMEOUT)
            running[child.fd] = child
            selector.register(child.fd, selectors.EVENT_READ)
        for key, _ in selector.select(timeout=1.0):
            child = running[key.fd]
            data = os.read(key.fd, 1 << 16)
            child.buffer += data
            if not data:
                finish(child, False, selector, running, results, died, queue)
        for child in [c for c in running.values() if time.monotonic() > c.deadline]:
            finish(child, True, selector, running, results, died, queue)
    for batch, case, how in died:  # a batch died and no case crashed alone: name the one that was running
        if not any(results[c]["forward"] == "crashed" for c in batch):
            before = batch[: batch.index(case)]
            results[case] = crashed(case, f"{how} in a batch, after {', '.join(before) or 'no other case'}")
    return [results[c] for c in all_cases]


def finish(child, timed_out, selector, running, results, died, queue) -> None:
    selector.unregister(child.fd)
    del running[child.fd]
    outcomes, died_in, how = child.finish(timed_out)
    if died_in is None:
        results.update(outcomes)
    elif len(child.batch) == 1:
        results[died_in] = crashed(died_in, how)
    else:
        died.append((child.batch, died_in, how))
        queue[:0] = [[case] for case in child.batch]  # each case again, alone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="the sparse layouts and a few dense operators only")
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--capture", action="store_true", help="capture dense samples, replay them with new values")
    parser.add_argument("--async", dest="async_", action="store_true", help="the asynchronous fallback on")
    parser.add_argument("--crash-at", metavar="CASE", help="kill the child with SIGSEGV when it starts CASE")
    parser.add_argument("cases", nargs="*", help="these cases (default: all, or the fast subset)")
    args = parser.parse_args()
    global CRASH_AT, CAPTURE, ASYNC  # noqa: PLW0603  read by the forked children
    CRASH_AT, CAPTURE, ASYNC = args.crash_at, args.capture, args.async_
    chosen = args.cases or (fast_cases() if args.fast else cases())
    for result in sweep(chosen, args.workers):
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
