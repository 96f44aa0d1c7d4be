"""``fusebisect cfg``: write, lint, explain and compare fusion_switch.cfg files (thin CLI over rules.switchfile)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from fusebisect.cli import common
from fusebisect.errors import UsageError

KIND_HELP = "Section for names the catalog lacks (or whose kind is unknown): graph or ub."
JSON_HELP = "Machine-readable result on stdout."
FORCE_HELP = "Replace an existing --out file (the old one is kept as F.bak, or F.bak.N if that exists)."


def _emit(config, out: Optional[Path], force: bool, json_out: bool, warnings: list[str]) -> None:
    from fusebisect.rules.switchfile import config_document, render_switch, write_switch_file

    for w in warnings:
        common.log(f"warning: {w}")
    from fusebisect.fsutil import check_output_file, stream_fd

    written = None
    if out is not None and json_out and stream_fd(Path(out)) == 1:
        raise UsageError(f"--out {out} with --json: both would go to stdout; give --out a file, or drop --json")
    if out is not None:
        check_output_file(out, "--out")
        written = write_switch_file(out, config, force=force)
        common.log_wrote(written)
    if json_out:
        common.print_json({"written": str(written) if written else None, "switch": config_document(config),
                           "warnings": warnings})
    elif written is None:
        common.write_out(render_switch(config))


def _parse_warning_cann_rejects(path: Path):
    """Parse a switch file; warn (stderr) for each comment or trailing comma fusebisect reads but CANN's JSON
    parser rejects: what is shown for such a file is not what CANN would do with it."""
    from fusebisect.rules.switchfile import parse_switch_file

    config = parse_switch_file(path)
    for where in config.lenient:
        common.log(f"warning: {path}:{where}: CANN's JSON parser rejects this, so CANN would not read the file as "
                   f"shown here (`fusebisect cfg check {path}`)")
    return config


# `cfg effective`'s table: its effective column (as wide as its header) with the padding and rules of the three
# columns; the least the why column gets in a terminal, and what it gets beside whole names in a pipe
_EFFECTIVE_SHORT = 9 + 8
_WHY_MIN = 24
_WHY_ROOM = 40


# `cfg diff`'s table beside the rule names: kind (11), A and B ("off?", 4 each), the padding and rules of four columns
_DIFF_SHORT = 11 + 4 + 4 + 11


def _state(on: bool) -> str:
    return "on" if on else "off"


def register(app: typer.Typer) -> None:
    """Add the ``cfg`` group (off, all-off, check, effective, diff) to ``app``."""
    cfg = common.group(app, "cfg", "Write, lint and explain fusion_switch.cfg files.")

    @cfg.command("off", help="""Write a switch file that turns RULE... off, each in its catalog section.

Rules of unknown kind go into both sections; names the catalog lacks need --kind. Rules CANN always runs
(forbidden-close, or in its ExceptionalPassOfO1Level list) are written but CANN ignores them (a warning says so). Without --out the file is printed to stdout.

Example: fusebisect cfg off TbeEltwiseFusionPass ConvConcatFusionPass --out fusion_switch.cfg
""")
    def off(
        rules: Annotated[List[str], typer.Argument(help="Rule names (case-sensitive).", show_default=False)],
        out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write the file here.")] = None,
        kind: Annotated[Optional[str], typer.Option("--kind", help=KIND_HELP)] = None,
        force: Annotated[bool, typer.Option("--force", help=FORCE_HELP)] = False,
        json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    ) -> None:
        from fusebisect.rules.catalog import default_catalog
        from fusebisect.rules.switchfile import ALL, off_config, unknown_name, validate_rule_name

        if kind is not None and kind.lower() not in ("graph", "ub", "graphfusion", "ubfusion"):
            raise UsageError(f"--kind {kind!r}: expected graph or ub")
        for name in rules:
            validate_rule_name(name)
        catalog = default_catalog()
        config = off_config(rules, catalog, kind=kind)
        warnings = []
        for name in rules:
            entry = catalog.rules.get(name)
            if entry is not None and entry.spelling_of:
                warnings.append(f"{name} is a listing spelling of {entry.spelling_of}: no pass has this exact name, "
                                f"the entry does nothing (`fusebisect rules show {entry.spelling_of}`)")
            elif entry is not None and not entry.can_disable:
                warnings.append(f"{name} is {entry.always_on}: CANN always runs it, the entry does nothing")
            elif entry is not None and entry.kind == "unknown" and kind is None:
                warnings.append(f"{name}: kind unknown, written to both sections")
            elif entry is None and name != ALL:
                # written under --kind: say so when it is another spelling of a real rule, or of ALL (the key for
                # every pass of a section, which is written as it is)
                _, code, message = unknown_name(name, name, catalog, allow_unknown=False, hint=False)
                if code != "unknown-rule":
                    warnings.append(message[len(name) + 2:] if message.startswith(f"{name}: ") else message)
        _emit(config, out, force, json_out, warnings)

    @cfg.command("all-off", help="""Write a switch file that turns off every rule a switch file can turn off.

