"""The typed messages between the harness's trusted processes: one dataclass per message kind.

`messages.py` types what a hostile candidate may say; this module types what the trusted side says: the
client's request to the server (`EvalRequest`), the server's result to the client (`JobResult`), and the
job the server hands each forked child before it runs anything of the job (`ReferenceJob` for the reference
process, `CandidateJob` for the candidate's, sent before any candidate code exists), and the reference
process's replies to the server (`Prepared`, `BaselineReady`, `RoundMade`, `InputsShared`, `Filled`,
`Verdict`, or `ReferenceFailure` in place of any, decoded by `reference_reply` for the phase the server is
in). Each is encoded as one JSON object (`to_wire`) and decoded by `from_wire`, which checks every field's
type and bound and refuses a key it does not know, so a reader follows a job across processes by attribute,
never by string key. The nested summaries (a timing's statistics, a judge's counts, an outbox's layout)
stay mappings, bounded in size here and read by the module that made them (`rounds.py`, `outbox.py`).

All four modules that use them are trusted: the client (`__init__.py`, the caller's process), the fork
server and its job pipeline (`server.py`, `job_pipeline.py`), the reference process (`reference_proc.py`);
the candidate process (`candidate_proc.py`) decodes its job while it is still the harness's own code.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from workbench.harness.messages import NotAnObject, json_object

MAX_LINE = 1 << 26        # one encoded message, in bytes (a candidate's source is refused over 1 MB before)
MAX_TEXT = 1 << 22        # characters of a diagnosis, a path or a tail
MAX_NESTED = 1 << 22      # bytes of one nested mapping or list once encoded
MAX_ITEMS = 4096          # items of a list of names

T = TypeVar("T", bound="_Wire")


class WireError(ValueError):
    """A trusted message outside its type (a bug on the trusted side, never the candidate's doing)."""


def _text(v: Any) -> str:
    if type(v) is not str or len(v) > MAX_TEXT:
        raise WireError(f"expected a string of at most {MAX_TEXT} characters, got {type(v).__name__}")
    return v


def _int(v: Any) -> int:
    if type(v) is not int:
        raise WireError(f"expected an integer, got {type(v).__name__}")
    return v


def _number(v: Any) -> float:
    if type(v) not in (int, float):
        raise WireError(f"expected a number, got {type(v).__name__}")
    return float(v)


def _bool(v: Any) -> bool:
    if type(v) is not bool:
        raise WireError(f"expected true or false, got {type(v).__name__}")
    return v


def _nested(kind: type) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if type(v) is not kind or len(json.dumps(v)) > MAX_NESTED:
            raise WireError(f"expected a {kind.__name__} of at most {MAX_NESTED} bytes, got {type(v).__name__}")
        return v
    return check


def _names(v: Any) -> list[str]:
    if type(v) is not list or len(v) > MAX_ITEMS:
        raise WireError(f"expected a list of at most {MAX_ITEMS} strings")
    return [_text(x) for x in v]


def _seconds(v: Any) -> dict[str, float]:
    if type(v) is not dict or len(v) > MAX_ITEMS:
        raise WireError(f"expected a mapping of at most {MAX_ITEMS} numbers")
    out = {}
    for k, x in v.items():
        if type(x) not in (int, float) or not math.isfinite(x):
            raise WireError(f"timings_s[{str(k)[:40]!r}]: expected a finite number")
        out[_text(k)] = float(x)
    return out


def _natural(v: Any) -> int:
    if type(v) is not int or v < 0:
        raise WireError(f"expected an integer of at least 0, got {type(v).__name__}")
    return v


def _true(v: Any) -> bool:
    if v is not True:
        raise WireError(f"expected true, got {type(v).__name__}")
    return True


def _optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else check(v)


_DICT, _LIST = _nested(dict), _nested(list)


class _Wire:
    """One message kind: `_CHECKS` names each field's validator; `to_wire` / `from_wire` encode it."""

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {}
    _IGNORED: ClassVar[frozenset[str]] = frozenset({"n"})  # the channel's nonce rides along
    _ALL_REQUIRED: ClassVar[bool] = False  # a field left out is a `WireError` even where it has a default

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    def encode(self) -> str:
        line = json.dumps(self.to_wire())
        if len(line) > MAX_LINE:
            raise WireError(f"{type(self).__name__}: {len(line)} bytes (limit {MAX_LINE})")
        return line

    @classmethod
    def from_wire(cls: type[T], msg: Any) -> T:
        """The message of `msg` (a decoded mapping, or its JSON line), every field checked; a field left out
        takes its default, an unknown one is a `WireError`."""
        try:
            msg = json_object(msg, MAX_LINE)  # the bounded decode `messages` uses for a candidate's lines
        except NotAnObject as exc:
            raise WireError(f"{cls.__name__}: {exc}") from exc
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        extra = set(msg) - names - cls._IGNORED
        required = {f.name for f in fields(cls)  # type: ignore[arg-type]
                    if cls._ALL_REQUIRED or (f.default is MISSING and f.default_factory is MISSING)}
        if extra or required - set(msg):
            raise WireError(f"{cls.__name__}: unexpected keys {sorted(extra)[:4]}, "
                            f"missing {sorted(required - set(msg))}")
        values = {}
        for k in names & set(msg):
            try:
                values[k] = cls._CHECKS[k](msg[k])
            except WireError as exc:
                raise WireError(f"{cls.__name__}.{k}: {exc}") from None
        return cls(**values)


@dataclass
class EvalRequest(_Wire):
    """The client's job for the server (`Harness.evaluate_job` -> `Server.run_job`)."""

    spec_path: str = ""
    candidate_source: str = ""
    trials: int = 3
    timeout_s: float = 300.0
    overrides: dict[str, Any] = field(default_factory=dict)
    shapes: list[str] | None = None
    policy: bool = True
    timing: str | None = None       # "device" | "wall" | None: the spec's choice
    last: bool = False              # a one-shot client: the server exits after this job

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "spec_path": _text, "candidate_source": _text, "trials": _int,
        "timeout_s": _number, "overrides": _DICT, "shapes": _optional(_names), "policy": _bool,
        "timing": _optional(_text), "last": _bool}


