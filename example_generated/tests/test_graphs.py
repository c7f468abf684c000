"""Graphs: capture work once, replay it as one submission (torch.accelerator.Graph, torch.foo.graph,
csrc/core/Graph.cpp over the runtime's stream capture, the driver's graphs.cpp; docs/graphs.md)."""

import copy
import gc

import pytest
import torch
from torch.testing import assert_close
from torch.utils._pytree import tree_leaves

DEVICE = "foo"
NOT_PERMITTED = "not permitted while a stream captures"


def capture(fn, graph=None, **kwargs):
    """Captures fn() into a new (or the given) FooGraph on the module's side stream; returns (graph, result)."""
    graph = graph if graph is not None else torch.foo.FooGraph()
    with torch.foo.graph(graph, **kwargs):
        result = fn()
    return graph, result


def test_the_device_generic_api_finds_the_implementation():
    x = torch.zeros(100, device=DEVICE)
    stream = torch.Stream(device=DEVICE)
    graph = torch.accelerator.Graph()
    with stream, graph:  # torch's own form: capture on a stream that is not the default one
        x += 1
    assert x.cpu().sum() == 0, "captured work does not run"
    for expected in (1, 2, 3):
        graph.replay()
        assert_close(x.cpu(), torch.full((100,), float(expected)))
    assert isinstance(torch.foo.FooGraph(), torch.accelerator.Graph)


def test_replay_follows_new_values_of_static_inputs():
    static_in = torch.randn(64, 64, device=DEVICE)
    weight = torch.randn(64, 64, device=DEVICE)
    graph, static_out = capture(lambda: torch.relu(static_in @ weight + 1).sum(dim=0))
    for _ in range(3):
        fresh = torch.randn(64, 64)
        static_in.copy_(fresh.to(DEVICE))
        graph.replay()
        assert_close(static_out.cpu(), torch.relu(fresh @ weight.cpu() + 1).sum(dim=0), rtol=1e-4, atol=1e-4)


def test_a_captured_training_step_matches_eager_training():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1)).to(DEVICE)
    reference = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
    batches = [(torch.randn(32, 8), torch.randn(32, 1)) for _ in range(6)]
    static_x = torch.zeros(32, 8, device=DEVICE)
    static_y = torch.zeros(32, 1, device=DEVICE)

    def step(net, optimizer, x, y):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(net(x), y)  # mse_loss and gelu, forward and backward, on the CPU fallback
        loss.backward()
        optimizer.step()
        return loss

    # Warm-up outside the capture, as with CUDA graphs: the optimizer creates its state here.
    x, y = batches[0]
    static_x.copy_(x.to(DEVICE))
    static_y.copy_(y.to(DEVICE))
    step(model, opt, static_x, static_y)
    step(reference, ref_opt, x.to(DEVICE), y.to(DEVICE))
    opt.zero_grad(set_to_none=True)
    graph, static_loss = capture(lambda: step(model, opt, static_x, static_y))
    assert {"aten::mse_loss", "aten::mse_loss_backward", "aten::gelu", "aten::gelu_backward"} <= set(
        torch.foo.fallback_ops()
    ), "the step exercises the captured fallback"
    for x, y in batches[1:]:
        static_x.copy_(x.to(DEVICE))
        static_y.copy_(y.to(DEVICE))
        graph.replay()
        loss = step(reference, ref_opt, x.to(DEVICE), y.to(DEVICE))
        assert_close(static_loss.cpu(), loss.cpu(), rtol=1e-5, atol=1e-6)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            assert_close(p.detach().cpu(), q.detach().cpu(), rtol=1e-5, atol=1e-6)


