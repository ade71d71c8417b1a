"""An ipywidgets browser of a search tree: pick a node, read its code, its diff against its parent,
its diagnosis, and the prompt and response that produced it. Needs the `lab` extra."""

from __future__ import annotations

import html
from typing import Any

from profiling.widgets_figures import attach_static


def _pre(text: str | None, empty: str = "(none)") -> str:
    body = html.escape(text) if text else f"<i>{empty}</i>"
    return f"<pre style='font-size:11px; max-height:420px; overflow:auto; white-space:pre'>{body}</pre>"


def _diff_html(diff: str) -> str:
    if not diff:
        return "<i>(no parent: a seed or a draft)</i>"
    colour = {"+": "#1a7f37", "-": "#cf222e", "@": "#8250df"}
    lines = []
    for ln in diff.splitlines():
        c = colour.get(ln[:1]) if not ln.startswith(("+++", "---")) else "#57606a"
        esc = html.escape(ln)
        lines.append(f"<span style='color:{c}'>{esc}</span>" if c else esc)
    return "<pre style='font-size:11px; max-height:420px; overflow:auto'>" + "\n".join(lines) + "</pre>"


def node_label(n: Any, op_width: int = 17, status_width: int = 17) -> str:
    return f"{n.seq:>3} {n.id} {n.operator:<{op_width}} {n.status:<{status_width}} fitness {n.fitness:.4g}"


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f} us"


def node_header(n: Any) -> str:
    """The line above the tabs: numbers formatted, absent fields left out (no 'island None')."""
    parts = [n.operator, f"parents: {', '.join(n.parents) or 'none'}"]
    if n.island is not None:
        parts.append(f"island {n.island}")
    line = (
        f"<b>node {html.escape(n.id)}</b> ({html.escape(', '.join(parts))}) status <b>{html.escape(n.status)}</b>, "
        f"fitness <b>{n.fitness:.4g}</b>, runtime {_us(n.runtime_us)}"
    )
    if n.prompt_tokens or n.completion_tokens:
        line += f", tokens {n.prompt_tokens:,} prompt + {n.completion_tokens:,} completion"
    return line


# ipywidgets' Layout has no font trait (Layout(font_family=...) is silently ignored): a class on the
# list and a style rule make its columns line up
_MONO_CLASS = "wb-node-list"
_MONO_STYLE = f"<style>.{_MONO_CLASS} select {{ font-family: monospace; font-size: 12px; }}</style>"


def tree_explorer(run: Any) -> Any:
    """A widget: node list on the left, tabs (code, diff, diagnosis, prompt, response) on the right."""
    import ipywidgets as w

    nodes = list(run.tree)
    best = run.best
    # columns as wide as this tree needs: fixed widths pushed the fitness out of the list's view
    widths = (max((len(n.operator) for n in nodes), default=1), max((len(n.status) for n in nodes), default=1))
    options = [
        (("* " if best is not None and n.id == best.id else "  ") + node_label(n, *widths), n.id) for n in nodes
    ]
    picker = w.Select(options=options, rows=min(18, max(6, len(options))), layout=w.Layout(width="46%"))
    picker.add_class(_MONO_CLASS)
    header = w.HTML()
    header.add_class("wb-node-header")
    panes = {name: w.HTML() for name in ("code", "diff vs parent", "diagnosis", "prompt", "response")}
    tabs = w.Tab(children=list(panes.values()))
    for i, name in enumerate(panes):
        tabs.set_title(i, name)
    out = w.Output()  # anything the callback prints or raises stays in the widget

    def show(change: Any = None) -> None:
        with out:
            n = run.tree[picker.value]
            header.value = node_header(n)
            panes["code"].value = _pre(n.source, "no candidate: generation failed")
            panes["diff vs parent"].value = _diff_html(run.diff(n.id))
            panes["diagnosis"].value = _pre(n.diagnosis)
            panes["prompt"].value = _pre(n.prompt, "no prompt: the offline tuner needs none")
            panes["response"].value = _pre(n.response, "no model response")

    picker.observe(show, names="value")
    if options:
        picker.value = best.id if best is not None else options[0][1]
        show()
    box = w.VBox([w.HTML(_MONO_STYLE), w.HBox([picker, w.VBox([header, tabs], layout=w.Layout(width="54%"))]), out])

    def static_copy() -> tuple[list[bytes], str]:
        # an export shows the tree as a picture, the node list as a table and the selected node's header
        from profiling.widgets_figures import figure_png

        return [figure_png(tree_figure(run))], header.value + nodes_table_html(run)

    return attach_static(box, static_copy)


