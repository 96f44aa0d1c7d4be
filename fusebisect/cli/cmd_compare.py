"""``fusebisect compare``: msaccucmp-compatible comparison of two dumps, pointing at the rule to suspect."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Optional

import typer

from fusebisect.cli import common
from fusebisect.textutil import fmt_metric

HELP = (
    "Compare my NPU dump against golden data, the way CANN's msaccucmp does, and name the first divergent op.\n\n"
    "MY is a dump location (dump root, timestamp dir, leaf dir or file). GOLDEN is a golden .npy directory "
    "({op}.{idx}.{ts}.npy) or another NPU dump. Mapping: no graph = NPU vs NPU by op name; [bold]--my-graph[/bold] "
    "with golden .npy = msaccucmp -f; [bold]--my-graph[/bold] + [bold]--golden-graph[/bold] with an NPU golden = "
    "fused vs unfused (-f/-cf). Graphs: GE ge_proto txt, atc JSON or .pb.\n\n"
    "The table lists tensors in execution order with the first divergence highlighted; the summary names its "
    "graph-fusion passes, UB pass and the original ops it replaced. --csv writes msaccucmp's result CSV.\n\n"
    "FFTS+ thread dump files of one op (one per thread slice) are merged into the whole tensor as msaccucmp "
    "does; [bold]--ffts[/bold] keeps their op names (msaccucmp -ffts: manual-mode slices compared one to one).\n\n"
    "Exit codes: 0 nothing crosses the thresholds, 1 divergence found (a tensor below --cosine, above "
    "--max-abs-error, or with NaN/Inf unlike the golden's: on one side only, e.g. a -inf mask my tensor lost, or of "
    "another kind), 2 error (also: no tensor could be compared).\n\n"
    "Example: fusebisect compare ./dump_fused ./dump_unfused --my-graph ge_fused.txt "
    "--golden-graph ge_unfused.txt --csv result.csv"
)


def _finite(value: float | None) -> float | None:
    """A metric for JSON and the HTML report: None when absent or not a finite number."""
    return value if value is not None and math.isfinite(value) else None


def _render(report, *, cosine: float, max_abs_error: float | None, top: int | None, skipped: int) -> None:
    """The console table and summary; ``skipped``: rows that could not be compared."""
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from fusebisect.compare.engine import (is_divergent, origin_text, suspect_rules, suspects_label,
                                           verdict_cosine)

    console = common.out()
    rows = report.execution_order()
    fd = report.first_divergence
    table = Table(title=f"compare ({report.mode}): {len(report.rows)} tensors", show_lines=False)
    for col in ("#", "op", "tensor", "golden", "cosine", "max abs err", "reason"):
        table.add_column(col, overflow="fold")
    shown = rows
    if top is not None:
        # ranked by the cosine the verdict uses (a tensor of zeros against a non-zero one is 0, not msaccucmp's
        # NaN); rows no verdict rests on a cosine for come last
        ranked = sorted(rows, key=lambda r: (c if (c := verdict_cosine(r)) is not None else math.inf))
        keep = {id(r) for r in ranked[:top]}
        # the first divergence stays in the table whatever its cosine (a scalar, a max-abs-error verdict)
        keep |= {id(r) for r in rows if fd is not None and r.tensor == fd["tensor"] and r.my_op == fd["op"]}
        shown = [r for r in rows if id(r) in keep]
    for row in shown:
        style = None
        if fd is not None and row.tensor == fd["tensor"] and row.my_op == fd["op"]:
            style = "bold red"
        elif is_divergent(row, cosine=cosine, max_abs_error=max_abs_error):
            style = "yellow"
        golden = ",".join(row.golden_ops[:2]) + (f" (+{len(row.golden_ops) - 2})" if len(row.golden_ops) > 2 else "")
        reason = row.fail_reason or row.note
        # cut short for the table, marked so: a path cut mid-way reads as another, real one (--csv/--json keep it)
        table.add_row(str(row.index), row.my_op, row.tensor, golden, fmt_metric(row.cosine), fmt_metric(row.max_abs_error),
                      reason if len(reason) <= 80 else reason[:79] + "…", style=style)
    common.print_table(table)
    unjudged = sum(1 for r in report.rows if r.compared and not r.judged)
    if fd is None:
        compared = len(report.rows) - skipped - unjudged
        if compared:
            text = (f"No divergence: every cosine >= {cosine}"
                    + (f" and max abs error <= {max_abs_error}" if max_abs_error is not None else "")
                    + f" over the {compared} tensors compared")
            if unjudged:
                text += f"; {unjudged} not judged (see the reason column)"
            if skipped:
                text += f"; {skipped} could not be compared (see the reason column)"
        elif unjudged:
            text = (f"Nothing judged: {unjudged} tensor{'s' if unjudged > 1 else ''} compared but not judged (see the "
                    f"reason column)" + (f"; {skipped} could not be compared" if skipped else ""))
        else:
            text = f"Nothing compared: none of the {skipped} tensors could be compared (see the reason column)"
        console.print(Panel(text + f"; {len(report.unmatched)} unmatched.", title="summary",
                            style="yellow" if skipped or unjudged else "green"))
        return
    lines = [f"first divergent op: [bold]{escape(fd['op'])}[/bold]  tensor {escape(fd['tensor'])}",
             f"cosine {fmt_metric(fd['cosine'])}   max abs error {fmt_metric(fd['max_abs_error'])}"
             + (f"   ({escape(fd['note'])})" if fd.get("note") else ""),
             f"graph-fusion passes: {escape(', '.join(fd['pass_names'])) or '-'}",
             f"UB fusion pass: {escape(fd['ub_pass_name'] or '-')}",
             # (matched by name, the golden op is the op of the same name, nothing it replaced)
             f"{'original ops it replaced' if report.mode == 'fused_vs_unfused' else 'compared with'}: "
             f"{escape(', '.join(fd['ground_truth'])) or '-'}"]
    if (origin := origin_text(fd)) is not None:
        lines.insert(2, escape(origin))
    if skipped or unjudged:
        lines.append("; ".join(part for part in (
            f"{skipped} of {len(report.rows)} tensors could not be compared" if skipped else "",
            f"{unjudged}{'' if skipped else f' of {len(report.rows)} tensors'} compared but not judged" if unjudged
            else "") if part) + " (see the reason column)")
    if suspects := suspect_rules(fd):
        from fusebisect.rules.catalog import default_catalog

        # a pass no switch file turns off cannot be the fix, whatever it did
        shown = default_catalog().marked_locked(suspects)
        lines.append(f"{suspects_label(fd)}: [bold]{escape(', '.join(shown))}[/bold]")
    console.print(Panel(Text.from_markup("\n".join(lines)), title="first divergence", style="red"))


def _unreadable_error(report, not_compared: int):
    """Raise the one-line error of a comparison some of whose dump files could not be read (no verdict)."""
    from fusebisect.errors import DumpFormatError

    first = report.unreadable[0]
    raise DumpFormatError(f"{report.unreadable_files} dump file(s) could not be read: 'no divergence' cannot be "
                          f"concluded ({len(report.rows) - not_compared} tensors compared); first: {first['reason']}")


def register(app: typer.Typer) -> None:
    """Adds the ``compare`` command to ``app``."""

    @app.command("compare", help=HELP)
    def compare(
        my: Annotated[Path, typer.Argument(help="My dump (tree, timestamp dir, leaf dir or file).")],
        golden: Annotated[Path, typer.Argument(help="Golden .npy dir or golden NPU dump.")],
        my_graph: Annotated[Optional[Path], typer.Option("--my-graph", help="Graph of my model (msaccucmp -f).")] = None,
        golden_graph: Annotated[Optional[Path], typer.Option(
            "--golden-graph", help="Graph of the golden (unfused) model (msaccucmp -cf).")] = None,
        csv_out: Annotated[Optional[Path], typer.Option("--csv", help="Write msaccucmp's result CSV here.")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
        cosine: Annotated[float, typer.Option("--cosine", help="Divergent when cosine < this.")] = 0.99,
        max_abs_error: Annotated[Optional[float], typer.Option(
            "--max-abs-error", help="Divergent when max abs error > this.")] = None,
        top: Annotated[Optional[int], typer.Option(
            "--top", min=1, help="Show only the N lowest-cosine rows (and the first divergence's, wherever it "
                                 "ranks).")] = None,
        op: Annotated[Optional[str], typer.Option("--op", help="Compare only this op.")] = None,
        engine: Annotated[str, typer.Option("--engine", help="native | msaccucmp | auto (= native).")] = "auto",
        msaccucmp: Annotated[Optional[Path], typer.Option(
            "--msaccucmp", help="msaccucmp.py (or its folder) for --engine msaccucmp.")] = None,
        jobs: Annotated[Optional[int], typer.Option(
            "--jobs", "-j", min=1, help="Worker processes over ops (each holds one tensor pair in memory). "
            "Default: one per CPU when the comparison has 500 ops or more, else 1.")] = None,
        html_out: Annotated[Optional[Path], typer.Option(
            "--html", help="Write a self-contained HTML report (cosine plot, first divergence, rows).")] = None,
        iteration: Annotated[str, typer.Option(
            "--iteration", help="Of a dump root holding several iterations: latest (the leaf msaccucmp would be "
            "given) or earliest (fused vs unfused: before a faulty fusion drifts the weights).")] = "latest",
        ffts_direct: Annotated[bool, typer.Option(
            "--ffts", help="FFTS+ vs FFTS+ (msaccucmp -ffts): keep the op names of thread files, so manual-mode "
            "slices (_lxsliceN) are compared one to one; automatic-mode threads share a name and are still "
            "merged.")] = False,
    ) -> None:
        from fusebisect.errors import UsageError

        if not -1.0 <= cosine <= 1.0:
            raise UsageError(f"--cosine {cosine:g}: a cosine similarity threshold is between -1 and 1")
        if max_abs_error is not None and not max_abs_error >= 0:
            raise UsageError(f"--max-abs-error {max_abs_error:g}: must be 0 or more")
        if engine not in ("native", "msaccucmp", "auto"):
            raise UsageError(f"--engine {engine}: expected native, msaccucmp or auto")
        if iteration not in ("latest", "earliest"):
            raise UsageError(f"--iteration {iteration}: expected latest or earliest")
        if msaccucmp is not None and engine != "msaccucmp":
            raise UsageError(f"--msaccucmp {msaccucmp}: it is for --engine msaccucmp (the {engine} engine does not "
                             "run it); add --engine msaccucmp or drop --msaccucmp")
        if golden_graph is not None and my_graph is None:
            raise UsageError("--golden-graph needs --my-graph (msaccucmp -cf needs -f)")
        from fusebisect.fsutil import check_output_file, refuse_inside_inputs
        for flag, out in (("--csv", csv_out), ("--html", html_out)):
            refuse_inside_inputs(out, flag, [my, golden, my_graph, golden_graph])
            check_output_file(out, flag)
        on_stdout = common.stdout_outputs([("--csv", csv_out), ("--html", html_out)], json_out)
        if csv_out is not None and html_out is not None and csv_out.resolve() == html_out.resolve():
            raise UsageError(f"--csv and --html name the same file {csv_out}: the second would replace the first")
        if engine == "msaccucmp":
            from fusebisect.compare.msaccucmp_adapter import run_msaccucmp
            report = run_msaccucmp(my, golden, my_graph=my_graph, golden_graph=golden_graph, script=msaccucmp,
                                   cosine=cosine, max_abs_error=max_abs_error, ffts_direct=ffts_direct,
                                   leaf=iteration, op=op)
        else:
            from fusebisect.compare.engine import compare_dumps
            report = compare_dumps(my, golden, my_graph=my_graph, golden_graph=golden_graph, cosine=cosine,
                                   max_abs_error=max_abs_error, op=op, jobs=jobs, ffts_direct=ffts_direct,
                                   leaf=iteration)
        for note in report.notes:
            common.log(f"note: {note}")
        if csv_out is not None:
            from fusebisect.compare.csvout import write_csv
            write_csv(report, csv_out)
            common.log_wrote(csv_out)
        not_compared = sum(not r.compared for r in report.rows)
        rows = [] if html_out is None and not json_out else [
            {"index": r.index, "op": r.my_op, "tensor": r.tensor, "golden": ",".join(r.golden_ops),
             "cosine": _finite(r.cosine), "max_abs_error": _finite(r.max_abs_error), "nonfinite": r.nonfinite,
             "finite_cosine": r.finite_cosine, "compared": r.compared, "judged": r.compared and r.judged,
             "reason": r.fail_reason or r.note}
            for r in report.execution_order()]   # for the HTML report and --json
        if html_out is not None:
            from fusebisect.fsutil import atomic_write_text
            from fusebisect.report.html import render_compare
            atomic_write_text(html_out, render_compare(rows, report.first_divergence, unmatched=report.unmatched,
                                                       cosine=cosine, mode=report.mode, my=str(my),
                                                       golden=str(golden), notes=report.notes,
                                                       not_compared=not_compared,
                                                       csv=str(csv_out) if csv_out is not None else None))
            common.log_wrote(html_out)
        if json_out:
            first = report.first_divergence
            if first:   # the rules to suspect no switch file turns off (they cannot be the fix)
                from fusebisect.compare.engine import suspect_rules
                from fusebisect.rules.catalog import default_catalog

                names = suspect_rules(first)
                marked = default_catalog().marked_locked(names)
                first = {**first, "cannot_switch_off": [n for n, m in zip(names, marked) if m != n]}
            common.print_json({"rows": len(report.rows), "compared": len(report.rows) - not_compared,
                               "not_compared": not_compared, "first_divergence": first,
                               "unmatched": [{"op": u["op"], "side": u["side"], "reason": u["reason"]}
                                             for u in report.unmatched], "notes": list(report.notes),
                               "tensors": rows})
        elif not on_stdout:   # (the CSV or HTML is on stdout: the table is not printed after it)
            _render(report, cosine=cosine, max_abs_error=max_abs_error, top=top, skipped=not_compared)
        if report.first_divergence:
            raise typer.Exit(1)
        if report.unreadable and not report.rows:   # nothing was compared: the files are the reason
            _unreadable_error(report, not_compared)
        if not_compared == len(report.rows):
            first = next((r.fail_reason for r in report.rows if r.fail_reason), "")
            raise UsageError(f"{my}: none of the {len(report.rows)} tensors could be compared"
                             + (f" (first reason: {first})" if first else ""))
        if report.rows and all(not r.compared or not r.judged for r in report.rows):   # no verdict rests on any
            first = next(r.note for r in report.rows if r.compared)
            raise UsageError(f"{my}: none of the {len(report.rows)} tensors could be judged (first: {first})")
        if report.unreadable:   # a tensor that could not be read may be the divergent one: no verdict
            _unreadable_error(report, not_compared)
        if report.not_in_graph:   # left out of the comparison: they may hold the divergence
            raise UsageError(f"--my-graph {my_graph}: {len(report.not_in_graph)} op dump(s) have no op in it (first: "
                             f"{report.not_in_graph[0]}), so they were not compared and 'no divergence' cannot be "
                             f"concluded ({len(report.rows) - not_compared} tensors compared): give the graph of "
                             "this dump")
        raise typer.Exit(0)
