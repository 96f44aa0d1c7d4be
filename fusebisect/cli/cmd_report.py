"""``fusebisect report WORKDIR``: re-render a finished or interrupted run from its journal."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from fusebisect.cli import common
from fusebisect.fsutil import real_path

HELP = """Re-render a finished or interrupted run from its journal (WORKDIR/journal.jsonl).

Terminal report by default; --json prints the run JSON; --html FILE writes the self-contained HTML report
(plots inline, no network); --markdown FILE writes the Markdown report.

Example:  fusebisect report fusebisect-work --html report.html
"""


def _partial_run_json(view, workdir: Path) -> dict:
    """The run JSON of a run that has no result yet (interrupted, or still running): what was judged so far, with
    the keys of a finished run's JSON; ``status`` is "running" and what only the end decides is null."""
    from fusebisect.report.model import unfinished_text
    from fusebisect.runner.result import json_metric

    return {
        "status": "running",
        "message": unfinished_text(view),   # still going (its pid), or interrupted: as the Markdown and HTML say
        # an integer ('?' only in the instant between taking the workdir's lock and writing the pid in it)
        "running_pid": int(view.holder) if view.holder and view.holder.isdigit() else view.holder,
        "culprits": [],
        "executions": len(view.trials),
        "engine_executions": None,
        "bound": None,
        "candidates": len(view.candidates),
        "candidate_rules": list(view.candidates),
        "switch_file": None,
        "verify": None,
        "trials": [{"index": t.number, "config_off": t.off, "outcome": t.outcome, "metric": json_metric(t.metric),
                    "seconds": t.seconds, "role": t.role, "reason": t.reason, "trial_dir": t.trial_dir}
                   for t in view.trials],
        "unjudged": list(view.unjudged),
        "repro": None,
        "excluded": list(view.excluded),
        "notes": [],
        "switch_ignored": sorted({r for t in view.trials for r in t.ignored}),
        "prior": view.priors[-1] if view.priors else None,
        "journal": str(workdir.absolute() / "journal.jsonl"),
    }


def register(app: typer.Typer) -> None:
    @app.command("report", help=HELP)
    def report(
        workdir: Annotated[Path, typer.Argument(help="The --workdir of a fusebisect run.")] = Path("fusebisect-work"),
        as_json: Annotated[bool, typer.Option("--json", help="Print the run JSON.")] = False,
        html: Annotated[Optional[Path], typer.Option("--html", help="Write the HTML report here.")] = None,
        markdown: Annotated[Optional[Path], typer.Option("--markdown", help="Write the Markdown report here.")
                            ] = None,
    ) -> None:
        from fusebisect.fsutil import atomic_write_text
        from fusebisect.report.html import render_run
        from fusebisect.report.markdown import render_run_markdown
        from fusebisect.report.model import load_run_view, production_cfg_text
        from fusebisect.rules.catalog import default_catalog
        from fusebisect.runner.result import render_report

        from fusebisect.errors import UsageError
        from fusebisect.fsutil import check_output_file

        from fusebisect.runner.validation import workdir_clash

        home = real_path(workdir)
        for flag, out in (("--html", html), ("--markdown", markdown)):
            check_output_file(out, flag)
            if out is None:
                continue
            # resolved: w/../w/journal.jsonl, a linked workdir. The same places run --output may not be (its
            # .lock, which a running run holds; previous/, the runs --fresh kept), and its fusion_switch.cfg
            clash = workdir_clash(home, real_path(out)) or \
                ("the run's own fusion_switch.cfg" if real_path(out) == home / "fusion_switch.cfg" else None)
            if clash:
                raise UsageError(f"{flag} {out}: that is {clash}")
        common.stdout_outputs([("--html", html), ("--markdown", markdown)], as_json)
        if html is not None and markdown is not None and real_path(html) == real_path(markdown):
            raise UsageError(f"--html and --markdown name the same file {html}: the second would replace the first")
        view = load_run_view(workdir)
        production = (view.result or {}).get("switch_file")
        for flag, out in (("--html", html), ("--markdown", markdown)):
            if out is not None and production and real_path(out) == real_path(production):
                raise UsageError(f"{flag} {out}: that is the run's production switch file")
        run_json = dict(view.result) if view.result else _partial_run_json(view, Path(workdir))
        cfg = production_cfg_text(view)
        if html is not None:
            atomic_write_text(html, render_run(view, catalog=default_catalog(), production_cfg=cfg))
            common.log_wrote(html)
        if markdown is not None:
            atomic_write_text(markdown, render_run_markdown(view, catalog=default_catalog(), production_cfg=cfg))
            common.log_wrote(markdown)
        if as_json:
            common.print_json(run_json)
        elif html is None and markdown is None:
            render_report(common.out(), run_json, workers=view.workers, repeat=view.repeat)
        raise typer.Exit(0 if run_json.get("status") == "found" else 1)
