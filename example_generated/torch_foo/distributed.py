"""torch.distributed on foo devices: the c10d backend ``"fooccl"``.

Importing torch_foo registers it for foo tensors (and CPU tensors), so every way of
starting a process group uses it::

    torch.foo.set_device(local_rank)
    dist.init_process_group()                         # the accelerator's backend, as tutorials write it
    dist.init_process_group("fooccl")
    dist.init_process_group(device_id=torch.device("foo", local_rank))
    dist.init_process_group("cpu:gloo,foo:fooccl")

Each of them gives the same group: foo and CPU tensors on fooccl (which hands CPU tensors to Gloo).

DDP, FSDP2 (``fully_shard``), DTensor and ``init_device_mesh("foo", ...)`` then work on the
device. The backend is C++ (csrc/distributed/): collectives run on streams of the device, in order
with the work queued before them, and exchange data through Gloo, which torch ships.
"""

import datetime
import os
import warnings
from typing import Any

import torch
import torch.distributed as dist

from . import _C, _compat

BACKEND = "fooccl"
DEVICES = ["foo", "cpu"]


def _create_backend(options: Any, backend_options: object = None):
    """torch.distributed's creator for fooccl: called on every rank of a new process group.

    The backend exchanges data through three Gloo groups of its own: one for collectives, one for
    sends and receives (which run on other streams), one for CPU tensors. Each gets its own keys in
    the group's store. A port that replaces Gloo by a collective library creates its communicator
    here instead.

    Collectives check that every rank made the same call (collective, dtype, size, root): ranks
    that disagree get an error naming the difference, where Gloo alone would exchange garbage or
    abort the process. The check is one small exchange; by default a collective makes it unless the
    calls before predict it (a loop repeating its collectives checks each distinct call once).
    FOO_CCL_CHECK_CALLS (read when the group is created) chooses: `all` checks every
    call (so does TORCH_DISTRIBUTED_DEBUG=DETAIL), `0` none.
    """
    store, rank, size = options.store, options.group_rank, options.group_size
    timeout = options.timeout
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))

    def gloo(purpose: str) -> "dist.ProcessGroupGloo":
        return dist.ProcessGroupGloo(dist.PrefixStore(f"{BACKEND}/{purpose}/", store), rank, size, timeout)

    timeout_ms = max(1, int(timeout.total_seconds() * 1000))
    check_calls = _check_calls_mode()
    backend = _C._ccl_backend(gloo("collectives"), gloo("p2p"), gloo("host"), rank, size, timeout_ms, check_calls)
    return _whole_group(store, rank, size, backend)


def _whole_group(store, rank: int, size: int, backend) -> "dist.ProcessGroup":
    """The process group itself, not only its backend: foo and CPU tensors (object collectives and
    barrier among them) on fooccl, the default backend: what torch builds for init_process_group("fooccl").

    torch 2.13 builds the group around a backend itself, but `init_process_group()` without a
    backend or device_id (the tutorials' form) leaves it broken for an accelerator other than CUDA:
    `_new_process_group_helper` (torch/distributed/distributed_c10d.py) creates only the
    accelerator's backend, registered as CUSTOM, and declares GLOO the group's default type, so the
    first caller of `ProcessGroup::getDefaultBackend` (DDP's constructor, through its logger) fails
    with "Could not find backend type 1". XPU's xccl fails the same way (pytorch/pytorch#189193
    fixes it upstream). A creator that returns a `ProcessGroup` replaces torch's group (the path
    torch keeps for Python process groups), which every form then shares. The group's setters
    (`_register_backend`, `_set_default_backend`) are private: torch has no public way to build one
    (touchpoints distributed.* in _compat.py, checked when the backend registers).
    What the replacement drops: the device of `init_process_group(device_id=...)` is not recorded as
    the group's `bound_device_id` (it binds no communicator early; `barrier()` uses the current
    device), and with "cpu:gloo,foo:fooccl" CPU tensors run on this Gloo group instead of the
    one torch created for them (fooccl hands them to a Gloo group of its own: the same exchange).
    """
    group = dist.ProcessGroup(store, rank, size)
    register_backend = _compat.resolve("distributed.ProcessGroup._register_backend")
    custom = _compat.resolve("distributed.ProcessGroup.BackendType.CUSTOM")
    for device in DEVICES:
        register_backend(group, torch.device(device), custom, backend)
    _compat.resolve("distributed.ProcessGroup._set_default_backend")(group, custom)
    return group


# The check modes of FOO_CCL_CHECK_CALLS, by each spelling it accepts: the modes are named as the
# C++ backend names them (CheckCalls in csrc/distributed/Communicator.h).
_CHECK_CALLS_SETTINGS = {
    **dict.fromkeys(("all", "every"), "all"),
    **dict.fromkeys(("", "1", "on", "true", "yes", "changes"), "changes"),
    **dict.fromkeys(("0", "off", "false", "no"), "off"),
}


def _check_calls_mode() -> str:
    """The backend's check mode ("all", "changes" or "off") from FOO_CCL_CHECK_CALLS and
    TORCH_DISTRIBUTED_DEBUG=DETAIL (which checks all when the variable is unset)."""
    setting = os.environ.get("FOO_CCL_CHECK_CALLS", "").strip().lower()
    if setting not in _CHECK_CALLS_SETTINGS:
        raise ValueError(
            f"FOO_CCL_CHECK_CALLS={setting!r}: expected 'all' (check every collective), "
            "'1' or unset (check the ones the calls before do not predict) or '0' (no check)"
        )
    mode = _CHECK_CALLS_SETTINGS[setting]
    if mode == "changes" and os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL":
        return "all"
    return mode


def _register() -> None:
    if not dist.is_available() or not dist.is_gloo_available():
        return  # a torch built without distributed support or Gloo: nothing to register with
    if BACKEND in dist.Backend.backend_list:
        return  # importing again
    creator = _create_backend
    try:
        _compat.check("distributed")
    except _compat.TorchCompatError as error:
        # The device works without distributed: warn now, and fail clearly where fooccl is asked for.
        warnings.warn(f"{error}\ntorch.distributed cannot use {BACKEND} in this process.", stacklevel=2)
        creator = _unsupported(error)
    # devices must be a list: register_backend iterates it (a plain string would be per character).
    dist.Backend.register_backend(BACKEND, creator, extended_api=True, devices=DEVICES)


def _unsupported(error: "_compat.TorchCompatError"):
    """A creator that raises `error` again: init_process_group("fooccl") names what torch changed."""

    def create(*args: object, **kwargs: object):
        raise _compat.TorchCompatError(error.problems)

    return create


_register()
