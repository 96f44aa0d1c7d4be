"""Self-contained HTML reports: inline CSS and inline SVG, no scripts, no network, no external assets.

The building blocks (:func:`page`, :func:`section`, :func:`table`, :func:`verdict`, :func:`code_block`) are
shared by the ``run``, ``compare`` and ``overflow`` reports.
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from fusebisect.report import plots
from fusebisect.report.model import (DIVERGENCE_HEADERS, RunView, command_line, culprit_rows, divergence_origin,
                                     divergence_row, execution_facts, fmt_confidence, production_cfg_title,
                                     trial_note, unfinished_text)
from fusebisect.textutil import fmt_metric, fmt_number, window_start

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:1100px;color:#212121;
line-height:1.45;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem;
margin-top:2rem}
.sub{color:#616161;margin-top:0}
.verdict{padding:.8rem 1rem;border-radius:6px;font-size:1.1rem;margin:1rem 0}
.verdict.found,.verdict.divergence,.verdict.overflow{background:#ffebee;border-left:6px solid #c62828}
.verdict.clean,.verdict.not_reproduced{background:#e8f5e9;border-left:6px solid #2e7d32}
.verdict.not_fusion,.verdict.inconclusive,.verdict.running{background:#fff8e1;border-left:6px solid #f9a825}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0;width:100%}
th,td{border:1px solid #e0e0e0;padding:.25rem .5rem;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f5f5f5}tr.hl td{background:#ffebee;font-weight:600}
td.good{color:#2e7d32;font-weight:600}td.bad{color:#c62828;font-weight:600}td.invalid{color:#757575}
td.unknown{color:#f57f17}
pre{background:#263238;color:#eceff1;padding:.8rem;border-radius:4px;overflow-x:auto;font-size:.8rem}
code{background:#eceff1;padding:0 .2rem;border-radius:3px}
.plot svg{max-width:100%;height:auto}
.muted{color:#757575}
"""


def esc(value: Any) -> str:
    """HTML-escape ``str(value)`` (None becomes an empty string)."""
    return "" if value is None else html.escape(str(value), quote=True)


