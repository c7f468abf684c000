"""Per-tensor backend metadata (c10::BackendMeta): the format tag a foo tensor carries, read and written
through torch._utils.get_tensor_metadata / set_tensor_metadata, kept by every path PyTorch carries
backend metadata through (shallow copies, torch.save / torch.load) and by the device's own copies
(core/BackendMeta.cpp, aten/BackendMetaCopies.cpp)."""

import copy
import io
import pickle

import pytest
import torch
import torch.nn as nn
from torch._utils import get_tensor_metadata, set_tensor_metadata

DEVICE = torch.device("foo", 0)
PREFIX = "foo_format_"
two_devices = pytest.mark.skipif(torch.foo.device_count() < 2, reason="needs two foo devices")


def tag(t: torch.Tensor, name: str) -> torch.Tensor:
    set_tensor_metadata(t, {PREFIX + name: True})
    return t


def format_of(t: torch.Tensor) -> str:
    names = [key[len(PREFIX) :] for key, value in get_tensor_metadata(t).items() if key.startswith(PREFIX) and value]
    assert len(names) <= 1, names
    return names[0] if names else "plain"


def tagged(name: str = "tiled", device=DEVICE) -> torch.Tensor:
    return tag(torch.arange(12.0).reshape(3, 4).to(device), name)


def round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


# ---- storing it -------------------------------------------------------------------------------


def test_new_tensors_are_plain_and_have_no_metadata():
    t = torch.ones(2, device=DEVICE)
    assert format_of(t) == "plain"
    assert get_tensor_metadata(t) == {}


@pytest.mark.parametrize("name", ["tiled", "blocked"])
def test_set_and_get(name):
    t = tagged(name)
    assert format_of(t) == name
    assert get_tensor_metadata(t) == {PREFIX + name: True}


def test_plain_removes_the_tag_and_other_entries_are_left_to_torch():
    t = tagged()
    tag(t, "plain")
    assert format_of(t) == "plain"
    x = torch.ones(2, dtype=torch.complex64, device=DEVICE)
    set_tensor_metadata(x, {"conj": True, PREFIX + "blocked": True})
    assert x.is_conj() and format_of(x) == "blocked"


def test_the_tag_does_not_change_the_values():
    t = tagged()
    assert torch.equal(t.cpu(), torch.arange(12.0).reshape(3, 4))
    assert torch.equal((t * 2).cpu(), torch.arange(12.0).reshape(3, 4) * 2)


def test_unknown_or_conflicting_formats_are_clear_errors():
    t = torch.ones(2, device=DEVICE)
    with pytest.raises(RuntimeError, match="Unknown foo tensor format 'zigzag'.*tiled"):
        tag(t, "zigzag")
    with pytest.raises(RuntimeError, match="two foo formats"):
        set_tensor_metadata(t, {PREFIX + "tiled": True, PREFIX + "blocked": True})
    with pytest.raises(RuntimeError, match="Only dense foo tensors have a foo format"):
        tag(torch.eye(2, device=DEVICE).to_sparse(), "tiled")


def test_host_tensors_have_no_formats():
    t = tag(torch.ones(2), "tiled")  # PyTorch ignores entries no CPU function reads
    assert get_tensor_metadata(t) == {}


# ---- paths PyTorch carries it through: shallow copies -------------------------------------------


@pytest.mark.parametrize(
    "shallow_copy",
    [
        lambda t: t.detach(),
        lambda t: t.data,
        lambda t: nn.Parameter(t),
        lambda t: t.requires_grad_().detach(),
    ],
    ids=["detach", "data", "Parameter", "detach_of_a_leaf"],
)
def test_shallow_copies_keep_it(shallow_copy):
    assert format_of(shallow_copy(tagged())) == "tiled"


def test_data_assignment_takes_the_source_tag():
    target = torch.zeros(3, 4, device=DEVICE)
    target.data = tagged("blocked")
    assert format_of(target) == "blocked"
    target.data = torch.zeros(3, device=DEVICE)
    assert format_of(target) == "plain"


# ---- paths PyTorch carries it through: checkpoints ----------------------------------------------


def test_torch_save_and_load_keep_it(device):
    t = tagged("blocked", device)
    loaded = round_trip({"t": t, "plain": torch.ones(1, device=device)})
    assert loaded["t"].device == device and format_of(loaded["t"]) == "blocked"
    assert format_of(loaded["plain"]) == "plain"
    assert torch.equal(loaded["t"].cpu(), t.cpu())


def test_pickle_keeps_it():
    assert format_of(pickle.loads(pickle.dumps(tagged()))) == "tiled"


def test_state_dict_and_module_checkpoints_keep_it():
    model = nn.Linear(4, 3).to(DEVICE)
    tag(model.weight, "tiled")
    state = round_trip(model.state_dict())
    assert format_of(state["weight"]) == "tiled" and format_of(state["bias"]) == "plain"
    whole = round_trip(model, weights_only=False)
    assert format_of(whole.weight) == "tiled"


def test_loading_onto_the_cpu_drops_it():
    on_host = round_trip(tagged(), map_location="cpu")
    assert on_host.device.type == "cpu" and get_tensor_metadata(on_host) == {}
    assert format_of(round_trip(on_host, map_location=DEVICE)) == "plain"


@two_devices
def test_loading_onto_another_device_keeps_it():
    loaded = round_trip(tagged(), map_location="foo:1")
    assert loaded.device == torch.device("foo:1") and format_of(loaded) == "tiled"


# ---- the device's own copies ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "make_like",
    [
        lambda t: t.clone(),
        lambda t: torch.empty_like(t),
        lambda t: torch.zeros_like(t),
        lambda t: torch.rand_like(t),
        lambda t: t.new_empty((5,)),
        lambda t: t.to(torch.float64),
        lambda t: t.half(),
        lambda t: copy.deepcopy(t),
    ],
    ids=["clone", "empty_like", "zeros_like", "rand_like", "new_empty", "to_dtype", "half", "deepcopy"],
)
def test_new_tensors_made_like_a_tagged_one_keep_it(make_like):
    assert format_of(make_like(tagged())) == "tiled"


@two_devices
def test_copy_to_another_device_keeps_it():
    moved = tagged().to("foo:1")
    assert moved.device == torch.device("foo:1") and format_of(moved) == "tiled"


def test_copy_into_an_existing_tensor_keeps_the_destination_format():
    plain = torch.zeros(3, 4, device=DEVICE)
    plain.copy_(tagged())
    assert format_of(plain) == "plain"
    blocked = tagged("blocked")
    blocked.copy_(tagged("tiled"))
    assert format_of(blocked) == "blocked"


def test_what_starts_plain():
    """Results of computations, views (PyTorch gives a view a new TensorImpl without backend
    metadata) and copies to the host, which has no formats."""
    t = tagged()
    assert format_of(t + 1) == "plain"
    assert format_of(t.view(-1)) == "plain"
    assert get_tensor_metadata(t.cpu()) == {}


def test_a_module_moved_between_devices_and_its_optimizer_state_keep_it():
    model = nn.Linear(4, 3).to(DEVICE)
    tag(model.weight, "tiled")
    weight = model.weight
    if torch.foo.device_count() > 1:
        model.to("foo:1")
        assert model.weight is weight and model.weight.device == torch.device("foo:1")
    assert format_of(model.weight) == "tiled"
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 4, device=model.weight.device)).sum().backward()
    optimizer.step()
    state = optimizer.state[model.weight]
    assert format_of(state["exp_avg"]) == "tiled" and format_of(state["exp_avg_sq"]) == "tiled"
    assert format_of(model.weight) == "tiled"
