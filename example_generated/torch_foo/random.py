"""Random number generation: the functions torch calls on ``torch.foo`` and users call directly.

Each foo device has a default generator (``torch.foo.default_generators[i]``, a
Philox stream: a seed and an offset). Random operators on a device draw from it unless they are given
a ``torch.Generator(device="foo")``; they never touch the CPU generator.
``torch.manual_seed`` and ``torch.seed`` call ``manual_seed_all`` here; ``torch.random.fork_rng``,
``torch.utils.checkpoint`` and ``torch.utils.data`` workers save and restore the state through
``get_rng_state`` and ``set_rng_state``. The functions mirror torch.cuda's of the same names.
"""

from collections.abc import Iterable
from typing import Any

import torch

from . import _C
from ._utils import _get_device_index

_generators: dict[int, torch.Generator] = {}


def _default_generator(device: Any = None) -> torch.Generator:
    """The default generator of `device` (int, "foo:N", torch.device; None: the current device)."""
    index = _get_device_index(device, optional=True)
    generator = _generators.get(index)
    if generator is None:
        generator = _generators[index] = _C._default_generator(index)  # raises for an invalid index
    return generator


default_generators: tuple[torch.Generator, ...] = tuple(_default_generator(i) for i in range(_C._device_count()))


def manual_seed(seed: int) -> None:
    """Seeds the default generator of the current foo device."""
    _default_generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seeds the default generators of all foo devices (``torch.manual_seed`` calls this)."""
    seed = int(seed)
    for generator in default_generators:
        generator.manual_seed(seed)


def seed() -> int:
    """Seeds the current device's default generator with a non-deterministic number and returns it."""
    return _default_generator().seed()


def seed_all() -> int:
    """Seeds all devices' default generators with one non-deterministic number and returns it."""
    value = default_generators[0].seed() if default_generators else 0
    for generator in default_generators[1:]:
        generator.manual_seed(value)
    return value


def initial_seed() -> int:
    """The seed of the current device's default generator."""
    return _default_generator().initial_seed()


def get_rng_state(device: Any = "foo") -> torch.Tensor:
    """The state of a device's default generator, as a CPU uint8 tensor (seed and offset)."""
    return _default_generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "foo") -> None:
    """Restores a state returned by :func:`get_rng_state` into a device's default generator."""
    if not isinstance(new_state, torch.Tensor):
        raise TypeError(f"set_rng_state expects a torch.ByteTensor, got {type(new_state).__name__}")
    _default_generator(device).set_state(new_state.clone(memory_format=torch.contiguous_format))


def get_rng_state_all() -> list[torch.Tensor]:
    """The states of all devices' default generators."""
    return [generator.get_state() for generator in default_generators]


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    """Restores the states returned by :func:`get_rng_state_all`, one per device."""
    new_states = list(new_states)
    if len(new_states) != len(default_generators):
        raise ValueError(f"Expected {len(default_generators)} states (one per device), got {len(new_states)}")
    for index, state in enumerate(new_states):
        set_rng_state(state, index)
