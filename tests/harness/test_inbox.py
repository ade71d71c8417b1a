"""The inputs' way in (`inbox.py`, issue 32): where inputs are made on the device, the trusted reference makes
every set in memory it owns and shares; the candidate's process never runs `get_inputs()` and never learns a
seed. These run on the CPU (the shelf a sealed memfd, the GPU's device memory mocked at the file boundary);
the GPU's own path is `test_construction_gpu.py`'s and every `cuda` parameter of `test_construction.py`."""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
import torch

from workbench.harness import inbox, messages, plan
from workbench.harness.settings import HarnessSettings
from workbench.harness.trusted_messages import Filled, InputsShared, ReferenceJob

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "vector_add" / "spec.py"


# -- the layout ------------------------------------------------------------------------------------------------
def test_a_set_layout_round_trips_and_a_forged_one_is_refused() -> None:
    lay = inbox.describe([torch.zeros(5), torch.ones(3, 2, dtype=torch.int64), 7, None], "cpu")
    assert lay is not None and lay.stride % inbox.ALIGN == 0
    assert inbox.SetLayout.from_dict(json.loads(json.dumps(lay.to_dict()))) == lay
    good = lay.to_dict()
    for forged in ({**good, "stride": 1}, {**good, "extra": 1}, {"entries": [["t", "pickle", [5], 0]], "stride": 512},
                   {"entries": [["t", "float32", [5], 3]], "stride": 512},         # an offset off the alignment
                   {"entries": [["t", "float32", [1000], 0]], "stride": 512},      # past its set's stride
                   {"entries": [["t", "float32", [True], 0]], "stride": 512},      # a bool is no size
                   {"entries": [["v", {"a": 1}]], "stride": 512}, [good]):
        with pytest.raises(ValueError):
            inbox.SetLayout.from_dict(forged)


def test_a_set_the_shelf_cannot_hold_as_it_is_has_no_layout() -> None:
    x = torch.randn(4, 6)
    assert inbox.describe([x], "cpu") is not None
    for inputs in ([x.t()], [x[1:]], [x, x], [x, x[0]], [torch.randn(3, requires_grad=True)],
                   [torch.nn.Parameter(torch.randn(3))], [[1, 2]], [x.to_sparse()]):
        assert inbox.describe(inputs, "cpu") is None, inputs
    assert inbox.describe([x], "cuda") is None  # not on the device it says


# -- the reference makes, shares and fills; the candidate's side reads views ------------------------------------------
@pytest.fixture
def reference(tmp_path: Path):
    from workbench.harness.reference_proc import _Reference

    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    stage = tmp_path / "stage"
    stage.mkdir()
    job = ReferenceJob(device="cpu", spec_path=str(SPEC), stage=str(stage), seed=2_000_123, trials=3)
    ref = _Reference(job, HarnessSettings(device_inputs="on", input_cache="off"), sock=a.fileno())
    yield ref, b
    ref.free_inputs()
    a.close()
    b.close()


