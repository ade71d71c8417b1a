"""conv1d on the CPU interpreter: the Triton kernel (gather path; the TMA path is GPU-only and checked
by case_studies/run_gpu_part1.py) against F.conv1d and the conv2d formulation, small and odd shapes,
every supported dtype at its tolerance; the weight-packing cache; the dispatcher's decisions."""
from __future__ import annotations

from workbench.env import ensure_interpreter_if_no_gpu

ensure_interpreter_if_no_gpu()

import pytest  # noqa: E402
import torch  # noqa: E402

from case_studies.common.results import write_rows  # noqa: E402
from case_studies.conv1d import kernel, spec  # noqa: E402
from case_studies.conv1d.dispatch import Conv1dDispatcher  # noqa: E402
from case_studies.conv1d.dispatch import conv1d as dispatched_conv1d  # noqa: E402
from case_studies.conv1d.reference import conv1d_as_conv2d, conv1d_reference  # noqa: E402

# (dtype, atol, rtol): fp16/bf16 one output rounding; fp32 is exact products in the interpreter
DTYPES = [(torch.float32, 1e-4, 1e-4), (torch.float16, 1e-2, 1e-2), (torch.bfloat16, 5e-2, 2e-2)]
SHAPES = [  # B, C_in, C_out, L, K, stride, padding
    (2, 5, 7, 123, 3, 1, 1),
    (1, 17, 33, 50, 1, 2, 0),
    (3, 24, 20, 37, 5, 1, 2),
    (1, 96, 96, 31, 3, 1, 1),   # the production channels, a short sequence
]


def _inputs(shape, dtype, seed=0, bias=True):
    b, ci, co, l, k, _, _ = shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, ci, l, generator=g).to(dtype)
    w = (torch.randn(co, ci, k, generator=g) / (ci * k) ** 0.5).to(dtype)
    bb = (torch.randn(co, generator=g) * 0.1).to(dtype) if bias else None
    return x, w, bb


def _report(out, ref):
    err = (out.float() - ref.float()).abs()
    return f"max abs err {err.max().item():.3e} at {divmod(int(err.argmax()), ref.shape[-1])}"


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_kernel_matches_reference(shape, dtype, atol, rtol):
    x, w, b = _inputs(shape, dtype)
    stride, padding = shape[5], shape[6]
    out = kernel.conv1d(x, w, b, stride, padding)
    ref = conv1d_reference(x.float(), w.float(), b.float(), stride, padding)
    assert out.shape == ref.shape and out.dtype == dtype
    assert torch.isfinite(out.float()).all()
    torch.testing.assert_close(out.float(), ref, atol=atol, rtol=rtol, msg=lambda m: _report(out, ref))


def test_no_bias_and_conv2d_formulation_agree():
    x, w, _ = _inputs((2, 8, 16, 45, 3, 1, 1), torch.float32, bias=False)
    out = kernel.conv1d(x, w, None, 1, 1)
    torch.testing.assert_close(out, conv1d_reference(x, w, None, 1, 1), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(conv1d_as_conv2d(x, w, None, 1, 1), conv1d_reference(x, w, None, 1, 1))


def test_other_tile_configs():
    x, w, b = _inputs((2, 40, 24, 29, 3, 1, 1), torch.float16)
    ref = conv1d_reference(x.float(), w.float(), b.float(), 1, 1)
    for cfg in ({"BLOCK_N": 32, "BLOCK_CO": 32, "BLOCK_CI": 16, "num_warps": 2, "num_stages": 1},
                {"BLOCK_N": 64, "BLOCK_CO": 64, "BLOCK_CI": 64, "num_warps": 4, "num_stages": 2}):
        out = kernel.conv1d(x, w, b, 1, 1, config=cfg).float()
        torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-2)


def test_rejects_mismatched_dtypes_and_shapes():
    x, w, b = _inputs(SHAPES[0], torch.float32)
    with pytest.raises(TypeError):
        kernel.conv1d(x, w.half(), b)
    with pytest.raises(ValueError):
        kernel.conv1d(x, w[:, :3], b)


