"""The run-time allow-list (`workbench/harness/restrict.py`), one hostile test per class, each class written
from several spellings; then whole candidates through the harness with the static policy off, so the
run-time line alone decides (on the CPU and, under `pytest -m gpu`, on the GPU).

- torch compute in code Triton calls from inside a launch (grid lambda, `heuristics` value, autotune hook)
  is recorded like compute in the forward;
- no route out of the allow-list by attribute: computed names, `match` patterns, `torch.sys`, the
  interpreter's `np`, NumPy and per-element Python (`numpy`, `tolist`, `apply_`), dunders, format fields;
- nothing outside its own objects is written (`monkeypatch`), no reflective builtin, no import but the
  allowed ones.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from tests.harness.devices import DEVICES, sized
from workbench.harness import Harness, opcheck, restrict
from workbench.harness.opcheck import OpRecorder
from workbench.result import Status

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
SPEC = ROOT / "examples" / "vector_add" / "spec.py"
CASES = HERE / "allowlist"


class _Refusal(PermissionError):
    pass


def _load(tmp_path: Path, body: str) -> tuple[object, list[str]]:
    """A candidate module compiled under the guards; the violations they record."""
    found: list[str] = []

    def refuse(rule: str, what: str):
        found.append(f"{rule}:{what}")
        raise _Refusal(f"{rule}:{what}")

    path = tmp_path / "cand.py"
    src = textwrap.dedent(body)
    path.write_text(src)
    return restrict.load_module(src.encode(), str(path), restrict.Rules(refuse), name="wb_test_candidate"), found


# -- compute in code Triton calls from inside a launch --------------------------------------------------------
@pytest.mark.parametrize("form", ["lambda", "def", "method", "nested"])
def test_own_code_is_recorded_even_inside_a_launch(tmp_path: Path, form: str) -> None:
    """Triton's launch pauses the recorder (its own ops); a function of the candidate's that it calls there
    (a grid lambda, a heuristics value, a pre_hook: any form) is recorded again."""
    mod, _ = _load(tmp_path, """
        import torch
        hook_lambda = lambda a, b: torch.add(a, b)
        def hook_def(a, b):
            return a * b
        class Hooks:
            def hook(self, a, b):
                return a.div(b)
        def make():
            def inner(a, b):
                return torch.maximum(a, b)
            return inner
        """)
    hook = {"lambda": mod.hook_lambda, "def": mod.hook_def, "method": mod.Hooks().hook, "nested": mod.make()}[form]
    a, b = torch.ones(4), torch.ones(4)
    rec = OpRecorder()
    depth = opcheck.STATE.depth
    opcheck.STATE.depth = 1  # as inside Triton's run()
    try:
        with rec:
            hook(a, b)
            torch.sub(a, b)  # Triton's own op, after the hook returned: still paused
    finally:
        opcheck.STATE.depth = depth
    want = {"lambda": "add", "def": "mul", "method": "div", "nested": "maximum"}[form]
    assert want in rec.ops and "sub" not in rec.ops, rec.ops
    assert rec.forbidden() == [want], rec.ops


# -- no route out by attribute ---------------------------------------------------------------------------------
@pytest.mark.parametrize("expr, rule", [
    ("x.numpy()", "forbidden_torch_op"),
    ("getattr(x, 'nu' + 'mpy')()", "forbidden_torch_op"),
    ("getattr(x, 'tolist')()", "forbidden_torch_op"),
    ("torch.Tensor.numpy(x)", "forbidden_torch_op"),
    ("torch.FloatTensor.numpy(x)", "forbidden_torch_op"),
    ("x.apply_(lambda v: v * 2)", "forbidden_torch_op"),
    ("x.map_(x, lambda v, w: v + w)", "forbidden_torch_op"),
    ("x.untyped_storage()", "forbidden_introspection"),
    ("torch.from_numpy", "forbidden_torch_op"),
    ("torch.sys", "frame_introspection"),
    ("getattr(torch, 'o' + 's').system", "import"),
    ("torch.utils", "forbidden_introspection"),
    ("torch._C", "forbidden_introspection"),
    ("x.__class__", "forbidden_introspection"),
    ("(lambda: 0).__globals__", "frame_introspection"),
    ("'{0.__class__}'.format(x)", "forbidden_introspection"),
    ("hasattr(x, '__dict__')", "forbidden_introspection"),
    ("torch.cuda.Stream", "side_stream"),
    ("torch.ops.aten.add", "forbidden_torch_op"),
])
def test_no_attribute_route_leaves_the_allow_list(tmp_path: Path, expr: str, rule: str) -> None:
    mod, found = _load(tmp_path, f"""
        import torch
        def probe(x):
            return {expr}
        """)
    with pytest.raises(_Refusal):
        mod.probe(torch.ones(3))
    assert found and found[0].startswith(rule + ":"), found


def test_what_the_interpreter_leaves_in_the_module_is_no_route(tmp_path: Path) -> None:
    """Triton's interpreter copies its globals (`np`, `inspect`...) into a kernel's module: modules a
    candidate may not hold, whatever name it finds them under."""
    import inspect as _inspect

    import numpy as _np

    mod, found = _load(tmp_path, """
        def probe(m):
            return m.stack
        """)
    for m in (_np, _inspect):
        with pytest.raises(_Refusal):
            mod.probe(m)
    assert [f.split(":")[0] for f in found] == ["forbidden_torch_op", "frame_introspection"], found


@pytest.mark.parametrize("src, rule", [
    ("from torch import sys", "frame_introspection"),
    ("import numpy", "forbidden_torch_op"),
    ("import builtins", "monkeypatch"),
    ("import string", "import"),
    ("from torch import _C", "forbidden_introspection"),
    ("x = __import__('sys')", "frame_introspection"),
    ("x = __builtins__", "frame_introspection"),
    ("x = eval('1')", "dynamic_code"),
    ("x = globals()", "frame_introspection"),
    ("x = vars(torch)", "frame_introspection"),
    ("from . import x", "import"),
    ("__wb_getattr__ = getattr", "forbidden_introspection"),
    ("match 1:\n    case torch.Tensor(numpy=f):\n        pass", "forbidden_introspection"),
    ("def g():\n    yield 1", "dynamic_code"),
])
def test_imports_builtins_and_syntax_beyond_the_allow_list_are_refused(tmp_path: Path, src: str, rule: str) -> None:
    with pytest.raises((_Refusal, restrict.Refused)) as info:
        _load(tmp_path, "import torch\n" + src + "\n")
    got = f"{info.value.rule}:" if isinstance(info.value, restrict.Refused) else str(info.value)
    assert got.startswith(rule + ":"), got


@pytest.mark.parametrize("stmt, rule", [
    ("time.perf_counter = lambda: 0.0", "monkeypatch:time.perf_counter"),
    ("torch.Tensor.detach = lambda self: self", "monkeypatch:torch.Tensor.detach"),
    ("T = torch.Tensor; T.sum = None", "monkeypatch:torch.Tensor.sum"),
    ("setattr(torch, 'allclose', None)", "monkeypatch:torch.allclose"),
    ("del torch.nn.functional.relu", "monkeypatch:torch.nn.functional.relu"),
    ("self.__class__ = object", "monkeypatch"),
])
def test_nothing_but_its_own_objects_is_written(tmp_path: Path, stmt: str, rule: str) -> None:
    mod, found = _load(tmp_path, f"""
        import time
        import torch
        class Box:
            def run(self):
                {stmt}
        """)
    with pytest.raises(_Refusal):
        mod.Box().run()
    assert found and found[0].startswith(rule), found


def test_its_own_objects_stay_writable_and_readable(tmp_path: Path) -> None:
    mod, found = _load(tmp_path, """
        import torch
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self._cache = {}
                self.calls = 0
                self.w = nn.Parameter(torch.ones(2))
            def forward(self, x):
                self.calls += 1
                self._cache["n"] = x.numel()
                return x.view(-1)[: self._cache["n"]], f"{x.shape[0]} {self.calls}", "{} {n}".format(1, n=2)
        """)
    out, text, fmt = mod.M()(torch.ones(3))
    assert out.shape == (3,) and text == "3 1" and fmt == "1 2" and not found


# -- whole candidates, the static policy off: the run-time line alone ------------------------------------------
@pytest.fixture(scope="module", params=DEVICES)
def harness(request):
    with Harness(device=request.param) as h:
        yield h


@pytest.mark.parametrize("name", ["grid_lambda_compute", "pre_hook_compute", "attribute_by_string"])
def test_a_candidate_that_leaves_the_allow_list_at_run_time_is_rejected(harness: Harness, name: str) -> None:
    res = harness.evaluate(SPEC, CASES / f"{name}.py", **sized(harness.device, 2), policy=False, timeout_s=120)
    assert res.status == Status.REJECTED and res.fitness == 0.0, (res.status, res.error, res.violations)
    assert any(v.startswith("forbidden_torch_op") for v in res.violations), res.violations


def test_honest_hooks_pass_under_the_allow_list(harness: Harness) -> None:
    for policy_on in (True, False):
        res = harness.evaluate(SPEC, CASES / "honest_hooks.py", **sized(harness.device, 2), policy=policy_on)
        assert res.status == Status.PASSED, (policy_on, res.status, res.error, res.violations)


def test_the_static_policy_refuses_a_name_nothing_binds() -> None:
    """The interpreter's globals (`np`, `inspect`) appear in a kernel's module after its first launch: a name
    nothing binds is refused in the text too; a name only in a lazy annotation is no use of it."""
    from workbench.harness import policy

    honest = (ROOT / "examples" / "vector_add" / "candidate.py").read_text()
    assert policy.check_source(honest) == []
    for name in ("np", "inspect", "interpreter_builder"):
        found = policy.check_source(honest + f"\n\ndef helper(x):\n    return {name}.stack\n")
        assert any(v.startswith(f"import:unbound name {name}") for v in found), found
    lazy = "from __future__ import annotations\n" + honest + "\n\ndef helper(x: Undefined) -> Other:\n    return x\n"
    assert policy.check_source(lazy) == []


def test_a_tensor_subclass_reaches_no_banned_method_through_super(tmp_path: Path) -> None:
    mod, found = _load(tmp_path, """
        import torch
        class T(torch.Tensor):
            def leak(self):
                return super().numpy()
        """)
    with pytest.raises(_Refusal):
        torch.ones(2).as_subclass(mod.T).leak()
    assert found == ["forbidden_torch_op:Tensor.numpy"], found
