"""Read and rewrite a kernel's tunables declared as data (docs/CONTRACTS.md, "Tunables as data").

```python
TUNABLES = {"BLOCK_SIZE": [128, 256, 512, 1024], "NUM_WARPS": [2, 4, 8]}
BLOCK_SIZE = 256
NUM_WARPS = 4
def tunables_valid(cfg): return cfg["BLOCK_SIZE"] * cfg["NUM_WARPS"] <= 4096   # optional
```
Everything is read with `ast`; the candidate is never imported here (it imports triton and may be
broken). `tunables_valid` is compiled on its own with a small set of builtins and the module's literal
constants: a predicate that needs more than that is reported and ignored.
"""

from __future__ import annotations

import ast
import builtins
import copy
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable

log = logging.getLogger(__name__)

_SAFE_BUILTINS = {
    name: getattr(builtins, name)
    for name in (
        "abs",
        "all",
        "any",
        "bool",
        "dict",
        "divmod",
        "float",
        "int",
        "isinstance",
        "len",
        "list",
        "max",
        "min",
        "pow",
        "range",
        "round",
        "set",
        "sorted",
        "str",
        "sum",
        "tuple",
        "zip",
        "ValueError",
        "KeyError",
    )
}


class TunablesError(ValueError):
    """The source declares no usable TUNABLES (or their current values are missing)."""


@dataclass
class TunableSpace:
    """The tunables of one source: allowed values, current values, and the validity predicate."""

    choices: dict[str, list[Any]]
    current: dict[str, Any]
    spans: dict[str, tuple[int, int]]  # NAME -> (start, end) character offsets of its value
    predicate: Callable[[dict[str, Any]], bool] | None = None
    predicate_error: str | None = None
    constants: dict[str, Any] = field(default_factory=dict)

    def valid(self, cfg: dict[str, Any]) -> bool:
        if any(cfg.get(k) not in v for k, v in self.choices.items()):
            return False
        if self.predicate is None:
            return True
        try:
            return bool(self.predicate(dict(cfg)))
        except NameError as exc:  # it needs the real module (triton helpers...): ignore it, say so once
            self.predicate_error = f"tunables_valid needs names beyond literals ({exc}); ignoring it"
            log.warning(self.predicate_error)
            self.predicate = None
            return True
        except Exception as exc:  # a predicate that raises otherwise rejects the config
            log.debug("tunables_valid(%s) raised %s: treated as invalid", cfg, exc)
            return False

    def size(self) -> int:
        return math.prod(len(v) for v in self.choices.values())


def _offsets(source: str) -> list[int]:
    """Character offset of the start of each line (1-based line numbers index it with -1)."""
    starts, pos = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(pos)
        pos += len(line)
    starts.append(pos)
    return starts


def _char_col(line: str, byte_col: int) -> int:
    # ast columns are UTF-8 byte offsets
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def parse_tunables(source: str) -> TunableSpace:
    """Find TUNABLES, the current `NAME = literal` values and `tunables_valid` in a kernel source."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise TunablesError(f"the source does not parse: {exc}") from exc
    lines = source.splitlines(keepends=True)
    starts = _offsets(source)
    choices: dict[str, list[Any]] | None = None
    literals: dict[str, tuple[Any, tuple[int, int]]] = {}
    pred_node: ast.FunctionDef | None = None
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            try:
                value = ast.literal_eval(stmt.value)
            except (ValueError, SyntaxError, TypeError):
                continue  # not a literal: neither a tunable nor a usable constant
            if name == "TUNABLES":
                if not isinstance(value, dict) or not all(
                    isinstance(v, (list, tuple)) and v for v in value.values()
                ):
                    raise TunablesError("TUNABLES must map each name to a non-empty list of allowed values")
                choices = {str(k): list(v) for k, v in value.items()}
                continue
            v = stmt.value
            start = starts[v.lineno - 1] + _char_col(lines[v.lineno - 1], v.col_offset)
            end = starts[v.end_lineno - 1] + _char_col(lines[v.end_lineno - 1], v.end_col_offset)
            literals[name] = (value, (start, end))
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == "tunables_valid":
            pred_node = stmt
    if choices is None:
        raise TunablesError(
            "no module-level TUNABLES = {...} literal: the offline operator has nothing to tune"
        )
    missing = [k for k in choices if k not in literals]
    if missing:
        raise TunablesError(
            f"TUNABLES names without a module-level `NAME = <literal>` line: {', '.join(missing)}"
        )
    current = {k: literals[k][0] for k in choices}
    space = TunableSpace(
        choices=choices,
        current=current,
        spans={k: literals[k][1] for k in choices},
        constants={k: v for k, (v, _) in literals.items()},
    )
    if pred_node is not None:
        space.predicate, space.predicate_error = _compile_predicate(pred_node, space.constants)
    return space


def _compile_predicate(
    fn: ast.FunctionDef, constants: dict[str, Any]
) -> tuple[Callable[[dict[str, Any]], bool] | None, str | None]:
    fn = copy.deepcopy(fn)
    fn.decorator_list, fn.returns = [], None
    for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg):
        if a is not None:
            a.annotation = None  # annotations may name typing helpers the bare namespace lacks
    module = ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[]))
    namespace: dict[str, Any] = {"__builtins__": _SAFE_BUILTINS, "math": math, **constants}
    try:
        exec(compile(module, "<tunables_valid>", "exec"), namespace)  # noqa: S102 - literal-only namespace
    except Exception as exc:
        msg = f"tunables_valid could not be compiled alone ({exc}); ignoring it"
        log.warning(msg)
        return None, msg
    return namespace["tunables_valid"], None


def apply_config(source: str, space: TunableSpace, cfg: dict[str, Any]) -> str:
    """The source with each tunable's `NAME = literal` value replaced by `cfg[NAME]` (other text kept)."""
    edits = sorted(
        ((space.spans[k], repr(v)) for k, v in cfg.items() if k in space.spans and v != space.current[k]),
        key=lambda e: e[0][0],
        reverse=True,
    )
    out = source
    for (start, end), text in edits:
        out = out[:start] + text + out[end:]
    return out


def config_key(cfg: dict[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in cfg.items()))
