"""On the H200 (`pytest -m gpu`): the captured graph the device clock times is audited from its nodes,
and every timed replay runs on fresh inputs. Skipped on the CPU (`tests/conftest.py`)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from workbench.result import Status

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
SPEC = ROOT / "examples" / "vector_add" / "spec.py"


@pytest.fixture(scope="module")
def gpu_harness():
    from workbench.harness import Harness

    with Harness(device="cuda") as h:
        yield h


@pytest.mark.gpu
def test_an_honest_candidate_passes_the_graph_audit_on_device_time(gpu_harness) -> None:
    res = gpu_harness.evaluate(SPEC, SPEC.parent / "candidate.py", trials=2)
    assert res.status == Status.PASSED, res.error
    # the audit read the graph's kernel names and found only the candidate's Triton: device time is used
    assert res.timing_basis == "device", res.timing_basis
    dev = res.details.get("device") or {}
    assert dev.get("passes") == 1 and dev.get("slots", 0) >= 4, dev  # one replay per round, fresh sets


@pytest.mark.gpu
def test_a_library_kernel_only_in_the_captured_graph_is_refused(gpu_harness) -> None:
    res = gpu_harness.evaluate(SPEC, HERE / "construction" / "cublas_only_in_graph.py", trials=2, policy=False)
    assert res.status == Status.REJECTED and res.fitness == 0.0, (res.status, res.error, res.timing_basis)
    assert any(v.startswith("forbidden_graph_kernel:") for v in res.violations), res.violations


@pytest.mark.gpu
def test_graph_kernel_names_are_read_from_the_driver() -> None:
    import torch
    import triton
    import triton.language as tl

    from workbench.harness.graph_audit import TRITON_TAG, audit, kernel_names

    @triton.jit
    def twice_kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)

    from platforms.clock import device_memory

    # alone on the GPU (published-size jobs of other xdist workers once left cuBLAS no memory for its
    # handle), and cuBLAS's handle made before the capture, not inside it
    with device_memory("cuda", exclusive=True):
        x = torch.ones(4096, device="cuda")
        compiled = twice_kernel[(4,)](x, x.numel(), BLOCK=1024)  # its CUfunction: how the audit knows it
        torch.mm(x[:64].view(8, 8), x[:64].view(8, 8))
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g):
            twice_kernel[(4,)](x, x.numel(), BLOCK=1024)
            x.fill_(1.0)
            torch.mm(x[:64].view(8, 8), x[:64].view(8, 8))
        names = kernel_names(g, {compiled.function})
    assert names is not None and TRITON_TAG + "twice_kernel" in names, names
    bad, unknown = audit(names, {"twice_kernel"})
    assert len(bad) == 1 and "twice_kernel" not in bad[0] and not unknown, (names, bad)  # the matmul alone


@pytest.mark.gpu
def test_inputs_are_made_by_the_reference_and_shared_on_the_gpu(gpu_harness) -> None:
    """Issue 32 on the device: every set (trials, wall-clock rounds, the captured graph's slots and each device
    round's fresh sets) made by the reference into its shelf (`inbox.py`), read in place by the candidate."""
    res = gpu_harness.evaluate(SPEC, SPEC.parent / "candidate.py", trials=3)
    assert res.status == Status.PASSED, res.error
    assert res.details.get("inputs") == "made on the device", res.details
    assert "inputs_staged" not in res.details, res.details
    assert res.timing_basis == "device", res.timing_basis  # the graph replayed on the shelf's slots
    dev = res.details.get("device") or {}
    assert dev.get("slots", 0) >= 4, dev


@pytest.mark.gpu
def test_the_shelf_is_shared_device_memory_and_freed_when_closed() -> None:
    import torch

    from platforms.clock import device_memory
    from workbench.harness import inbox

    with device_memory("cuda", exclusive=True):
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        free0 = torch.cuda.mem_get_info()[0]
        shelf = inbox.Shelf("cuda", 512 * 2**20)
        os.close(shelf.fd)
        assert free0 - torch.cuda.mem_get_info()[0] >= 512 * 2**20 * 0.9
        x, y = torch.randn(1 << 20, device="cuda"), torch.randn(3, 5, device="cuda")
        layout = inbox.describe([x, y, 2.5], "cuda")
        shelf.put_at(3, [x, y, 2.5], layout)
        got = inbox.views(shelf.mem.tensor, layout, 1, 3)[0]
        assert torch.equal(got[0], x) and torch.equal(got[1], y) and got[2] == 2.5
        del got
        shelf.close()
        torch.cuda.synchronize()
        assert free0 - torch.cuda.mem_get_info()[0] < 64 * 2**20  # given back to the driver
