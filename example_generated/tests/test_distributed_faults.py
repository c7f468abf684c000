"""Bad input and faults with the fooccl backend: a Python exception on every rank, within the
process group's timeout; never a hang (run_ranks kills ranks that overrun) or a crash."""

import datetime

import pytest
import torch
import torch.distributed as dist

SETUP = """
import datetime
import time

torch.foo.set_device(rank)
device = torch.device("foo", rank)
dist.init_process_group("fooccl", timeout=datetime.timedelta(seconds=TIMEOUT))


def raises(fn, *fragments, error=dist.DistBackendError):
    '''Runs fn, which must raise `error` with every fragment in its message; returns the message.'''
    try:
        fn()
    except error as e:
        message = str(e)
        assert all(f in message for f in fragments), message
        return message
    raise AssertionError(f"no {error.__name__} raised")
"""


# The tests marked slow inject faults into two processes and wait out peers and timeouts (a minute
# or two together): `pytest -m "not slow"` leaves them out while iterating.


def setup(timeout: float) -> str:
    return f"TIMEOUT = {timeout}\n" + SETUP


@pytest.mark.slow
@pytest.mark.two_devices
def test_ranks_that_disagree_fail_on_every_rank(run_ranks):
    """Each disagreement in a fresh group: after a failure a group refuses further collectives."""
    run_ranks(
        setup(60),
        """
        cases = {
            "shape": lambda: dist.all_reduce(torch.ones(4 + rank, device=device), group=group),
            "dtype": lambda: dist.all_reduce(
                torch.ones(4, dtype=torch.float32 if rank == 0 else torch.int32, device=device), group=group
            ),
            "collective": lambda: (
                dist.all_reduce(torch.ones(4, device=device), group=group)
                if rank == 0
                else dist.broadcast(torch.ones(4, device=device), src=0, group=group)
            ),
            "root": lambda: dist.broadcast(torch.ones(4, device=device), src=rank, group=group),
            "splits": lambda: dist.all_to_all_single(
                torch.empty(4, device=device), torch.ones(4, device=device), [2, 2], [1 + rank, 3 - rank], group=group
            ),
        }
        for name, call in cases.items():
            group = dist.new_group(backend="fooccl", timeout=datetime.timedelta(seconds=TIMEOUT))
            message = raises(call, "fooccl", "rank")
            # the group stays failed: the next collective raises at once, naming the cause
            raises(lambda: dist.all_reduce(torch.ones(1, device=device), group=group), "earlier collective failed")
            print(name, "->", message.splitlines()[0])
        t = torch.ones(3, device=device)
        dist.all_reduce(t)  # the default group is unaffected
        assert t.cpu().tolist() == [2.0] * 3
        print("ok")
        """,
    )


REPEAT_THEN_DISAGREE = """
def disagree_after(pattern, n):
    # Repeats `pattern` all_reduces of 4 elements on a fresh group (so the calls before predict one
    # more of them), then makes an all_reduce of n elements; returns what it raises and when.
    group = dist.new_group(backend="fooccl", timeout=datetime.timedelta(seconds=TIMEOUT))
    for _ in range(pattern):
        dist.all_reduce(torch.ones(4, device=device), group=group)
    start = time.monotonic()
    message = raises(lambda: dist.all_reduce(torch.ones(n, device=device), group=group), "fooccl")
    print(f"raised after {time.monotonic() - start:.1f} s:", message.splitlines()[0])
    return message, time.monotonic() - start
"""


@pytest.mark.slow
@pytest.mark.two_devices
def test_ranks_that_disagree_after_repeating_their_calls(run_ranks):
    """By default only calls the calls before do not predict are compared across ranks. Ranks that
    both leave the pattern are compared and told the difference at once; where one rank repeats the
    pattern and the other does not, both fail when the group's timeout expires: an exception on
    every rank, never a crash (Gloo aborts a process that receives more bytes than it expects)."""
    run_ranks(
        setup(4),
        REPEAT_THEN_DISAGREE,
        """
        message, elapsed = disagree_after(3, 6 if rank == 0 else 8)  # neither is predicted: compared
        assert "called different collectives" in message, message  # the comparison's message, not a timeout
        message, elapsed = disagree_after(3, 4 if rank == 0 else 8)  # rank 0 repeats the pattern
        assert "FOO_CCL_CHECK_CALLS=all" in message, message  # how to learn more
        assert 3 < elapsed < 30, elapsed  # the group's 4 s timeout ended it
        print("ok")
        """,
    )


@pytest.mark.slow
@pytest.mark.two_devices
def test_checking_every_call_names_any_disagreement(run_ranks):
    """FOO_CCL_CHECK_CALLS=all compares every collective, predicted or not."""
    run_ranks(
        setup(60),
        REPEAT_THEN_DISAGREE,
        """
        message, elapsed = disagree_after(3, 4 if rank == 0 else 8)
        assert "all_reduce of 4 Float" in message and "all_reduce of 8 Float" in message, message
        assert "called different collectives" in message and elapsed < 30, (message, elapsed)
        print("ok")
        """,
        FOO_CCL_CHECK_CALLS="all",
    )


