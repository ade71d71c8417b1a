"""PFFN on the CPU interpreter: the fused kernel (one-tile and two-pass normalization) against PyTorch's
bmm/GELU/RMSNorm chain, small and odd shapes, every supported dtype at its tolerance; the dispatcher."""
from __future__ import annotations

import json

import pytest
import torch
import triton
import triton.language as tl

from case_studies.common.results import write_rows
from case_studies.pffn import kernel, spec
from case_studies.pffn.dispatch import PFFNDispatcher
from case_studies.pffn.dispatch import pffn as dispatched_pffn
from case_studies.pffn.gelu import gelu
from case_studies.pffn.reference import pffn_reference

# (dtype, atol, rtol) on RMS-normalized outputs of order 1
DTYPES = [(torch.float32, 1e-4, 1e-4), (torch.float16, 1e-2, 1e-2), (torch.bfloat16, 6e-2, 2e-2)]
SHAPES = [(3, 5, 37, 64), (2, 33, 100, 256), (1, 17, 123, 48), (2, 16, 64, 16)]   # N, B, D, K


def _inputs(shape, dtype, seed=0):
    n, b, d, k = shape
    g = torch.Generator().manual_seed(seed)
    ts = (torch.randn(n, b, d, generator=g), torch.randn(n, d, k, generator=g) / d ** 0.5,
          torch.randn(n, k, d, generator=g) / k ** 0.5, 1 + 0.1 * torch.randn(k, generator=g),
          1 + 0.1 * torch.randn(d, generator=g))
    return tuple(t.to(dtype) for t in ts)


def _check(out, ref, atol, rtol):
    err = (out.float() - ref.float()).abs()
    assert torch.isfinite(out.float()).all()
    assert torch.allclose(out.float(), ref.float(), atol=atol, rtol=rtol), \
        f"max abs err {err.max().item():.3e} at {tuple(int(i) for i in torch.nonzero(err == err.max())[0])}"


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_kernel_matches_reference(shape, dtype, atol, rtol):
    ts = _inputs(shape, dtype)
    out = kernel.triton_pffn(*ts)
    assert out.shape == ts[0].shape and out.dtype == dtype
    _check(out, pffn_reference(*ts), atol, rtol)


@pytest.mark.parametrize("shape,cfg", [
    ((2, 20, 200, 32), {"BLOCK_KC": 16, "BLOCK_B": 16}),                          # two K chunks, D padded
    ((2, 37, 100, 48), {"BLOCK_KC": 32, "BLOCK_B": 32, "num_warps": 8}),          # ragged last K chunk
    ((1, 70, 512, 256), {"BLOCK_KC": 64, "BLOCK_B": 64, "num_stages": 3}),        # wide D, ragged B tile
    ((1, 19, 300, 64), {"BLOCK_KC": 32, "BLOCK_B": 16}),                          # D in two tiles, ragged
])
def test_k_chunks_and_row_tiles(shape, cfg):
    ts = _inputs(shape, torch.float16)
    _check(kernel.triton_pffn(*ts, config=cfg), pffn_reference(*ts), 1e-2, 1e-2)


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES[1:])
def test_tma_path_in_the_interpreter(monkeypatch, dtype, atol, rtol):
    """The TMA-descriptor path (taken on a GPU wherever the weights' layout allows it), run by the
    interpreter's emulation of tensor descriptors; D 64 and K 48 leave ragged boxes."""
    monkeypatch.setattr(kernel, "tma_ok", kernel.tma_layout_ok)
    ts = _inputs((2, 20, 64, 48), dtype)
    assert kernel.tma_layout_ok(ts[1], ts[2], 64)
    for cfg in ({"BLOCK_KC": 16, "BLOCK_B": 16}, {"BLOCK_KC": 32, "BLOCK_B": 32}):
        _check(kernel.triton_pffn(*ts, config=cfg), pffn_reference(*ts), atol, rtol)
    assert not kernel.tma_layout_ok(*_inputs((1, 4, 100, 48), dtype)[1:3], 128)   # 200-byte rows
    assert not kernel.tma_layout_ok(*_inputs((1, 4, 512, 48), dtype)[1:3], 512)   # box over 256
    ts = _inputs((1, 18, 320, 32), dtype)                                         # two D tiles of 256
    _check(kernel.triton_pffn(*ts, config={"BLOCK_KC": 16, "BLOCK_B": 16}), pffn_reference(*ts), atol, rtol)


def test_autotune_space_is_pruned_to_what_fits():
    cfgs = kernel.autotune_configs()
    few = kernel.prune_configs(cfgs, {}, N=16, B=64, D_POW2=128, K=256)
    assert few and len({c.kwargs["BLOCK_B"] for c in few}) == 1           # the smallest row tile only
    wide = kernel.prune_configs(cfgs, {}, N=16, B=1024, D_POW2=512, K=256)
    assert wide and all(kernel.weight_smem(512, c.kwargs["BLOCK_KC"], c.num_stages) <= kernel.SMEM_BUDGET
                        for c in wide)


