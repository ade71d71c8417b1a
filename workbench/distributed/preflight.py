"""Checks that run before a search starts: is the cluster there, and can it serve what was asked?

`ray.init(address=...)` on an address where no Ray cluster listens retries for minutes (measured:
still hanging after 120 s on a closed port and on a plain HTTP server), so the address is probed
first with a bounded TCP connect and an HTTP/2 handshake (Ray's GCS and Ray Client both speak gRPC).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from workbench.distributed.errors import (
    ClusterUnreachable,
    PlatformUnavailable,
    WorkersUnplaceable,
    WorkerVersionMismatch,
)

PLATFORM_PREFIX = "platform:"
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_H2_EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_H2_SETTINGS_TYPE = 0x4


def resolve_address(address: str | None) -> str | None:
    """The cluster to join: the argument, else RAY_ADDRESS, else None (start a local cluster)."""
    addr = address if address is not None else os.environ.get("RAY_ADDRESS")
    addr = (addr or "").strip()
    return addr or None


def split_host_port(address: str) -> tuple[str, int]:
    """`host:port` or `ray://host:port` -> (host, port); ValueError with the expected form otherwise."""
    rest = address.split("://", 1)[1] if "://" in address else address
    default_port = 10001 if address.startswith("ray://") else 6379
    host, sep, port = rest.rpartition(":")
    if not sep:
        host, port = rest, str(default_port)
    host = host.strip("[]")  # IPv6 literal
    if not host or not port.isdigit():
        raise ValueError(
            f"cannot read a Ray address from {address!r}: expected HOST:PORT (e.g. 10.0.0.5:6379), "
            "ray://HOST:PORT, or 'auto'"
        )
    return host, int(port)


def probe_address(address: str, timeout_s: float = 3.0) -> None:
    """Raise ClusterUnreachable within ~timeout_s unless a gRPC server answers at `address`."""
    if address in ("auto", "local"):
        return  # resolved by Ray from the local node's files; ray.init fails fast when there is none
    try:
        host, port = split_host_port(address)
    except ValueError as exc:
        raise ClusterUnreachable(str(exc)) from exc
    hint = (
        "Start a cluster there (`ray start --head --port=%d`), fix --ray-address / RAY_ADDRESS, "
        "or leave both unset to start a local cluster." % port
    )
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            if os.environ.get("RAY_USE_TLS", "0") in ("1", "true", "True"):
                return  # a TLS listener will not answer a cleartext HTTP/2 preface; the TCP connect must do
            sock.settimeout(timeout_s)
            sock.sendall(_H2_PREFACE + _H2_EMPTY_SETTINGS)
            head = _recv_exactly(sock, 9)
    except socket.gaierror as exc:
        raise ClusterUnreachable(f"Ray address {address!r}: unknown host {host!r} ({exc}). {hint}") from exc
    except (TimeoutError, socket.timeout) as exc:
        raise ClusterUnreachable(
            f"Ray address {address!r}: no answer within {timeout_s:g} s (host down or port filtered). {hint}"
        ) from exc
    except OSError as exc:
        raise ClusterUnreachable(
            f"Ray address {address!r} is unreachable: {exc.strerror or exc}. {hint}"
        ) from exc
    if len(head) < 9 or head[3] != _H2_SETTINGS_TYPE:
        raise ClusterUnreachable(
            f"something listens at {address!r}, but it is not a Ray cluster (no gRPC/HTTP2 "
            f"handshake; got {head[:16]!r}). {hint}"
        )


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def advertised_platforms(cluster_resources: dict[str, float]) -> dict[str, int]:
    """Platforms nodes advertise as custom resources (`platform:cuda:sm_90: 8`) -> {label: slots}."""
    return {
        k[len(PLATFORM_PREFIX) :]: int(v)
        for k, v in cluster_resources.items()
        if k.startswith(PLATFORM_PREFIX) and int(v) > 0
    }


@dataclass
class SlotPlan:
    """What one worker asks Ray for."""

    platform: str | None  # advertised label it is pinned to, or None (whatever it lands on)
    gpu: bool


def plan_slots(
    workers: int, device: str, cluster_resources: dict[str, float], platforms: list[str] | None = None
) -> list[SlotPlan]:
    """Decide the worker slots: how many per platform, GPU or CPU, pinned or not.

    - Nodes that advertise `platform:<label>` resources get workers pinned to those labels
      (round-robin over the requested labels, or over all advertised ones), never more than advertised.
    - A cluster without platform resources gets unpinned workers: one GPU each when it has GPUs and
      `device` allows it, else one CPU each; their platform is what each worker detects.
    Raises PlatformUnavailable / WorkersUnplaceable with the cluster's actual resources in the message.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    adv = advertised_platforms(cluster_resources)
    n_gpu = int(cluster_resources.get("GPU", 0))
    n_cpu = int(cluster_resources.get("CPU", 0))
    if platforms:
        if adv:
            missing = [p for p in platforms if p not in adv]
            if missing:
                raise PlatformUnavailable(
                    f"no worker of platform {', '.join(missing)} in the cluster; it advertises "
                    f"{_fmt(adv)}. Start nodes with `ray start --resources='{{\"platform:<label>\": <n>}}'`."
                )
        if workers < len(platforms):
            raise ValueError(
                f"{workers} workers cannot cover {len(platforms)} platforms {platforms}: "
                "give at least one worker per platform"
            )
    if adv:
        labels = list(platforms or sorted(adv))
        counts = dict.fromkeys(labels, 0)
        plan: list[SlotPlan] = []
        i = 0
        while len(plan) < workers and any(counts[lb] < adv[lb] for lb in labels):
            lb = labels[i % len(labels)]
            i += 1
            if counts[lb] < adv[lb]:
                counts[lb] += 1
                plan.append(SlotPlan(platform=lb, gpu=_is_gpu_label(lb) and device != "cpu"))
        return plan
    if platforms is not None and len(platforms) > 1:
        raise PlatformUnavailable(
            f"{len(platforms)} platforms requested ({', '.join(platforms)}) but the cluster advertises none "
            f"(resources: {_fmt(cluster_resources)}); unpinned workers cannot be routed by platform. "
            "Start each node with `ray start --resources='{\"platform:<label>\": <n>}'`."
        )
    use_gpu = device != "cpu" and n_gpu > 0
    if device == "cuda" and n_gpu == 0:
        raise WorkersUnplaceable(
            f"device 'cuda' asked for, but the cluster has no GPU ({_fmt(cluster_resources)})"
        )
    cap = n_gpu if use_gpu else n_cpu
    if cap < 1:
        raise WorkersUnplaceable(
            f"the cluster has no {'GPU' if use_gpu else 'CPU'} to place a worker on "
            f"({_fmt(cluster_resources)})"
        )
    return [SlotPlan(platform=None, gpu=use_gpu) for _ in range(min(workers, cap))]