def page(title: str, subtitle: str, body: Iterable[str]) -> str:
    """A complete HTML document with the shared stylesheet; returns the text."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{esc(title)}</h1><p class=\"sub\">{esc(subtitle)}</p>" + "".join(body) + "</body></html>\n")


def section(title: str, *parts: str) -> str:
    """A titled section of already-rendered HTML parts."""
    return f"<section><h2>{esc(title)}</h2>" + "".join(parts) + "</section>"


def verdict(kind: str, text: str) -> str:
    """A coloured banner; ``kind`` picks the colour (found, clean, inconclusive, ...)."""
    return f'<div class="verdict {esc(kind)}">{text}</div>'


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, highlight: set[int] | None = None,
          outcome_col: int | None = None) -> str:
    """An HTML table; rows whose index is in ``highlight`` are emphasised; ``outcome_col`` gets verdict colours."""
    out = ["<table><thead><tr>", *(f"<th>{esc(h)}</th>" for h in headers), "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        cls = ' class="hl"' if highlight and i in highlight else ""
        cells = []
        for j, cell in enumerate(row):
            ccls = f' class="{esc(cell)}"' if outcome_col is not None and j == outcome_col else ""
            cells.append(f"<td{ccls}>{esc(cell)}</td>")
        out.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def code_block(text: str) -> str:
    """Preformatted text (commands, config files)."""
    return f"<pre>{esc(text)}</pre>"


def plot(svg: str) -> str:
    """Wrap an inline SVG produced by :mod:`fusebisect.report.plots`."""
    return f'<div class="plot">{svg}</div>'


def cosine_section(rows: Sequence[dict[str, Any]], first: dict[str, Any] | None, threshold: float | None) -> str:
    """Cosine similarity per compared tensor along execution order, first divergence marked (plot + summary)."""
    rows = [r for r in rows if r.get("cosine") is not None]  # unmatched tensors have no similarity to plot
    labels = [str(r.get("tensor") or r.get("op")) for r in rows]
    cosines = [r.get("cosine") for r in rows]
    index = None
    if first:
        for i, r in enumerate(rows):
            if r.get("op") == first.get("op") and r.get("tensor") == first.get("tensor"):
                index = i
                break
    parts = [plot(plots.cosine_along_ops(labels, cosines, first_divergence=index, threshold=threshold))]
    if first:
        parts.append(table(DIVERGENCE_HEADERS, [divergence_row(first)], highlight={0}))
        if (origin := divergence_origin(first)) is not None:
            parts.append(f"<p>{esc(origin)}</p>")
    return "".join(parts)


def render_run(view: RunView, *, catalog=None, production_cfg: str | None = None) -> str:
    """The HTML report of a run: verdict and culprits, metric curves, dump cosine plot, search timeline,
    per-execution table, repro commands and the production fusion_switch.cfg. Returns the document text."""
    result = view.result or {}
    status = view.status
    culprits = result.get("culprits") or []
    body = []
    if status == "found":
        names = "; ".join(" + ".join(c.get("rules") or []) for c in culprits)
        body.append(verdict("found", f"<b>Culprit found:</b> {esc(names)}"))
        if result.get("message"):   # the whole verdict: a caution, the runs it took
            body.append(f"<p>{esc(result['message'])}</p>")
    elif status == "running":
        body.append(verdict("running", f"<b>Run not finished</b>: {esc(unfinished_text(view))}"))
    else:
        body.append(verdict(status, f"<b>{esc(status.replace('_', ' '))}</b>: {esc(result.get('message', ''))}"))
    if culprits:
        rows = [[rule, kind or "-", fmt_confidence(confidence), direction, fused or "-", description or "-"]
                for rule, kind, confidence, direction, fused, description in culprit_rows(view, catalog)]
        body.append(section("Culprits", table(
            ["rule", "kind", "confidence", "direction", "fused ops it touched", "catalog description"], rows)))
    body.append(f"<p class=\"muted\">{esc(' · '.join(execution_facts(view)))}</p>")
    if result.get("notes"):
        body.append(section("Notes", "<ul>" + "".join(f"<li>{esc(n)}</li>" for n in result["notes"]) + "</ul>"))
    if view.excluded:
        body.append(section("Rules kept out of the search", "<ul>" + "".join(
            f"<li>{esc(e.get('rule'))}: {esc(e.get('reason') or 'excluded')}</li>" for e in view.excluded) + "</ul>"))

    series = {}
    for role, label in (("baseline", "baseline (all rules at default)"), ("reference", "reference (candidates off)"),
                        ("verify", "final (culprits off)")):
        t = view.trial_with_role(role)
        verified = (result.get("verify") or {}).get("trial_dir")
        if role == "verify" and verified:   # the run that verified the production file, not merely the last one
            t = next((x for x in view.trials if x.trial_dir and Path(x.trial_dir) == Path(verified)), t)
        if t is not None:
            values = t.curve or ([t.metric] if t.metric is not None else [])
            if values:
                series[label] = values
    if series:
        body.append(section("Metric", plot(plots.metric_curves(series, ylabel="metric"))))
    if view.dumps and view.dumps.get("rows"):
        shown, total = len(view.dumps["rows"]), view.dumps.get("rows_total") or len(view.dumps["rows"])
        start = view.dumps.get("rows_from", 0)
        cut = (f"<p class=\"muted\">tensors {start + 1}–{start + shown} of {total} in execution order, around the "
               "first divergence (<code>fusebisect compare</code> of the two runs' dumps shows all)</p>"
               if total > shown else "")
        body.append(section("Dump comparison: baseline vs reference",
                            cosine_section(view.dumps["rows"], view.dumps.get("first_divergence"),
                                           view.options.get("cosine")), cut))
    if view.trials:
        body.append(section(
            "Search timeline",
            plot(plots.search_timeline([len(t.off) for t in view.trials], [t.outcome for t in view.trials],
                                       [t.seconds for t in view.trials], [t.role for t in view.trials],
                                       [t.number for t in view.trials])),   # at their run numbers, as the table
            table(["#", "role", "rules off", "outcome", "metric", "seconds", "note"],
                  [[t.number, t.role, len(t.off), t.outcome, fmt_number(t.metric), f"{t.seconds:.2f}", trial_note(t)]
                   for t in sorted(view.trials, key=lambda t: t.number)], outcome_col=3)))   # (the plot: as judged)
    repro = result.get("repro") or {}
    if repro:
        lines = []
        for side in ("good", "bad"):
            argv = repro.get(side)
            if argv:
                lines.append(f"# {side}\n" + " ".join(shlex.quote(str(a)) for a in argv))
        body.append(section("Reproduce both sides of the boundary", code_block("\n\n".join(lines))))
    if production_cfg:
        body.append(section(f"{production_cfg_title(view)} ({result.get('switch_file', '')})",
                            code_block(production_cfg)))
    if view.command:
        body.append(section("Command", code_block(command_line(view))))
    return page("fusebisect run report", f"status: {status}", body)


def render_compare(rows: Sequence[dict[str, Any]], first: dict[str, Any] | None, *, unmatched: Sequence[dict],
                   cosine: float, mode: str, my: str, golden: str, max_rows: int = 2000,
                   notes: Sequence[str] = (), not_compared: int = 0, csv: str | None = None) -> str:
    """The HTML report of ``fusebisect compare``: verdict, cosine along execution order with the first
    divergence marked, the suspect rules, and the row table (``rows``: dicts with op, tensor, golden, cosine,
    max_abs_error (None when not a number), nonfinite, reason; execution order), then ``notes`` (e.g. FFTS+
    thread files). ``not_compared``: rows that could not be compared (their reason says why). Of more than
    ``max_rows`` rows the table holds those around the first divergence; ``csv``: the CSV written with all of
    them, if any. Returns the text."""
    # (a tensor compared but not judged, as the terminal says: an integer one against a float golden, one with no
    # element finite on both sides)
    not_judged = sum(1 for r in rows if r.get("compared") and r.get("judged") is False)
    judged = len(rows) - not_compared - not_judged
    left = "; ".join(part for part in (f"{not_compared} could not be compared" if not_compared else "",
                                       f"{not_judged} compared but not judged" if not_judged else "") if part)
    if first:
        from fusebisect.compare.engine import origin_text, suspect_rules, suspects_label
        from fusebisect.rules.catalog import default_catalog

        rules = default_catalog().marked_locked(suspect_rules(first))
        origin = origin_text(first)
        text = (f"<b>First divergence:</b> {esc(first.get('tensor'))} (cosine {esc(fmt_metric(first.get('cosine')))}"
                + (f", {esc(first['note'])}" if first.get("note") else "") + ")"
                + (f"; {esc(origin)}" if origin else "")
                + (f" — {esc(suspects_label(first))}: {esc(', '.join(rules))}" if rules else ""))
        body = [verdict("divergence", text)]
    elif left:
        body = [verdict("inconclusive", f"<b>No divergence</b> among the {judged} tensors judged "
                        f"(cosine ≥ {cosine:g}), but {esc(left)}: see their reason.")]
    else:
        body = [verdict("clean", f"<b>No divergence</b>: every tensor has cosine ≥ {cosine:g}.")]
    body.append(f"<p class=\"muted\">{esc(judged)} of {esc(len(rows))} tensors compared and judged"
                + (f" ({esc(left)})" if left else "") + f" · mapping {esc(mode)} · "
                f"{esc(len(unmatched))} unmatched</p>")
    body.append(section("Cosine similarity along execution order", cosine_section(rows, first, cosine)))
    rows = list(rows)
    at = next((i for i, r in enumerate(rows) if first and r.get("tensor") == first.get("tensor")
               and r.get("op") == first.get("op")), 0)
    start = window_start(at, len(rows), max_rows)   # the rows around the first divergence
    shown = rows[start:start + max_rows]
    hl = {i for i, r in enumerate(shown) if first and r.get("tensor") == first.get("tensor")
          and r.get("op") == first.get("op")}
    parts = [table(["#", "op", "tensor", "golden", "cosine", "max abs error", "reason"],
                   [[r.get("index", i), r.get("op"), r.get("tensor"), r.get("golden"), fmt_metric(r.get("cosine")),
                     fmt_metric(r.get("max_abs_error")), r.get("reason") or ""] for i, r in enumerate(shown)],
                   highlight=hl)]
    if len(rows) > max_rows:
        where = f"the CSV {esc(csv)} has all" if csv else "--csv FILE writes all"
        parts.append(f"<p class=\"muted\">(rows {start + 1}–{start + len(shown)} of {len(rows)}, around the first "
                     f"divergence; {where})</p>")
    body.append(section("Tensors", *parts))
    if unmatched:
        body.append(section("Unmatched", table(["op", "side", "reason"],
                                               [[u.get("op"), u.get("side"), u.get("reason")] for u in unmatched])))
    if notes:
        body.append(section("Notes", "<ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>"))
    return page("fusebisect compare report", f"my: {my} · golden: {golden}", body)


def render_overflow(overflows: Sequence[dict[str, Any]], *, dump_dir: str, unreadable: str = "",
                    notes: Sequence[str] = (), shown: str = "") -> str:
    """The HTML report of ``fusebisect overflow`` from its JSON entries (execution order). ``unreadable``: the
    summary of the files that could not be read (then no overflow found is no verdict); ``shown``: how many ops
    were found in all when --limit left some out. Returns the text."""
    if overflows:
        o = overflows[0]
        how = ("found by scanning the op dumps" if o.get("unit") == "scan" else   # no Opdebug record, no status
               f"{esc(o.get('unit'))}, status {esc(o.get('status'))}")
        body = [verdict("overflow", f"<b>First overflow:</b> {esc(o.get('op_type'))} {esc(o.get('op_name'))} "
                                    f"({how})")]
    elif unreadable:
        body = [verdict("inconclusive", f"<b>No overflow found in what could be read</b>: {esc(unreadable)}")]
    else:
        body = [verdict("clean", "<b>No overflow found.</b>")]
    if shown:
        body.append(f"<p>{esc(shown)}</p>")
    if overflows and unreadable:
        body.append(f"<p><b>Not read:</b> {esc(unreadable)}</p>")
    def extreme(s: dict, which: str) -> str:
        """min/max: a number, else its infinity, whose sign the counts tell (a min is -inf only with a -Inf)."""
        if s.get(which) is not None or not s.get(f"{which}_is_inf"):
            return fmt_number(s.get(which))
        if which == "min":
            return "-inf" if s.get("neg_inf") else "inf"
        return "inf" if s.get("pos_inf", s.get("inf")) else "-inf"

    for n, o in enumerate(overflows, 1):
        parts = [table(["op type", "op", "task id", "stream id", "timestamp", "unit", "status", "meanings"],
                       [[o.get("op_type"), o.get("op_name"), o.get("task_id"), o.get("stream_id"),
                         o.get("timestamp"), o.get("unit"), o.get("status"), "; ".join(o.get("meanings") or [])]])]
        stats = [[side[:-1], s.get("index"), s.get("dtype"), s.get("shape"),
                  extreme(s, "min"), extreme(s, "max"),
                  fmt_number(s.get("mean")), s.get("nan"), s.get("pos_inf", s.get("inf")), s.get("neg_inf"),
                  s.get("saturated")]
                 for side in ("inputs", "outputs") for s in (o.get(side) or [])]
        if stats:
            parts.append(table(["tensor", "index", "dtype", "shape", "min", "max", "mean", "NaN", "+Inf", "-Inf",
                                "fp16 saturated"], stats))
        from fusebisect.compare.overflow import iteration_text

        if where := iteration_text(o.get("iteration")):
            parts.append(f"<p>dumped on: {esc(where)}</p>")
        if o.get("pass_names"):
            parts.append(f"<p>fusion rules of this op: <code>{esc(', '.join(o['pass_names']))}</code></p>")
        if o.get("original_ops"):
            parts.append(f"<p>original ops: <code>{esc(', '.join(o['original_ops']))}</code></p>")
        elif o.get("output_origins"):   # the dump names one origin per output, not every op a fused op replaced
            label = "output's origin" if len(o["output_origins"]) == 1 else "outputs' origins"
            parts.append(f"<p>{label}: <code>{esc(', '.join(o['output_origins']))}</code></p>")
        for key, label in (("dump_file", "op dump"), ("opdebug_file", "Opdebug record")):
            if o.get(key):
                parts.append(f"<p>{label}: <code>{esc(o[key])}</code></p>")
        if o.get("diagnosis"):
            parts.append(f"<p><b>Diagnosis:</b> {esc(o['diagnosis'])}</p>")
        body.append(section(f"{o.get('op_index') or n}. {o.get('op_name')}", *parts))
    if notes:   # (what the terminal prints on stderr: records --scan does not read, runs left out, ...)
        body.append(section("Notes", "<ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>"))
    return page("fusebisect overflow report", f"dump: {dump_dir}", body)
