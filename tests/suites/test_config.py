"""One configuration type for a suite: `workbench suite`'s flags are SuiteConfig's fields and the search
settings it passes on, one to one; `--seed` is a deprecated alias of `--draft`; a resumed run takes
exactly the fields the caller gave."""
from __future__ import annotations

import argparse
import dataclasses
import logging

import pytest

import workbench.suites.runner as runner_mod
from workbench.options import flag_name
from workbench.search.config import SearchConfig
from workbench.suites import SuiteError
from workbench.suites.cli import _options, register
from workbench.suites.config import ATEN_FIELDS, COMMON_FIELDS, KERNELBENCH_FIELDS, SUITE_SEARCH_FIELDS, SuiteConfig
from workbench.suites.runner import STORE_NAME, run_suite
from workbench.suites.store import ProblemRow, SuiteStore

NOT_CONFIG = {"help", "run_dir", "resume", "retry_failed", "run_id", "json", "no_progress", "deprecated_seed"}


def _parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser()
    register(root.add_subparsers(dest="cmd"))
    return root


def _sub(name: str) -> argparse.ArgumentParser:
    (suite,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    (sub,) = [a for a in suite.choices["suite"]._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices[name]


@pytest.mark.parametrize("suite, own", [("kernelbench", KERNELBENCH_FIELDS), ("aten", ATEN_FIELDS)])
def test_flags_are_the_fields_one_to_one(suite: str, own: tuple[str, ...]) -> None:
    p = _sub(suite)
    flags = {a.dest: a.option_strings for a in p._actions if a.dest not in NOT_CONFIG}
    assert sorted(flags) == sorted(own + COMMON_FIELDS + SUITE_SEARCH_FIELDS)
    suite_fields = {f.name: f for f in dataclasses.fields(SuiteConfig)}
    search_fields = {f.name: f for f in dataclasses.fields(SearchConfig)}
    for name, opts in flags.items():
        f = suite_fields[name] if name in own + COMMON_FIELDS else search_fields[name]
        assert opts == [flag_name(f)], name
    # every SuiteConfig field is a flag of one suite or the other, except the subcommand and the search
    assert set(suite_fields) - {"suite", "search"} == set(KERNELBENCH_FIELDS + ATEN_FIELDS + COMMON_FIELDS)
    assert flags["draft"] == ["--draft"] and flags["seed_dir"] == ["--seed-dir"]
    assert flags["compile_baseline"] == ["--no-compile"] and flags["prepare_timeout_s"] == ["--prepare-timeout"]


def test_typed_flags_only() -> None:
    args = _parser().parse_args(["suite", "kernelbench", "--root", "kb", "--levels", "1,2", "--draft", "none",
                                 "--workers", "2", "--no-compile", "--trials", "1"])
    assert _options(args) == {"root": "kb", "levels": [1, 2], "draft": "none", "compile_baseline": False,
                              "workers": 2, "trials": 1}
    assert _options(_parser().parse_args(["suite", "aten"])) == {}


def test_seed_is_a_deprecated_alias_of_draft(caplog) -> None:
    args = _parser().parse_args(["suite", "kernelbench", "--seed", "none"])
    options = _options(args)
    assert options == {"seed": "none"}
    with caplog.at_level(logging.WARNING, logger="workbench.suites.config"):
        with pytest.warns(DeprecationWarning, match="use draft= / --draft"):
            cfg = SuiteConfig(suite="kernelbench").replace(**options)
    assert cfg.draft == "none"
    assert "--seed none is deprecated" in caplog.text and "use --draft none" in caplog.text
    with pytest.warns(DeprecationWarning), pytest.raises(SuiteError, match="disagree"):
        SuiteConfig(suite="kernelbench").replace(seed="none", draft="lower")


def test_old_stored_configs_are_read() -> None:
    old = {"suite": "kernelbench", "root": "kb", "seed": "none", "seed_dir": "s", "llm": "none", "budget": 0,
           "device": "cpu", "workers": 2, "evaluator": "local", "timeout_s": 30.0, "trials": 1,
           "prepare_timeout_s": 20.0, "max_elems": 4096, "compile_baseline": False}
    cfg = SuiteConfig.from_dict(old)
    assert cfg.draft == "none" and cfg.max_elems == 4096 and cfg.prepare_timeout_s == 20.0
    assert (cfg.search.workers, cfg.search.device, cfg.search.timeout_s, cfg.search.trials) == (2, "cpu", 30.0, 1)
    assert SuiteConfig.from_dict(cfg.to_dict()) == cfg


def _finished_run(tmp_path, cfg: SuiteConfig):
    path = tmp_path / "runs" / "kernelbench-x"
    path.mkdir(parents=True)
    with SuiteStore(path / STORE_NAME) as store:
        store.set_meta("config", cfg.to_dict())
        store.add_problems([ProblemRow(problem_id="L1/1_Add", seq=0, level=1, name="1_Add", spec_path="none.py")])
        store.finish("L1/1_Add", "failed", {"problem_id": "L1/1_Add", "level": 1, "name": "1_Add",
                                            "spec_path": "none.py", "verdict": "not_run", "correct": False,
                                            "fitness": 0.0, "speedup": 0.0, "diagnosis": "prepare: test",
                                            "seed": {"mode": "none"}})
    return path


def test_resume_applies_exactly_the_fields_given(tmp_path, monkeypatch) -> None:
    cfg = SuiteConfig(suite="kernelbench", root="kb", draft="none", budget=0, max_elems=4096, prepare_timeout_s=20.0,
                      compile_baseline=False,
                      search=SearchConfig(spec_path="", device="cpu", workers=1, timeout_s=30.0, trials=1))
    path = _finished_run(tmp_path, cfg)
    seen: list[SuiteConfig] = []

    class Recording(runner_mod.SuiteRunner):
        def __init__(self, cfg, *args, **kwargs):
            seen.append(cfg)
            super().__init__(cfg, *args, **kwargs)

    monkeypatch.setattr(runner_mod, "SuiteRunner", Recording)
    run_suite(None, run_dir=tmp_path / "runs", resume=path.name, progress=False,
              changes={"workers": 2, "prepare_timeout_s": 40.0, "draft": "none"})  # draft as stored: no change
    assert seen[-1] == dataclasses.replace(cfg, prepare_timeout_s=40.0,
                                           search=dataclasses.replace(cfg.search, workers=2))
    with SuiteStore(path / STORE_NAME) as store:
        assert SuiteConfig.from_dict(store.meta("config")) == cfg  # the stored one stays
    with pytest.raises(SuiteError, match="budget cannot change on resume"):
        run_suite(None, run_dir=tmp_path / "runs", resume=path.name, progress=False, changes={"budget": 3})
    with pytest.raises(SuiteError, match="trials cannot change on resume"):
        run_suite(None, run_dir=tmp_path / "runs", resume=path.name, progress=False, changes={"trials": 3})


def test_seed_on_the_command_line_warns_and_is_draft(tmp_path, capsys, caplog) -> None:
    from workbench.cli import main

    with caplog.at_level(logging.WARNING, logger="workbench.suites.config"), pytest.warns(DeprecationWarning):
        rc = main(["suite", "kernelbench", "--root", str(tmp_path / "kb"), "--seed", "magic", "--device", "cpu",
                   "--run-dir", str(tmp_path / "runs"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "--draft (formerly --seed) expects lower or none, got 'magic'" in err
    assert "--seed magic is deprecated" in caplog.text and "use --draft magic" in caplog.text
