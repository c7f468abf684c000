"""Sparse tensors on the device: COO and CSR/CSC creation, coalescing, arithmetic, sparse @ dense,
sampled_addmm, layout conversions, autograd and checkpoints, each compared with the same code on the
CPU (families/Sparse.cpp)."""

import io

import pytest
import torch
from torch.testing import assert_close

DEVICE = torch.device("foo", 0)
pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")


@pytest.fixture(autouse=True)
def _check_sparse_invariants():
    """Every sparse tensor the tests build is checked (indices in range, compressed indices sorted);
    this also silences PyTorch's warning that the checks are off."""
    with torch.sparse.check_sparse_tensor_invariants(enable=True):
        yield


def coo(device, coalesced=False, dtype=torch.float32):
    """A 3 x 4 COO tensor with a duplicate entry at (0, 1) unless `coalesced`."""
    indices = torch.tensor([[0, 2, 0, 1], [1, 3, 1, 0]])
    values = torch.tensor([1.0, 2.0, 3.0, -4.0], dtype=dtype)
    s = torch.sparse_coo_tensor(indices, values, (3, 4), device=device)
    return s.coalesce() if coalesced else s


def dense(device, *shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(device)


def same_sparse(got: torch.Tensor, expected: torch.Tensor) -> None:
    """`got` lives on the device and equals `expected` (from the CPU) in layout, structure and values."""
    assert got.device.type == "foo"
    assert got.layout == expected.layout and got.shape == expected.shape and got.dtype == expected.dtype
    if got.layout == torch.sparse_coo:
        assert got.is_coalesced() == expected.is_coalesced()
        assert got._nnz() == expected._nnz()
        assert torch.equal(got._indices().cpu(), expected._indices())
        assert_close(got._values().cpu(), expected._values())
    elif got.layout in (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc):
        by_rows = got.layout in (torch.sparse_csr, torch.sparse_bsr)
        compressed, plain = ("crow_indices", "col_indices") if by_rows else ("ccol_indices", "row_indices")
        assert torch.equal(getattr(got, compressed)().cpu(), getattr(expected, compressed)())
        assert torch.equal(getattr(got, plain)().cpu(), getattr(expected, plain)())
        assert_close(got.values().cpu(), expected.values())
    assert_close(got.to_dense().cpu(), expected.to_dense())


# ---- creation and structure ----------------------------------------------------------------------


def test_sparse_coo_tensor_on_the_device(device):
    s = coo(device)
    assert s.is_sparse and s.device == device and s.layout == torch.sparse_coo
    assert (s.sparse_dim(), s.dense_dim(), s._nnz()) == (2, 0, 4)
    assert s._indices().device == device and s._values().device == device
    same_sparse(s, coo("cpu"))


def test_hybrid_coo_tensor_with_dense_dimensions():
    indices = torch.tensor([[0, 2]])
    values = torch.arange(6.0).reshape(2, 3)
    s = torch.sparse_coo_tensor(indices.to(DEVICE), values.to(DEVICE), (4, 3))
    assert (s.sparse_dim(), s.dense_dim()) == (1, 1)
    same_sparse(s, torch.sparse_coo_tensor(indices, values, (4, 3)))


@pytest.mark.parametrize("sparse_dim", [None, 1])
def test_to_sparse_from_a_dense_device_tensor(sparse_dim):
    x = dense("cpu", 4, 5) * (torch.rand(4, 5, generator=torch.Generator().manual_seed(1)) > 0.5)
    args = () if sparse_dim is None else (sparse_dim,)
    same_sparse(x.to(DEVICE).to_sparse(*args), x.to_sparse(*args))


def test_moving_between_host_and_device():
    s = coo("cpu")
    on_device = s.to(DEVICE)
    same_sparse(on_device, s)
    back = on_device.cpu()
    assert back.device.type == "cpu" and torch.equal(back.to_dense(), s.to_dense())


def test_zero_sized_and_empty_sparse_tensors():
    empty = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (3, 3), device=DEVICE)
    assert empty._nnz() == 0 and torch.equal(empty.to_dense().cpu(), torch.zeros(3, 3))
    z = torch.zeros(2, 3, layout=torch.sparse_coo, device=DEVICE)
    assert z.is_sparse and z._nnz() == 0 and z.device == DEVICE


def test_coalesce_sums_duplicates():
    s = coo(DEVICE)
    assert not s.is_coalesced()
    c = s.coalesce()
    assert c.is_coalesced() and c._nnz() == 3
    same_sparse(c, coo("cpu").coalesce())
    assert torch.equal(c.indices().cpu(), coo("cpu").coalesce().indices())
    assert_close(c.values().cpu(), coo("cpu").coalesce().values())


def test_values_and_indices_are_views():
    s = coo(DEVICE, coalesced=True)
    s.values().mul_(10)
    expected = coo("cpu", coalesced=True)
    expected.values().mul_(10)
    same_sparse(s, expected)
    assert s._values().data_ptr() == s.values().data_ptr()


