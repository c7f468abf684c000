"""Fused attention: F.scaled_dot_product_attention runs the foo device's attention kernel
(csrc/families/Attention.cpp, csrc/kernels/attention.h) and equals PyTorch's math path on the CPU,
forward and backward: causal and additive masks, grouped-query attention, scales, dropout."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

DEVICE = "foo"
FUSED = torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default
FUSED_BACKWARD = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward.default
# The math path computes half and bfloat16 in float too, but sums in another order (matrix products).
TOLERANCE = {
    torch.float32: dict(atol=2e-5, rtol=1e-4),
    torch.float16: dict(atol=2e-3, rtol=2e-3),
    torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
}


class Calls(TorchDispatchMode):
    """Records the ATen operators that run, forward and backward."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


def math_on_cpu(q, k, v, **kwargs):
    with sdpa_kernel([SDPBackend.MATH]):
        return F.scaled_dot_product_attention(q, k, v, **kwargs)


def inputs(shape_q, shape_kv, dtype, value_dim=None, seed=0):
    generator = torch.Generator().manual_seed(seed)
    shape_v = (*shape_kv[:-1], value_dim or shape_kv[-1])
    return [torch.randn(shape, generator=generator).to(dtype) for shape in (shape_q, shape_kv, shape_v)]


def compare(q, k, v, dtype, **kwargs):
    """Forward and backward on the device (checking that the fused kernels ran) against the CPU's math path."""
    grad = torch.randn(*q.shape[:-1], v.shape[-1], generator=torch.Generator().manual_seed(1)).to(dtype)
    cpu = [t.clone().requires_grad_() for t in (q, k, v)]
    dev = [t.to(DEVICE).requires_grad_() for t in (q, k, v)]
    mask = kwargs.pop("attn_mask", None)
    expected = math_on_cpu(*cpu, attn_mask=mask, **kwargs)
    expected.backward(grad)
    with Calls() as calls:
        result = F.scaled_dot_product_attention(*dev, attn_mask=None if mask is None else mask.to(DEVICE), **kwargs)
        result.backward(grad.to(DEVICE))
    assert FUSED in calls.ops and FUSED_BACKWARD in calls.ops, "the fused kernels did not run"
    tolerance = TOLERANCE[dtype]
    torch.testing.assert_close(result.cpu(), expected, **tolerance)
    for name, d, c in zip("qkv", dev, cpu, strict=True):
        torch.testing.assert_close(d.grad.cpu(), c.grad, **tolerance, msg=lambda m, n=name: f"grad of {n}: {m}")


DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# (query shape, key shape, value head dim): batch, heads, sequence, head dim
SHAPES = {
    "square": ((2, 4, 6, 8), (2, 4, 6, 8), None),
    "rectangular": ((2, 3, 5, 16), (2, 3, 11, 16), None),
    "value-dim": ((1, 2, 7, 8), (1, 2, 9, 8), 12),
    "long": ((1, 2, 70, 32), (1, 2, 70, 32), None),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_matches_math_path(shape, dtype, causal):
    shape_q, shape_kv, value_dim = SHAPES[shape]
    compare(*inputs(shape_q, shape_kv, dtype, value_dim), dtype, is_causal=causal)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_additive_mask_broadcast(dtype):
    q, k, v = inputs((2, 3, 5, 8), (2, 3, 7, 8), dtype)
    mask = torch.randn(5, 7).to(dtype)  # broadcast over batch and heads
    compare(q, k, v, dtype, attn_mask=mask)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_boolean_mask_with_a_fully_masked_row(dtype):
    q, k, v = inputs((2, 2, 4, 8), (2, 2, 6, 8), dtype)
    mask = torch.rand(2, 1, 4, 6, generator=torch.Generator().manual_seed(2)) > 0.3
    mask[0, 0, 1] = False  # a query that sees no key: zeros, as PyTorch's math path gives
    compare(q, k, v, dtype, attn_mask=mask)


def test_mask_gradient():
    q, k, v = inputs((2, 2, 4, 8), (2, 2, 6, 8), torch.float32)
    mask = torch.randn(2, 1, 4, 6, requires_grad=True)
    expected = math_on_cpu(q, k, v, attn_mask=mask)
    (expected_grad,) = torch.autograd.grad(expected.sum(), mask)
    dev_mask = mask.detach().to(DEVICE).requires_grad_()
    result = F.scaled_dot_product_attention(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), attn_mask=dev_mask)
    (grad,) = torch.autograd.grad(result.sum(), dev_mask)
    torch.testing.assert_close(grad.cpu(), expected_grad, **TOLERANCE[torch.float32])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("heads", [(8, 2), (4, 1)], ids=["gqa", "mqa"])
