"""`workbench eval` is one evaluation: its harness server keeps one spare of each role, makes none after the
job, and exits by itself once it has answered; the command line's start imports no torch."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from workbench.harness import Harness

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "vector_add" / "spec.py"


def test_a_one_shot_server_answers_then_exits_without_being_closed() -> None:
    h = Harness(device="cpu", one_shot=True)
    try:
        res = h.evaluate(SPEC, SPEC.parent / "candidate.py", trials=1)
        assert res.passed, res.error
        proc = h._worker._proc
        assert proc is not None
        assert proc.wait(timeout=30) == 0  # stdin still open: it left on its own, cleaned up
    finally:
        h.close()


def test_a_pool_server_stays_up_for_the_next_job() -> None:
    with Harness(device="cpu") as h:
        assert h.evaluate(SPEC, SPEC.parent / "candidate.py", trials=1).passed
        assert h._worker.running
        assert h.evaluate(SPEC, SPEC.parent / "candidate.py", trials=1).passed


def test_the_command_line_starts_without_torch() -> None:
    code = ("import sys, workbench.cli\n"
            "p = workbench.cli.build_parser(); p.parse_args(['eval', 'a.py', 'b.py'])\n"
            "print(sorted(m for m in ('torch', 'triton', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(out.stdout.strip().replace("'", '"')) == []
