"""Lazy package exports: a package names what it exports and from which module, and imports that module on
first use (PEP 562). The command line registers every verb at start; a verb that needs no torch (`eval`'s
client, `--help`) then starts without importing it (seconds on a cold start). Here, on the ground floor, so
that the libraries (profiling, retrieval) may use it too. A package keeps the same imports under
`TYPE_CHECKING`, so readers, type checkers and `tests/test_imports.py` still see its dependencies."""
from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose `exports` maps each public name to the module (absolute
    or `.relative`) that defines it."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        globals_of(package)[name] = value  # once: later lookups are plain attribute reads
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals_of(package)) | set(exports))

    return __getattr__, __dir__


def globals_of(package: str) -> dict[str, Any]:
    import sys

    return vars(sys.modules[package])
