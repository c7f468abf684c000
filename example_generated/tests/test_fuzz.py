"""Differential fuzzing: Hypothesis draws random programs of tensor operations (elementwise with
broadcasting and type promotion, reductions, views and in-place operations on views, casts, copies
between devices and to and from the host, non_blocking copies through pinned memory, work moved
between streams joined by events), runs each program on the device and, step by step, on the CPU,
and compares every tensor it made, and every error it raised, with the CPU's.

The default suite runs a fixed set of programs (derandomized: the same ones on every run). A long
exploration draws new programs each run: FOO_FUZZ_EXAMPLES=5000 pytest tests/test_fuzz.py. A failure
prints the smallest program Hypothesis found; add it below as an @example, next to the others it
found, and fix the bug."""

import os

import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

DEVICE = "foo"
EXAMPLES = int(os.environ.get("FOO_FUZZ_EXAMPLES", "0"))

# Shapes of new tensors: the first seven broadcast together to (4, 3, 5), the last three to
# (3, 4099), large enough for kernels to run on several blocks.
SHAPES = [(), (5,), (3, 1), (3, 5), (4, 1, 5), (4, 3, 5), (1, 3, 1), (3, 4099), (4099,), (3, 1)]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool"]
BINARY = ["add", "sub", "mul", "div", "maximum", "remainder", "eq", "lt", "logical_and", "bitwise_xor"]
SCALARS = [-2, 0, 3, 0.5, -1.5, True]
UNARY = ["neg", "abs", "sigmoid", "exp", "sqrt", "bitwise_not", "logical_not", "sign"]
REDUCTIONS = ["sum", "mean", "amax", "prod", "any"]
VIEWS = ["transpose", "narrow", "step", "select", "unsqueeze", "flatten", "permute", "expand", "diagonal"]
INPLACE = ["add_", "mul_", "div_", "copy_", "fill_", "zero_", "clamp_"]
COPIES = ["other_device", "round_trip", "to_pinned_host", "clone", "contiguous"]


def view(tensor: torch.Tensor, kind: str, p: int) -> torch.Tensor:
    """A view of `tensor` (raises as torch does when the view is impossible)."""
    dim = p % max(tensor.dim(), 1)
    if kind == "transpose":
        return tensor.transpose(0, -1)
    if kind == "narrow":
        start = p % max(tensor.size(dim), 1) if tensor.dim() else 0
        return tensor.narrow(dim, start, tensor.size(dim) - start)
    if kind == "step":
        return tensor[(slice(None),) * dim + (slice(None, None, 2),)]
    if kind == "select":
        return tensor.select(dim, p % max(tensor.size(dim), 1) if tensor.dim() else 0)
    if kind == "unsqueeze":
        return tensor.unsqueeze(p % (tensor.dim() + 1))
    if kind == "flatten":
        return tensor.view(-1)
    if kind == "permute":
        return tensor.permute(*reversed(range(tensor.dim())))
    if kind == "expand":
        return tensor.expand(2, *tensor.shape)
    return tensor.diagonal()


def compute(op: tuple, inputs: list[torch.Tensor], on_device: bool) -> torch.Tensor | None:
    """Runs one operation on `inputs` (the CPU's tensors or the device's); returns the new tensor,
    or None for an operation that only changed tensors in place."""
    name = op[0]
    if name == "binary":
        return getattr(torch, op[1])(inputs[0], inputs[1])
    if name == "scalar":
        return getattr(torch, op[1])(inputs[0], op[3])
    if name == "unary":
        return getattr(torch, op[1])(inputs[0])
    if name == "cast":
        return inputs[0].to(getattr(torch, op[1]))
    if name == "reduce":
        reduction, dim, keepdim = getattr(torch, op[1]), op[3], op[4]
        x = inputs[0]
        return reduction(x) if dim < 0 or x.dim() == 0 else reduction(x, dim % x.dim(), keepdim=keepdim)
    if name == "view":
        return view(inputs[0], op[1], op[3])
    if name == "inplace":
        target = view(inputs[0], op[4], op[5])
        if op[1] == "fill_":
            target.fill_(3)
        elif op[1] == "zero_":
            target.zero_()
        elif op[1] == "clamp_":
            target.clamp_(min=-1, max=2)
        else:
            getattr(target, op[1])(inputs[1])
        return None
    copy = op[1]
    x = inputs[0]
    if copy == "clone":
        return x.clone()
    if copy == "contiguous":
        return x.t().contiguous() if x.dim() == 2 else x.contiguous()
    if not on_device:
        return x.clone()  # the CPU's counterpart of a copy is the same values
    if copy == "other_device":
        # copy=True: with one device, the other device is this one, and .to() would return x itself.
        return x.to(torch.device(DEVICE, (x.device.index + 1) % torch.foo.device_count()), copy=True)
    if copy == "round_trip":
        return x.cpu().to(x.device)
    pinned = torch.empty(x.shape, dtype=x.dtype, pin_memory=True)
    pinned.copy_(x, non_blocking=True)  # to the host on the stream; the stream is synchronised next
    torch.foo.current_stream(x.device).synchronize()
    return pinned.to(x.device, non_blocking=True)


