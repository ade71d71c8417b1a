"""Capture a spec's `Model.forward` into core ATen without allocating its inputs.

The spec's `get_inputs()` and `Model(*get_init_inputs())` run inside a `FakeTensorMode`: every
tensor is a shape-and-dtype record, so a 6 GB KernelBench input costs nothing. `torch.export`
traces the forward with every input dimension marked `Dim.AUTO` (dynamic unless the graph pins
it), so the generated code reads sizes from the tensors at run time; a model of more than
`ALL_DIMS_MAX_MODULES` modules gets only its batch dimension dynamic (symbolic sizes are what a large
trace spends its time on: DenseNet201 at published sizes, 50 s all dims, 16 s the batch, 12 s static, on
the 2-core development machine); parameters, buffers and
lifted constants become graph inputs. `run_decompositions` lowers to core ATen plus a few more
decompositions (norms, softmax) whose pieces are our primitives.
"""
from __future__ import annotations

import contextlib
import io
import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.export import Dim
from torch.overrides import TorchFunctionMode

log = logging.getLogger(__name__)

# Above this many modules (DenseNet201: 526; every other KernelBench level-3 model: at most 159) only
# dimension 0 of each input is marked dynamic: lowering a large model stays under a minute on 2 cores.
ALL_DIMS_MAX_MODULES = 256

aten = torch.ops.aten

# Core-ATen ops that have no primitive of their own here but decompose into ones that do.
_EXTRA_DECOMPOSITIONS = [
    aten._native_batch_norm_legit_functional, aten._native_batch_norm_legit_no_training,
    aten._native_batch_norm_legit, aten.native_batch_norm, aten.native_group_norm, aten.native_layer_norm,
    aten._softmax, aten._log_softmax, aten.var_mean.correction, aten.elu, aten.leaky_relu,
    aten.linalg_vector_norm, aten.hardtanh, aten._adaptive_avg_pool2d, aten.native_dropout,
    aten.addcmul, aten.addcdiv, aten.lerp.Scalar, aten.lerp.Tensor, aten.logit, aten.glu,
    aten.hardsigmoid, aten.softplus, aten.mish, aten.silu, aten.hardswish, aten.logsumexp,
    aten.std.correction, aten.nll_loss_forward, aten.huber_loss, aten.smooth_l1_loss,
    aten.mse_loss, aten.binary_cross_entropy, aten.kl_div, aten.cosine_similarity,
    aten.pairwise_distance, aten.margin_ranking_loss, aten.soft_margin_loss, aten.triplet_margin_loss,
    aten.hinge_embedding_loss, aten.celu, aten.selu, aten.rrelu_with_noise, aten.instance_norm,
    aten.frac, aten.trunc, aten.xlogy.Tensor, aten.sinc, aten.diag_embed, aten.norm.ScalarOpt_dim,
    aten.upsample_nearest2d.vec, aten.upsample_bilinear2d.vec, aten.repeat,
]


def _cov(x: torch.Tensor, correction: int = 1, fweights: torch.Tensor | None = None,
         aweights: torch.Tensor | None = None) -> torch.Tensor:
    """torch.cov as ATen's Correlation.cpp computes it, less its value checks (`fweights` integral and
    non-negative, `aweights` non-negative: `.item()` reads that stop the trace); a norm factor <= 0 is 0 as
    there (the result then inf or nan), chosen by `where` rather than read back."""
    if x.dim() < 2:
        x = x.reshape(1, -1)
    w = fweights
    if aweights is not None:
        w = aweights if w is None else w * aweights
    n_obs = x.shape[1]
    w_sum = w.sum() if w is not None else x.new_ones(()) * n_obs
    avg = (x * w if w is not None else x).sum(1) / w_sum
    if w is not None and aweights is not None and correction != 0:
        norm = w_sum - correction * (w * aweights).sum() / w_sum
    else:
        norm = w_sum - correction
    norm = torch.where(norm <= 0, torch.zeros_like(norm), norm)
    xc = x - avg.unsqueeze(1)
    c = torch.mm(xc, (xc * w if w is not None else xc).t())
    return c.div(norm).squeeze()


