"""torch.distributed on foo tensors: the c10d backend "fooccl" (csrc/distributed/).

Each test runs two processes on this host, one per device (launch_ranks in conftest.py), and checks
what the collectives compute against the same computation on the CPU. Training workloads are in
test_distributed_training.py, bad input and faults in test_distributed_faults.py.
"""

import json

import pytest
import torch.distributed as dist
from conftest import launch_ranks

import torch_foo.distributed

SETUP = """
torch.foo.set_device(rank)
dist.init_process_group("fooccl")
device = torch.device("foo", rank)
"""


def test_backend_is_registered_for_the_device():
    assert "fooccl" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map["foo"] == "fooccl"
    assert dist.Backend.default_device_backend_map["cpu"] == "gloo"
    assert dist.Backend.backend_capability["fooccl"] == ["foo", "cpu"]
    assert dist.get_default_backend_for_device("foo") == "fooccl"
    torch_foo.distributed._register()  # importing again changes nothing
    assert dist.Backend.backend_list.count("fooccl") == 1


# The checks of one memory mode run one after another in one pair of ranks, each a function whose
# result rank 0 and rank 1 print as a line, and each test reads its check's lines: two launches
# instead of eight (a launch is two interpreters importing torch and starting a process group, most
# of the time of these tests). A check that fails stops its rank, as a failed collective would leave
# the ranks out of step; the checks after it are reported as not reached.
CHECKS = """
import json
import traceback


def check_reductions():
    def per_rank(r, dtype):  # what rank r contributes
        return (torch.arange(1, 7) + r).to(dtype)

    every_rank = lambda dtype: torch.stack([per_rank(r, torch.float64) for r in range(world_size)])
    expected = {
        dist.ReduceOp.SUM: lambda x: x.sum(0),
        dist.ReduceOp.PRODUCT: lambda x: x.prod(0),
        dist.ReduceOp.MIN: lambda x: x.min(0).values,
        dist.ReduceOp.MAX: lambda x: x.max(0).values,
        dist.ReduceOp.AVG: lambda x: x.mean(0),
    }
    dtypes = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8)
    for dtype in dtypes:
        for op, reference in expected.items():
            if op == dist.ReduceOp.AVG and not dtype.is_floating_point:
                continue
            t = per_rank(rank, dtype).to(device)
            dist.all_reduce(t, op=op)
            assert t.device == device and t.dtype == dtype
            torch.testing.assert_close(t.cpu(), reference(every_rank(dtype)).to(dtype), msg=f"{op} {dtype}")

    for op, reference in ((dist.ReduceOp.BAND, "and"), (dist.ReduceOp.BOR, "or"), (dist.ReduceOp.BXOR, "xor")):
        values = [torch.tensor([0b1100, 0b1010, 7]) + r for r in range(world_size)]
        t = values[rank].to(device)
        dist.all_reduce(t, op=op)
        folded = values[0]
        for v in values[1:]:
            folded = getattr(torch, f"bitwise_{reference}")(folded, v)
        assert torch.equal(t.cpu(), folded), op

    z = torch.tensor([1 + 2j, 3 - 1j]) * (rank + 1)
    zt = z.to(device)
    dist.all_reduce(zt)
    torch.testing.assert_close(zt.cpu(), torch.tensor([1 + 2j, 3 - 1j]) * sum(range(1, world_size + 1)))

    t = torch.ones(5, device=device) * (rank + 1)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))  # what FSDP2 uses for a custom divide factor
    torch.testing.assert_close(t.cpu(), torch.ones(5) * 0.5 * sum(range(1, world_size + 1)))

    # reduce: the root gets the result, the others keep their input
    t = per_rank(rank, torch.float32).to(device)
    dist.reduce(t, dst=1, op=dist.ReduceOp.AVG)
    mine = per_rank(rank, torch.float32)
    torch.testing.assert_close(t.cpu(), every_rank(torch.float32).mean(0).float() if rank == 1 else mine)

    # reduce_scatter and reduce_scatter_tensor: rank r gets block r of the reduction
    full = torch.stack([torch.arange(8.0) * (r + 1) for r in range(world_size)])
    blocks = (torch.arange(8.0) * (rank + 1)).to(device).chunk(world_size)
    out = torch.empty(8 // world_size, device=device)
    dist.reduce_scatter(out, list(blocks))
    torch.testing.assert_close(out.cpu(), full.sum(0).chunk(world_size)[rank])
    out = torch.empty(8 // world_size, device=device)
    dist.reduce_scatter_tensor(out, (torch.arange(8.0) * (rank + 1)).to(device), op=dist.ReduceOp.MAX)
    torch.testing.assert_close(out.cpu(), full.max(0).values.chunk(world_size)[rank])

    # coalesced all_reduce, as torch.distributed._coalescing_manager issues it
    a, b = torch.ones(3, device=device) * rank, torch.ones(2, 2, device=device) * (rank + 1)
    with dist._coalescing_manager(device=device):
        dist.all_reduce(a)
        dist.all_reduce(b)
    assert a.cpu().tolist() == [sum(range(world_size))] * 3
    assert b.cpu().eq(sum(range(1, world_size + 1))).all()


def check_data_movement():
    def mine(r, dtype=torch.float32, n=6):
        return (torch.arange(n) + 100 * r).to(dtype)

    # broadcast from rank 1, for dtypes Gloo cannot reduce too (they travel as bytes)
    for dtype in (torch.float32, torch.complex64, torch.bool, torch.int16, torch.float64):
        t = mine(rank, dtype).to(device)
        dist.broadcast(t, src=1)
        assert torch.equal(t.cpu(), mine(1, dtype)), dtype

    # all_gather into a list, and into one tensor (2-D, as FSDP2's all-gather output is flat)
    outs = [torch.empty(6, dtype=torch.int16, device=device) for _ in range(world_size)]
    dist.all_gather(outs, mine(rank, torch.int16).to(device))
    for r in range(world_size):
        assert torch.equal(outs[r].cpu(), mine(r, torch.int16))
    out = torch.empty(world_size * 2, 3, device=device)
    dist.all_gather_into_tensor(out, mine(rank).reshape(2, 3).to(device))
    assert torch.equal(out.cpu(), torch.cat([mine(r).reshape(2, 3) for r in range(world_size)]))

    # gather to rank 0, scatter from rank 1
    gathered = [torch.empty(6, device=device) for _ in range(world_size)] if rank == 0 else None
    dist.gather(mine(rank).to(device), gathered, dst=0)
    if rank == 0:
        assert all(torch.equal(gathered[r].cpu(), mine(r)) for r in range(world_size))
    pieces = [mine(r) * -1 for r in range(world_size)]
    out = torch.empty(6, device=device)
    dist.scatter(out, [p.to(device) for p in pieces] if rank == 1 else None, src=1)
    assert torch.equal(out.cpu(), pieces[rank])

    # all_to_all: piece i of rank r goes to rank i
    sent = [torch.full((2,), 10.0 * rank + i) for i in range(world_size)]
    received = [torch.empty(2, device=device) for _ in range(world_size)]
    dist.all_to_all(received, [s.to(device) for s in sent])
    assert [x.cpu().tolist() for x in received] == [[10.0 * r + rank] * 2 for r in range(world_size)]

    # all_to_all_single with uneven splits: rank r sends r + i + 1 rows of 3 to rank i
    send_splits = [rank + i + 1 for i in range(world_size)]
    recv_splits = [r + rank + 1 for r in range(world_size)]
    rows = torch.arange(sum(send_splits) * 3, dtype=torch.float32).reshape(-1, 3) + 1000 * rank
    out = torch.empty(sum(recv_splits), 3, device=device)
    dist.all_to_all_single(out, rows.to(device), recv_splits, send_splits)
    expected = []
    for r in range(world_size):
        theirs = torch.arange(sum(r + i + 1 for i in range(world_size)) * 3, dtype=torch.float32).reshape(-1, 3)
        theirs = (theirs + 1000 * r).split([r + i + 1 for i in range(world_size)])
        expected.append(theirs[rank])
    assert torch.equal(out.cpu(), torch.cat(expected))

    # equal splits, and an empty tensor
    out = torch.empty(4, device=device)
    dist.all_to_all_single(out, torch.arange(4.0, device=device) + 10 * rank)
    assert out.cpu().tolist() == [x + 10 * r for r in range(world_size) for x in (2.0 * rank, 2.0 * rank + 1)]
    empty = torch.empty(0, device=device)
    dist.all_reduce(empty)
    dist.barrier()


def check_point_to_point():
    peer = 1 - rank
    # blocking send/recv in both orders: a receive never holds back the matching send
    t = torch.full((4,), float(rank), device=device)
    got = torch.empty(4, device=device)
    if rank == 0:
        dist.send(t, dst=peer)
        dist.recv(got, src=peer)
    else:
        dist.recv(got, src=peer)
        dist.send(t, dst=peer)
    assert got.cpu().tolist() == [float(peer)] * 4

    # both ranks post the receive first (isend/irecv), and a batch ring exchange
    got = torch.empty(4, device=device)
    recv = dist.irecv(got, src=peer)
    send = dist.isend(torch.full((4,), 7.0 + rank, device=device), dst=peer)
    recv.wait()
    send.wait()
    assert got.cpu().tolist() == [7.0 + peer] * 4
    got = torch.empty(3, dtype=torch.int64, device=device)
    ops = [
        dist.P2POp(dist.irecv, got, (rank - 1) % world_size),
        dist.P2POp(dist.isend, torch.arange(3, device=device) + rank, (rank + 1) % world_size),
    ]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    assert got.cpu().tolist() == [x + (rank - 1) % world_size for x in range(3)]

    # object collectives (pickled into device tensors)
    objects = [None] * world_size
    dist.all_gather_object(objects, {"rank": rank, "name": f"r{rank}"})
    assert objects == [{"rank": r, "name": f"r{r}"} for r in range(world_size)]
    payload = [["from", rank], None]
    dist.broadcast_object_list(payload, src=1)
    assert payload == [["from", 1], None]
    out = [None] if rank == 0 else None
    gathered = [None] * world_size if rank == 0 else None
    dist.gather_object(rank * 11, gathered, dst=0)
    if rank == 0:
        assert gathered == [r * 11 for r in range(world_size)]
    out = [None]
    dist.scatter_object_list(out, [f"to {r}" for r in range(world_size)] if rank == 1 else None, src=1)
    assert out == [f"to {rank}"]
    if rank == 0:
        dist.send_object_list([{"a": 1}], dst=1)
    else:
        received = [None]
        dist.recv_object_list(received, src=0)
        assert received == [{"a": 1}]

    # CPU tensors in the same process group travel over Gloo
    c = torch.ones(3) * (rank + 1)
    dist.all_reduce(c)
    assert c.tolist() == [float(sum(range(1, world_size + 1)))] * 3


def check_ordering():
    # The input is written by device work still queued on the current stream (behind a busy
    # kernel): the collective runs after it, without the host waiting for the device.
    t = torch.zeros(1000, device=device)
    torch.foo._sleep(1_000_000)
    t.fill_(rank + 1)
    work = dist.all_reduce(t, async_op=True)
    assert not work.is_completed()  # the current stream is still busy
    work.wait()
    t.add_(1)  # later device work on the current stream sees the result
    assert t.cpu().eq(sum(range(1, world_size + 1)) + 1).all()
    assert work.is_completed() and work.is_success()

    # issued from another stream: ordered after that stream's work
    side = torch.foo.Stream()
    with torch.foo.stream(side):
        x = torch.full((8,), float(rank), device=device)
        torch.foo._sleep(200_000)
        x.mul_(2)
        dist.all_reduce(x)
    side.synchronize()
    assert x.cpu().eq(2.0 * sum(range(world_size))).all()

    # the future of an asynchronous collective (what DDP's communication hooks chain on)
    t = torch.ones(4, device=device) * (rank + 1)
    future = dist.all_reduce(t, async_op=True).get_future()
    (value,) = future.wait()
    assert value.device == device and value.cpu().eq(sum(range(1, world_size + 1))).all()
    doubled = future.then(lambda f: f.value()[0] * 2).wait()
    assert doubled.cpu().eq(2 * sum(range(1, world_size + 1))).all()

    # many asynchronous collectives on one tensor run in the order they were issued
    t = torch.ones(16, device=device)
    works = [dist.all_reduce(t, async_op=True) for _ in range(5)]
    for work in works:
        work.wait()
    assert t.cpu().eq(world_size**5).all()


for name in ("reductions", "data_movement", "point_to_point", "ordering"):
    try:
        globals()["check_" + name]()
    except Exception:
        print("CHECK " + json.dumps({"check": name, "error": traceback.format_exc()}), flush=True)
        raise SystemExit(1)
    print("CHECK " + json.dumps({"check": name, "error": None}), flush=True)
"""