@dataclass
class ReferenceJob(_Wire):
    """The server's job for the reference process (`job_pipeline._JobRun.prepare` -> `reference_proc`)."""

    device: str
    spec_path: str
    stage: str                      # the job's stage directory, where the reference writes the inputs
    seed: int                       # the plan's base seed (trial and model seeds, which the candidate sees)
    trials: int = 3
    overrides: dict[str, Any] = field(default_factory=dict)
    shapes: list[str] | None = None
    outbox_path: str | None = None  # where the reference makes the outbox; None: every output as a file

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "device": _text, "spec_path": _text, "stage": _text, "seed": _int, "trials": _int,
        "overrides": _DICT, "shapes": _optional(_names), "outbox_path": _optional(_text)}


@dataclass
class CandidateJob(_Wire):
    """The server's job for the candidate process (`job_pipeline._JobRun.candidate` -> `candidate_proc`),
    from what the reference prepared: no seed of a timed input, nothing the candidate could not see anyway."""

    device: str
    spec_path: str
    shapes: list[dict[str, Any]]    # per shape: name, init file, trial files (or seeds), model seed, overrides
    sandbox: str = ""
    stage: str = ""
    uid: int = -1
    timed: int | None = None        # the shape whose rounds the server clocks
    sig: dict[str, Any] = field(default_factory=dict)  # Model's positional signatures (`spec`)
    allowed_ops: list[str] = field(default_factory=list)
    devgen: bool = False            # inputs made by the reference into memory it shares (`inbox`), not staged
    allowed_imports: list[str] = field(default_factory=list)
    allow_tf32: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)
    outbox: dict[str, Any] | None = None  # the reference's outbox (`outbox.Layout`), None: files
    mem_limit_gb: float = 8.0
    inputs_bytes: int = 0           # with `devgen`: the reference's shelf of inputs (`inbox`), passed as a descriptor

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "device": _text, "spec_path": _text, "shapes": _LIST, "sandbox": _text, "stage": _text, "uid": _int,
        "timed": _optional(_int), "sig": _DICT, "allowed_ops": _names, "devgen": _bool,
        "allowed_imports": _names, "allow_tf32": _bool, "overrides": _DICT, "outbox": _optional(_DICT),
        "mem_limit_gb": _number, "inputs_bytes": _natural}


