"""Training with torch.distributed on foo devices: DDP, FSDP2, DTensor and torchrun.

Each workload runs as two local ranks (run_ranks in conftest.py) and is compared with the same
model trained by one process on whole batches.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import free_port

# Minutes of training in several processes: `pytest -m "not slow"` leaves them out while iterating. Each
# rank has a device of its own.
pytestmark = [pytest.mark.slow, pytest.mark.two_devices]

TRAIN = """
import copy

torch.foo.set_device(rank)
device = torch.device("foo", rank)


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def batches(steps=4, size=8):
    data = torch.Generator().manual_seed(1)
    for _ in range(steps):
        yield torch.randn(size, 8, generator=data), torch.randn(size, 4, generator=data)


def train(model, to_device, shard):
    '''SGD steps on `shard` of each batch; returns the losses.'''
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in batches():
        x, y = shard(x), shard(y)
        loss = torch.nn.functional.mse_loss(model(to_device(x)), to_device(y))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def my_half(t):
    return t.chunk(world_size)[rank]


reference = make_model()
train(reference, lambda t: t, lambda t: t)  # one process, whole batches, on the CPU
"""


def test_ddp_matches_one_process_on_the_whole_batch(run_ranks):
    run_ranks(
        TRAIN,
        """
        from torch.nn.parallel import DistributedDataParallel

        dist.init_process_group("fooccl")
        model = DistributedDataParallel(make_model().to(device))
        train(model, lambda t: t.to(device), my_half)
        for p, q in zip(model.module.parameters(), reference.parameters()):
            assert p.device == device
            torch.testing.assert_close(p.detach().cpu(), q.detach(), atol=1e-5, rtol=1e-4)
        print("ok")
        """,
    )


def test_fsdp2_matches_one_process_on_the_whole_batch(run_ranks):
    run_ranks(
        TRAIN,
        """
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("foo", (world_size,))
        model = make_model().to(device)
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        train(model, lambda t: t.to(device), my_half)
        for p, q in zip(model.parameters(), reference.parameters()):
            assert p.to_local().device == device  # each rank holds a shard
            torch.testing.assert_close(p.full_tensor().cpu(), q.detach(), atol=1e-5, rtol=1e-4)
        print("ok")
        """,
    )


def test_dtensor_and_tensor_parallel_layers(run_ranks):
    run_ranks(
        TRAIN,
        """
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        mesh = init_device_mesh("foo", (world_size,))
        full = torch.arange(32.0).reshape(4, 8)
        rows = distribute_tensor(full, mesh, [Shard(0)])
        assert rows.to_local().device == device and rows.to_local().shape == (4 // world_size, 8)
        assert torch.equal(rows.redistribute(mesh, [Replicate()]).to_local().cpu(), full)  # all_gather
        columns = rows.redistribute(mesh, [Shard(1)])  # all_to_all
        assert torch.equal(columns.to_local().cpu(), full.chunk(world_size, dim=1)[rank])
        partial = DTensor.from_local(full.to(device) * (rank + 1), mesh, [Partial()])  # a sum over ranks
        total = full * sum(range(1, world_size + 1))
        assert torch.equal(partial.redistribute(mesh, [Replicate()]).to_local().cpu(), total)  # all_reduce
        assert torch.equal(partial.redistribute(mesh, [Shard(0)]).to_local().cpu(), total.chunk(world_size)[rank])

        # Megatron-style MLP: first layer split by output columns, second by input rows
        model = parallelize_module(
            make_model().to(device), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()}
        )
        x = torch.randn(5, 8, generator=torch.Generator().manual_seed(2))
        torch.testing.assert_close(model(x.to(device)).cpu(), make_model()(x), atol=1e-5, rtol=1e-4)
        train(model, lambda t: t.to(device), lambda t: t)  # every rank sees the whole batch
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            torch.testing.assert_close(p.full_tensor().cpu(), q.detach(), atol=1e-5, rtol=1e-4, msg=name)
        print("ok")
        """,
    )


def test_example_runs_under_torchrun(tmp_path):
    """examples/ddp.py, launched as the docs say: torchrun --nproc-per-node 2 (here with a free port)."""
    example = Path(__file__).resolve().parent.parent / "examples" / "ddp.py"
    port = free_port()
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    command += ["--master-addr", "127.0.0.1", "--master-port", str(port), str(example)]
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "OMP_NUM_THREADS": "1"}
    launcher = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        stdout, stderr = launcher.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(launcher.pid, signal.SIGKILL)  # torchrun and its workers
        stdout, stderr = launcher.communicate()
        raise AssertionError(f"torchrun did not finish within 300 s\n{stdout}\n{stderr}") from None
    assert launcher.returncode == 0, stdout + stderr
    assert "step  0" in stdout
    difference = float(stdout.strip().splitlines()[-1].split(":")[-1])
    assert difference < 1e-4, stdout
