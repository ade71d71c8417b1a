"""On the H200 (`pytest -m gpu`): the captured graph the device clock times is audited from its nodes,
and every timed replay runs on fresh inputs. Skipped on the CPU (`tests/conftest.py`)."""
from __future__ import annotations

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

    from workbench.harness.graph_audit import audit, kernel_names

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
        twice_kernel[(4,)](x, x.numel(), BLOCK=1024)
        torch.mm(x[:64].view(8, 8), x[:64].view(8, 8))
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g):
            twice_kernel[(4,)](x, x.numel(), BLOCK=1024)
            x.fill_(1.0)
            torch.mm(x[:64].view(8, 8), x[:64].view(8, 8))
        names = kernel_names(g)
    assert names is not None and "twice_kernel" in names, names
    bad, unknown = audit(names, {"twice_kernel"})
    assert len(bad) == 1 and "twice_kernel" not in bad[0] and not unknown, (names, bad)  # the matmul alone