def test_adamw_is_captured_with_capturable_true_and_refused_without():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1)).to(DEVICE)
    reference = copy.deepcopy(model)
    frozen = torch.optim.AdamW(copy.deepcopy(model).parameters(), lr=0.01, capturable=False)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, capturable=True)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=0.01, capturable=True)
    batches = [(torch.randn(16, 8), torch.randn(16, 1)) for _ in range(5)]
    static_x, static_y = batches[0][0].to(DEVICE), batches[0][1].to(DEVICE)

    def step(net, optimizer, x, y):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        optimizer.step()
        return loss

    for optimizer, net in ((opt, model), (ref_opt, reference)):
        step(net, optimizer, static_x, static_y)  # warm-up: the optimizers create their state
    frozen.step()
    graph = torch.foo.FooGraph()
    with pytest.raises(RuntimeError, match="capturable=False cannot be captured"):
        with torch.foo.graph(graph):
            frozen.step()  # its step count would stay that of the capture
    opt.zero_grad(set_to_none=True)
    graph, static_loss = capture(lambda: step(model, opt, static_x, static_y))
    for x, y in batches[1:]:
        static_x.copy_(x.to(DEVICE))
        static_y.copy_(y.to(DEVICE))
        graph.replay()
        loss = step(reference, ref_opt, x.to(DEVICE), y.to(DEVICE))
        assert_close(static_loss.cpu(), loss.cpu(), rtol=1e-5, atol=1e-6)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            assert_close(p.detach().cpu(), q.detach().cpu(), rtol=1e-5, atol=1e-6)


# The tolerances of tests/test_training.py.
TRAINING_TOL = {"rtol": 1e-4, "atol": 1e-5}


def _graphed_and_eager_steps(name, make_optimizer, steps=5):
    """Captures a whole training step of models.MODELS[name] (forward, loss, backward, optimizer step),
    replays it on the batches after the first, each copied into the static inputs, and runs the same
    steps eagerly on a copy of the model: the losses, parameters and buffers must agree at every step.
    The models use no dropout: random operators cannot be captured (docs/graphs.md, Random numbers)."""
    from models import MODELS, to_device

    spec = MODELS[name]
    torch.manual_seed(0)
    model = spec.build().to(DEVICE)
    reference = copy.deepcopy(model)
    opt, ref_opt = make_optimizer(model), make_optimizer(reference)
    batches = spec.batches(steps + 1)
    static_batch = to_device(batches[0], DEVICE)

    def step(net, optimizer, batch):
        optimizer.zero_grad(set_to_none=True)
        loss = spec.loss(net, batch)
        loss.backward()
        optimizer.step()
        return loss

    # Warm-up outside the capture, both models alike: the optimizers create their state here.
    step(model, opt, static_batch)
    step(reference, ref_opt, to_device(batches[0], DEVICE))
    opt.zero_grad(set_to_none=True)
    graph, static_loss = capture(lambda: step(model, opt, static_batch))
    parameters = [p.data_ptr() for p in model.parameters()]
    for batch in batches[1:]:
        for static, fresh in zip(tree_leaves(static_batch), tree_leaves(batch), strict=True):
            static.copy_(fresh.to(DEVICE))
        graph.replay()
        loss = step(reference, ref_opt, to_device(batch, DEVICE))
        assert_close(static_loss.cpu(), loss.cpu(), **TRAINING_TOL)
        for (pname, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
            assert_close(p.detach().cpu(), q.detach().cpu(), **TRAINING_TOL, msg=pname)
        for (bname, b), c in zip(model.named_buffers(), reference.buffers(), strict=True):
            assert_close(b.cpu(), c.cpu(), **TRAINING_TOL, msg=bname)  # batch-norm running statistics
    assert [p.data_ptr() for p in model.parameters()] == parameters, "the replays update the parameters in place"
    return model


def test_a_transformer_training_step_with_adamw_is_captured_whole():
    # models.DecoderLM (GPT-2 style: embedding, attention, RMSNorm, tied output), cross-entropy and
    # AdamW with its step count on the device.
    _graphed_and_eager_steps(
        "decoder-lm", lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01, capturable=True)
    )


def test_a_cnn_training_step_with_batch_norm_is_captured_whole():
    model = _graphed_and_eager_steps("convnet-bn", lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9))
    assert int(model[1].num_batches_tracked) == 1 + 5, "each replay counts its batch"