def test_clone_copy_and_zero():
    s = coo(DEVICE, coalesced=True)
    c = s.clone()
    assert c._values().data_ptr() != s._values().data_ptr()
    same_sparse(c, coo("cpu", coalesced=True))
    target = torch.zeros(3, 4, layout=torch.sparse_coo, device=DEVICE)
    target.copy_(s)
    same_sparse(target, coo("cpu", coalesced=True))
    target.zero_()
    assert target._nnz() == 0


def test_printing_a_sparse_device_tensor():
    text = repr(coo(DEVICE, coalesced=True))
    assert "foo:0" in text and "sparse_coo" in text


# ---- arithmetic ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op",
    [
        lambda a, b: a + b,
        lambda a, b: a - b,
        lambda a, b: a * b,
        lambda a, b: a * 2.5,
        lambda a, b: -a,
        lambda a, b: a.abs(),
        lambda a, b: torch.sin(a),
        lambda a, b: a.t(),
        lambda a, b: torch.sparse.sum(a, dim=1),
    ],
    ids=["add", "sub", "mul", "mul_scalar", "neg", "abs", "sin", "transpose", "sparse_sum_dim"],
)
def test_elementwise_and_reductions_match_cpu(op):
    b_cpu = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 2]]), torch.tensor([5.0, 6.0]), (3, 4))
    expected = op(coo("cpu"), b_cpu)
    got = op(coo(DEVICE), b_cpu.to(DEVICE))
    if expected.layout == torch.strided:
        assert got.device == DEVICE
        assert_close(got.cpu(), expected)
    else:
        assert_close(got.to_dense().cpu(), expected.to_dense())
        assert got.device == DEVICE and got.layout == expected.layout


def test_sum_to_a_dense_scalar():
    assert_close(coo(DEVICE).sum().cpu(), coo("cpu").sum())


def test_in_place_operators_write_back():
    s = coo(DEVICE, coalesced=True)
    s.add_(coo(DEVICE, coalesced=True))
    s.mul_(0.5)
    expected = coo("cpu", coalesced=True)
    expected.add_(coo("cpu", coalesced=True))
    expected.mul_(0.5)
    same_sparse(s, expected)


def test_dense_plus_sparse():
    d = dense("cpu", 3, 4)
    assert_close((d.to(DEVICE) + coo(DEVICE)).cpu(), d + coo("cpu"))


# ---- sparse @ dense ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op",
    [
        lambda s, d, bias: s @ d,
        lambda s, d, bias: torch.mm(s, d),
        lambda s, d, bias: torch.sparse.mm(s, d),
        lambda s, d, bias: torch.addmm(bias, s, d, beta=0.5, alpha=2.0),
        lambda s, d, bias: torch.sparse.addmm(bias, s, d),
        lambda s, d, bias: torch.matmul(s, d[:, 0]),
    ],
    ids=["matmul", "mm", "sparse_mm", "addmm", "sparse_addmm", "matrix_vector"],
)
def test_sparse_times_dense_matches_cpu(op):
    d = dense("cpu", 4, 5)
    bias = dense("cpu", 3, 5, seed=1)
    expected = op(coo("cpu"), d, bias)
    got = op(coo(DEVICE), d.to(DEVICE), bias.to(DEVICE))
    assert got.device == DEVICE and got.layout == torch.strided
    assert_close(got.cpu(), expected)


def test_sparse_times_sparse():
    a, b = coo("cpu", coalesced=True), coo("cpu", coalesced=True).t().coalesce()
    got = torch.sparse.mm(a.to(DEVICE), b.to(DEVICE))
    assert got.is_sparse and got.device == DEVICE
    assert_close(got.to_dense().cpu(), torch.sparse.mm(a, b).to_dense())


def test_sampled_addmm():
    mask = torch.tensor([[1.0, 0, 1, 0], [0, 1, 0, 0], [1, 0, 0, 1]]).to_sparse_csr()
    a, b = dense("cpu", 3, 6), dense("cpu", 6, 4, seed=1)
    expected = torch.sparse.sampled_addmm(mask, a, b, beta=0.5, alpha=2.0)
    got = torch.sparse.sampled_addmm(mask.to(DEVICE), a.to(DEVICE), b.to(DEVICE), beta=0.5, alpha=2.0)
    same_sparse(got, expected)


# ---- compressed layouts --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "layout,blocksize",
    [(torch.sparse_csr, None), (torch.sparse_csc, None), (torch.sparse_bsr, (1, 2)), (torch.sparse_bsc, (3, 1))],
    ids=["csr", "csc", "bsr", "bsc"],
)
def test_dense_to_compressed_and_back(layout, blocksize):
    x = coo("cpu").to_dense()
    expected = x.to_sparse(layout=layout, blocksize=blocksize)
    got = x.to(DEVICE).to_sparse(layout=layout, blocksize=blocksize)
    same_sparse(got, expected)
    assert_close(got.to_dense().cpu(), x)


