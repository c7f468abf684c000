"""Creating tensors on each device, views that alias device memory, in-place updates, resize_ and set_."""

import pytest
import torch
from torch.testing import assert_close

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int8,
    torch.uint8,
    torch.bool,
    torch.complex64,
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_factories_match_cpu(device, dtype):
    for make in (
        lambda **kw: torch.zeros(2, 3, **kw),
        lambda **kw: torch.ones(2, 3, **kw),
        lambda **kw: torch.full((4,), 7, **kw),
        lambda **kw: torch.tensor([[1, 0], [0, 1]], **kw),
        lambda **kw: torch.eye(3, **kw),
    ):
        x = make(device=device, dtype=dtype)
        assert x.device == device and x.dtype == dtype
        assert_close(x.cpu(), make(dtype=dtype))


def test_empty_and_like_factories(device):
    x = torch.empty(3, 4, device=device)
    assert x.shape == (3, 4) and x.device == device
    assert torch.empty_like(x).device == device
    assert_close(torch.zeros_like(x).cpu(), torch.zeros(3, 4))
    assert_close(torch.ones_like(x, dtype=torch.int64).cpu(), torch.ones(3, 4, dtype=torch.int64))
    assert torch.empty(0, device=device).numel() == 0
    assert torch.empty(2, 0, 3, device=device).shape == (2, 0, 3)
    assert torch.empty_strided((2, 3), (1, 2), device=device).stride() == (1, 2)
    channels_last = torch.empty(2, 3, 4, 5, device=device, memory_format=torch.channels_last)
    assert channels_last.is_contiguous(memory_format=torch.channels_last)


def test_scalars_item_and_tolist(device):
    x = torch.tensor([1.5, -2.0], device=device)
    assert x[0].item() == 1.5
    assert x.tolist() == [1.5, -2.0]
    assert torch.tensor(3, device=device).item() == 3
    assert torch.tensor(True, device=device).item() is True
    assert torch.tensor(1 + 2j, device=device).item() == 1 + 2j
    assert "device='foo:" in repr(x)


def test_views_alias_device_memory(device):
    base = torch.arange(12.0).to(device)
    views = {
        "view": base.view(3, 4),
        "reshape": base.reshape(2, 6),
        "t": base.view(3, 4).t(),
        "permute": base.view(2, 2, 3).permute(2, 0, 1),
        "select": base.view(3, 4)[1],
        "slice": base[2:10:3],
        "narrow": base.narrow(0, 4, 4),
        "expand": base[:1].expand(5),
        "unsqueeze": base.unsqueeze(0),
        "unfold": base.unfold(0, 4, 2),
        "diagonal": base.view(3, 4).diagonal(),
        "as_strided": base.as_strided((2, 2), (4, 1), 1),
    }
    cpu = torch.arange(12.0)
    expected = {
        "view": cpu.view(3, 4),
        "reshape": cpu.reshape(2, 6),
        "t": cpu.view(3, 4).t(),
        "permute": cpu.view(2, 2, 3).permute(2, 0, 1),
        "select": cpu.view(3, 4)[1],
        "slice": cpu[2:10:3],
        "narrow": cpu.narrow(0, 4, 4),
        "expand": cpu[:1].expand(5),
        "unsqueeze": cpu.unsqueeze(0),
        "unfold": cpu.unfold(0, 4, 2),
        "diagonal": cpu.view(3, 4).diagonal(),
        "as_strided": cpu.as_strided((2, 2), (4, 1), 1),
    }
    for name, v in views.items():
        assert v._base is base or v._is_view(), name
        assert v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr(), name
        assert_close(v.cpu(), expected[name], msg=name)


def test_writes_through_views_reach_the_base(device):
    base = torch.zeros(3, 4, device=device)
    base[1].fill_(2.0)
    base[:, 3] = 5.0
    base.t()[0].add_(1.0)
    base.view(-1)[0:2].mul_(10.0)
    expected = torch.zeros(3, 4)
    expected[1].fill_(2.0)
    expected[:, 3] = 5.0
    expected.t()[0].add_(1.0)
    expected.view(-1)[0:2].mul_(10.0)
    assert_close(base.cpu(), expected)


