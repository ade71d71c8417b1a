"""benchmarks/common.py, the helper every benchmark script builds its command line, provenance and output
on: `--out` as a folder or one file (a relative default under the repository), `--commit`, the atomic JSON
write; and the scripts that are on it stay on it."""
from __future__ import annotations

import ast
import json
import logging
from pathlib import Path

import pytest

from benchmarks import common

# Scripts not on the helper, each with its reason: a new benchmark script is on it or named here.
NOT_ON_COMMON = {
    "slim_ray_wheel.py": "a packaging tool (two positional paths), it measures nothing and records nothing",
    "readme_tables.py": "regenerates README blocks from recorded CSVs in place: no options, no new numbers",
}


def test_out_is_a_folder_or_one_file_with_a_default_under_the_repository(tmp_path):
    ap = common.parser("A benchmark.\n\nMore text.", out_default="results/x.json", out_file=True)
    assert ap.description == "A benchmark."
    args = ap.parse_args([])
    assert args.out == common.REPO / "results" / "x.json" and args.commit is None
    assert ap.parse_args(["--out", str(tmp_path / "y.json")]).out == tmp_path / "y.json"
    assert "the file to write" in ap.format_help()
    folder = common.parser(None)
    with pytest.raises(SystemExit):                 # no default: --out is required
        folder.parse_args([])
    assert folder.parse_args(["--out", "o", "--commit", "abc"]).commit == "abc"
    assert common.parser(None, out_required=False).parse_args([]).out is None


def test_write_json_makes_the_folder_and_replaces_the_file_whole(tmp_path):
    path = tmp_path / "a" / "b.json"
    common.write_json(path, {"x": Path("p"), "n": 1})
    common.write_json(path, {"n": 2}, indent=2)
    assert json.loads(path.read_text()) == {"n": 2} and path.read_text().endswith("\n")
    assert sorted(p.name for p in path.parent.iterdir()) == ["b.json"]     # no temporary file left


def test_a_run_records_its_provenance_and_logs_to_its_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("WB_COMMIT", raising=False)
    args = common.parser(None).parse_args(["--out", str(tmp_path / "run"), "--commit", "0123abc"])
    run = common.start(args)
    logging.getLogger("benchmarks.test").info("hello")
    prov = json.loads(run.write_json("r.json", {"v": 1}).read_text())["provenance"]
    assert "0123abc" in (prov.get("commit_given", "") + prov["commit"])
    assert {"date", "torch", "triton"} <= set(prov)
    assert "hello" in (tmp_path / "run" / "log.txt").read_text()
    common.setup_logging()      # back to the console only (no handler left on the temporary folder)


def _calls_common_parser(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "parser"
               and isinstance(n.func.value, ast.Name) and n.func.value.id == "common" for n in ast.walk(tree))


def test_every_benchmark_script_builds_its_command_line_on_the_helper():
    scripts = [p for p in sorted((common.REPO / "benchmarks").rglob("*.py"))
               if p.name != "common.py"]
    off = []
    for p in scripts:
        tree = ast.parse(p.read_text())
        is_main = any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body) or \
            "__main__" in p.read_text()
        if is_main and not _calls_common_parser(tree) and p.name not in NOT_ON_COMMON:
            off.append(str(p.relative_to(common.REPO)))
    assert scripts and not off, "benchmark scripts not on benchmarks/common.py: " + ", ".join(off)
    names = {p.name for p in scripts}
    assert all(n in names for n in NOT_ON_COMMON), "a script named in NOT_ON_COMMON is gone"
