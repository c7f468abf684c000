"""Checkpoints: torch.save / torch.load of foo tensors, state_dicts and modules on every device,
map_location in every direction, and weights_only=True (the default of torch.load)."""

import io

import pytest
import torch
from torch.testing import assert_close

DEVICE = "foo"


def round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


def small_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.complex64]
)
def test_tensor_round_trip_keeps_device_dtype_and_values(device, dtype):
    x = torch.randn(3, 5).to(dtype)
    loaded = round_trip(x.to(device))
    assert loaded.device == device and loaded.dtype == dtype
    assert torch.equal(loaded.cpu(), x)


def test_views_keep_sharing_their_storage(device):
    base = torch.arange(12.0, device=device)
    view = base[3:7].view(2, 2)
    loaded_base, loaded_view = round_trip([base, view])
    assert loaded_view.untyped_storage().data_ptr() == loaded_base.untyped_storage().data_ptr()
    loaded_base[4] = -1
    assert loaded_view.cpu().tolist() == [[3.0, -1.0], [5.0, 6.0]]


def test_non_contiguous_and_empty_tensors(device):
    x = torch.randn(4, 6, device=device).t()[1:, ::2]
    y = torch.empty(0, 3, device=device)
    lx, ly = round_trip((x, y))
    assert lx.stride() == x.stride() and torch.equal(lx.cpu(), x.cpu())
    assert ly.shape == (0, 3) and ly.device == device


@pytest.mark.parametrize("location", ["cpu", torch.device("cpu"), lambda storage, loc: storage])
def test_map_location_to_cpu(device, location):
    loaded = round_trip(torch.arange(6.0, device=device), map_location=location)
    assert loaded.device.type == "cpu" and loaded.tolist() == list(range(6))


def test_map_location_from_cpu(device):
    loaded = round_trip(torch.arange(6.0), map_location=device)
    assert loaded.device == device and loaded.cpu().tolist() == list(range(6))


@pytest.mark.two_devices
@pytest.mark.parametrize(
    "location",
    ["foo:0", torch.device("foo", 0), {"foo:1": "foo:0"}],
    ids=["string", "device", "dict"],
)
def test_map_location_to_another_index(location):
    loaded = round_trip(torch.arange(6.0, device="foo:1"), map_location=location)
    assert loaded.device == torch.device("foo:0")
    assert loaded.cpu().tolist() == list(range(6))


def test_map_location_bare_device_name_means_current_device():
    with torch.foo.device(torch.foo.device_count() - 1):
        loaded = round_trip(torch.ones(2), map_location=DEVICE)
    assert loaded.device.index == torch.foo.device_count() - 1


def test_state_dict_with_weights_only(device):
    model = small_model().to(device)
    model(torch.randn(5, 4, device=device))  # updates BatchNorm's running statistics
    state = round_trip(model.state_dict(), weights_only=True)
    assert all(t.device == device for t in state.values())
    fresh = small_model()
    fresh.load_state_dict(round_trip(model.state_dict(), map_location="cpu", weights_only=True))
    for name, value in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[name], value.cpu()), name


def test_whole_module_and_optimizer_checkpoint(device):
    model = small_model().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    x = torch.randn(6, 4, device=device)
    model(x).sum().backward()
    opt.step()
    checkpoint = round_trip({"model": model, "opt": opt.state_dict(), "step": 1}, weights_only=False)
    loaded = checkpoint["model"]
    assert next(loaded.parameters()).device == device
    assert_close(loaded(x).cpu(), model(x).cpu())
    exp_avg = checkpoint["opt"]["state"][0]["exp_avg"]
    assert exp_avg.device == device and torch.equal(exp_avg.cpu(), opt.state_dict()["state"][0]["exp_avg"].cpu())


def test_resume_training_on_another_device_matches(device):
    model = small_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(6, 4), torch.randn(6, 2)

    def step(m, o, d):
        o.zero_grad()
        torch.nn.functional.mse_loss(m(x.to(d)), y.to(d)).backward()
        o.step()

    step(model, opt, device)
    saved = round_trip({"model": model.state_dict(), "opt": opt.state_dict()}, map_location="cpu")
    resumed = small_model()
    resumed.load_state_dict(saved["model"])
    resumed_opt = torch.optim.SGD(resumed.parameters(), lr=0.1, momentum=0.9)
    resumed_opt.load_state_dict(saved["opt"])
    step(model, opt, device)
    step(resumed, resumed_opt, "cpu")
    for p, q in zip(model.parameters(), resumed.parameters(), strict=True):
        assert_close(p.detach().cpu(), q.detach())


def test_storage_round_trip(device):
    storage = torch.arange(4, dtype=torch.uint8, device=device).untyped_storage()
    loaded = round_trip(storage)
    assert loaded.device == device and loaded.cpu().tolist() == [0, 1, 2, 3]


def test_invalid_map_location_is_a_clear_error():
    with pytest.raises(RuntimeError, match="device 99 but torch.foo.device_count"):
        round_trip(torch.ones(2), map_location="foo:99")