def same_outcome(op: tuple, cpu: Exception | torch.Tensor | None, dev: Exception | torch.Tensor | None) -> None:
    if isinstance(cpu, Exception) or isinstance(dev, Exception):
        assert type(cpu) is type(dev), f"{op}: the CPU gave {cpu!r}, the device {dev!r}"


def significant_strides(tensor: torch.Tensor) -> list[int | None]:
    """The strides that place elements: a dimension of size 0 or 1 has none to place, so its stride
    is arbitrary (PyTorch's own tests compare strides the same way: check_significant_strides)."""
    return [stride if size > 1 else None for size, stride in zip(tensor.shape, tensor.stride(), strict=True)]


def assert_same(cpu: torch.Tensor, dev: torch.Tensor, what: str) -> None:
    assert dev.device.type == DEVICE, what
    back = dev.cpu()
    got, want = (back.dtype, back.shape, significant_strides(dev)), (cpu.dtype, cpu.shape, significant_strides(cpu))
    assert got == want, (
        f"{what}: the device made {back.dtype} {tuple(back.shape)} strides {dev.stride()}, "
        f"the CPU {cpu.dtype} {tuple(cpu.shape)} strides {cpu.stride()}"
    )
    assert_close(back, cpu, equal_nan=True, msg=lambda message: f"{what}: {message}")


def switch_streams(streams: list[list[torch.Stream]], which: int, with_event: bool) -> None:
    """Makes streams[device][which] current on every device, after the work of the current one."""
    for index, choices in enumerate(streams):
        new, old = choices[which], torch.foo.current_stream(index)
        if new == old:
            continue
        if with_event:
            event = torch.foo.Event()
            event.record(old)
            new.wait_event(event)
        else:
            new.wait_stream(old)
        torch.foo.set_stream(new)


def run_program(program: list[tuple]) -> None:
    devices = torch.foo.device_count()
    module = torch.foo
    streams = [[module.default_stream(d), module.Stream(d), module.Stream(d)] for d in range(devices)]
    tensors: list[tuple[torch.Tensor, torch.Tensor]] = []  # (on the CPU, on the device)
    try:
        for op in program:
            if op[0] == "new":
                shape, dtype, seed = SHAPES[op[1]], getattr(torch, op[2]), op[3]
                values = torch.randint(-4, 5, shape, generator=torch.Generator().manual_seed(seed))
                cpu = values != 0 if dtype == torch.bool else values.to(dtype)
                device = torch.device(DEVICE, seed % devices)
                dev = cpu.pin_memory().to(device, non_blocking=True) if seed % 3 == 0 else cpu.to(device)
                tensors.append((cpu, dev))
                continue
            if op[0] == "stream":
                switch_streams(streams, op[1], op[2])
                continue
            operands = op[2:4] if op[0] in ("binary", "inplace") else op[2:3]  # indices of its tensors
            picks = [tensors[i % len(tensors)] for i in operands]
            outcomes = []
            for on_device in (False, True):
                inputs = [pair[on_device] for pair in picks]
                if on_device and len(inputs) == 2:
                    inputs[1] = inputs[1].to(inputs[0].device)
                try:
                    outcomes.append(compute(op, inputs, on_device))
                except (RuntimeError, ValueError, IndexError, TypeError) as error:
                    outcomes.append(error)
            same_outcome(op, *outcomes)
            if isinstance(outcomes[0], torch.Tensor):
                tensors.append((outcomes[0], outcomes[1]))
        for d in range(devices):
            torch.foo.synchronize(d)
        for i, (cpu, dev) in enumerate(tensors):
            assert_same(cpu, dev, f"tensor {i} of {program}")
    finally:
        for d in range(devices):
            torch.foo.synchronize(d)
            torch.foo.set_stream(torch.foo.default_stream(d))


