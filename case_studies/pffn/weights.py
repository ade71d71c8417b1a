"""The weights' TMA descriptors of one token, shared by the one-pass kernel (`kernel.py`) and the split-K
kernel (`splitk.py`)."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def weight_descriptors(w1_base, w2_base, w1_hdesc, w2_hdesc, tok, D, K, w1_stride_d, w2_stride_k,
                       DT: tl.constexpr, BLOCK_KC: tl.constexpr, HOST_TMA: tl.constexpr):
    """(W1 descriptor, W2 descriptor, first W1 row, first W2 row) of token `tok`, boxes `[DT, BLOCK_KC]` and
    `[BLOCK_KC, DT]`. HOST_TMA: the host-built descriptors over W1 `[N*D, K]` and W2 `[N*K, D]`
    (`kernel.host_descriptors`), where this token's rows start at tok * D and tok * K; otherwise built here
    over this token's `[D, K]` and `[K, D]` (`w1_base`, `w2_base`), rows from 0."""
    if HOST_TMA:
        w1_desc = w1_hdesc
        w2_desc = w2_hdesc
        r1 = tok * D
        r2 = tok * K
    else:
        w1_desc = tl.make_tensor_descriptor(w1_base, shape=[D, K], strides=[w1_stride_d, 1],
                                            block_shape=[DT, BLOCK_KC])
        w2_desc = tl.make_tensor_descriptor(w2_base, shape=[K, D], strides=[w2_stride_k, 1],
                                            block_shape=[BLOCK_KC, DT])
        r1 = tok * 0
        r2 = tok * 0
    return w1_desc, w2_desc, r1, r2
