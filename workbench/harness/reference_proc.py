"""The reference process (trusted, root): the code that runs in the forked child that loads the spec.

It builds every input from seeds the candidate never learns and writes them into the job's stage
directory (or, on the GPU, makes them on the device into the shelf it shares with the candidate:
`inbox.py`), lays out the outbox,
times the baseline under the server's clock, stages the candidate's timed rounds, and at the end judges
the outputs the candidate left, after the candidate is dead. No candidate code ever runs in this process.
"""
from __future__ import annotations

import os
import random
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from workbench.harness import inbox as _inbox
from workbench.harness import outbox as _outbox
from workbench.harness import outfile as _outfile
from workbench.harness import plan as _plan
from workbench.harness import rounds as _rounds
from workbench.harness import safeio as _safeio
from workbench.harness import vary as _vary
from workbench.harness.channel import Channel
from workbench.harness.compare import compare_outputs, flatten_outputs
from workbench.harness.input_cache import InputCache
from workbench.harness.opcheck import OpRecorder
from workbench.harness.proc_common import gpu_warm, same_values, sync, tail
from workbench.harness.referee import fp64_referee
from workbench.harness.settings import HarnessSettings
from workbench.harness.trusted_messages import (
    BaselineReady,
    Filled,
    InputsShared,
    Prepared,
    ReferenceFailure,
    ReferenceJob,
    RoundMade,
    Verdict,
)
from workbench.spec import SpecError, load_spec, positional_signature

# The largest input set kept for copying when `get_inputs()` ignores the seed (`_keep_if_constant`): held on
# the device while the candidate runs, so never GBs.
CONSTANT_SET_MAX_BYTES = 64 * 2**20