def nodes_table_html(run: Any) -> str:
    """Every node as a table row (what the list on the left shows), the best one in bold."""
    best = run.best
    head = "".join(f"<th style='text-align:left;padding:0 8px'>{c}</th>"
                   for c in ("#", "node", "operator", "parents", "status", "fitness", "runtime"))
    rows = []
    for n in run.tree:
        cells = [n.seq, n.id, n.operator, ", ".join(n.parents) or "–", n.status, f"{n.fitness:.4g}", _us(n.runtime_us)]
        bold = " style='font-weight:bold'" if best is not None and n.id == best.id else ""
        rows.append(f"<tr{bold}>" + "".join(f"<td style='padding:0 8px'>{html.escape(str(c))}</td>" for c in cells)
                    + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def tree_figure(run: Any, rank: bool | None = None) -> Any:
    """The search tree as a picture: one row per depth below its seed or draft, nodes in creation order
    along x, an edge to each primary parent; colour: passed (blue) or failed (red). With `rank` (default:
    unless the run timed on the CPU, whose interpreter times rank nothing) the best node is starred and
    every passed node labelled with its fitness."""
    if rank is None:
        rank = str(run.platform).lower() != "cpu" and not str(run.platform).lower().startswith("cpu")
    from profiling.figure_style import legend_outside
    from profiling.widgets_figures import new_figure

    nodes = list(run.tree)
    depth: dict[str, int] = {}
    for n in nodes:  # creation order: a parent is placed before its children
        parent = n.parents[0] if n.parents else None
        depth[n.id] = depth.get(parent, -1) + 1 if parent in depth else 0
    x = {n.id: i for i, n in enumerate(nodes)}
    fig = new_figure(max(6.0, 0.45 * len(nodes) + 2.5), 1.4 + 0.7 * (max(depth.values(), default=0) + 1))
    ax = fig.add_subplot()
    for n in nodes:
        for p in n.parents[:1]:
            if p in x:
                ax.plot([x[p], x[n.id]], [depth[p], depth[n.id]], color="grey", lw=0.8, zorder=1)
    best = run.best
    for status, colour in (("passed", "tab:blue"), ("failed", "tab:red")):
        sel = [n for n in nodes if (n.status == "passed") == (status == "passed")]
        if sel:
            ax.scatter([x[n.id] for n in sel], [depth[n.id] for n in sel], color=colour, s=60, zorder=2,
                       label=status if status == "passed" else "failed or not run")
    for n in nodes:
        if rank and n.status == "passed":
            ax.annotate(f"{n.fitness:.3g}", (x[n.id], depth[n.id]), textcoords="offset points", xytext=(0, 7),
                        ha="center", fontsize=8)
    if rank and best is not None:
        ax.scatter([x[best.id]], [depth[best.id]], marker="*", s=260, color="gold", edgecolor="black", zorder=3,
                   label=f"best: {best.id} ({best.fitness:.3g})")
    ax.set_xticks(range(len(nodes)), [str(n.seq) for n in nodes])
    ax.set_yticks(range(max(depth.values(), default=0) + 1))
    ax.invert_yaxis()
    ax.set_xlabel("node (creation order)")
    ax.set_ylabel("depth [generations]")
    ax.grid(False)
    ax.set_title(f"search tree: {len(nodes)} nodes" + (", labels: fitness [x]" if rank else
                                                        " (CPU: correctness only, times rank nothing)"))
    legend_outside(ax)
    return fig
