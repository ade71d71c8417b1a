"""Fixtures: a small corpus and project root in a temp dir, and hashing-embedder retrievers whose
index lives in a temp cache (never the repository's .wbcache)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from retrieval import Retriever

SMALL_CORPUS = textwrap.dedent("""\
    # test corpus

    ## Mask loads at the boundary
    <!-- id: t-mask | level: general | platform: any | arch: any | topic: masking -->
    Use mask = offs < n on every tl.load and tl.store so the tail block stays in bounds.

    ## Hopper TMA descriptors
    <!-- id: t-tma | level: architecture | platform: cuda | arch: sm_90 | topic: tma -->
    Tensor descriptors load whole tiles asynchronously on sm_90 with the tensor memory accelerator.

    ## Ampere cp.async stages
    <!-- id: t-ampere | level: architecture | platform: cuda | arch: sm_80 | topic: pipelining -->
    num_stages pipelines loads with cp.async on A100 shared memory.

    ## CDNA3 waves per EU
    <!-- id: t-amd | level: architecture | platform: rocm | arch: gfx942 | topic: occupancy -->
    waves_per_eu limits VGPR usage so more wavefronts fit per SIMD on MI300.

    ## NVIDIA warps
    <!-- id: t-cuda | level: platform | platform: cuda | arch: any | topic: num_warps -->
    num_warps of 4 or 8 on NVIDIA GPUs; each warp has 32 threads.
    """)

KERNEL = textwrap.dedent('''\
    """Vector add with a masked tail (test kernel)."""
    import triton
    import triton.language as tl

    TUNABLES = {"BLOCK": [64, 128]}
    BLOCK = 128


    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        out = tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, out, mask=mask)
    ''')


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A fake repository root: corpus dir + one case-study kernel."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "small.md").write_text(SMALL_CORPUS)
    k = tmp_path / "case_studies" / "vadd"
    k.mkdir(parents=True)
    (k / "kernel.py").write_text(KERNEL)
    return tmp_path


def make_retriever(project: Path, **kw) -> Retriever:
    return Retriever("hashing", cache_dir=project / "cache", corpus_dir=project / "corpus", root=project, **kw)


@pytest.fixture(scope="session")
def real_hashing(tmp_path_factory) -> Retriever:
    """The real corpus with the hashing embedder (no model download, fast)."""
    r = Retriever("hashing", cache_dir=tmp_path_factory.mktemp("kbcache"))
    r.build()
    return r
