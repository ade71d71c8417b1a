"""conv1d on the CPU interpreter: the Triton kernels against F.conv1d and the conv2d formulation, small
and odd shapes (K = 1, 3, 5, stride 2, channel counts off the tile sizes, tiles that span two examples),
every supported dtype at its tolerance, every kernel variant (gather: unrolled and looped C_in,
persistent, eviction hints, 1 to 4 accumulators; channels-last TMA path: weights by TMA, TMA stores,
persistent); the weight-packing cache; the dispatcher against the recorded H200 table;
the kernels compile for sm_90."""
from __future__ import annotations

import pytest
import torch
import triton

from case_studies.common.results import write_rows
from case_studies.conv1d import kernel, spec, tma
from case_studies.conv1d.dispatch import Conv1dDispatcher
from case_studies.conv1d.dispatch import conv1d as dispatched_conv1d
from case_studies.conv1d.reference import conv1d_as_conv2d, conv1d_reference

# (dtype, atol, rtol): fp16/bf16 one output rounding; fp32 is exact products in the interpreter
DTYPES = [(torch.float32, 1e-4, 1e-4), (torch.float16, 1e-2, 1e-2), (torch.bfloat16, 5e-2, 2e-2)]
SHAPES = [  # B, C_in, C_out, L, K, stride, padding
    (2, 5, 7, 123, 3, 1, 1),
    (1, 17, 33, 50, 1, 2, 0),
    (3, 24, 20, 37, 5, 1, 2),
    (1, 96, 96, 31, 3, 1, 1),   # the production channels, a short sequence
    (2, 96, 96, 200, 3, 1, 1),  # the production example: 64-position tiles span both examples
    (2, 130, 70, 77, 3, 1, 1),  # C_in off the 32-channel step, C_out off the 3 x 32 group
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
    out = kernel.triton_conv1d(x, w, b, stride, padding)
    ref = conv1d_reference(x.float(), w.float(), b.float(), stride, padding)
    assert out.shape == ref.shape and out.dtype == dtype
    assert torch.isfinite(out.float()).all()
    torch.testing.assert_close(out.float(), ref, atol=atol, rtol=rtol, msg=lambda m: _report(out, ref))


def test_no_bias_and_conv2d_formulation_agree():
    x, w, _ = _inputs((2, 8, 16, 45, 3, 1, 1), torch.float32, bias=False)
    out = kernel.triton_conv1d(x, w, None, 1, 1)
    torch.testing.assert_close(out, conv1d_reference(x, w, None, 1, 1), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(conv1d_as_conv2d(x, w, None, 1, 1), conv1d_reference(x, w, None, 1, 1))


@pytest.mark.parametrize("cfg", [
    {"BLOCK_N": 32, "BLOCK_CO": 32, "CO_SUB": 1, "BLOCK_CI": 16, "num_warps": 2, "num_stages": 1},
    {"BLOCK_N": 64, "BLOCK_CO": 16, "CO_SUB": 2, "BLOCK_CI": 64, "UNROLL_CI": 0, "num_stages": 3},
    {"BLOCK_N": 16, "BLOCK_CO": 16, "CO_SUB": 4, "BLOCK_CI": 16, "PERSISTENT": 1, "EVICT": 1},
    {"BLOCK_N": 128, "BLOCK_CO": 64, "CO_SUB": 1, "BLOCK_CI": 32, "PERSISTENT": 2, "UNROLL_CI": 0},
    {"BLOCK_N": 32, "BLOCK_CO": 16, "CO_SUB": 3, "BLOCK_CI": 16, "UNROLL_CI": 2},
    {"BLOCK_N": 64, "BLOCK_CO": 32, "CO_SUB": 3, "BLOCK_CI": 32, "SHIFT_T": 0},
    {"BLOCK_N": 64, "BLOCK_CO": 32, "CO_SUB": 4, "BLOCK_CI": 32, "UNROLL_CI": 2, "PERSISTENT": 2},
    # weights by TMA (host descriptors; the interpreter takes them): C_in 40 is off the 32-channel step
    {"BLOCK_N": 32, "BLOCK_CO": 16, "CO_SUB": 2, "BLOCK_CI": 32, "W_TMA": 1},
    {"BLOCK_N": 32, "BLOCK_CO": 16, "CO_SUB": 2, "BLOCK_CI": 16, "W_TMA": 1, "PERSISTENT": 1, "UNROLL_CI": 2},
    {"BLOCK_N": 64, "BLOCK_CO": 16, "CO_SUB": 3, "BLOCK_CI": 32, "W_TMA": 2, "UNROLL_CI": 0, "num_stages": 2},
])
def test_other_tile_configs(cfg):
    x, w, b = _inputs((3, 40, 24, 29, 3, 1, 1), torch.float16)
    ref = conv1d_reference(x.float(), w.float(), b.float(), 1, 1)
    out = kernel.triton_conv1d(x, w, b, 1, 1, config=cfg).float()
    torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-2, msg=lambda m: _report(out, ref))


def test_non_contiguous_input():
    x, w, b = _inputs((2, 16, 24, 33, 3, 1, 1), torch.float32)
    xt = x.transpose(1, 2).contiguous().transpose(1, 2)        # same values, channels-last strides
    torch.testing.assert_close(kernel.triton_conv1d(xt, w, b, 1, 1), conv1d_reference(x, w, b, 1, 1),
                               atol=1e-4, rtol=1e-4)


def test_fit_config_shrinks_tiles_to_the_problem():
    kw = {"BLOCK_N": 64, "BLOCK_CO": 32, "CO_SUB": 4, "BLOCK_CI": 64, "UNROLL_CI": 1, "PERSISTENT": 0,
          "EVICT": 0}
    assert kernel.fit_config(kw, 96, 96)["CO_SUB"] == 3                  # 3 x 32 = 96: no padding MMAs
    small = kernel.fit_config(kw, 5, 7)
    assert small["BLOCK_CO"] == 16 and small["CO_SUB"] == 1 and small["BLOCK_CI"] == 16
    got = kernel.prune_configs(kernel.autotune_configs(), {"C_IN": 96, "C_OUT": 96})
    assert got and all(c.kwargs["BLOCK_CO"] * c.kwargs["CO_SUB"] <= 128 for c in got)


def test_rejects_unknown_path_and_inapplicable_paths():
    x, w, b = _inputs(SHAPES[0], torch.float32)
    with pytest.raises(ValueError):
        kernel.triton_conv1d(x, w, b, path="tma")
    x, w, b = _inputs((1, 17, 33, 50, 1, 2, 0), torch.float32)
    for path in ("cl", "fused"):     # stride 2
        with pytest.raises(ValueError):
            kernel.triton_conv1d(x, w, b, 2, 0, path=path)


CL_CONFIGS = [
    {},
    {"PERSIST": 2},
    {"W_TMA": 1, "BLOCK_CO": 64, "CO_SUB": 1, "PERSIST": 1},
    {"BLOCK_L": 64, "TMA_STORE": 1, "BLOCK_CO": 16, "CO_SUB": 2, "BLOCK_CI": 16, "STAGES": 2},
    {"FLAT": 1},
    {"FLAT": 1, "PERSIST": 2},
    {"FLAT": 1, "W_TMA": 1, "BLOCK_CO": 64, "CO_SUB": 1, "PERSIST": 1, "BLOCK_L": 64},
]


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES)
@pytest.mark.parametrize("shape", [(2, 24, 20, 37, 5, 1, 2), (3, 32, 48, 64, 3, 1, 1), (2, 96, 96, 200, 1, 1, 0),
                                   (1, 16, 7, 9, 3, 1, 0)])
