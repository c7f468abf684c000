"""Graph capture and replay on the foo device, with torch.cuda's names.

torch.accelerator.Graph is the device-generic API: csrc/core/Graph.cpp implements it for this device
over the runtime's stream capture. This module adds what torch.cuda has around it: the
FooGraph class (torch.cuda.CUDAGraph's capture_begin signature), the ``graph`` context
manager that captures on a side stream, graph_pool_handle() for pools that several graphs share, and
is_current_stream_capturing(), and make_graphed_callables, which turns modules and functions into
callables whose forward and backward each replay a graph.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from . import _C, _compat

_MODES = ("default", "global", "thread_local", "relaxed")


class FooGraph(torch.accelerator.Graph):
    """A graph of foo work: capture it once, replay it many times (torch.cuda.CUDAGraph).

    ``keep_graph``: keep the captured graph after capture_end() (instantiated on the first replay()
    or by instantiate()) instead of instantiating it and dropping it at once.
    """

    def __new__(cls, keep_graph: bool = False):
        return super().__new__(cls, keep_graph)

    def __init__(self, keep_graph: bool = False) -> None:
        super().__init__(keep_graph)

    def capture_begin(self, pool: tuple[int, int] | None = None, capture_error_mode: str = "global") -> None:
        """Begins capturing the current stream of the current device into this graph.

        ``pool``: a memory pool id (graph_pool_handle() or another graph's pool()) to share;
        ``capture_error_mode``: "global", "thread_local" or "relaxed" (docs/graphs.md).
        """
        if capture_error_mode not in _MODES:
            raise ValueError(f"capture_error_mode must be one of {', '.join(_MODES)}, not {capture_error_mode!r}")
        self.graph_pool = pool
        self.capture_error_mode = capture_error_mode
        super().capture_begin()


class graph:
    """Captures the work of its block into ``cuda_graph`` (a FooGraph or torch.accelerator.Graph).

    As torch.cuda.graph: synchronises the device and empties the caches first, then captures on
    ``stream`` (the current stream inside the block; a side stream of this module's own if not
    given, never the default stream, which other work uses) with memory from ``pool``.

    ``enable_annotations`` and ``annotation_config`` are torch.cuda.graph's kernel annotations of the
    captured nodes for profiler traces (``annotation_config``, new in torch 2.15, chooses how they are
    recorded: CUPTI or a walk of the capture graph, which graph they are keyed to, Python stacks).
    The device records none: ``enable_annotations=True`` raises, and ``annotation_config``, which
    configures only that recording, must then be None or a dict (of torch.cuda.graph's options) and
    changes nothing.
    """

    default_capture_stream: torch.Stream | None = None

    def __init__(
        self,
        cuda_graph: torch.accelerator.Graph,
        pool: tuple[int, int] | None = None,
        stream: torch.Stream | None = None,
        capture_error_mode: str = "global",
        enable_annotations: bool = False,
        annotation_config: dict[str, Any] | None = None,
        check_input_liveness: bool = False,
    ) -> None:
        # The first parameter keeps torch.cuda.graph's name, so that code ported from CUDA that passes it
        # by keyword works; it takes a FooGraph (or any torch.accelerator.Graph of this device).
        if not isinstance(cuda_graph, torch.accelerator.Graph):
            raise TypeError(f"graph() needs a FooGraph, not {type(cuda_graph).__name__}")
        if enable_annotations:
            raise ValueError("enable_annotations needs CUDA's kernel annotations (cuda.bindings); not on this device")
        if annotation_config is not None and not isinstance(annotation_config, dict):
            raise TypeError(f"annotation_config must be a dict or None, not {type(annotation_config).__name__}")
        if check_input_liveness:
            raise ValueError("check_input_liveness is not supported on this device yet (docs/graphs.md)")
        if capture_error_mode not in _MODES:
            raise ValueError(f"capture_error_mode must be one of {', '.join(_MODES)}, not {capture_error_mode!r}")
        if stream is None and graph.default_capture_stream is None:
            graph.default_capture_stream = torch.foo.Stream()
        self.capture_stream = stream if stream is not None else graph.default_capture_stream
        self.graph = cuda_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode
        self._stream_context = torch.foo.stream(self.capture_stream)

    def __enter__(self) -> None:
        torch.foo.synchronize()
        torch.foo.empty_cache()
        self._stream_context.__enter__()
        try:
            self.graph.graph_pool = self.pool
            self.graph.capture_error_mode = self.capture_error_mode
            torch.accelerator.Graph.capture_begin(self.graph)
        except BaseException:
            self._stream_context.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        try:
            self.graph.capture_end()
        except RuntimeError:
            if exc_type is None:
                raise
            # The block's own error says what went wrong; the capture it cut short is dropped.
        finally:
            self._stream_context.__exit__(exc_type, exc_value, traceback)


def graph_pool_handle() -> tuple[int, int]:
    """A new memory pool id: graphs captured with it share their memory (torch.cuda.graph_pool_handle)."""
    return tuple(_C._graph_pool_handle())


def is_current_stream_capturing() -> bool:
    """Whether the current stream of the current device is capturing a graph."""
    return bool(_C._is_current_stream_capturing())


def _refuse_steps_that_would_freeze(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    """Optimizer step pre-hook (every optimizer of the process): refuses a step with capturable=False
    of foo parameters while the current stream captures. Such a step (Adam, AdamW, ...) keeps its
    step count on the host and computes its bias corrections there, once, at capture time: every replay
    would repeat the step of the capture, silently. torch.cuda's own check is CUDA-only."""
    for group in optimizer.param_groups:
        params = group["params"]
        if group.get("capturable") is False and params and params[0].device.type == "foo":
            if _C._is_current_stream_capturing():
                raise RuntimeError(
                    f"{type(optimizer).__name__}.step() with capturable=False cannot be captured in a foo "
                    "graph: its step count lives on the host, so every replay would repeat the step of the "
                    "capture. Create the optimizer with capturable=True"
                )
            return


def make_graphed_callables(
    callables: Any,
    sample_args: tuple,
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool: tuple[int, int] | None = None,
    capture_error_mode: str = "global",
    enable_annotations: bool = False,
) -> Any:
    """Graphed versions of ``callables`` (torch.cuda.make_graphed_callables): each call replays a graph of
    the callable's forward work, inside one autograd node whose backward replays a graph of its backward.

    ``callables`` is a function or nn.Module, or a tuple of them; ``sample_args`` the tuple of positional
    tensor arguments of each (a tuple of such tuples for a tuple of callables). The arguments of later
    calls must have the samples' shapes, dtypes, devices and ``requires_grad``; they are copied into the
    captured inputs. Each callable runs ``num_warmup_iters`` times (forward and backward) on a side
    stream first; then the forward graphs are captured in the order given and the backward graphs in
    the reverse order, all in one memory pool (``pool``, or a new one), so replay them in that order
    (forward in order, backward reversed), as a training step does. A module's parameters are inputs of
    its backward graph (their gradients accumulate into ``.grad`` as usual); its buffers must not require
    grad, and it must have no hooks. A graphed module replays while its ``training`` flag is the one it
    had when graphed and runs its own forward otherwise. ``allow_unused_input``: inputs that do not
    reach the outputs get a None gradient instead of an error. ``enable_annotations`` needs CUDA's kernel
    annotations and raises, as in graph().
    """
    tree_flatten = _compat.resolve("graphs.tree_flatten")
    tree_unflatten = _compat.resolve("graphs.tree_unflatten")
    tree_leaves = _compat.resolve("graphs.tree_leaves")
    arg_tree_leaves = _compat.resolve("graphs.arg_tree_leaves")
    if enable_annotations:
        raise ValueError("enable_annotations needs CUDA's kernel annotations (cuda.bindings); not on this device")
    if capture_error_mode not in _MODES:
        raise ValueError(f"capture_error_mode must be one of {', '.join(_MODES)}, not {capture_error_mode!r}")
    if torch.is_autocast_enabled():
        raise RuntimeError("make_graphed_callables does not support autocast: disable it around the call")
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    if not isinstance(sample_args, tuple) or len(sample_args) != len(callables):
        raise ValueError("sample_args must hold one tuple of arguments per callable")

    flat_samples = []
    for fn, args in zip(callables, sample_args, strict=True):
        if not isinstance(args, tuple):
            raise TypeError(f"the sample arguments of each callable must be a tuple, not {type(args).__name__}")
        if isinstance(fn, torch.nn.Module):
            if any(len(h) for m in fn.modules() for h in (m._backward_hooks, m._forward_hooks, m._forward_pre_hooks)):
                raise ValueError("a graphed module must have no hooks: they would run at capture only")
            if any(b.requires_grad for b in fn.buffers()):
                raise ValueError("the buffers of a graphed module must have requires_grad=False")
        leaves = arg_tree_leaves(*args)
        for leaf in leaves:
            if not isinstance(leaf, torch.Tensor) or leaf.device.type != "foo":
                raise TypeError("the sample arguments must be foo tensors (a graph replays device work only)")
        flat_samples.append(tuple(leaves))

    # What each backward graph differentiates: the flattened arguments, then a module's parameters.
    surfaces = [
        flat + (tuple(fn.parameters()) if isinstance(fn, torch.nn.Module) else ())
        for fn, flat in zip(callables, flat_samples, strict=True)
    ]
    mempool = graph_pool_handle() if pool is None else pool

    def differentiable(tensors):
        return tuple(t for t in tensors if t.requires_grad)

    # Warm-up on a side stream: lazy initialisation, autograd's and the optimizer's first allocations.
    torch.foo.synchronize()
    with torch.foo.stream(torch.foo.Stream()):
        for fn, args, surface in zip(callables, sample_args, surfaces, strict=True):
            for _ in range(num_warmup_iters):
                outputs = differentiable(tree_leaves(fn(*args)))
                inputs = differentiable(surface)
                if outputs and inputs:
                    torch.autograd.grad(
                        outputs,
                        inputs,
                        grad_outputs=tuple(torch.empty_like(o) for o in outputs),
                        allow_unused=allow_unused_input,
                    )
            del outputs
    torch.foo.synchronize()

    forward_graphs = [FooGraph() for _ in callables]
    backward_graphs = [FooGraph() for _ in callables]
    static_outputs, output_specs = [], []
    for fn, args, fwd in zip(callables, sample_args, forward_graphs, strict=True):
        with graph(fwd, pool=mempool, capture_error_mode=capture_error_mode):
            outputs = fn(*args)
        leaves, spec = tree_flatten(outputs)
        static_outputs.append(tuple(leaves))
        output_specs.append(spec)

    static_grad_outputs = [None] * len(callables)
    static_grad_inputs = [None] * len(callables)
    for i in reversed(range(len(callables))):
        outputs, surface = static_outputs[i], surfaces[i]
        grad_outputs = tuple(torch.empty_like(o) if o.requires_grad else None for o in outputs)
        needed = differentiable(surface)
        grads = ()
        with graph(backward_graphs[i], pool=mempool, capture_error_mode=capture_error_mode):
            if needed and any(o.requires_grad for o in outputs):
                grads = torch.autograd.grad(
                    tuple(o for o in outputs if o.requires_grad),
                    needed,
                    grad_outputs=tuple(g for g in grad_outputs if g is not None),
                    only_inputs=True,
                    allow_unused=allow_unused_input,
                )
        grads = iter(grads)
        static_grad_inputs[i] = tuple(next(grads) if t.requires_grad else None for t in surface)
        static_grad_outputs[i] = grad_outputs

    graphed = []
    for i, fn in enumerate(callables):
        function = _graphed_function(
            forward_graphs[i],
            backward_graphs[i],
            len(flat_samples[i]),
            surfaces[i],
            static_outputs[i],
            static_grad_outputs[i],
            static_grad_inputs[i],
        )
        spec = output_specs[i]
        parameters = surfaces[i][len(flat_samples[i]) :]

        def run(*args, _function=function, _spec=spec, _parameters=parameters):
            out = _function.apply(*arg_tree_leaves(*args), *_parameters)
            return tree_unflatten(list(out), _spec)

        if isinstance(fn, torch.nn.Module):
            fn.forward = _forward_while_training_is(fn, fn.training, run, fn.forward)
            graphed.append(fn)
        else:
            graphed.append(run)
    return graphed[0] if single else tuple(graphed)


def _graphed_function(fwd, bwd, arguments, surface, outputs, grad_outputs, grad_inputs):
    """The autograd.Function of one graphed callable: forward copies the arguments into the captured
    inputs and replays ``fwd``; backward copies the incoming gradients into the captured ones and
    replays ``bwd``. ``surface`` is the captured arguments followed by a module's parameters."""

    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            if len(inputs) != len(surface):
                given = len(inputs) - len(surface) + arguments
                raise TypeError(f"a graphed callable takes {arguments} tensors, not {given}")
            for static, given in zip(surface[:arguments], inputs[:arguments], strict=True):
                if static.data_ptr() != given.data_ptr():
                    if static.shape != given.shape or static.dtype != given.dtype:
                        raise ValueError(
                            f"a graphed callable was captured for {tuple(static.shape)} {static.dtype}, "
                            f"not {tuple(given.shape)} {given.dtype}"
                        )
                    static.copy_(given)
            fwd.replay()
            return tuple(o.detach() for o in outputs)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, *grads):
            for static, given in zip(grad_outputs, grads, strict=True):
                if static is None:
                    continue
                if given is None:
                    static.zero_()
                elif static.data_ptr() != given.data_ptr():
                    static.copy_(given)
            bwd.replay()
            return tuple(g.detach() if g is not None else None for g in grad_inputs)

    return Graphed


def _forward_while_training_is(module, training, graphed_forward, own_forward):
    def forward(*args):
        if module.training == training:
            return graphed_forward(*args)
        return own_forward(*args)

    return forward


register_optimizer_step_pre_hook(_refuse_steps_that_would_freeze)


__all__ = [
    "FooGraph",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "make_graphed_callables",
]
