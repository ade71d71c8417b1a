"""The corpus parses, carries the required topics, and the labelled set refers to real sections."""

from __future__ import annotations

import pytest

from retrieval.chunking import chunk_all
from retrieval.corpus import CorpusError, load_all, load_code_sections, load_markdown_sections, parse_markdown
from retrieval.evaluation import load_labelled
from retrieval.tags import LEVELS, PLATFORMS

# Sections the issue requires (correctness rules, cross-platform guidance, architectures, errors).
REQUIRED = [
    "mask-boundary",
    "int32-offset-overflow",
    "dtype-accumulation",
    "dot-shape-dtype",
    "atomics",
    "interp-vs-compiler",
    "coalescing",
    "tiling-block-sizes",
    "epilogue-fusion",
    "reductions",
    "jagged-data",
    "bucketize-binary-search",
    "implicit-gemm-conv",
    "autotune-spaces",
    "hopper-tma",
    "hopper-wgmma",
    "hopper-warp-specialization",
    "hopper-memory",
    "ampere-pipelining",
    "rocm-wavefront-64",
    "cdna3-lds",
    "cdna3-matrix-cores",
    "cdna3-waves-per-eu",
    "interp-setup",
    "err-arange-pow2",
    "err-out-of-resources",
    "err-illegal-memory-access",
]


def test_real_corpus_parses_with_valid_tags():
    secs = load_markdown_sections()
    ids = [s.id for s in secs]
    assert len(ids) == len(set(ids))
    assert len(secs) >= 60
    for s in secs:
        assert s.level in LEVELS and s.level != "code_sample"
        assert s.platform in PLATFORMS
        assert s.topics and s.text.strip()
        if s.level == "architecture":
            assert "any" not in s.archs, s.id  # an architecture section names its architectures
    assert not set(REQUIRED) - set(ids)
    by_level = {lv: sum(s.level == lv for s in secs) for lv in LEVELS}
    assert by_level["general"] and by_level["platform"] and by_level["architecture"]


def test_labelled_set_refers_to_existing_sections():
    ids = {s.id for s in load_all()}
    qs = load_labelled()
    assert len(qs) >= 40
    for q in qs:
        assert q.diagnosis.strip() and q.expected
        assert set(q.expected) <= ids, q.id


def test_bad_markdown_is_rejected_with_location():
    with pytest.raises(CorpusError, match="x.md:1"):
        parse_markdown("## Title\nno tag line\ntext\n", "x.md")
    with pytest.raises(CorpusError, match="level"):
        parse_markdown("## T\n<!-- id: a | level: expert | platform: any | arch: any | topic: t -->\nx\n", "x.md")
    with pytest.raises(CorpusError, match="no text"):
        parse_markdown("## T\n<!-- id: a | level: general | platform: any | arch: any | topic: t -->\n", "x.md")


def test_duplicate_ids_are_rejected(project):
    (project / "corpus" / "dup.md").write_text(
        "## Again\n<!-- id: t-mask | level: general | platform: any | arch: any | topic: x -->\ntext\n"
    )
    with pytest.raises(CorpusError, match="duplicate section id 't-mask'"):
        load_all(project / "corpus", project)


def test_code_samples_are_indexed_by_what_they_demonstrate(project):
    secs = load_code_sections(project)
    assert [s.id for s in secs] == ["code:case_studies/vadd/kernel.py"]
    s = secs[0]
    assert s.level == "code_sample" and "masking" in s.topics and "autotune" in s.topics
    assert s.title.startswith("case_studies/vadd/kernel.py: Vector add")
    chunks = chunk_all(secs)
    names = [c.embed_text for c in chunks]
    assert len(chunks) == 2  # module constants (TUNABLES) and the jit function
    assert any("add_kernel" in n for n in names)
    assert all(c.text.startswith('"""Vector add') for c in chunks)


def test_unparseable_kernel_is_still_indexed_whole(project):
    (project / "case_studies" / "vadd" / "kernel.py").write_text("import triton\ndef broken(:\n")
    s = load_code_sections(project)[0]
    assert chunk_all([s])[0].text.rstrip().endswith("def broken(:")
