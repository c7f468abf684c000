"""Which torch this package runs with, and which torch its C++ extension was built against: the one
place the Python side asks (csrc/core/TorchVersion.h is the C++ side).

A C++ extension of torch works only with the torch release whose headers it was compiled with: torch's
C++ ABI changes between releases. Imported under another release, the extension fails with an
undefined symbol, or loads and misbehaves. load_extension() imports it after checking, and names both
versions and the rebuild command when they differ.
"""

import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import torch

# Module.cpp puts this text, followed by the torch version it was compiled against, into the extension,
# where built_with() finds it without loading the extension.
MARKER = b"torch_foo built with torch "


def release(version: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a torch version string: 2.15.0, 2.15.0+cpu, 2.16.0a0+git1234."""
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", str(version))
    if match is None:
        raise ValueError(f"not a torch version: {version!r}")
    return int(match[1]), int(match[2]), int(match[3])


def running() -> tuple[int, int, int]:
    """The release of the torch this process imported."""
    return release(torch.__version__)


def at_least(major: int, minor: int, patch: int = 0) -> bool:
    """Whether the running torch is this release or a later one: the gate for code that differs
    between the torch releases the backend supports."""
    return running() >= (major, minor, patch)


def built_with(extension: str | Path) -> str | None:
    """The torch version the extension file was compiled against, read from the file (None if it
    has no marker)."""
    found = re.search(re.escape(MARKER) + rb"(\d+\.\d+\.\d+)", Path(extension).read_bytes())
    return found[1].decode() if found else None


def mismatch(built: str) -> str:
    return (
        f"torch_foo was built against torch {built}, but torch {torch.__version__} is installed: "
        "a C++ extension works only with the torch it was compiled with. Rebuild it against this torch "
        f"(in the project's directory: pip install --no-build-isolation -e .), or install torch=={built}."
    )


def load_extension() -> ModuleType:
    """Imports torch_foo._C, refusing an extension built against another torch release."""
    try:
        extension = importlib.import_module("torch_foo._C")
    except ImportError as error:
        spec = importlib.util.find_spec("torch_foo._C")
        built = built_with(spec.origin) if spec is not None and spec.origin else None
        if built is not None and release(built) != running():
            raise ImportError(mismatch(built)) from error
        raise
    built = extension._torch_version()
    if release(built) != running():
        raise ImportError(mismatch(built))
    return extension