def _corrcoef(x: torch.Tensor) -> torch.Tensor:
    """torch.corrcoef (Correlation.cpp) over `_cov`: cov scaled by the standard deviations, clipped to [-1, 1]."""
    c = _cov(x)
    if c.dim() == 0:
        return c / c
    sd = torch.sqrt(torch.diagonal(c))
    c = c / sd.reshape(-1, 1)
    c = c / sd.reshape(1, -1)
    return c.clip(-1, 1)


def _narrow(x: torch.Tensor, dim: int, start: Any, length: int) -> torch.Tensor:
    """narrow with its start given as a 0-d tensor: ATen reads it with `.item()` (an unbacked offset the graph
    cannot return); the same elements as index_select of start + arange(length), start < 0 counting from the end."""
    size = x.shape[dim]
    s = start.reshape([]).to(torch.int64)
    s = torch.where(s < 0, s + size, s)
    return x.index_select(dim, s + torch.arange(length, device=x.device))


def _combinations(x: torch.Tensor, r: int = 2, with_replacement: bool = False) -> torch.Tensor:
    """torch.combinations: ATen builds a mask over the r-fold grid and selects it (a data-dependent count); the
    combinations of n indices depend on n only, so they are a constant index gathered from x."""
    import itertools

    if r == 0:
        return x.new_empty((0,))
    n = int(x.shape[0])
    comb = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = torch.tensor(list(comb(range(n), r)), dtype=torch.int64, device=x.device).reshape(-1, r)
    return x[idx]


def _one_hot(x: torch.Tensor, num_classes: int = -1) -> torch.Tensor:
    """F.one_hot: ATen's checks read min and max with .item(); a given class count is a comparison with an arange,
    an inferred one (max + 1, a value) is one_hot.py's `workbench::one_hot_infer`."""
    if num_classes < 0:
        from workbench.lowering import one_hot  # noqa: F401 - defines torch.ops.workbench.one_hot_infer

        return torch.ops.workbench.one_hot_infer(x)
    return (x.unsqueeze(-1) == torch.arange(num_classes, device=x.device)).to(torch.int64)


def _ctc_loss(log_probs: torch.Tensor, targets: torch.Tensor, input_lengths: Any, target_lengths: Any, blank: int = 0,
              reduction: Any = "mean", zero_infinity: bool = False) -> torch.Tensor:
    """F.ctc_loss / torch.ctc_loss: ATen's `_ctc_loss` returns log_alpha sized by max(target_lengths) (a value), so
    the loss is ctc.py's `workbench::ctc_nll` (nll per element, one Triton kernel) plus ATen's ctc_loss_impl
    around it: zero_infinity, then the mean over elements of nll / max(target_length, 1), or the sum."""
    from workbench.lowering import ctc  # noqa: F401 - defines torch.ops.workbench.ctc_nll and its primitive

    if isinstance(reduction, int):
        reduction = _REDUCTIONS[reduction]
    batched = log_probs.dim() == 3
    if not batched:
        log_probs, targets = log_probs.unsqueeze(1), targets.reshape(1, -1)
    dev = log_probs.device

    def lengths(x: Any) -> torch.Tensor:
        if isinstance(x, torch.Tensor):
            return x.to(torch.int64).reshape(-1)
        return torch.tensor([x] if isinstance(x, int) else list(x), dtype=torch.int64, device=dev)

    il, tl_ = lengths(input_lengths), lengths(target_lengths)
    if targets.dim() == 2:
        targets = targets.contiguous()
        offsets = torch.arange(targets.shape[0], device=dev) * targets.shape[1]
    else:
        offsets = torch.cumsum(tl_, 0) - tl_
    nll = torch.ops.workbench.ctc_nll(log_probs, targets, offsets, il, tl_, blank)
    if zero_infinity:
        nll = torch.where(nll == float("inf"), torch.zeros_like(nll), nll)
    if reduction == "mean":
        return (nll / tl_.clamp_min(1).to(nll.dtype)).mean()
    if reduction == "sum":
        return nll.sum()
    return nll if batched else nll.reshape([])