def test_make_graphed_callables_of_a_module_and_a_function_match_eager():
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to(DEVICE)
    reference = copy.deepcopy(module)

    def head(h, w):
        return (h * w).tanh().sum(dim=1), h.abs()

    sample_x = torch.randn(6, 8, device=DEVICE, requires_grad=True)
    sample_w = torch.randn(6, 4, device=DEVICE, requires_grad=True)
    sample_h = torch.randn(6, 4, device=DEVICE, requires_grad=True)
    samples = ((sample_x,), (sample_h, sample_w))
    graphed_module, graphed_head = torch.foo.make_graphed_callables((module, head), samples)
    assert graphed_module is module
    for _ in range(3):
        # As with torch.cuda: a replay's parameter gradients live in the graph's memory until the next
        # replay, so gradients are set to None between iterations (what zero_grad() does by default).
        module.zero_grad(set_to_none=True)
        reference.zero_grad(set_to_none=True)
        x = torch.randn(6, 8, device=DEVICE, requires_grad=True)
        w = torch.randn(6, 4, device=DEVICE, requires_grad=True)
        x_ref, w_ref = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        out, aux = graphed_head(graphed_module(x), w)
        ref_out, ref_aux = head(reference(x_ref), w_ref)
        assert_close(out, ref_out, **TRAINING_TOL)
        assert_close(aux, ref_aux, **TRAINING_TOL)
        (out.square().sum() + aux.sum()).backward()
        (ref_out.square().sum() + ref_aux.sum()).backward()
        assert_close(x.grad, x_ref.grad, **TRAINING_TOL)
        assert_close(w.grad, w_ref.grad, **TRAINING_TOL)
        for (name, p), q in zip(module.named_parameters(), reference.parameters(), strict=True):
            assert_close(p.grad, q.grad, **TRAINING_TOL, msg=name)
    module.eval()  # not the state it was graphed in: the module's own forward runs
    assert_close(module(x), reference(x))


def test_make_graphed_callables_refuses_what_it_cannot_replay():
    make_graphed = torch.foo.make_graphed_callables
    module = torch.nn.Linear(4, 4).to(DEVICE)
    module.register_forward_hook(lambda *args: None)
    with pytest.raises(ValueError, match="no hooks"):
        make_graphed(module, (torch.randn(2, 4, device=DEVICE),))
    with pytest.raises(TypeError, match=f"{DEVICE} tensors"):
        make_graphed(torch.nn.Linear(4, 4).to(DEVICE), (torch.randn(2, 4),))
    with pytest.raises(ValueError, match="enable_annotations"):
        make_graphed(torch.relu, (torch.randn(2, device=DEVICE),), enable_annotations=True)
    graphed = make_graphed(torch.relu, (torch.randn(2, device=DEVICE),))
    with pytest.raises(ValueError, match="captured for"):
        graphed(torch.randn(3, device=DEVICE))


def test_two_graphs_share_a_pool_and_snapshots_show_it():
    a = torch.arange(1000.0, device=DEVICE)
    first, b = capture(lambda: a * 2)
    second, c = capture(lambda: b + 1, pool=first.pool())
    assert first.pool() == second.pool()
    a.copy_(torch.full((1000,), 3.0).to(DEVICE))
    first.replay()
    second.replay()
    assert_close(c.cpu(), torch.full((1000,), 7.0))
    pool = tuple(first.pool())
    pools = {tuple(s["segment_pool_id"]) for s in torch.foo.memory_snapshot()}
    assert pool in pools, "the pool's segments show in memory snapshots"
    handle = torch.foo.graph_pool_handle()
    assert handle != torch.foo.graph_pool_handle() and handle[0] == 0


@pytest.mark.two_devices
def test_a_pool_of_another_device_is_refused_and_the_stream_does_not_stay_capturing():
    first, _ = capture(lambda: torch.ones(8, device=DEVICE) * 2)
    other = torch.foo.Stream(device=1)
    with pytest.raises(RuntimeError, match="belongs to foo:0"):
        with torch.foo.graph(torch.foo.FooGraph(), pool=first.pool(), stream=other):
            pass
    with torch.foo.stream(other):
        assert not torch.foo.is_current_stream_capturing()
        assert_close((torch.ones(4, device=f"{DEVICE}:1") + 1).cpu(), torch.full((4,), 2.0))


