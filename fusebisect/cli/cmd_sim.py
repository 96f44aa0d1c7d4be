"""``fusebisect sim train`` / ``sim check``: the simulated Ascend training job (a simulator for demos and tests)
and its accuracy check.

The options are parsed by the simulator itself (``python -m fusebisect.sim train|check`` runs the same code), so
both entry points accept exactly the same flags.
"""

from __future__ import annotations

import typer

from fusebisect.cli.common import group


def register(app: typer.Typer) -> None:
    """Add the ``sim`` group with its ``train`` and ``check`` commands to ``app``."""
    sim = group(app, "sim", "A SIMULATED Ascend training target for demos and tests (numpy only, no NPU).")
    _forward(sim, "train",
             "Run the SIMULATED training job (for demos and tests; not an NPU job). Prints 'step N loss X'.",
             "fusebisect sim train --faulty LayerNormFusionPass --fusion-switch-file off.cfg")
    _forward(sim, "check",
             "The simulated job's accuracy check, for --check: its printed losses against the same model's with "
             "correct kernels; exit 0 good, 1 bad, 125 no losses found.",
             "fusebisect run --check 'fusebisect sim check' -- fusebisect sim train --faulty GeluFusionPass")


def _forward(sim: typer.Typer, name: str, summary: str, example: str) -> None:
    """Add ``sim NAME``: its arguments go unparsed to the simulator's own command line (``python -m
    fusebisect.sim NAME``), whose exit code it keeps."""

    @sim.command(name, context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
                 add_help_option=False,
                 help=(f"{summary}\n\nSame flags as 'python -m fusebisect.sim {name}'; see 'fusebisect sim {name} "
                       f"--help'.\n\nExample: {example}"))
    def forward(ctx: typer.Context) -> None:
        from fusebisect.sim.cli import main

        code = main([name, *ctx.args])
        if code:
            raise typer.Exit(code)