class _Reference:
    """The trusted reference process's state for one job."""

    def __init__(self, job: ReferenceJob, settings: HarnessSettings, sock: int = -1) -> None:
        self.job, self.sock, self.settings = job, sock, settings
        self.device = job.device
        self.stage = Path(job.stage)
        self.spec = load_spec(job.spec_path, job.overrides or {})
        _plan.set_tf32(self.spec.allow_tf32)  # the judge's reference computes in IEEE fp32 (spec: ALLOW_TF32)
        self.plan = _plan.make_plan(self.spec, self.device, job.trials, job.shapes, job.seed)
        self.base = self.spec.constants()
        self.icache = InputCache(writable=True, settings=settings)  # this trusted process is the only writer
        self.host: dict[tuple[int, int], list[Any]] = {}
        names = [n for n, _ in self.plan.shapes]
        self.timed = names.index(self.plan.timed_shape)
        self.models: dict[int, Any] = {}
        self._devgen: bool | None = None
        self._constant: list[Any] | None = None  # the set every seed makes, when `get_inputs()` ignores the seed
        self._seed_free = False  # `get_inputs()` ignores the seed: timed sets are varied (`vary.py`)
        self._vary_dirs: list[int] | None = None
        self.devgen_off = ""  # why the inputs are staged rather than made on the device, when they are
        self.cache_timed = False  # the candidate's timed sets went through the input cache
        self.arena: _outbox.Arena | None = None
        self.device_error = ""  # why the GPU outbox is a file (the result says)
        self.trial_samples: list[int | None] = []
        self.layouts: dict[int, _inbox.SetLayout] = {}  # each shape's input set, when the inputs are shared
        self.shelf: _inbox.Shelf | None = None

    def prepare(self) -> Prepared:
        """Write every shape's init inputs and trial inputs into the stage; describe the job."""
        shapes = []
        set_bytes = 0
        _plan.apply_shape(self.spec, self.base, self.plan.shapes[self.timed][1])
        devgen = self._device_generation()
        for si, (name, over) in enumerate(self.plan.shapes):
            _plan.apply_shape(self.spec, self.base, over)
            init = _plan.build_init_inputs(self.spec, self.plan.model_seed(si), "cpu")
            torch.save(init, self.stage / f"init_{si}.pt")
            trials: list[Any] = []
            prints = []  # the timed shape's trials' fingerprints: equal from two seeds, the seed is ignored
            for t in range(self.plan.trials):
                seed = self.plan.trial_seed(si, t)
                if devgen:  # made again into the shared shelf when the candidate asks: no seed, no file for it
                    inputs = _plan.generate_on(self.spec, seed, self.device)
                    layout = _inbox.describe(inputs, self.device)
                    if layout is None or self.layouts.setdefault(si, layout) != layout:
                        # a set the shelf cannot hold as it is, or another layout from another seed: staged
                        self._devgen = False
                        self.devgen_off = "get_inputs() gives sets of varying or unshareable layouts"
                        self.layouts.clear()
                        return self.prepare()
                    trials.append(None)
                else:
                    # not through the input cache: a trial's seed is drawn for this job alone and the judge
                    # reads the set held below, so an entry would never be read, and each write scans the
                    # cache's folder to evict (11,800 entries on the CPU CI machine: 0.05-0.5 s a write)
                    inputs = _plan.build_inputs(self.spec, seed, "cpu")
                    torch.save(inputs, self.stage / f"in_{si}_{t}.pt")
                    trials.append(f"in_{si}_{t}.pt")
                if not devgen:  # made again from the seed when needed: held, GBs would sit on the device
                    self.host[(si, t)] = inputs
                if si == self.timed:
                    set_bytes = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
                    if len(prints) < 2:
                        prints.append(_vary.fingerprint(inputs))
                del inputs
            if si == self.timed:
                while len(prints) < 2:  # one trial: one more set, from another seed
                    seed = self.plan.timing_seed(len(prints))
                    other = _plan.generate_on(self.spec, seed, self.device) if devgen else \
                        _plan.build_inputs(self.spec, seed, "cpu")
                    prints.append(_vary.fingerprint(other))
                    del other
                self._seed_free = prints[0] == prints[1]
            shapes.append({"name": name, "init": f"init_{si}.pt", "trials": trials,
                           "model_seed": self.plan.model_seed(si), "over": over,
                           "inputs": self.layouts[si].to_dict() if devgen else None})
        for p in self.stage.iterdir():
            os.chmod(p, 0o644)
        outbox = self._make_outbox()
        sig = {m: list(positional_signature(getattr(self.spec.module.Model, m))) for m in ("__init__", "forward")}
        return Prepared(shapes=shapes, timed=self.timed, set_bytes=set_bytes, sig=sig, devgen=devgen,
                        devgen_off=self.devgen_off, allow_tf32=bool(self.spec.allow_tf32),
                        timing_basis=str(getattr(self.spec.module, "TIMING", "device")),
                        allowed_ops=[str(x) for x in self.spec.allowed_ops],
                        allowed_imports=[str(x) for x in self.spec.allowed_imports],
                        plan={"shapes": [n for n, _ in self.plan.shapes], "timed": self.plan.timed_shape},
                        outbox=outbox)

    def _make_outbox(self) -> dict[str, Any] | None:
        """The job's outbox (`outbox.py`), laid out from one reference forward per shape: None (outputs then
        travel as files) when the server named no place for it or an output is not a dense tensor."""
        where = self.job.outbox_path
        if not where:
            return None
        metas: list[_outbox.Meta] = []
        for si in range(len(self.plan.shapes)):
            with torch.no_grad():
                outs = flatten_outputs(self.model(si)(*_plan.to_device(self.trial_inputs(si, 0), self.device)))
            meta = _outbox.describe(outs)
            del outs
            if meta is None:
                return None
            metas.append(meta)
        trial_slots = [metas[si] for si in range(len(metas)) for _ in range(self.plan.trials)]
        # each shape's first trial in full; a large output's later trials on a sample (`outbox`)
        rng = random.SystemRandom()
        full_mb = self.settings.judge_full_mb
        self.trial_samples = [rng.getrandbits(62) if t > 0 and _outbox.sampled(metas[si], full_mb) else None
                              for si in range(len(metas)) for t in range(self.plan.trials)]
        timed_sampled = _outbox.sampled(metas[self.timed], full_mb)
        out_bytes = _outbox.Layout.build([metas[self.timed]], [timed_sampled]).total
        timed = _outbox.judged_outputs(out_bytes, self.settings.judge_mb, len(metas[self.timed]),
                                       sum(len(m) for m in trial_slots))
        layout = _outbox.Layout.build(trial_slots + [metas[self.timed]] * timed,
                                      [s is not None for s in self.trial_samples] + [timed_sampled] * timed)
        shared = self._share_device_memory(layout.total)
        self.arena = _outbox.Arena(Path(where), layout, self.device, shared)
        return {"layout": layout.to_dict(), "trial_slots": len(trial_slots), "timed_slots": timed,
                "out_bytes": out_bytes, "trial_samples": self.trial_samples,
                "device_bytes": shared.size if shared is not None else 0, "device_error": self.device_error}

    def _share_device_memory(self, nbytes: int) -> Any:
        """On the GPU, the outbox's slots as device memory (`devmem`), its descriptor sent to the server;
        None (the file, then) on the CPU, with `WB_DEVICE_OUTBOX=off`, or when the driver refuses."""
        if self.device != "cuda" or self.sock < 0 or not self.settings.device_outbox:
            return None
        import socket

        from workbench.harness import devmem

        try:
            shared, fd = devmem.Shared.create(nbytes)
        except Exception as exc:  # noqa: BLE001 - the driver refused: the file, then
            self.device_error = f"{type(exc).__name__}: {exc}"
            return None
        try:
            with socket.socket(fileno=os.dup(self.sock)) as sock:
                socket.send_fds(sock, [b"o"], [fd])
        except OSError as exc:
            self.device_error = f"descriptor not sent: {exc}"
            return None
        finally:
            os.close(fd)
        return shared

    def trial_inputs(self, si: int, t: int) -> list[Any]:
        """Trial t of shape si's inputs: the staged ones, or made again on the device from their seed."""
        if (si, t) in self.host:
            return self.host[(si, t)]
        _plan.apply_shape(self.spec, self.base, self.plan.shapes[si][1])
        return _plan.generate_on(self.spec, self.plan.trial_seed(si, t), self.device)

    def model(self, si: int) -> Any:
        if si not in self.models:
            _plan.apply_shape(self.spec, self.base, self.plan.shapes[si][1])
            init = _plan.build_init_inputs(self.spec, self.plan.model_seed(si), self.device)
            torch.manual_seed(self.plan.model_seed(si))
            self.models[si] = self.spec.module.Model(*init).to(self.device)
        return self.models[si]

    def _device_generation(self) -> bool:
        """On the GPU, inputs are made there (`get_inputs()` under `torch.device`) by this process, into the
        shelf it shares with the candidate (`inbox.py`): host RNG costs seconds per evaluation for large
        inputs (2 x 16M randn: about 0.3 s a set), and the candidate's process never runs `get_inputs()` nor
        learns a seed. Decided once per job, so the judge makes exactly what was shared again; for specs
        whose `get_inputs()` fails there, returns anything but dense device tensors and scalars (`inbox.
        describe`), is not the same twice from one seed or lays out another seed's set otherwise, and where
        the memory cannot be shared, the host's (staged through files). On by default on the GPU
        (`WB_DEVICE_INPUTS=off` turns it off); on the CPU only when asked (the tests run the same path
        there, the shelf a sealed memfd)."""
        if self._devgen is None:
            self._devgen = False
            if self.settings.device_inputs_for(self.device):  # on the CPU: a test of the same path
                try:
                    probe = _plan.generate_on(self.spec, self.plan.timing_seed(0), self.device)
                    again = _plan.generate_on(self.spec, self.plan.timing_seed(0), self.device)
                    same = all(same_values(a, b) for a, b in zip(probe, again))
                    del again
                    layout = _inbox.describe(probe, self.device)
                    self._keep_if_constant(probe, same)
                    del probe
                    other = _inbox.describe(_plan.generate_on(self.spec, self.plan.timing_seed(1), self.device),
                                            self.device)
                    if not same:
                        self.devgen_off = "get_inputs() is not the same twice from one seed"
                    elif layout is None or other != layout:
                        self.devgen_off = "get_inputs() gives sets the shared memory cannot hold as they are"
                    elif not self._can_share():
                        pass  # `devgen_off` says why
                    else:
                        self._devgen = True
                except Exception as exc:  # noqa: BLE001 - the spec's inputs need the host: generate them there
                    self._devgen = False
                    self.devgen_off = f"get_inputs() fails on the device: {type(exc).__name__}"
        return self._devgen

    def _keep_if_constant(self, probe: list[Any], same: bool) -> None:
        """Keep the probe's set when `get_inputs()` makes the same values whatever the seed (the ATen suite's
        specs load OpInfo's fixed samples from bytes: `torch.load` and a copy to the device per set, 4-17 ms
        a set on the CPU CI machine against 7-220 us for a copy of one set): the timed sets are then copies of
        it (`_timed_set`), the same values in buffers of their own, made in microseconds. Rounds are sized
        by each contender's own wall time per call (20 ms a round on the GPU), so making the sets cost the
        baseline ~3x the candidate's when eager launches ~3x cheaper than the draft's Triton launches.
        Only sets of at most `CONSTANT_SET_MAX_BYTES` (held on the device for the job); two more seeds than
        the probe's must give the same values."""
        self._constant = None
        if not same or not all(isinstance(x, torch.Tensor) or isinstance(x, (int, float, bool)) or x is None
                               for x in probe):
            return
        if sum(x.numel() * x.element_size() for x in probe if isinstance(x, torch.Tensor)) > CONSTANT_SET_MAX_BYTES:
            return
        for j in (1, 2):
            if not _same_set(probe, _plan.generate_on(self.spec, self.plan.timing_seed(j), self.device)):
                return
        self._constant = probe

    def _timed_set(self, seed: int) -> list[Any]:
        """The timed shape's set of `seed` made on the device: `get_inputs()` under the seed, or a copy of the
        constant set (`_keep_if_constant`), whose values are the same whatever the seed; varied by the seed
        when the spec ignores it (`_fresh`)."""
        if self._constant is not None:
            if self._seed_free:  # the scaled tensors are new buffers already: no clone first
                return self._fresh(list(self._constant), seed)
            return [x.clone() if isinstance(x, torch.Tensor) else x for x in self._constant]
        return self._fresh(_plan.generate_on(self.spec, seed, self.device), seed)

    def _fresh(self, inputs: list[Any], seed: int) -> list[Any]:
        """A timed set as it is, or, when `get_inputs()` ignores the seed, its floating tensors scaled by
        factors drawn from `seed` (`vary.py`): no two timed calls see the same values."""
        if not self._seed_free:
            return inputs
        if self._vary_dirs is None:  # the same values every time: decided once, from the first set
            self._vary_dirs = _vary.directions(inputs)
        return _vary.vary(inputs, seed, self._vary_dirs)

    def _can_share(self) -> bool:
        """Whether this process can share memory with the candidate's (a socket to pass it over; on the GPU a
        driver that makes shareable memory: tried on one page)."""
        if self.sock < 0:
            self.devgen_off = "no socket to share the inputs over"
            return False
        try:
            shelf = _inbox.Shelf(self.device, 1)
        except Exception as exc:  # noqa: BLE001 - the driver refused: staged through files, then
            self.devgen_off = f"inputs not shareable: {type(exc).__name__}: {exc}"[:200]
            return False
        os.close(shelf.fd)
        shelf.close()
        return True

    def share_inputs(self, sets: int) -> InputsShared:
        """The shelf (`inbox.Shelf`), made now (after the baseline, whose own sets are freed by then) for
        `sets` of the timed shape's sets or one trial set of any shape; its descriptor sent to the server."""
        import socket

        nbytes = max([sets * self.layouts[self.timed].stride] + [lay.stride for lay in self.layouts.values()])
        self.shelf = _inbox.Shelf(self.device, nbytes)
        try:
            with socket.socket(fileno=os.dup(self.sock)) as sock:
                socket.send_fds(sock, [b"i"], [self.shelf.fd])
        finally:
            os.close(self.shelf.fd)
        return InputsShared(shared=self.shelf.size)

    def fill(self, tag: str, si: int, seeds: list[int], timed: bool = False) -> Filled:
        """Shape si's sets of `seeds`, made one at a time into the shelf (positions 0..): the candidate reads
        them next. What the making left in the caching allocator goes back to the driver."""
        assert self.shelf is not None
        _plan.apply_shape(self.spec, self.base, self.plan.shapes[si][1])
        layout = self.layouts[si]
        if len(seeds) * layout.stride > self.shelf.size:
            raise ValueError(f"{len(seeds)} sets do not fit the shared inputs")
        for i, seed in enumerate(seeds):
            # a round's sets (the timed shape's seeds) may be copies of the constant set; a trial's are made
            made = self._timed_set(int(seed)) if timed else _plan.generate_on(self.spec, int(seed), self.device)
            self.shelf.put_at(i, made, layout)
            del made
        sync(self.device)
        _release_cache(self.device)
        return Filled(filled=tag, sets=len(seeds))

    def free_inputs(self) -> None:
        """The shelf freed (the candidate is dead: the judge makes its inputs again from their seeds)."""
        if self.shelf is not None:
            self.shelf.close()
            self.shelf = None

    def timed_sets(self, seeds: list[int], cache: bool = False) -> list[list[Any]]:
        """The timed shape's inputs of `seeds`: on the device when `_device_generation`, else on the host
        (through the input cache only when `cache`: a secret seed is worth keeping only when every set of
        the evaluation fits in the cache, else it just costs a write per set)."""
        _plan.apply_shape(self.spec, self.base, self.plan.shapes[self.timed][1])
        if self._device_generation():
            return [self._timed_set(s) for s in seeds]
        return [self._fresh(_plan.build_inputs(self.spec, s, "cpu", self.icache if cache else None), s)
                for s in seeds]

    def baseline(self, chan: Channel) -> None:
        model = self.model(self.timed)

        def load(order: dict[str, Any]) -> list[list[Any]]:
            return [list(_plan.to_device(s, self.device)) for s in self.timed_sets(order["seeds"])]

        _rounds.serve(chan, lambda inp: model(*inp), load, lambda k, w, o, s: None, lambda: sync(self.device),
                      OpRecorder, warm=lambda: gpu_warm(self.device, self.settings.warm_ms))

    def make_round(self, k: int, seeds: list[int], where: Path, cache: bool) -> str:
        """Write round k's sets into `where` (the server renames the file into the stage when round k
        begins): the flat format when every input allows it, else torch.save."""
        self.cache_timed = self.cache_timed or cache
        sets = self.timed_sets(seeds, cache)
        host = [[x.to("cpu", non_blocking=True) if isinstance(x, torch.Tensor) else x for x in st] for st in sets]
        sync(self.device)
        if _plan.raw_layout_ok(host):
            name = f"round_{k}.raw"
            _plan.write_raw(where / name, host)
        else:
            name = f"round_{k}.pt"
            torch.save(host, where / name)
        os.chmod(where / name, 0o644)
        return name

    def judge(self, sandbox: Path, timed: list[tuple[int, int, int, int]]) -> Verdict:
        """Compare the candidate's saved outputs (it is dead by now) with the reference's, on the same inputs:
        the verdict bounded as its type is checked (`Verdict.bounded`), whatever the candidate left."""
        out: dict[str, Any] = {"correct": True, "problems": [], "max_abs_err": 0.0, "max_rel_err": 0.0}
        # inputs or a timed set's seed, the outbox slot, the seed of a sampled slot's positions
        todo: list[tuple[int, str, str, Any, int, int | None]] = []
        n_trial = len(self.plan.shapes) * self.plan.trials
        for si, (name, _) in enumerate(self.plan.shapes):
            for t in range(self.plan.trials):
                slot = si * self.plan.trials + t
                todo.append((si, f"shape {name}, trial {t}", f"out_{si}_{t}.pt", (si, t), slot,
                             self.trial_samples[slot] if slot < len(self.trial_samples) else None))
            if si == self.timed:
                if not timed:
                    out["correct"] = False
                    out["problems"].append(f"shape {name}: no timed repetition left an output to check")
                for j, (k, i, seed, sample) in enumerate(timed):
                    # regenerated one at a time below: all at once they would hold every judged set
                    todo.append((si, f"shape {name}, timed round {k} repetition {i}", f"t_{k}_{i}.pt", seed,
                                 n_trial + j, sample))
        read = {"outbox": 0, "files": 0, "sampled": 0}
        for si, where, fname, host, slot, sample in todo:
            if isinstance(host, int):
                host = self.timed_sets([host], self.cache_timed)[0]
            else:
                host = self.trial_inputs(*host)
            with torch.no_grad():
                ref = flatten_outputs(self.model(si)(*_plan.to_device(host, self.device)))
            self._judging = (si, host)  # the fp64 referee's model and inputs, should this output mismatch
            try:
                self._judge_one(out, read, where, fname, slot, sample, ref, sandbox)
            except Exception as exc:  # noqa: BLE001 - whatever the candidate left that breaks the judge fails it
                out["correct"] = False
                out["problems"].append(f"{where}: output refused ({type(exc).__name__}: {str(exc)[:200]})")
        read["way"] = self.arena.way() if self.arena is not None else "files"  # device memory or the file
        return Verdict.bounded(out["correct"], out["problems"], out["max_abs_err"], out["max_rel_err"], read=read,
                               referee=out.get("referee"))

    def _judge_one(self, out: dict[str, Any], read: dict[str, int], where: str, fname: str, slot: int,
                   sample: int | None, ref: list[Any], sandbox: Path) -> None:
        """One judged output, from trusted buffers only: the outbox slot through this process's own
        descriptor when the layout has one (a file the candidate planted beside it is never looked at), else
        the flat output file, read bounded by the reference's own outputs and parsed without trusting it
        (`outfile`: no pickle, no zip, nothing decompressed)."""
        slots = self.arena.layout.slots if self.arena is not None else ()
        if self.arena is not None and slot < len(slots) and _fits_slot(ref, slots[slot]):
            try:
                got = self.arena.read(slot)  # through this process's own descriptor, never a path
            except OSError as exc:  # the candidate truncated the file: its failure, not the spec's
                out["correct"] = False
                out["problems"].append(f"{where}: output refused ({exc})")
                return
            expect = self.arena.expected(slot, ref, sample)
            select = None
            if expect is not ref:
                read["sampled"] += int(any(e[3] for e in self.arena.layout.slots[slot]))
                select = lambda full: self.arena.expected(slot, full, sample)  # noqa: E731 - same positions
            self._compare(out, where, got, expect, select)
            read["outbox"] += 1
            return
        bound = sum(r.numel() * r.element_size() for r in ref if isinstance(r, torch.Tensor)) \
            + _outfile.MAX_HEADER + len(_outfile.MAGIC) + 8
        try:
            data = _safeio.read_bounded(sandbox, fname, bound)
        except FileNotFoundError:
            out["correct"] = False
            out["problems"].append(f"{where}: no output saved")
            return
        except OSError as exc:
            out["correct"] = False
            out["problems"].append(f"{where}: output refused ({exc})")
            return
        try:
            got = _outfile.parse(data)
        except _outfile.OutputFileError as exc:
            out["correct"] = False
            out["problems"].append(f"{where}: unreadable output ({exc})")
            return
        read["files"] += 1
        self._compare(out, where, [g.to(self.device) if isinstance(g, torch.Tensor) else g for g in got], ref)

    def _compare(self, out: dict[str, Any], where: str, got: list[Any], ref: list[Any],
                 select: Any = None) -> None:
        spec = self.spec
        cmp = compare_outputs(got, ref, tol_overrides=spec.tolerances, allow_tf32=spec.allow_tf32, exact=spec.exact)
        out["max_abs_err"] = max(out["max_abs_err"], cmp.max_abs_err)
        out["max_rel_err"] = max(out["max_rel_err"], cmp.max_rel_err)
        if not cmp.ok:
            out["correct"] = False
            out["problems"].extend(f"{where}: {p}" for p in cmp.problems)
            if "referee" not in out and getattr(self, "_judging", None) is not None:
                out["referee"] = self._referee(got, ref, select)

    def _referee(self, got: list[Any], ref: list[Any], select: Any) -> dict[str, Any]:
        """The first mismatch's fp64 referee (`referee.py`): is eager itself as far from the exact result?
        Information beside the verdict, which stays incorrect; it never raises."""
        si, host = self._judging
        try:
            inputs = list(_plan.to_device(host, self.device))
        except Exception as exc:  # noqa: BLE001 - information only
            return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:200]}
        return fp64_referee(self.model(si), inputs, got, ref, flatten_outputs, select)