# In place needs a device whose memory the host can read: the emulated device with strict memory mode
# off. A driver whose device memory the host cannot reach (OpenCL: hostAccessesDeviceMemory is 0)
# runs the staged mode only.
IN_PLACE = pytest.param(
    "in_place", marks=pytest.mark.emulated_driver("memory the host can access (strict memory mode off)")
)


@pytest.fixture(scope="module", params=["staged", IN_PLACE])
def job(request, tmp_path_factory):
    """The two ways the backend reaches device memory: staged through pinned host buffers (a device
    whose memory the host cannot access: strict memory mode), or in place for all_reduce and
    broadcast (the driver reports hostAccessesDeviceMemory). Runs CHECKS in that mode; returns
    ({check: [each rank's error or None]}, the ranks' exit codes, their report)."""
    in_place = request.param == "in_place"
    mode = f"""
assert torch.foo.get_device_properties(0).host_accesses_device_memory is {in_place}
"""
    directory = tmp_path_factory.mktemp(request.param)
    env = {"FOO_STRICT_MEMORY": "0" if in_place else "1"}
    results, _, report = launch_ranks(directory, "checks", mode + SETUP, CHECKS, **env)
    outcome: dict[str, list] = {}
    for result in results:
        for line in result.stdout.splitlines():
            if line.startswith("CHECK "):
                row = json.loads(line[len("CHECK ") :])
                outcome.setdefault(row["check"], []).append(row["error"])
    return outcome, [result.returncode for result in results], report