def test_weight_pack_cache_follows_in_place_updates():
    w = torch.randn(6, 4, 3)
    p1 = kernel.pack_weight(w)
    assert p1 is kernel.pack_weight(w)                      # cached
    assert p1.shape == (12, 6) and torch.equal(p1[4 * 2 + 1], w[:, 1, 2])   # row k * C_in + ci
    w.mul_(2.0)                                             # in place: version counter moves
    p2 = kernel.pack_weight(w)
    assert p2 is not p1 and torch.equal(p2, 2 * p1)
    t = kernel.pack_weight(w, layout="tma")
    assert t.shape == (3, 6, 4) and torch.equal(t[2, 5], w[5, :, 2])


def test_weight_pack_cache_is_not_fooled_by_reused_memory():
    # the H200 bug: a freed weight's memory reused by a new weight of the same shape and version
    storage = torch.UntypedStorage(2 * 4 * 3 * 4)
    writer = torch.empty(0).set_(storage, 0, (2, 4, 3))
    writer.copy_(torch.ones(2, 4, 3))
    w1 = torch.empty(0).set_(storage, 0, (2, 4, 3))
    assert torch.equal(kernel.pack_weight(w1)[0], torch.ones(2))
    del w1
    writer.copy_(torch.full((2, 4, 3), 7.0))
    w2 = torch.empty(0).set_(storage, 0, (2, 4, 3))           # same pointer, shape, version 0
    assert torch.equal(kernel.pack_weight(w2)[0], torch.full((2,), 7.0))


def test_tma_path_is_off_in_the_interpreter():
    x, w, _ = _inputs(SHAPES[3], torch.float16)
    assert not kernel.tma_supported(x, w, 1)


def test_spec_model_and_seed_candidate_agree():
    torch.manual_seed(0)
    model = spec.Model(*spec.get_init_inputs())
    torch.manual_seed(0)
    cand = kernel.ModelNew(*spec.get_init_inputs())
    x = spec.get_inputs()[0]
    atol, rtol = spec.TOLERANCES[spec.DTYPE]
    torch.testing.assert_close(cand(x), model(x), atol=atol, rtol=rtol)


def test_tunables_are_declared_as_data():
    for name, values in kernel.TUNABLES.items():
        assert getattr(kernel, name) in values, name
    assert all(kernel.tunables_valid({"BLOCK_N": c.kwargs["BLOCK_N"], "BLOCK_CO": c.kwargs["BLOCK_CO"],
                                      "BLOCK_CI": c.kwargs["BLOCK_CI"], "NUM_WARPS": c.num_warps})
               for c in kernel.autotune_configs())


def _row(params, contender, mode, median, dtype="float16", status="ok"):
    import json

    return {"params": json.dumps(params), "contender": contender, "mode": mode, "median_us": median,
            "dtype": dtype, "status": status, "shape": "s"}


PROD = {"B": 2048, "C_in": 96, "C_out": 96, "L": 200, "K": 3, "stride": 1, "padding": 1}


def test_dispatcher_picks_kernel_only_where_it_wins_in_every_mode(tmp_path):
    wide = dict(PROD, B=64, C_in=512, C_out=512, L=256)
    rows = [_row(PROD, "eager", "plain", 330.0), _row(PROD, "triton", "plain", 90.0),
            _row(PROD, "eager", "graph", 328.0), _row(PROD, "triton", "graph", 88.0),
            _row(wide, "eager", "plain", 50.0), _row(wide, "triton", "plain", 40.0),
            _row(wide, "eager", "graph", 30.0), _row(wide, "triton", "graph", 38.0)]   # loses in graph mode
    path = write_rows(rows, tmp_path / "bench.csv", provenance={"gpu": "test"})
    d = Conv1dDispatcher(path)
    assert d.decide(PROD, "float16").use_kernel
    assert d.decide(dict(PROD, B=1500), "float16").use_kernel           # near a recorded win
    assert not d.decide(wide, "float16").use_kernel                     # loses in one launch mode
    assert d.decide(wide, "float16", "plain").use_kernel                # ... and wins in the other
    assert not d.decide(wide, "float16", "graph").use_kernel
    assert not d.decide(dict(PROD, B=16), "float16").use_kernel         # too far from anything measured
    assert not d.decide(dict(PROD, K=5, padding=2), "float16").use_kernel   # kernel size must match
    assert not d.decide(PROD, "float32").use_kernel                     # dtype never measured
    assert not d.decide(dict(PROD, groups=2), "float16").use_kernel     # unsupported


