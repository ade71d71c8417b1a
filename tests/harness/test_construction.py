"""The third red team's classes, one hostile test each, written from the class rather than one spelling.

- the policy sees what Python runs, never raises, and bounds its own recursion;
- protocol messages only in their phase; the judge reads only trusted buffers, and whatever breaks it is
  the candidate's failure, never `bad_spec` or `infra_error`;
- seeds from the OS CSPRNG, nothing derivable from what the candidate can read; inputs made on the device
  by the reference and shared, never by the candidate's process.

Every test that runs a candidate runs on the CPU and, under `pytest -m gpu`, on the GPU (`devices.py`), where
the harnesses are shared per module, one per environment.
"""
from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.harness.devices import DEVICES, sized
from workbench.harness import Harness, policy
from workbench.jobs import EvalJob
from workbench.result import Status

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
SPEC = ROOT / "examples" / "vector_add" / "spec.py"
HONEST = (ROOT / "examples" / "vector_add" / "candidate.py").read_text()
CASES = HERE / "construction"


# -- the policy sees exactly the bytes the importer runs -----------------------------------------------------
def _hidden_by(cookie: str, payload: str) -> bytes:
    """An honest candidate with `payload` hidden in a comment that the cookie's codec turns into code."""
    return (f"# -*- coding: {cookie} -*-\n" + HONEST + "\n# " + payload + "\n").encode("ascii")


@pytest.mark.parametrize("source", [
    _hidden_by("utf-7", "+AAo-import ctypes"),  # utf-7: '+AAo-' is a newline to the importer, text to a reader
    _hidden_by("latin-1", "x"),                  # any cookie other than UTF-8: refused, whatever it hides
    HONEST.encode() + b"\n# caf\xe9\n",           # latin-1 bytes without a cookie: not UTF-8
    b"\xef\xbb\xbf# -*- coding: latin-1 -*-\n" + HONEST.encode(),  # a BOM and a contradicting cookie
    HONEST.encode() + b"\n# a NUL \0 byte\n",
], ids=["utf7_cookie", "latin1_cookie", "latin1_bytes", "bom_and_cookie", "nul_byte"])
def test_the_policy_refuses_any_text_the_importer_would_read_otherwise(source: bytes) -> None:
    found = policy.check_source(source)
    assert len(found) == 1 and found[0].startswith("malformed_source:"), found
    # the client's own reading of such a file never raises, and refuses it too
    assert policy.source_problem(policy.decode_source(source)) is not None


def test_a_utf8_candidate_with_a_utf8_cookie_or_bom_still_passes_the_policy() -> None:
    assert policy.check_source(("# -*- coding: utf-8 -*-\n# héllo\n" + HONEST).encode()) == []
    assert policy.check_source(b"\xef\xbb\xbf" + HONEST.encode()) == []


@pytest.mark.parametrize("depth", [1500, 20000])
def test_deep_expressions_are_one_rejection_not_a_recursion_error(depth: int) -> None:
    src = HONEST + "\nTOTAL = " + " + ".join(["1"] * depth) + "\n"
    found = policy.check_source(src)
    assert len(found) == 1 and found[0].startswith("malformed_source:"), found[:3]
    nested = HONEST + "\nX = " + "[" * 90 + "]" * 90 + "\n"  # deep but legal nesting: not the checker's problem
    assert not any(f.startswith("malformed_source") for f in policy.check_source(nested))


def _children() -> set[int]:
    out = set()
    for tid in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            out.update(int(p) for p in Path(f"/proc/{os.getpid()}/task/{tid}/children").read_text().split())
        except OSError:
            pass
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("policy_on", [True, False], ids=["policy", "no_policy"])
@pytest.mark.parametrize("case", ["sum1500", "latin1_file", "lone_surrogate", "utf7"])
def test_the_client_never_raises_and_leaves_no_process(tmp_path: Path, case: str, policy_on: bool,
                                                       device: str) -> None:
    before = _children()
    h = Harness(device=device)
    try:
        if case == "sum1500":
            cand: str | Path = HONEST + "\nS = " + " + ".join(["1"] * 1500) + "\n"
        elif case == "latin1_file":
            cand = tmp_path / "cand.py"
            cand.write_bytes(HONEST.encode() + b"\n# na\xefve\n")
        elif case == "utf7":
            cand = tmp_path / "cand.py"
            cand.write_bytes(_hidden_by("utf-7", "+AAo-import ctypes"))
        else:
            cand = HONEST + "\n# \ud800\n"
        res = h.evaluate(SPEC, cand, **sized(device, 1), policy=policy_on)
        if case == "sum1500" and not policy_on:
            # without the policy the importer itself meets it: the candidate's failure, reported
            assert res.status in (Status.COMPILE_ERROR, Status.REJECTED, Status.PASSED), res.error
        else:
            assert res.status == Status.REJECTED, (res.status, res.error)
            assert res.error.startswith("static policy: malformed_source") and "\n" not in res.error, res.error
            assert not h.started  # refused in the caller: no server, no process
        assert res.to_json()
    finally:
        h.close()
    assert _children() <= before


