"""``fusebisect demo``: watch fusebisect find a guilty fusion rule in a simulated Ascend training job.

The target is ``fusebisect.sim`` (a numpy simulator of a CANN training job, for demos and tests): one of its
fusion rules is made faulty, and a complete ``fusebisect run`` searches for it with the chosen oracle.
"""

from __future__ import annotations

import functools
import os
import random
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer

from fusebisect.cli import common
from fusebisect.errors import UsageError

HELP = """Run a complete fusebisect search against the built-in SIMULATED training job (fusebisect.sim).

A seeded faulty fusion rule (--faulty NAME, else a random one of the simulator's real CANN rule names) makes the
simulated loss drift; fusebisect finds it, verifies the production fusion_switch.cfg and prints the report.
--mode picks the oracle: metric (the loss printed by the job), dumps (tensor dumps compared with the all-off
reference, fused ops mapped through the GE graphs), or check (a separate check command, git-bisect exit codes).

Example:  fusebisect demo --mode dumps --faulty LayerNormFusionPass --workdir demo-work
"""

MODES = ("metric", "dumps", "check")


def demo_rules() -> list[str]:
    """The simulated rules a demo can make faulty: on by default and allowed to be switched off."""
    from fusebisect.rules.catalog import default_catalog
    from fusebisect.sim import RULES

    catalog = default_catalog()
    usable = []
    for name in RULES:
        rule = catalog.get(name)
        if rule is not None and rule.can_disable and rule.default == "on":
            usable.append(name)
    return usable


def fault_shows(faulty: str, steps: int) -> bool:
    """True when making ``faulty`` faulty changes the simulated job's loss at all (with every rule at its
    default). Some simulated faults never trigger in this small job (a float16 Square that never reaches 65504)."""
    return _sim_losses(faulty, steps) != _sim_losses(None, steps)


@functools.lru_cache(maxsize=None)
def _sim_losses(faulty: str | None, steps: int) -> tuple[float, ...]:
    """The simulated job's losses with every rule at its default and ``faulty`` (if any) faulty; the fault-free
    run is the same for every rule probed, so it runs once."""
    import io

    from fusebisect.sim.options import resolve
    from fusebisect.sim.train import run

    with tempfile.TemporaryDirectory(prefix="fusebisect-demo-probe-") as work:
        opts = resolve(["--steps", str(steps), "--seed", "0", *(["--faulty", faulty] if faulty else [])],
                       {"ASCEND_WORK_PATH": work})
        return tuple(run(opts, stdout=io.StringIO(), stderr=io.StringIO()).losses)


def choose_faulty(usable: list[str], seed: int | None, steps: int) -> str:
    """A random rule of ``usable`` (seeded) whose fault this job shows: the others would leave nothing to find."""
    order = list(usable)
    random.Random(seed).shuffle(order)
    return next((r for r in order if fault_shows(r, steps)), order[0])


def demo_verdict(faulty: str, culprits: list[dict], *, shows: bool = True) -> str:
    """The demo's verdict on the culprit sets named: the faulty rule alone is correct; so is the faulty rule in
    one interaction set (the rules it needs on to take effect, e.g. a pass that fuses what another pass built);
    and so is naming nothing when the fault does not show in this job (``shows`` False)."""
    sets = [list(c.get("rules", [])) for c in culprits]
    if not sets and not shows:
        return "[green]correct[/green] (the fault does not change this job: there was nothing to find)"
    if sets == [[faulty]]:
        return "[green]correct[/green]"
    if len(sets) == 1 and faulty in sets[0]:
        others = ", ".join(r for r in sets[0] if r != faulty)
        return (f"[green]correct[/green] (named together with {others}: the symptom shows only while both are on, "
                f"so either one off fixes it)")
    return "[red]wrong[/red]"


def demo_options(mode: str, faulty: str, workdir: Path, *, steps: int, seed: int):
    """The RunOptions of a demo run (the same ones a user would pass to ``fusebisect run``)."""
    from fusebisect.runner.session import RunOptions

    command = [sys.executable, "-m", "fusebisect.sim", "train", "--faulty", faulty, "--steps", str(steps),
               "--seed", str(seed)]
    kwargs: dict = {}
    if mode == "metric":
        kwargs = {"metric": r"loss ([0-9.]+)", "metric_mode": "curve", "rtol": 1e-3}
    elif mode == "dumps":
        command += ["--dump-step", "0"]
        kwargs = {"dumps": True}
    else:
        # the reference curve is the job's own with correct kernels: the same seed (data and weights) and steps
        kwargs = {"check": shlex.join([sys.executable, "-m", "fusebisect.sim", "check", "--rtol", "1e-3",
                                       "--seed", str(seed), "--steps", str(steps)])}
    return RunOptions(command=command, workdir=workdir, fresh=True, **kwargs)


