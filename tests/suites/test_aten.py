"""Two OpInfo ops through the ATen suite: generated specs, every sample judged, a wrong one caught."""
import pytest

pytest.importorskip("expecttest", reason="torch's OpInfo database needs expecttest (the dev extra)")

from workbench.suites import SuiteError, run_aten  # noqa: E402
from workbench.suites.aten import classify, load_op_db  # noqa: E402

UNARY = '''import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 256


@triton.jit
def _kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, {expr}, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, *tensors):
        outs = []
        for t in tensors:  # one tensor per OpInfo sample for these unary ops
            x = t.contiguous()
            out = torch.empty_like(x)
            if x.numel():
                _kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
            outs.append(out.view(t.shape))
        return tuple(outs)
'''


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("aten")
    seeds = base / "seeds"
    seeds.mkdir()
    (seeds / "abs__float32.py").write_text(UNARY.format(expr="tl.abs(x)"))
    (seeds / "neg__float32.py").write_text(UNARY.format(expr="x"))  # wrong on purpose: the identity
    return run_aten(ops="abs,neg", dtypes="float32", draft="none", seed_dir=seeds, device="cpu", trials=1,
                    run_dir=base / "runs", progress=False)


def test_two_ops_judged_on_all_their_samples(run):
    probs = {p["problem_id"]: p for p in run.report["problems"]}
    assert set(probs) == {"aten/abs/float32", "aten/neg/float32"}
    assert probs["aten/abs/float32"]["verdict"] == "passed" and probs["aten/abs/float32"]["correct"]
    neg = probs["aten/neg/float32"]
    assert neg["status"] == "done" and neg["verdict"] == "incorrect" and "differ" in neg["diagnosis"]
    lvl = run.report["levels"]["float32"]
    assert lvl["n"] == 2 and lvl["correct"] == 1 and lvl["fast_p"]["0"] == 0.5
    spec = (run.path / "specs" / "abs__float32.py").read_text()
    assert "OP = 'abs'" in spec and (run.path / "specs" / "abs__float32.pt").is_file()
    assert (run.path / "specs" / "scope.json").is_file()
    # speed per op family (workbench/suites/aten_families.py): both are pointwise, one of the two correct
    fam = run.report["families"]["pointwise"]
    assert fam["n"] == 2 and fam["correct"] == 1 and fam["fast_1"] is not None
    assert "| pointwise | 2 | 1 |" in (run.path / "report.md").read_text()


def test_scope_excludes_factories_and_random_ops_and_takes_views_as_copies():
    db = {o.name: o for o in load_op_db() if not o.variant_test_name}
    case, why = classify(db["transpose"], "float32")  # a view: in scope, compared as a copy
    assert why == "" and case.copy and not case.method
    case, why = classify(db["__radd__"], "float32")  # a dunder: called as the Tensor method
    assert why == "" and case.method and not case.copy
    assert classify(db["T"], "float32")[1].startswith("not callable")  # a property
    assert classify(db["zero_"], "float32")[1].startswith("in-place")
    assert classify(db["new_zeros"], "float32")[1] == "factory"
    assert classify(db["zeros_like"], "float32")[1] == "factory"
    assert classify(db["bernoulli"], "float32")[0] is None
    case, why = classify(db["mm"], "float32")
    assert why == "" and case.calls and len(case.tensors) == 2 * len(case.calls)
    with pytest.raises(SuiteError, match="unknown OpInfo"):
        run_aten(ops="no_such_op", device="cpu", progress=False)


def test_each_sample_owns_its_tensors_and_batch_norm_specs_lower(tmp_path):
    """OpInfo hands batch_norm's samples the same running-statistics tensors: saved as they are they alias, and
    export refused the training samples' mutation of an aliased input. Each sample gets its own copy."""
    from pathlib import Path

    from workbench.lowering import lower_spec
    from workbench.suites.aten import _storages, write_spec

    db = {o.name: o for o in load_op_db() if not o.variant_test_name}
    case, why = classify(db["native_batch_norm"], "float32")
    assert why == ""
    seen: set[int] = set()
    for args, _ in case.calls:
        idx = [a["__t__"] for a in args if isinstance(a, dict) and "__t__" in a]
        mine = _storages([case.tensors[i] for i in idx])
        assert not mine & seen, "a sample reads a storage an earlier sample holds"
        seen |= mine
    res = lower_spec(write_spec(case, Path(tmp_path)))
    assert res.ok, res.diagnosis
