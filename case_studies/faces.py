"""The public face every case-study package shows, written once: its dispatcher, `ModelNew` and
`BENCHMARK`, each imported from its module on first use (PEP 562). Importing a case study's
`reference` or `spec`, as a spec file does, must not pull in Triton before the caller chose the
interpreter; only `kernel` and `dispatch` import it."""
from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_face(package: str, dispatcher: str) -> tuple[list[str], Callable[[str], Any]]:
    """`__all__` and the module `__getattr__` of `package`: `dispatcher` from `.dispatch`, `ModelNew` from
    `.kernel`, `BENCHMARK` from `.bench`."""
    home = {"BENCHMARK": "bench", "ModelNew": "kernel", dispatcher: "dispatch"}

    def __getattr__(name: str) -> Any:
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home[name]}"), name)

    return sorted(home), __getattr__
