"""Checks that run before a search starts: bad addresses fail fast and clearly; slot planning."""

from __future__ import annotations

import http.server
import socket
import threading
import time

import pytest

from workbench.distributed.errors import (
    ClusterUnreachable,
    PlatformUnavailable,
    WorkersUnplaceable,
    WorkerVersionMismatch,
)
from workbench.distributed.preflight import (
    check_worker_platforms,
    check_worker_versions,
    plan_slots,
    probe_address,
    resolve_address,
    split_host_port,
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_closed_port_fails_fast_with_a_hint():
    port = _free_port()
    t0 = time.monotonic()
    with pytest.raises(ClusterUnreachable, match=rf"127.0.0.1:{port}.*unreachable.*ray start --head"):
        probe_address(f"127.0.0.1:{port}", timeout_s=2)
    assert time.monotonic() - t0 < 3


def test_a_non_ray_server_is_told_apart_from_a_cluster():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        t0 = time.monotonic()
        with pytest.raises(ClusterUnreachable, match="not a Ray cluster"):
            probe_address(f"127.0.0.1:{srv.server_address[1]}", timeout_s=2)
        assert time.monotonic() - t0 < 5
    finally:
        srv.shutdown()


def test_silent_listener_times_out_instead_of_hanging():
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)  # accepts the TCP connection, never answers the handshake
    try:
        t0 = time.monotonic()
        with pytest.raises(ClusterUnreachable, match="no answer within 1 s"):
            probe_address(f"127.0.0.1:{lst.getsockname()[1]}", timeout_s=1)
        assert time.monotonic() - t0 < 3
    finally:
        lst.close()


def test_unknown_host_and_bad_syntax():
    with pytest.raises(ClusterUnreachable, match="unknown host"):
        probe_address("no-such-host.invalid:6379", timeout_s=2)
    with pytest.raises(ClusterUnreachable, match="expected HOST:PORT"):
        probe_address("10.0.0.1:port", timeout_s=1)
    assert split_host_port("ray://head:10001") == ("head", 10001)
    assert split_host_port("[::1]:6379") == ("::1", 6379)


def test_address_comes_from_argument_then_environment(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")
    assert resolve_address(None) == "10.1.2.3:6379"
    assert resolve_address("head:6380") == "head:6380"
    monkeypatch.delenv("RAY_ADDRESS")
    assert resolve_address(None) is None


def test_plan_pins_workers_to_advertised_platforms():
    res = {"CPU": 64.0, "GPU": 12.0, "platform:cuda:sm_90": 8.0, "platform:cuda:sm_80": 4.0}
    plan = plan_slots(10, "auto", res)
    by = {p: sum(1 for s in plan if s.platform == p) for p in ("cuda:sm_80", "cuda:sm_90")}
    assert by == {"cuda:sm_80": 4, "cuda:sm_90": 6} and all(s.gpu for s in plan)
    plan = plan_slots(20, "auto", res, platforms=["cuda:sm_90"])
    assert len(plan) == 8 and {s.platform for s in plan} == {"cuda:sm_90"}  # capped by what is advertised
    with pytest.raises(PlatformUnavailable, match="gfx942.*advertises cuda:sm_80=4, cuda:sm_90=8"):
        plan_slots(4, "auto", res, platforms=["cuda:sm_90", "rocm:gfx942"])


def test_plan_without_platform_resources():
    assert [s.gpu for s in plan_slots(3, "auto", {"CPU": 16.0, "GPU": 2.0})] == [True, True]
    assert [s.gpu for s in plan_slots(3, "cpu", {"CPU": 16.0, "GPU": 2.0})] == [False] * 3
    with pytest.raises(WorkersUnplaceable, match="no GPU"):
        plan_slots(1, "cuda", {"CPU": 4.0})
    with pytest.raises(PlatformUnavailable, match="advertises none"):
        plan_slots(2, "auto", {"CPU": 4.0}, platforms=["cpu", "cuda:sm_90"])


def test_worker_checks():
    infos = [{"host": "a", "pid": 1, "triton": "3.6.0"}, {"host": "b", "pid": 2, "triton": "3.5.1"}]
    with pytest.raises(WorkerVersionMismatch, match=r"b pid 2: triton 3.5.1.*triton==3.6.0"):
        check_worker_versions({"triton": "3.6.0"}, infos)
    check_worker_versions({"triton": "3.6.0"}, infos[:1])
    with pytest.raises(PlatformUnavailable, match="cuda:sm_90.*detected cpu=2"):
        check_worker_platforms(["cuda:sm_90"], {"cpu": 2})