def test_the_server_refuses_what_the_client_let_through_and_leaves_no_process(
        harness_env, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's own check (a caller that skips the client's) takes no spare and leaves nothing."""
    with harness_env() as h:
        h.start()
        size = sized(h.device, 1)
        job = EvalJob(spec_path=str(SPEC), candidate_source=HONEST + "\n# \udcff\n", trials=size["trials"],
                      timeout_s=60, overrides={}, shapes=size.get("shapes"), device=h.device, policy=False,
                      timing=None)
        monkeypatch.setattr(h, "precheck", lambda job: None)  # a client that does not look
        res = h.evaluate_job(job)
        assert res.status == Status.REJECTED and "malformed_source" in res.error, (res.status, res.error)
        ok = h.evaluate(SPEC, SPEC.parent / "candidate.py", **size)
        assert ok.status == Status.PASSED, ok.error


# -- protocol phases and the judge ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def _gpu_harnesses():
    """The GPU's harnesses, one per environment, shared by the module's tests (a start costs seconds)."""
    made: dict[tuple[tuple[str, str], ...], Harness] = {}
    yield made
    for h in made.values():
        h.close()


@pytest.fixture(params=DEVICES)
def harness_env(request, monkeypatch: pytest.MonkeyPatch, _gpu_harnesses):
    """`harness_env(**env)`: a harness whose server starts with `env` set; a fresh one on the CPU, on the GPU
    the module's one for that environment."""
    device = request.param

    @contextmanager
    def make(**env: str):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        if device == "cpu":
            with Harness(device="cpu") as h:
                yield h
            return
        key = tuple(sorted(env.items()))
        if key not in _gpu_harnesses:
            _gpu_harnesses[key] = Harness(device=device)  # reads the environment now: its server's
        yield _gpu_harnesses[key]
    return make


# The environment of the runs with the in-process guards off, one for all (one GPU harness): the host's
# secrets under names no filter would catch, and a world-readable .env beside the code, outside every path
# the candidate needs (made only while the test that looks for it runs).
CANARY = "wb-canary-" + os.urandom(6).hex()
HOSTFILE = ROOT / f".wb-canary-{os.getpid()}.env"
GUARDS_OFF = {"WB_GUARDS": "off", "WB_OUTBOX": "on", "WB_TEST_HOSTFILE": str(HOSTFILE), "WB_TEST_FILL_MB": "1024",
              **{name: f"{CANARY}-{name}" for name in ("MYSQL_PWD", "DATABASE_URL", "PIP_INDEX_URL", "SOME_CONFIG")}}


def test_a_message_out_of_its_phase_is_the_candidates_failure(harness_env) -> None:
    with harness_env(**GUARDS_OFF) as h:
        res = h.evaluate(SPEC, CASES / "second_isolated.py", **sized(h.device, 1), policy=False)
    assert res.status == Status.REJECTED and "forged_report" in res.violations, (res.status, res.error)


@pytest.mark.parametrize("outbox", ["on", "off"])
def test_files_planted_for_the_judge_change_nothing_or_fail_the_candidate(harness_env, outbox: str) -> None:
    with harness_env(**{**GUARDS_OFF, "WB_OUTBOX": outbox}) as h:
        res = h.evaluate(SPEC, CASES / "plants_judge_files.py", **sized(h.device, 2), policy=False)
    if outbox == "on":  # the judge reads the outbox only: the planted files are never opened
        assert res.status == Status.PASSED, (res.status, res.error)
        assert res.details["judged"]["files"] == 0
    else:  # the flat file is parsed without trusting it: the candidate's failure, never the spec's
        assert res.status == Status.INCORRECT, (res.status, res.error)
        assert "unreadable output" in res.error or "output refused" in res.error, res.error


