"""Notebook views of the knowledge base: hits as HTML with their tags, and an interactive query box
(ipywidgets, imported lazily) with platform/arch dropdowns."""

from __future__ import annotations

import html
from typing import Any

from profiling.widgets_figures import attach_static
from retrieval.retriever import Hit, Retriever

ARCHS_BY_PLATFORM = {
    "cuda": ["sm_90", "sm_80", "any"],
    "rocm": ["gfx942", "any"],
    "cpu": ["cpu-interpreter"],
    "any": ["any"],
}
_LEVEL_COLOURS = {
    "general": "#e8f0fe",
    "platform": "#e6f4ea",
    "architecture": "#fef7e0",
    "code_sample": "#f3e8fd",
}


def hits_html(hits: list[Hit], max_lines: int = 14) -> str:
    if not hits:
        return "<i>no section matches these filters</i>"
    out = []
    for i, h in enumerate(hits, 1):
        t = h.tags
        tags = (
            f"level={t['level']} · platform={t['platform']} · arch={','.join(t['arch'])} · "
            f"topic={', '.join(t['topic'])}"
        )
        body = "\n".join(h.text.strip().splitlines()[:max_lines])
        out.append(
            f"<div style='background:{_LEVEL_COLOURS.get(h.level, '#fff')};padding:6px;margin:4px 0;"
            f"border-radius:4px'><b>{i}. {html.escape(h.title)}</b> <small>(score {h.score:.3f}, "
            f"{html.escape(h.path)})</small><br><small><code>{html.escape(tags)}</code></small>"
            f"<pre style='white-space:pre-wrap;margin:4px 0'>{html.escape(body)}</pre></div>"
        )
    return "".join(out)


def query_box(retriever: Retriever, initial: str = "", platform: str = "cuda") -> Any:
    """A text box, platform and arch dropdowns, a top-k slider and a 'prompt' switch (retrieve()
    with its ordering and token budget instead of raw top-k hits)."""
    import ipywidgets as w
    from IPython.display import HTML, display

    text = w.Text(value=initial, placeholder="diagnosis or question", layout=w.Layout(width="70%"))
    plat = w.Dropdown(options=list(ARCHS_BY_PLATFORM), value=platform, description="platform")
    arch = w.Dropdown(options=ARCHS_BY_PLATFORM[platform], description="arch")
    top = w.IntSlider(value=4, min=1, max=10, description="top k")
    prompt = w.Checkbox(value=False, description="prompt (retrieve)")
    go = w.Button(description="query", button_style="primary")
    out = w.Output()
    shown: dict[str, Any] = {"hits": [], "html": "<i>no query run yet</i>", "query": ""}  # for the static copy

    def on_platform(change: dict) -> None:
        arch.options = ARCHS_BY_PLATFORM[change["new"]]

    def run(_: Any = None) -> None:
        out.clear_output()
        with out:
            try:
                if prompt.value:
                    res = retriever.retrieve(text.value, platform=plat.value, arch=arch.value)
                    hits = res.hits
                    body = f"<small>{res.tokens} tokens, embedder {res.embedder}</small>" + hits_html(hits)
                else:
                    hits = retriever.query(text.value, top.value, platform=plat.value, arch=arch.value)
                    body = hits_html(hits)
                shown.update(hits=hits, html=body, query=text.value)
                display(HTML(body))
            except ValueError as exc:  # empty query, unknown platform: say so in the widget
                display(HTML(f"<b style='color:#b00'>{html.escape(str(exc))}</b>"))

    plat.observe(on_platform, names="value")
    go.on_click(run)
    text.on_submit(run)
    box = w.VBox([w.HBox([text, go]), w.HBox([plat, arch, top, prompt]), out])
    if initial:
        run()

    def static_copy() -> tuple[list[bytes], str]:
        # an export shows the last query, its hits' scores as a picture and the hits themselves
        from profiling.widgets_figures import figure_png

        query = f"<div><b>query</b> ({html.escape(plat.value)}, {html.escape(str(arch.value))}): " \
                f"<code>{html.escape(shown['query'])}</code></div>"
        return [figure_png(hits_figure(shown["hits"], shown["query"]))], query + shown["html"]

    return attach_static(box, static_copy)


def hits_figure(hits: list[Hit], query: str = "") -> Any:
    """The hits' scores as horizontal bars, coloured by their level in the knowledge base."""
    from profiling.figure_style import legend_outside
    from profiling.widgets_figures import new_figure

    fig = new_figure(7, 0.9 + 0.35 * max(len(hits), 1))
    ax = fig.add_subplot()
    if not hits:
        ax.text(0.5, 0.5, "no section matches this query", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    colours = {"general": "tab:blue", "platform": "tab:green", "architecture": "tab:orange",
               "code_sample": "tab:purple"}
    y = list(range(len(hits)))
    for level, colour in colours.items():
        sel = [i for i, h in enumerate(hits) if h.level == level]
        if sel:
            ax.barh(sel, [hits[i].score for i in sel], color=colour, label=level)
    ax.set_yticks(y, [h.title[:48] for h in hits])
    ax.invert_yaxis()
    ax.set_xlabel("retrieval score (higher: closer match)")
    short = query if len(query) <= 60 else query[:57] + "..."
    ax.set_title(f"knowledge-base hits for: {short}")
    legend_outside(ax, title="level")
    return fig