ALL: off in both sections, plus an explicit off for each pass CANN's built-in config names "on" (a user ALL does
not override those). Forbidden-close passes and those of CANN's ExceptionalPassOfO1Level list still run. Without --out the file is printed to stdout.

Example: fusebisect cfg all-off --out fusion_off.cfg
""")
    def all_off(
        out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write the file here.")] = None,
        force: Annotated[bool, typer.Option("--force", help=FORCE_HELP)] = False,
        json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    ) -> None:
        from fusebisect.rules.catalog import default_catalog
        from fusebisect.rules.switchfile import all_off_config

        _emit(all_off_config(default_catalog()), out, force, json_out, [])

    @cfg.command("check", help="""Lint a fusion_switch.cfg (JSON or the old Pass:on|off line format).

Reports invalid JSON (with line and column), syntax CANN rejects (comments, trailing commas), invalid keys and
values, unknown rule names with did-you-mean, case mismatches, rules in the wrong section, duplicates, rules that
can never be disabled, and an ALL: off that leaves passes on.

Exit codes: 0 clean (notes only), 1 problems found, 2 unreadable file.

Example: fusebisect cfg check fusion_switch.cfg
""")
    def check(
        file: Annotated[Path, typer.Argument(help="The switch file.", show_default=False)],
        json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
        allow_unknown_rules: Annotated[bool, typer.Option(
            "--allow-unknown-rules", help="Names the catalog lacks are custom or newer passes: a note, not a "
                                          "warning (as run --allow-unknown-rules).")] = False,
    ) -> None:
        from fusebisect.rules.catalog import default_catalog
        from rich.markup import escape

        from fusebisect.rules.switchfile import check_switch_file

        report = check_switch_file(file, default_catalog(), allow_unknown=allow_unknown_rules)
        if json_out:
            common.print_json(report.to_json())
        else:
            console = common.out()
            style = {"error": "red", "warning": "yellow", "info": "dim"}
            for p in report.problems:
                where = escape(f"{file}:{p.line}:{p.column}" if p.line else str(file))
                console.print(f"{where}: [{style[p.severity]}]{p.severity}[/]: {escape(p.message)}", markup=True,
                              highlight=False, soft_wrap=True)
            counts = {s: sum(p.severity == s for p in report.problems) for s in ("error", "warning", "info")}
            verdict = "OK" if report.ok else "problems found"
            console.print(f"{file}: {verdict} ({counts['error']} errors, {counts['warning']} warnings, "
                          f"{counts['info']} notes)", soft_wrap=True, markup=False, highlight=False)
        raise typer.Exit(0 if report.ok else 1)

    @cfg.command("effective", help="""Show whether each rule the file names actually runs, and why.

Follows CANN's precedence: forbidden-close passes and those in an ExceptionalPassOfO1Level list (CANN's or the
file's) always run; an exact name beats ALL; the file's entries beat the built-in config, whose explicit entries
still beat the file's ALL.

