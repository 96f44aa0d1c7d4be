"""The Markdown report of a run (for pull requests, tickets and chat): same facts as the HTML, no plots."""

from __future__ import annotations

import shlex

from fusebisect.report.model import (DIVERGENCE_HEADERS, RunView, command_line, culprit_rows, divergence_origin,
                                     divergence_row, execution_facts, fmt_confidence, production_cfg_title,
                                     trial_note, unfinished_text)


def _cell(value) -> str:
    """A table cell: one line (a newline would end the row), '|' escaped, and text from data (an op name) shown
    as text, never read as HTML."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    text = " ".join(str(value).splitlines())
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _text(value) -> str:
    """Prose from data (a message, a note naming a path): shown as text, never read as HTML or as Markdown
    emphasis, links or code (a '*' in a workdir name, '_' in a rule name)."""
    text = " ".join(str(value).splitlines()).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "\\`*_[]~":
        text = text.replace(ch, "\\" + ch)
    return text


def render_run_markdown(view: RunView, *, catalog=None, production_cfg: str | None = None) -> str:
    """Markdown text of a run report: verdict, culprits, executions, repro commands, production cfg, the dump
    comparison's first divergence and the command (the HTML's facts, no plots)."""
    result = view.result or {}
    lines = ["# fusebisect run report", ""]
    status = view.status
    culprits = result.get("culprits") or []
    if status == "found":
        lines.append("**Culprit found:** " + "; ".join(" + ".join(_text(r) for r in c.get("rules") or [])
                                                        for c in culprits))
        if result.get("message"):
            lines += ["", _text(result["message"])]
    elif status == "running":
        lines.append(f"**Run not finished**: {_text(unfinished_text(view))}")
    else:
        lines.append(f"**{status.replace('_', ' ')}**: {_text(result.get('message', ''))}")
    lines.append("")
    executions, candidates = execution_facts(view)
    lines.append(f"{executions}, {candidates}.")
    lines.append("")
    if result.get("notes"):
        lines += ["## Notes", "", *(f"- {_text(n)}" for n in result["notes"]), ""]
    if view.excluded:
        lines += ["## Rules kept out of the search", "",
                  *(f"- {_text(e.get('rule'))}: {_text(e.get('reason') or 'excluded')}" for e in view.excluded), ""]
    if culprits:
        lines += ["## Culprits", "", "| rule | kind | confidence | direction | fused ops | description |",
                  "|---|---|---|---|---|---|"]
        for rule, kind, confidence, *rest in culprit_rows(view, catalog):   # 3 decimals, as the terminal and HTML
            lines.append("| " + " | ".join(_cell(v) for v in (rule, kind, fmt_confidence(confidence), *rest)) + " |")
        lines.append("")
    if view.trials:
        lines += ["## Executions", "", "| # | role | rules off | outcome | metric | seconds | note |",
                  "|---|---|---|---|---|---|---|"]
        for t in sorted(view.trials, key=lambda t: t.number):   # run-number order, as the terminal and JSON
            note = trial_note(t)
            lines.append("| " + " | ".join(_cell(v) for v in (
                t.number, t.role, len(t.off), t.outcome, t.metric, f"{t.seconds:.2f}", note or None)) + " |")
        lines.append("")
    repro = result.get("repro") or {}
    if repro:
        lines += ["## Reproduce both sides of the boundary", "", "```bash"]
        for side in ("good", "bad"):
            if repro.get(side):
                lines.append(f"# {side}")
                lines.append(" ".join(shlex.quote(str(a)) for a in repro[side]))
        lines += ["```", ""]
    if production_cfg:
        lines += [f"## {production_cfg_title(view)} ({_text(result.get('switch_file', ''))})", "", "```json",
                  production_cfg.rstrip("\n"), "```", ""]
    first = (view.dumps or {}).get("first_divergence")
    if first:   # what the HTML's cosine section tells in words
        lines += ["## Dump comparison: baseline vs reference", "",
                  "| " + " | ".join(DIVERGENCE_HEADERS) + " |", "|" + "---|" * len(DIVERGENCE_HEADERS),
                  "| " + " | ".join(_cell(v) for v in divergence_row(first)) + " |", ""]
        if (origin := divergence_origin(first)) is not None:
            lines += [origin[0].upper() + origin[1:] + ".", ""]
    if view.command:
        lines += ["## Command", "", "```bash", command_line(view), "```", ""]
    return "\n".join(lines)
