"""An ipywidgets browser of a search tree: pick a node, read its code, its diff against its parent,
its diagnosis, and the prompt and response that produced it. Needs the `lab` extra."""

from __future__ import annotations

import html
from typing import Any


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
    return w.VBox([w.HTML(_MONO_STYLE), w.HBox([picker, w.VBox([header, tabs], layout=w.Layout(width="54%"))]), out])