Example: fusebisect cfg effective fusion_switch.cfg --rule GridSampler3DFusionPass
""")
    def effective(
        file: Annotated[Path, typer.Argument(help="The switch file.", show_default=False)],
        rule: Annotated[Optional[List[str]], typer.Option("--rule", "-r", help="Only this rule (repeatable).")] = None,
        json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    ) -> None:
        from fusebisect.rules.catalog import default_catalog
        from fusebisect.rules.switchfile import (ALL, PADDED_VALUE, RULE_NAME_RE, explain_state, name_problems,
                                                 validate_rule_name)

        catalog = default_catalog()
        for name in rule or []:   # (the file's own names are shown as they are, valid or not)
            validate_rule_name(name)
        config = _parse_warning_cann_rejects(file)
        # the file's own ExceptionalPassOfO1Level list names rules too: those it keeps on under "ALL": "off"
        kept_on = [n for n in config.o1_exceptions if RULE_NAME_RE.fullmatch(n)]
        names = list(rule) if rule else sorted({*config.mentioned(), *config.ignored, *kept_on} - {ALL})
        notes: dict[str, list[str]] = {name: [why] for name, why in config.ignored.items()}
        for (_sec, name), written in config.padded_values.items():
            notes.setdefault(name, []).append(f"written as {json.dumps(written)}: {PADDED_VALUE}")
        if ALL in config.ignored:
            common.log(f"warning: {file}: {ALL}: {config.ignored[ALL]}")
        for p in name_problems(config, catalog, only=set(names)):
            if p.severity == "warning" and p.rule and p.code not in ("cannot-disable", "own-o1-exception"):
                # (those two are the reason itself)
                # without its "Switch.<section>.<rule>: " label (the row names the rule)
                message = p.message
                for label in (f"Switch.{p.section}.{p.rule}: ", f"{p.rule}: "):
                    if message.startswith(label):
                        message = message[len(label):]
                        break
                notes.setdefault(p.rule, []).append(message)
        for name in rule or []:   # a --rule the catalog does not know: its state says nothing of the rule meant
            if catalog.get(name) is None and name not in notes:
                hints = catalog.suggest(name)
                notes[name] = [f"{name!r} is not in the catalog" + (
                    f"; did you mean {', '.join(repr(h) for h in hints)}?" if hints else
                    " (fine for a custom or newer pass; check the spelling)")]
        rows = []
        for name in names:
            on, why = explain_state(name, config, catalog)
            entry = catalog.rules.get(name)
            # as the file writes it: a padded " on", which CANN reads as off, is not "on"
            in_file = {k: config.padded_values.get((k, name), sec[name])
                       for k, sec in (("GraphFusion", config.graph), ("UBFusion", config.ub)) if name in sec}
            rows.append({"rule": name, "kind": entry.kind if entry else "not in catalog",
                         "in_file": in_file, "effective": _state(on), "reason": why,
                         "notes": list(dict.fromkeys(notes.get(name, [])))})
        all_entries = {k: config.padded_values.get((k, ALL), sec[ALL])
                       for k, sec in (("GraphFusion", config.graph), ("UBFusion", config.ub)) if ALL in sec}
        if json_out:
            common.print_json({"file": str(file), "cann_rejects": config.lenient, "all": all_entries, "rules": rows})
            return
        from rich.markup import escape
        from rich.table import Table
        from rich.text import Text

        console = common.out()
        longest = max([len("rule"), *(len(r["rule"]) for r in rows)])   # (the header is never folded either)
        # In a pipe or file, whole rule names (grep sees a rule with its state) and the why column beside them,
        # however long the name; in a terminal, a name too long to leave the why column its room wraps rather
        # than squeezing the why column (and the notes in it) away.
        width = console.width if console.is_terminal else max(console.width, longest + _EFFECTIVE_SHORT + _WHY_ROOM)
        name_width = min(longest, max(12, width - _EFFECTIVE_SHORT - _WHY_MIN))
        # fixed widths: rich, asked to fit wrapping columns with minimum widths, can make the table wider than the
        # console, which then cuts the why column's lines (words lost at the right edge); a terminal too narrow
        # for them gets the table as wide as they make it (the terminal wraps its lines: nothing is cut)
        why_width = max(_WHY_MIN, width - _EFFECTIVE_SHORT - name_width)
        console = common.out(max(width, name_width + _EFFECTIVE_SHORT + why_width))
        table = Table(title=f"{file}" + (f"  (ALL: {all_entries})" if all_entries else ""), show_edge=False)
        table.add_column("rule", overflow="fold", width=name_width)
        table.add_column("effective", no_wrap=True, width=9)
        table.add_column("why", overflow="fold", width=why_width)
        for r in rows:
            # A name the catalog lacks is off only if CANN has a pass of exactly that name.
            state = r["effective"] + ("?" if r["kind"] == "not in catalog" and r["effective"] == "off"
                                      and r["rule"] != ALL else "")
            why = escape(r["reason"]) + "".join(f"\n[yellow]{escape(n)}[/]" for n in r["notes"])
            table.add_row(r["rule"], state, Text.from_markup(why), style=None if r["effective"] == "off" else "dim")
        if not rows:
            common.log("the file names no rules")
        console.print(table)
        if any(r["notes"] for r in rows):
            common.log(f"`fusebisect cfg check {file}` shows the notes under a rule with their line numbers")

    @cfg.command("diff", help="""Which rules change state between switch files A and B.