def test_channels_last_path_matches_reference(shape, dtype, atol, rtol):
    x, w, b = _inputs(shape, dtype)
    stride, padding = shape[5], shape[6]
    out = kernel.triton_conv1d(x, w, b, stride, padding, path="cl")
    ref = conv1d_reference(x.float(), w.float(), b.float(), stride, padding)
    torch.testing.assert_close(out.float(), ref, atol=atol, rtol=rtol, msg=lambda m: _report(out, ref))


@pytest.mark.parametrize("cfg", CL_CONFIGS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_channels_last_tile_configs(cfg, dtype):
    """Weights by TMA (K-major rows past C_out read the next tap: only unstored channels), TMA stores,
    persistent flattened loops (3 programs over 8 tiles), short sequences."""
    x, w, b = _inputs((4, 32, 32, 72, 3, 1, 1), dtype)
    ref = conv1d_reference(x.float(), w.float(), b.float(), 1, 1)
    out = kernel.triton_conv1d(x, w, b, 1, 1, config={"path": "cl", **cfg}).float()
    torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-2, msg=lambda m: _report(out, ref))


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES)
@pytest.mark.parametrize("shape", [(2, 24, 20, 37, 5, 1, 2), (3, 32, 48, 64, 3, 1, 1), (5, 16, 16, 3, 3, 1, 1),
                                   (1, 16, 7, 9, 3, 1, 0)])
