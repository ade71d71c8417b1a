"""The search's progress bar: best fitness, evaluations, failures by class, work in flight per worker."""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    def __init__(self, engine: Any, *, enabled: bool = True) -> None:
        self.engine = engine
        self.bar = None
        self._last = 0.0
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=engine.cfg.budget,
                initial=engine.term.done,
                unit="eval",
                desc=f"optimize {engine.spec_key.split('@')[0]}",
                file=sys.stderr,
                dynamic_ncols=True,
                leave=True,
                mininterval=0.5,
            )

    def update(self) -> None:
        if self.bar is None:
            return
        e = self.engine
        if e.term.done > self.bar.n:
            self.bar.update(e.term.done - self.bar.n)
        fails = ",".join(f"{k}:{v}" for k, v in sorted(e.failures.items())) or "0"
        try:
            busy = e.evaluator.in_flight()
        except Exception:  # a progress bar must never break the search
            busy = {}
        self.bar.set_postfix_str(
            f"best={e.term.best:.4g} evals={sum(1 for n in e.tree if n.evaluated)} fails={fails} "
            f"busy={','.join(f'{k}:{v}' for k, v in sorted(busy.items())) or '-'}",
            refresh=False,
        )
        now = time.monotonic()
        if now - self._last >= 0.5:  # in-flight changes show without flooding a log file
            self._last = now
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