def _same_set(a: list[Any], b: list[Any]) -> bool:
    """Two input sets alike in every way a forward could tell: types, scalar values, and each tensor's dtype,
    shape, strides and values (NaN where NaN)."""
    def same(x: Any, y: Any) -> bool:
        if type(x) is not type(y):
            return False
        if isinstance(x, torch.Tensor):
            return x.dtype == y.dtype and x.shape == y.shape and x.stride() == y.stride() and same_values(x, y)
        return bool(x == y)

    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def _fits_slot(ref: list[Any], entries: Any) -> bool:
    """Whether the reference's own outputs have the slot's layout: then a right answer is in the slot, and
    the judge reads the slot only; else (sizes that depend on the data) only the flat output file."""
    return len(ref) == len(entries) and all(
        isinstance(r, torch.Tensor) and str(r.dtype).removeprefix("torch.") == e[0] and tuple(r.shape) == tuple(e[1])
        for r, e in zip(ref, entries))


def _release_cache(device: str) -> None:
    """Give the blocks the reference freed back to the driver: its caching allocator would otherwise keep
    GBs of inputs it made (a probe, the baseline's rounds) from the candidate that runs next (a 16 GB
    KernelBench input ran the H200 out of memory)."""
    if device == "cuda":
        torch.cuda.empty_cache()


