"""The import graph of the library packages, read from the source with `ast` (nothing is imported): no
cycles, and the dependencies run one way (DESIGN.md: retrieval and profiling are libraries that know
nothing of their callers, the workbench included; `platforms` is the ground floor and imports none of the
others; the case studies' shared code knows no single case study; the lab book in experiments/ is
imported by nobody).

Every import counts, a lazy one inside a function too: it is still a dependency the reader has to follow,
and a cycle through it is one refactor away from an ImportError.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("platforms", "workbench", "retrieval", "profiling", "case_studies")
IMPORTERS = (*PACKAGES, "benchmarks", "tools", "tests")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources(tops: tuple[str, ...]) -> dict[str, Path]:
    out = {}
    for top in tops:
        for p in sorted((ROOT / top).rglob("*.py")):
            if "exploits" in p.parts:      # deliberately broken candidates (one does not parse)
                continue
            out[_module_name(p)] = p
    return out


_UNPARSED: dict[str, str] = {}


def _tree(path: Path) -> ast.Module:
    """The file's AST; a file that does not parse counts as importing nothing here and is reported by
    `test_every_library_file_parses` (one broken file must not hide the graph of all the others)."""
    try:
        return ast.parse(path.read_text(), str(path))
    except SyntaxError as e:
        _UNPARSED[str(path.relative_to(ROOT))] = f"line {e.lineno}: {e.msg}"
        return ast.Module(body=[], type_ignores=[])


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that `name` imports (absolute and relative, at any depth of the file)."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def add(*candidates: str) -> None:
        # the first candidate that is a module of this tree (`from a.b import c`: a.b.c if it is a module,
        # else a.b); never a parent further up: a missing module is not an import of its package
        for cand in candidates:
            if cand in known:
                found.add(cand)
                return

    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                add(f"{mod}.{a.name}", mod)     # `from pkg import submodule` imports the submodule
    found.discard(name)
    return found


@functools.lru_cache(maxsize=None)   # parsed once per test session: the tests only read it
def _graph(tops: tuple[str, ...]) -> dict[str, set[str]]:
    src = _sources(tops)
    known = set(src)
    return {name: _imports(name, path, known) for name, path in src.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif w not in graph:
                continue
            elif w not in index:
                index[w] = low[w] = counter
                counter += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(graph[w]))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def test_graph_reader_sees_lazy_relative_and_submodule_imports(tmp_path):
    g = _graph(("case_studies",))
    assert "case_studies.common.results" in g["case_studies.common.runner"] or \
        "case_studies.common.timing" in g["case_studies.common.runner"]
    assert "case_studies.conv1d.tma" in g["case_studies.conv1d.kernel"]        # a lazy import in a function
    assert "case_studies.mbdt.kernel" in g["case_studies.mbdt.profile"]        # `from pkg import module`
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_in_the_library_packages():
    cycles = _cycles(_graph(PACKAGES))
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_dependencies_run_one_way():
    graph = _graph(IMPORTERS)
    wrong = []
    for mod, deps in graph.items():
        for dep in deps:
            top, dtop = mod.split(".")[0], dep.split(".")[0]
            if top in ("profiling", "retrieval") and dtop in ("workbench", "case_studies", "benchmarks", "tools"):
                wrong.append(f"{mod} -> {dep} (a library importing its caller)")
            if top == "platforms" and dtop != "platforms":
                wrong.append(f"{mod} -> {dep} (the ground floor importing a package above it)")
            if mod.startswith("case_studies.common") and dtop == "case_studies" and \
                    not dep.startswith("case_studies.common") and dep != "case_studies":
                wrong.append(f"{mod} -> {dep} (the shared case-study code importing one case study)")
            if top == "case_studies" and dtop == "benchmarks":
                wrong.append(f"{mod} -> {dep} (the library importing a benchmark script)")
    assert not wrong, "\n".join(sorted(wrong))


def test_nothing_imports_the_lab_book():
    src = _sources(IMPORTERS)
    hits = []
    for name, path in src.items():
        for node in ast.walk(_tree(path)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            hits += [f"{name} imports {m}" for m in mods if m == "experiments" or m.startswith("experiments.")]
    assert not hits, "\n".join(hits)


def test_every_library_file_parses():
    _graph(IMPORTERS)
    assert not _UNPARSED, "\n".join(f"{p}: {why}" for p, why in sorted(_UNPARSED.items()))


CASE_FACES = {"conv1d": "conv1d", "optimized_fm": "optimized_fm", "pffn": "pffn", "mapid": "MapIdDispatch",
              "mbdt": "MBDTDispatch", "event_truncate": "BatchEventTruncateDispatch"}


@pytest.mark.parametrize("case", sorted(CASE_FACES))
def test_each_case_study_package_exports_its_public_api(case):
    import importlib

    pkg = importlib.import_module(f"case_studies.{case}")
    disp = CASE_FACES[case]
    assert sorted(pkg.__all__) == sorted(["BENCHMARK", "ModelNew", disp])
    assert pkg.ModelNew is importlib.import_module(f"case_studies.{case}.kernel").ModelNew
    assert getattr(pkg, disp) is getattr(importlib.import_module(f"case_studies.{case}.dispatch"), disp)
    assert pkg.BENCHMARK["name"] == case
    with pytest.raises(AttributeError):
        pkg.not_a_name  # noqa: B018


def test_one_public_conv1d_and_a_spec_import_pulls_in_no_triton():
    import subprocess
    import sys

    code = ("import sys, case_studies.conv1d.spec, case_studies.mapid.spec; "
            "assert 'triton' not in sys.modules, 'triton imported by a spec'; "
            "import case_studies.conv1d as c, case_studies.conv1d.kernel as k, case_studies.conv1d.dispatch as d; "
            "assert c.conv1d is d.conv1d and k.triton_conv1d is not d.conv1d")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1"})
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.parametrize("case", sorted(CASE_FACES))
def test_case_study_kernels_import_triton_and_torch_only_never_the_workbench(case):
    """DESIGN.md: a case-study kernel (the candidate file the harness and the search load) imports Triton,
    PyTorch and its own package's helpers; the workbench is the caller, never a dependency of it."""
    graph = _graph(PACKAGES)
    seen, todo = set(), [f"case_studies.{case}.kernel"]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += sorted(graph.get(m, ()))
    assert not sorted(m for m in seen if m.startswith(("workbench", "retrieval", "profiling"))), sorted(seen)
