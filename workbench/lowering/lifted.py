"""Tensors the spec's forward builds from literals (`x[torch.tensor([0, 2])]`).

Export lifts them to graph inputs named like `lifted_tensor_0`, read in the candidate as
`self.lifted_tensor_0`. ModelNew registers each as a non-persistent buffer at the end of its
`__init__`: it moves with `.to(device)`, stays out of the state dict (ModelNew's must equal Model's),
and costs no copy per call. The values are written into the source, so large ones are refused.
"""
from __future__ import annotations

import ast
import math
from typing import Any

import torch

from workbench.lowering.epilogue import Unsupported, torch_dtype

MAX_ELEMENTS = 4096  # a literal of this many numbers is still readable source


def _literal(x: Any) -> str:
    if isinstance(x, float) and not math.isfinite(x):
        return 'float("nan")' if x != x else ('float("inf")' if x > 0 else '-float("inf")')
    return repr(x)


def _register_line(name: str, t: Any) -> str:
    from torch._subclasses.fake_tensor import FakeTensor

    if not isinstance(t, torch.Tensor) or isinstance(t, FakeTensor) or t.is_complex():
        raise Unsupported(f"unsupported: the forward's tensor constant {name} ({type(t).__name__})")
    if t.numel() > MAX_ELEMENTS:
        raise Unsupported(f"unsupported: the forward's tensor constant {name} has {t.numel()} elements "
                          f"(at most {MAX_ELEMENTS} are written into the candidate)")
    if not name.isidentifier():
        raise Unsupported(f"unsupported: a tensor constant named {name!r}")
    values = ", ".join(_literal(v) for v in t.detach().cpu().reshape(-1).tolist())
    return (f"self.register_buffer({name!r}, torch.tensor([{values}], dtype={torch_dtype(t.dtype)})"
            f".reshape({list(t.shape)}), persistent=False)")


def _state_lines(fqn: str) -> list[str]:
    """A plain tensor attribute of the copied __init__ made a non-persistent buffer: it follows
    `.to(device)` as Model's own forward makes it (`self.hidden.to(x.device)`), out of the state dict."""
    from workbench.lowering.codegen import attr_path

    parent, _, name = fqn.rpartition(".")
    if not name.isidentifier():
        raise Unsupported(f"unsupported: a tensor attribute named {fqn!r}")
    owner = attr_path("self", parent) if parent else "self"
    return [f"state = {owner}.{name}", f"del {owner}.{name}",
            f"{owner}.register_buffer({name!r}, state, persistent=False)"]


def with_lifted_constants(inputs: dict[str, tuple[str, Any]], constants: dict[str, Any],
                          methods: list[str], state_attrs: list[str] = ()) -> list[str]:
    """ModelNew's methods (source texts) with the lifted constants registered at the end of `__init__`,
    after the tensor attributes capture traced as buffers (`state_attrs`) are made buffers."""
    names = [where for kind, where in inputs.values() if kind == "constant"]
    if not names and not state_attrs:
        return methods
    lines = [ast.parse(text).body[0] for fqn in state_attrs for text in _state_lines(fqn)]
    lines += [ast.parse(_register_line(n, constants.get(n))).body[0] for n in names]
    out, done = [], False
    for text in methods:
        fn = ast.parse(text).body[0]
        if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
            fn.body.extend(lines)
            text, done = ast.unparse(ast.fix_missing_locations(fn)), True
        out.append(text)
    if not done:  # Model inherits nn.Module's __init__
        init = ast.parse("def __init__(self, *args, **kwargs):\n    super().__init__(*args, **kwargs)").body[0]
        init.body.extend(lines)
        out.insert(0, ast.unparse(ast.fix_missing_locations(init)))
    return out
