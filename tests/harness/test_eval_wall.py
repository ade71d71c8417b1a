"""Issue 31: what a one-shot `workbench eval` spends its wall on, and the reference's sets made by copy.

The command imports only its verb's part, the client imports no torch on the CPU (the server says what the
platform is), a one-shot server leaves torch._dynamo to the candidate's spare, and a spec whose `get_inputs()`
ignores the seed has its timed sets copied from one set, judged alike."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from workbench.harness import reference_proc

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "vector_add" / "spec.py"
CAND = ROOT / "examples" / "vector_add" / "candidate.py"


def _run(code: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**os.environ, **(env or {})}, timeout=600)
    return out.stdout.strip().splitlines()[-1]


def test_the_eval_verb_imports_none_of_the_other_verbs() -> None:
    code = ("import sys, workbench.cli\n"
            "workbench.cli.build_parser(workbench.cli._verb(['-v', 'eval', 'a.py', 'b.py']))"
            ".parse_args(['eval', 'a.py', 'b.py'])\n"
            "print(sorted(m for m in ('numpy', 'workbench.search', 'retrieval', 'profiling', 'workbench.suites',"
            " 'workbench.lowering') if m in sys.modules))")
    assert json.loads(_run(code).replace("'", '"')) == []


def test_the_whole_table_is_still_there_without_a_verb() -> None:
    from workbench import cli

    assert cli._verb(["--help"]) is None and cli._verb(["nope"]) is None and cli._verb(["-v", "kb"]) == "kb"
    sub = next(a for a in cli.build_parser("eval")._actions if a.dest == "command")
    assert list(sub.choices) == ["eval"]


def test_a_one_shot_cpu_eval_imports_no_torch_in_the_client_and_says_where_the_start_went() -> None:
    code = ("import json, sys\n"
            "from pathlib import Path\n"
            "from workbench.harness import Harness\n"
            f"h = Harness(device='cpu', one_shot=True)\n"
            f"res = h.evaluate({str(SPEC)!r}, Path({str(CAND)!r}), trials=1)\n"
            "h.close()\n"
            "print(json.dumps({'passed': res.passed, 'torch': 'torch' in sys.modules, 'platform': res.platform,"
            " 't': res.timings_s, 'd': res.details}))")
    got = json.loads(_run(code))
    assert got["passed"] and not got["torch"]
    assert got["platform"]["kind"] == "cpu" and got["platform"]["arch"] == "cpu-interpreter"
    for k in ("server_startup", "server_before_main", "server_import_torch", "server_import_dynamo",
              "server_import_rest", "server_spares", "baseline_rounds_load_s", "baseline_rounds_timed_window_s"):
        assert k in got["t"], k
    assert got["t"]["server_import_dynamo"] < 0.5  # left to the candidate's spare
    assert got["d"]["baseline_reps_per_round"] >= 1


def _fake_reference() -> Any:
    class Plan:
        @staticmethod
        def timing_seed(j: int) -> int:
            return j

    class Fake:
        spec, device, plan = None, "cpu", Plan()
        _constant = None
        _seed_free, _vary_dirs = False, None
        _fresh = reference_proc._Reference._fresh

    return Fake()


@pytest.mark.parametrize("varies, kept", [(False, True), (True, False)])
def test_a_set_every_seed_makes_alike_is_kept_and_copied(monkeypatch: pytest.MonkeyPatch, varies: bool,
                                                         kept: bool) -> None:
    base = [torch.arange(6.0).reshape(2, 3), torch.tensor([1, 2]), 3, None]

    def made(spec: Any, seed: int, device: str) -> list[Any]:
        out = [x.clone() if isinstance(x, torch.Tensor) else x for x in base]
        if varies and seed == 2:  # one later seed differs in one value: not constant
            out[0][1, 2] = -1.0
        return out

    monkeypatch.setattr(reference_proc._plan, "generate_on", made)
    ref = _fake_reference()
    reference_proc._Reference._keep_if_constant(ref, made(None, 0, "cpu"), True)
    assert (ref._constant is not None) == kept
    got = reference_proc._Reference._timed_set(ref, 12345)
    assert reference_proc._same_set(got, base)
    if kept:  # a copy in buffers of its own, never the kept set itself
        assert got[0].data_ptr() != ref._constant[0].data_ptr()
        # and where the spec ignores the seed (`prepare` found so), each seed's copy is varied (`vary.py`): the
        # floating tensor scaled, the integer one and the scalars as they were, the same seed the same set
        ref._seed_free = True
        a, b, c = (reference_proc._Reference._timed_set(ref, s) for s in (7, 7, 8))
        assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0]) and not torch.equal(a[0], base[0])
        assert torch.equal(a[1], base[1]) and a[2:] == base[2:]


def test_same_set_tells_dtype_strides_scalars_and_nan() -> None:
    a = torch.tensor([1.0, float("nan")])
    assert reference_proc._same_set([a, 2], [a.clone(), 2])
    assert not reference_proc._same_set([a], [a.double()])
    assert not reference_proc._same_set([a, 2], [a, 3])
    assert not reference_proc._same_set([torch.zeros(2, 3)], [torch.zeros(3, 2).t()])
    assert not reference_proc._same_set([a], [a, a])


def test_the_unseeded_sets_are_made_by_copy_and_judged_alike(tmp_path: Path) -> None:
    """End to end on the shelf's path (`WB_DEVICE_INPUTS=on` on the CPU): a spec whose `get_inputs()` ignores
    the seed passes with an honest candidate, its inputs shared from the reference's shelf."""
    spec = tmp_path / "fixed.py"
    spec.write_text(SPEC.read_text().replace(
        "return [torch.randn(N), torch.randn(N)]",
        "return [torch.linspace(-1.0, 1.0, N), torch.cos(torch.arange(N) * 0.1)]"))
    env = {"WB_DEVICE_INPUTS": "on"}
    code = ("import json\nfrom pathlib import Path\nfrom workbench.harness import evaluate\n"
            f"r = evaluate({str(spec)!r}, Path({str(CAND)!r}), device='cpu', trials=2)\n"
            "print(json.dumps({'status': r.status.value, 'err': r.error, 'inputs': r.details.get('inputs')}))")
    got = json.loads(_run(code, env))
    assert got["status"] == "passed", got["err"]
    assert got["inputs"] == "made on the device"
