"""``fusebisect run -- CMD``: find the fusion rule(s) that make CMD bad, in the fewest executions.

Thin edge over :mod:`fusebisect.runner.session`: parse flags, run the session, print the report (stdout) or the
run JSON (``--json``), exit 0 when a culprit was found, 1 otherwise, 2 on usage errors, 130 on Ctrl-C, 143 on SIGTERM.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from fusebisect.cli import common
from fusebisect.errors import UsageError

HELP = """Find the fusion rule(s) that make CMD bad, in the fewest runs of CMD.

Each run of CMD gets FUSEBISECT_SWITCH_FILE (its configuration's fusion_switch.cfg; pass it to your framework,
e.g. torchair's fusion_config.fusion_switch_file), FUSEBISECT_TRIAL_DIR (a fresh dir), FUSEBISECT_DUMP_DIR,
ASCEND_WORK_PATH and DUMP_GE_GRAPH/DUMP_GRAPH_LEVEL/DUMP_GRAPH_PATH; {switch_file}, {trial_dir} and {dump_dir}
in CMD's arguments are replaced.

Verdict: CMD's exit status by default (0 good, 125 skip, 1-127 bad); --metric compares a number from the output
with the all-rules-off reference run (or --expect); --check runs a second command (git bisect run's exit codes;
outside 0-127 aborts); --dumps compares dumps with the reference run's. Several oracles combine: any skip ->
skip, else any bad -> bad. Under --metric/--check/--dumps a crash, timeout or missing metric is a skip.

Rerunning the same command in the same --workdir resumes; --fresh starts over.

Example:  fusebisect run --metric 'loss ([0-9.]+)' -- python train.py --steps 50
"""


def _split_csv(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",")]
    if not any(items):
        raise UsageError("--devices: give device ids, e.g. --devices 0,1,2,3")
    if not all(items):   # "0,,1": a slip, not two devices
        raise UsageError(f"--devices {value}: an empty device id; give ids such as 0,1,2,3")
    return items  # (ids are checked by the runner)


def _rewrite_set_aside_reports(where) -> None:
    """The reports --fresh set aside name the workdir's paths, which the new run fills: they are written again
    from the run's journal there, with the paths where its files are now (right after the move, before any
    new run)."""
    from fusebisect.errors import FusebisectError
    from fusebisect.report import write_run_reports

    if where is None or not ((where / "report.html").exists() or (where / "report.md").exists()):
        return
    try:
        write_run_reports(where)
    except (FusebisectError, OSError) as exc:   # (no journal there: files of the user's, left as they are)
        common.log(f"note: the reports set aside in {where} were left as they were ({exc})")


def run_session(opts, env: dict | None = None):
    """Run a search session with progress on stderr, then write its report.html/report.md. ``env``: the jobs'
    environment (default: this process's).

    Returns (SessionResult, (html path, markdown path)); Ctrl-C exits 130, SIGTERM 143, with the journal kept."""
    from fusebisect.report import write_run_reports
    from fusebisect.runner.session import Interrupted, Progress, Session, Terminated, sigterm_as_interrupt

    reports, writing = [], []

    def finish(_result) -> None:   # the reports, written before the workdir's lock is released
        writing.append(True)
        with sigterm_as_interrupt():
            reports.append(write_run_reports(session.workdir))

    session = Session(opts, env=env, progress=Progress(quiet=common.state.quiet, verbose=common.state.verbose),
                      on_set_aside=_rewrite_set_aside_reports, on_finish=finish)
    try:
        res = session.run()
        return res, reports[0]
    except Interrupted as exc:
        print(f"fusebisect: {exc}", file=sys.stderr)
        raise typer.Exit(exc.exit_code)
    except KeyboardInterrupt as exc:   # the verdict is written: only the reports are missing
        if not writing:   # (before the search began: as any other interruption)
            raise
        terminated = isinstance(exc, Terminated)
        print(f"fusebisect: {'terminated (SIGTERM)' if terminated else 'interrupted'} while writing the reports; "
              f"the verdict is in {session.workdir / 'result.json'}. Rerun the same command to write them (it "
              f"runs nothing more).", file=sys.stderr)
        raise typer.Exit(143 if terminated else 130) from None


def register(app: typer.Typer) -> None:
    @app.command("run", help=HELP, context_settings={"allow_interspersed_args": False})
    def run(
        command: Annotated[Optional[List[str]], typer.Argument(help="CMD and its arguments, after --.",
                                                                show_default=False)] = None,
        metric: Annotated[Optional[str], typer.Option(help="Regex with one capture group: the number to compare "
                                                           "(e.g. 'loss ([0-9.]+)').")] = None,
        metric_mode: Annotated[Optional[str], typer.Option(help="--metric: last (default): the last match; "
                                                                "curve: every match, point by point over the "
                                                                "reference's length (a curve that ends earlier "
                                                                "is bad).", show_default=False)] = None,
        rtol: Annotated[Optional[float], typer.Option(help="--metric: relative tolerance (default 0.01).",
                                                      show_default=False)] = None,
        atol: Annotated[Optional[float], typer.Option(help="--metric: absolute tolerance (default 0).",
                                                      show_default=False)] = None,
        expect: Annotated[Optional[float], typer.Option(help="--metric: compare the last match with this value "
                                                             "instead of the reference run (not with curve).")
                          ] = None,
        check: Annotated[Optional[str], typer.Option(help="Command run after each execution (same env): exit 0 "
                                                          "good, 125 skip, 1-127 bad, else abort.")] = None,
        dumps: Annotated[bool, typer.Option("--dumps", help="Compare each run's dumps with the reference run's "
                                                            "(fused ops mapped through the graphs).")] = False,
        cosine: Annotated[Optional[float], typer.Option(help="--dumps: bad below this cosine similarity "
                                                             "(default 0.99).", show_default=False)] = None,
        max_abs_error: Annotated[Optional[float], typer.Option(help="--dumps: bad above this max absolute "
                                                                    "error.")] = None,
        rules: Annotated[Optional[str], typer.Option(help="Candidates: FILE or NAME,NAME,... (default: the rules "
                                                          "that fired in the baseline run).")] = None,
        allow_unknown_rules: Annotated[bool, typer.Option("--allow-unknown-rules", help="--rules may name rules "
                                                          "the catalog does not know (custom fusion passes).")
                                       ] = False,
        repeat: Annotated[int, typer.Option(help="Executions per configuration.")] = 1,
        flaky: Annotated[bool, typer.Option("--flaky", help="The job is noisy: repeat where verdicts are "
                                                            "uncertain, report a confidence.")] = False,
        jobs: Annotated[int, typer.Option("--jobs", "-j", help="Executions in parallel.")] = 1,
        devices: Annotated[Optional[str], typer.Option(help="Device ids (comma-separated): one parallel "
                                                            "execution per device (ASCEND_RT_VISIBLE_DEVICES).")
                           ] = None,
        timeout: Annotated[Optional[float], typer.Option(help="Seconds per execution; the whole process group "
                                                              "is killed and the run is a skip.")] = None,
        no_graph_dump: Annotated[bool, typer.Option("--no-graph-dump", help="Do not set DUMP_GE_GRAPH & co.")
                                 ] = False,
        workdir: Annotated[str, typer.Option(help="Journal, trials and results.")] = "fusebisect-work",
        fresh: Annotated[bool, typer.Option("--fresh", help="Start over: the previous run's journal, result.json, "
                                                            "reports, production switch file, trials and repro dirs "
                                                            "move to WORKDIR/previous/.")] = False,
        output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Production fusion_switch.cfg "
                                                       "(default WORKDIR/fusion_switch.cfg).")] = None,
        no_verify: Annotated[bool, typer.Option("--no-verify", help="Skip the final run with the production "
                                                                    "switch file.")] = False,
        max_runs: Annotated[Optional[int], typer.Option(help="Budget of executions (>= 2), the final verification "
                                                              "run included.")] = None,
        confidence: Annotated[float, typer.Option(help="Minimum confidence to name a culprit, above 0.5 and below "
                                                       "1 (else the verdict is inconclusive).")] = 0.95,
        seed: Annotated[int, typer.Option(help="Seed of the search's tie-breaks.")] = 0,
        as_json: Annotated[bool, typer.Option("--json", help="Print the run JSON on stdout.")] = False,
    ) -> None:
        from fusebisect.runner.result import render_report
        from fusebisect.runner.session import RunOptions

        if not command:
            raise UsageError("no command to run: put it after --, e.g. fusebisect run --metric 'loss ([0-9.]+)' "
                             "-- python train.py")
        if not workdir.strip():   # an unset $WORKDIR in a script: not the current directory
            raise UsageError("--workdir: empty path")
        opts = RunOptions(command=list(command), workdir=Path(workdir), metric=metric, metric_mode=metric_mode,
                          rtol=rtol, atol=atol, expect=expect, check=check, dumps=dumps, cosine=cosine,
                          max_abs_error=max_abs_error, rules=rules, allow_unknown_rules=allow_unknown_rules,
                          repeat=repeat, flaky=flaky, jobs=jobs, devices=_split_csv(devices), timeout=timeout,
                          graph_dump=not no_graph_dump, fresh=fresh, output=output, verify=not no_verify,
                          max_runs=max_runs, seed=seed, confidence=confidence)
        res, reports = run_session(opts)
        if as_json:
            common.print_json(res.run_json)
        else:
            render_report(common.out(), res.run_json, res.notes, workers=opts.workers, repeat=opts.repeat)
            common.out().print(f"reports: {reports[0]} and {reports[1]}", soft_wrap=True)
        raise typer.Exit(res.exit_code)