def test_rejects_bad_inputs():
    ts = _inputs((2, 5, 8, 16), torch.float16)
    with pytest.raises(ValueError):
        kernel.triton_pffn(ts[0], ts[1][:, :4], *ts[2:])
    with pytest.raises(TypeError):
        kernel.triton_pffn(ts[0].float(), *ts[1:])


def test_spec_model_and_seed_candidate_agree():
    torch.manual_seed(0)
    model = spec.Model(*spec.get_init_inputs())
    torch.manual_seed(0)
    cand = kernel.ModelNew(*spec.get_init_inputs())
    x = spec.get_inputs()[0]
    atol, rtol = spec.TOLERANCES[spec.DTYPE]
    _check(cand(x), model(x), atol, rtol)


def test_tunables_are_declared_as_data():
    for name, values in kernel.TUNABLES.items():
        assert getattr(kernel, name) in values, name


def _row(params, contender, mode, median, dtype="float16"):
    return {"params": json.dumps(params), "contender": contender, "mode": mode, "median_us": median,
            "dtype": dtype, "status": "ok"}


def test_dispatcher_uses_recorded_wins_only(tmp_path):
    win = {"N": 16, "B": 256, "D": 256, "K": 256}
    lose = {"N": 16, "B": 4096, "D": 256, "K": 256}
    rows = [_row(win, "eager", m, 60.0) for m in ("plain", "graph")] + \
           [_row(win, "triton", m, 20.0) for m in ("plain", "graph")] + \
           [_row(lose, "eager", m, 160.0) for m in ("plain", "graph")] + \
           [_row(lose, "triton", m, 170.0) for m in ("plain", "graph")]
    d = PFFNDispatcher(write_rows(rows, tmp_path / "b.csv", provenance={}))
    assert d.decide(win, "float16").use_kernel
    assert not d.decide(lose, "float16").use_kernel
    assert not d.decide(dict(win, K=128), "float16").use_kernel            # K must match exactly


def test_dispatched_op_on_cpu_is_pytorch():
    ts = _inputs((2, 5, 8, 16), torch.float32)
    torch.testing.assert_close(dispatched_pffn(*ts), pffn_reference(*ts))


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES)
@pytest.mark.parametrize("shape,cfg", [
    ((2, 20, 64, 48), {"BLOCK_B": 16, "BLOCK_KC": 16, "SPLIT_K": 2}),            # ragged B tile, 3 chunks
    ((3, 5, 37, 64), {"BLOCK_B": 16, "BLOCK_KC": 16, "SPLIT_K": 4}),             # one chunk a split
    ((1, 17, 123, 48), {"BLOCK_B": 16, "BLOCK_KC": 32, "SPLIT_K": 2}),           # ragged last K chunk
    ((2, 33, 100, 256), {"BLOCK_B": 32, "BLOCK_KC": 64, "SPLIT_K": 4, "num_stages": 1}),
    ((2, 20, 64, 48), {"BLOCK_B": 16, "BLOCK_KC": 16, "SPLIT_K": 2, "W2_EARLY": 1}),  # W2 before the product
    ((1, 17, 123, 48), {"BLOCK_B": 16, "BLOCK_KC": 32, "SPLIT_K": 2, "W2_EARLY": 1}),
])
def test_split_k_matches_reference(shape, cfg, dtype, atol, rtol):
    """splitk.py: partial products per K split, the last split (by ticket) reduces, normalizes, stores.
    Three calls in a row on fresh data: the counters must be back at zero after each."""
    for seed in range(3):
        ts = _inputs(shape, dtype, seed)
        _check(kernel.triton_pffn(*ts, config=cfg), pffn_reference(*ts), atol, rtol)


def test_split_k_tma_path_in_the_interpreter(monkeypatch):
    monkeypatch.setattr(kernel, "tma_ok", kernel.tma_layout_ok)
    ts = _inputs((2, 20, 64, 48), torch.float16)
    _check(kernel.triton_pffn(*ts, config={"BLOCK_B": 16, "BLOCK_KC": 16, "SPLIT_K": 2}), pffn_reference(*ts),
           1e-2, 1e-2)
    _check(kernel.triton_pffn(*ts, config={"BLOCK_B": 16, "BLOCK_KC": 16, "SPLIT_K": 2, "W2_EARLY": 1}),
           pffn_reference(*ts), 1e-2, 1e-2)


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES[1:])
def test_io_tma_and_gelu_variants(monkeypatch, dtype, atol, rtol):
    """X and out through TMA boxes (rows past B, columns past D clipped), and both erf evaluations the
    interpreter can run (FAST_GELU 0: libdevice erff, 1: the erfc fit; 2 differs only in PTX rcp/ex2)."""
    monkeypatch.setattr(kernel, "tma_ok", kernel.tma_layout_ok)
    for shape in ((2, 37, 64, 48), (1, 18, 320, 32)):
        ts = _inputs(shape, dtype)
        ref = pffn_reference(*ts)
        for extra in ({"IO_TMA": 1}, {"IO_TMA": 1, "TMA": 0}, {"FAST_GELU": 0}, {"FAST_GELU": 1}):
            _check(kernel.triton_pffn(*ts, config={"BLOCK_B": 16, "BLOCK_KC": 16, **extra}), ref, atol, rtol)