def test_work_on_a_side_stream_joined_by_events_is_captured_into_the_same_graph():
    x = torch.ones(256, device=DEVICE)
    side = torch.foo.Stream()

    def fork_and_join():
        main = torch.foo.current_stream()
        side.wait_stream(main)  # the side stream joins the capture
        with torch.foo.stream(side):
            left = x * 3
        right = x + 1
        main.wait_stream(side)  # ... and joins back
        return left + right

    graph, out = capture(fork_and_join)
    assert not torch.foo.is_current_stream_capturing()
    x.fill_(2.0)
    graph.replay()
    assert_close(out.cpu(), torch.full((256,), 9.0))


def test_a_side_stream_that_does_not_join_back_fails_the_capture():
    x = torch.ones(16, device=DEVICE)
    side = torch.foo.Stream()
    graph = torch.foo.FooGraph()
    with pytest.raises(RuntimeError, match="not waited for"):
        with torch.foo.graph(graph):
            side.wait_stream(torch.foo.current_stream())
            with torch.foo.stream(side):
                x.mul_(2)
    with torch.foo.stream(side):
        x.add_(1)  # the side stream works normally again
    side.synchronize()
    assert_close(x.cpu(), torch.full((16,), 2.0))


def _synchronize_device(t, stream, event):
    torch.foo.synchronize()


def _synchronize_stream(t, stream, event):
    stream.synchronize()


def _query_stream(t, stream, event):
    stream.query()


def _query_captured_event(t, stream, event):
    event.record(stream)
    event.query()


def _synchronize_captured_event(t, stream, event):
    event.record(stream)
    event.synchronize()


def _copy_to_pageable_host_memory(t, stream, event):
    t.cpu()


def _item(t, stream, event):
    t.sum().item()


@pytest.mark.parametrize(
    "illegal",
    [
        _synchronize_device,
        _synchronize_stream,
        _query_stream,
        _query_captured_event,
        _synchronize_captured_event,
        _copy_to_pageable_host_memory,
        _item,
    ],
)
def test_illegal_calls_during_capture_raise_and_leave_the_stream_usable(illegal):
    t = torch.ones(8, device=DEVICE)
    stream = torch.foo.Stream()
    event = torch.foo.Event()
    graph = torch.foo.FooGraph()
    with pytest.raises(RuntimeError, match="invalidated") as ended:
        with torch.foo.graph(graph, stream=stream):
            t.add_(1)
            with pytest.raises(RuntimeError, match=NOT_PERMITTED):
                illegal(t, stream, event)
            with pytest.raises(RuntimeError, match="invalidated"):
                t.add_(1)  # further work on the invalidated capture fails too
    assert "capture failed" in str(ended.value)
    with torch.foo.stream(stream):
        t.mul_(3)
    stream.synchronize()
    assert_close(t.cpu(), torch.full((8,), 3.0)), "the captured work never ran; the stream runs new work"


def test_random_operators_cannot_be_captured():
    graph = torch.foo.FooGraph()
    with torch.foo.graph(graph):
        with pytest.raises(RuntimeError, match="cannot be captured"):
            torch.rand(10, device=DEVICE)
        y = torch.ones(4, device=DEVICE) * 2
    graph.replay()
    assert_close(y.cpu(), torch.full((4,), 2.0))
    torch.rand(10, device=DEVICE)  # outside a capture: fine


def _layer_norm_backward_inputs(g):
    x = torch.randn(6, 5, generator=g)
    mean = x.mean(1, keepdim=True)
    rstd = (x.var(1, unbiased=False, keepdim=True) + 1e-5).rsqrt()
    return [torch.randn(6, 5, generator=g), x, mean, rstd, torch.randn(5, generator=g), torch.randn(5, generator=g)]


def _log_probabilities(g):
    return torch.randn(6, 5, generator=g).log_softmax(1)