def test_conversions_between_sparse_layouts():
    s_cpu = coo("cpu", coalesced=True)
    s = s_cpu.to(DEVICE)
    same_sparse(s.to_sparse_csr(), s_cpu.to_sparse_csr())
    same_sparse(s.to_sparse_csc(), s_cpu.to_sparse_csc())
    same_sparse(s.to_sparse_csr().to_sparse(), s_cpu.to_sparse_csr().to_sparse())


def test_sparse_csr_tensor_constructor_and_accessors():
    crow, col, values = torch.tensor([0, 2, 3, 4]), torch.tensor([1, 3, 0, 2]), torch.tensor([1.0, 2.0, 3.0, 4.0])
    expected = torch.sparse_csr_tensor(crow, col, values, (3, 4))
    got = torch.sparse_csr_tensor(crow, col, values, (3, 4), device=DEVICE)
    assert got.crow_indices().device == DEVICE and got._nnz() == 4
    same_sparse(got, expected)
    same_sparse(got.clone(), expected)


def test_csr_times_dense():
    csr_cpu = coo("cpu").to_dense().to_sparse_csr()
    d = dense("cpu", 4, 2)
    got = csr_cpu.to(DEVICE) @ d.to(DEVICE)
    assert got.device == DEVICE
    assert_close(got.cpu(), csr_cpu @ d)


# ---- autograd and checkpoints --------------------------------------------------------------------


def test_autograd_through_sparse_times_dense():
    def run(device):
        s = coo(device, coalesced=True).requires_grad_()
        d = dense(device, 4, 5).requires_grad_()
        (torch.sparse.mm(s, d).tanh() * torch.arange(5.0, device=device)).sum().backward()
        return s.grad, d.grad

    s_grad, d_grad = run(DEVICE)
    s_ref, d_ref = run("cpu")
    assert s_grad.is_sparse and s_grad.device == DEVICE and d_grad.device == DEVICE
    assert_close(s_grad.to_dense().cpu(), s_ref.to_dense())
    assert_close(d_grad.cpu(), d_ref)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
def test_gradients_of_csr_times_dense_with_a_reduction(reduce):
    """torch.sparse.mm(csr, dense, reduce): the CPU kernel (run by the fallback) records which element
    won each "amax" and "amin" only when an input requires grad, and the backward reads those indices."""

    def run(device):
        csr = coo("cpu", coalesced=True).to_dense().to_sparse_csr().to(device).requires_grad_()
        d = dense(device, 4, 5).requires_grad_()
        out = torch.sparse.mm(csr, d, reduce)
        (out * torch.arange(5.0, device=device)).sum().backward()
        return out, csr.grad, d.grad

    got, expected = run(DEVICE), run("cpu")
    assert_close(got[0].cpu(), expected[0])
    assert got[1].layout == torch.sparse_csr and got[1].device == DEVICE
    assert_close(got[1].to_dense().cpu(), expected[1].to_dense())
    assert_close(got[2].cpu(), expected[2])


def test_autograd_through_to_dense():
    def run(device):
        s = coo(device, coalesced=True).requires_grad_()
        (s.to_dense() * torch.arange(12.0, device=device).reshape(3, 4)).sum().backward()
        return s.grad

    assert_close(run(DEVICE).to_dense().cpu(), run("cpu").to_dense())


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_save_and_load_a_sparse_device_tensor(device, layout):
    s_cpu = coo("cpu", coalesced=True)
    if layout == "csr":
        s_cpu = s_cpu.to_sparse_csr()
    buffer = io.BytesIO()
    torch.save(s_cpu.to(device), buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    assert loaded.device == device
    same_sparse(loaded, s_cpu)


# ---- coverage ------------------------------------------------------------------------------------


def test_every_sparse_cpu_operator_has_a_device_kernel():
    """Each aten operator with a sparse CPU kernel has a sparse foo kernel (native or the fallback), so
    no PyTorch sparse operator silently runs a dense implementation on a sparse tensor."""
    missing = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        for cpu_key, device_key in (("SparseCPU", "SparsePrivateUse1"), ("SparseCsrCPU", "SparseCsrPrivateUse1")):
            has_cpu = torch._C._dispatch_has_kernel_for_dispatch_key(name, cpu_key)
            if has_cpu and not torch._C._dispatch_has_kernel_for_dispatch_key(name, device_key):
                missing.append(f"{name} ({device_key})")
    assert missing == []


def test_mixed_devices_are_an_error():
    if torch.foo.device_count() < 2:
        pytest.skip("needs two foo devices")
    with pytest.raises(RuntimeError, match="same device"):
        torch.sparse.mm(coo("foo:0"), dense("foo:1", 4, 2))
