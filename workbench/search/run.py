"""A finished (or stopped) search: its graph, why it stopped, and its files under `runs/<run>/`.

`Run.load(run_id)` rebuilds one from the context memory, so a notebook can browse any past run.
"""

from __future__ import annotations

import difflib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.memory import Memory, Node, default_memory_path
from workbench.search.config import SearchConfig
from workbench.search.node import Tree
from workbench.search.termination import Stop

log = logging.getLogger(__name__)


@dataclass
class Run:
    run_id: str
    run_dir: Path
    config: SearchConfig
    spec_key: str
    platform: str
    tree: Tree
    stop: Stop
    memory_path: Path
    operator: str = ""
    failures_by_class: dict[str, int] = field(default_factory=dict)

    # -- queries ------------------------------------------------------------------------------
    @property
    def best(self) -> Node | None:
        return self.tree.best()

    @property
    def seeds(self) -> list[Node]:
        return [n for n in self.tree if n.operator == "seed"]

    @property
    def seed_fitness(self) -> float:
        return max((n.fitness for n in self.seeds), default=0.0)

    @property
    def improvement(self) -> float | None:
        """Best fitness over the best seed's (None without a passing seed)."""
        best = self.best
        return best.fitness / self.seed_fitness if best and self.seed_fitness > 0 else None

    def node(self, node_id: str) -> Node:
        return self.tree[node_id]

    def finished(self) -> list[Node]:
        """Finished nodes in the order they finished (the x axis of 'fitness over evaluations')."""
        return sorted((n for n in self.tree if n.evaluated), key=lambda n: (n.evaluated_at or 0.0, n.seq))

    def history(self) -> "Any":
        """A pandas DataFrame, one row per finished node: fitness and best-so-far over evaluations."""
        import pandas as pd

        rows, best = [], 0.0
        nodes = self.finished()
        t0 = min((n.created_at for n in self.tree), default=0.0)
        for i, n in enumerate(nodes, 1):
            best = max(best, n.fitness)
            rows.append(
                {
                    "evaluation": i,
                    "node": n.id,
                    "seq": n.seq,
                    "operator": n.operator,
                    "status": n.status,
                    "fitness": n.fitness,
                    "best_so_far": best,
                    "speedup": n.speedup,
                    "runtime_us": n.runtime_us,
                    "parents": ",".join(n.parents),
                    "island": n.island,
                    "t_s": (n.evaluated_at or t0) - t0,
                    "change": _change(n),
                }
            )
        return pd.DataFrame(rows)

    def diff(self, node_id: str, parent_index: int = 0) -> str:
        """Unified diff of a node's source against its (first) parent's."""
        n = self.tree[node_id]
        if not n.parents or n.parents[parent_index] not in self.tree:
            return ""
        p = self.tree[n.parents[parent_index]]
        return "".join(
            difflib.unified_diff(
                (p.source or "").splitlines(keepends=True),
                (n.source or "").splitlines(keepends=True),
                fromfile=f"node {p.id}",
                tofile=f"node {n.id}",
            )
        )

    def lineage(self, node_id: str) -> list[Node]:
        return [*self.tree.ancestors(node_id), self.tree[node_id]]

    # -- presentation ---------------------------------------------------------------------------
    def table(self, k: int = 10) -> str:
        """The final table: the k fittest nodes, then the stop rule."""
        top = sorted((n for n in self.tree if n.evaluated), key=lambda n: (-n.fitness, n.seq))[:k]
        head = f"{'#':>4} {'node':12} {'operator':17} {'status':17} {'fitness':>9} {'runtime_us':>11}  change"
        lines = [head, "-" * len(head)]
        for n in top:
            rt = f"{n.runtime_us:.1f}" if n.runtime_us is not None else "-"
            lines.append(
                f"{n.seq:>4} {n.id:12} {n.operator:17} {n.status:17} {n.fitness:>9.4g} {rt:>11}  "
                f"{_change(n)[:60]}"
            )
        fin = self.finished()
        lines.append("")
        lines.append(
            f"{len(fin)} nodes finished, {sum(1 for n in fin if n.passed)} passed; failures: "
            + (", ".join(f"{k}={v}" for k, v in sorted(self._failures().items())) or "none")
        )
        imp = self.improvement
        lines.append(
            f"best fitness {self.best.fitness:.4g} (seed {self.seed_fitness:.4g}"
            + (f", {imp:.2f}x the seed)" if imp else ")")
            if self.best
            else "no passing candidate"
        )
        lines.append(f"stopped by rule '{self.stop.rule}': {self.stop.message}")
        return "\n".join(lines)

    def _failures(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for n in self.tree:
            if n.error_class:
                out[n.error_class] = out.get(n.error_class, 0) + 1
        return out

    def plot(self, ax: Any = None) -> Any:
        """Fitness of each finished node (dots) and the best so far (line) over evaluations."""
        import seaborn as sns

        from profiling.figure_style import legend_outside
        from profiling.widgets_figures import new_figure

        df = self.history()
        if ax is None:
            fig = new_figure(8, 3.6)
            ax = fig.add_subplot(1, 1, 1)
        else:
            fig = ax.figure
        if len(df):
            df = df.assign(outcome=df["status"].where(df["status"] == "passed", "failed"))
            sns.scatterplot(
                data=df,
                x="evaluation",
                y="fitness",
                hue="outcome",
                style="operator",
                ax=ax,
                palette={"passed": "tab:blue", "failed": "tab:red"},
                s=36,
            )
            ax.step(
                df["evaluation"], df["best_so_far"], where="post", color="black", lw=1.4, label="best so far"
            )
            if self.seed_fitness > 0:
                ax.axhline(self.seed_fitness, color="grey", ls="--", lw=1, label="best seed")
            legend_outside(ax)
        ax.set_xlabel("evaluation (finish order)")
        ax.xaxis.get_major_locator().set_params(integer=True)  # a count: no 2.5 ticks
        ax.set_ylabel("fitness [x] (reference / candidate time)")
        on_cpu = str(self.platform).lower().startswith("cpu")  # the interpreter: its times rank nothing
        ax.set_title(f"{self.spec_key.split('@')[0]} on {self.platform}: {self.config.policy}, {self.operator}"
                     + (" (interpreter times: they rank nothing)" if on_cpu else ""))
        fig.tight_layout()
        return fig

    def report(self) -> str:
        """A short markdown report of the run."""
        best = self.best
        lines = [
            f"# Search run `{self.run_id}`",
            "",
            f"- spec: `{self.config.spec_path}` (key `{self.spec_key}`), "
            f"overrides {self.config.overrides or '{}'}, shapes {self.config.shapes or 'all'}",
            f"- platform: {self.platform}; policy: {self.config.policy}; operator: {self.operator}; "
            f"evaluator: {self.config.evaluator} x{self.config.workers}",
            f"- stopped by **{self.stop.rule}**: {self.stop.message}",
            f"- nodes: {len(self.tree)}; passed: {sum(1 for n in self.tree if n.passed)}; failures by class: "
            + (", ".join(f"{k} {v}" for k, v in sorted(self._failures().items())) or "none"),
            "",
        ]
        if best is not None:
            imp = self.improvement
            lines += [
                f"Best node `{best.id}`: fitness **{best.fitness:.4g}** "
                f"(best seed {self.seed_fitness:.4g}"
                + (f"; {imp:.2f}x the seed)" if imp else ")")
                + f", runtime {best.runtime_us or 0:.1f} us. Kernel: `best_kernel.py`.",
                "",
                "Lineage of the best node:",
                "",
            ]
            for n in self.lineage(best.id):
                lines.append(f"1. `{n.id}` {n.operator}: fitness {n.fitness:.4g} {_change(n)}")
        else:
            lines.append("No candidate passed.")
        lines += ["", "![fitness over evaluations](fitness.png)", "", "```", self.table(), "```", ""]
        return "\n".join(lines)

    def write_artifacts(self) -> dict[str, Path]:
        """`runs/<run>/`: best_kernel.py, tree.json, fitness.png, report.md, config.json."""
        d = Path(self.run_dir)
        d.mkdir(parents=True, exist_ok=True)
        out: dict[str, Path] = {}
        best = self.best
        if best is not None and best.source:
            out["best_kernel"] = d / "best_kernel.py"
            out["best_kernel"].write_text(best.source, encoding="utf-8")
        out["tree"] = d / "tree.json"
        out["tree"].write_text(
            json.dumps(
                {
                    "run_id": self.run_id,
                    "spec_key": self.spec_key,
                    "platform": self.platform,
                    "stop": {"rule": self.stop.rule, "message": self.stop.message},
                    "best": best.id if best else None,
                    **self.tree.to_json(),
                },
                indent=1,
                default=str,
            ),
            encoding="utf-8",
        )
        out["config"] = d / "config.json"
        out["config"].write_text(json.dumps(self.config.to_dict(), indent=1, default=str), encoding="utf-8")
        out["plot"] = d / "fitness.png"
        self.plot().savefig(out["plot"])
        out["report"] = d / "report.md"
        out["report"].write_text(self.report(), encoding="utf-8")
        return out

    def explorer(self) -> Any:
        """An ipywidgets browser of the tree (needs the `lab` extra)."""
        from workbench.search.widgets import tree_explorer

        return tree_explorer(self)

    # -- loading --------------------------------------------------------------------------------
    @classmethod
    def load(cls, run_id: str, run_dir: str | Path = "runs", memory_path: str | Path | None = None) -> "Run":
        """Rebuild a run from the context memory."""
        path = Path(memory_path) if memory_path else default_memory_path(run_dir)
        with Memory(path) as mem:
            info = mem.get_run(run_id)
            if info is None:
                raise KeyError(f"no run {run_id!r} in {path}")
            tree = Tree()
            for n in mem.run_history(run_id):
                tree.add(n)
            fails = mem.failures_by_class(info.spec_key, info.platform)
        cfg = SearchConfig.from_dict(info.config)
        stop = Stop(info.stop_rule or "running", info.stop_message or info.status)
        return cls(
            run_id=run_id,
            run_dir=Path(run_dir) / run_id,
            config=cfg,
            spec_key=info.spec_key,
            platform=info.platform,
            tree=tree,
            stop=stop,
            memory_path=path,
            operator="offline" if cfg.llm == "none" else f"llm:{cfg.llm}",
            failures_by_class=fails,
        )

    def __repr__(self) -> str:
        best = self.best
        return (
            f"Run({self.run_id!r}, nodes={len(self.tree)}, best={best.fitness if best else None}, "
            f"stop={self.stop.rule!r})"
        )


def _change(n: Node) -> str:
    if n.operator == "seed":
        return f"seed {Path(str(n.meta.get('path', ''))).name}"
    changed = n.meta.get("changed")
    if changed:
        return ", ".join(f"{k} {a}->{b}" for k, (a, b) in changed.items())
    if n.status == "generation_failed":
        return (n.diagnosis.splitlines() or [""])[0][:80]
    return str(n.meta.get("note", ""))[:80]