# Operators that ordinary small models run on the CPU fallback (issue 39): name -> (inputs from a
# generator, the call, the operator fallback_ops() names).
FALLBACK_OPERATORS = {
    "mse_loss": (
        lambda g: [torch.randn(8, 5, generator=g), torch.randn(8, 5, generator=g)],
        torch.nn.functional.mse_loss,
        "aten::mse_loss",
    ),
    "mse_loss_backward": (
        lambda g: [torch.randn((), generator=g), torch.randn(8, 5, generator=g), torch.randn(8, 5, generator=g)],
        lambda grad, a, b: torch.ops.aten.mse_loss_backward(grad, a, b, 1),
        "aten::mse_loss_backward",
    ),
    "gelu": (lambda g: [torch.randn(8, 5, generator=g)], torch.nn.functional.gelu, "aten::gelu"),
    "gelu_backward": (
        lambda g: [torch.randn(8, 5, generator=g), torch.randn(8, 5, generator=g)],
        torch.ops.aten.gelu_backward,
        "aten::gelu_backward",
    ),
    "nll_loss": (
        lambda g: [_log_probabilities(g), torch.randint(0, 5, (6,), generator=g)],
        torch.nn.functional.nll_loss,
        "aten::nll_loss_forward",
    ),
    "nll_loss_backward": (
        lambda g: [
            torch.randn((), generator=g),
            _log_probabilities(g),
            torch.randint(0, 5, (6,), generator=g),
            torch.tensor(6.0),
        ],
        lambda grad, logp, target, total: torch.ops.aten.nll_loss_backward(grad, logp, target, None, 1, -100, total),
        "aten::nll_loss_backward",
    ),
    "native_layer_norm": (
        lambda g: [torch.randn(6, 5, generator=g), torch.randn(5, generator=g), torch.randn(5, generator=g)],
        lambda x, w, b: torch.ops.aten.native_layer_norm(x, [5], w, b, 1e-5),
        "aten::native_layer_norm",
    ),
    "native_layer_norm_backward": (
        _layer_norm_backward_inputs,
        lambda grad, x, mean, rstd, w, b: torch.ops.aten.native_layer_norm_backward(
            grad, x, [5], mean, rstd, w, b, [True, True, True]
        ),
        "aten::native_layer_norm_backward",
    ),
    "amax": (lambda g: [torch.randn(6, 5, generator=g)], lambda x: x.amax(dim=1), "aten::amax"),
    "abs": (lambda g: [torch.randn(6, 5, generator=g)], torch.abs, "aten::abs.out"),  # abs's generic kernel calls it
    "sgn": (lambda g: [torch.randn(6, 5, generator=g)], torch.sgn, "aten::sgn"),
    "index_select": (
        lambda g: [torch.randn(6, 5, generator=g), torch.randint(0, 6, (4,), generator=g)],
        lambda x, index: x.index_select(0, index),
        "aten::index_select",
    ),
    # A list it only reads (rotary embeddings of tests/models.py): each element staged, views packed first.
    "cat": (
        lambda g: [torch.randn(6, 5, generator=g), torch.randn(5, 6, generator=g)],
        lambda a, b: torch.cat([a, b.t(), a[::2]]),
        "aten::cat",
    ),
}


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("name", sorted(FALLBACK_OPERATORS))
def test_a_fallback_operator_is_captured_and_replays_with_new_values(name):
    make, call, operator = FALLBACK_OPERATORS[name]
    static = [t.to(DEVICE) for t in make(torch.Generator().manual_seed(0))]
    graph, out = capture(lambda: call(*static))
    assert operator in torch.foo.fallback_ops(), f"{operator} has a kernel: the test needs a fallback one"
    for seed in (1, 2, 3):
        fresh = make(torch.Generator().manual_seed(seed))
        for s, f in zip(static, fresh, strict=True):
            s.copy_(f.to(DEVICE))
        graph.replay()
        eager = call(*[f.to(DEVICE) for f in fresh])
        for got, expected in zip(_as_tuple(out), _as_tuple(eager), strict=True):
            assert got.shape == expected.shape and got.stride() == expected.stride()
            assert_close(got.cpu(), expected.cpu())


