"""Training steps of the model-conformance models on foo against the same steps on the CPU, in one run.

    python benchmarks/bench_models.py

The models are those of tests/test_models.py (tests/models.py): a decoder-only language model, an
encoder-decoder, a mixture of experts, a vision transformer and a convolutional network with batch
norm. One step is what their test runs: forward, loss, backward, gradient clipping and AdamW. The
device's figure includes waiting for its stream, so it counts the work, not only its launch.
"""

import sys
from pathlib import Path

import torch
from common import compare, fmt_time, print_setup, print_table

import torch_foo  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from models import MODELS, to_device, training_step  # noqa: E402

DEVICE = "foo"


def make_step(name, device):
    spec = MODELS[name]
    torch.manual_seed(0)
    model = spec.build().to(device).train()
    batch = to_device(spec.batches(1)[0], device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    # training_step reads the loss (loss.item()), which waits for the device's work.
    return lambda: training_step(model, spec, optimizer, batch)


def model_costs() -> list[tuple[str, str, str, str]]:
    rows = []
    for name in MODELS:
        cpu, dev, ratio = compare(make_step(name, "cpu"), make_step(name, DEVICE), rounds=5)
        rows.append((name, fmt_time(cpu), fmt_time(dev), f"{ratio:5.2f}x"))
    return rows


def main() -> None:
    print_setup(DEVICE)
    print_table(
        "One training step: forward, backward, clipping, AdamW (lower ratio is better)",
        model_costs(),
        ("model", "cpu", DEVICE, f"{DEVICE}/cpu"),
    )
    ops = torch.foo.fallback_ops()
    print(f"\n{len(ops)} operators ran on the CPU fallback during these steps:")
    print("  " + ", ".join(name.removeprefix("aten::") for name in ops))


if __name__ == "__main__":
    main()