def assert_check_passed(job, check: str) -> None:
    outcome, exit_codes, report = job
    errors = outcome.get(check)
    assert errors is not None, f"{check} was not reached: an earlier check failed or a rank died\n{report}"
    assert len(errors) == len(exit_codes) and not any(errors), "\n".join([*(e for e in errors if e), report])
    if all(len(row) == len(exit_codes) and not any(row) for row in outcome.values()):
        assert exit_codes == [0] * len(exit_codes), (
            f"every check passed, then the ranks exited with {exit_codes}\n{report}"
        )


@pytest.mark.two_devices
def test_reductions_match_the_cpu(job):
    assert_check_passed(job, "reductions")


@pytest.mark.two_devices
def test_data_movement_matches_the_cpu(job):
    assert_check_passed(job, "data_movement")


@pytest.mark.two_devices
def test_point_to_point_and_object_collectives(job):
    assert_check_passed(job, "point_to_point")


@pytest.mark.two_devices
def test_every_way_to_start_a_process_group(run_ranks):
    run_ranks(
        """
        from torch.distributed.distributed_c10d import _get_default_group

        torch.foo.set_device(rank)
        device = torch.device("foo", rank)
        starts = [
            dict(),  # no backend string: the accelerator's backend
            dict(backend="fooccl"),
            dict(device_id=device),
            dict(backend="cpu:gloo,foo:fooccl"),
        ]

        def check(kwargs):
            group = _get_default_group()
            assert group._get_backend(device).name() == "fooccl", kwargs
            t = torch.ones(2, device=device) * (rank + 1)
            dist.all_reduce(t)
            assert t.cpu().tolist() == [3.0, 3.0], kwargs
            # every form gives the same group (distributed.py's _whole_group): CPU tensors on fooccl too
            assert group._get_backend(torch.device("cpu")).name() == "fooccl", kwargs
            c = torch.ones(2) * (rank + 1)
            dist.all_reduce(c)
            assert c.tolist() == [3.0, 3.0], kwargs

        for i, kwargs in enumerate(starts):
            store = f"file://{os.getcwd()}/store{i}"
            dist.init_process_group(init_method=store, rank=rank, world_size=world_size, **kwargs)
            # In a function, so that no variable keeps the group once it is destroyed: a group
            # that outlives destroy_process_group keeps its Gloo threads, and when one of them
            # frees a finished work holding a tensor Python created while the interpreter exits,
            # it cannot take the GIL and the process aborts (torch 2.13; seen under load).
            check(kwargs)
            dist.barrier()
            dist.destroy_process_group()
        print("ok")
        """,
    )


@pytest.mark.two_devices
def test_collectives_are_ordered_with_the_streams(job):
    assert_check_passed(job, "ordering")
