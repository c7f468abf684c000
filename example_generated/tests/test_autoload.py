"""`import torch` loads the backend through the torch.backends entry point, and a backend that
fails to load warns instead of breaking `import torch`."""

import os
import textwrap
from pathlib import Path

AUTOLOAD = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"}


def test_import_torch_loads_the_backend(run_python):
    result = run_python(
        """
        import sys, torch
        assert "torch_foo" in sys.modules
        print((torch.ones(2, device="foo") + 1).tolist(), torch.foo.device_count())
        """,
        **AUTOLOAD,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("[2.0, 2.0]")


def test_autoload_can_be_disabled(run_python):
    result = run_python('import sys, torch; print("torch_foo" in sys.modules)', TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_broken_backend_warns_and_torch_still_imports(run_python, tmp_path: Path):
    # sitecustomize runs before `import torch` and makes the C++ extension fail to load, the way
    # a build for another torch version does.
    (tmp_path / "sitecustomize.py").write_text(
        textwrap.dedent(
            """
            import sys

            class BreakExtension:
                def find_spec(self, name, path=None, target=None):
                    if name == "torch_foo._C":
                        raise ImportError("undefined symbol: simulated stale build")

            sys.meta_path.insert(0, BreakExtension())
            """
        )
    )
    result = run_python(
        'import torch; print("ok", torch.ones(1).item())',
        PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        **AUTOLOAD,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok 1.0"
    assert "failed to load" in result.stderr
    assert "simulated stale build" in result.stderr
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in result.stderr
