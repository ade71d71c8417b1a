"""Optimized FM on the CPU interpreter: the fused kernel against PyTorch's two matmuls, small and odd
shapes, every supported dtype at its tolerance; the dispatcher's decisions."""
from __future__ import annotations

import inspect
import json

import pytest
import torch

from case_studies.common.results import write_rows
from case_studies.optimized_fm import kernel, spec
from case_studies.optimized_fm.dispatch import OptimizedFMDispatcher
from case_studies.optimized_fm.dispatch import optimized_fm as dispatched_fm
from case_studies.optimized_fm.reference import optimized_fm_reference

# (dtype, atol, rtol) on outputs of order 1 (X scaled by D^-1/4)
DTYPES = [(torch.float32, 1e-4, 1e-4), (torch.float16, 1e-2, 1e-2), (torch.bfloat16, 5e-2, 2e-2)]
SHAPES = [(3, 5, 37, 7), (2, 24, 224, 16), (2, 23, 50, 33), (1, 127, 123, 5), (4, 8, 16, 64)]  # B, N, D, K


def _inputs(shape, dtype, seed=0):
    b, n, d, k = shape
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(b, n, d, generator=g) * d ** -0.25).to(dtype)
    y = (torch.randn(n, k, generator=g) / n ** 0.5).to(dtype)
    return x, y


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_kernel_matches_reference(shape, dtype, atol, rtol):
    x, y = _inputs(shape, dtype)
    out = kernel.triton_optimized_fm(x, y)
    ref = optimized_fm_reference(x, y).float()   # PyTorch's own rounding of the intermediate
    assert out.shape == ref.shape and out.dtype == dtype
    err = (out.float() - ref).abs()
    assert torch.allclose(out.float(), ref, atol=atol, rtol=rtol), \
        f"max abs err {err.max().item():.3e} at {tuple(int(i) for i in torch.nonzero(err == err.max())[0])}"


def test_several_batch_elements_per_program_and_wide_d_chunks():
    x, y = _inputs((5, 24, 100, 16), torch.float16)
    ref = optimized_fm_reference(x, y).float()
    for cfg in ({"BLOCK_B": 2, "BLOCK_D": 32}, {"BLOCK_B": 4, "BLOCK_D": 64, "num_warps": 8},
                {"BLOCK_B": 1, "BLOCK_D": 128}, {"BLOCK_B": 4, "BLOCK_D": 128, "num_stages": 1}):
        torch.testing.assert_close(kernel.triton_optimized_fm(x, y, config=cfg).float(), ref, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES[1:])
def test_whole_row_loads_at_the_production_d(dtype, atol, rtol):
    """BLOCK_D >= D loads X[b] in one piece (the tuned path at D 224); B 5 leaves a ragged last program."""
    x, y = _inputs((5, 24, 224, 16), dtype)
    ref = optimized_fm_reference(x, y).float()
    for cfg in ({"BLOCK_D": 256, "BLOCK_B": 1, "num_stages": 1, "PIPELINE": False},
                {"BLOCK_D": 256, "BLOCK_B": 2, "PIPELINE": False},
                {"BLOCK_D": 256, "BLOCK_B": 4, "num_warps": 8, "PIPELINE": False}):
        torch.testing.assert_close(kernel.triton_optimized_fm(x, y, config=cfg).float(), ref, atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES)
@pytest.mark.parametrize("transposed", [False, True])
def test_streaming_loop_covers_every_batch_element(dtype, atol, rtol, transposed):
    """PIPELINE=True: cdiv(B, BLOCK_B) programs walk the batch with the grid's stride; B 7 with 2, 3 and 8
    elements a program leaves programs with fewer elements (and one grid larger than B's share)."""
    x, y = _inputs((7, 23, 200, 16), dtype)
    ref = optimized_fm_reference(x, y).float()
    for bb in (2, 3, 8):
        cfg = {"BLOCK_D": 256, "BLOCK_B": bb, "PIPELINE": True, "TRANSPOSED": transposed}
        torch.testing.assert_close(kernel.triton_optimized_fm(x, y, config=cfg).float(), ref, atol=atol, rtol=rtol)


def test_streaming_configs_are_pruned_where_they_do_not_fit():
    cfgs = kernel.autotune_configs()

    def pipelined(**kw):
        return [c for c in kernel.prune_configs(cfgs, {}, D_POW2=256, **kw) if c.kwargs["PIPELINE"]]

    assert pipelined(BLOCK_N=32, BLOCK_K=16)                                  # N 24: kept
    assert pipelined(BLOCK_N=64, BLOCK_K=64)                                  # N 64 K 64: kept
    assert not pipelined(BLOCK_N=128, BLOCK_K=64)                             # 3 x 64 KB of X tiles
    assert not pipelined(BLOCK_N=32, BLOCK_K=16, ELEM_BYTES=4)                # fp32: no tensor-core dots


