"""The harness's `WB_*` settings, read once from the environment into one frozen type.

The fork server reads them when it starts (`Server.settings = HarnessSettings.from_env()`); the job pipeline
takes them from the server, and the candidate and reference processes from the server they were forked
from (`Server._spare_main` passes them on), so every process of one server sees the same values. Tools
outside the server (a benchmark's `InputCache`) call `from_env()` themselves. Nothing else in the harness
reads a `WB_*` name: the client only writes some into the server's environment (`__init__.py`). A setting
whose default depends on the device (`WB_SPARES`, `WB_DEVICE_INPUTS`) keeps what was set, and a method
gives the value for a device.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


def _on(env: Mapping[str, str], name: str) -> bool:
    """An on/off setting whose default is on: only the word `off` turns it off."""
    return env.get(name, "on") != "off"


@dataclass(frozen=True)
class HarnessSettings:
    # One round's input sets the server stages for the candidate (`rounds.RoundPlan`), in MB.
    stage_mb: float = 512.0                 # WB_STAGE_MB
    # All the sets one evaluation stages for the candidate's rounds: lowers the timed rounds for huge inputs.
    stage_total_mb: float = 3072.0          # WB_STAGE_TOTAL_MB
    # One round's sets when the reference makes the inputs on the device and shares them (`inbox.py`): the
    # shelf's size.
    device_stage_mb: float = 4096.0         # WB_DEVICE_STAGE_MB
    # What the candidate may allocate itself (resident memory on the GPU, address space on the CPU), on top
    # of what the harness stages into its process: an honest kernel at published sizes is never killed.
    mem_limit_gb: float = 8.0               # WB_MEM_LIMIT_GB
    # The candidate's own writable space (its stdout, temp files, Triton's cache): a tmpfs of this size (and
    # 4096 files), host memory, so it is taken from its memory limit. The outbox's bytes, laid out by the
    # reference, come on top (`job_pipeline._JobRun.candidate`).
    sandbox_mb: int = 256                   # WB_SANDBOX_MB
    # The timed outputs the judge reads, in bytes of outputs (`outbox.judged_outputs`), or without an outbox
    # of input sets (a proxy of the outputs' size): at least 3 without one, `outbox.MIN_TIMED` with one.
    judge_mb: float = 512.0                 # WB_JUDGE_MB
    # Outputs larger are judged on a sample beyond each shape's first trial (`outbox.sampled`).
    judge_full_mb: float = 256.0            # WB_JUDGE_FULL_MB
    # off: every judged output through a file of its own, no outbox.
    outbox: bool = True                     # WB_OUTBOX
    # On the GPU, the outbox's slots in the reference's device memory (`devmem`); off: the file.
    device_outbox: bool = True              # WB_DEVICE_OUTBOX
    # CPU time the candidate's main thread may spend between the server holding `done` and its waiting for
    # the next command (a send and a read: tens of microseconds); more is work after `done`.
    after_done_cpu_ms: float = 3.0          # WB_AFTER_DONE_CPU_MS
    # off: no namespaces, no uid of its own for the candidate (the trusted side's own tests).
    sandbox: bool = True                    # WB_SANDBOX
    # Spares forked ahead per role; unset: 2 on the GPU, 1 on the CPU (`spares_for`).
    spares: str | None = None               # WB_SPARES
    # off: no device time by graph replay, the wall clock only.
    device_time: bool = True                # WB_DEVICE_TIME
    # The GPU warm-up before a round, in ms of products; 0: 6 fp16 4096^3 products (`proc_common.gpu_warm`).
    warm_ms: float = 0.0                    # WB_WARM_MS
    # off: no guards and no run-time allow-list in the candidate's process (a trusted diagnosis).
    guards: bool = True                     # WB_GUARDS
    # `on` / anything else; unset: on on the GPU, off on the CPU (`device_inputs_for`).
    device_inputs: str | None = None        # WB_DEVICE_INPUTS
    # The host input cache's directory; `off`, `0`, `no`, `false`: none; empty: /dev/shm (`input_cache`).
    input_cache: str = ""                   # WB_INPUT_CACHE
    input_cache_mb: float = 2048.0          # WB_INPUT_CACHE_MB

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> HarnessSettings:
        """The settings of `env` (default: this process's environment), each variable's default when unset."""
        e = os.environ if env is None else env
        return cls(
            stage_mb=float(e.get("WB_STAGE_MB", "512")),
            stage_total_mb=float(e.get("WB_STAGE_TOTAL_MB", "3072")),
            device_stage_mb=float(e.get("WB_DEVICE_STAGE_MB", "4096")),
            mem_limit_gb=float(e.get("WB_MEM_LIMIT_GB", "8")),
            sandbox_mb=int(e.get("WB_SANDBOX_MB", "256")),
            judge_mb=float(e.get("WB_JUDGE_MB", "512")),
            judge_full_mb=float(e.get("WB_JUDGE_FULL_MB", "256")),
            outbox=_on(e, "WB_OUTBOX"),
            device_outbox=_on(e, "WB_DEVICE_OUTBOX"),
            after_done_cpu_ms=float(e.get("WB_AFTER_DONE_CPU_MS", "3")),
            sandbox=_on(e, "WB_SANDBOX"),
            spares=e.get("WB_SPARES"),
            device_time=_on(e, "WB_DEVICE_TIME"),
            warm_ms=float(e.get("WB_WARM_MS", "0") or 0),
            guards=_on(e, "WB_GUARDS"),
            device_inputs=e.get("WB_DEVICE_INPUTS"),
            input_cache=e.get("WB_INPUT_CACHE", ""),
            input_cache_mb=float(e.get("WB_INPUT_CACHE_MB", 2048)),
        )

    def spares_for(self, device: str) -> int:
        """Spares of each role the server keeps forked ahead on `device`."""
        return int(self.spares if self.spares is not None else ("2" if device == "cuda" else "1"))

    def device_inputs_for(self, device: str) -> bool:
        """Whether the reference tries making inputs on `device` (on the CPU: a test of the same path)."""
        return (self.device_inputs if self.device_inputs is not None else
                ("on" if device == "cuda" else "off")) == "on"


__all__ = ["HarnessSettings"]
