"""The environments the harness's processes get: allowed, not filtered.

A filter that strips names looking like secrets (`*KEY*`, `*TOKEN*`...) lets through every secret named
otherwise (`MYSQL_PWD`, `DATABASE_URL`, `PIP_INDEX_URL` with a password in it) and shows it to the
candidate, in `os.environ` and in `/proc/self/environ` (a forked process keeps its parent's exec-time
block). So the harness server is started with only what Python, CUDA, Triton and the harness itself
need (`server_environ`), and the candidate process replaces even that with its own smaller set
(`candidate_environ`) before any candidate code exists. Anything not named here does not exist for them.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from workbench.env import is_secret_name

# Names kept as they are (when set).
_NAMES = frozenset("""
PATH LANG LANGUAGE LC_ALL LC_CTYPE LC_NUMERIC TZ TERM USER LOGNAME SHELL HOME TMPDIR
PYTHONPATH PYTHONHASHSEED PYTHONDONTWRITEBYTECODE PYTHONUNBUFFERED PYTHONIOENCODING VIRTUAL_ENV
LD_LIBRARY_PATH CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER CUDA_HOME CUDA_PATH CUDA_MODULE_LOADING
CUDA_LAUNCH_BLOCKING NVIDIA_VISIBLE_DEVICES NVIDIA_DRIVER_CAPABILITIES
OMP_NUM_THREADS OMP_WAIT_POLICY MKL_NUM_THREADS OPENBLAS_NUM_THREADS NUMEXPR_NUM_THREADS
CC CXX HF_HUB_OFFLINE
""".split())
# Prefixes kept: Triton's and PyTorch's own knobs and the harness's settings.
_PREFIXES = ("TRITON_", "TORCH_", "PYTORCH_", "TORCHINDUCTOR_", "WB_")
# What the candidate loses besides: the harness's paths and the server's own settings stay with the server.
_SERVER_ONLY = frozenset({"PYTHONPATH", "VIRTUAL_ENV", "USER", "LOGNAME", "SHELL", "TERM", "HF_HUB_OFFLINE"})


def allowed(name: str) -> bool:
    if is_secret_name(name):  # a knob named like a secret (`WB_TEST_API_KEY`) is still a secret
        return False
    return name in _NAMES or name.startswith(_PREFIXES)


def server_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The harness server's environment: the allowed names of `environ` (default: this process's)."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if allowed(k)}


def candidate_environ(environ: Mapping[str, str], sandbox: str) -> dict[str, str]:
    """The candidate process's environment: the allowed names, less the server's own, with its home,
    temp and cache directories in its sandbox and the OpenMP workers sleeping when idle (a spinning worker
    after `done` would read as work after `done`)."""
    env = {k: v for k, v in environ.items() if allowed(k) and k not in _SERVER_ONLY}
    env.update({"HOME": sandbox, "TMPDIR": f"{sandbox}/tmp", "TRITON_CACHE_DIR": f"{sandbox}/triton-cache",
                "TORCHINDUCTOR_CACHE_DIR": f"{sandbox}/inductor-cache", "OMP_WAIT_POLICY": "PASSIVE"})
    return env


__all__ = ["allowed", "candidate_environ", "server_environ"]
