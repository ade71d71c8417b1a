"""The trusted side's typed messages (`trusted_messages.py`) and the one bounded JSON decode they share with
the candidate's schema (`messages.json_object`)."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from workbench.harness import job_pipeline, messages, trusted_messages
from workbench.harness.channel import Link
from workbench.harness.settings import HarnessSettings
from workbench.harness.trusted_messages import (
    BaselineReady,
    EvalRequest,
    Filled,
    InputsShared,
    JobResult,
    Prepared,
    ReferenceFailure,
    RoundMade,
    Verdict,
    WireError,
    reference_reply,
)

DEEP = b"[" * 100_000 + b"]" * 100_000  # the parser's recursion, not a crash


@pytest.mark.parametrize("line", [DEEP, b"{", b"[1, 2]", b"3", b'"x"'], ids=["deep", "cut", "list", "int", "str"])
def test_both_schemas_refuse_a_line_that_is_not_one_json_object(line: bytes) -> None:
    with pytest.raises(messages.NotAnObject):
        messages.json_object(line, messages.MAX_LINE)
    with pytest.raises(messages.SchemaError):
        messages.parse_candidate(line, "abc")
    with pytest.raises(WireError):
        EvalRequest.from_wire(line)


def test_both_schemas_bound_a_line_before_parsing_it() -> None:
    with pytest.raises(messages.SchemaError, match="limit"):
        messages.parse_candidate(b" " * (messages.MAX_LINE + 1), "abc")
    with pytest.raises(WireError, match="limit"):
        EvalRequest.from_wire(" " * (trusted_messages.MAX_LINE + 1))
    with pytest.raises(WireError, match="expected a JSON object"):
        EvalRequest.from_wire([1])  # already decoded, still not an object
    assert EvalRequest.from_wire(json.dumps({"trials": 2})).trials == 2
    assert messages.json_object(b'{"a": 1}', 10) == {"a": 1}


# -- the reference process's replies (`Prepared`, `BaselineReady`, `RoundMade`, `InputsShared`, `Filled`,
# `Verdict`, `ReferenceFailure`) --
REPLIES = [
    Prepared(shapes=[{"name": "small", "init": "init_0.pt", "trials": ["in_0_0.pt"], "model_seed": 7, "over": {}}],
             timed=0, set_bytes=4096, sig={"__init__": [], "forward": ["x", "y"]},
             plan={"shapes": ["small"], "timed": "small"}, devgen=False, devgen_off="", allow_tf32=False,
             timing_basis="device", allowed_ops=["add"], allowed_imports=[], outbox=None,
             timings_s={"reference_prepare": 0.5}),
    BaselineReady(),
    RoundMade(made=3, file="round_3.raw"),
    InputsShared(shared=1 << 20),
    Filled(filled="round 3", sets=2),
    Verdict.bounded(True, [], 0.0, 0.0, read={"outbox": 3, "files": 0, "sampled": 0, "way": "file"}),
    ReferenceFailure.bounded("ValueError: the spec's Model failed"),
]
KINDS = [type(r) for r in REPLIES]
_OTHER_TYPE = {bool: "yes", int: "3", float: "0.5", str: 3, list: {"a": 1}, dict: ["a"], type(None): 3}


def _wire(reply) -> dict:
    return json.loads(json.dumps(reply.to_wire()))


def _wrong_types(reply) -> list[tuple[str, object]]:
    """Each field with a value of another JSON type (a bool for an int, a string for a number...)."""
    out = []
    for name, value in _wire(reply).items():
        out.append((name, _OTHER_TYPE[type(value)]))
        if type(value) is int:
            out.append((name, True))  # a bool is no integer
    return out


def _oversized(reply) -> list[tuple[str, object]]:
    """Each field of a bounded kind just over its bound."""
    out = []
    for name, value in _wire(reply).items():
        if type(value) is str:
            out.append((name, "x" * (trusted_messages.MAX_TEXT + 1)))
        elif type(value) is list:
            out.append((name, ["x"] * (trusted_messages.MAX_ITEMS + 1) if name in ("allowed_ops", "allowed_imports",
                                                                                   "problems")
                        else [{"x": "y" * 1024}] * (trusted_messages.MAX_NESTED // 1024 + 1)))
        elif type(value) is dict:
            out.append((name, {str(i): 0.0 for i in range(trusted_messages.MAX_ITEMS + 1)} if name == "timings_s"
                        else {"x": "y" * (trusted_messages.MAX_NESTED + 1)}))
    return out


def test_each_reply_the_reference_builds_is_read_back_the_same() -> None:
    for reply in REPLIES:
        kind = type(reply)
        assert kind.from_wire(_wire(reply)) == reply
        assert reference_reply(_wire(reply), kind) == reply
        assert reference_reply(json.dumps({**reply.to_wire(), "n": "abc"}), kind) == reply  # the nonce rides along
        for other in KINDS:  # its failure may come in place of any reply
            if other is not ReferenceFailure:
                assert reference_reply(_wire(REPLIES[-1]), other) == REPLIES[-1]


@pytest.mark.parametrize("kind", KINDS, ids=[k.__name__ for k in KINDS])
def test_a_forged_reply_of_each_kind_is_refused(kind) -> None:
    reply = REPLIES[KINDS.index(kind)]
    good = _wire(reply)
    forged: list[tuple[str, object]] = []
    for name, value in _wrong_types(reply):
        forged.append((f"wrong type {name}", {**good, name: value}))
    for name in good:  # every field is required, the kind's key included
        forged.append((f"missing {name}", {k: v for k, v in good.items() if k != name}))
    forged.append(("extra field", {**good, "status": "passed"}))
    for name, value in _oversized(reply):
        forged.append((f"oversized {name}", {**good, name: value}))
    forged.append(("oversized line", json.dumps(good) + " " * trusted_messages.MAX_LINE))
    forged.append(("not an object", json.dumps([good])))
    for other in REPLIES:  # another kind's reply, out of this one's phase
        if type(other) not in (kind, ReferenceFailure):
            forged.append((f"phase: {type(other).__name__}", _wire(other)))
            forged.append((f"phase: {type(other).__name__} and this", {**_wire(other), **good}))
    assert len(forged) > 2 * len(good)
    for what, msg in forged:
        with pytest.raises(WireError):
            reference_reply(msg, kind)
            pytest.fail(f"{kind.__name__}: accepted {what}")
        if kind is not ReferenceFailure and isinstance(msg, dict) and "failure" not in msg:
            with pytest.raises(WireError):
                kind.from_wire(msg)


def test_the_verdict_the_reference_builds_stays_within_its_type_whatever_the_candidate_left() -> None:
    """Its problems come from the candidate's outputs: however many and however long, the verdict is still a
    `Verdict` (an oversized one would be `infra_error`, the server's fault, not the candidate's `incorrect`)."""
    many = [f"shape small, trial {i}: " + "x" * 10_000 for i in range(100_000)]
    v = Verdict.bounded(False, many, float("inf"), 1e30)
    assert Verdict.from_wire(json.loads(json.dumps(v.to_wire()))).problems == v.problems
    assert len(v.problems) == trusted_messages.MAX_PROBLEMS and v.problems[-1].endswith("more problems")
    long = ReferenceFailure.bounded("E" * (trusted_messages.MAX_TEXT * 2))
    assert ReferenceFailure.from_wire(_wire(long)).reference_error == long.reference_error


# -- the server's side: a malformed reply is an infra error with one line ---------------------------------------
class _FakeServer:
    """What a job takes of the fork server (`job_pipeline.Server`), without processes."""

    device, isolate, own_mounts, uid_lease, plan_seed = "cpu", False, False, None, 1

    def __init__(self) -> None:
        self.settings = HarnessSettings()
        self.baselines: dict = {}
        self.null_s: dict = {}

    def _seeds(self, kind: int, k: int, r: int) -> list[int]:
        return [kind * 1000 + k * 10 + i for i in range(r)]

    def _kill_and_status(self, cand: Link) -> str:
        return "ended"


@pytest.fixture
def reference(tmp_path: Path):
    """`send(*replies)`: the reference's replies written into a real link's pipe, in order; yields the job's
    pieces for `job_pipeline.run_steps` (its `run` makes a `_JobRun`)."""
    fds: list[int] = []
    writers: list[threading.Thread] = []

    def pipe() -> tuple[int, int]:
        r, w = os.pipe()
        fds.extend((r, w))
        return r, w

    class Ref:
        def __init__(self) -> None:
            cmd_r, cmd_w = pipe()
            self.report_r, self.report_w = pipe()
            self.link = Link(-1, cmd_w, self.report_r, "abc")
            ccmd_r, ccmd_w = pipe()
            crep_r, _ = pipe()
            self.cand = Link(-1, ccmd_w, crep_r, "abc", strict=True)
            self.stage, self.sandbox = tmp_path / "stage", tmp_path / "sandbox"
            self.stage.mkdir()
            self.sandbox.mkdir()
            self.server = _FakeServer()
            self.job = EvalRequest(spec_path="spec.py", candidate_source="", trials=1, policy=False)
            self.res = JobResult(status="passed", trials=1)

        def send(self, *replies: object) -> None:
            """Written by a thread: a reply over the pipe's buffer waits for the server's read."""
            data = b"".join((r if isinstance(r, str) else json.dumps({**r, "n": "abc"})).encode() + b"\n"
                            for r in replies)
            writer = threading.Thread(target=_write_all, args=(self.report_w, data), daemon=True)
            writer.start()
            writers.append(writer)

        def steps(self) -> JobResult:
            return job_pipeline.run_steps(self.server, self.job, self.res, self.link, self.cand, self.stage,
                                          self.sandbox, 30.0, 0.0)

        def run(self) -> job_pipeline._JobRun:
            return job_pipeline._JobRun(self.server, self.job, self.res, self.link, self.cand, self.stage,
                                        self.sandbox, 30.0)

    yield Ref()
    for fd in fds:
        os.close(fd)
    for writer in writers:
        writer.join(5)


def _write_all(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        pass  # the test ended before the server read it all


def _infra_one_line(res: JobResult) -> None:
    assert res.status == "infra_error", (res.status, res.error)
    assert res.error.startswith("the reference process sent a malformed reply: ") and "\n" not in res.error, res.error


PREPARED = _wire(REPLIES[0])


@pytest.mark.parametrize("reply", [
    {**PREPARED, "timed": "0"}, {k: v for k, v in PREPARED.items() if k != "set_bytes"},
    {**PREPARED, "verdict": True}, {**PREPARED, "problems": "x\ny"}, {**PREPARED, "plan": ["x"] * 10},
    {**PREPARED, "shapes": [{"x": "y" * 1024}] * (trusted_messages.MAX_NESTED // 1024 + 1)},
    _wire(REPLIES[3]), {"failure": True}, {"failure": True, "reference_error": ["x"]},
    {"prepared": True}, {"prepared": None, "bad_spec": "x"}, "[" * 100_000,
], ids=["wrong_type", "missing", "extra_kind", "extra_field", "wrong_nested", "oversized", "wrong_phase",
        "failure_missing", "failure_wrong_type", "kind_only", "old_format", "deep"])
def test_a_malformed_prepared_reply_is_an_infra_error_in_one_line(reference, reply) -> None:
    reference.send(reply)
    _infra_one_line(reference.steps())


def test_a_malformed_baseline_reply_is_an_infra_error_in_one_line(reference) -> None:
    for replies in ([PREPARED, {"baseline_ready": 1}], [PREPARED, _wire(REPLIES[0])],
                    [PREPARED, {"baseline_ready": True, "made": 1}],
                    [PREPARED, _wire(BaselineReady()), {"failure": True, "reference_error": 3}]):  # mid-rounds
        reference.res = JobResult(status="passed", trials=1)
        reference.server.baselines.clear()
        reference.send(*replies)
        _infra_one_line(reference.steps())
    reference.res = JobResult(status="passed", trials=1)
    reference.send(PREPARED, _wire(ReferenceFailure.bounded("RuntimeError: boom")))  # a real failure: the spec's
    res = reference.steps()
    assert res.status == "bad_spec" and "RuntimeError: boom" in res.error, (res.status, res.error)


def test_a_malformed_verdict_is_an_infra_error_and_a_judge_failure_the_candidates(reference) -> None:
    good = _wire(Verdict.bounded(False, ["shape small, trial 0: differ"], 1.0, 1.0))
    for reply in ({**good, "correct": "no"}, {k: v for k, v in good.items() if k != "problems"},
                  {**good, "status": "passed"}, {**good, "problems": ["x"] * (trusted_messages.MAX_ITEMS + 1)},
                  {**good, "made": 1, "file": "x"}, "[" * 100_000):
        reference.send(reply)
        run = reference.run()
        with pytest.raises(job_pipeline._End) as end:
            run.judge()
        assert end.value.status == "infra_error" and "\n" not in end.value.error, end.value.error
    reference.send(good)
    with pytest.raises(job_pipeline._End) as end:
        reference.run().judge()
    assert end.value.status == "incorrect" and "differ" in end.value.error
    reference.send(_wire(ReferenceFailure.bounded("OutputFileError: bad")))
    with pytest.raises(job_pipeline._End) as end:
        reference.run().judge()
    assert end.value.status == "incorrect" and "OutputFileError" in end.value.error