def test_captured_fallback_operators_take_views_and_write_in_place():
    base = torch.randn(6, 8, device=DEVICE)
    target = torch.randn(8, 6, device=DEVICE)

    def work():
        packed = base.t().abs()  # a transposed argument: staged with its strides
        target[:, ::2].sgn_()  # in place, through a view whose elements do not fill their memory
        return packed, base[:, 1:5].amax(dim=1)  # an offset, non-dense view: packed on the device first

    graph, (packed, largest) = capture(work)
    for _ in range(2):
        fresh, fresh_target = torch.randn(6, 8), torch.randn(8, 6)
        base.copy_(fresh.to(DEVICE))
        target.copy_(fresh_target.to(DEVICE))
        graph.replay()
        fresh_target[:, ::2].sgn_()
        assert_close(packed.cpu(), fresh.t().abs())
        assert_close(largest.cpu(), fresh[:, 1:5].amax(dim=1))
        assert_close(target.cpu(), fresh_target)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda x: torch.nonzero(x), "aten::nonzero .* depends on the values"),
        (lambda x: torch.masked_select(x, x > 0), "aten::masked_select .* depends on the values"),
        (lambda x: torch.unique(x), r"aten::_?unique\w* .* depends on the values"),
        (lambda x: torch.poisson(x.abs()), "aten::poisson .* random numbers"),
        (lambda x: torch.abs(x, out=torch.empty(3, device=DEVICE)), "aten::abs.out .* resize"),
    ],
)
def test_fallback_operators_a_graph_cannot_record_raise_naming_themselves(call, message):
    x = torch.randn(4, 5, device=DEVICE)
    graph = torch.foo.FooGraph()
    with torch.foo.graph(graph):
        with pytest.raises(RuntimeError, match=f"operator {message}"):
            call(x)
        y = torch.abs(x)  # the capture goes on
    graph.replay()
    assert_close(y.cpu(), x.cpu().abs())


def test_a_fallback_kernel_that_fails_during_a_replay_raises_at_the_next_replay():
    logp = torch.randn(6, 5).log_softmax(1).to(DEVICE)
    target = torch.zeros(6, dtype=torch.long, device=DEVICE)
    graph, loss = capture(lambda: torch.nn.functional.nll_loss(logp, target))
    target.fill_(7)  # out of range: the CPU kernel raises on the stream's worker, where nothing can raise
    graph.replay()
    torch.foo.synchronize()
    assert torch.isnan(loss.cpu()), "the result of a failed operator is NaN, not a stale value"
    with pytest.raises(RuntimeError, match="earlier replay .* failed.* aten::nll_loss_forward .* Target 7 is out of"):
        graph.replay()
    target.zero_()
    graph.replay()  # reported once: the graph runs again
    assert_close(loss.cpu(), torch.nn.functional.nll_loss(logp.cpu(), target.cpu()))


def test_reset_waits_for_the_replays_that_use_the_fallback_staging():
    x = torch.randn(256, 256, device=DEVICE)
    graph, out = capture(lambda: torch.nn.functional.gelu(x).mean(dim=0))
    side = torch.foo.Stream()
    for _ in range(3):
        graph.replay()
        with torch.foo.stream(side):  # launches of one graph never overlap
            graph.replay()
    graph.reset()  # frees the staging once the last launch is done, not before
    torch.foo.synchronize()
    assert_close(out.cpu(), torch.nn.functional.gelu(x.cpu()).mean(dim=0))


def test_memory_returns_to_the_baseline_after_reset():
    gc.collect()  # tensors of earlier tests in this process
    torch.foo.synchronize()
    torch.foo.empty_cache()
    allocated = torch.foo.memory_allocated()
    reserved = torch.foo.memory_reserved()
    x = torch.randn(512, 512, device=DEVICE)
    graph, out = capture(lambda x=x: (x @ x).relu() @ x)  # temporaries come from the graph's pool
    graph.replay()
    pool = tuple(graph.pool())

    def pool_bytes():
        return sum(s["total_size"] for s in torch.foo.memory_snapshot() if tuple(s["segment_pool_id"]) == pool)

    assert pool_bytes() >= 2 * x.nbytes
    torch.foo.empty_cache()
    assert pool_bytes() >= 2 * x.nbytes, "the pool stays reserved while its graph lives"
    del out, x
    graph.reset()
    gc.collect()
    torch.foo.synchronize()
    torch.foo.empty_cache()
    assert pool_bytes() == 0
    assert torch.foo.memory_allocated() == allocated
    assert torch.foo.memory_reserved() <= reserved


