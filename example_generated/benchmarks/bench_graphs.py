"""Graph replay against launching the same operators one by one, on foo and on the CPU, in one run.

    python benchmarks/bench_graphs.py [--quick]

A step is N small native operators (in-place multiplies and adds on a few hundred floats), then a
wait for the device. On the device it runs eagerly (N launches through PyTorch's dispatcher and the
runtime) and as a replay of a FooGraph captured once (one fooGraphLaunch submission
that runs the N kernels in order on the stream); on the CPU it runs eagerly. Every figure is a
median over interleaved rounds; the ratios compare times taken under the same machine load.
"""

import sys

import torch
from common import compare, fmt_time, print_setup, print_table, set_quick

import torch_foo  # noqa: F401

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


if __name__ == "__main__":
    main()