def _lstsq(A: torch.Tensor, B: torch.Tensor, rcond: float | None = None, *, driver: str | None = None) -> Any:
    """torch.linalg.lstsq as the minimum-norm least-squares solution pinv(A) B (what gelsd / gelss compute for any
    rank, and gels / gelsy for a full-rank A), over linalg_jacobi's SVD kernels: ATen sizes `residuals` by a value
    (computed only where m > n, the driver is not gelsy and, for gelss / gelsd, every rank is n, read with
    `.item()`). Here the residuals are sum((A X - B)^2) over the rows where m > n and the driver is not gelsy, so a
    rank-deficient A with m > n under gelss / gelsd, whose ATen residuals are empty, is not matched. rank (gelsy,
    gelss, gelsd) counts singular values above rcond * s_max (rcond: eps * max(m, n) when None, as LAPACK's
    default), singular_values are gelss / gelsd's; what a driver does not compute is empty, as in ATen."""
    driver = driver or ("gels" if A.device.type == "cuda" else "gelsy")
    m, n = A.shape[-2], A.shape[-1]
    vector = B.dim() == A.dim() - 1
    b = B.unsqueeze(-1) if vector else B
    rtol = torch.finfo(A.dtype).eps * max(m, n) if rcond is None or rcond < 0 else rcond
    x = torch.linalg.pinv(A, rtol=rtol) @ b
    if m > n and driver != "gelsy":
        residuals = ((A @ x - b) ** 2).sum(-2)  # [*, 1] for a vector B too, as ATen
    else:
        residuals = A.new_empty((0,))
    if driver == "gels":
        rank = torch.empty((0,), dtype=torch.int64, device=A.device)
    else:
        rank = torch.linalg.matrix_rank(A, rtol=rtol)
    sv = torch.linalg.svdvals(A) if driver in ("gelss", "gelsd") else A.new_empty((0,))
    return torch.return_types.linalg_lstsq((x.squeeze(-1) if vector else x, residuals, rank, sv))


def _bound(args: tuple, kwargs: dict, names: tuple[str, ...]) -> dict[str, Any]:
    out = dict(zip(names, args))
    out.update(kwargs)
    return out


class _CaptureOverrides(TorchFunctionMode):
    """Ops whose ATen implementation reads tensor values into Python (`.item()`, a nonzero count) although their
    result's shape does not depend on them, written in traceable ops (`_cov`...). `split_values`, when given, are
    tensor_split's tensor `indices_or_sections` read from the real inputs in call order (`_specialized_capture`):
    its output shapes do depend on them, so the trace is specialized to the sample's values."""

    def __init__(self, split_values: list[Any] | None = None) -> None:
        super().__init__()
        self.split_values = split_values

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func in (torch.cov, torch.Tensor.cov):
            return _cov(**_bound(args, kwargs, ("x", "correction", "fweights", "aweights")))
        if func in (torch.corrcoef, torch.Tensor.corrcoef):
            return _corrcoef(*args, **kwargs)
        if func in (torch.narrow, torch.Tensor.narrow):
            a = _bound(args, kwargs, ("input", "dim", "start", "length"))
            if isinstance(a.get("start"), torch.Tensor):
                return _narrow(a["input"], a["dim"], a["start"], a["length"])
        if func in (torch.ctc_loss, torch.nn.functional.ctc_loss):
            return _ctc_loss(*args, **kwargs)
        if func is torch.linalg.lstsq:
            return _lstsq(*args, **kwargs)
        if func is torch.combinations:
            return _combinations(*args, **kwargs)
        if func is torch.nn.functional.one_hot:
            return _one_hot(*args, **kwargs)
        if func in (torch.tensor_split, torch.Tensor.tensor_split) and self.split_values is not None:
            a = _bound(args, kwargs, ("input", "indices_or_sections", "dim"))
            t = a.get("indices_or_sections", a.pop("tensor_indices_or_sections", None))
            if isinstance(t, torch.Tensor) and self.split_values:
                v = self.split_values.pop(0)
                return torch.tensor_split(a["input"], v, a.get("dim", 0))
        return func(*args, **kwargs)


