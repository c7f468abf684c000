"""Graph replay against launching the same operators one by one, on foo and on the CPU, in one run.

    python benchmarks/bench_graphs.py [--quick]

A step is N small native operators (in-place multiplies and adds on a few hundred floats), then a
wait for the device. On the device it runs eagerly (N launches through PyTorch's dispatcher and the
runtime) and as a replay of a FooGraph captured once (one fooGraphLaunch submission
that runs the N kernels in order on the stream); on the CPU it runs eagerly. Every figure is a
median over interleaved rounds; the ratios compare times taken under the same machine load.

A second table times a whole training step of the GPT-2 style model of tests/models.py (forward,
cross-entropy, backward, AdamW with capturable=True) eagerly on the device and as the replay of its
captured graph, side by side (issue 39's goal: the replay at most 0.6x the eager step).
"""

import copy
import sys
from pathlib import Path

import torch
from common import compare, fmt_time, print_setup, print_table, set_quick

import torch_foo  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from models import MODELS, to_device  # noqa: E402

DEVICE = "foo"


def make_step(device: str, ops: int, numel: int):
    x = torch.ones(numel, device=device)

    def step():
        for i in range(ops):
            if i % 2:
                x.mul_(1.0001)
            else:
                x.add_(0.5)

    return x, step


def graph_rows(ops: int, numel: int) -> list[tuple[str, str, str, str]]:
    sync = torch.foo.synchronize
    _, cpu_step = make_step("cpu", ops, numel)
    _, eager_step = make_step(DEVICE, ops, numel)
    static, graphed_step = make_step(DEVICE, ops, numel)
    graph = torch.foo.FooGraph()
    with torch.foo.graph(graph):
        graphed_step()

    def eager():
        eager_step()
        sync()

    def replay():
        graph.replay()
        sync()

    eager_time, replay_time, replay_over_eager = compare(eager, replay)
    cpu_time, _, replay_over_cpu = compare(cpu_step, replay)
    graph.reset()
    label = f"{ops} operators on {numel} floats"
    return [
        (f"{label}: {DEVICE} eager", fmt_time(eager_time), "", ""),
        (
            f"{label}: {DEVICE} replay",
            fmt_time(replay_time),
            f"{1 / replay_over_eager:.1f}x",
            f"{1 / replay_over_cpu:.2f}x",
        ),
        (f"{label}: cpu eager", fmt_time(cpu_time), "", ""),
    ]


def training_step_rows() -> list[tuple[str, str, str]]:
    """The decoder-lm training step, eager against the replay of its capture, on the same batch."""
    sync = torch.foo.synchronize
    spec = MODELS["decoder-lm"]
    torch.manual_seed(0)
    eager_model = spec.build().to(DEVICE)
    graphed_model = copy.deepcopy(eager_model)
    batch = to_device(spec.batches(1)[0], DEVICE)

    def make(model):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, capturable=True)

        def step():
            optimizer.zero_grad(set_to_none=True)
            loss = spec.loss(model, batch)
            loss.backward()
            optimizer.step()
            return loss

        step()  # warm-up: the optimizer creates its state
        return optimizer, step

    _, eager_step = make(eager_model)
    graphed_optimizer, graphed_step = make(graphed_model)
    graphed_optimizer.zero_grad(set_to_none=True)
    graph = torch.foo.FooGraph()
    with torch.foo.graph(graph):
        graphed_step()

    def eager():
        eager_step()
        sync()

    def replay():
        graph.replay()
        sync()

    eager_time, replay_time, ratio = compare(eager, replay)
    graph.reset()
    label = "decoder-lm training step (AdamW)"
    return [
        (f"{label}: {DEVICE} eager", fmt_time(eager_time), ""),
        (f"{label}: {DEVICE} replay", fmt_time(replay_time), f"{ratio:.2f}x"),
    ]


def main() -> None:
    if "--quick" in sys.argv:
        set_quick()
    print_setup(DEVICE)
    rows = []
    for ops, numel in ((100, 256), (100, 4096)):
        rows += graph_rows(ops, numel)
    print_table(
        "Graph replay against eager launches (speed-ups of the replay: higher is better)",
        rows,
        ("step", "time per step", "vs device eager", "vs cpu eager"),
    )
    print_table(
        "A whole training step captured, against the same step eagerly (replay / eager: lower is better)",
        training_step_rows(),
        ("step", "time per step", "replay / eager"),
    )


if __name__ == "__main__":
    main()
