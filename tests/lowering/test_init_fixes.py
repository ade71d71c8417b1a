"""Model.__init__ copied into ModelNew: class attributes of helper classes and of Model survive, and numpy
scalars of literals are folded (a candidate may not import numpy). Both failed before (AttributeError
'Bottleneck' has no attribute 'expansion'; "needs module 'numpy'")."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.lowering.helpers import check_candidate
from workbench.lowering import lower_spec
from workbench.lowering.init_source import InitError, build_init

SPECS = Path(__file__).parent / "specs"


@pytest.mark.parametrize("stem", ["init_class_attr", "init_numpy_scalar"])
def test_lowered_init_matches(stem: str, tmp_path: Path) -> None:
    res = lower_spec(SPECS / f"{stem}.py")
    assert res.source is not None, res.diagnosis
    assert "import numpy" not in res.source and "np." not in res.source
    check_candidate(SPECS / f"{stem}.py", res.source, tmp_path)


def test_class_attribute_is_kept() -> None:
    code = build_init((SPECS / "init_class_attr.py").read_text())
    bottleneck = next(p for p in code.preamble if p.startswith("class Bottleneck"))
    assert "expansion = 2" in bottleneck
    assert any(m.strip() == "width = 3" for m in code.methods)


def test_numpy_beyond_scalars_is_still_refused() -> None:
    src = ("import numpy as np\nimport torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self, n):\n"
           "        super().__init__()\n        self.w = nn.Parameter(torch.tensor(np.linspace(0, 1, n)))\n")
    with pytest.raises(InitError, match="numpy"):
        build_init(src)