def test_autotune_space_is_pruned_to_what_fits():
    cfgs = kernel.autotune_configs()
    kept = kernel.prune_configs(cfgs, {}, D_POW2=256, BLOCK_N=32, BLOCK_K=16)
    assert kept and all(c.kwargs["BLOCK_D"] <= 256 for c in kept)
    narrow = kernel.prune_configs(cfgs, {}, D_POW2=64, BLOCK_N=32, BLOCK_K=16)
    assert narrow and all(c.kwargs["BLOCK_D"] <= 64 for c in narrow)


def test_rejects_bad_inputs():
    x, y = _inputs((2, 5, 8, 4), torch.float16)
    with pytest.raises(ValueError):
        kernel.triton_optimized_fm(x, y[:3])
    with pytest.raises(TypeError):
        kernel.triton_optimized_fm(x, y.float())


def test_spec_model_and_seed_candidate_agree():
    torch.manual_seed(0)
    model = spec.Model(*spec.get_init_inputs())
    torch.manual_seed(0)
    cand = kernel.ModelNew(*spec.get_init_inputs())
    x = spec.get_inputs()[0]
    atol, rtol = spec.TOLERANCES[spec.DTYPE]
    torch.testing.assert_close(cand(x).float(), model(x).float(), atol=atol, rtol=rtol)


def test_tunables_are_declared_as_data():
    for name, values in kernel.TUNABLES.items():
        assert getattr(kernel, name) in values, name


def _row(params, contender, mode, median, dtype="float16"):
    return {"params": json.dumps(params), "contender": contender, "mode": mode, "median_us": median,
            "dtype": dtype, "status": "ok"}


def test_dispatcher_falls_back_where_the_kernel_loses(tmp_path):
    small = {"B": 1024, "N": 24, "D": 224, "K": 16}
    large = {"B": 1024, "N": 128, "D": 224, "K": 64}
    rows = [_row(small, "eager", m, 30.0) for m in ("plain", "graph")] + \
           [_row(small, "triton", m, 10.0) for m in ("plain", "graph")] + \
           [_row(large, "eager", m, 60.0) for m in ("plain", "graph")] + \
           [_row(large, "triton", m, 61.0) for m in ("plain", "graph")]
    d = OptimizedFMDispatcher(write_rows(rows, tmp_path / "b.csv", provenance={}))
    assert d.decide(small, "float16").use_kernel
    assert not d.decide(large, "float16").use_kernel
    assert not d.decide(dict(small, N=512), "float16").use_kernel          # unsupported
    assert not d.decide(small, "bfloat16").use_kernel                      # never measured


def test_dispatched_op_on_cpu_is_pytorch():
    x, y = _inputs((2, 5, 8, 4), torch.float32)
    torch.testing.assert_close(dispatched_fm(x, y), optimized_fm_reference(x, y))


def test_launch_plan_keeps_the_argument_tail_in_signature_order():
    """The recorded plan replays every argument after the tensors, constexprs included, in the order of
    the kernel's signature (the compiled launcher parses them positionally)."""
    from case_studies.common.launch import LaunchCache, kernel_arg_values

    jit = kernel._optimized_fm_kernel
    params = inspect.signature(jit.fn).parameters
    named = {name: i for i, (name, p) in enumerate(params.items()) if p.default is inspect.Parameter.empty}
    values = kernel_arg_values(jit, named)
    assert values[:len(named)] == list(range(len(named)))
    assert values[-1] is False                              # PROBES' default
    cache = LaunchCache(jit, n_tensors=3)

    class Compiled:                                         # what Triton returns on a GPU
        packed_metadata = (4, 1, 0)

    plan = cache.record(("k",), Compiled(), (7,), named, {"BLOCK_D": 32})
    assert plan is not None and plan.grid == (7, 1, 1) and plan.tail == tuple(values[3:])
    assert cache.plans[("k",)] is plan
    assert cache.record(("interp",), None, (1,), named, {}) is None     # the interpreter returns nothing
    with pytest.raises(KeyError):
        kernel_arg_values(jit, {"x_ptr": 0})


def test_pinned_configs_are_configs_the_autotuner_could_pick():
    """SHAPE_RULES pins, per measured shape, one of the configs the pruner keeps there (so the compile-cache
    warming builds it); unmeasured shapes and dtypes stay with the autotuner."""
    from case_studies.optimized_fm import kernel as fk

    assert fk.SHAPE_RULES
    for (bsz, n, d, k, dtype), cfg in fk.SHAPE_RULES.items():
        assert fk.rule_config(bsz, n, d, k, dtype) == cfg
        assert cfg in fk.configs_for({"B": bsz, "N": n, "D": d, "K": k})
    assert fk.rule_config(1024, 24, 224, 16, torch.float16)["TRANSPOSED"]     # the production shape's best
    assert fk.rule_config(1024, 64, 224, 16, torch.float16) is None           # the pick was the fastest there
    assert fk.rule_config(1024, 40, 224, 16, torch.bfloat16) is None          # not measured in bf16
    assert fk.rule_config(512, 40, 224, 16, torch.float16) is None
