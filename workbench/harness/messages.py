"""The one typed schema of what a candidate process may say to the trusted server.

Both sides use it: the candidate's harness code builds its reports with `report()` (which bounds every
field the way the parser will check it), and the server parses every line from a candidate with
`parse_candidate()`. Anything else (an unknown kind, an extra or missing key, a bool where an int
belongs, a string in a numeric field, a string or list over its bound, a line over `MAX_LINE`) is a
`SchemaError`, which the server turns into `forged_report`.

What a candidate says is information or a reason to fail it, never a reason to pass it:
`FAIL_STATUSES` are the only statuses it may give besides `passed`; `bad_spec` and `infra_error`
(someone else's failure) are not among them.
"""
from __future__ import annotations

import json
import math
from typing import Any

MAX_LINE = 1 << 20           # one report line, in bytes
MAX_ERROR = 8000             # characters of a diagnosis
MAX_ITEM = 200               # characters of a violation name or an op name
MAX_ITEMS = 256              # violations, ops, timing entries
MAX_INT = 1 << 53

# Statuses a candidate's own report may carry: a pass (necessary, never sufficient) or its own failure.
FAIL_STATUSES = frozenset({"compile_error", "runtime_error", "timeout", "crashed", "rejected", "incorrect"})
STATUSES = FAIL_STATUSES | {"passed"}


class SchemaError(ValueError):
    """A candidate message outside the schema."""


def _int(v: Any, what: str, lo: int = -1, hi: int = MAX_INT) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise SchemaError(f"{what}: expected an integer in [{lo}, {hi}], got {type(v).__name__}")
    return v


def _str(v: Any, what: str, limit: int) -> str:
    if type(v) is not str or len(v) > limit:
        raise SchemaError(f"{what}: expected a string of at most {limit} characters")
    return v


def _strs(v: Any, what: str) -> list[str]:
    if type(v) is not list or len(v) > MAX_ITEMS:
        raise SchemaError(f"{what}: expected a list of at most {MAX_ITEMS} strings")
    return [_str(x, what, MAX_ITEM) for x in v]


def _floats(v: Any, what: str) -> dict[str, float]:
    if type(v) is not dict or len(v) > MAX_ITEMS:
        raise SchemaError(f"{what}: expected a mapping of at most {MAX_ITEMS} numbers")
    out = {}
    for k, x in v.items():
        _str(k, what, MAX_ITEM)
        if type(x) not in (int, float) or not math.isfinite(x):
            raise SchemaError(f"{what}[{k[:40]!r}]: expected a finite number")
        out[k] = float(x)
    return out


def _true(v: Any, what: str) -> bool:
    if v is not True:
        raise SchemaError(f"{what}: expected true")
    return True


def _status(v: Any) -> str:
    if type(v) is not str or v not in STATUSES:
        raise SchemaError(f"status: {str(v)[:40]!r} is not a status a candidate may report")
    return v


def _isolation(v: Any) -> dict[str, Any] | None:
    """What the candidate says it set up (information only: the server reads /proc itself)."""
    if v is None:
        return None
    if type(v) is not dict or len(json.dumps(v)) > 4096:
        raise SchemaError("isolated: expected a small mapping or null")
    return v


def _kernel_names(v: Any) -> list[str] | None:
    """The captured graph's kernel names (`graph_audit`), or null where the driver could not say."""
    if v is None:
        return None
    if type(v) is not list or len(v) > 4096:
        raise SchemaError("kernels: expected a list of at most 4096 names or null")
    return [_str(x, "kernels", 2000) for x in v]


def _pair(v: Any) -> list[int]:
    """A trial's inputs asked for from the reference's shelf (`inbox`): [shape, trial]."""
    if type(v) is not list or len(v) != 2:
        raise SchemaError("inputs: expected [shape, trial]")
    return [_int(x, "inputs", 0, 1 << 16) for x in v]


# kind -> {field: validator}; every message carries exactly its kind's fields and the job's nonce `n`.
_SCHEMA: dict[str, dict[str, Any]] = {
    "isolated": {"isolated": _isolation},
    "timing": {"timing": lambda v: _int(v, "timing", 0, 1 << 16)},
    "inputs": {"inputs": _pair},
    "staged": {"staged": lambda v: _int(v, "staged", -1, 1 << 20)},
    "done": {"done": lambda v: _int(v, "done", -1, 1 << 20)},
    "saved": {"saved": lambda v: _int(v, "saved", -1, 1 << 20)},
    "captured": {"captured": lambda v: _int(v, "captured", 0, 1 << 16), "kernels": _kernel_names},
    "finished": {"finished": lambda v: _true(v, "finished"), "status": _status,
                 "violations": lambda v: _strs(v, "violations"), "error": lambda v: _str(v, "error", MAX_ERROR),
                 "timings_s": lambda v: _floats(v, "timings_s"),
                 "launches": lambda v: _int(v, "launches", 0), "aten_ops": lambda v: _strs(v, "aten_ops")},
}
_OPTIONAL = {"finished": {"launches", "aten_ops"}, "captured": {"kernels"}}


