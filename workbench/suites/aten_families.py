"""The ATen suite's op families: the groups its report gives speed per (geomean over eager and over
torch.compile, fast_1), so a reader sees which kind of kernel is slow, not only which op.

The family comes from the OpInfo name by the first rule that matches it whole; OpInfo's own classes (unary and
binary ufuncs, reductions) decide where no rule names it.
"""
from __future__ import annotations

import re
from typing import Any

# (family, a full match of the OpInfo name: `max` for `max.reduction_with_dim`), first match wins
_RULES: tuple[tuple[str, str], ...] = (
    ("random", r"bernoulli|cauchy|exponential|geometric|log_normal|normal|uniform|multinomial|rand\w*|"
               r"nn\.functional\.(\w*dropout\w*|rrelu)|native_dropout\w*"),
    ("factories", r"arange|empty\w*|eye|full\w*|linspace|logspace|ones\w*|zeros\w*|zero_|new_\w+|"
                  r"scalar_tensor|signal\.windows\.\w+"),
    ("fft", r"fft\.\w+|stft|istft"),
    ("special functions", r"special\.\w+|polygamma|mvlgamma|digamma|lgamma|erfinv|i0|sinc|xlogy|igammac?|zeta"),
    ("linear algebra", r"linalg\.\w+|cholesky\w*|lu\w*|qr|svd\w*|pca_lowrank|det|logdet|slogdet|inverse|pinverse|"
                       r"triangular_solve|geqrf|ormqr|matrix_exp|trace|norm|renorm|nuclear_norm|cross"),
    ("matmul and attention", r"mm|bmm|mv|dot|vdot|inner|outer|ger|addmm|addmv|addbmm|baddbmm|addr|matmul|einsum|"
                             r"tensordot|kron|chain_matmul|__rmatmul__|nn\.functional\.(linear|bilinear)|"
                             r"torch\._scaled_mm\w*|sparse\.\w+|torch\.ops\.aten\.\w*attention\w*|"
                             r"nn\.functional\.scaled_dot_product_attention|nn\.functional\.multi_head\w*"),
    ("convolution", r"nn\.functional\.conv\w*|conv\w*|nn\.functional\.(unfold|fold)"),
    ("pooling and resampling", r"nn\.functional\.(\w*pool\w*|interpolate|upsample\w*|grid_sample|affine_grid|"
                               r"pixel_(un)?shuffle|channel_shuffle)|grid_sampler_\w+|_upsample\w*|\w*_pool\w*"),
    ("normalization", r"nn\.functional\.(\w*_norm|normalize|local_response_norm)|native_\w*_norm|"
                      r"_native_batch_norm_legit|_batch_norm_with_update|masked\.normalize"),
    ("losses", r"nn\.functional\.(\w*loss|\w*entropy\w*|nll_loss|kl_div|pdist|pairwise_distance|"
               r"cosine_similarity|triplet_margin\w*)|cdist|dist"),
    ("softmax and scans", r".*softm(ax|in).*|(masked\.)?(cumsum|cumprod|cummax|cummin|logcumsumexp)|"
                          r"cumulative_trapezoid|logsumexp|masked\.logsumexp"),
    ("sort and select", r"sort|argsort|msort|topk|kthvalue|(masked\.)?n?a?n?median|mode|n?a?n?quantile|unique\w*|"
                        r"searchsorted|bucketize|histc|histogram\w*|bincount|isin|max|min|argmax|argmin|aminmax|"
                        r"masked\.(argmax|argmin)"),
    ("indexing and scatter", r"index_\w+|scatter\w*|gather|take\w*|put|masked_\w+|nonzero\w*|argwhere|where|"
                             r"\w+_scatter|repeat_interleave|__getitem__|(nn\.functional\.)?embedding\w*|"
                             r"_?segment_reduce|_unsafe_masked_index\w*|unravel_index"),
    ("shape and copy", r"\w+_copy|cat|concat\w*|stack|hstack|vstack|dstack|column_stack|row_stack|\w*split\w*|"
                       r"chunk|unsafe_chunk|_chunk_cat|unbind\w*|flip\w*|roll|rot90|diag\w*|tril\w*|triu\w*|"
                       r"reshape\w*|view\w*|permute|movedim|moveaxis|swap\w+|transpose|t|T|mT|H|mH|adjoint|"
                       r"expand\w*|broadcast_\w+|squeeze\w*|unsqueeze|flatten|unflatten|narrow\w*|select|"
                       r"repeat|tile|clone|contiguous|block_diag|atleast_\w+|ravel|as_strided\w*|resolve_\w+|"
                       r"sum_to_size|complex|polar|view_as_\w+|meshgrid|cartesian_prod|combinations|slice|"
                       r"constant_pad_nd|nn\.functional\.pad|unfold|to|resize_\w*|item|"
                       r"nn\.functional\.(pixel_shuffle|pixel_unshuffle)"),
    ("reduction", r"std_mean|var_mean|cov|corrcoef|trapezoid|trapz|allclose|equal|masked\.\w+"),
    ("pointwise", r"addcdiv|addcmul|clamp\w*|lerp|logaddexp2?|diff|gradient|jiterator\w*"),
)
_COMPILED = tuple((fam, re.compile(pat)) for fam, pat in _RULES)
_BY_CLASS = {"UnaryUfuncInfo": "pointwise", "BinaryUfuncInfo": "pointwise", "ReductionOpInfo": "reduction",
             "SpectralFuncInfo": "fft", "ShapeFuncInfo": "shape and copy"}


def family(name: str, opinfo_class: str | None = None) -> str:
    """The family of an OpInfo op by its name (`nn.functional.max_pool2d`; `max` for `max.reduction_with_dim`)
    and, where no rule names it, its OpInfo class."""
    for fam, pat in _COMPILED:
        if pat.fullmatch(name):
            return fam
    if opinfo_class in _BY_CLASS:
        return _BY_CLASS[opinfo_class]
    if name.startswith("nn.functional."):
        return "activations and other nn.functional"
    return "other"


def family_of_op(op: Any) -> str:
    return family(op.name, type(op).__name__)