def test_the_check_setting_is_validated(monkeypatch):
    from torch_foo import distributed

    monkeypatch.delenv("TORCH_DISTRIBUTED_DEBUG", raising=False)
    expected = {"": "changes", "1": "changes", "all": "all", "every": "all", "0": "off", "OFF": "off"}
    for setting, mode in expected.items():
        monkeypatch.setenv("FOO_CCL_CHECK_CALLS", setting)
        assert distributed._check_calls_mode() == mode, setting
    monkeypatch.setenv("FOO_CCL_CHECK_CALLS", "")
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
    assert distributed._check_calls_mode() == "all"
    monkeypatch.setenv("FOO_CCL_CHECK_CALLS", "sometimes")
    with pytest.raises(ValueError, match="CHECK_CALLS"):
        distributed._check_calls_mode()


@pytest.mark.slow
@pytest.mark.two_devices
def test_a_tensor_on_another_device_is_refused(run_ranks):
    results = run_ranks(
        setup(5),
        """
        dist.all_reduce(torch.ones(1, device=device))  # binds the group to this rank's device
        if rank == 0:
            other = torch.device("foo", 1)
            message = raises(lambda: dist.all_reduce(torch.ones(2, device=other)), "one device", error=RuntimeError)
            assert "foo:0" in message and "foo:1" in message, message
            print("refused")
            time.sleep(10)  # stay connected: rank 1 must fail by its timeout, not by our exit
        else:
            # rank 0 never joins this one: it fails when the group's timeout expires
            start = time.monotonic()
            raises(lambda: dist.all_reduce(torch.ones(2, device=device)), "imed out")
            print(f"timed out after {time.monotonic() - start:.1f} s")
        """,
    )
    assert "refused" in results[0].stdout
    assert "timed out after" in results[1].stdout


@pytest.mark.two_devices
def test_unsupported_calls_raise(run_ranks):
    run_ranks(
        setup(60),
        """
        t = torch.ones(4, device=device)
        longs = torch.ones(4, dtype=torch.int64, device=device)
        raises(lambda: dist.all_reduce(longs, op=dist.ReduceOp.AVG), "floating-point", error=RuntimeError)
        raises(lambda: dist.all_reduce(t, op=dist.ReduceOp.BAND), "integer", error=RuntimeError)
        strided = torch.empty(8, 4, device=device)[:, 0]
        raises(lambda: dist.all_gather_into_tensor(strided, t), "contiguous", error=RuntimeError)
        short = torch.empty(3, device=device)
        raises(lambda: dist.all_gather_into_tensor(short, t), "times the input", error=RuntimeError)
        raises(lambda: dist.recv(t), "any source", error=RuntimeError)
        raises(lambda: dist.send(t, dst=rank), error=(RuntimeError, ValueError))
        # nothing above reached the other rank: the group still works
        dist.all_reduce(t)
        assert t.cpu().tolist() == [2.0] * 4
        print("ok")
        """,
    )


@pytest.mark.slow
@pytest.mark.two_devices
def test_a_peer_that_exits_mid_collective(run_ranks):
    results = run_ranks(
        setup(30),
        """
        dist.all_reduce(torch.ones(1, device=device))
        if rank == 1:
            dist.all_reduce(torch.ones(1 << 20, device=device), async_op=True)
            os._exit(3)  # gone, without destroying the process group
        start = time.monotonic()
        raises(lambda: dist.all_reduce(torch.ones(1 << 20, device=device)), "fooccl")
        print(f"raised after {time.monotonic() - start:.1f} s")
        """,
        check=False,
    )
    assert results[1].returncode == 3
    assert results[0].returncode == 0, results[0].stderr
    assert "raised after" in results[0].stdout


@pytest.mark.slow
@pytest.mark.two_devices
def test_a_collective_that_times_out(run_ranks):
    results = run_ranks(
        setup(3),
        """
        dist.all_reduce(torch.ones(1, device=device))
        if rank == 1:
            time.sleep(12)  # far past the group's 3 s timeout
        start = time.monotonic()
        raises(lambda: dist.all_reduce(torch.ones(4, device=device)), "fooccl")
        elapsed = time.monotonic() - start
        print(f"raised after {elapsed:.1f} s")
        if rank == 0:
            assert elapsed < 10, elapsed  # the timeout, not the late rank, ended the wait
        """,
        check=False,
    )
    assert results[0].returncode == 0, results[0].stdout + results[0].stderr
    assert results[1].returncode in (0, 1), results[1].stderr  # an exception or success, never a crash


@pytest.mark.slow
@pytest.mark.two_devices
def test_wait_with_a_timeout(run_ranks):
    run_ranks(
        setup(60),
        """
        if rank == 1:
            time.sleep(3)
        work = dist.all_reduce(torch.ones(4, device=device), async_op=True)
        if rank == 0:
            raises(lambda: work.wait(datetime.timedelta(milliseconds=200)), "did not finish within")
        work.wait()  # the collective itself still completes
        print("ok")
        """,
    )


def test_local_checks_need_no_peer():
    """Argument checks happen before anything is sent: a one-rank group shows them in-process."""
    store = dist.HashStore()
    dist.init_process_group("fooccl", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=20))
    try:
        t = torch.ones(3, device="foo")
        dist.all_reduce(t)
        assert t.cpu().tolist() == [1.0] * 3
        with pytest.raises(RuntimeError, match="cannot mix cpu and foo"):
            dist.all_to_all_single(torch.empty(3), t)
        with pytest.raises(RuntimeError, match="one output per input|world size"):
            dist.all_gather_into_tensor(torch.empty(2, device="foo"), t)
    finally:
        dist.destroy_process_group()
