"""Fork safety: a child forked after the runtime was initialised gets a clear error in PyTorch's
wording (not a hang) and torch.foo._is_in_bad_fork() says so; a child forked before initialisation
works, and so do 'spawn' children."""

import pytest

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
