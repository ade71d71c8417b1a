"""The spec's file stays out of the candidate's reach, and the spec's own code may still read it: a warning
raised while the spec makes inputs on the device reads the spec's source line (linecache), which once
rejected every ATen problem on the GPU. A refusal says which code read the file."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

_SPEC = '''
import warnings

def get_inputs():
    warnings.warn("a spec that warns while making inputs")  # linecache reads this file for the message
    return []
'''

# Both scripts: the spec loaded as a module, then the guards up with the spec's file private to them.
_PRELUDE = '''
import importlib.util, linecache, sys, warnings
from pathlib import Path
from workbench.harness.guards import Guard

sandbox, spec = Path(sys.argv[1]), Path(sys.argv[2])
cand = sandbox / "candidate.py"
guard = Guard(sandbox, cand, private_paths=[spec])
s = importlib.util.spec_from_file_location("wb_spec", spec)
mod = importlib.util.module_from_spec(s)
s.loader.exec_module(mod)
linecache.clearcache()
sys.addaudithook(guard.audit)
guard.active = True
'''

_SCRIPT = _PRELUDE + '''
warnings.simplefilter("always")
mod.get_inputs()                      # the spec's own code: its warning's source line is read
print("after spec:", guard.violations)
code = compile("import linecache\\nlinecache.clearcache()\\nlines = linecache.getlines(%r)\\n" % str(spec),
               str(cand), "exec")
exec(code, {})                        # the candidate asks linecache for the spec's text
print("after candidate:", guard.violations)
'''


def test_the_spec_reads_its_own_file_and_the_candidate_cannot(tmp_path: Path) -> None:
    spec = tmp_path / "spec.py"
    spec.write_text(_SPEC)
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(sandbox), str(spec)], capture_output=True,
                          text=True, timeout=120, cwd=str(Path(__file__).resolve().parents[2]))
    assert proc.returncode == 0, proc.stderr[-2000:]
    after_spec, after_cand = proc.stdout.splitlines()[-2:]
    assert after_spec == "after spec: []", proc.stdout
    assert "read_private:spec.py, read by the candidate" in after_cand, proc.stdout


_RAISING_SPEC = '''
def get_inputs():
    raise RuntimeError("the spec's inputs failed here")
'''

_TB_SCRIPT = _PRELUDE + '''
from workbench.harness.candidate_proc import _format_tb
try:
    mod.get_inputs()
except RuntimeError as exc:
    text = _format_tb(exc, guard.private)
print(repr(text))
print("violations:", guard.violations)
'''


def test_a_traceback_through_the_spec_reports_the_error_not_a_refusal(tmp_path: Path) -> None:
    """The candidate's process formats its error's traceback with the guards up: a frame of the spec there
    (its inputs are made in that process on the GPU) is named, its source never read, and the error stays
    the error (it once became `read_private` on all 22 ATen problems, hiding what failed)."""
    spec = tmp_path / "spec.py"
    spec.write_text(_RAISING_SPEC)
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    driver = tmp_path / "driver.py"
    driver.write_text(_TB_SCRIPT)
    proc = subprocess.run([sys.executable, str(driver), str(sandbox), str(spec)], capture_output=True,
                          text=True, timeout=120, cwd=str(Path(__file__).resolve().parents[2]),
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown, violations = proc.stdout.splitlines()[-2:]
    assert violations == "violations: []", proc.stdout
    text = ast.literal_eval(shown)
    assert 'spec.py", line 3, in get_inputs' in text and "the spec's inputs failed here" in text, text
    assert "raise RuntimeError" not in text, text  # the spec's source line stays unread
    assert "mod.get_inputs()" in text, text  # a line of a file anyone may read is shown
