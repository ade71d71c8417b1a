from __future__ import annotations

import pytest

from retrieval import code_search


def test_exact_regex_and_filename(project):
    roots = ("case_studies", "corpus")
    exact = code_search("tl.arange(0, BLOCK)", root=project, roots=roots, context=1)
    assert [(m.path, m.line) for m in exact] == [("case_studies/vadd/kernel.py", 11)]
    assert ">" in exact[0].snippet and "mask = offs < n" in exact[0].snippet
    rx = code_search(r"id: t-(tma|amd)\b", "regex", root=project, roots=roots)
    assert [m.path for m in rx] == ["corpus/small.md", "corpus/small.md"]
    fn = code_search("case_studies/*/kernel.py", "filename", root=project, roots=roots)
    assert [m.path for m in fn] == ["case_studies/vadd/kernel.py"] and fn[0].line == 0
    assert code_search("WAVES_PER_EU", root=project, roots=roots, ignore_case=True)
    assert not code_search("WAVES_PER_EU", root=project, roots=roots)


def test_bad_queries(project):
    with pytest.raises(ValueError, match="bad regular expression"):
        code_search("(unclosed", "regex", root=project)
    with pytest.raises(ValueError, match="empty"):
        code_search("", root=project)
    with pytest.raises(ValueError, match="unknown code-search mode"):
        code_search("x", "fuzzy", root=project)


def test_searches_the_real_repository():
    hits = code_search("err-out-of-resources", roots=("retrieval/corpus",))
    assert hits and hits[0].path == "retrieval/corpus/errors.md"