def run_reference(job: ReferenceJob, chan: Channel, settings: HarnessSettings, sock: int = -1) -> None:
    """Entry point of the reference process: prepare, time the baseline, stage rounds, judge."""
    t0 = time.perf_counter()
    try:
        os.setsid()
        ref = _Reference(job, settings, sock)
        if ref.device == "cuda":
            torch.zeros(1, device="cuda")
        prepared = ref.prepare()
        _release_cache(ref.device)
        prepared.timings_s = {"reference_prepare": time.perf_counter() - t0}
        chan.send(prepared.to_wire())
    except SpecError as exc:
        chan.send(ReferenceFailure.bounded(str(exc), spec_error=True).to_wire())
        return
    except BaseException as exc:  # noqa: BLE001 - the spec's own code failed: the spec is at fault
        chan.send(_failure(exc))
        return
    while True:
        try:
            cmd = chan.recv()
        except EOFError:
            return
        try:
            if "baseline" in cmd:
                chan.send(BaselineReady().to_wire())
                ref.baseline(chan)
                _release_cache(ref.device)
            elif "make_round" in cmd:
                where = Path(cmd.get("dir") or ref.stage)
                name = ref.make_round(cmd["make_round"], cmd["seeds"], where, bool(cmd.get("cache")))
                chan.send(RoundMade(made=cmd["make_round"], file=name).to_wire())
            elif "share_inputs" in cmd:
                chan.send(ref.share_inputs(int(cmd["share_inputs"])).to_wire())
            elif "fill" in cmd:
                if "trial" in cmd:
                    si, t = (int(x) for x in cmd["trial"])
                    filled = ref.fill(str(cmd["fill"]), si, [ref.plan.trial_seed(si, t)])
                else:
                    filled = ref.fill(str(cmd["fill"]), ref.timed, [int(x) for x in cmd["seeds"]], timed=True)
                chan.send(filled.to_wire())
            elif "judge" in cmd:
                ref.free_inputs()
                _release_cache(ref.device)
                verdict = ref.judge(Path(cmd["judge"]["sandbox"]), [tuple(x) for x in cmd["judge"]["timed"]])
                chan.send(verdict.to_wire())
                return
        except BaseException as exc:  # noqa: BLE001 - reported; the server turns it into bad_spec
            chan.send(_failure(exc))
            return


def _failure(exc: BaseException) -> dict[str, Any]:
    """The reference's failure as its reply (`ReferenceFailure`), bounded: its error and the traceback's tail."""
    return ReferenceFailure.bounded(f"{type(exc).__name__}: {exc}\n{tail(traceback.format_exc())}").to_wire()