def test_the_output_file_parser_refuses_what_it_does_not_expect() -> None:
    import torch

    from workbench.harness import outfile

    good = Path(os.environ.get("TMPDIR", "/tmp")) / f"wb-outfile-{os.getpid()}"
    try:
        outfile.write(good, [torch.arange(6, dtype=torch.float32).reshape(2, 3), 3, None])
        data = good.read_bytes()
    finally:
        good.unlink(missing_ok=True)
    got = outfile.parse(data)
    assert torch.equal(got[0], torch.arange(6, dtype=torch.float32).reshape(2, 3)) and got[1:] == [3, None]
    head = outfile.MAGIC + (10).to_bytes(8, "little")
    for bad in [b"PK\x03\x04" + data, data[:-4], head + b"[" * 10, outfile.MAGIC + (1 << 40).to_bytes(8, "little"),
                data.replace(b'"float32"', b'"object" ')]:
        with pytest.raises(outfile.OutputFileError):
            outfile.parse(bad)


# -- seeds ---------------------------------------------------------------------------------------------------
def test_input_seeds_come_from_a_256_bit_key_drawn_apart_from_every_seed_the_candidate_sees(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import secrets as _secrets
    import shutil

    from workbench.harness import server
    from workbench.harness.trusted_messages import EvalRequest

    monkeypatch.setenv("WB_SANDBOX", "off")
    monkeypatch.setattr(server.Server, "ensure_spares", lambda self: None)
    drawn: list[tuple[str, int]] = []
    real_bytes, real_bits = _secrets.token_bytes, _secrets.randbits
    monkeypatch.setattr(server.secrets, "token_bytes", lambda n: drawn.append(("bytes", n)) or real_bytes(n))
    monkeypatch.setattr(server.secrets, "randbits", lambda n: drawn.append(("bits", n)) or real_bits(n))
    srv = server.Server("cpu")
    try:
        keys = set()
        for _ in range(3):
            drawn.clear()
            srv.run_job(EvalRequest(candidate_source="\udcff", trials=1))  # refused early, after the draws
            assert ("bytes", 32) in drawn and any(k == "bits" and n >= 60 for k, n in drawn), drawn
            key = srv.secret
            assert isinstance(key, bytes) and len(key) >= 16
            # the plan's seed (trial and model seeds, which the candidate sees) is its own draw
            assert srv.plan_seed.to_bytes(8, "little") not in key
            seeds = srv._seeds(1, 0, 4)
            assert len(set(seeds)) == 4 and all(0 <= s < 2**62 for s in seeds)
            assert seeds[0] == int.from_bytes(hashlib.blake2b(b"1:0:0", digest_size=8, key=key).digest(),
                                              "little") >> 2
            keys.add(key)
        assert len(keys) == 3
    finally:
        shutil.rmtree(srv.root, ignore_errors=True)


def test_the_candidate_never_makes_its_inputs_so_a_spy_in_the_specs_torch_sees_nothing(harness_env) -> None:
    """The class "the candidate replaces a torch function `get_inputs()` calls" (past the policy and the guards:
    here the spec module's own `torch`, which no patch detector watches): where the candidate's process made its
    inputs from seeds, the spy computed every answer while the inputs were made, before `go`, and passed with
    no work in the clock. The reference makes them now, into memory it shares (`inbox.py`): the spy sees
    nothing, the candidate's own wrong forward is judged."""
    with harness_env(**{**GUARDS_OFF, "WB_DEVICE_INPUTS": "on"}) as h:
        # one trial: a second refills the first's buffers, whose pointer would give the spy's stale answer
        res = h.evaluate(SPEC, CASES / "spies_on_input_making.py", **sized(h.device, 1), policy=False)
    assert res.details.get("inputs") == "made on the device", res.details  # the path under test, shared
    assert res.status == Status.INCORRECT and "output mismatch" in res.error, (res.status, res.error)


@pytest.mark.parametrize("shared", ["on", "off"])
def test_an_inputs_request_out_of_its_turn_is_a_forged_report(harness_env, shared: str) -> None:
    with harness_env(**{**GUARDS_OFF, "WB_DEVICE_INPUTS": shared}) as h:
        res = h.evaluate(SPEC, CASES / "asks_for_inputs_out_of_turn.py", **sized(h.device, 2), policy=False)
    assert res.status == Status.REJECTED and "forged_report" in res.violations, (res.status, res.error)


# -- no grace period after `done` -------------------------------------------------------------------------------
_AFTER_DONE = """
import os, sys, time
cmd, rep, work = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
os.read(cmd, 1)                      # `go`
os.write(rep, b"d")                  # `done`
t0 = time.process_time()
while time.process_time() - t0 < work:
    pass                             # work after `done`: the grace period an attacker would use
os.read(cmd, 1)                      # then wait for the next command, as an honest process does at once
"""


@pytest.mark.parametrize("work_s", [0.0, 0.1], ids=["honest", "works_after_done"])
def test_no_grace_period_after_done(work_s: float) -> None:
    """The trusted side's check after `done`, on a process that works after saying it (a CPU round's or a
    device round's candidate alike): any work beyond a send and a read is seen, however short."""
    import subprocess
    import sys

    from workbench.harness import job_pipeline
    from workbench.harness.settings import HarnessSettings

    cmd_r, cmd_w = os.pipe()
    rep_r, rep_w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", _AFTER_DONE, str(cmd_r), str(rep_w), str(work_s)],
                            pass_fds=(cmd_r, rep_w))
    try:
        os.write(cmd_w, b"g")
        assert os.read(rep_r, 1) == b"d"
        quiet = job_pipeline.idle_after_done(proc.pid, HarnessSettings().after_done_cpu_ms)
        if quiet is None:
            pytest.skip("/proc/<pid>/syscall is not readable here")
        assert quiet is (work_s == 0.0), (work_s, quiet)
    finally:
        os.write(cmd_w, b"x")
        proc.wait(timeout=30)
        for fd in (cmd_r, cmd_w, rep_r, rep_w):
            os.close(fd)


