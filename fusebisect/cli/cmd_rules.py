"""``fusebisect rules list`` and ``rules show``: browse the fusion-rule catalog (thin CLI over rules.catalog)."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from fusebisect.cli import common
from fusebisect.errors import UsageError


def register(app: typer.Typer) -> None:
    """Add ``list`` and ``show`` to the shared ``rules`` group of ``app``."""
    rules = common.group(app, "rules", "Browse the fusion-rule catalog and the rules that fired.")

    @rules.command("list", help="""List the catalog's fusion rules, optionally of one kind or matching a text.

--search matches names, spelling variants and descriptions (case-insensitive). --json prints
[{"name","kind","default","can_disable","description"}].

Example: fusebisect rules list --kind ub --search conv
""")
    def list_rules(
        kind: Annotated[Optional[str], typer.Option("--kind", help="graph or ub.")] = None,
        search: Annotated[str, typer.Option("--search", "-s", help="Text to look for.")] = "",
        json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result on stdout.")] = False,
    ) -> None:
        from fusebisect.rules.catalog import default_catalog

        if kind is not None and kind.lower() not in ("graph", "ub", "graphfusion", "ubfusion"):
            raise UsageError(f"--kind {kind!r}: expected graph or ub")
        found = default_catalog().search(search, kind)
        if json_out:
            common.print_json([r.summary() for r in found])
            return
        from rich.table import Table

        table = Table(show_edge=False)
        console = common.out()
        short = 11 + 7 + 11 + 14   # the short columns (kept whole: `rules list | grep` must see them) and padding
        longest = max([len("name"), *(len(r.name) for r in found)])
        # in a pipe, whole lines (grep sees a rule with all its columns); in a terminal, a long name wraps rather
        # than being cut or squeezing the short columns away, and in one too narrow for 12 characters of it beside
        # them the table is as wide as it needs (the terminal wraps its lines: nothing is cut)
        width = console.width if console.is_terminal else longest + short + 120
        name_width = min(longest, max(12, width - short))
        width = max(width, name_width + short)
        console = common.out(width)
        table.add_column("name", overflow="fold", max_width=name_width)
        for col, col_width in (("kind", 11), ("default", 7), ("can disable", 11)):
            table.add_column(col, no_wrap=True, min_width=col_width)
        # the description gets what is left of the terminal
        room = max(0, width - name_width - short)
        if room >= 8:   # else no description column (`rules show NAME` has it)
            table.add_column("description", overflow="ellipsis", no_wrap=True, max_width=room)
        for r in found:
            desc = r.description if len(r.description) <= room else r.description[:max(room - 3, 0)] + "..."
            table.add_row(r.name, r.kind, r.default, "yes" if r.can_disable else "no", *([desc] if room >= 8 else []))
        console.print(table)
        common.log(f"{len(found)} rules")

    @rules.command("show", help="""Show everything the catalog knows about one rule: kind, default, whether a
switch file can disable it, spelling variants, notes and sources. Unknown names get did-you-mean suggestions
(exit 1).

Example: fusebisect rules show TbeEltwiseFusionPass
""")
    def show(
        name: Annotated[str, typer.Argument(help="Rule name (case-sensitive).", show_default=False)],
        json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result on stdout.")] = False,
    ) -> None:
        import dataclasses

        from fusebisect.rules.catalog import default_catalog
        from fusebisect.rules.switchfile import validate_rule_name

        validate_rule_name(name)
        catalog = default_catalog()
        rule = catalog.get(name)
        if rule is None:
            hints = catalog.suggest(name)
            print(f"fusebisect: no rule {name!r} in the catalog"
                  + (f"; did you mean {', '.join(hints)}?" if hints else ""), file=sys.stderr)
            raise typer.Exit(1)
        if rule.name != name:
            common.log(f"{name} is a spelling of {rule.name}; CANN matches exact names")
        data = dataclasses.asdict(rule)
        if json_out:
            common.print_json(data)
            return
        console = common.out()
        console.print(f"[bold]{rule.name}[/bold]", highlight=False, markup=True)
        for key in ("kind", "kind_note", "default", "can_disable", "o1_exception", "builtin_switch", "spelling_of",
                    "description"):
            value = data[key]
            if value in (None, ""):
                continue
            console.print(f"  {key}: {value}", highlight=False, markup=False)
        for key in ("aliases", "notes", "sources"):
            if data[key]:
                console.print(f"  {key}:", highlight=False)
                for item in data[key]:
                    # names, source paths and URLs are never broken (copyable, greppable); notes are prose
                    console.print(f"    - {item}", highlight=False, markup=False, soft_wrap=key != "notes")