@triton.jit
def _gelu_kernel(x_ptr, o_ptr, n, FAST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, gelu(tl.load(x_ptr + offs, mask=offs < n, other=0.0), FAST), mask=offs < n)


def test_gelu_fit_matches_exact_gelu():
    """The erfc fit (gelu.py), in the interpreter on fp32, against float64's exact GELU on every fp16 input."""
    x = torch.arange(-2 ** 15, 2 ** 15, dtype=torch.int32).to(torch.int16).view(torch.float16).float()
    x = x[torch.isfinite(x) & (x.abs() < 20)]
    out = torch.empty_like(x)
    _gelu_kernel[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), FAST=1, BLOCK=4096)
    exact = torch.nn.functional.gelu(x.double())
    assert (out.double() - exact).abs().max() < 5e-7          # PyTorch's fp32 F.gelu: 3.8e-7


def test_shape_rules_pick_split_k_only_where_measured():
    assert kernel.rule_config(64, 128)["SPLIT_K"] == 2
    pinned = kernel.rule_config(256, 256)                   # the one-pass config measured best at B 256
    assert "SPLIT_K" not in pinned and pinned["BLOCK_B"] == 16 and pinned["BLOCK_KC"] == 64
    assert pinned["HOST_TMA"] and not kernel.rule_config(64, 128).get("HOST_TMA")   # host_tma/ab_*.json
    assert "SPLIT_K" not in kernel.rule_config(64, 256)
    assert kernel.rule_config(512, 256) is None and kernel.rule_config(256, 512) is None


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES[1:])
@pytest.mark.parametrize("shape,cfg", [
    ((2, 20, 64, 48), {"BLOCK_B": 16, "BLOCK_KC": 16}),                       # one pass, ragged B tile
    ((1, 18, 512, 32), {"BLOCK_B": 16, "BLOCK_KC": 16}),                      # one pass, two D tiles
    ((2, 20, 64, 48), {"BLOCK_B": 16, "BLOCK_KC": 16, "SPLIT_K": 2}),         # split K
    ((3, 5, 64, 64), {"BLOCK_B": 16, "BLOCK_KC": 16, "SPLIT_K": 4, "W2_EARLY": 1}),
])
def test_host_tma_descriptors_in_the_interpreter(monkeypatch, shape, cfg, dtype, atol, rtol):
    """HOST_TMA: the weights' descriptors are built on the host (the interpreter takes host
    TensorDescriptor arguments). The kernel must read the weights through them: descriptors over another
    set of weights give that set's result."""
    monkeypatch.setattr(kernel, "tma_ok", kernel.tma_layout_ok)
    ts = _inputs(shape, dtype)
    cfg = {**cfg, "HOST_TMA": 1}
    _check(kernel.triton_pffn(*ts, config=cfg), pffn_reference(*ts), atol, rtol)
    other = _inputs(shape, dtype, seed=1)
    real = kernel.host_descriptors
    monkeypatch.setattr(kernel, "host_descriptors", lambda w1, w2, dt, kc: real(other[1], other[2], dt, kc))
    _check(kernel.triton_pffn(*ts, config=cfg), pffn_reference(ts[0], *other[1:3], *ts[3:]), atol, rtol)


def test_host_tma_is_ignored_where_the_2d_views_do_not_fit(monkeypatch):
    """K not a multiple of BLOCK_KC, D not a power of two, or tokens not back to back: the boxes of the
    2-D views would cross into the next token, so the in-kernel descriptors (or block pointers) run."""
    monkeypatch.setattr(kernel, "tma_ok", kernel.tma_layout_ok)
    ts = _inputs((2, 20, 64, 48), torch.float16)
    assert kernel.host_descriptors(ts[1], ts[2], 64, 32) is None                      # 48 % 32
    assert kernel.host_descriptors(*_inputs((1, 4, 96, 32), torch.float16)[1:3], 128, 16) is None   # D 96
    w1 = torch.randn(2, 64, 96, dtype=torch.float16)[:, :, :48]                      # row stride 96, K 48
    assert kernel.host_descriptors(w1, ts[2], 64, 16) is not None
    assert kernel.host_descriptors(torch.randn(64, 2, 48, dtype=torch.float16).transpose(0, 1), ts[2],
                                   64, 16) is None                                   # tokens interleaved
    for shape, cfg in (((2, 20, 64, 48), {"BLOCK_B": 16, "BLOCK_KC": 32}),
                       ((1, 17, 123, 48), {"BLOCK_B": 16, "BLOCK_KC": 16, "SPLIT_K": 2}),
                       ((2, 20, 64, 48), {"HOST_TMA": 1})):                           # no tiles: ignored
        ts = _inputs(shape, torch.float16)
        _check(kernel.triton_pffn(*ts, config={**cfg, "HOST_TMA": 1}), pffn_reference(*ts), 1e-2, 1e-2)