def test_channels_last_flat_tiles(shape, dtype, atol, rtol):
    """FLAT: tiles over the flattened positions, so one tile spans several examples (L 3 and 37 with
    128-row tiles); the rows a tap shifts across an example's edge must read zeros (the padding), not the
    neighbour's edge. L_out != L_in (no padding) falls back to per-example tiles."""
    x, w, b = _inputs(shape, dtype)
    stride, padding = shape[5], shape[6]
    out = kernel.triton_conv1d(x, w, b, stride, padding, config={"path": "cl", "FLAT": 1}).float()
    ref = conv1d_reference(x.float(), w.float(), b.float(), stride, padding)
    torch.testing.assert_close(out, ref, atol=atol, rtol=rtol, msg=lambda m: _report(out, ref))
    assert tma.n_tiles(shape[0], {"C_OUT": shape[2], "L_OUT": shape[3]}, {"BLOCK_CO": 32, "CO_SUB": 4,
                                                                           "BLOCK_L": 128, "FLAT": 1}) \
        == triton.cdiv(shape[0] * shape[3], 128) * triton.cdiv(shape[2], 128)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_channels_last_pinned_config_falls_back_where_tma_cannot_apply(dtype):
    """A pinned channels-last config with weights by TMA on C_out 5 (10-byte rows in fp16): TMA cannot take
    those rows (the interpreter asserts; the H200 computed garbage), so the weights come by pointer loads."""
    x, w, b = _inputs((8, 32, 5, 62, 4, 1, 4), dtype)
    cfg = {"path": "cl", "BLOCK_L": 128, "BLOCK_CO": 128, "CO_SUB": 1, "W_TMA": 1, "PERSIST": 1, "TMA_STORE": 1}
    out = kernel.triton_conv1d(x, w, b, 1, 4, config=cfg).float()
    ref = conv1d_reference(x.float(), w.float(), b.float(), 1, 4)
    torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-2, msg=lambda m: _report(out, ref))


def test_to_channels_last_and_path_choice():
    x = torch.randn(3, 40, 77)
    assert torch.equal(tma.to_channels_last(x), x.transpose(1, 2).contiguous())
    # fp32 takes the channels-last path where its rows are 16-byte aligned, everything else the gather kernel
    assert kernel.choose_path(2048, 96, 200, 96, 3, 1, 1, torch.float32) == "cl"
    assert kernel.choose_path(2048, 96, 200, 96, 3, 1, 1, torch.float16) == "gather"
    assert kernel.choose_path(2048, 96, 200, 96, 3, 2, 1, torch.float32) == "gather"     # stride 2
    assert kernel.choose_path(2, 5, 123, 7, 3, 1, 1, torch.float32) == "gather"         # 20-byte rows


def test_tma_boxes_must_start_16_byte_aligned_in_the_inner_dimension():
    """Why the first TMA path (x as [B * C_in, L], boxes shifted by k - padding along L) died with an
    illegal instruction on the H200: the innermost box coordinate must be 16-byte aligned. The interpreter
    enforces it too; channels-last moves the shift to an outer dimension, where any start is legal."""
    import triton
    import triton.language as tl

    @triton.jit
    def _box(x_ptr, y_ptr, OFF: tl.constexpr):
        d = tl.make_tensor_descriptor(x_ptr, shape=[4, 64], strides=[64, 1], block_shape=[4, 16])
        tl.store(y_ptr + tl.arange(0, 4)[:, None] * 16 + tl.arange(0, 16)[None, :], d.load([0, OFF]))

    tma.ensure_allocator()
    x = torch.arange(256, dtype=torch.float16).reshape(4, 64)
    y = torch.empty(4, 16, dtype=torch.float16)
    _box[(1,)](x, y, OFF=8)
    assert torch.equal(y, x[:, 8:24])
    with pytest.raises(Exception, match="16-byte aligned"):
        _box[(1,)](x, y, OFF=1)