def test_in_place_view_ops_change_the_tensor_itself(device):
    # as_strided_, transpose_, unsqueeze_ restride the tensor over the same storage: as_strided_ may
    # reach storage outside a view's elements and counts its offset from the storage's start.
    results = {}
    for dev in ("cpu", device):
        storage = torch.arange(12.0, device=dev)
        view = storage[2:]
        view.as_strided_((2, 3), (3, 1), 1)
        matrix = storage.view(3, 4)
        matrix.transpose_(0, 1).unsqueeze_(0).squeeze_(0)
        results[dev] = (view, matrix)
        assert view.untyped_storage().data_ptr() == storage.untyped_storage().data_ptr()
    for name, on_cpu, on_device in zip(("as_strided_", "transpose_"), results["cpu"], results[device], strict=True):
        assert on_device.shape == on_cpu.shape, name
        assert on_device.stride() == on_cpu.stride(), name
        assert on_device.storage_offset() == on_cpu.storage_offset(), name
        assert_close(on_device.cpu(), on_cpu, msg=name)


def test_complex_views(device):
    z = torch.tensor([1 + 2j, 3 - 4j], device=device)
    real = torch.view_as_real(z)
    assert_close(real.cpu(), torch.tensor([[1.0, 2.0], [3.0, -4.0]]))
    real[0, 1] = 7.0
    assert z[0].item() == 1 + 7j
    assert_close(torch.view_as_complex(real).cpu(), z.cpu())


def test_in_place_updates(device):
    x = torch.ones(4, device=device)
    x.add_(1).mul_(3).sub_(1).div_(5)
    assert_close(x.cpu(), torch.full((4,), 1.0))
    x.zero_()
    assert_close(x.cpu(), torch.zeros(4))
    x.fill_(torch.tensor(2.5))
    assert_close(x.cpu(), torch.full((4,), 2.5))
    x.fill_(torch.tensor(1.5, device=device))
    assert_close(x.cpu(), torch.full((4,), 1.5))
    x[torch.tensor([0, 2])] = 9.0  # index_put_ through the fallback, in place
    assert_close(x.cpu(), torch.tensor([9.0, 1.5, 9.0, 1.5]))


def test_resize_keeps_contents(device):
    x = torch.arange(4.0, device=device)
    ptr = x.data_ptr()
    x.resize_(2)
    assert x.data_ptr() == ptr and x.tolist() == [0.0, 1.0]
    x.resize_(100)
    assert x.shape == (100,)
    assert x[:2].tolist() == [0.0, 1.0]
    x.resize_(2, 2)
    assert x.shape == (2, 2)
    storage = torch.empty(0, device=device).untyped_storage()
    storage.resize_(64)
    assert storage.nbytes() == 64 and storage.device == device


def test_set_overloads(device):
    src = torch.arange(6.0, device=device)
    x = torch.empty(0, device=device)
    x.set_(src)
    assert x.data_ptr() == src.data_ptr() and x.tolist() == src.tolist()
    y = torch.empty(0, device=device)
    y.set_(src.untyped_storage(), 2, (2, 2), (2, 1))
    assert y.tolist() == [[2.0, 3.0], [4.0, 5.0]]
    z = torch.empty(0, device=device)
    z.set_(src.untyped_storage())
    assert z.tolist() == src.tolist()
    w = torch.ones(3, device=device)
    w.set_()
    assert w.numel() == 0 and w.device == device


def test_cannot_pin_or_use_layouts_the_device_lacks(device):
    with pytest.raises(RuntimeError, match="pin"):
        torch.empty(2, device=device, pin_memory=True)
    # Sparse layouts exist on the device (tests/test_sparse.py); these do not.
    with pytest.raises(RuntimeError, match="mkldnn"):
        torch.empty(2, device=device, layout=torch._mkldnn)
    with pytest.raises(RuntimeError, match="only the strided layout"):
        torch.empty(2, device=device, layout=torch.jagged)


