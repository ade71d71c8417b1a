"""What one evaluation checks and times: shapes, trials, seeds. Shared by candidate and reference
processes, so both build bit-identical inputs from the same seeds."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from workbench.harness import bound
from workbench.spec import Spec, SpecError

N_TIMING_SETS = 4  # input sets rotated through the timed repetitions (defeats memoization)


@dataclass
class Plan:
    shapes: list[tuple[str, dict[str, Any]]]   # (name, constant overrides)
    timed_shape: str
    trials: int
    seed: int = 1234
    extra: dict[str, Any] = field(default_factory=dict)

    def trial_seed(self, shape_idx: int, trial: int) -> int:
        return self.seed + 1000 * shape_idx + trial

    def model_seed(self, shape_idx: int) -> int:
        return self.seed + 1000 * shape_idx + 999

    def timing_seed(self, j: int) -> int:
        return self.seed + 500_000 + j


def make_plan(spec: Spec, device: str, trials: int, shapes: list[str] | None, seed: int = 1234) -> Plan:
    """Default shapes: on the GPU every named shape; on the CPU the module defaults plus `CPU_SHAPES`."""
    named = spec.shapes
    if shapes:
        unknown = [s for s in shapes if s != "default" and s not in named]
        if unknown:
            raise SpecError(f"unknown shape(s) {unknown}; the spec declares {['default', *named]}")
        chosen = [(s, {} if s == "default" else named[s]) for s in shapes]
    elif device == "cuda" and named:
        chosen = [("default", {})] + list(named.items())
    else:
        cpu_names = list(getattr(spec.module, "CPU_SHAPES", []) or [])
        chosen = [("default", {})] + [(s, named[s]) for s in cpu_names if s in named]
    names = [n for n, _ in chosen]
    if device == "cuda" and "production" in names:
        timed = "production"
    elif device == "cuda" and len(names) > 1 and not shapes:
        timed = names[1]
    else:
        timed = names[0]
    return Plan(shapes=chosen, timed_shape=timed, trials=max(1, trials), seed=seed)


def to_device(obj: Any, device: str) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(o, device) for o in obj)
    return obj


def build_inputs(spec: Spec, seed: int, device: str, cache: Any = None) -> list[Any]:
    """`get_inputs()` under `torch.manual_seed(seed)`, moved to `device`; through `cache` (an
    `input_cache.InputCache`) when given: a hit returns the same values and leaves the same RNG state."""
    if cache is not None:
        hit = cache.get(spec, seed)
        if hit is not None:
            return list(to_device(hit, device))
    torch.manual_seed(seed)
    host = list(spec.module.get_inputs())
    if cache is not None:
        cache.put(spec, seed, host)
    return list(to_device(host, device))


def generate_on(spec: Spec, seed: int, device: str) -> list[Any]:
    """`get_inputs()` under `torch.manual_seed(seed)` with `device` as the default device: the inputs made
    where they are used (on the GPU: no host RNG, no host copy, no file). The reference process and the
    candidate process call this with the same seed and get the same values."""
    torch.manual_seed(seed)
    with torch.device(device):
        return list(to_device(list(spec.module.get_inputs()), device))


def set_tf32(allow: bool) -> None:
    """IEEE fp32 for matmuls and cuDNN convolutions unless the spec sets `ALLOW_TF32` (PyTorch's default
    lets cuDNN use TF32, which a correct fp32 kernel then fails against)."""
    torch.backends.cuda.matmul.allow_tf32 = bool(allow)
    torch.backends.cudnn.allow_tf32 = bool(allow)


def build_init_inputs(spec: Spec, seed: int, device: str) -> list[Any]:
    torch.manual_seed(seed)
    return list(to_device(list(spec.module.get_init_inputs()), device))


def apply_shape(spec: Spec, base: dict[str, Any], overrides: dict[str, Any]) -> None:
    """Reset the constants to the job's base values, then apply this shape's."""
    spec.apply(base)
    spec.apply(overrides)


def same_layout(buffers: list[Any], src: list[Any]) -> bool:
    """True when `src` can be copied into `buffers` (specs with data-dependent sizes cannot)."""
    return len(buffers) == len(src) and all(
        not isinstance(b, torch.Tensor) or (isinstance(s, torch.Tensor) and b.shape == s.shape and b.dtype == s.dtype)
        for b, s in zip(buffers, src))


def copy_into(buffers: list[Any], src: list[Any]) -> None:
    """Refill the same input buffers with new content (same pointers, other values)."""
    for b, s in zip(buffers, src):
        if isinstance(b, torch.Tensor) and isinstance(s, torch.Tensor):
            bound.copy_(b, s)


class Rotation:
    """The inputs of the timed repetitions: refilled in place between repetitions when the sizes
    allow it (defeats memoization on pointers), else rotated through the sets themselves (specs whose
    input sizes depend on the random data)."""

    def __init__(self, sets: list[list[Any]]) -> None:
        self.sets = sets
        self.in_place = all(same_layout(sets[0], st) for st in sets)
        self.current = [x.clone() if isinstance(x, torch.Tensor) else x for x in sets[0]] if self.in_place else sets[0]

    def prepare(self, rep: int) -> None:
        src = self.sets[rep % len(self.sets)]
        if self.in_place:
            copy_into(self.current, src)
        else:
            self.current = src


# -- the round file: one JSON header, then every tensor's bytes back to back -------------------------
# torch.save zips and CRC32s every storage (about 2.7x the cost of a plain write on tmpfs); a round is
# written once by the trusted reference and read once by the candidate, so a flat layout is enough.
# The candidate reads it with `readinto` into buffers it reuses (pinned on the GPU): no page faults,
# no pickle. The reference never reads these files back: it judges from its own seeds.
RAW_MAGIC = b"WBRAW1\n"


def raw_layout_ok(sets: list[list[Any]]) -> bool:
    """True when every input is a dense CPU tensor or a JSON scalar (else the round uses torch.save)."""
    for st in sets:
        storages = set()
        for x in st:
            if isinstance(x, torch.Tensor):
                if x.device.type != "cpu" or x.is_sparse or not x.is_contiguous() or x.storage_offset() != 0 \
                        or x.requires_grad:
                    return False
                if x.numel():
                    ptr = x.untyped_storage().data_ptr()
                    if ptr in storages:  # inputs that alias each other: torch.save keeps that, a flat file not
                        return False
                    storages.add(ptr)
            elif not (x is None or isinstance(x, (bool, int, float, str))):
                return False
    return True


def write_raw(path: Path, sets: list[list[Any]]) -> int:
    """Write `sets` (all `raw_layout_ok`) to `path`; returns the bytes of tensor data written."""
    header: list[list[dict[str, Any]]] = []
    offset = 0
    for st in sets:
        row = []
        for x in st:
            if isinstance(x, torch.Tensor):
                n = x.numel() * x.element_size()
                row.append({"dtype": str(x.dtype).removeprefix("torch."), "shape": list(x.shape),
                            "offset": offset, "nbytes": n})
                offset += n
            else:
                row.append({"value": x})
        header.append(row)
    head = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(RAW_MAGIC + len(head).to_bytes(8, "little") + head)
        for st in sets:
            for x in st:
                if isinstance(x, torch.Tensor) and x.numel():
                    f.write(memoryview(x.view(-1).view(torch.uint8).numpy()))
    return offset


_RAW_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128, torch.int8,
    torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2,
    torch.uint16, torch.uint32, torch.uint64)}


class RawReader:
    """The candidate's side: reads round files into host buffers it keeps between rounds (pinned memory
    on the GPU, whose copies then run asynchronously), returns each set on the device."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.pool: dict[int, list[torch.Tensor]] = {}  # nbytes -> free host buffers
        self.held: list[tuple[int, torch.Tensor]] = []
        self.pin = device == "cuda"

    def _buffer(self, nbytes: int) -> torch.Tensor:
        free = self.pool.get(nbytes)
        if free:
            buf = free.pop()
        elif self.pin:
            try:
                buf = bound.empty(nbytes, dtype=torch.uint8, pin_memory=True)
            except RuntimeError:  # no pinnable memory left: pageable copies, slower but correct
                self.pin = False
                buf = bound.empty(nbytes, dtype=torch.uint8)
        else:
            buf = bound.empty(nbytes, dtype=torch.uint8)
        self.held.append((nbytes, buf))
        return buf

    def read(self, path: Path) -> list[list[Any]]:
        """The sets of one round. The previous round's host buffers are reused: on the GPU the caller has
        synchronized since (the copies are done); on the CPU they are the previous round's inputs, dead by now."""
        for n, buf in self.held:
            self.pool.setdefault(n, []).append(buf)
        self.held = []
        with open(path, "rb", buffering=0) as f:
            if f.read(len(RAW_MAGIC)) != RAW_MAGIC:
                raise ValueError(f"{path.name}: not a round file")
            head = json.loads(f.read(int.from_bytes(f.read(8), "little")))
            start = f.tell()
            sets = []
            for row in head:
                st: list[Any] = []
                for d in row:
                    if "value" in d:
                        st.append(d["value"])
                        continue
                    buf = self._buffer(d["nbytes"])
                    f.seek(start + d["offset"])
                    view = memoryview(bound.numpy(buf))
                    got = 0
                    while got < d["nbytes"]:
                        n = f.readinto(view[got:])
                        if not n:
                            raise ValueError(f"{path.name}: truncated")
                        got += n
                    # `bound`: before `go`, in the candidate's process, no method it added to a class runs
                    t = bound.view(bound.view(buf, _RAW_DTYPES[d["dtype"]]), d["shape"])
                    st.append(bound.to(t, self.device, non_blocking=True) if self.device != "cpu" else t)
                sets.append(st)
        return sets