def test_rejects_mismatched_dtypes_and_shapes():
    x, w, b = _inputs(SHAPES[0], torch.float32)
    with pytest.raises(TypeError):
        kernel.triton_conv1d(x, w.half(), b)
    with pytest.raises(ValueError):
        kernel.triton_conv1d(x, w[:, :3], b)


def test_weight_pack_layouts_are_cached_apart():
    w = torch.randn(6, 4, 3)
    g, k = kernel.pack_weight(w), kernel.pack_weight(w, layout="kmajor")
    assert g.shape == (3, 4, 6) and k.shape == (3, 6, 4) and torch.equal(k[2], w[:, :, 2])   # [K, C_out, C_in]
    assert kernel.pack_weight(w, layout="kmajor") is k and kernel.pack_weight(w) is g


def test_weight_pack_cache_follows_in_place_updates():
    w = torch.randn(6, 4, 3)
    p1 = kernel.pack_weight(w)
    assert p1 is kernel.pack_weight(w)                      # cached
    assert p1.shape == (3, 4, 6) and torch.equal(p1[2, 1], w[:, 1, 2])   # [K, C_in, C_out]
    w.mul_(2.0)                                             # in place: version counter moves
    p2 = kernel.pack_weight(w)
    assert p2 is not p1 and torch.equal(p2, 2 * p1)


def test_weight_pack_cache_is_not_fooled_by_reused_memory():
    # the H200 bug: a freed weight's memory reused by a new weight of the same shape and version
    storage = torch.UntypedStorage(2 * 4 * 3 * 4)
    writer = torch.empty(0).set_(storage, 0, (2, 4, 3))
    writer.copy_(torch.ones(2, 4, 3))
    w1 = torch.empty(0).set_(storage, 0, (2, 4, 3))
    assert torch.equal(kernel.pack_weight(w1)[0, 0], torch.ones(2))
    del w1
    writer.copy_(torch.full((2, 4, 3), 7.0))
    w2 = torch.empty(0).set_(storage, 0, (2, 4, 3))           # same pointer, shape, version 0
    assert torch.equal(kernel.pack_weight(w2)[0, 0], torch.full((2,), 7.0))


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
    configs = kernel.autotune_configs()
    assert len(configs) == len(kernel.AUTOTUNE_SPACE)
    for c in configs:
        assert set(c.kwargs) == set(kernel.CONFIG_KEYS)
        assert kernel.tunables_valid({**c.kwargs, "NUM_WARPS": c.num_warps})
        assert all(v in kernel.TUNABLES[k] for k, v in c.kwargs.items())


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


