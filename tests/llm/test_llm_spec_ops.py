"""The spec's aten ops for the prompt's code samples (workbench.llm.spec_ops): from the lowering's capture,
cached per file content."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_spec_ops_are_cached_per_file_content(tmp_path, monkeypatch) -> None:
    from workbench.llm import spec_ops as so

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    spec = tmp_path / "spec.py"
    spec.write_text((ROOT / "examples/vector_add/spec.py").read_text())
    calls = []
    real = so._from_export
    monkeypatch.setattr(so, "_from_export", lambda p, ov: calls.append(p) or real(p, ov))
    first = so.spec_ops(spec)
    assert first == ("aten.add.Tensor", "aten.mul.Tensor") and len(calls) == 1
    os.utime(spec, ns=(1, 1))  # touched, unchanged: the cached ops
    assert so.spec_ops(spec) == first and len(calls) == 1
    spec.write_text(spec.read_text().replace("a + b * self.scale", "torch.relu(a) + b * self.scale"))
    assert "aten.relu.default" in so.spec_ops(spec) and len(calls) == 2  # edited: captured again
    # another process (an empty memory cache) reads the disk cache: no capture
    monkeypatch.setattr(so, "_cache", {})
    assert "aten.relu.default" in so.spec_ops(spec) and len(calls) == 2
    assert len(list((tmp_path / "cache/spec_ops").glob("*.json"))) == 2