class _RecordSplits(TorchFunctionMode):
    """Runs the real forward and records tensor_split's tensor `indices_or_sections` as Python ints, in call order."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[Any] = []

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func in (torch.tensor_split, torch.Tensor.tensor_split):
            a = _bound(args, kwargs, ("input", "indices_or_sections", "dim"))
            t = a.get("indices_or_sections", a.get("tensor_indices_or_sections"))
            if isinstance(t, torch.Tensor):
                self.values.append(t.tolist())
        return func(*args, **kwargs)


class CaptureError(RuntimeError):
    """The forward could not be traced: the message is the one-line reason."""


@dataclass
class Captured:
    """An exported, decomposed forward and how its graph inputs map back to the module."""

    graph: torch.fx.Graph
    # graph placeholder name -> ("param"|"buffer"|"constant", fqn), ("input", index into forward args) or
    # ("token", None): an effect token, unused once the graph keeps only the user outputs
    inputs: dict[str, tuple[str, Any]]
    out_spec: Any
    forward_args: list[str]
    dynamic: bool                     # some input dims traced symbolic (all, or the batch: `dynamic_dims`)
    dynamic_dims: str = "all"          # "all", "batch" or "none"
    constants: dict[str, Any] = field(default_factory=dict)
    # fqns of plain tensor attributes (`self.hidden = torch.randn(...)` in __init__) traced as buffers:
    # ModelNew registers them as non-persistent buffers after its copied __init__ (lifted.py)
    state_attrs: list[str] = field(default_factory=list)


def decomposition_table() -> dict:
    from torch._decomp import core_aten_decompositions, get_decompositions

    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA_DECOMPOSITIONS))
    # LSTM and GRU stay whole: workbench/lowering/rnn.py lowers them to two kernels per layer and direction
    # (decomposed, 6 layers x 512 steps are 3072 unrolled cells: lowering ran past 150 s on the 2-core CPU)
    for op in (torch.ops.aten.lstm.input, torch.ops.aten.gru.input):
        table.pop(op, None)
    for op, fn in list(table.items()):
        if _takes_str_reduction(fn):
            table[op] = _int_reduction(fn)
    table[aten._trilinear.default] = _trilinear
    return table


def decompose(ep: Any) -> Any:
    """`ep.run_decompositions(decomposition_table())` without the guard function.

    run_decompositions re-traces `ep.module()`, which by default builds a `_guards_fn` checking every input's
    sizes: `torch.export._unlift._convert_guards_code_to_fn` rewrites each guard's text once per input path
    (`str.replace` of `pytree.keystr`), guards x inputs, both growing with the inputs. An ATen-suite spec of
    one forward over hundreds of OpInfo samples has hundreds of inputs: max_pool1d's 864, 5,976,001 keystr
    calls, 41 s of a 184 s lowering under cProfile (gaussian_nll_loss's 972 inputs: 1728 guards, 7.9 s
    unprofiled). The guards are not the lowering's: the captured graph keeps no guard node and the candidate
    reads every size from its tensors. Without `example_inputs` torch builds no guard function (`_unlift.py`:
    `if check_guards and placeholders and ep.example_inputs`); the decomposed graph is the same, node for
    node (the drafts of max_pool1d's 864 samples are byte-identical)."""
    ep.example_inputs = None
    return ep.run_decompositions(decomposition_table())


def _trilinear(i1: torch.Tensor, i2: torch.Tensor, i3: torch.Tensor, expand1: list[int], expand2: list[int],
               expand3: list[int], sumdim: list[int], unroll_dim: int = 1) -> torch.Tensor:
    """F.bilinear's core (ATen has no decomposition for it): each input unsqueezed at its expand dims, the
    product summed over `sumdim` (ATen Linear.cpp; `unroll_dim` only picks its loop order)."""
    xs = []
    for x, expand in ((i1, expand1), (i2, expand2), (i3, expand3)):
        for d in sorted(expand):
            x = x.unsqueeze(d)
        xs.append(x)
    prod = xs[0] * xs[1] * xs[2]
    return prod.sum(list(sumdim)) if len(sumdim) else prod


# ATen's loss ops take `reduction` as an int (`at::Reduction`), but some decompositions are the Python refs,
# which accept only the string: OpInfo's samples call margin_ranking_loss / hinge_embedding_loss with the int
_REDUCTIONS = ("none", "mean", "sum")


def _takes_str_reduction(fn: Any) -> bool:
    import inspect

    try:
        p = inspect.signature(fn).parameters.get("reduction")
    except (TypeError, ValueError):
        return False
    return p is not None and str(p.annotation) in ("str", "<class 'str'>")


def _int_reduction(fn: Any) -> Any:
    import functools
    import inspect

    pos = list(inspect.signature(fn).parameters).index("reduction")

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if len(args) > pos and isinstance(args[pos], int):
            args = (*args[:pos], _REDUCTIONS[args[pos]], *args[pos + 1:])
        if isinstance(kwargs.get("reduction"), int):
            kwargs["reduction"] = _REDUCTIONS[kwargs["reduction"]]
        return fn(*args, **kwargs)
    return wrapped


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line[:200]


def fake_model_and_inputs(module: Any) -> tuple[torch.nn.Module, tuple, Any]:
    """Model and inputs as fake tensors (no storage), plus the fake mode they live in."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
    with mode:
        torch.manual_seed(0)
        init = list(module.get_init_inputs())
        try:
            model = module.Model(*init)
        except RuntimeError as exc:
            if "Couldn't swap" not in str(exc):
                raise
            model = None
    if model is None:
        # `.to(dtype)` inside __init__ cannot swap fake parameters: build the parameters for real
        # (they are small next to the inputs) and hand fake copies to the trace.
        torch.manual_seed(0)
        model = module.Model(*init)
        for sub in model.modules():
            for name, p in list(sub._parameters.items()):
                if p is not None:
                    fake = mode.from_tensor(p.detach(), static_shapes=True)
                    sub._parameters[name] = torch.nn.Parameter(fake, p.requires_grad)
            for name, b in list(sub._buffers.items()):
                if b is not None:
                    sub._buffers[name] = mode.from_tensor(b, static_shapes=True)
    with mode:
        inputs = tuple(module.get_inputs())
    return model, inputs, mode


def state_tensors_as_buffers(model: torch.nn.Module) -> list[str]:
    """Register the model's plain tensor attributes as buffers; return their fqns, in module order.

    Non-strict export fakifies parameters and buffers into its own fake mode but keeps a plain tensor
    attribute as it is, a fake tensor of our mode: the graph then mixes two modes and export's guard
    pass fails ("fake mode ... doesn't match mode ..."), VanillaRNN's `self.hidden`. As buffers they
    join the others; a forward that reassigns one (`self.hidden = ...`) is a buffer mutation, which the
    candidate drops like BatchNorm's running statistics. Persistent here, so export keeps them as
    buffers rather than moving them to its constants.
    """
    fqns = []
    for prefix, sub in model.named_modules():
        for name, value in list(vars(sub).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                delattr(sub, name)
                sub.register_buffer(name, value)
                fqns.append(f"{prefix}.{name}" if prefix else name)
    return fqns


@contextlib.contextmanager
def _quiet_torch_logs() -> Any:
    """torch.export logs guard and symbol notes at WARNING; the diagnosis line says what matters."""
    names = ("torch.fx.experimental.symbolic_shapes", "torch._export", "torch.export", "torch._dynamo",
             "torch._subclasses.fake_tensor")
    saved = [(logging.getLogger(n), logging.getLogger(n).level) for n in names]
    for lg, _ in saved:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, lvl in saved:
            lg.setLevel(lvl)


def capture(module: Any) -> Captured:
    """Export `module.Model` on fake inputs; raise CaptureError with one line on failure."""
    import inspect

    from workbench.lowering.rnn import whole_rnn

    state_attrs: list[str] = []

    def build() -> tuple[torch.nn.Module, tuple]:
        try:
            model, inputs, _mode = fake_model_and_inputs(module)
        except Exception as exc:  # the spec's own code failed under fake tensors
            raise CaptureError(f"capture failed: building the model or its inputs: {_one_line(exc)}") from None
        state_attrs[:] = state_tensors_as_buffers(model)
        return model, inputs

    model, inputs = build()
    varargs = False
    try:
        sig_params = list(inspect.signature(module.Model.forward).parameters.values())[1:]
        params = [p.name for p in sig_params]
        varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in sig_params)
    except (TypeError, ValueError):
        params = [f"arg{i}" for i in range(len(inputs))]
    forward_args = params if len(params) == len(inputs) else [f"arg{i}" for i in range(len(inputs))]
    last: BaseException | None = None
    ep = None
    n_modules = sum(1 for _ in model.modules()) if isinstance(model, torch.nn.Module) else 0
    # a forward(*tensors) (every ATen-suite spec) is traced static: export wants one dynamic_shapes entry for
    # the whole tuple, so the per-input spec below fails its structure check before tracing (0.6-2.4 s, then
    # a second fake model and inputs built for the static trace)
    tries = ("none",) if varargs else ("all" if n_modules <= ALL_DIMS_MAX_MODULES else "batch", "none")
    dims = tries[0]
    for dims in tries:
        if dims != tries[0]:
            model, inputs = build()  # a fresh fake mode: the failed dynamic trace leaves guards behind
        dyn = None
        if dims != "none":
            dyn = tuple({d: Dim.AUTO for d in (range(x.dim()) if dims == "all" else range(min(1, x.dim())))}
                        if isinstance(x, torch.Tensor) else None for x in inputs)
        try:
            with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()), _quiet_torch_logs():
                warnings.simplefilter("ignore")
                with whole_rnn(), _CaptureOverrides():
                    ep = torch.export.export(model, inputs, dynamic_shapes=dyn, strict=False)
                ep = decompose(ep)
            break
        except Exception as exc:  # export raises many types (UserError, GuardOnDataDependent...)
            last = exc
            log.debug("export (dynamic dims: %s) failed: %s", dims, exc)
            ep = None
    if ep is None and last is not None and _data_dependent(last) and _small(inputs):
        ep = _specialized_capture(module, build)
        if ep is not None:
            dims = "none"
    if ep is None and last is not None and _data_dependent(last) and _small(inputs):
        ep = _draft_capture(module)
        if ep is not None:
            dims = "none"
            state_attrs[:] = []  # the real model's attributes are not registered as buffers on this path
    if ep is None:
        assert last is not None
        raise CaptureError(f"capture failed: {_capture_reason(last)}")
    sig = ep.graph_signature
    mapping: dict[str, tuple[str, Any]] = {}
    user_i = 0
    for spec in sig.input_specs:
        name = spec.arg.name
        kind = spec.kind.name
        if kind == "PARAMETER":
            mapping[name] = ("param", spec.target)
        elif kind == "BUFFER":
            mapping[name] = ("buffer", spec.target)
        elif kind in ("CONSTANT_TENSOR", "CUSTOM_OBJ"):
            mapping[name] = ("constant", spec.target)
        elif kind == "TOKEN":  # an effect token (decompositions with side effects): not a forward argument
            mapping[name] = ("token", None)
        else:
            mapping[name] = ("input", user_i)
            user_i += 1
    # Buffer mutations (BatchNorm's running statistics) are outputs of the functional graph; the
    # candidate returns only the user outputs (docs/lowering.md, "Limits").
    user_outputs = [s.arg.name for s in sig.output_specs if s.kind.name == "USER_OUTPUT"]
    graph = ep.graph_module.graph
    out_node = next(n for n in graph.nodes if n.op == "output")
    flat = list(out_node.args[0])
    keep = [a for a, s in zip(flat, sig.output_specs) if s.kind.name == "USER_OUTPUT"]
    assert len(keep) == len(user_outputs)
    out_node.args = (tuple(keep),)
    graph.eliminate_dead_code()
    return Captured(graph=graph, inputs=mapping, out_spec=ep.call_spec.out_spec, forward_args=forward_args,
                    dynamic=dims != "none", dynamic_dims=dims, constants=dict(ep.constants),
                    state_attrs=state_attrs)


def _data_dependent(exc: BaseException) -> bool:
    name = type(exc).__name__
    return "data-dependent" in str(exc) or "DataDependent" in name


def _capture_reason(exc: BaseException) -> str:
    if _data_dependent(exc):
        return "data-dependent control flow or shape (the forward branches on tensor values)"
    return _one_line(exc)


# The real inputs a data-dependent forward is traced on (`_draft_capture`): the ATen suite's samples are KBs;
# a KernelBench model that branches on its values is left to fail rather than allocated
DRAFT_MAX_BYTES = 64 << 20


def _small(inputs: tuple) -> bool:
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)) <= DRAFT_MAX_BYTES


def _specialized_capture(module: Any, build: Any) -> Any:
    """Trace a forward whose tensor_split takes its split points as a tensor, specialized to the sample's values.

    The output shapes depend on those values, so no trace is general: the real forward runs once on the real inputs
    (`_RecordSplits` reads each split tensor into ints), then the export replays those ints in call order, static
    sizes (the ATen suite's inputs are the saved samples, so the candidate computes their path; like `_draft_capture`,
    whose real-beside-fake check rejects these outputs). None when nothing was recorded or the trace still fails."""
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()), _quiet_torch_logs():
            warnings.simplefilter("ignore")
            torch.manual_seed(0)
            real_model = module.Model(*module.get_init_inputs())
            rec = _RecordSplits()
            with torch.no_grad(), rec:
                real_model(*module.get_inputs())
            if not rec.values:
                return None
            model, inputs = build()
            with _CaptureOverrides(split_values=list(rec.values)):
                ep = torch.export.export(model, inputs, strict=False)
            ep = decompose(ep)
    except Exception as exc:  # noqa: BLE001 - the fake trace's reason is the one reported
        log.debug("specialized export failed: %s", exc)
        return None
    return ep


def _draft_capture(module: Any) -> Any:
    """Trace a forward that branches on tensor values on its real inputs, specialized to the branches they take.

    gaussian_nll_loss's `if torch.any(var < 0): raise`, take's bounds check: under fake tensors each is a guard on
    an unbacked value and export stops. `draft_export` runs real tensors beside the fake ones and takes the
    branch the real values take; the runtime asserts it leaves for that choice are dropped, as every
    `_assert_scalar` is by the emitter, so the candidate computes the sample's path (static sizes, like a
    shape specialization). None when even that fails."""
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()), _quiet_torch_logs():
            warnings.simplefilter("ignore")
            torch.manual_seed(0)
            model = module.Model(*module.get_init_inputs())
            inputs = tuple(module.get_inputs())
            ep = torch.export.draft_export(model, inputs, strict=False)
            ep = decompose(ep)
    except Exception as exc:  # noqa: BLE001 - the fake trace's reason is the one reported
        log.debug("draft export failed: %s", exc)
        return None
    graph = ep.graph_module.graph
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in (aten._assert_scalar.default, aten._assert_async.msg):
            graph.erase_node(node)
    graph.eliminate_dead_code()
    return ep


def warm_up() -> None:
    """Trace and decompose a two-op forward once, so that a process forked after this (the suite's fork server,
    the ATen survey's parent) starts its capture with torch.export's lazily imported machinery (dynamo, the
    export passes, sympy's printers) already loaded: the first capture in a fresh process lowered a Linear + ReLU
    spec in 20.7 s, the second in 1.8 s (2-core CPU, load 7)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    class _Tiny(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.softmax(x @ x.t(), -1).amax(0)

    with FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True):
        x = torch.randn(4, 3)
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()), _quiet_torch_logs():
        warnings.simplefilter("ignore")
        decompose(torch.export.export(_Tiny(), (x,), dynamic_shapes=({0: Dim.AUTO},), strict=False))


def spec_module(spec_path: str | Path, overrides: dict | None) -> Any:
    from workbench.spec import load_spec

    return load_spec(spec_path, overrides or {}, module_name="wb_lowering_spec").module
