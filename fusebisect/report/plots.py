"""Plots as inline SVG strings, drawn with matplotlib (Agg backend, no display needed).

Each function returns an ``<svg ...>`` element ready to paste into HTML5: no XML prolog, no metadata block,
no namespace URLs, and fonts kept as text so the labels stay searchable.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

_COLOURS = {"good": "#2e7d32", "bad": "#c62828", "invalid": "#9e9e9e", "unknown": "#f9a825"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _to_svg(fig, salt: str) -> str:
    plt = _pyplot()
    buf = io.StringIO()
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    return svg.strip()


def metric_curves(series: dict[str, Sequence[float]], *, ylabel: str = "metric", title: str = "") -> str:
    """Line plot of one metric curve per label (e.g. baseline, reference, final); returns inline SVG."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    styles = {"baseline (all rules at default)": "-", "reference (candidates off)": "--", "final (culprits off)": ":"}
    for label, values in series.items():
        values = list(values)
        if not values:
            continue
        marker = "o" if len(values) <= 1 else None
        ax.plot(range(1, len(values) + 1), values, styles.get(label, "-"), marker=marker, label=label, linewidth=1.6)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step (match index)")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _to_svg(fig, "metric")


def cosine_along_ops(ops: Sequence[str], cosines: Sequence[float | None], *, first_divergence: int | None,
                     threshold: float | None = None) -> str:
    """Cosine similarity per compared tensor in execution order, first divergence marked; inline SVG."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    xs = list(range(len(ops)))
    ys = [float("nan") if c is None else float(c) for c in cosines]
    ax.plot(xs, ys, marker=".", linewidth=1.2, color="#1565c0", label="cosine similarity")
    if threshold is not None:
        ax.axhline(threshold, color="#c62828", linewidth=0.8, linestyle="--", label=f"threshold {threshold:g}")
    if first_divergence is not None and 0 <= first_divergence < len(xs):
        ax.axvline(first_divergence, color="#c62828", linewidth=1.2)
        ax.annotate(f"first divergence: {ops[first_divergence]}", (first_divergence, ys[first_divergence]),
                    textcoords="offset points", xytext=(8, -14), fontsize=8, color="#c62828",
                    parse_math=False)   # an op name is text: a '$' in it is no math
    ax.set_xlabel("tensor, in execution order")
    ax.set_ylabel("cosine")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    return _to_svg(fig, "cosine")


def search_timeline(sizes: Sequence[int], outcomes: Sequence[str], seconds: Sequence[float],
                    roles: Sequence[str], numbers: Sequence[int] | None = None) -> str:
    """The search as a timeline: one bar per execution (height = rules off) at its run number (``numbers``; else
    1..N), coloured by verdict; inline SVG."""
    plt = _pyplot()
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(7.5, 3.6), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    xs = list(numbers) if numbers is not None else list(range(1, len(sizes) + 1))
    colours = [_COLOURS.get(o, "#607d8b") for o in outcomes]
    ax.bar(xs, sizes, color=colours)
    # a marker on every bar keeps executions with nothing off (the baseline) visible
    ax.scatter(xs, sizes, color=colours, edgecolors="#263238", linewidths=0.6, zorder=3, s=28)
    top = max(sizes, default=0)
    for x, size, role in zip(xs, sizes, roles):
        if role in ("reference", "baseline", "confirm", "verify"):
            ax.annotate(role, (x, size), textcoords="offset points", xytext=(0, 5), ha="center", fontsize=7)
    ax.set_ylim(0, top * 1.25 + 1)
    ax.set_ylabel("rules off")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in _COLOURS.values()]
    ax.legend(handles, list(_COLOURS), fontsize=7, ncol=4, loc="lower center", bbox_to_anchor=(0.5, 1.0),
              frameon=False)
    ax.grid(alpha=0.3, axis="y")
    ax2.bar(xs, seconds, color="#90a4ae")
    ax2.set_ylabel("seconds")
    ax2.set_xlabel("execution")
    from matplotlib.ticker import MaxNLocator

    ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax2.grid(alpha=0.3, axis="y")
    return _to_svg(fig, "timeline")
