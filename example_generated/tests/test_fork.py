"""Fork safety: a child forked after the runtime was initialised gets a clear error in PyTorch's
wording (not a hang) and torch.foo._is_in_bad_fork() says so; a child forked before initialisation
works, and so do 'spawn' children. Storms of forked and spawned children while the parent's streams are
busy leave the parent's results intact, and every child exits normally."""

import textwrap

import pytest
from conftest import REAP_CHILD

# PyTorch's wording (torch.cuda's, with this device's name), so code written against CUDA's message works.
FORKED_MESSAGE = (
    "Cannot re-initialize foo in forked subprocess. To use foo with multiprocessing, "
    "you must use the 'spawn' start method"
)


@pytest.mark.parametrize("initialise", ["tensor", "init"])
def test_fork_after_initialisation_fails_fast_with_torchs_message(run_python, initialise):
    code = f"""
        import os, re, torch, torch_foo
        if {initialise!r} == "init":
            torch.foo.init()  # initialises explicitly, as torch.cuda.init()
        else:
            torch.ones(1, device="foo") + 1  # initialises the runtime: stream workers run now
        pid = os.fork()
        if pid == 0:
            errors = []
            attempts = [
                lambda: torch.ones(1, device="foo"),
                torch.foo.init,
                lambda: torch.ones(2).to("foo"),
            ]
            for attempt in attempts:
                try:
                    attempt()
                except RuntimeError as error:
                    errors.append(str(error))
            cuda_style = all(re.match(r"Cannot re-initialize \\w+ in forked subprocess", e) for e in errors)
            print("child errors:", errors, flush=True)
            os._exit(0 if torch.foo._is_in_bad_fork() and len(errors) == 3 and cuda_style else 3)
        _, status = os.waitpid(pid, 0)
        print("child exit code:", os.waitstatus_to_exitcode(status))
        print("parent works:", (torch.ones(2, device="foo") * 2).sum().item(), torch.foo._is_in_bad_fork())
    """
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert "child exit code: 0" in result.stdout, result.stdout
    assert result.stdout.count(FORKED_MESSAGE) == 3, result.stdout
    assert "parent works: 4.0 False" in result.stdout


def test_fork_before_initialisation_works(run_python):
    code = """
        import os, torch, torch_foo
        assert not torch.foo.is_initialized()
        pid = os.fork()
        if pid == 0:
            ok = not torch.foo._is_in_bad_fork() and (torch.ones(3, device="foo") * 2).sum().item() == 6.0
            os._exit(0 if ok else 5)
        _, status = os.waitpid(pid, 0)
        print("child exit code:", os.waitstatus_to_exitcode(status))
        print("parent works:", (torch.ones(2, device="foo") + 1).sum().item())
    """
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert "child exit code: 0" in result.stdout
    assert "parent works: 4.0" in result.stdout


def test_spawned_children_use_the_device(run_python, tmp_path):
    code = """
        import multiprocessing as mp
        import torch, torch_foo

        def work(queue):
            queue.put((torch.arange(4.0, device="foo") * 2).sum().item())

        if __name__ == "__main__":
            torch.ones(1, device="foo")  # initialised in the parent
            context = mp.get_context("spawn")
            queue = context.Queue()
            child = context.Process(target=work, args=(queue,))
            child.start()
            print("child computed:", queue.get(timeout=100))
            child.join()
    """
    result = run_python(code, script=tmp_path / "spawn_child.py")
    assert result.returncode == 0, result.stderr
    assert "child computed: 12.0" in result.stdout


# A storm of processes or threads: minutes under load, run with the whole suite (CI's example).
@pytest.mark.slow
def test_a_fork_storm_with_busy_streams(run_python):
    # Sixteen children forked while four streams of the parent have work in flight. Each child gets
    # the fork error from the device, still computes on the CPU, and exits normally (sys.exit: the
    # interpreter's finalisation and the runtime's exit handler run, and must not wait for the
    # parent's queued work, which no thread of the child will ever run). The parent's results are
    # unaffected.
    code = """
        import os, sys, time, torch, torch_foo

        devices = torch.foo.device_count()
        streams = [torch.foo.Stream(f"foo:{i % devices}") for i in range(4)]
        totals = []
        for stream in streams:
            with torch.foo.stream(stream):
                totals.append(torch.zeros(1000, device=stream.device))
        statuses = []
        for _ in range(16):
            for stream, total in zip(streams, totals):
                with torch.foo.stream(stream):
                    torch.foo._sleep(2_000)
                    total.add_(1)  # in flight when the child is forked
            pid = os.fork()
            if pid == 0:
                try:
                    torch.ones(1, device="foo")
                    status = 3  # the device must refuse
                except RuntimeError as error:
                    status = 0 if "Cannot re-initialize foo in forked subprocess" in str(error) else 4
                sys.exit(status or (0 if torch.ones(3).sum().item() == 3.0 else 5))
            statuses.append(wait(pid))
        print("statuses:", statuses)
        print("totals:", [total.sum().item() for total in totals])
    """
    result = run_python(REAP_CHILD + textwrap.dedent(code))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"statuses: {[0] * 16}" in result.stdout, result.stdout + result.stderr
    assert f"totals: {[16000.0] * 4}" in result.stdout


# A storm of processes or threads: minutes under load, run with the whole suite (CI's example).
@pytest.mark.slow
def test_a_spawn_storm_while_the_parent_streams_are_busy(run_python, tmp_path):
    # Six tasks on a pool of two 'spawn' workers, each using the device, while the parent's side
    # stream runs; the workers exit normally when the pool closes (a watchdog bounds the wait).
    code = """
        import faulthandler, multiprocessing as mp
        import torch, torch_foo

        def work(i):
            x = torch.arange(1000.0, device=f"foo:{i % torch.foo.device_count()}")
            return (x * i).sum().item()

        if __name__ == "__main__":
            faulthandler.dump_traceback_later(200, exit=True)
            side = torch.foo.Stream()
            with torch.foo.stream(side):
                total = torch.zeros(1000, device="foo")
                for _ in range(50):
                    torch.foo._sleep(2_000)
                    total.add_(1)  # busy while the workers start
            pool = mp.get_context("spawn").Pool(2)
            results = pool.map_async(work, range(6)).get(timeout=150)
            pool.close()
            pool.join()
            print("results:", results)
            print("total:", total.sum().item())
    """
    result = run_python(code, script=tmp_path / "spawn_storm.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"results: {[499500.0 * i for i in range(6)]}" in result.stdout
    assert "total: 50000.0" in result.stdout
