"""``fusebisect rules fired``: which fusion rules took effect in a compile (thin CLI over ``rules.fired``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fusebisect.cli import common

HELP = """List the fusion rules that fired: rules with effect_times > 0 in fusion_result.json, plus the
pass_name (graph fusion) and pass_name_ub (UB fusion) attrs on ops of Build-stage graph dumps. PATH is a
fusion_result.json, a graph file, or a directory searched recursively for both (e.g. $ASCEND_WORK_PATH).

--json prints {"rules":[{"name","kind","effect_times","match_times"}]}.

Example: fusebisect rules fired ./ascend_work --json
"""


def register(app: typer.Typer) -> None:
    """Add ``fired`` to the shared ``rules`` group of ``app``."""
    rules = common.group(app, "rules", "Browse the fusion-rule catalog and the rules that fired.")

    @rules.command("fired", help=HELP)
    def fired_cmd(
        path: Annotated[Path, typer.Argument(help="fusion_result.json, a graph dump, or a directory.",
                                             show_default=False)],
        json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result on stdout.")] = False,
    ) -> None:
        from fusebisect.rules.fired import fired_rules

        unreadable: list[str] = []
        found = fired_rules(path, unreadable=unreadable)
        for problem in unreadable:
            common.log(f"warning: skipped {problem}")
        if json_out:
            common.print_json({"rules": [{"name": s.name, "kind": s.kind, "effect_times": s.effect_times,
                                          "match_times": s.match_times,
                                          "repository_hit_times": s.repository_hit_times,
                                          "graphs": len(s.graphs)} for s in found.values()],
                               "unreadable": unreadable})
            return
        from rich.table import Table

        columns = ("kind", "effect", "match", "repo hits", "graphs")
        rows = [(s.name, s.kind, str(s.effect_times), str(s.match_times), str(s.repository_hit_times),
                 str(len(s.graphs))) for s in found.values()]
        # the short columns, kept whole, with the padding and rules of all six
        short = sum(max([len(col), *(len(row[i]) for row in rows)]) for i, col in enumerate(columns, 1)) + 17
        longest = max([len("name"), *(len(row[0]) for row in rows)])
        console = common.out()
        # a pipe or file: whole lines, so `rules fired | grep NAME` sees every name; a terminal too narrow for 12
        # characters of a name beside the short columns: the table as wide as that (the terminal wraps its lines)
        least = longest if not console.is_terminal else min(longest, 12)
        if console.width < least + short:
            console = common.out(least + short)
        table = Table(show_edge=False)
        table.add_column("name", overflow="fold")
        for col in columns:
            table.add_column(col, no_wrap=True, justify="left" if col == "kind" else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)
        common.log(f"{len(found)} rules fired")