@dataclass
class JobResult(_Wire):
    """The server's result of one job for the client (`Server.run_job` -> `Harness._to_result`). The
    candidate's own report reaches it only through `messages.py`'s typed fields."""

    status: str = "infra_error"             # the server sets it; a result without one is no pass
    error: str = ""
    violations: list[str] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)
    trials: int = 0
    isolation: dict[str, Any] | None = None  # what the server read from /proc of the candidate
    stdout_tail: str = ""
    launches: int | None = None              # the candidate's Triton launches (its report: information)
    aten_ops: list[str] | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    plan: dict[str, Any] | None = None       # the shapes' names and the timed one
    judged: dict[str, Any] | None = None     # where the judge read the outputs: outbox slots or files
    referee: dict[str, Any] | None = None    # a mismatch: eager's and the candidate's errors against fp64
    outbox_device_error: str | None = None   # why the GPU's outbox was the file
    inputs_staged: str | None = None         # why the host made the inputs, not the GPU
    reran_alone: str | None = None           # the first run's error: out of GPU memory beside other jobs
    timing: dict[str, Any] | None = None     # the candidate's rounds (`rounds.drive`'s statistics)
    baseline: dict[str, Any] | None = None   # the baseline's
    timing_basis: str = "device"             # what the client compares on, or why not device time

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "status": _text, "error": _text, "violations": _names, "timings_s": _seconds, "trials": _int,
        "isolation": _optional(_DICT), "stdout_tail": _text, "launches": _optional(_int),
        "aten_ops": _optional(_names), "max_abs_err": _optional(_number), "max_rel_err": _optional(_number),
        "plan": _optional(_DICT), "judged": _optional(_DICT), "referee": _optional(_DICT),
        "outbox_device_error": _optional(_text), "inputs_staged": _optional(_text),
        "reran_alone": _optional(_text), "timing": _optional(_DICT), "baseline": _optional(_DICT),
        "timing_basis": _text}


# -- the reference process's replies to the server (`reference_proc` -> `job_pipeline`) ---------------------
# One flat JSON object each, named by its kind's key (`KIND`, a field whose value is fixed), which the
# server's link waits for (`Link.recv(expect=KIND)`); every field is required, an unknown one refused, so a
# reply of another kind (out of phase) or a forged one is a `WireError`, never a mapping read by key.


class _Reply(_Wire):
    KIND: ClassVar[str] = ""
    _ALL_REQUIRED: ClassVar[bool] = True


@dataclass
class Prepared(_Reply):
    """The job as the reference prepared it (`run_reference` -> `_JobRun.prepare`): the shapes it staged,
    the timed one, what the candidate's job is built from, and the outbox it laid out."""

    KIND: ClassVar[str] = "prepared"

    shapes: list[dict[str, Any]]    # per shape: name, init file, trial files (or seeds), model seed, overrides
    timed: int                      # the index of the timed shape
    set_bytes: int                  # one input set of the timed shape, in bytes
    sig: dict[str, Any]             # Model's positional signatures
    plan: dict[str, Any]            # the shapes' names and the timed one (the result's `plan`)
    devgen: bool = False            # inputs made on the device by the reference, shared (`inbox`)
    devgen_off: str = ""            # why they are staged instead, where they are
    allow_tf32: bool = False
    timing_basis: str = "device"    # the spec's TIMING
    allowed_ops: list[str] = field(default_factory=list)
    allowed_imports: list[str] = field(default_factory=list)
    outbox: dict[str, Any] | None = None  # the outbox's layout (`outbox.Layout`), None: outputs as files
    timings_s: dict[str, float] = field(default_factory=dict)
    prepared: bool = True

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "shapes": _LIST, "timed": _natural, "set_bytes": _natural, "sig": _DICT, "plan": _DICT, "devgen": _bool,
        "devgen_off": _text, "allow_tf32": _bool, "timing_basis": _text, "allowed_ops": _names,
        "allowed_imports": _names, "outbox": _optional(_DICT), "timings_s": _seconds, "prepared": _true}


@dataclass
class BaselineReady(_Reply):
    """The reference took the baseline's command and serves its rounds (`rounds.serve`) next."""

    KIND: ClassVar[str] = "baseline_ready"

    baseline_ready: bool = True

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {"baseline_ready": _true}