def kind_of(msg: dict[str, Any]) -> str:
    kinds = [k for k in _SCHEMA if k in msg]
    if len(kinds) != 1:
        raise SchemaError(f"a message names one kind, got keys {sorted(msg)[:6]}")
    return kinds[0]


class NotAnObject(ValueError):
    """A line that is not one bounded JSON object (`json_object`); `why` says how: "long", "json", "type"."""

    def __init__(self, why: str, text: str) -> None:
        super().__init__(text)
        self.why = why


def json_object(msg: Any, limit: int) -> dict[str, Any]:
    """`msg` as one JSON object, the bounded decode both schemas share (this one and `trusted_messages`): a
    line (str or bytes) over `limit` is refused before it is parsed, one the parser refuses (a nesting too
    deep for it included: `RecursionError`) is not JSON, and a value that is not an object, decoded here or
    before, is refused too. Raises `NotAnObject`, whose text each schema words as its own error."""
    if isinstance(msg, (str, bytes)):
        if len(msg) > limit:
            raise NotAnObject("long", f"a line of {len(msg)} bytes (limit {limit})")
        try:
            msg = json.loads(msg)
        except (ValueError, RecursionError) as exc:
            raise NotAnObject("json", f"not JSON ({exc})") from exc
    if type(msg) is not dict:
        raise NotAnObject("type", "expected a JSON object")
    return msg


def parse_candidate(line: bytes, nonce: str, expect: str | None = None) -> dict[str, Any]:
    """One line from a candidate process, checked against the schema; `expect` is the kind the protocol
    waits for (a `finished` report is accepted in its place: the candidate failed and says why)."""
    try:
        msg = json_object(line, MAX_LINE)
    except NotAnObject as e:
        raise SchemaError({"long": f"report line of {len(line)} bytes (limit {MAX_LINE})",
                           "json": f"unparseable report {line[:80]!r}",
                           "type": "a report is a JSON object"}[e.why]) from e
    if msg.get("n") != nonce:
        raise SchemaError(f"report without this job's nonce: {line[:80]!r}")
    kind = kind_of(msg)
    if expect is not None and kind not in (expect, "finished"):
        raise SchemaError(f"expected {expect!r}, got {kind!r}")
    fields = _SCHEMA[kind]
    keys = set(msg) - {"n"}
    missing = set(fields) - keys - _OPTIONAL.get(kind, set())
    extra = keys - set(fields)
    if missing or extra:
        raise SchemaError(f"{kind}: missing {sorted(missing)[:4]}, unexpected {sorted(extra)[:4]}")
    out = {k: fields[k](msg[k]) for k in keys}
    out["kind"] = kind
    return out


def report(kind: str, **fields: Any) -> dict[str, Any]:
    """A candidate-side report, bounded as the parser checks it (long diagnoses keep their tail)."""
    if kind == "finished":
        fields["error"] = _clip(str(fields.get("error", "")), MAX_ERROR)
        fields["violations"] = [_clip(str(v), MAX_ITEM) for v in fields.get("violations", [])][:MAX_ITEMS]
        fields["aten_ops"] = [_clip(str(v), MAX_ITEM) for v in fields.get("aten_ops", [])][:MAX_ITEMS]
        fields["timings_s"] = {_clip(str(k), MAX_ITEM): float(v) for k, v in
                               list(fields.get("timings_s", {}).items())[:MAX_ITEMS]}
        fields["launches"] = min(int(fields.get("launches", 0)), MAX_INT)
        fields["finished"] = True
    msg = {kind: fields.pop(kind)} if kind in fields else {}
    msg.update(fields)
    return msg


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else "..." + s[-(n - 3):]


def verdict_status(report_status: str, violations: list[str]) -> str:
    """The most a candidate's report can do to its result: fail it. `passed` only lets the trusted
    checks go on; any violation it names makes the result `rejected`."""
    if violations and report_status in ("passed", "runtime_error", "incorrect"):
        return "rejected"
    return report_status


__all__ = ["FAIL_STATUSES", "MAX_LINE", "STATUSES", "NotAnObject", "SchemaError", "json_object", "parse_candidate",
           "report", "verdict_status"]