def register(app: typer.Typer) -> None:
    @app.command("demo", help=HELP)
    def demo(
        faulty: Annotated[Optional[str], typer.Option(help="The simulated rule to make faulty (default: random).")
                          ] = None,
        mode: Annotated[str, typer.Option(help="Oracle: metric, dumps or check.")] = "metric",
        workdir: Annotated[Optional[str], typer.Option(help="Keep the run here (journal, trials, reports; a run "
                                                            "there before is moved to previous/); default: a "
                                                            "temporary dir removed at the end.")
                           ] = None,
        steps: Annotated[int, typer.Option(help="Training steps of the simulated job.")] = 20,
        seed: Annotated[Optional[int], typer.Option(
            help="Seed for the choice of the faulty rule, and of the simulated job's data and weights.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the run JSON on stdout.")] = False,
    ) -> None:
        from fusebisect.cli.cmd_run import run_session
        from fusebisect.runner.result import render_report

        if mode not in MODES:
            raise UsageError(f"--mode {mode!r}: choose one of {', '.join(MODES)}")
        if workdir is not None and not workdir.strip():   # an unset $WORKDIR in a script: not the current directory
            raise UsageError("--workdir: empty path")
        if seed is not None and seed < 0:
            raise UsageError(f"--seed must be >= 0, got {seed}")
        usable = demo_rules()
        if faulty is None:
            faulty = choose_faulty(usable, seed, steps)
        elif faulty not in usable:
            from fusebisect.sim import RULES

            why = "is not simulated" if faulty not in RULES else "cannot be switched off or is off by default"
            raise UsageError(f"--faulty {faulty}: {why}; choose one of {', '.join(usable)}")
        shows = fault_shows(faulty, steps)
        if not shows:
            common.log(f"[yellow]warning:[/yellow] the fault of {faulty} does not change this simulated job's loss: "
                       "there is nothing to find (expect not_reproduced)", markup=True)
        from rich.markup import escape

        keep = workdir is not None
        root = Path(workdir) if keep else Path(tempfile.mkdtemp(prefix="fusebisect-demo-"))
        common.log(f"[bold]fusebisect demo[/bold]: the SIMULATED job has a faulty fusion rule (hidden from the "
                   f"search: {faulty}); oracle: {mode}; workdir: {escape(str(root))}", markup=True)
        # the simulator also reads FUSEBISECT_SIM_* (flaky runs, crashes, overflow...): left over from
        # experiments with it, they would change the job the demo describes
        env = {k: v for k, v in os.environ.items() if not k.startswith("FUSEBISECT_SIM_")}
        dropped = sorted(set(os.environ) - set(env))
        if dropped:
            common.log(f"(the demo's job ignores {', '.join(dropped)}: its options set the simulated job)")
        try:
            opts = demo_options(mode, faulty, root, steps=steps, seed=seed or 0)
            res, (html_path, md_path) = run_session(opts, env=env)
            if as_json:
                common.print_json({**res.run_json, "demo": {"faulty": faulty, "mode": mode}})
            else:
                render_report(common.out(), res.run_json, res.notes, workers=opts.workers, repeat=opts.repeat)
                if res.run_json.get("switch_file"):
                    common.out().print(Path(res.run_json["switch_file"]).read_text(encoding="utf-8"), end="",
                                       markup=False, highlight=False)
                culprits = res.run_json.get("culprits", [])
                found = [r for c in culprits for r in c.get("rules", [])]
                common.out().print(f"demo: the faulty rule was {faulty}; fusebisect named "
                                   f"{', '.join(found) or 'nothing'}: {demo_verdict(faulty, culprits, shows=shows)}",
                                   markup=True)
                if keep:
                    common.out().print(f"reports: {html_path} and {md_path}", soft_wrap=True)
                else:
                    common.out().print("(the paths above are in a temporary workdir, deleted now: use --workdir DIR "
                                       "to keep the journal, the production file and the HTML/Markdown reports)")
            raise typer.Exit(res.exit_code)
        finally:
            if not keep:
                shutil.rmtree(root, ignore_errors=True)
