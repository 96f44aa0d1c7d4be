"""``fusebisect overflow``: which op overflowed first, and what to do about it (thin CLI over compare.overflow)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from fusebisect.cli import common
from fusebisect.errors import DumpFormatError
from fusebisect.textutil import fmt_number

HELP = (
    "Find the ops that overflowed (Opdebug records) and explain the first ones in execution order.\n\n"
    "Reads every [bold]Opdebug.Node_OpDebug.*[/bold] file under DUMP_DIR (binary, protobuf or nano dumps; old "
    "2048-byte and new 0x5A5A5A5A record layouts), decodes the status words, finds the overflowing op's dump in the "
    "same iteration directory (task id, stream id, and FFTS+ context/thread ids) and shows its inputs and outputs "
    "(min, max, mean, NaN, +/-Inf, float16 values at 65504) with a one-line diagnosis.\n\n"
    "Without Opdebug files, [bold]--scan[/bold] walks the ordinary dumps in execution order and reports the first "
    "ops holding NaN/Inf or saturated float16 values.\n\n"
    "Exit codes: 0 no overflow (every Opdebug record read), 1 overflow found (even when some Opdebug files could "
    "not be read: the headline says so), 2 error, including Opdebug files that could not be read while the rest "
    "hold no overflow (it cannot be ruled out).\n\n"
    "Example: fusebisect overflow ./dump/20240101000000 --graph ./ge_graphs --limit 3"
)



def _rel(path: Path, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


def _unreadable_consequence(report) -> str:
    if report.overflows:
        return "overflows recorded in them are missing from this list"
    read = report.files_read - len(report.unreadable)
    what = "abnormal values" if report.mode == "scan" else "overflow"
    return (f"the {read} read hold no {what}, but " if read else "") + f"{what} cannot be ruled out"


def _render(report) -> None:
    from rich import box
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from fusebisect.compare.overflow import INVALID_IDS, iteration_text

    console = common.out()
    what = "abnormal ops (scan)" if report.mode == "scan" else "overflowing ops"
    if report.unreadable:   # never "no overflow" when a record could not be read
        console.print(Text(f"{report.unreadable_summary()}: {_unreadable_consequence(report)}.", style="bold red"))
    elif not report.overflows:
        console.print(Text(f"No {what} found under {report.dump_dir}."))
    for n, ov in enumerate(report.overflows, start=1):
        body = Table.grid(padding=(0, 1))
        body.add_column()
        if report.mode == "scan":
            body.add_row(Text(f"first abnormal tensors at timestamp {ov.timestamp}", style="bold"))
        else:
            words = ov.status_words if len(ov.status_words) > 1 else (ov.status,)   # version 1: four words
            status = ",".join(f"0x{w:x}" for w in words) + (f" ({ov.status})" if len(words) == 1 else "")
            body.add_row(Text(f"[{ov.unit}][Status:{status}]"
                              f"[TaskId:{'invalid' if ov.task_id in INVALID_IDS else ov.task_id}]"
                              f"[StreamId:{'invalid' if ov.stream_id in INVALID_IDS else ov.stream_id}]"
                              + (f"[ContextId:{ov.context_id}]" if ov.context_id is not None else "")
                              + (f"[ThreadId:{ov.thread_id}]" if ov.thread_id is not None else ""), style="bold"))
            body.add_row(f"timestamp {ov.timestamp}")
        for meaning in ov.meanings:
            body.add_row(f" - {meaning}")
        if where := iteration_text(ov.iteration):
            body.add_row(f"dumped on: {where}")
        if ov.pass_names:
            body.add_row(f"fusion rules: {', '.join(ov.pass_names)}")
        if ov.original_ops:
            body.add_row(f"original ops: {', '.join(ov.original_ops)}")
        elif ov.output_origins:   # the dump names one origin per output, not every op a fused op replaced
            label = "output's origin" if len(ov.output_origins) == 1 else "outputs' origins"
            body.add_row(f"{label}: {', '.join(ov.output_origins)}")
        if ov.inputs or ov.outputs:
            table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
            for col in ("tensor", "shape", "dtype", "min", "max", "mean"):
                table.add_column(col, justify="left" if col in ("tensor", "dtype") else "right", no_wrap=True)
            table.add_column("NaN/+Inf/ -Inf/65504", justify="right")  # header may wrap, values stay whole
            errors = []
            for st in ov.inputs + ov.outputs:
                if st.error:   # its reason under the table: in a cell it squeezed every column
                    table.add_row(f"{st.kind} {st.index}", "x".join(map(str, st.shape)) or "scalar", st.dtype, "-",
                                  "-", "-", "not read", style="yellow")
                    errors.append(st.error if st.error.startswith(f"{st.kind} {st.index}")
                                  else f"{st.kind} {st.index}: {st.error}")
                    continue
                table.add_row(f"{st.kind} {st.index}", "x".join(map(str, st.shape)) or "scalar", st.dtype,
                              fmt_number(st.min, 5), fmt_number(st.max, 5), fmt_number(st.mean, 5),
                              f"{st.nan}/{st.pos_inf}/{st.neg_inf}/{st.saturated}",
                              style="red" if st.abnormal else None)
            body.add_row(table)
            for error in errors:
                body.add_row(Text(error, style="yellow"))
        if ov.dump_file:
            body.add_row(Text(f"dump: {_rel(ov.dump_file, report.dump_dir)}", style="dim", overflow="fold"))
        body.add_row(Text(f"=> {ov.diagnosis}", style="bold cyan"))
        title = f"[{ov.op_index or n}] [{ov.op_type}] {ov.op_name}"
        console.print(Panel(body, title=Text(title), title_align="left", expand=False))   # (names are not markup)
    if report.limit_text():
        console.print(report.limit_text())


def register(app: typer.Typer) -> None:
    """Add the top-level ``overflow`` command to ``app``."""

    @app.command("overflow", help=HELP)
    def overflow(
        dump_dir: Annotated[Path, typer.Argument(help="Dump directory (dump_path root, timestamp dir or leaf dir).",
                                                 show_default=False)],
        graph: Annotated[Optional[Path], typer.Option("--graph", "-g",
                                                      help="GE graph (ge_proto txt/json/pb, or a dir of Build graphs)"
                                                           ": adds op types, fusion rules and original ops.")] = None,
        limit: Annotated[int, typer.Option("--limit", "-l", help="How many overflowing ops to explain.")] = 5,
        json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result on stdout.")] = False,
        scan: Annotated[bool, typer.Option("--scan", help="No Opdebug records: scan ordinary dumps for "
                                                          "NaN/Inf/float16 65504.")] = False,
        html_out: Annotated[Optional[Path], typer.Option("--html", help="Write a self-contained HTML report.")
                            ] = None,
    ) -> None:
        from fusebisect.compare.overflow import analyse
        from fusebisect.fsutil import check_output_file, refuse_inside_inputs

        refuse_inside_inputs(html_out, "--html", [dump_dir, graph])
        check_output_file(html_out, "--html")
        on_stdout = common.stdout_outputs([("--html", html_out)], json_out)
        from fusebisect.rules.catalog import default_catalog

        locked = frozenset(r.name for r in default_catalog().rules.values() if not r.can_disable)
        report = analyse(dump_dir, graph=graph, limit=limit, scan=scan, locked=locked)
        for path, message in report.problems:
            common.log(f"warning: {path}: {message}")
        for note in report.notes:
            common.log(note)
        if html_out is not None:
            from fusebisect.fsutil import atomic_write_text
            from fusebisect.report.html import render_overflow
            atomic_write_text(html_out, render_overflow(report.to_json()["overflows"], dump_dir=str(dump_dir),
                                                        unreadable=report.unreadable_summary(),
                                                        notes=report.notes, shown=report.limit_text()))
            common.log_wrote(html_out)
        if json_out:
            common.print_json(report.to_json())
        elif not on_stdout:   # (the HTML is on stdout: the panels are not printed after it)
            _render(report)
        if report.unreadable and not report.total:
            raise DumpFormatError(f"{report.unreadable_summary()}: {_unreadable_consequence(report)}")
        raise typer.Exit(1 if report.total else 0)
