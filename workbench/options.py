"""Command lines generated from typed configs: each dataclass field carries its flag, help and kind.

A config field declared with `option(...)` is one command-line flag. The parser gets every flag with
`argparse.SUPPRESS` as its default, so `given(args, Config)` holds exactly the flags the user typed:
a new run builds `Config(**given)` (the dataclass keeps the one set of defaults), a resumed one applies
them with `dataclasses.replace(stored, **given)`.

Kinds: `value` (one value, its type read from the annotation), `flag` (a bool: `--x` when the default is
False, `--no-x` when it is True; `const` sets what the flag stores), `append` (repeatable, a list),
`csv` (`A,B`, a list of the annotation's item type), `pairs` (repeatable `NAME=VALUE`, a dict). A field's
`parse` converts what a `value` (then read as a string) or `pairs` flag was given.
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import MISSING, Field, field
from typing import Any, Callable, Iterable

KINDS = ("value", "flag", "append", "csv", "pairs")
_TYPES: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "str": str}


def option(default: Any = MISSING, *, help: str, flag: str | None = None, kind: str = "value",  # noqa: A002
           choices: Iterable[str] | None = None, metavar: str | None = None, const: Any = None,
           parse: Callable[[Any], Any] | None = None, cli: bool = True,
           default_factory: Callable[[], Any] | Any = MISSING) -> Any:
    """A dataclass field that is also a command-line flag (`cli=False`: a field no flag sets)."""
    if kind not in KINDS:
        raise ValueError(f"unknown option kind {kind!r}: expected one of {', '.join(KINDS)}")
    meta = {"help": help, "flag": flag, "kind": kind, "choices": tuple(choices) if choices else None,
            "metavar": metavar, "const": const, "parse": parse, "cli": cli}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata={"option": meta})
    return field(default=default, metadata={"option": meta})


def meta(f: Field) -> dict[str, Any]:
    got = f.metadata.get("option")
    if got is None:
        raise TypeError(f"field {f.name!r} is not declared with workbench.options.option(...)")
    return got


def flag_name(f: Field) -> str:
    m = meta(f)
    if m["flag"]:
        return m["flag"]
    name = f.name.replace("_", "-")
    if m["kind"] == "flag" and f.default is True:
        return f"--no-{name}"
    return f"--{name}"


def cli_fields(cls: type, names: Iterable[str] | None = None) -> list[Field]:
    """The fields of `cls` that are flags (only `names`, in their order, when given)."""
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    chosen = [by_name[n] for n in names] if names is not None else list(by_name.values())
    return [f for f in chosen if meta(f)["cli"]]


def _default_text(f: Field) -> str:
    if f.default is not MISSING:
        value = f.default
    elif f.default_factory is not MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
    else:
        return ""
    if dataclasses.is_dataclass(value) or value in (None, [], {}, ()) or isinstance(value, bool):
        return ""  # a nested settings record: its own help lists its defaults
    if isinstance(value, list):
        value = ",".join(str(v) for v in value)
    return f" (default {value})"


def _scalar_type(annotation: str) -> Callable[[str], Any]:
    base = annotation.replace(" ", "").replace("|None", "").replace("None|", "")
    if base.startswith("list[") and base.endswith("]"):
        base = base[5:-1]
    return _TYPES.get(base, str)


def add_arguments(parser: argparse.ArgumentParser, cls: type, names: Iterable[str] | None = None) -> None:
    """One flag per option field of `cls`, every one defaulting to SUPPRESS (absent unless typed)."""
    for f in cli_fields(cls, names):
        m = meta(f)
        text = m["help"]
        kw: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS}
        kind = m["kind"]
        if kind == "flag":
            kw.update(action="store_const", const=(m["const"] if m["const"] is not None else not f.default))
        else:
            text += _default_text(f)
            kw["metavar"] = m["metavar"] or ("|".join(m["choices"]) if m["choices"] else None)
            if kind == "value":
                kw["type"] = str if m["parse"] is not None else _scalar_type(str(f.type))
                kw["metavar"] = kw["metavar"] or {int: "N", float: "X"}.get(kw["type"], "VALUE")
            elif kind in ("append", "pairs"):
                kw["action"] = "append"
                kw["metavar"] = m["metavar"] or ("NAME=VALUE" if kind == "pairs" else None)
            elif kind == "csv":
                item = _scalar_type(str(f.type))
                kw["type"] = lambda s, item=item: [item(x) for x in s.split(",") if x.strip()]
                kw["metavar"] = m["metavar"] or "A,B"
        parser.add_argument(flag_name(f), help=text, **kw)


def given(args: argparse.Namespace, cls: type, names: Iterable[str] | None = None) -> dict[str, Any]:
    """The option fields of `cls` the user typed, converted (pairs through the field's `parse`)."""
    out: dict[str, Any] = {}
    present = vars(args)
    for f in cli_fields(cls, names):
        if f.name not in present:
            continue
        value = present[f.name]
        m = meta(f)
        if m["parse"] is not None and m["kind"] in ("value", "pairs"):
            value = m["parse"](value)
        out[f.name] = value
    return out