def test_dispatcher_ignores_incorrect_rows_and_missing_file(tmp_path):
    rows = [_row(PROD, "eager", "plain", 330.0), _row(PROD, "triton", "plain", 90.0, status="incorrect")]
    path = write_rows(rows, tmp_path / "bench.csv", provenance={})
    assert not Conv1dDispatcher(path).decide(PROD, "float16").use_kernel
    assert not Conv1dDispatcher(tmp_path / "missing.csv").decide(PROD, "float16").use_kernel


def test_dispatched_op_on_cpu_is_pytorch():
    x, w, b = _inputs(SHAPES[0], torch.float32)
    torch.testing.assert_close(dispatched_conv1d(x, w, b, 1, 1), conv1d_reference(x, w, b, 1, 1))


def _box(t2d: torch.Tensor, r0: int, c0: int, rows: int, cols: int) -> torch.Tensor:
    """A TMA box load: out-of-bounds elements read as zero."""
    out = torch.zeros(rows, cols, dtype=t2d.dtype)
    r_lo, c_lo = max(r0, 0), max(c0, 0)
    r_hi, c_hi = min(r0 + rows, t2d.shape[0]), min(c0 + cols, t2d.shape[1])
    if r_hi > r_lo and c_hi > c_lo:
        out[r_lo - r0:r_hi - r0, c_lo - c0:c_hi - c0] = t2d[r_lo:r_hi, c_lo:c_hi]
    return out


@pytest.mark.parametrize("shape,tiles", [((2, 32, 17, 64, 3, 1, 1), (32, 64, 16)),
                                         ((3, 48, 40, 100, 5, 1, 2), (64, 64, 16)),
                                         ((2, 32, 96, 70, 1, 1, 0), (64, 128, 32))])
def test_tma_tiling_logic_emulated(shape, tiles):
    """The TMA kernel's index arithmetic, replayed in PyTorch (the interpreter cannot run its unaligned
    boxes): program ids, box coordinates, the weight rows that spill into the next tap, the store masks,
    and the gather-kernel sliver for outputs [0, padding)."""
    x, w, b = _inputs(shape, torch.float32)
    _, _, _, _, k, _, pad = shape
    bl, bco, bci = tiles
    bsz, c_in, l_in = x.shape
    c_out = w.shape[0]
    l_out = l_in + 2 * pad - k + 1
    x2d = x.reshape(bsz * c_in, l_in)
    w2d = kernel.pack_weight(w, layout="tma").reshape(k * c_out, c_in)
    y = torch.full((bsz, c_out, l_out), float("nan"))
    n_co, n_l = -(-c_out // bco), -(-(l_out - pad) // bl)
    for pid in range(bsz * n_l * n_co):
        pid_co, rest = pid % n_co, pid // n_co
        pid_l, bb = rest % n_l, rest // n_l
        l0, co0 = pad + pid_l * bl, pid_co * bco
        acc = torch.zeros(bco, bl)
        for it in range((c_in // bci) * k):
            kk, ci0 = it % k, (it // k) * bci
            assert l0 + kk - pad >= 0                      # no box starts below zero
            wt = _box(w2d, kk * c_out + co0, ci0, bco, bci)
            acc += wt @ _box(x2d, bb * c_in + ci0, l0 + kk - pad, bci, bl)
        acc += torch.cat([b, torch.zeros(bco)])[co0:co0 + bco, None]
        co_n, l_n = min(bco, c_out - co0), min(bl, l_out - l0)
        y[bb, co0:co0 + co_n, l0:l0 + l_n] = acc[:co_n, :l_n]
    if pad:
        kernel._gather_into(x[:, :, :k - 1], w, b, pad, y[:, :, :pad])
    torch.testing.assert_close(y, conv1d_reference(x, w, b, 1, pad), atol=1e-4, rtol=1e-4)
