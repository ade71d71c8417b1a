"""Provenance attached to every measured number: GPU, driver, versions, commit, date."""
from __future__ import annotations

import datetime as _dt
import platform as _platform
import subprocess
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]


def git_commit(repo: Path = _REPO) -> str:
    """The commit the code came from; `WB_COMMIT` wins (the GPU machine gets a copy without history)."""
    import os
    import re

    env = os.environ.get("WB_COMMIT", "").strip()
    if env:
        return env
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        sha = out.stdout.strip()
        if not re.fullmatch(r"[0-9a-f]{40}", sha):
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def _driver_version() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return None


def collect() -> dict[str, Any]:
    """Everything needed to say where and when a number was measured."""
    import torch
    import triton

    info: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "python": _platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "host": _platform.node(),
        "cpu": _platform.processor() or _platform.machine(),
    }
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, gpu_count=torch.cuda.device_count(), driver=_driver_version(),
                    cuda=torch.version.cuda, sm=f"sm_{p.major}{p.minor}")
    else:
        info.update(gpu=None, driver=None, cuda=None, sm=None)
    return info
