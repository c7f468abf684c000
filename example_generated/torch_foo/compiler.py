"""How ``torch.compile`` finds foo devices: registrations made as the compiler loads, and the
device's own compile backend, ``torch.compile(model, backend="foo")``.

``torch.compile`` looks two things up by device name: the device interface TorchDynamo traces
device code with (``_dynamo.py``) and the Inductor backend that generates and launches kernels
(``_inductor/``). Registering them needs ``torch._dynamo`` and ``torch._inductor``, which
``import torch`` does not load and which take about as long to import as torch itself. So
``install()`` (called when torch_foo is imported) registers each one as soon as torch can use it,
never earlier: importing torch_foo stays as fast as before.

- Inductor, from torch 2.15 on: Inductor calls the device module's ``_inductor_backend_init()``
  (this module's ``inductor_backend_init``, which ``__init__.py`` exposes under that name) before its
  first compilation for the device, under its compile lock, until the backend is registered.
- Dynamo, and Inductor under torch 2.14: torch has no such call, and Python has no hook that runs
  after a given module is imported (PEP 369 was withdrawn). So these registrations wait with
  ``_compat.after_import``, whose finder wraps the loader of the torch modules below, and only those,
  and run right after the module has loaded, before anything can use it.

A registration that fails warns and leaves ``torch.compile`` working for other devices. Each one
first runs the self-test of the private torch API it uses (``_compat.check``), so a torch release that
changed it is named in the warning.
"""

import functools
import warnings
from collections.abc import Callable
from typing import Any

from . import _compat, _version


def _register_dynamo() -> None:
    _compat.check("dynamo")
    from . import _dynamo

    _dynamo.register()


def _register_inductor() -> None:
    _compat.check("inductor")
    from . import _inductor

    _inductor.register()


def backend(graph_module: Any, example_inputs: Any, *, mode: str | None = None, options: dict | None = None) -> Any:
    """The compile backend named after the device: ``torch.compile(model, backend="foo")``, listed
    by ``torch._dynamo.list_backends()`` (pyproject.toml's ``torch_dynamo_backends`` entry point).

    TorchDynamo hands it each captured FX graph with example inputs and runs what it returns. This
    is where a hardware team puts its own graph compiler: a function from the graph to a callable
    that runs it on the device. Until then it runs Inductor for the device (``_inductor/``), with
    ``mode`` and ``options`` as ``torch.compile`` takes them for ``backend="inductor"``.
    """
    _compat.check("inductor")
    list_mode_options = _compat.resolve("inductor.list_mode_options")
    compile_fx = _compat.resolve("inductor.compile_fx")

    config = dict(list_mode_options(mode)) if mode else {}
    config.update(options or {})
    return compile_fx(graph_module, example_inputs, config_patches=config)


_INDUCTOR = _compat.touchpoint("inductor.module").module

# torch module -> the registration that waits for it to load.
_REGISTRATIONS: dict[str, Callable[[], None]] = {
    # The whole package: the registration touches several of its modules, which import each other.
    _compat.touchpoint("dynamo.module").module: _register_dynamo,
}
if not _version.at_least(2, 15):
    # Inductor's entry point: loading it loads the codegen modules the backend subclasses.
    _REGISTRATIONS[_INDUCTOR] = _register_inductor
_registered: set[str] = set()


def _run(module_name: str, register: Callable[[], None]) -> None:
    if module_name in _registered:
        return
    _registered.add(module_name)
    try:
        register()
    except Exception as error:  # noqa: BLE001  never break torch.compile for other devices
        reason = str(error) if isinstance(error, _compat.TorchCompatError) else repr(error)
        warnings.warn(
            f"torch_foo: could not register with {module_name}; torch.compile cannot target "
            f"foo devices in this process. {reason}",
            stacklevel=2,
        )


def inductor_backend_init() -> None:
    """Registers the Inductor backend: torch.foo._inductor_backend_init, which Inductor calls
    (torch 2.15 on) before it compiles for the device, until the backend is registered."""
    _run(_INDUCTOR, _register_inductor)


def install() -> None:
    """Registers now what torch has loaded, and the rest when it loads. Idempotent."""
    for module_name, register in _REGISTRATIONS.items():
        _compat.after_import(module_name, functools.partial(_run, module_name, register))