def test_grouped_query_attention(dtype, heads):
    heads_q, heads_kv = heads
    q, k, v = inputs((2, heads_q, 5, 8), (2, heads_kv, 9, 8), dtype)
    compare(q, k, v, dtype, enable_gqa=True, is_causal=True)


@pytest.mark.parametrize("scale", [0.3, -0.5, 2.0])
def test_scale(scale):
    compare(*inputs((1, 2, 5, 8), (1, 2, 5, 8), torch.float32), torch.float32, scale=scale)


def test_choice_and_sdpa_kernel():
    q, k, v = (t.to(DEVICE) for t in inputs((1, 2, 4, 8), (1, 2, 4, 8), torch.float32))
    assert torch._fused_sdp_choice(q, k, v) == SDPBackend.OVERRIDEABLE.value
    # Unsupported by the kernel (float64, 3-d, heads without enable_gqa): PyTorch's math path.
    assert torch._fused_sdp_choice(q.double(), k.double(), v.double()) == SDPBackend.MATH.value
    assert torch._fused_sdp_choice(q[0], k[0], v[0]) == SDPBackend.MATH.value
    assert torch._fused_sdp_choice(q, k[:, :1], v[:, :1]) == SDPBackend.MATH.value
    with Calls() as calls, sdpa_kernel([SDPBackend.MATH]):
        result = F.scaled_dot_product_attention(q, k, v)
    assert FUSED not in calls.ops
    torch.testing.assert_close(result.cpu(), math_on_cpu(q.cpu(), k.cpu(), v.cpu()))
    with sdpa_kernel([SDPBackend.OVERRIDEABLE]), pytest.raises(RuntimeError, match="No viable backend"):
        F.scaled_dot_product_attention(q.double(), k.double(), v.double())


@pytest.mark.parametrize("value_dim", [None, 12], ids=["same-dim", "value-dim"])
@pytest.mark.parametrize("layout", ["contiguous", "heads-inside", "sequence-inside"])
def test_results_have_the_strides_of_the_meta_kernel(layout, value_dim):
    """torch.compile traces with PyTorch's meta kernel of the operator and checks the device's result
    against its strides: the output takes the query's layout, as the meta kernel allocates it."""
    permutation = {"contiguous": (0, 1, 2, 3), "heads-inside": (0, 2, 1, 3), "sequence-inside": (2, 0, 1, 3)}[layout]
    q, k, v = (
        t.permute(permutation).contiguous().permute(tuple(permutation.index(d) for d in range(4)))
        for t in inputs((2, 3, 5, 8), (2, 3, 7, 8), torch.float32, value_dim)
    )
    on_device = FUSED(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE))
    on_meta = FUSED(q.to("meta"), k.to("meta"), v.to("meta"))
    for name, result, expected in zip(["output", "logsumexp"], on_device[:2], on_meta[:2], strict=True):
        assert (result.shape, result.stride()) == (expected.shape, expected.stride()), name
    torch.testing.assert_close(on_device[0].cpu(), math_on_cpu(q, k, v), **TOLERANCE[torch.float32])


def test_a_graph_traced_with_dynamic_shapes_keeps_the_fused_kernel():
    """torch.compile with dynamic shapes asks the device's choice with symbolic sizes: the checks become
    guards, and one graph serves every sequence length with the fused kernel, forward and backward."""
    from torch._dynamo.testing import AotEagerAndRecordGraphs

    backend = AotEagerAndRecordGraphs()
    torch._dynamo.reset()
    attend = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), backend=backend)
    for tokens in (12, 20, 28):
        q, k, v = inputs((2, 4, tokens, 16), (2, 4, tokens, 16), torch.float32, seed=tokens)
        dev = [t.to(DEVICE).requires_grad_() for t in (q, k, v)]
        cpu = [t.clone().requires_grad_() for t in (q, k, v)]
        result, expected = attend(*dev), math_on_cpu(*cpu, is_causal=True)
        grad = torch.randn(expected.shape, generator=torch.Generator().manual_seed(tokens))
        result.backward(grad.to(DEVICE))
        expected.backward(grad)
        torch.testing.assert_close(result.cpu(), expected.detach(), **TOLERANCE[torch.float32])
        for got, want in zip(dev, cpu, strict=True):
            torch.testing.assert_close(got.grad.cpu(), want.grad, **TOLERANCE[torch.float32])
    assert len(backend.fw_graphs) == 2, "a graph for the first size, one with dynamic shapes for the others"
    dynamic_forward, dynamic_backward = backend.fw_graphs[-1], backend.bw_graphs[-1]
    assert any(isinstance(n.meta.get("val"), torch.SymInt) for n in dynamic_forward.graph.nodes)
    assert "_scaled_dot_product_fused_attention_overrideable" in str(dynamic_forward.graph)
    assert "_scaled_dot_product_fused_attention_overrideable_backward" in str(dynamic_backward.graph)