def test_launch_plan_key_and_recorded_tail(monkeypatch):
    """The plain-launch plan of the gather kernel: no key on the CPU or for non-contiguous inputs; a key
    that changes with everything the kernel was compiled for; the recorded argument tail in the order of
    the kernel's signature."""
    import inspect

    from case_studies.common.launch import LaunchCache, kernel_arg_values

    x, w, b = _inputs(SHAPES[0], torch.float16)
    assert kernel.plan_key(x, w, b, 1, 1, None, None, True, False, "auto") is None    # CPU: no plan
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda t: True))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    key = kernel.plan_key(x, w, b, 1, 1, None, None, True, False, "auto")
    assert key is not None
    assert kernel.plan_key(x.transpose(1, 2).contiguous().transpose(1, 2), w, b, 1, 1, None, None, True,
                           False, "auto") is None
    variants = [kernel.plan_key(x, w, None, 1, 1, None, None, True, False, "auto"),
                kernel.plan_key(x, w, b, 2, 1, None, None, True, False, "auto"),
                kernel.plan_key(x.float(), w.float(), b.float(), 1, 1, None, None, True, False, "auto"),
                kernel.plan_key(x[:1], w, b, 1, 1, None, None, True, False, "auto"),
                kernel.plan_key(x, w, b, 1, 1, {"BLOCK_N": 64}, None, True, False, "auto"),
                kernel.plan_key(x, w, b[1:], 1, 1, None, None, True, False, "auto"),   # misaligned bias
                kernel.plan_key(x, w, b.float(), 1, 1, None, None, True, False, "auto")]
    assert len({key, *variants}) == len(variants) + 1
    # probe builds are compiled inside the Proton session: never a recorded plan
    assert kernel.plan_key(x, w, b, 1, 1, None, None, True, True, "auto") is None

    jit = kernel._conv1d_kernel
    params = inspect.signature(jit.fn).parameters
    named = {name: i for i, (name, p) in enumerate(params.items()) if p.default is inspect.Parameter.empty}

    class Compiled:                                         # what Triton returns on a GPU
        packed_metadata = (4, 1, 0)

    cache = LaunchCache(jit, n_tensors=4)
    plan = cache.record(key, Compiled(), (9,), named, {"L_OUT": 123})
    assert plan.grid == (9, 1, 1) and plan.tail == tuple(kernel_arg_values(jit, named)[4:])
    assert plan.tail[-2] is False and plan.tail[-1] is None   # PROBES' and w_desc's defaults (w_desc last:
    # the fast path replaces it with each call's descriptor)


def test_dispatcher_follows_the_recorded_h200_table():
    """Every measured (shape, dtype, launch mode): the kernel exactly where it beat eager, and never a
    dispatched call slower than 0.98x eager."""
    import json

    from case_studies.common.results import read_rows
    from case_studies.conv1d.dispatch import DISPATCH_CSV

    rows = [r for r in read_rows(DISPATCH_CSV) if r["status"] == "ok"]
    d = Conv1dDispatcher(DISPATCH_CSV)
    med = {(r["params"], r["dtype"], r["mode"], r["contender"]): float(r["median_us"]) for r in rows}
    seen = 0
    for (params, dt, mode, who), t in med.items():
        if who != "triton" or (params, dt, mode, "eager") not in med:
            continue
        eager = med[(params, dt, mode, "eager")]
        use = d.decide(json.loads(params), dt, mode).use_kernel
        assert use == (t < eager), (params, dt, mode, t, eager)
        assert (t if use else eager) <= eager / 0.98
        seen += 1
    assert seen >= 16


