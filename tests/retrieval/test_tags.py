from __future__ import annotations

import pytest

from retrieval.tags import TagError, TagFilter, normalize_arch, normalize_platform


@pytest.mark.parametrize(
    "raw,want",
    [
        ("sm90", "sm_90"),
        ("sm_90a", "sm_90"),
        ("SM_80", "sm_80"),
        ("9.0", "sm_90"),
        ("gfx942", "gfx942"),
        ("cpu", "cpu-interpreter"),
        (None, "any"),
    ],
)
def test_normalize_arch(raw, want):
    assert normalize_arch(raw) == want


def test_platform_aliases_and_hip_reporting_as_cuda():
    assert normalize_platform("cpu") == "cpu-interpreter"
    assert normalize_platform("CUDA") == "cuda"
    assert normalize_platform("cuda", "gfx942") == "rocm"  # PyTorch's HIP build says "cuda"
    with pytest.raises(TagError, match="unknown platform 'tpu'"):
        normalize_platform("tpu")
    with pytest.raises(TagError, match="malformed architecture"):
        normalize_arch("hopper!")


def test_filter_semantics():
    f = TagFilter.make("cuda", "sm_90")
    assert f.accepts("any", ("any",)) and f.accepts("cuda", ("sm_90",)) and f.accepts("cuda", ("sm_80", "sm_90"))
    assert not f.accepts("cuda", ("sm_80",)) and not f.accepts("rocm", ("gfx942",))
    assert not f.accepts("cpu-interpreter", ("any",))
    assert TagFilter.make(None, None).accepts("rocm", ("gfx942",))
    assert TagFilter.make(None, "gfx942").platform == "rocm"
    with pytest.raises(TagError, match="belongs to platform 'cuda'"):
        TagFilter.make("rocm", "sm_90")