def test_a_replay_of_many_small_operators_is_one_submission(tmp_path):
    import json

    from torch.profiler import ProfilerActivity, profile

    x = torch.ones(16, device=DEVICE)

    def many():
        for _ in range(50):
            x.add_(1)

    graph, _ = capture(many)
    kernels = {}
    for name, run in (("replay", graph.replay), ("eager", many)):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            run()
            torch.foo.synchronize()
        path = tmp_path / f"{name}.json"
        prof.export_chrome_trace(str(path))
        kernels[name] = [e["name"] for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    assert len(kernels["eager"]) == 50
    assert kernels["replay"] == ["fooGraphLaunch"], "the whole graph is one submission"
    assert_close(x.cpu(), torch.full((16,), 101.0))


def test_keep_graph_debug_dump_and_reset(tmp_path):
    x = torch.zeros(4, device=DEVICE)
    graph = torch.foo.FooGraph(keep_graph=True)
    graph.enable_debug_mode()
    with torch.foo.graph(graph):
        x.add_(1)
        x.mul_(2)
    path = tmp_path / "graph.dot"
    graph.debug_dump(str(path))
    dot = path.read_text()
    assert dot.startswith("digraph") and dot.count("shape=box") == 2 and "->" in dot
    graph.replay()  # instantiates first
    assert_close(x.cpu(), torch.full((4,), 2.0))
    graph.reset()
    with pytest.raises(RuntimeError, match="holds no capture"):
        graph.replay()
    with torch.foo.graph(graph):  # reusable after reset()
        x.sub_(1)
    graph.replay()
    assert_close(x.cpu(), torch.full((4,), 1.0))


def test_bad_arguments_raise_clearly():
    with pytest.raises(ValueError, match="capture_error_mode"):
        torch.foo.graph(torch.foo.FooGraph(), capture_error_mode="loose")
    with pytest.raises(TypeError, match="FooGraph"):
        torch.foo.graph(object())
    with pytest.raises(ValueError, match="check_input_liveness"):
        torch.foo.graph(torch.foo.FooGraph(), check_input_liveness=True)
    with pytest.raises(ValueError, match="enable_annotations"):
        torch.foo.graph(torch.foo.FooGraph(), enable_annotations=True)
    with pytest.raises(TypeError, match="annotation_config"):
        torch.foo.graph(torch.foo.FooGraph(), annotation_config="exec")
    graph = torch.foo.FooGraph()
    with pytest.raises(RuntimeError, match="without capture_begin"):
        graph.capture_end()


def test_annotation_config_without_annotations_changes_nothing():
    # torch.cuda.graph's annotation_config configures kernel annotations, which the device does not
    # record: code ported from CUDA that passes one captures as without it.
    x = torch.ones(4, device=DEVICE)
    graph = torch.foo.FooGraph()
    with torch.foo.graph(graph, annotation_config={"backend": "auto", "key_by": "exec"}):
        x.add_(1)
    assert_close(x.cpu(), torch.full((4,), 1.0))  # captured, not run
    graph.replay()
    graph.replay()
    assert_close(x.cpu(), torch.full((4,), 3.0))


def test_a_compiled_function_can_be_captured():
    # mode="reduce-overhead" is refused (docs/graphs.md: torch's cudagraph trees are CUDA-only);
    # capturing the compiled function gives the same one-submission replay.
    compiled = torch.compile(lambda a, b: (a * 2 + b).relu().sin() - b, backend="foo")
    x, y = torch.randn(1000, device=DEVICE), torch.randn(1000, device=DEVICE)
    compiled(x, y)  # compiles outside the capture
    graph, out = capture(lambda: compiled(x, y))
    fresh = torch.randn(1000)
    x.copy_(fresh.to(DEVICE))
    graph.replay()
    assert_close(out.cpu(), (fresh * 2 + y.cpu()).relu().sin() - y.cpu())
