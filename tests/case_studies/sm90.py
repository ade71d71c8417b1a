"""Compile case-study kernels for sm_90 on a CPU-only machine (shared by the preprocessing tests)."""
from __future__ import annotations

import pytest

_SM90_SCRIPT = """
import sys
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import triton
{imports}
for fn, sig, consts in {cases}:
    triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts), target=GPUTarget("cuda", 90, 32))
print("compiled", len({cases}))
"""


def compile_for_sm90(imports: str, cases: str) -> None:
    """Compile the kernels for sm_90 in a process without TRITON_INTERPRET: the interpreter accepts code
    the compiler rejects (a reassigned constexpr cost the first H200 run of this case study)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", _SM90_SCRIPT.format(imports=imports, cases=cases)],
                         capture_output=True, text=True, env=env, timeout=300)
    if "ptxas" in out.stderr and "not found" in out.stderr.lower():
        pytest.skip("no ptxas in this Triton install")
    assert out.returncode == 0, out.stderr[-3000:]
