"""The case-study kernels compiled for a GPU: the device checks each benchmark declares (`bench.CHECKS`,
the spec shapes of the exact cases) and the random-shape fuzzer (`benchmarks/case_studies/gpu_fuzz.py`).

    pytest -m gpu tests/case_studies/test_gpu.py        # on a machine with a CUDA device

Skipped everywhere else (tests/conftest.py): the interpreter computes right what two GPU builds got wrong
(results/case_studies/conv1d/pad0_bug/, results/case_studies/gpu_fuzz/), so these checks only mean
something on the device.
"""
from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from benchmarks.case_studies import gpu_fuzz
from case_studies.common.checks import exact_checks, float_checks

pytestmark = pytest.mark.gpu

FLOAT_CASES = ["conv1d", "optimized_fm", "pffn"]
EXACT_CASES = ["mapid", "mbdt", "event_truncate"]


def _failures(records: list[dict]) -> list[str]:
    return [f"{r['case']} {r['shape']} {r.get('dtype', '')} {r.get('config', r.get('draw', ''))}: "
            f"{r.get('error') or r.get('why') or r.get('max_abs_err')}" for r in records if not r["ok"]]


@pytest.mark.parametrize("case", FLOAT_CASES)
def test_float_kernels_match_the_reference_on_the_device(case):
    records = float_checks(case, "cuda")
    assert records and not _failures(records), "\n".join(_failures(records))


@pytest.mark.parametrize("case", EXACT_CASES)
def test_exact_kernels_are_bit_identical_on_the_device(case):
    records = exact_checks(case, "cuda", fuzz=2)
    assert records and not _failures(records), "\n".join(_failures(records))


@pytest.mark.parametrize("case", FLOAT_CASES + EXACT_CASES)
def test_fuzzer_finds_no_wrong_result(case):
    """Four random shapes of the case in every dtype, every config the kernel may run (each shape in a
    process of its own, as the fuzzer's command line runs them; 8 at a time, as its --jobs: the GPU test
    suite has 8 minutes for every user path)."""
    r = random.Random(0)
    spec = gpu_fuzz.CASES[case]
    jobs = [(dt, p) for _ in range(4) for p in [spec["shape"](r)] for dt in spec["dtypes"]]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = [rec for recs in pool.map(lambda j: gpu_fuzz.run_job(case, *j), jobs) for rec in recs]
    bad = [f"{x['dtype']} {x['shape']} {x['config']}: {x.get('error') or x.get('mismatch') or x.get('max_abs_err')}"
           for x in results if not x.get("ok")]
    assert results and not bad, "\n".join(bad)
