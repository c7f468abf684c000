"""Loads torch_foo when torch is imported (the "torch.backends" entry point).

This module is separate from the package on purpose: torch calls the entry point while
`import torch` runs, and an exception here would make `import torch` fail for every program in the
environment. If the backend cannot load (a build for another torch version, a missing library),
we warn with the fix and leave torch usable.
"""

import warnings


def load() -> None:
    try:
        import torch_foo  # noqa: F401
    except Exception as error:  # noqa: BLE001 - any failure must leave `import torch` working
        warnings.warn(
            f"The foo backend (torch_foo) failed to load and is unavailable: {error!r}. "
            "Rebuild it against the installed torch with `pip install --no-build-isolation -e <path "
            "to torch-foo>`, or set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to stop torch from loading it.",
            RuntimeWarning,
            stacklevel=2,
        )
