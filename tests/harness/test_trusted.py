"""The second red team's classes, one test each: a verdict only from trusted observations, a policy that
allows rather than forbids, files read without being led anywhere, and every job starting from nothing.

The candidates in trusted/ run with the static policy and the in-process guards off (`WB_GUARDS=off`): what
they test is the trusted side itself, the schema, the reads, the OS isolation.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from workbench.harness import Harness, messages
from workbench.harness.policy import allowed_imports_of, check_source
from workbench.result import Status

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
SPEC = ROOT / "examples" / "vector_add" / "spec.py"
TRUSTED = HERE / "trusted"
ROOT_ONLY = os.geteuid() == 0


# -- the schema -------------------------------------------------------------------------------------------
def _line(**msg) -> bytes:
    return json.dumps({**msg, "n": "abc"}).encode()


def _finished(**over) -> dict:
    base = {"finished": True, "status": "passed", "violations": [], "error": "", "timings_s": {"import": 0.1},
            "launches": 3, "aten_ops": ["empty_like"]}
    return {**base, **over}


def test_schema_accepts_what_the_candidate_side_builds() -> None:
    built = messages.report("finished", status="incorrect", violations=["x" * 500], error="e" * 20000,
                            timings_s={"import": 0.5}, launches=2, aten_ops=["mm"])
    got = messages.parse_candidate(_line(**built), "abc")
    assert got["status"] == "incorrect" and len(got["error"]) == messages.MAX_ERROR
    assert messages.parse_candidate(_line(done=3), "abc", expect="done")["done"] == 3


@pytest.mark.parametrize("bad", [
    _finished(status="bad_spec"), _finished(status="infra_error"), _finished(launches="many"),
    _finished(launches=True), _finished(launches=-1), _finished(timings_s={"import": "0.1"}),
    _finished(violations="monkeypatch"), _finished(error=["x"]), {**_finished(), "timing": {"median_us": 0.001}},
    {"done": "3"}, {"done": 1, "staged": 1}, {"verdict": {"correct": True}},
], ids=["bad_spec", "infra_error", "str_launches", "bool_launches", "neg_launches", "str_time", "str_violations",
        "list_error", "extra_key", "str_round", "two_kinds", "unknown_kind"])
def test_schema_refuses_everything_else(bad: dict) -> None:
    with pytest.raises(messages.SchemaError):
        messages.parse_candidate(_line(**bad), "abc")


def test_schema_refuses_a_wrong_nonce_an_unexpected_kind_and_a_huge_line() -> None:
    with pytest.raises(messages.SchemaError):
        messages.parse_candidate(json.dumps({"done": 1, "n": "other"}).encode(), "abc")
    with pytest.raises(messages.SchemaError):
        messages.parse_candidate(_line(saved=1), "abc", expect="done")
    with pytest.raises(messages.SchemaError):
        messages.parse_candidate(b" " * (messages.MAX_LINE + 1), "abc")


def test_a_report_can_fail_but_never_pass() -> None:
    assert messages.verdict_status("passed", ["thread"]) == "rejected"
    assert messages.verdict_status("incorrect", []) == "incorrect"
    assert "bad_spec" not in messages.STATUSES and "infra_error" not in messages.STATUSES


# -- the policy allows; everything else is refused ---------------------------------------------------------
HONEST = '''
import math
import os
from typing import Optional
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra import libdevice

BLOCK = 1024
_INTERP = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, libdevice.exp(x) + tl.math.log(x) + math.pi, mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, d: int, eps: Optional[float] = None):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, d) * 0.02)
        self._block = BLOCK
        self.name = "{} {}".format("k", d)

    def forward(self, x):
        y = torch.empty_like(x).view(-1)
        n = x.numel()
        k[(triton.cdiv(n, self._block),)](x, y, n, BLOCK=self._block)
        return y.view(x.shape).to(torch.float32)
'''


def test_an_honest_candidate_passes_the_allow_list() -> None:
    assert check_source(HONEST) == []


ROUTES = {
    "operator": ("import operator\nf = operator.attrgetter('x')", "forbidden_introspection:import operator"),
    "format_fields": ("s = '{0.__class__}'.format(1)", "forbidden_introspection:.format"),
    "format_method_value": ("s = 'x'\nf = s.format", "forbidden_introspection:.format"),
    "str_format": ("s = str.format('{0.x}', 1)", "forbidden_introspection:.format"),
    "dataclasses": ("import dataclasses", "dynamic_code:import dataclasses"),
    "typing_hints": ("import typing\nh = typing.get_type_hints", "forbidden_introspection:typing.get_type_hints"),
    "logging": ("import logging", "forbidden_introspection:import logging"),
    "module_alias": ("import torch\nt = torch", "forbidden_introspection:module torch used as a value"),
    "module_argument": ("import torch\nprint(torch)", "forbidden_introspection:module torch used as a value"),
    "module_in_list": ("import torch\nt = [torch][0]", "forbidden_introspection:module torch used as a value"),
    "private_attr": ("import torch\nc = torch._C", "forbidden_introspection"),
    "private_on_object": ("def f(x):\n    return x._base", "forbidden_introspection:._base"),
    "dunder": ("def f(x):\n    return x.__class__", "frame_introspection:.__class__"),
    "getattr_computed": ("def f(x, n):\n    return getattr(x, n)", "frame_introspection:getattr"),
    "getattr_private": ("def f(x):\n    return getattr(x, '_base')", "frame_introspection:getattr"),
    "getattr_value": ("g = getattr", "frame_introspection:getattr as a value"),
    "getattr_torch_compute": ("import torch\ndef f(x):\n    return getattr(torch, 'mm')(x, x)",
                              "forbidden_torch_op:mm"),
    "type": ("def f(x):\n    return type(x)", "forbidden_introspection:type"),
    "generator_frame": ("def f(x):\n    return (i for i in x).gi_frame", "frame_introspection:.gi_frame"),
    "tensor_class_compute": ("import torch\ndef f(x):\n    return torch.Tensor.sum(x)", "forbidden_torch_op"),
    "torch_in_kernel": ("import torch\nimport triton\n@triton.jit\ndef k(x):\n    torch.add(x, x)",
                        "forbidden_torch_op:torch in a Triton kernel"),
    "heuristics_compute": ("import torch\nimport triton\nh = triton.heuristics({'B': lambda a: torch.add(a['x'], 1)})",
                           "forbidden_torch_op:add"),
    "autotune_hook": ("import torch\nimport triton\ndef prune(c, a):\n    return torch.mm(a['x'], a['x'])\n"
                      "t = triton.autotune(configs=[], key=[], prune_configs_by={'early_config_prune': prune})",
                      "forbidden_torch_op:mm"),
    "triton_runtime": ("import triton\nd = triton.runtime.driver", "monkeypatch:triton.runtime"),
    "tl_internals": ("import triton.language as tl\ns = tl.core", "forbidden_introspection:triton.language.core"),
    "os_call": ("import os\nos.system('id')", "os:os.system"),
    "computed_env": ("import os\nk = 'A'\nv = os.environ.get(k)", "os:os.environ.get(<computed name>)"),
    "rebind_import": ("import torch\nimport math\nmath = None\ntorch.add = 1", "monkeypatch:torch.add"),
    "class_decorator": ("def d(c):\n    return c\n@d\nclass A:\n    pass", "dynamic_code:decorator on class A"),
    "generator": ("def f():\n    yield 1", "frame_introspection:generator (yield)"),
}


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_each_route_of_the_second_red_team_is_outside_the_allow_list(name: str) -> None:
    src, rule = ROUTES[name]
    found = check_source(src + "\n")
    assert any(v.startswith(rule) for v in found), found


def test_a_kernel_must_be_defined_or_come_from_a_trusted_package() -> None:
    assert any(v.startswith("no_triton_kernel") for v in check_source("import torch\nx = 1\n"))
    assert check_source("from case_studies.conv1d.kernel import ModelNew\n", ["case_studies"]) == []


def test_allowed_imports_are_read_from_the_spec_text_without_running_it(tmp_path: Path) -> None:
    spec = tmp_path / "s.py"
    spec.write_text("raise SystemExit('never run')\nALLOWED_IMPORTS = ['case_studies', 'numpy']\n")
    assert allowed_imports_of(str(spec)) == ["case_studies", "numpy"]
    spec.write_text("ALLOWED_IMPORTS = list(x for x in 'ab')\n")
    assert allowed_imports_of(str(spec)) is None  # not a literal: the server decides
    assert allowed_imports_of(str(SPEC)) == []


def test_a_rejection_starts_no_server() -> None:
    h = Harness(device="cpu")
    res = h.evaluate(SPEC, ROOT / "tests" / "harness" / "exploits" / "ctypes_use.py")
    assert res.status == Status.REJECTED and res.error.startswith("static policy:")
    assert not h.started, "the policy ran after a server process started"
    assert res.fitness == 0.0 and any(v.startswith("ctypes") for v in res.violations)


# -- the verdict, the files, the job's fresh start (policy off: the second line) ---------------------------
@pytest.fixture
def harness_env(monkeypatch: pytest.MonkeyPatch):
    def make(**env: str) -> Harness:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        return Harness(device="cpu")
    return make


def test_a_forged_bad_spec_report_is_the_candidates_own_failure(harness_env) -> None:
    with harness_env(WB_GUARDS="off", WB_FORGE_STATUS="bad_spec") as h:
        res = h.evaluate(SPEC, TRUSTED / "forges_bad_spec.py", trials=1, policy=False)
    assert res.status == Status.REJECTED and "forged_report" in res.violations, (res.status, res.error)
    assert res.fitness == 0.0


def test_a_string_in_a_numeric_field_never_crashes_the_client(harness_env) -> None:
    with harness_env(WB_GUARDS="off", WB_FORGE_STATUS="passed", WB_FORGE_LAUNCHES="many") as h:
        res = h.evaluate(SPEC, TRUSTED / "forges_bad_spec.py", trials=1, policy=False)
    assert res.status == Status.REJECTED and "forged_report" in res.violations
    assert isinstance(res.triton_launches, int)


def test_a_well_formed_passed_report_alone_does_not_pass(harness_env) -> None:
    with harness_env(WB_GUARDS="off", WB_FORGE_STATUS="passed") as h:
        res = h.evaluate(SPEC, TRUSTED / "forges_bad_spec.py", trials=1, policy=False)
    assert res.status == Status.INCORRECT and res.fitness == 0.0, (res.status, res.error)


@pytest.mark.skipif(not ROOT_ONLY, reason="the root server's reads are what is tested")
def test_a_linked_stdout_leaks_no_root_only_file(tmp_path: Path, harness_env) -> None:
    private = tmp_path / "rootonly"
    private.mkdir(mode=0o700)
    canary = "wb-canary-key-" + os.urandom(6).hex()
    (private / "key").write_text(canary)
    os.chmod(private / "key", 0o600)
    with harness_env(WB_GUARDS="off", WB_TEST_ROOTONLY_FILE=str(private / "key")) as h:
        res = h.evaluate(SPEC, TRUSTED / "symlinks_stdout.py", trials=1, policy=False)
    assert canary not in res.to_json()


def _probe(res) -> dict[str, str]:
    out = {}
    for line in res.stdout_tail.splitlines():
        key, _, rest = line.partition(" ")
        out[key] = rest
    return out


@pytest.mark.skipif(not ROOT_ONLY, reason="uids, mounts and keyrings need root")
def test_every_job_starts_from_nothing(harness_env) -> None:
    with harness_env(WB_GUARDS="off", WB_SANDBOX_MB="16", WB_TEST_FILL_MB="64") as h:
        first = h.evaluate(SPEC, TRUSTED / "probes_process.py", trials=1, policy=False)
        second = h.evaluate(SPEC, TRUSTED / "probes_process.py", trials=1, policy=False)
    assert first.status == second.status == Status.PASSED, (first.error, second.error)
    a, b = _probe(first), _probe(second)
    # fresh seeds: the same candidate sees other inputs in the next job
    assert a["FIRST"] != b["FIRST"]
    # a fresh uid and a session keyring of its own for every job
    assert first.isolation["claimed"]["uid"] != second.isolation["claimed"]["uid"]
    assert first.isolation["claimed"]["fresh_keyring"] is True
    # no descriptor reaches a file or socket outside the sandbox
    for entry in a["FDS"].split():
        _, _, target = entry.partition("=")
        ok = target.startswith(("pipe:", "anon_inode:", "/dev/")) or target.startswith("/tmp/wb-sandbox/")
        assert ok, f"an inherited descriptor: {entry}"
    # the sandbox is a bounded tmpfs (16 MB of its own plus the judged outputs' room): 64 MB stop with ENOSPC
    m = re.match(r"stopped at (\d+) MB: OSError 28", a["FILL"])
    assert m and int(m.group(1)) < 64, a["FILL"]


# -- the outbox: judged outputs in a file the reference made and holds open -----------------------------
def test_judged_outputs_travel_through_the_outbox(harness_env) -> None:
    with harness_env() as h:
        res = h.evaluate(SPEC, ROOT / "examples" / "vector_add" / "candidate.py", trials=2)
    assert res.status == Status.PASSED, res.error
    judged = res.details["judged"]
    assert judged["files"] == 0 and judged["outbox"] >= 2 + 2, judged  # both trials and the timed ones
    assert judged["way"] == "file"  # device memory is the GPU's way


def test_without_the_outbox_outputs_travel_as_files(harness_env) -> None:
    with harness_env(WB_OUTBOX="off") as h:
        res = h.evaluate(SPEC, ROOT / "examples" / "vector_add" / "candidate.py", trials=2)
    assert res.status == Status.PASSED, res.error
    assert res.details["judged"]["outbox"] == 0 and res.details["judged"]["files"] >= 4


def test_a_truncated_outbox_is_the_candidates_failure(harness_env) -> None:
    with harness_env(WB_GUARDS="off", WB_TEST_OUTBOX="truncate") as h:
        res = h.evaluate(SPEC, TRUSTED / "tampers_outbox.py", trials=2, policy=False)
    # the slots written before the cut read as zeros (later writes extend the file again) or as refused
    assert res.status == Status.INCORRECT, (res.status, res.error)
    assert "output refused" in res.error or "elements differ" in res.error, res.error


def test_a_swapped_outbox_changes_nothing_the_judge_reads(harness_env) -> None:
    with harness_env(WB_GUARDS="off", WB_TEST_OUTBOX="swap") as h:
        res = h.evaluate(SPEC, TRUSTED / "tampers_outbox.py", trials=2, policy=False)
    # its outputs went into the original file before the swap: the judge still reads that one
    assert res.status == Status.PASSED and res.details["judged"]["outbox"] >= 4, (res.status, res.error)


@pytest.mark.skipif(not ROOT_ONLY, reason="the root reference's reads are what is tested")
def test_a_linked_outbox_leaks_no_root_only_file(tmp_path: Path, harness_env) -> None:
    private = tmp_path / "rootonly"
    private.mkdir(mode=0o700)
    canary = "wb-canary-key-" + os.urandom(6).hex()
    (private / "key").write_text(canary)
    os.chmod(private / "key", 0o600)
    with harness_env(WB_GUARDS="off", WB_TEST_OUTBOX="link", WB_TEST_ROOTONLY_FILE=str(private / "key")) as h:
        res = h.evaluate(SPEC, TRUSTED / "tampers_outbox.py", trials=2, policy=False)
    assert res.status == Status.PASSED, (res.status, res.error)
    assert canary not in res.to_json()


def test_large_outputs_are_judged_on_a_sample_and_stale_ones_still_fail(harness_env) -> None:
    # every output counts as large here: trial 0 in full, the rest at positions drawn after `done`
    with harness_env(WB_JUDGE_FULL_MB="0.001") as h:
        ok = h.evaluate(SPEC, ROOT / "examples" / "vector_add" / "candidate.py", trials=2)
        stale = h.evaluate(SPEC, HERE / "hostile" / "computes_only_early.py", trials=2)
    assert ok.status == Status.PASSED and ok.details["judged"]["sampled"] >= 2, (ok.error, ok.details)
    assert stale.status == Status.INCORRECT, (stale.status, stale.error)


def test_inputs_made_from_seeds_are_made_again_for_the_judge(harness_env) -> None:
    # the GPU's path on the CPU: no staged input files, trial inputs regenerated from their seeds to judge
    with harness_env(WB_DEVICE_INPUTS="on", WB_JUDGE_FULL_MB="0.001") as h:
        ok = h.evaluate(SPEC, ROOT / "examples" / "vector_add" / "candidate.py", trials=2)
        stale = h.evaluate(SPEC, HERE / "hostile" / "computes_only_early.py", trials=2)
    assert ok.status == Status.PASSED, ok.error
    assert ok.details["inputs"] == "made on the device" and ok.details["judged"]["files"] == 0
    assert stale.status == Status.INCORRECT, (stale.status, stale.error)