def test_math_path_for_other_dtypes_still_matches():
    q, k, v = inputs((1, 2, 4, 8), (1, 2, 6, 8), torch.float64)
    result = F.scaled_dot_product_attention(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), is_causal=True)
    torch.testing.assert_close(result.cpu(), math_on_cpu(q, k, v, is_causal=True))


def test_bad_arguments_raise():
    q, k, v = (t.to(DEVICE) for t in inputs((2, 2, 4, 8), (2, 2, 4, 8), torch.float32))
    with pytest.raises(RuntimeError, match="4-d"):
        FUSED(q[0], k[0], v[0])
    with pytest.raises(RuntimeError, match="shapes do not match"):
        FUSED(q, k[:, :, :, :4], v)
    with pytest.raises(RuntimeError, match="dropout probability"):
        FUSED(q, k, v, None, 1.5)
    with pytest.raises(RuntimeError):  # PyTorch's own check, before any kernel
        F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(4, 4, device=DEVICE), is_causal=True)


def dropout_call(q, k, v, p, seed):
    """The fused operator with its debug output: the attention after dropout, from which the mask follows."""
    torch.foo.manual_seed(seed)
    out, _, _, _, _, _, _, _, probs = FUSED(q, k, v, None, p, False, True)
    return out, probs


def test_dropout_is_reproducible_and_drops_p():
    q, k, v = (t.to(DEVICE) for t in inputs((2, 4, 64, 16), (2, 4, 64, 16), torch.float32))
    p = 0.3
    out, probs = dropout_call(q, k, v, p, seed=5)
    again, _ = dropout_call(q, k, v, p, seed=5)
    other, _ = dropout_call(q, k, v, p, seed=6)
    assert torch.equal(out.cpu(), again.cpu())
    assert not torch.equal(out.cpu(), other.cpu())
    kept = (probs != 0).cpu()
    assert abs(kept.float().mean().item() - (1 - p)) < 0.02
    assert not torch.equal(kept[0, 0, 0], kept[0, 0, 1])  # rows draw different masks
    # The kept probabilities are the softmax scaled by 1 / (1 - p).
    softmax = torch.softmax(q.cpu() @ k.cpu().transpose(-1, -2) / math.sqrt(16), dim=-1)
    torch.testing.assert_close(probs.cpu()[kept], (softmax / (1 - p))[kept], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dropout_matches_math_path_with_the_same_mask(dtype):
    q, k, v = inputs((2, 2, 8, 16), (2, 2, 12, 16), dtype)
    p = 0.25
    _, probs = dropout_call(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), p, seed=11)
    mask = (probs != 0).cpu()
    grad = torch.randn(2, 2, 8, 16, generator=torch.Generator().manual_seed(3)).to(dtype)
    cpu = [t.clone().requires_grad_() for t in (q, k, v)]
    expected, _ = torch.ops.aten._scaled_dot_product_attention_math(*cpu, None, p, False, mask)
    expected.backward(grad)
    dev = [t.to(DEVICE).requires_grad_() for t in (q, k, v)]
    torch.foo.manual_seed(11)  # the same random numbers as dropout_call
    result = F.scaled_dot_product_attention(*dev, dropout_p=p)
    result.backward(grad.to(DEVICE))
    tolerance = TOLERANCE[dtype]
    torch.testing.assert_close(result.cpu(), expected, **tolerance)
    for d, c in zip(dev, cpu, strict=True):
        torch.testing.assert_close(d.grad.cpu(), c.grad, **tolerance)
