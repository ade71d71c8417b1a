"""One configuration type: `workbench optimize`'s flags are SearchConfig's fields one to one, and a
resumed run takes exactly the fields the caller gave (`dataclasses.replace` on the stored config)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

import workbench
from tests.search.fakes import FakeEvaluator
from workbench.memory import Memory
from workbench.options import flag_name, given
from workbench.search import SearchConfig, SearchError
from workbench.search.cli import register

FIX = Path(__file__).parent / "fixtures"
SPEC, SEED = FIX / "add_spec.py", FIX / "add_candidate.py"
NOT_CONFIG = {"help", "spec", "resume", "no_progress"}  # the positional SPEC, --resume, --no-progress


def _parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser()
    register(root.add_subparsers(dest="cmd"))
    return root


def _optimize_parser() -> argparse.ArgumentParser:
    root = _parser()
    (sub,) = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices["optimize"]


def test_flags_are_the_fields_one_to_one() -> None:
    p = _optimize_parser()
    dests = [a.dest for a in p._actions if a.dest not in NOT_CONFIG]
    fields = [f.name for f in dataclasses.fields(SearchConfig)]
    assert sorted(dests) == sorted(set(fields) - {"spec_path"})  # spec_path is the positional SPEC
    assert len(dests) == len(set(dests))
    flags = {a.dest: a.option_strings for a in p._actions}
    for f in dataclasses.fields(SearchConfig):
        if f.name != "spec_path":
            assert flags[f.name] == [flag_name(f)], f.name
            assert f.metadata["option"]["help"], f.name
    # the names users know stay
    assert flags["seeds"] == ["--seed"] and flags["rng_seed"] == ["--rng-seed"]
    assert flags["retrieval"] == ["--no-retrieval"] and flags["overrides"] == ["--set"]
    assert flags["fitness_target"] == ["--target"] and flags["max_wall_s"] == ["--wall"]


def test_flags_build_the_config_and_only_typed_ones_are_given() -> None:
    p = _parser()
    args = p.parse_args(["optimize", "s.py", "--seed", "a.py", "--seed", "b.py", "--budget", "7", "--no-retrieval",
                         "--set", "N=64", "--shapes", "small,large", "--llm-step", "best_of=2", "--wall", "1.5",
                         "--policy-option", "c=1.4"])
    got = given(args, SearchConfig)
    assert got == {"seeds": ["a.py", "b.py"], "budget": 7, "retrieval": False, "overrides": {"N": 64},
                   "shapes": ["small", "large"], "llm_step": {"best_of": 2}, "max_wall_s": 1.5,
                   "policy_options": {"c": 1.4}}
    cfg = SearchConfig(spec_path=args.spec, **got)
    assert cfg == dataclasses.replace(SearchConfig(spec_path="s.py"), **got)
    assert given(p.parse_args(["optimize", "s.py"]), SearchConfig) == {}  # the dataclass keeps the defaults


def test_optimize_takes_a_config_and_keyword_overrides(tmp_path: Path) -> None:
    cfg = SearchConfig(spec_path=str(SPEC), seeds=[str(SEED)], budget=2, device="cpu", run_dir=str(tmp_path))
    run = workbench.optimize(config=cfg, evaluator=FakeEvaluator(fitness=lambda c: 1.0), progress=False)
    assert run.config == cfg
    run2 = workbench.optimize(SPEC, cfg, budget=3, evaluator=FakeEvaluator(fitness=lambda c: 1.0), progress=False)
    assert run2.config == dataclasses.replace(cfg, budget=3)
    with pytest.raises(SearchError, match=r"unknown search option\(s\) \['budgte'\]"):
        workbench.optimize(SPEC, budgte=3)


def test_resume_applies_exactly_the_fields_given(tmp_path: Path) -> None:
    run = workbench.optimize(SPEC, seeds=[SEED], budget=2, stall=5, workers=1, timeout_s=60.0, device="cpu",
                             trials=1, run_dir=tmp_path, evaluator=FakeEvaluator(fitness=lambda c: 1.0),
                             progress=False)
    with Memory(tmp_path / "memory.sqlite") as mem:
        stored = SearchConfig.from_dict(mem.get_run(run.run_id).config)
    again = workbench.optimize(resume=run.run_id, budget=4, run_dir=tmp_path,
                               evaluator=FakeEvaluator(fitness=lambda c: 1.0), progress=False)
    # budget changed; stall, timeout_s, trials and the rest as stored, not reset to the defaults
    assert again.config == dataclasses.replace(stored, budget=4)
    assert again.config.stall == 5 and again.config.timeout_s == 60.0 and again.config.trials == 1
    with pytest.raises(SearchError, match="policy cannot change on resume"):
        workbench.optimize(resume=run.run_id, policy="mcts", run_dir=tmp_path, progress=False)
    with pytest.raises(SearchError, match="resume takes the changes as keywords"):
        workbench.optimize(resume=run.run_id, config=stored, progress=False)


def test_resume_from_the_command_line_passes_only_typed_flags(tmp_path: Path, monkeypatch) -> None:
    seen: dict = {}

    def fake_optimize(spec=None, config=None, **kw):
        seen.update(kw, spec=spec, config=config)
        raise SearchError("stop here")

    monkeypatch.setattr("workbench.search.optimize", fake_optimize)
    from workbench.cli import main

    assert main(["optimize", str(SPEC), "--resume", "r1", "--budget", "9", "--run-dir", str(tmp_path),
                 "--no-progress"]) == 2
    assert seen == {"resume": "r1", "progress": False, "budget": 9, "run_dir": str(tmp_path),
                    "spec": str(SPEC), "config": None}


def test_the_llm_step_settings_are_one_typed_record_with_shortcuts() -> None:
    from workbench.llm.settings import LLMSettings

    cfg = SearchConfig(spec_path="s.py")
    assert cfg.llm_step == LLMSettings() and cfg.llm_temperature is None and cfg.llm_max_new_tokens is None
    # the shortcuts fold into the record (and read back as None); a key of llm_step itself wins
    short = SearchConfig(spec_path="s.py", llm_temperature=0.3, llm_max_new_tokens=99, llm_step={"best_of": 2})
    assert short.llm_step == LLMSettings(temperatures=[0.3], max_new_tokens=99, best_of=2)
    assert short.llm_temperature is None and short.llm_max_new_tokens is None
    both = SearchConfig(spec_path="s.py", llm_temperature=0.3, llm_step={"temperatures": [0.1, 0.9]})
    assert both.llm_step.temperatures == [0.1, 0.9]
    # a resumed or replaced config applies a shortcut to the stored record
    assert dataclasses.replace(short, llm_temperature=0.5).llm_step.temperatures == [0.5]
    # saved as plain JSON, reloaded typed; a config saved before the record (flat fields) loads the same
    assert SearchConfig.from_dict(short.to_dict()) == short
    assert isinstance(short.to_dict()["llm_step"], dict)
    old = SearchConfig.from_dict({"spec_path": "s.py", "llm_temperature": 0.7, "llm_max_new_tokens": 2048,
                                  "llm_step": {}})  # fmt: skip
    assert old.llm_step == LLMSettings()
    with pytest.raises(SearchError, match=r"unknown llm_step option\(s\) \['beam'\]"):
        SearchConfig(spec_path="s.py", llm_step={"beam": 3})
    with pytest.raises(SearchError, match="temperatures must be numbers"):
        SearchConfig(spec_path="s.py", llm_temperature=5.0)


def test_the_help_lists_the_llm_defaults_from_the_settings_record() -> None:
    from workbench.llm.settings import LLMSettings

    text = _optimize_parser().format_help()
    assert f"(default {LLMSettings().temperatures})" in " ".join(text.split())
    assert f"(default {LLMSettings().max_new_tokens};" in " ".join(text.split())
    assert "--llm-step NAME=VALUE" in text and "LLMSettings(" not in text
