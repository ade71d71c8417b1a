"""Process environment rules that must hold before Triton is imported."""
from __future__ import annotations

import os
import shutil
import subprocess

_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def cuda_visible() -> bool:
    """True when an NVIDIA GPU is visible, decided without importing torch or triton."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    if os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0"):
        return True
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10)
            return out.returncode == 0 and "GPU" in out.stdout
        except (OSError, subprocess.TimeoutExpired):
            return False
    return False


def ensure_interpreter_if_no_gpu() -> bool:
    """Set TRITON_INTERPRET=1 when no GPU is visible. Call before the first `import triton`.

    Returns True when kernels will run in Triton's interpreter.
    """
    if "TRITON_INTERPRET" not in os.environ and not cuda_visible():
        os.environ["TRITON_INTERPRET"] = "1"
    return os.environ.get("TRITON_INTERPRET") == "1"


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(m in upper for m in _SECRET_MARKERS)


def stripped_environ(environ: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment without any variable whose name looks like a secret."""
    env = dict(os.environ if environ is None else environ)
    return {k: v for k, v in env.items() if not is_secret_name(k)}
