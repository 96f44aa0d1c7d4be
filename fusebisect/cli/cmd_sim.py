"""``fusebisect sim train``: the simulated Ascend training job (a simulator for demos and tests).

The options are parsed by the simulator itself (``python -m fusebisect.sim train`` runs the same code), so both
entry points accept exactly the same flags.
"""

from __future__ import annotations

import typer

from fusebisect.cli.common import group


def register(app: typer.Typer) -> None:
    """Add the ``sim`` group with its ``train`` command to ``app``."""
    sim = group(app, "sim", "A SIMULATED Ascend training target for demos and tests (numpy only, no NPU).")

    @sim.command(
        "train",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
        help=("Run the SIMULATED training job (for demos and tests; not an NPU job). Prints 'step N loss X'.\n\n"
              "Same flags as 'python -m fusebisect.sim train'; see 'fusebisect sim train --help'.\n\n"
              "Example: fusebisect sim train --faulty LayerNormFusionPass --fusion-switch-file off.cfg"),
    )
    def train(ctx: typer.Context) -> None:
        from fusebisect.sim.cli import main

        code = main(["train", *ctx.args])
        if code:
            raise typer.Exit(code)
