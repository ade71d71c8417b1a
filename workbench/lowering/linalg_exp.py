"""`linalg_matrix_exp` (matrix_exp) by scaling and squaring, one program per matrix, the matrix in registers
(n <= MAX_N): exp(A) = exp(A / 2^s)^(2^s) with s the smallest that brings ||A / 2^s||_1 to at most THETA, and
exp(X) by its Taylor polynomial of degree DEGREE in Horner form (P <- I + X P / k). At ||X||_1 <= 1.5 the
truncation error is below 1.5^19 / 19! (2e-14), far under fp32's rounding, so the polynomial needs no Pade
denominator and no solve (Higham, "The scaling and squaring method for the matrix exponential revisited", 2005,
for the error bound; PyTorch's own kernel uses optimized Taylor polynomials too, Bader, Blanes and Casas 2019).
Products by tl.dot in fp32 (input_precision="ieee"); fp16 and bf16 inputs are computed in fp32 and rounded once.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported
from workbench.lowering.graph import dtype, op_name
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("NUM_WARPS",)
MAX_N = 64
# fewer squarings, less amplified rounding: on OpInfo's 5 x 5 x 5 sample (||A||_1 about 27) the largest error
# against fp64 was 0.226 at degree 12 / theta 0.5 (6 squarings), 0.021 here (5), PyTorch's fp32 0.050
DEGREE = 18
THETA = 1.5

SRC = '''@triton.jit
def __KNAME___expm(a_ptr, o_ptr, n, a_sb, a_sr, a_sc, NP: tl.constexpr, DEGREE: tl.constexpr,
                   THETA: tl.constexpr):
    """exp(A) for A [n, n]: Taylor of A / 2^s, squared s times."""
    bi = tl.program_id(0).to(tl.int64)
    r = tl.arange(0, NP)
    rr = r[:, None]
    cc = r[None, :]
    A = tl.load(a_ptr + bi * a_sb + rr * a_sr + cc * a_sc, mask=(rr < n) & (cc < n), other=0).to(tl.float32)
    eye = tl.where(rr == cc, 1.0, 0.0)
    norm1 = tl.max(tl.sum(tl.abs(A), 0), 0)
    # s = ceil(log2(norm1 / THETA)), at least 0; capped where the norm is inf or NaN (the result is too)
    s = tl.minimum(tl.maximum(tl.ceil(tl.log2(tl.maximum(norm1, 1e-30) / THETA)), 0.0), 126.0)
    s = tl.where(norm1 == norm1, s, 0.0).to(tl.int32)
    X = A * tl.exp2(-s.to(tl.float32))
    P = eye
    for kk in range(0, DEGREE):
        P = eye + tl.dot(X, P, input_precision="ieee") / (DEGREE - kk)
    for _ in range(0, s):
        P = tl.dot(P, P, input_precision="ieee")
    tl.store(o_ptr + bi * n * n + rr * n + cc, P, mask=(rr < n) & (cc < n))
'''


def _expm(node: fx.Node, names: dict[fx.Node, str]) -> list[str]:
    a, v = names[node.args[0]], names[node]
    return [f"_A = {a}", "_n = _A.shape[-1]",
            f"if _n > {MAX_N}:",
            f"    raise ValueError(f'{{_n}} x {{_n}} matrices: more than the {MAX_N} a program holds in registers')",
            "_bt = list(_A.shape[:-2])", "_A3 = _A.reshape([_numel(_bt), _n, _n])", "_Bn = _A3.shape[0]",
            f"{v} = torch.empty([*_bt, _n, _n], dtype={a}.dtype, device=dev)",
            "if _Bn and _n: __KNAME___expm[(_Bn,)](_A3, " + v + ", _n, *_A3.stride(), "
            f"NP=max(16, triton.next_power_of_2(_n)), DEGREE={DEGREE}, THETA={THETA}, num_warps=NUM_WARPS)"]


def expm_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    dt = dtype(node.args[0])
    if dt not in (torch.float32, torch.float16, torch.bfloat16):
        raise Unsupported(f"unsupported: {op_name(node)} on {dt} (fp32, fp16, bf16)")
    return SRC, _expm(node, names), set()


register("linalg_matrix_exp", Primitive("expm", TUNABLES, expm_kernel))
