"""Tag vocabulary of the knowledge base: levels, platforms, architectures, and how a query's
(platform, arch) selects sections.

A section is tagged `level` (general | platform | architecture | code_sample), `platform`
(cuda | rocm | cpu-interpreter | any) and `arch` (one or more of sm_80, sm_90, gfx942, ...,
or any). A query for (platform="cuda", arch="sm_90") sees sections whose platform is cuda or any
and whose arch list contains sm_90 or any.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LEVELS: tuple[str, ...] = ("general", "platform", "architecture", "code_sample")
PLATFORMS: tuple[str, ...] = ("cuda", "rocm", "cpu-interpreter", "any")

# Names people (and `platforms.Platform`) use for a platform -> the tag we store.
_PLATFORM_ALIASES = {
    "cuda": "cuda",
    "nvidia": "cuda",
    "gpu": "cuda",
    "rocm": "rocm",
    "hip": "rocm",
    "amd": "rocm",
    "cpu": "cpu-interpreter",
    "cpu-interpreter": "cpu-interpreter",
    "interpreter": "cpu-interpreter",
    "any": "any",
    "": "any",
}
_ARCH_RE = re.compile(r"^(sm_\d{2,3}[a-z]?|gfx\d{3,4}[a-z]?|cpu-interpreter|any)$")


class TagError(ValueError):
    """An unknown platform or a malformed architecture name (the message lists what is accepted)."""


def normalize_platform(platform: str | None, arch: str | None = None) -> str:
    """Map a platform name to its tag; `cuda` with a `gfx*` arch is ROCm (PyTorch's HIP build
    reports AMD GPUs as `cuda`)."""
    key = (platform or "any").strip().lower()
    if key not in _PLATFORM_ALIASES:
        raise TagError(
            f"unknown platform {platform!r}: expected one of "
            f"{sorted(set(_PLATFORM_ALIASES.values()))} (aliases: {sorted(_PLATFORM_ALIASES)})"
        )
    tag = _PLATFORM_ALIASES[key]
    a = normalize_arch(arch)
    if tag == "cuda" and a.startswith("gfx"):
        return "rocm"
    return tag


def normalize_arch(arch: str | None) -> str:
    """`sm90`/`SM_90`/`9.0` -> `sm_90`; `cpu` -> `cpu-interpreter`; None/"" -> `any`."""
    if arch is None or not str(arch).strip():
        return "any"
    a = str(arch).strip().lower()
    if a == "cpu":
        return "cpu-interpreter"
    m = re.fullmatch(r"sm_?(\d{2,3})[a-z]?", a)
    if m:
        return f"sm_{m.group(1)}"  # sm_90a is sm_90 with arch-specific features: same knowledge
    m = re.fullmatch(r"(\d+)\.(\d)", a)  # a compute capability such as "9.0"
    if m:
        return f"sm_{m.group(1)}{m.group(2)}"
    if not _ARCH_RE.match(a):
        raise TagError(
            f"malformed architecture {arch!r}: expected sm_NN (NVIDIA), gfxNNN (AMD), cpu-interpreter or any"
        )
    return a


def platform_of_arch(arch: str) -> str:
    if arch.startswith("sm_"):
        return "cuda"
    if arch.startswith("gfx"):
        return "rocm"
    if arch == "cpu-interpreter":
        return "cpu-interpreter"
    return "any"


@dataclass(frozen=True)
class TagFilter:
    """Which sections a (platform, arch) query may see. `None` fields match everything."""

    platform: str | None = None
    arch: str | None = None

    @classmethod
    def make(cls, platform: str | None, arch: str | None) -> "TagFilter":
        p = normalize_platform(platform, arch) if platform is not None else None
        a = normalize_arch(arch) if arch is not None else None
        if p is not None and a not in (None, "any"):
            ap = platform_of_arch(a)
            if p != "any" and ap != "any" and ap != p:
                raise TagError(f"architecture {a!r} belongs to platform {ap!r}, not {p!r}")
        if p == "any":
            p = None
        if a == "any":
            a = None
        if p is None and a is not None:
            p = platform_of_arch(a) if platform_of_arch(a) != "any" else None
        return cls(platform=p, arch=a)

    def accepts(self, platform: str, archs: tuple[str, ...]) -> bool:
        if self.platform is not None and platform not in ("any", self.platform):
            return False
        if self.arch is not None and "any" not in archs and self.arch not in archs:
            return False
        return True