_STARVED_AFTER_DONE = """
import os, sys
cmd, rep = int(sys.argv[1]), int(sys.argv[2])
os.read(cmd, 1)                      # `go`
os.write(rep, b"d")                  # `done`
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # from now on it runs only when a CPU is idle
for _ in range(200):
    os.sched_yield()                 # runnable, no work: a loaded host keeps it from its read for a while
os.read(cmd, 1)
"""


def test_a_loaded_host_is_not_work_after_done() -> None:
    """After `done` an honest process that the scheduler keeps from the CPU (every core busy) is runnable, not
    working: the check waits on its own CPU clock instead of calling it work after 0.5 s of wall time.

    The load is made certain and bounded, whatever else the host runs: the process and two spinning hogs share
    one core (`sched_setaffinity`), `go` is sent only once both hogs spin, and 1.5 s after `done` the hogs are
    killed and the process put back in the normal class (it made itself SCHED_IDLE), so it reaches its read
    soon after however loaded the host is. Left to the scheduler across all cores (the first version), a
    SCHED_IDLE process got through its yields within 0.5 s in about a third of the runs on the loaded 2-core
    CI host (the test failed for lack of the load it is about), and under more load stayed starved past the
    check's 10 s."""
    import multiprocessing
    import subprocess
    import sys
    import threading
    import time

    from workbench.harness import job_pipeline
    from workbench.harness.settings import HarnessSettings

    load_s = 1.5
    cmd_r, cmd_w = os.pipe()
    rep_r, rep_w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", _STARVED_AFTER_DONE, str(cmd_r), str(rep_w)],
                            pass_fds=(cmd_r, rep_w))
    spin = "import time\nprint('spin', flush=True)\nt = time.time()\nwhile time.time() - t < 60: pass"
    core = max(os.sched_getaffinity(0))
    try:
        os.sched_setaffinity(proc.pid, {core})
        pinned = True
    except OSError:  # no affinity here: every core busy instead
        pinned = False
    hogs = [subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE, text=True)
            for _ in range(2 if pinned else multiprocessing.cpu_count() + 1)]
    ended = threading.Event()

    def relieve() -> None:
        """After `load_s`: no more hogs, and the process back in the normal class until the test ends."""
        if ended.wait(load_s):
            return
        for h in hogs:
            h.kill()
        while not ended.wait(0.05):
            try:
                if os.sched_getscheduler(proc.pid) != os.SCHED_OTHER:
                    os.sched_setscheduler(proc.pid, os.SCHED_OTHER, os.sched_param(0))
            except OSError:  # gone, or not ours to change: the hogs are gone at least
                return

    reliever = threading.Thread(target=relieve, daemon=True)
    try:
        for h in hogs:
            if pinned:
                os.sched_setaffinity(h.pid, {core})
            assert h.stdout.readline().strip() == "spin"
        os.write(cmd_w, b"g")
        assert os.read(rep_r, 1) == b"d"
        t0 = time.monotonic()
        reliever.start()
        quiet = job_pipeline.idle_after_done(proc.pid, HarnessSettings().after_done_cpu_ms)
        waited = time.monotonic() - t0
        if quiet is None:
            pytest.skip("/proc/<pid>/syscall is not readable here")
        assert quiet is True and waited > 0.5, waited  # it did wait past 0.5 s, and called it no work
    finally:
        ended.set()
        if reliever.is_alive():
            reliever.join()
        for h in hogs:
            h.kill()
            h.wait()
            h.stdout.close()
        os.write(cmd_w, b"x")
        proc.wait(timeout=30)
        for fd in (cmd_r, cmd_w, rep_r, rep_w):
            os.close(fd)