tensor_index = st.integers(0, 15)  # into the tensors made so far, modulo their number
new_tensor = st.tuples(
    st.just("new"), st.integers(0, len(SHAPES) - 1), st.sampled_from(DTYPES), st.integers(0, 1 << 16)
)
operation = st.one_of(
    new_tensor,
    st.tuples(st.just("binary"), st.sampled_from(BINARY), tensor_index, tensor_index),
    st.tuples(st.just("scalar"), st.sampled_from(BINARY[:6]), tensor_index, st.sampled_from(SCALARS)),
    st.tuples(st.just("unary"), st.sampled_from(UNARY), tensor_index),
    st.tuples(st.just("cast"), st.sampled_from(DTYPES), tensor_index),
    st.tuples(st.just("reduce"), st.sampled_from(REDUCTIONS), tensor_index, st.integers(-1, 3), st.booleans()),
    st.tuples(st.just("view"), st.sampled_from(VIEWS), tensor_index, st.integers(0, 7)),
    st.tuples(
        st.just("inplace"),
        st.sampled_from(INPLACE),
        tensor_index,
        tensor_index,
        st.sampled_from(VIEWS),
        st.integers(0, 7),
    ),
    st.tuples(st.just("copy"), st.sampled_from(COPIES), tensor_index),
    st.tuples(st.just("stream"), st.integers(0, 2), st.booleans()),
)
programs = st.tuples(st.lists(new_tensor, min_size=1, max_size=3), st.lists(operation, max_size=14)).map(
    lambda parts: parts[0] + parts[1]
)


@settings(
    max_examples=EXAMPLES or 40,
    derandomize=not EXAMPLES,
    database=None if not EXAMPLES else settings.default.database,
    # No deadline: a program takes milliseconds, but the first one also initialises the devices, and
    # under a sanitizer or on a loaded machine any one may take a minute (a long run failed on a
    # one-tensor program that took 74 s once, then 0.1 s). A deadline would not catch a hang anyway:
    # Hypothesis measures a call after it returns; pytest's faulthandler_timeout shows a hung one.
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(programs)
# Programs a long run found, each a bug fixed since:
# a copy into a view of its own source (unsqueeze: same memory and strides once broadcast) ran on the
# device where the CPU refuses the partial overlap (csrc/aten/Copy.cpp).
@example([("new", 1, "float32", 0), ("inplace", "copy_", 0, 0, "unsqueeze", 0)])
# an out= result of the CPU fallback was made contiguous on the device where the CPU's kernel gives it
# the layout of its input (abs of a transposed tensor; csrc/aten/Copy.cpp, _copy_from_and_resize).
@example(
    [
        ("new", 0, "float32", 0),
        ("new", 3, "float32", 0),
        ("view", "transpose", 1, 0),
        ("unary", "abs", 2),
    ]
)
# Not a bug, a test that was too strict: strides of size-1 dimensions differed ((3, 1) on the device,
# (1, 1) on the CPU, for a (1, 3) result), which place no element; now only significant strides count.
@example(
    [
        ("new", 2, "float32", 0),
        ("new", 0, "float32", 0),
        ("new", 0, "float32", 0),
        ("view", "transpose", 0, 0),
        ("unary", "neg", 0),
        ("new", 0, "float32", 0),
        ("binary", "logical_and", 1, 9),
    ]
)
def test_random_programs_match_the_cpu(program):
    run_program(program)