_SM90_CASES = """[
    (k._conv1d_kernel, {**{n: "*fp16" for n in ("x_ptr", "w_ptr", "b_ptr", "y_ptr")}, "n_total": "i32",
                        **{n: "constexpr" for n in ("C_IN", "C_OUT", "L_IN", "L_OUT", "STRIDE", "PAD", "KSIZE",
                           "HAS_BIAS", "DOT_PRECISION", "UPCAST_DOT", "INT64", "BLOCK_N", "BLOCK_CO", "CO_SUB",
                           "BLOCK_CI", "UNROLL_CI", "PERSISTENT", "EVICT", "SHIFT_T", "W_TMA", "PROBES", "w_desc")}},
     dict(C_IN=96, C_OUT=96, L_IN=200, L_OUT=200, STRIDE=1, PAD=1, KSIZE=3, HAS_BIAS=True, DOT_PRECISION="ieee",
          UPCAST_DOT=False, INT64=False, BLOCK_N=128, BLOCK_CO=32, CO_SUB=3, BLOCK_CI=32, UNROLL_CI=1,
          PERSISTENT=0, EVICT=0, SHIFT_T=1, W_TMA=0, PROBES=False, w_desc=None)),
    (k._conv1d_kernel, {**{n: "*fp16" for n in ("x_ptr", "w_ptr", "b_ptr", "y_ptr")}, "n_total": "i32",
                        "w_desc": "tensordesc<fp16[32, 32]>",
                        **{n: "constexpr" for n in ("C_IN", "C_OUT", "L_IN", "L_OUT", "STRIDE", "PAD", "KSIZE",
                           "HAS_BIAS", "DOT_PRECISION", "UPCAST_DOT", "INT64", "BLOCK_N", "BLOCK_CO", "CO_SUB",
                           "BLOCK_CI", "UNROLL_CI", "PERSISTENT", "EVICT", "SHIFT_T", "W_TMA", "PROBES")}},
     dict(C_IN=96, C_OUT=96, L_IN=200, L_OUT=200, STRIDE=1, PAD=1, KSIZE=3, HAS_BIAS=True, DOT_PRECISION="ieee",
          UPCAST_DOT=False, INT64=False, BLOCK_N=128, BLOCK_CO=32, CO_SUB=3, BLOCK_CI=32, UNROLL_CI=0,
          PERSISTENT=1, EVICT=0, SHIFT_T=1, W_TMA=1, PROBES=False)),
    (k._conv1d_kernel, {**{n: "*fp32" for n in ("x_ptr", "w_ptr", "b_ptr", "y_ptr")}, "n_total": "i32",
                        "w_desc": "tensordesc<fp32[32, 32]>",
                        **{n: "constexpr" for n in ("C_IN", "C_OUT", "L_IN", "L_OUT", "STRIDE", "PAD", "KSIZE",
                           "HAS_BIAS", "DOT_PRECISION", "UPCAST_DOT", "INT64", "BLOCK_N", "BLOCK_CO", "CO_SUB",
                           "BLOCK_CI", "UNROLL_CI", "PERSISTENT", "EVICT", "SHIFT_T", "W_TMA", "PROBES")}},
     dict(C_IN=96, C_OUT=96, L_IN=200, L_OUT=200, STRIDE=1, PAD=1, KSIZE=3, HAS_BIAS=True, DOT_PRECISION="tf32",
          UPCAST_DOT=False, INT64=False, BLOCK_N=128, BLOCK_CO=32, CO_SUB=3, BLOCK_CI=32, UNROLL_CI=1,
          PERSISTENT=0, EVICT=0, SHIFT_T=1, W_TMA=2, PROBES=False)),
    (t._conv1d_tma_kernel, {**{n: "*fp32" for n in ("x_ptr", "w_ptr", "b_ptr", "y_ptr")}, "B": "i32",
                            **{n: "constexpr" for n in ("C_IN", "C_OUT", "L_IN", "L_OUT", "PAD", "KSIZE",
                               "HAS_BIAS", "DOT_PRECISION", "UPCAST_DOT", "INT64", "W_KMAJOR", "W_TMA", "BLOCK_L",
                               "BLOCK_CO", "CO_SUB", "BLOCK_CI", "STAGES", "TMA_STORE", "PERSIST", "PROBES")}},
     dict(C_IN=96, C_OUT=96, L_IN=200, L_OUT=200, PAD=1, KSIZE=3, HAS_BIAS=True, DOT_PRECISION="tf32",
          UPCAST_DOT=False, INT64=False, W_KMAJOR=True, W_TMA=1, BLOCK_L=128, BLOCK_CO=128, CO_SUB=1,
          BLOCK_CI=32, STAGES=3, TMA_STORE=0, PERSIST=1, PROBES=False)),
    *[(t._conv1d_tma_kernel, {**{n: "*fp32" for n in ("x_ptr", "w_ptr", "b_ptr", "y_ptr")}, "B": "i32",
                              **{n: "constexpr" for n in ("C_IN", "C_OUT", "L_IN", "L_OUT", "PAD", "KSIZE",
                                 "HAS_BIAS", "DOT_PRECISION", "UPCAST_DOT", "INT64", "W_KMAJOR", "W_TMA", "BLOCK_L",
                                 "BLOCK_CO", "CO_SUB", "BLOCK_CI", "STAGES", "TMA_STORE", "PERSIST", "PROBES",
                                 "FLAT")}},
       dict(C_IN=96, C_OUT=96, L_IN=200, L_OUT=200, PAD=1, KSIZE=3, HAS_BIAS=True, DOT_PRECISION="tf32",
            UPCAST_DOT=False, INT64=False, W_KMAJOR=True, BLOCK_CI=32, STAGES=3, TMA_STORE=0, PROBES=False,
            FLAT=1, **tiles))
      for tiles in (dict(W_TMA=1, BLOCK_L=128, BLOCK_CO=128, CO_SUB=1, PERSIST=1),      # flattened tiles
                    dict(W_TMA=0, BLOCK_L=128, BLOCK_CO=32, CO_SUB=3, PERSIST=0))],
    (t._to_channels_last, {"x_ptr": "*fp32", "xt_ptr": "*fp32", "C": "constexpr", "L": "constexpr",
                           "BLOCK_C": "constexpr", "BLOCK_L": "constexpr"},
     dict(C=96, L=200, BLOCK_C=32, BLOCK_L=128)),
]"""


