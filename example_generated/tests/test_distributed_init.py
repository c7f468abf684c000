"""Every way of starting a process group against everything that uses one, on foo devices.

The forms: the rendezvous (env://, file://, tcp://, torchrun) crossed with the backend argument
(none, "fooccl", device_id=, "cpu:gloo,foo:fooccl"). The consumers: collectives on device and
CPU tensors, object collectives, DDP, FSDP2, DTensor on a DeviceMesh. One pair of ranks runs every
consumer for one backend form under the three rendezvous (a fresh store each), so the matrix
costs four launches and one torchrun, not a process group per cell. A cell that fails is reported
in a table of every cell, so one broken consumer does not hide the others.
"""

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import RANK_PRELUDE, free_port

FORMS = {
    "no backend": "dict()",
    "fooccl": 'dict(backend="fooccl")',
    "device_id": "dict(device_id=device)",
    "cpu:gloo,foo:fooccl": 'dict(backend="cpu:gloo,foo:fooccl")',
}

# After RANK_PRELUDE (conftest.py): rank, world_size, torch, dist. START(kwargs, rendezvous) starts
# the group; the consumers each check a result against what the CPU computes.
CONSUMERS = """
import json
import os
import sys
import traceback

from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.nn.parallel import DistributedDataParallel

torch.foo.set_device(rank)
device = torch.device("foo", rank)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def batch(r):  # rank r's half of the batch
    return torch.arange(24.0).reshape(6, 4).chunk(world_size)[r] / 10


def expected_gradients():  # one process on the whole batch, on the CPU
    reference = model()
    reference(torch.cat([batch(r) for r in range(world_size)])).pow(2).mean().backward()
    return [p.grad for p in reference.parameters()]


def device_collectives():
    t = torch.ones(3, device=device) * (rank + 1)
    dist.all_reduce(t)
    assert t.device == device and t.cpu().tolist() == [3.0] * 3
    out = torch.empty(2 * world_size, device=device)
    dist.all_gather_into_tensor(out, torch.full((2,), float(rank), device=device))
    assert out.cpu().tolist() == [float(r) for r in range(world_size) for _ in range(2)]


def cpu_collectives():
    t = torch.ones(3) * (rank + 1)
    dist.all_reduce(t)
    assert t.tolist() == [3.0] * 3
    gathered = [torch.empty(1) for _ in range(world_size)]
    dist.all_gather(gathered, torch.tensor([float(rank)]))
    assert [g.item() for g in gathered] == [float(r) for r in range(world_size)]


def object_collectives():
    gathered = [None] * world_size
    dist.all_gather_object(gathered, {"rank": rank})
    assert gathered == [{"rank": r} for r in range(world_size)]
    objects = [("from", rank)]
    dist.broadcast_object_list(objects, src=1)
    assert objects == [("from", 1)]


def ddp():
    wrapped = DistributedDataParallel(model().to(device))
    wrapped(batch(rank).to(device)).pow(2).mean().backward()
    for p, expected in zip(wrapped.parameters(), expected_gradients()):
        torch.testing.assert_close(p.grad.cpu(), expected, atol=1e-6, rtol=1e-5)


def device_mesh():
    # init_device_mesh refuses a device type that is not all letters (torch's device_mesh.py:
    # "Device type with index is not supported"), so for a name with "_" the mesh is built directly.
    if "foo".isalpha():
        return init_device_mesh("foo", (world_size,))
    return DeviceMesh("foo", list(range(world_size)))


def fsdp2():
    mesh = device_mesh()
    sharded = model().to(device)
    for layer in sharded:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(sharded, mesh=mesh)
    sharded(batch(rank).to(device)).pow(2).mean().backward()
    for p, expected in zip(sharded.parameters(), expected_gradients()):
        torch.testing.assert_close(p.grad.full_tensor().cpu(), expected, atol=1e-6, rtol=1e-5)


def dtensor():
    mesh = device_mesh()
    full = torch.arange(8.0).reshape(4, 2)
    sharded = distribute_tensor(full.to(device), mesh, [Shard(0)])
    assert sharded.to_local().device == device and sharded.to_local().shape == (4 // world_size, 2)
    assert torch.equal(sharded.redistribute(mesh, [Replicate()]).to_local().cpu(), full)
    assert torch.equal((sharded * 2).sum().full_tensor().cpu(), (full * 2).sum())


CONSUMER_LIST = [device_collectives, cpu_collectives, object_collectives, ddp, fsdp2, dtensor]


def run_consumers(form):
    row = {}
    for consumer in CONSUMER_LIST:
        try:
            consumer()
            row[consumer.__name__] = "works"
        except Exception as error:  # reported in the table, cell by cell
            row[consumer.__name__] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
            traceback.print_exc()
    # One write per line: under torchrun both ranks share one stdout pipe, and print() with
    # PYTHONUNBUFFERED (as CI sets it) writes the text and its newline separately, so the other
    # rank's line could land between them. A pipe keeps a write under 4 KiB whole.
    sys.stdout.flush()
    os.write(1, ("CELLS " + json.dumps({"form": form, "cells": row}) + "\\n").encode())


def start_run_stop(form, kwargs, rendezvous):
    # A function, so that no variable keeps the group once it is destroyed (see test_distributed.py).
    dist.init_process_group(**kwargs, **rendezvous)
    run_consumers(form)
    dist.destroy_process_group()
"""


