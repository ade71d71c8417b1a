"""A KernelBench-format folder through the suite: five small problems and three broken ones, in one run."""
import json

import pytest

from tests.suites.kb_folder import write_candidates, write_problems
from workbench.suites import SuiteError, load_report, run_kernelbench


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("kb")
    root = write_problems(base / "kb", broken=True)
    seeds = write_candidates(base / "seeds", ["1_Add", "2_ReLU", "3_Scale", "5_Sub"])  # none for 4_Mul
    return run_kernelbench(root, levels="1", draft="none", seed_dir=seeds, device="cpu", workers=2,
                           run_dir=base / "runs", prepare_timeout_s=20, trials=1, progress=False)


def by_id(run):
    return {p["problem_id"]: p for p in run.report["problems"]}


def test_every_problem_has_a_row_and_a_reason(run):
    probs = by_id(run)
    assert len(probs) == 8 and run.report["complete"]
    for pid in ("L1/1_Add", "L1/2_ReLU", "L1/3_Scale"):
        p = probs[pid]
        assert p["status"] == "done" and p["verdict"] == "passed" and p["correct"], p
        assert p["speedup"] > 0 and p["runtime_us"] > 0 and p["baseline_us"] > 0
        assert p["best_kernel"] and (run.path / p["best_kernel"]).is_file()
        assert p["sizes"]["overrides"]["batch_size"] * p["sizes"]["overrides"]["dim"] <= 1 << 16
    sub = probs["L1/5_Sub"]
    assert sub["status"] == "done" and sub["verdict"] == "incorrect" and "differ" in sub["diagnosis"]
    assert probs["L1/4_Mul"]["status"] == "failed" and "no seed" in probs["L1/4_Mul"]["diagnosis"]
    assert "syntax error at line 2" in probs["L1/6_SyntaxError"]["diagnosis"]
    assert "get_inputs" in probs["L1/7_NoGetInputs"]["diagnosis"]
    assert "timed out after 20 s" in probs["L1/8_HangAtImport"]["diagnosis"]
    assert probs["L1/8_HangAtImport"]["wall_s"] < 60  # the hang cost only its own limit


def test_fast_p_of_the_level(run):
    lvl = run.report["levels"]["1"]
    assert lvl["n"] == 8 and lvl["correct"] == 3 and lvl["failed"] == 4 and lvl["done"] == 4
    assert lvl["fast_p"]["0"] == pytest.approx(3 / 8)
    assert lvl["fast_p_vs_compile"] is None  # CPU: no torch.compile baseline


def test_report_files(run):
    for name in ("report.json", "report.md", "problems.csv", "fast_p.png", "speedups.png", "suite.sqlite"):
        assert (run.path / name).is_file(), name
    assert load_report(run.path)["run_id"] == run.run_id
    assert json.loads((run.path / "report.json").read_text())["schema"] == "workbench.suites.report/1"
    md = (run.path / "report.md").read_text()
    assert "L1/8_HangAtImport" in md and "fast_1.5" in md
    csv = (run.path / "problems.csv").read_text().splitlines()
    assert len(csv) == 9 and csv[0].startswith("problem_id,level")


def test_bad_input_is_one_line(tmp_path):
    with pytest.raises(SuiteError, match="not found"):
        run_kernelbench(tmp_path / "missing", device="cpu")
    write_problems(tmp_path / "kb", ["1_Add"])
    with pytest.raises(SuiteError, match="1-20,23"):
        run_kernelbench(tmp_path / "kb", levels="1", problems="x-3", device="cpu")
    with pytest.raises(SuiteError, match="level2"):
        run_kernelbench(tmp_path / "kb", levels="1,2", device="cpu")
    with pytest.raises(SuiteError, match="--seed"):
        run_kernelbench(tmp_path / "kb", levels="1", draft="magic", device="cpu")


def test_resume_of_a_finished_run_runs_nothing(run, capsys):
    from workbench.cli import main

    before = {p["problem_id"]: (p["attempts"], p.get("wall_s")) for p in run.report["problems"]}
    again = run_kernelbench(resume=str(run.path), progress=False)
    assert {p["problem_id"]: (p["attempts"], p.get("wall_s")) for p in again.report["problems"]} == before
    assert main(["suite", "report", str(run.path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["levels"]["1"]["correct"] == 3
    assert main(["suite", "report", "no-such-run", "--run-dir", str(run.path.parent)]) == 2


def test_budget_runs_the_search_from_the_seed(tmp_path):
    root = write_problems(tmp_path / "kb", ["3_Scale"])
    seeds = write_candidates(tmp_path / "seeds", ["3_Scale"])
    out = run_kernelbench(root, levels="1", draft="none", seed_dir=seeds, budget=1, device="cpu", trials=1,
                          run_dir=tmp_path / "runs", progress=False, max_elems=4096)
    p = out.problems[0]
    assert p["correct"] and p["evaluations"] == 2 and p["search"]["stop"] == "budget_evals"
    assert p["sizes"]["overrides"]["batch_size"] * p["sizes"]["overrides"]["dim"] <= 4096
    assert (out.path / p["best_kernel"]).read_text().startswith("import torch")
    assert set(p["schedule"]) == {"BLOCK"} and p["schedule"]["BLOCK"] in (256, 512, 1024, 2048)  # the chosen TUNABLES
    assert out.report["throughput"]["evaluations"] == 2 and out.report["throughput"]["candidates_per_hour"] > 0


def test_an_evaluator_that_cannot_start_stops_the_run_and_loses_nothing(tmp_path, monkeypatch):
    import workbench.evaluator
    from workbench.suites.store import SuiteStore

    def broken(*args, **kwargs):
        raise RuntimeError("The current node timed out during startup.")

    monkeypatch.setattr(workbench.evaluator, "make_evaluator", broken)
    root = write_problems(tmp_path / "kb", ["1_Add", "2_ReLU"])
    seeds = write_candidates(tmp_path / "seeds", ["1_Add", "2_ReLU"])
    with pytest.raises(SuiteError, match="evaluator failed to start: RuntimeError: The current node"):
        run_kernelbench(root, levels="1", draft="none", seed_dir=seeds, device="cpu", evaluator="ray",
                        run_dir=tmp_path / "runs", progress=False)
    (store_path,) = (tmp_path / "runs").glob("*/suite.sqlite")
    with SuiteStore(store_path) as store:
        assert {r.status for r in store.problems()} == {"pending"}  # both run again on resume
