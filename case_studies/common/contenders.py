"""PyTorch contenders a user could pick instead of our kernel: eager and torch.compile (default and
max-autotune). Every contender is a factory `(params, inputs) -> zero-argument callable`; the runner times
each callable as a plain launch and replayed as a CUDA graph, so the launch modes stay like with like.

`compile_max_autotune` uses inductor's `max-autotune-no-cudagraphs` mode: the runner adds CUDA graphs
itself (mode "graph"), and inductor's own cudagraph trees inside our capture would measure something else.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch

log = logging.getLogger(__name__)

Factory = Callable[[dict[str, Any], Sequence[Any]], Callable[[], Any]]

COMPILE_MODES = {"compile_default": "default", "compile_max_autotune": "max-autotune-no-cudagraphs"}


def eager(fn: Callable[..., Any]) -> Factory:
    """The function itself, called on the inputs."""
    def make(params: dict[str, Any], inputs: Sequence[Any]) -> Callable[[], Any]:
        return lambda: fn(*inputs)
    return make


def compiled(fn: Callable[..., Any], mode: str = "default") -> Factory:
    """`torch.compile(fn, mode=mode, dynamic=False)`, compiled afresh for every shape (static shapes are
    what a production deployment of one shape would compile)."""
    def make(params: dict[str, Any], inputs: Sequence[Any]) -> Callable[[], Any]:
        import torch._dynamo

        torch._dynamo.reset()
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        cf = torch.compile(fn, mode=mode, dynamic=False)
        cf(*inputs)              # compile now, not inside the timing loop
        return lambda: cf(*inputs)
    return make


def pytorch_contenders(fn: Callable[..., Any], prefix: str = "") -> dict[str, Factory]:
    """eager, compile_default and compile_max_autotune of one PyTorch formulation of the operation.
    `prefix` names an alternative formulation ("conv2d_" gives conv2d_eager, ...)."""
    out: dict[str, Factory] = {f"{prefix}eager": eager(fn)}
    for name, mode in COMPILE_MODES.items():
        out[f"{prefix}{name}"] = compiled(fn, mode)
    return out


def torch_dtype(name: str) -> torch.dtype:
    return {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[name]


def kernel(fn: Callable[..., Any]) -> Factory:
    """A Triton entry point: called once when the contender is made (compile, autotune), then timed."""
    def make(params: dict[str, Any], inputs: Sequence[Any]) -> Callable[[], Any]:
        fn(*inputs)
        return lambda: fn(*inputs)
    return make