def cells(results) -> dict:
    """The table rank 0 printed: {form: {consumer: "works" or the error}}."""
    table = {}
    for line in results[0].stdout.splitlines():
        if line.startswith("CELLS "):
            row = json.loads(line[len("CELLS ") :])
            table[row["form"]] = row["cells"]
    return table


def assert_every_cell_works(table: dict, expected_forms: list, results) -> None:
    lines = [f"{form}: {json.dumps(row)}" for form, row in table.items()]
    logs = "\n".join(f"--- rank {rank} stderr:\n{r.stderr[-3000:]}" for rank, r in enumerate(results))
    assert sorted(table) == sorted(expected_forms), "\n".join(lines) + "\n" + logs
    broken = {form: {c: v for c, v in row.items() if v != "works"} for form, row in table.items()}
    assert not any(broken.values()), "cells that fail:\n" + "\n".join(lines) + "\n" + logs


# The tutorials' form (the one that used to fail) stays in the quick run; the other forms take a
# minute together and are marked slow (docs/integration/distributed.md has the times).
@pytest.mark.parametrize(
    "form", [pytest.param(form, marks=() if form == "no backend" else pytest.mark.slow) for form in FORMS]
)
@pytest.mark.two_devices
def test_every_rendezvous_with_every_consumer(run_ranks, form, tmp_path):
    """env:// (the MASTER_ADDR/MASTER_PORT variables torchrun sets), file:// and tcp:// with one
    backend form, each followed by every consumer."""
    results = run_ranks(
        CONSUMERS,
        f"""
        kwargs = {FORMS[form]}
        start_run_stop("{form} env://", kwargs, dict())
        ranks = dict(rank=rank, world_size=world_size)
        start_run_stop("{form} file://", kwargs, dict(init_method="file://{tmp_path}/store", **ranks))
        start_run_stop("{form} tcp://", kwargs, dict(init_method="tcp://127.0.0.1:" + os.environ["TCP_PORT"], **ranks))
        """,
        TCP_PORT=str(free_port()),
        timeout=240,
    )
    assert_every_cell_works(cells(results), [f"{form} {r}" for r in ("env://", "file://", "tcp://")], results)


@pytest.mark.slow
@pytest.mark.two_devices
def test_torchrun_with_the_tutorial_form(tmp_path):
    """`torchrun --nproc-per-node 2 script.py` whose script calls init_process_group() with no
    argument, as most tutorials do, then uses every consumer."""
    script = tmp_path / "consumers.py"
    script.write_text(RANK_PRELUDE + CONSUMERS + '\nstart_run_stop("no backend torchrun", {}, {})\n')
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    command += ["--master-addr", "127.0.0.1", "--master-port", str(free_port()), str(script)]
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
        stdout, stderr = launcher.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(launcher.pid, signal.SIGKILL)  # torchrun and its workers
        stdout, stderr = launcher.communicate()
        raise AssertionError(f"torchrun did not finish within 240 s\n{stdout}\n{stderr}") from None
    result = subprocess.CompletedProcess(command, launcher.returncode, stdout, stderr)
    assert launcher.returncode == 0, stdout + stderr[-4000:]
    # Both ranks print their row: each must be all "works".
    rows = [json.loads(line[len("CELLS ") :]) for line in stdout.splitlines() if line.startswith("CELLS ")]
    assert len(rows) == 2, stdout
    assert_every_cell_works(
        {f"{row['form']} {i}": row["cells"] for i, row in enumerate(rows)},
        ["no backend torchrun 0", "no backend torchrun 1"],
        [result],
    )