@pytest.mark.parametrize("policy_on", [True, False], ids=["policy", "no_policy"])
def test_no_candidate_code_runs_in_the_save_after_done(harness_env, policy_on: bool) -> None:
    with harness_env() as h:
        res = h.evaluate(SPEC, CASES / "works_in_the_save.py", **sized(h.device, 2), policy=policy_on,
                         timeout_s=120)
    assert res.status != Status.PASSED and res.fitness == 0.0, (res.status, res.fitness, res.error)
    if not policy_on:
        assert res.status in (Status.REJECTED, Status.INCORRECT), (res.status, res.error)


# -- the captured graph's audit (the rules; the driver's side runs on the GPU: test_construction_gpu.py) ------
def test_the_graph_audit_allows_only_the_candidates_triton_and_glue() -> None:
    from workbench.harness.graph_audit import TRITON_TAG, audit, triton_kernels_in

    src = HONEST + "\n@triton.autotune(configs=[], key=[])\n@triton.jit\ndef second_kernel(x):\n    pass\n"
    names = triton_kernels_in(src)
    assert "second_kernel" in names and "ModelNew" not in names
    copy = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
    gemm = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off"
    triton = [TRITON_TAG + n for n in sorted(names) + ["second_kernel_0d1d2de"]]  # known by handle (kernel_names)
    assert audit(triton + [copy], names) == ([], [])
    reduce = "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_9func_wrapper_tIfZNS0_11sum_functorE"
    found, unknown = audit([gemm, reduce, "<graph node of type 3>", TRITON_TAG + "second_kernel", "mystery"], names)
    assert found == [f"forbidden_graph_kernel:{gemm[:160]}", f"forbidden_graph_kernel:{reduce[:160]}",
                     "forbidden_graph_kernel:<graph node of type 3>"]
    assert unknown == ["mystery"]


# -- an environment and a filesystem allowed, not filtered ----------------------------------------------------
def test_only_allowed_names_reach_the_server_or_the_candidate() -> None:
    from workbench.harness.environ import candidate_environ, server_environ

    host = {"PATH": "/usr/bin", "MYSQL_PWD": "x", "DATABASE_URL": "postgres://u:p@h/db", "PIP_INDEX_URL": "https://u:p@i",
            "AWS_SESSION": "y", "TRITON_INTERPRET": "1", "WB_SPARES": "1", "WB_TEST_API_KEY": "sk", "PYTHONPATH": "/r"}
    server = server_environ(host)
    assert set(server) == {"PATH", "TRITON_INTERPRET", "WB_SPARES", "PYTHONPATH"}
    cand = candidate_environ(server, "/tmp/wb-sandbox")
    assert "PYTHONPATH" not in cand and cand["HOME"] == "/tmp/wb-sandbox" and cand["TRITON_INTERPRET"] == "1"


ROOT_ONLY = os.geteuid() == 0


@pytest.mark.skipif(not ROOT_ONLY, reason="namespaces, mounts and uids need root")
def test_host_secrets_and_files_do_not_reach_the_candidate(harness_env) -> None:
    HOSTFILE.write_text(f"API={CANARY}-file\n")
    os.chmod(HOSTFILE, 0o644)
    try:
        with harness_env(**GUARDS_OFF) as h:
            res = h.evaluate(SPEC, CASES / "reads_host.py", **sized(h.device, 1), policy=False)
    finally:
        HOSTFILE.unlink()
    assert res.status == Status.PASSED, (res.status, res.error)
    assert CANARY not in res.to_json(), res.stdout_tail
    lines = {ln.split(" ", 1)[0]: ln for ln in res.stdout_tail.splitlines() if " " in ln}
    assert "HOSTFILE" in lines and "FileNotFoundError" in lines["HOSTFILE"], lines.get("HOSTFILE")
    assert res.isolation["claimed"]["masked"], res.isolation
    # its writable space is a small bounded tmpfs, not the host's memory: 1 GB does not fit
    fill = lines.get("FILL", "")
    assert "stopped at" in fill and int(fill.split("stopped at ")[1].split(" ")[0]) <= 300, fill
