"""Data-parallel training on foo devices: one process per device, gradients averaged by the
fooccl backend. Run it on one host with torchrun (one process per emulated device):

    torchrun --nproc-per-node 2 examples/ddp.py

Each process trains a copy of the model on its half of every batch; DistributedDataParallel all-reduces
the gradients during backward, so the copies stay identical, and equal to one model trained on whole
batches. The last line compares the two.
"""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import torch_foo  # noqa: F401  registers the device and the fooccl backend


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)  # the same initial weights in every process
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


def main(steps: int = 20) -> None:
    local_rank = int(os.environ["LOCAL_RANK"])  # set by torchrun
    device = torch.device("foo", local_rank)
    torch.foo.set_device(device)
    dist.init_process_group(device_id=device)  # picks fooccl: the default backend of the device
    rank, world_size = dist.get_rank(), dist.get_world_size()

    model = DistributedDataParallel(make_model().to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    reference = make_model()  # one process, whole batches, on the CPU
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.05)

    data = torch.Generator().manual_seed(1)
    for step in range(steps):
        x = torch.randn(32, 16, generator=data)
        y = x.sum(dim=1, keepdim=True).sin()
        mine = slice(rank * len(x) // world_size, (rank + 1) * len(x) // world_size)

        loss = torch.nn.functional.mse_loss(model(x[mine].to(device)), y[mine].to(device))
        optimizer.zero_grad()
        loss.backward()  # the gradients are averaged over the processes here
        optimizer.step()

        reference_loss = torch.nn.functional.mse_loss(reference(x), y)
        reference_optimizer.zero_grad()
        reference_loss.backward()
        reference_optimizer.step()

        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        if rank == 0 and step % 5 == 0:
            print(f"step {step:2d}  loss {total.item():.4f}  (one process, whole batch: {reference_loss.item():.4f})")

    difference = max(
        (p.detach().cpu() - q).abs().max().item()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True)
    )
    if rank == 0:
        print(f"largest difference from the one-process model: {difference:.2e}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
