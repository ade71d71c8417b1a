"""What the harness's own code in the candidate's process calls, bound once when the harness is imported.

The candidate's process also runs harness code: it loads each round's inputs before `go`, replays the
captured graph, synchronizes and says `done`, and copies the judged outputs out after `done`. If that code
looked its methods up at the time it runs (`out.detach()`, `torch.cuda.synchronize()`, `graph.replay()`),
a candidate that reached a class or module (an alias past the static policy, with the guards off) could
put its own function there, for instance a `Tensor.detach` (added to `torch.Tensor`'s own dict, where no
such key was: only `torch._C.TensorBase` had it), and so run outside the clock with its inputs or outputs
in reach. Every function here is taken from its defining object when the harness is imported, which is
before any candidate code exists (the server imports the harness before it forks); tensor methods come
from `torch._C.TensorBase`, a C type whose attributes cannot be set. The harness calls them as plain
functions (`bound.detach(t)`), so no attribute of a tensor, a class or a module is looked up on the way.
"""
from __future__ import annotations

import gc
import json
import os
import time
from typing import Any

import torch

_TB = torch._C.TensorBase

# The cyclic collector, off from `go` until the candidate reads its next command (`rounds.serve`)
gc_disable, gc_enable = gc.disable, gc.enable

Tensor = torch.Tensor
detach = _TB.detach
contiguous = _TB.contiguous
reshape = _TB.reshape
view = _TB.view
copy_ = _TB.copy_
clone = _TB.clone
numpy = _TB.numpy
cpu = _TB.cpu
to = _TB.to
numel = _TB.numel
element_size = _TB.element_size
getitem = _TB.__getitem__
is_contiguous = _TB.is_contiguous
data_ptr = _TB.data_ptr
as_subclass = _TB.as_subclass
_device = _TB.device.__get__  # type: ignore[attr-defined]
_dtype = _TB.dtype.__get__  # type: ignore[attr-defined]
_shape = _TB.shape.__get__  # type: ignore[attr-defined]
_is_sparse = _TB.is_sparse.__get__  # type: ignore[attr-defined]
empty = torch.empty
equal = torch.equal
no_grad = torch.no_grad
perf_counter = time.perf_counter
os_read, os_write = os.read, os.write
json_loads, json_dumps = json.loads, json.dumps
_sync = torch.cuda.synchronize
_replay = getattr(getattr(torch._C, "_CUDAGraph", object), "replay", None)


def device_type(t: Any) -> str:
    return _device(t).type


def dtype(t: Any) -> Any:
    return _dtype(t)


def shape(t: Any) -> Any:
    return _shape(t)


def is_sparse(t: Any) -> bool:
    return bool(_is_sparse(t))


def synchronize(device: str) -> None:
    if device == "cuda":
        _sync()


def replay(graph: Any) -> None:
    """`graph.replay()` through the C method bound at import (torch's CUDA builds)."""
    if _replay is not None:
        _replay(graph)
    else:  # a build without the C graph class: nothing to replay here
        raise RuntimeError("CUDA graphs are not available in this torch build")


__all__ = ["copy_", "detach", "device_type", "replay", "reshape", "synchronize", "view"]