def check_worker_platforms(requested: list[str] | None, found: dict[str, int]) -> None:
    """After workers reported in: every requested platform has at least one of them."""
    missing = [p for p in (requested or []) if p not in found]
    if missing:
        raise PlatformUnavailable(
            f"no worker of platform {', '.join(missing)}: the workers detected {_fmt(found) or 'nothing'}"
        )


def check_worker_versions(driver: dict[str, str], infos: list[dict[str, Any]]) -> None:
    """Every worker must run the driver's Triton: a kernel searched under another Triton is another kernel."""
    bad = [i for i in infos if i.get("triton") != driver["triton"]]
    if bad:
        rows = "; ".join(f"{i.get('host')} pid {i.get('pid')}: triton {i.get('triton')}" for i in bad[:8])
        raise WorkerVersionMismatch(
            f"{len(bad)} worker(s) run another Triton than this driver "
            f"(triton {driver['triton']}): {rows}. Install triton=={driver['triton']} "
            "on those nodes or run the search from a matching environment."
        )


def _is_gpu_label(label: str) -> bool:
    return label.startswith(("cuda", "rocm"))


def is_standard_label(label: str) -> bool:
    """Labels `describe_device` produces (cpu, cuda:sm_XX, rocm:gfxNNN); others are operator-chosen names."""
    return label == "cpu" or (_is_gpu_label(label) and ":" in label)


def _fmt(d: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in sorted(d.items())
        if not k.startswith(("node:", "memory", "object_store"))
    )
