"""One-off (issue 35): why level 1's lowered activations time 0.82-0.86x of eager in `workbench eval` at
4096 x 393216 fp32 (call 11). Times, in one process with `triton.testing.do_bench_cudagraph` (the harness's
kind of clock: graph replays), eager relu, the lowered draft (`DRAFT`, a file `workbench lower` wrote) and
hand-written variants of its kernel (no mask, a persistent loop, streaming stores), each on ordinary tensors
and on device memory made as the harness's shelf makes it (`devmem.Shared`: cuMemCreate + cuMemMap).

    python experiments/elementwise_gap/bench.py DRAFT.py [ROWS COLS]

Then the same in a second process that maps the shelf from a file descriptor (`Shared.open`), as the
candidate process does: the harness's candidate ran 0.82x of eager where this process's own run does not.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys

import torch
import triton
import triton.language as tl
from triton.testing import do_bench, do_bench_cudagraph


@triton.jit
def relu_masked(o, x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.maximum(tl.load(x + offs, mask=m, other=0), 0), mask=m)


@triton.jit
def relu_nomask(o, x, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o + offs, tl.maximum(tl.load(x + offs), 0))


@triton.jit
def relu_stream(o, x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m, other=0, eviction_policy="evict_first")
    tl.store(o + offs, tl.maximum(v, 0), mask=m, cache_modifier=".cs")


@triton.jit
def relu_persist(o, x, n, BLOCK: tl.constexpr):
    step = tl.num_programs(0) * BLOCK
    for start in range(tl.program_id(0) * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(o + offs, tl.maximum(tl.load(x + offs, mask=m, other=0), 0), mask=m)


def load(path):
    spec = importlib.util.spec_from_file_location("draft", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cases_for(x, out, n, model, sms):
    return {
        "eager relu": lambda: torch.relu(x),
        "draft ModelNew": lambda: model(x),
        "masked 1024/4": lambda: relu_masked[(triton.cdiv(n, 1024),)](out, x, n, BLOCK=1024, num_warps=4),
        "masked 4096/8": lambda: relu_masked[(triton.cdiv(n, 4096),)](out, x, n, BLOCK=4096, num_warps=8),
        "nomask 1024/4": lambda: relu_nomask[(n // 1024,)](out, x, BLOCK=1024, num_warps=4),
        "stream 1024/4": lambda: relu_stream[(triton.cdiv(n, 1024),)](out, x, n, BLOCK=1024, num_warps=4),
        "persist 8xSM 2048/8": lambda: relu_persist[(8 * sms,)](out, x, n, BLOCK=2048, num_warps=8),
        "copy_ (out <- x)": lambda: out.copy_(x),
    }


def time_cases(where, x, out, n, model, sms, gb):
    ref = torch.relu(x)
    for name, fn in cases_for(x, out, n, model, sms).items():
        r = fn()
        if name != "copy_ (out <- x)":
            got = r if isinstance(r, torch.Tensor) else out
            assert torch.equal(got, ref), name
        g = do_bench_cudagraph(fn, rep=300, return_mode="median")
        e = do_bench(fn, rep=300, return_mode="median")
        print(json.dumps({"memory": where, "case": name, "graph_us": round(g * 1e3, 1), "stream_us": round(e * 1e3, 1),
                          "graph_TBps": round(gb / (g * 1e-3) / 1e3, 3)}), flush=True)


def child(draft_path, fd, size, rows, cols) -> None:
    """The candidate's arrangement: the shelf mapped from another process's descriptor."""
    from workbench.harness.devmem import Shared

    n = rows * cols
    shared = Shared.open(fd, size)
    xs = shared.tensor[: n * 4].view(torch.float32).view(rows, cols)
    out = torch.empty_like(xs)
    model = load(draft_path).ModelNew().cuda()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    time_cases("imported shelf (child)", xs, out, n, model, sms, 2 * n * 4 / 1e9)
    x0 = xs.clone()
    time_cases("ordinary (child)", x0, out, n, model, sms, 2 * n * 4 / 1e9)


def main() -> None:
    if sys.argv[1] == "--child":
        _, _, path, fd, size, rows, cols = sys.argv
        child(path, int(fd), int(size), int(rows), int(cols))
        return
    draft = load(sys.argv[1])
    rows, cols = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (4096, 393216)
    n = rows * cols
    gb = 2 * n * 4 / 1e9
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    x0 = torch.randn(rows, cols, device="cuda")
    from workbench.harness.devmem import Shared

    shared, fd = Shared.create(n * 4)
    os.close(fd)
    xs = shared.tensor[: n * 4].view(torch.float32).view(rows, cols)
    xs.copy_(x0)
    out = torch.empty_like(x0)
    model = draft.ModelNew().cuda()
    for where, x in (("ordinary", x0), ("shelf", xs)):
        time_cases(where, x, out, n, model, sms, gb)
    del x0, out
    torch.cuda.empty_cache()
    shared2, fd2 = Shared.create(n * 4)
    shared2.tensor[: n * 4].view(torch.float32).copy_(xs.reshape(-1))
    torch.cuda.synchronize()
    import subprocess

    subprocess.run([sys.executable, __file__, "--child", sys.argv[1], str(fd2), str(shared2.size), str(rows),
                    str(cols)], pass_fds=[fd2], check=False)
    os.close(fd2)
    shared2.close()
    del xs
    shared.close()


if __name__ == "__main__":
    main()
