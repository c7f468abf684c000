"""Graph capture and replay on the foo device, with torch.cuda's names.

torch.accelerator.Graph is the device-generic API: csrc/core/Graph.cpp implements it for this device
over the runtime's stream capture. This module adds what torch.cuda has around it: the
FooGraph class (torch.cuda.CUDAGraph's capture_begin signature), the ``graph`` context
manager that captures on a side stream, graph_pool_handle() for pools that several graphs share, and
is_current_stream_capturing(). make_graphed_callables is not provided (docs/graphs.md says why).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from . import _C

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


register_optimizer_step_pre_hook(_refuse_steps_that_would_freeze)


__all__ = ["FooGraph", "graph", "graph_pool_handle", "is_current_stream_capturing"]