def test_weight_tma_descriptor_cache_and_fallbacks():
    """Weights by TMA: the descriptor is cached with the packed weight and follows a repack (never stale);
    rows that are not a multiple of 16 bytes fall back to pointer loads; an autotuned launch without a
    descriptor never times a W_TMA config."""
    x, w, b = _inputs((2, 32, 48, 20, 3, 1, 1), torch.float16)
    kw = kernel.fit_config({k: kernel.fixed_config()[k] for k in kernel.CONFIG_KEYS} | {"W_TMA": 1}, 32, 48)
    wp, kw1, d1 = kernel._pack_and_desc(w, kw, True)
    assert kw1["W_TMA"] == 1 and d1.block_shape == [32, 32] and d1.base.data_ptr() == wp.data_ptr()
    assert kernel._pack_and_desc(w, kw, True)[2] is d1                       # cached
    w.mul_(2.0)                                                              # in place: repacked
    wp2, _, d2 = kernel._pack_and_desc(w, kw, True)
    assert d2 is not d1 and d2.base.data_ptr() == wp2.data_ptr() and torch.equal(d2.base, wp2.view(-1, 48))
    _, kw2, d3 = kernel._pack_and_desc(w, dict(kw, W_TMA=2), True)           # K-major: [K * C_out, C_in]
    assert kw2["W_TMA"] == 2 and list(d3.shape) == [3 * 48, 32] and d3.block_shape == [32, 32]
    w17 = _inputs((2, 32, 17, 20, 3, 1, 1), torch.float16)[1]               # 34-byte rows: no TMA
    assert kernel._pack_and_desc(w17, kernel.fit_config(kw, 32, 17), True)[1]["W_TMA"] == 0
    configs = [triton.Config(dict(c.kwargs, W_TMA=t)) for c in kernel.autotune_configs() for t in (0, 1)]
    args = {"C_IN": 32, "C_OUT": 48, "x_ptr": x}
    assert all(c.kwargs["W_TMA"] == 0 for c in kernel.prune_configs(configs, args, w_desc=None))
    kept = kernel.prune_configs(configs, args, w_desc=d1)
    assert any(c.kwargs["W_TMA"] == 1 for c in kept)
    assert all(kernel.tma_block(c.kwargs) == d1.conv1d_spec for c in kept if c.kwargs["W_TMA"])


def test_kernels_compile_for_sm90():
    """The shipped builds (gather fp16, channels-last fp32 with the config the H200 autotuner chose, the
    transpose) compile for sm_90 (the interpreter accepts code ptxas rejects)."""
    from tests.case_studies.sm90 import compile_for_sm90

    compile_for_sm90("from case_studies.conv1d import kernel as k, tma as t", _SM90_CASES)


def test_exact_reference_is_fp32_and_restores_the_tf32_flag():
    """The GPU scripts' ground truth: fp32 from any input dtype, cuDNN's TF32 switch left as it was."""
    from case_studies.conv1d.reference import conv1d_exact

    x, w, b = _inputs(SHAPES[0], torch.float16)
    prev = torch.backends.cudnn.allow_tf32
    y = conv1d_exact(x, w, b, 1, 1)
    assert y.dtype == torch.float32 and torch.backends.cudnn.allow_tf32 == prev
    torch.testing.assert_close(y, conv1d_reference(x.float(), w.float(), b.float(), 1, 1))
    torch.testing.assert_close(conv1d_exact(x, w, None, 1, 1), conv1d_reference(x.float(), w.float(), None, 1, 1))
