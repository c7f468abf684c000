"""The extension belongs to the torch it was compiled against (torch_foo/_version.py): under
another torch release the import fails with both versions and the rebuild command, not an undefined
symbol or a backend that misbehaves."""

import pytest

from torch_foo import _C, _version

REBUILD = "pip install --no-build-isolation -e ."


def test_the_extension_says_which_torch_it_was_built_against():
    assert _version.release(_C._torch_version()) == _version.running()
    assert _version.built_with(_C.__file__) == _C._torch_version()


def test_versions_are_compared_by_release():
    assert _version.release("2.15.0+cpu") == _version.release("2.15.0") == (2, 15, 0)
    assert _version.release("2.14.0a0+git1234") == (2, 14, 0)
    assert _version.at_least(*_version.running()) and not _version.at_least(_version.running()[0] + 1, 0)
    with pytest.raises(ValueError, match="not a torch version"):
        _version.release("nightly")


def test_another_torch_release_is_refused_with_both_versions(run_python):
    """The extension loads, but it was compiled for another release (as a patch release might)."""
    result = run_python(
        """
        import torch
        torch.__version__ = "2.99.0"
        import torch_foo
        """
    )
    assert result.returncode != 0
    built = _C._torch_version()
    expected = f"ImportError: torch_foo was built against torch {built}, but torch 2.99.0 is installed"
    assert expected in result.stderr
    assert REBUILD in result.stderr and f"torch=={built}" in result.stderr


def import_failing_to_load(loader_error: str, torch_version: str | None = None) -> str:
    """A program that imports the package while the import of its extension fails with `loader_error`
    (as the dynamic loader would), the running torch claiming `torch_version` if given."""
    pretend = f"torch.__version__ = {torch_version!r}" if torch_version else ""
    return f"""
import importlib
import torch

real = importlib.import_module


def import_module(name, *args):
    if name == "torch_foo._C":
        raise ImportError({loader_error!r})
    return real(name, *args)


importlib.import_module = import_module
{pretend}
import torch_foo
"""


def test_an_extension_that_cannot_load_under_another_torch_names_both_versions(run_python):
    """What a build for one release does under another: the dynamic loader refuses it for a symbol
    the other release does not have. The version comes from the file, which cannot be loaded."""
    undefined = "torch_foo/_C.so: undefined symbol: _ZN3c1015SmallVectorBase"
    result = run_python(import_failing_to_load(undefined, torch_version="2.99.0"))
    assert result.returncode != 0
    assert f"was built against torch {_C._torch_version()}, but torch 2.99.0 is installed" in result.stderr
    assert "undefined symbol" in result.stderr, "the loader's error stays in the chain"


def test_an_import_error_under_the_same_torch_is_left_as_it_is(run_python):
    result = run_python(import_failing_to_load("libsomething.so: cannot open shared object file"))
    assert result.returncode != 0
    assert "ImportError: libsomething.so: cannot open shared object file" in result.stderr
    assert "torch_foo was built against torch" not in result.stderr
