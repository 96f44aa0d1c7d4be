"""``fusebisect inspect graph``: show the ops of a GE graph dump and the fusion passes behind them (thin CLI
over ``compare.graph``)."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from fusebisect.cli import common
from fusebisect.errors import UsageError

HELP = """Show the ops of a GE graph dump: type, graph-fusion pass names, UB pass name, original ops, inputs,
and outputs with their origin tensors. FILE is a ge_proto_*.txt, an atc JSON, a binary .pb, or a directory
(its Build-stage graphs, merged).

Without --op: one line per op, fused ops highlighted (--fused for those only). With --op: that op in detail;
an unknown name exits 1 with close names. --json prints
{"name","type","id","graph","pass_names","ub_pass_name","original_op_names","original_op_types","fusion_scope",
"multi_op","l1_fusion_sub_graph_no","inputs","outputs":[{"index","origin_name","origin_output_index",
"origin_format","origin_shape"}]} for --op, or
{"path","graphs","op_count","fused_count","ops":[...]} for the whole graph.

Example: fusebisect inspect graph dump/ge_proto_00000287_Build.txt --op conv1_fused
"""


def op_json(op) -> dict:
    """Return the JSON object for one op (the shape documented in the command help)."""
    return {
        "name": op.name,
        "type": op.type,
        "id": op.id,
        "graph": op.graph,
        "pass_names": list(op.pass_names),
        "ub_pass_name": op.ub_pass_name,
        "original_op_names": list(op.original_op_names),
        "original_op_types": list(op.original_op_types),
        "fusion_scope": op.fusion_scope,
        "multi_op": bool(op.is_multiop),
        "l1_fusion_sub_graph_no": op.l1_fusion_sub_graph_no or None,
        "inputs": list(op.inputs),
        "outputs": [
            {"index": o.index, "origin_name": o.origin_name, "origin_output_index": o.origin_output_index,
             "origin_format": o.origin_format,
             "origin_shape": list(o.origin_shape) if o.origin_shape is not None else None}
            for o in op.outputs
        ],
    }


def find_op(graph, name: str):
    """Return (op or None, suggestions): exact name, else the one op whose dump-file spelling ('.', '/', '\\'
    and spaces as '_') equals ``name``; suggestions are close or containing names."""
    from fusebisect.compare.mapping import dump_file_spelling

    op = graph.op(name)
    if op is not None:
        return op, []
    mangled = [o for o in graph.ops if dump_file_spelling(o.name) == dump_file_spelling(name)]
    if len({o.name for o in mangled}) == 1:   # one name (in one graph, or in a loop's body and cond)
        return mangled[0], []
    names = list(dict.fromkeys(o.name for o in graph.ops))
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.6)
    low = name.lower()
    containing = [n for n in names if low in n.lower() or low in dump_file_spelling(n).lower()]
    hints = list(dict.fromkeys(close + [o.name for o in mangled] + containing[:5]))[:8]
    return None, hints


def _render_op(op) -> None:
    from rich.table import Table

    from rich.markup import escape

    console = common.out()
    console.print(f"[bold]{escape(op.name)}[/bold]  type {escape(op.type)}  id {op.id if op.id is not None else '-'}  "
                  f"graph {escape(str(op.graph))}", markup=True)
    console.print(f"  graph-fusion passes : {', '.join(op.pass_names) or '-'}")
    console.print(f"  UB-fusion pass      : {op.ub_pass_name or '-'}")
    if op.fusion_scope is not None:
        console.print(f"  fusion_scope        : {op.fusion_scope}")
    originals = op.original_op_names
    types = op.original_op_types
    if originals:
        shown = [f"{n} ({types[i]})" if i < len(types) and types[i] else n for i, n in enumerate(originals)]
        console.print(f"  original ops        : {', '.join(shown)}")
    else:
        console.print("  original ops        : -")
    if op.is_multiop:
        console.print("  multi-op            : yes (one original op split into several)")
    if op.l1_fusion_sub_graph_no:
        console.print(f"  L1 fusion sub-graph : {op.l1_fusion_sub_graph_no}")
    console.print("  inputs              : " + (", ".join(
        f"{i} (control)" if i.endswith(":-1") else i for i in op.inputs) or "-"))
    if op.outputs:
        table = Table(show_edge=False, title="outputs", title_justify="left")
        for col in ("index", "origin op", "origin index", "origin format", "origin shape"):
            table.add_column(col, no_wrap=True)
        for o in op.outputs:
            table.add_row(str(o.index), o.origin_name or "-",
                          str(o.origin_output_index) if o.origin_output_index is not None else "-",
                          o.origin_format or "-", str(list(o.origin_shape)) if o.origin_shape is not None else "-")
        console.print(table)
    else:
        console.print("  outputs             : -")


def _render_list(graph, ops, limit: int) -> None:
    from rich.table import Table

    table = Table(show_edge=False)
    for col in ("id", "name", "type", "graph-fusion passes", "UB pass", "originals"):
        table.add_column(col, no_wrap=col in ("id", "type"), overflow="fold")
    shown = ops if limit <= 0 else ops[:limit]
    for op in shown:
        style = "bold yellow" if op.is_fused else None
        table.add_row(str(op.id) if op.id is not None else "-", op.name, op.type, ", ".join(op.pass_names) or "",
                      op.ub_pass_name or "", str(len(op.original_op_names)) if op.original_op_names else "",
                      style=style)
    common.print_table(table)
    if len(shown) < len(ops):
        common.log(f"showing {len(shown)} of {len(ops)} ops (--limit 0 shows all)")


def register(app: typer.Typer) -> None:
    """Add ``graph`` to the shared ``inspect`` group of ``app``."""
    group = common.group(app, "inspect", "Look inside CANN artifacts (dump files, graphs).")

    @group.command("graph", help=HELP)
    def graph_cmd(
        file: Annotated[Path, typer.Argument(help="Graph file (ge_proto txt, atc JSON, .pb) or dump directory.",
                                             show_default=False)],
        op: Annotated[Optional[str], typer.Option("--op", help="Show this op in detail.")] = None,
        fused: Annotated[bool, typer.Option("--fused", help="List only fused ops.")] = False,
        limit: Annotated[int, typer.Option("--limit", help="Rows in the printed op list (0 = all; --json lists "
                                                           "every op).")] = 500,
        json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result on stdout.")] = False,
    ) -> None:
        from fusebisect.compare.graph import load_graph

        if limit < 0:
            raise UsageError(f"--limit must be 0 (all) or more, got {limit}")
        graph = load_graph(file)
        if op is not None:
            found, hints = find_op(graph, op)
            if found is None:
                print(f"fusebisect: no op {op!r} in {file}" + (f"; did you mean {', '.join(hints)}?" if hints else ""),
                      file=sys.stderr)
                if json_out:
                    common.print_json({"name": op, "found": False, "suggestions": hints})
                raise typer.Exit(1)
            if found.name != op:
                common.log(f"{op} matched op {found.name} (a dump file name writes '.', '/', '\\' and spaces as '_')")
            same = [o for o in graph.ops if o.name == found.name]
            if json_out:
                others = [o for o in same if o is not found]   # the table shows each: so does the JSON
                common.print_json({**op_json(found), "also_in": [o.graph for o in others],
                                   "same_name_ops": [op_json(o) for o in others]})
            else:
                for o in same:   # one name in several subgraphs (a loop's body and cond): each is its own op
                    _render_op(o)
                if len(same) > 1:
                    common.log(f"{len(same)} ops are named {found.name}, in graphs {', '.join(o.graph for o in same)}")
            return
        ops = [o for o in graph.ops if o.is_fused] if fused else graph.ops
        n_fused = sum(1 for o in graph.ops if o.is_fused)
        if json_out:
            common.print_json({"path": str(file), "graphs": graph.graph_names, "op_count": len(graph.ops),
                               "fused_count": n_fused, "ops": [op_json(o) for o in ops]})
            return
        _render_list(graph, ops, limit)
        common.log(f"{len(graph.ops)} ops in {len(graph.graph_names)} graph(s), {n_fused} fused")
        if not graph.ops:
            common.log(f"warning: {file}: its graphs hold no ops (a graph dumped before its ops, or cut short?)")