# Every factory function with each keyword argument its schemas take, on the device and on the CPU:
# the device accepts what the CPU accepts (same dtype, layout, shape, strides, requires_grad, and
# values where they are deterministic) and refuses what the CPU refuses, with the same exception type.
# The keywords come from torch's own schemas, so a keyword a new torch release adds fails here until
# it has values below.
FACTORIES = {
    "empty": ((2, 3, 4, 5),),
    "zeros": ((2, 3),),
    "ones": ((2, 3),),
    "full": ((2, 3), 2),
    "rand": ((2, 3),),
    "randn": ((2, 3),),
    "randint": (0, 5, (2, 3)),
    "randperm": (5,),
    "normal": (0.0, 1.0, (2, 3)),
    "arange": (0, 6),
    "range": (0, 5),
    "linspace": (0, 1, 5),
    "logspace": (0, 1, 5),
    "eye": (3,),
    "empty_strided": ((2, 3), (1, 2)),
    "scalar_tensor": (2,),
    "tril_indices": (3, 3),
    "triu_indices": (3, 3),
    "hann_window": (4,),
    "hamming_window": (4,),
    "bartlett_window": (4,),
    "blackman_window": (4,),
    "kaiser_window": (4,),
    "empty_like": (),
    "zeros_like": (),
    "ones_like": (),
    "full_like": (2,),
    "rand_like": (),
    "randn_like": (),
    "randint_like": (5,),
}
RANDOM = {"empty", "empty_strided", "empty_like", "rand", "randn", "randint", "randperm", "normal"}
RANDOM |= {"rand_like", "randn_like", "randint_like"}


def keyword_values(device: torch.device) -> dict:
    return {
        "dtype": [torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.bool, torch.complex64],
        # Sparse factories: tests/test_sparse.py (torch.scalar_tensor ignores a sparse layout on the CPU only).
        "layout": [torch.strided],
        "pin_memory": [False],
        "memory_format": [torch.contiguous_format, torch.channels_last, torch.preserve_format],
        "generator": [torch.Generator(device).manual_seed(0)],
        "requires_grad": [True],
        "out": [torch.empty(0, device=device)],
    }


def schema_keywords(name: str) -> set[str]:
    packet = getattr(torch.ops.aten, name)
    overloads = (getattr(packet, overload)._schema for overload in packet.overloads())
    keywords = {a.name for schema in overloads for a in schema.arguments if a.kwarg_only}
    return (keywords | {"requires_grad"}) - {"device"}


def facts(t: torch.Tensor) -> tuple:
    return t.dtype, t.layout, t.shape, t.requires_grad, t.stride() if t.layout == torch.strided else None


def outcome(name: str, device: torch.device, keyword: str, value):
    args = FACTORIES[name]
    if name.endswith("_like"):
        args, kwargs = (torch.ones(2, 3, 4, 5, device=device), *args), {}
    else:
        kwargs = {"device": device}
    try:
        return getattr(torch, name)(*args, **kwargs, **{keyword: value})
    except Exception as error:  # noqa: BLE001  the CPU's exception type is the expectation
        return error


@pytest.mark.parametrize("name", FACTORIES)
def test_factory_keywords_behave_as_on_cpu(device, name):
    cpu = torch.device("cpu")
    values = {d: keyword_values(d) for d in (cpu, device)}
    mismatches = []
    for keyword in sorted(schema_keywords(name)):
        assert keyword in values[cpu], f"torch.{name} takes {keyword}=, which this test has no values for"
        for on_cpu, on_device in zip(values[cpu][keyword], values[device][keyword], strict=True):
            expected, got = outcome(name, cpu, keyword, on_cpu), outcome(name, device, keyword, on_device)
            case = f"torch.{name}({keyword}={on_cpu!r})"
            if isinstance(expected, Exception) or isinstance(got, Exception):
                if type(expected) is not type(got):
                    mismatches.append(f"{case}: CPU gives {expected!r}, the device {got!r}")
                continue
            if got.device.type != device.type or facts(got) != facts(expected):
                mismatches.append(f"{case}: CPU gives {facts(expected)}, the device {got.device} {facts(got)}")
            elif name not in RANDOM and not torch.equal(got.detach().cpu().to_dense(), expected.detach().to_dense()):
                mismatches.append(f"{case}: values differ")
    assert not mismatches, "\n".join(mismatches)