@dataclass
class RoundMade(_Reply):
    """Round `made`'s sets written into the pending directory as `file` (read by the round stager)."""

    KIND: ClassVar[str] = "made"

    made: int
    file: str

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {"made": _natural, "file": _text}


@dataclass
class InputsShared(_Reply):
    """The reference made its shelf of inputs (`inbox.Shelf`, `shared` bytes) and sent its descriptor over
    the socket (`_Reference.share_inputs` -> `_JobRun.candidate`)."""

    KIND: ClassVar[str] = "shared"

    shared: int

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {"shared": _natural}


@dataclass
class Filled(_Reply):
    """The sets the server asked for (`filled`: its tag, a trial's or a round's) are in the shelf at
    positions 0..`sets`-1 (`_Reference.fill` -> `_JobRun`)."""

    KIND: ClassVar[str] = "filled"

    filled: str
    sets: int

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {"filled": _text, "sets": _natural}


MAX_PROBLEMS = 256        # problems a verdict lists (the result shows the first 8)
MAX_PROBLEM = 2000        # characters of one


@dataclass
class Verdict(_Reply):
    """The judge's verdict on the candidate's outputs (`_Reference.judge` -> `_JobRun.judge`). Its problems
    are made from what the candidate left, so `bounded` clips them where they are made: however many
    outputs mismatch, the verdict stays within its type (an oversized one would be the server's
    `infra_error`, not the candidate's `incorrect`)."""

    KIND: ClassVar[str] = "verdict"

    correct: bool
    problems: list[str]
    max_abs_err: float
    max_rel_err: float
    read: dict[str, Any] | None = None     # where the judge read the outputs: outbox slots or files
    referee: dict[str, Any] | None = None  # the first mismatch's fp64 referee
    verdict: bool = True

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "correct": _bool, "problems": _names, "max_abs_err": _number, "max_rel_err": _number,
        "read": _optional(_DICT), "referee": _optional(_DICT), "verdict": _true}

    @classmethod
    def bounded(cls, correct: bool, problems: list[str], max_abs_err: float, max_rel_err: float,
                read: dict[str, Any] | None = None, referee: dict[str, Any] | None = None) -> Verdict:
        shown = [str(p)[:MAX_PROBLEM] for p in problems[:MAX_PROBLEMS]]
        if len(problems) > MAX_PROBLEMS:
            shown[-1] = f"... and {len(problems) - MAX_PROBLEMS + 1} more problems"
        return cls(correct=bool(correct), problems=shown, max_abs_err=float(max_abs_err),
                   max_rel_err=float(max_rel_err), read=read, referee=referee)


MAX_ERROR = 8000          # characters of the reference's own error


@dataclass
class ReferenceFailure(_Reply):
    """The reference failed (the spec's code, or the judge on what the candidate left): in place of any
    reply. `spec_error`: the spec itself was refused while loading (its text is the whole diagnosis)."""

    KIND: ClassVar[str] = "failure"

    reference_error: str
    spec_error: bool = False
    failure: bool = True

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "reference_error": _text, "spec_error": _bool, "failure": _true}

    @classmethod
    def bounded(cls, text: str, spec_error: bool = False) -> ReferenceFailure:
        return cls(reference_error=text if len(text) <= MAX_ERROR else "..." + text[-(MAX_ERROR - 3):],
                   spec_error=spec_error)


R = TypeVar("R", bound=_Reply)


def reference_reply(msg: Any, expect: type[R]) -> R | ReferenceFailure:
    """One reply of the reference process where the protocol waits for `expect`: that kind, or the
    reference's `ReferenceFailure` in its place. Anything else (another kind: out of its phase; a field
    missing, unknown or outside its type; a line over its bound) is a `WireError`."""
    try:
        msg = json_object(msg, MAX_LINE)
    except NotAnObject as exc:
        raise WireError(f"{expect.__name__}: {exc}") from exc
    if ReferenceFailure.KIND in msg:
        return ReferenceFailure.from_wire(msg)
    return expect.from_wire(msg)


__all__ = ["BaselineReady", "CandidateJob", "EvalRequest", "Filled", "InputsShared", "JobResult", "Prepared",
           "ReferenceFailure", "ReferenceJob", "RoundMade", "Verdict", "WireError", "reference_reply"]