def test_the_reference_shares_the_inputs_it_makes_and_the_candidate_gets_no_seed(reference) -> None:
    ref, peer = reference
    prepared = ref.prepare()
    assert prepared.devgen and not prepared.devgen_off
    wire = json.dumps(prepared.to_wire())
    # what the candidate's job is built from: no trial seed (timed seeds never reach it), no input file
    for si in range(len(ref.plan.shapes)):
        for t in range(ref.plan.trials):
            assert str(ref.plan.trial_seed(si, t)) not in wire
    assert all(t is None for sh in prepared.shapes for t in sh["trials"])
    assert not any(p.name.startswith("in_") for p in ref.stage.iterdir())
    layout = inbox.SetLayout.from_dict(prepared.shapes[0]["inputs"])

    shared = ref.share_inputs(4)
    assert isinstance(shared, InputsShared) and shared.shared >= 4 * layout.stride
    tags, fds, _, _ = socket.recv_fds(peer, 16, 1)
    assert tags == b"i" and len(fds) == 1
    with pytest.raises(OSError):  # sealed: the candidate cannot shrink it under the reference's next write
        os.ftruncate(fds[0], 0)
    mapped = inbox.open_shared("cpu", fds[0], shared.shared)  # the candidate's side

    filled = ref.fill("trial 0 2", 0, [ref.plan.trial_seed(0, 2)])
    assert filled == Filled(filled="trial 0 2", sets=1)
    got = inbox.views(mapped.tensor, layout, 1)[0]
    want = plan.generate_on(ref.spec, ref.plan.trial_seed(0, 2), "cpu")
    assert all(torch.equal(g, w) for g, w in zip(got, want))

    seeds = [11, 22, 33]
    ref.fill("round 5", ref.timed, seeds)
    for st, seed in zip(inbox.views(mapped.tensor, layout, 3), seeds):
        assert all(torch.equal(g, w) for g, w in zip(st, plan.generate_on(ref.spec, seed, "cpu")))
    with pytest.raises(ValueError):  # more sets than the shelf holds: the reference refuses, nothing overruns
        ref.fill("round 6", ref.timed, list(range(1000)))
    mapped.close()


def test_the_server_names_set_counts_to_the_candidate_never_seeds() -> None:
    from workbench.harness.job_pipeline import _JobRun

    sent: list[dict] = []

    class _Ref:
        sock = -1

        def send(self, msg: dict) -> None:
            sent.append(msg)

        def recv(self, deadline: float, expect: str | None = None) -> dict:
            return Filled(filled=sent[-1]["fill"], sets=len(sent[-1]["seeds"])).to_wire()

    class _Srv:
        def _seeds(self, kind: int, k: int, r: int) -> list[int]:
            return [1000 * k + i for i in range(r)]

    run = _JobRun.__new__(_JobRun)
    run.server, run.ref, run.deadline_ref, run.fill_s = _Srv(), _Ref(), 1e18, 0.0
    order = run._fill_round(3, 4)
    assert order == {"stage": 3, "sets": 4}  # what the candidate is sent: how many, never which seeds
    assert sent == [{"fill": "round 3", "seeds": [3000, 3001, 3002, 3003]}]  # only the reference hears them


def test_on_cuda_the_shelf_is_the_drivers_shared_device_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUDA-specific sharing, mocked at the file boundary (`devmem`): the shelf and the candidate's mapping
    go through the virtual-memory API's descriptor, as the device outbox does."""
    from workbench.harness import devmem

    calls: list[str] = []

    class _FakeShared(inbox.HostShared):
        @classmethod
        def create(cls, nbytes: int):
            calls.append("create")
            return inbox.HostShared.create.__func__(cls, nbytes)

        @classmethod
        def open(cls, fd: int, size: int):
            calls.append("open")
            return inbox.HostShared.open.__func__(cls, fd, size)

    monkeypatch.setattr(devmem, "Shared", _FakeShared)
    shelf = inbox.Shelf("cuda", 5000)
    mapped = inbox.open_shared("cuda", os.dup(shelf.fd), shelf.size)
    os.close(shelf.fd)
    assert calls == ["create", "open"] and shelf.size >= 5000
    mapped.close()
    shelf.close()


# -- the candidate's request, typed and in its phase --------------------------------------------------------------
def test_a_trial_inputs_request_is_typed() -> None:
    line = lambda v: json.dumps({"inputs": v, "n": "abc"}).encode()  # noqa: E731
    assert messages.parse_candidate(line([1, 2]), "abc", "inputs")["inputs"] == [1, 2]
    for bad in ([1], [1, 2, 3], [-1, 0], [True, 0], ["0", 1], {"si": 0}, [0, 1 << 20]):
        with pytest.raises(messages.SchemaError):
            messages.parse_candidate(line(bad), "abc", "inputs")
    with pytest.raises(messages.SchemaError):  # out of its phase: the server waits for `timing`
        messages.parse_candidate(line([0, 0]), "abc", "timing")