Compares the effective state (CANN precedence) of every rule either file names, the built-in entries, and every
catalog rule of a section where either file uses ALL. Exit codes: 0 same effect, 1 differences, 2 error.

Example: fusebisect cfg diff good.cfg bad.cfg
""")
    def diff(
        a: Annotated[Path, typer.Argument(help="First switch file.", show_default=False)],
        b: Annotated[Path, typer.Argument(help="Second switch file.", show_default=False)],
        json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    ) -> None:
        from fusebisect.rules.catalog import default_catalog
        from fusebisect.rules.switchfile import diff_configs

        ca, cb = _parse_warning_cann_rejects(a), _parse_warning_cann_rejects(b)
        changes = diff_configs(ca, cb, default_catalog())
        if json_out:
            common.print_json({"a": str(a), "b": str(b), "cann_rejects": {"a": ca.lenient, "b": cb.lenient},
                               "changes": changes})
        elif not changes:
            common.out().print(f"{a} and {b} switch the same rules.", soft_wrap=True)   # paths never cut
        else:
            from rich.table import Table

            # The files' paths head the table as A and B, so the rule names keep the width (whole, never cut).
            console = common.out()
            longest = max(len(c["rule"]) for c in changes)
            # a pipe or file: whole lines, so `cfg diff | grep NAME` sees every name; a terminal too narrow for 12
            # characters of a name beside the states: the table as wide as that (the terminal wraps its lines)
            least = longest if not console.is_terminal else min(longest, 12)
            if console.width < least + _DIFF_SHORT:
                console = common.out(least + _DIFF_SHORT)
            console.print(f"A: {a}\nB: {b}", markup=False, highlight=False, soft_wrap=True)
            table = Table(show_edge=False)
            table.add_column("rule", overflow="fold")
            for col in ("kind", "A", "B"):
                table.add_column(col, no_wrap=True)
            for c in changes:
                # a name the catalog lacks is off only if CANN has a pass of exactly that name (as `effective`)
                mark = "" if c["in_catalog"] else "?"
                table.add_row(c["rule"], c["kind"], c["a"] + mark * (c["a"] == "off"),
                              c["b"] + mark * (c["b"] == "off"))
            console.print(table)
            # rules, not rows: a name the catalog cannot place is compared in each section it may be in
            names = list(dict.fromkeys(c["rule"] for c in changes))
            unknown = list(dict.fromkeys(c["rule"] for c in changes if not c["in_catalog"]))
            rows = f" in {len(changes)} rows (per section for a name the catalog cannot place)" \
                if len(changes) != len(names) else ""
            common.out().print(f"{len(names)} rules change state{rows}" + (
                f" ({len(unknown)} of them not in the catalog: a custom pass, or a misspelt name that does nothing; "
                "`fusebisect cfg check` says which)." if unknown else "."), soft_wrap=True)
        raise typer.Exit(1 if changes else 0)
