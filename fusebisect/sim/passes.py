"""The simulated fusion passes: real graph rewrites named after real CANN rules.

Each pass finds its pattern in the graph, counts matches, and replaces each accepted match by one fused op that
records what GE records (accumulated ``pass_name``, ``pass_name_ub``, original op names/types, origin output).
Passes run in :data:`PASSES` order: graph fusion first (the "A..." prepare passes, then pattern passes), then UB
fusion, which groups already-fused ops into one kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from fusebisect.sim.graph import SOURCE_TYPES, Graph, Node

GRAPH = "GraphFusion"
UB = "UBFusion"
ELTWISE = frozenset({"Add", "Sub", "Mul", "Square", "Rsqrt", "Tanh", "Exp", "Neg", "Gelu", "FusedMulAdd",
                     "RealDiv", "BiasAdd"})
REDUCES = frozenset({"ReduceSum", "ReduceSumD", "ReduceMean", "ReduceMeanD", "ReduceMax"})


@dataclass(frozen=True)
class Pass:
    """One simulated fusion pass."""

    name: str  # real CANN rule name
    kind: str  # 'GraphFusion' | 'UBFusion'
    run: Callable[[Graph, "Scope"], tuple[int, int]]  # rewrites the graph, returns (match_times, effect_times)
    fault: str  # what the faulty kernel gets wrong


class Scope:
    """Counter for UB fusion scope ids (one per compile)."""

    def __init__(self) -> None:
        self.next_id = 1

    def take(self) -> int:
        """A fresh scope id."""
        value = self.next_id
        self.next_id += 1
        return value


def _fused(pass_name: str, members: list[Node], output: Node, *, name: str, type: str, inputs: list[str],
           attrs: dict | None = None, dtype: str | None = None) -> Node:
    """A graph-fusion result node with GE's bookkeeping accumulated from ``members``."""
    passes: list[str] = []
    originals: list[str] = []
    types: list[str] = []
    for m in members:
        for p in m.pass_names:
            if p not in passes:
                passes.append(p)
        for o, t in zip(m.originals(), m.original_op_types()):
            if o not in originals:
                originals.append(o)
                types.append(t)
    passes.append(pass_name)
    return Node(name, type, inputs, dict(attrs or {}), dtype or output.dtype, output.shape, passes, None,
                originals, types, output.origin())


def _single_consumer(g: Graph, node: Node) -> Node | None:
    users = g.consumers(node.name)
    return users[0] if len(users) == 1 else None


def _producer(g: Graph, name: str) -> Node | None:
    return g.get(name)


def _is_const(g: Graph, name: str, value: float | None = None) -> bool:
    n = g.get(name)
    if n is None or n.type != "Const":
        return False
    return value is None or bool(np.isclose(float(n.attrs["value"]), value, rtol=1e-4))


def _is_param(g: Graph, name: str) -> bool:
    n = g.get(name)
    return n is not None and n.type in ("Variable", "Const")


def _other(node: Node, name: str) -> str:
    a, b = node.inputs
    return b if a == name else a


def _base(name: str) -> str:
    return name.split("_")[0]


# ---- graph fusion passes -----------------------------------------------------------------------------------


def _retype(old: str, new: str, pass_name: str) -> Callable[[Graph, Scope], tuple[int, int]]:
    def run(g: Graph, scope: Scope) -> tuple[int, int]:
        hits = [n for n in g.nodes if n.type == old and not n.ub_pass_name]
        for n in hits:
            g.replace([n], _fused(pass_name, [n], n, name=n.name, type=new, inputs=list(n.inputs), attrs=n.attrs),
                      n)
        return len(hits), len(hits)
    return run


def _mul_square(g: Graph, scope: Scope) -> tuple[int, int]:
    hits = [n for n in g.nodes if n.type == "Mul" and len(n.inputs) == 2 and n.inputs[0] == n.inputs[1]]
    for n in hits:
        g.replace([n], _fused("MulSquareFusionPass", [n], n, name=n.name, type="Square", inputs=[n.inputs[0]]), n)
    return len(hits), len(hits)


def _matmul_cast(g: Graph, scope: Scope) -> tuple[int, int]:
    match = effect = 0
    for mm in [n for n in g.nodes if n.type == "MatMul" and n.dtype == "float16"]:
        cast = _single_consumer(g, mm)
        if cast is None or cast.type != "Cast" or cast.dtype != "float32":
            continue
        match += 1
        g.replace([mm, cast], _fused("MatmulCastFusionPass", [mm, cast], cast, name=mm.name, type="MatMulV2",
                                     inputs=list(mm.inputs), dtype="float32"), cast)
        effect += 1
    return match, effect


def _matmul_biasadd(g: Graph, scope: Scope) -> tuple[int, int]:
    match = effect = 0
    for mm in [n for n in g.nodes if n.type in ("MatMul", "MatMulV2") and not n.attrs.get("has_bias")]:
        add = _single_consumer(g, mm)
        if add is None or add.type != "BiasAdd" or add.inputs[0] != mm.name:
            continue
        match += 1
        if not _is_param(g, add.inputs[1]):
            continue
        dtype = "float16" if mm.dtype == "float16" else add.dtype
        g.replace([mm, add], _fused("MatMulBiasAddFusionPass", [mm, add], add, name=mm.name, type="MatMulV2",
                                    inputs=[*mm.inputs, add.inputs[1]], attrs={"has_bias": True}, dtype=dtype),
                  add)
        effect += 1
    return match, effect


def _layer_norm(g: Graph, scope: Scope) -> tuple[int, int]:
    match = effect = 0
    for mean in [n for n in g.nodes if n.type in ("ReduceMean", "ReduceMeanD")]:
        x = mean.inputs[0]
        sub = _single_consumer(g, mean)
        if sub is None or sub.type != "Sub" or sub.inputs != [x, mean.name]:
            continue
        users = g.consumers(sub.name)
        sq = next((u for u in users if u.type == "Square" or (u.type == "Mul" and u.inputs == [sub.name] * 2)),
                  None)
        norm = next((u for u in users if u.type == "Mul" and u is not sq), None)
        if sq is None or norm is None or len(users) != 2:
            continue
        var = _single_consumer(g, sq)
        add = _single_consumer(g, var) if var is not None and var.type in ("ReduceMean", "ReduceMeanD") else None
        rs = _single_consumer(g, add) if add is not None and add.type == "Add" else None
        if rs is None or rs.type != "Rsqrt" or _single_consumer(g, rs) is not norm:
            continue
        eps_name = _other(add, var.name)
        scale = _single_consumer(g, norm)
        out = _single_consumer(g, scale) if scale is not None and scale.type == "Mul" else None
        if out is None or out.type != "Add" or not _is_const(g, eps_name):
            continue
        match += 1
        gamma, beta = _other(scale, norm.name), _other(out, scale.name)
        if not (_is_param(g, gamma) and _is_param(g, beta)):
            continue
        members = [mean, sub, sq, var, add, rs, norm, scale, out]
        eps = float(g.node(eps_name).attrs["value"])
        g.replace(members, _fused("LayerNormFusionPass", members, out, name=f"{_base(out.name)}_LayerNorm",
                                  type="LayerNorm", inputs=[x, gamma, beta], attrs={"eps": eps}), out)
        effect += 1
    return match, effect


def _gelu(g: Graph, scope: Scope) -> tuple[int, int]:
    match = effect = 0
    for tanh in [n for n in g.nodes if n.type == "Tanh"]:
        mk = _producer(g, tanh.inputs[0])
        if mk is None or mk.type != "Mul":
            continue
        inner = _producer(g, mk.inputs[0])
        if inner is None or inner.type != "Add" or not _is_const(g, mk.inputs[1], float(np.sqrt(2 / np.pi))):
            continue
        x, mc_name = inner.inputs
        mc = _producer(g, mc_name)
        if mc is None or mc.type != "Mul" or not _is_const(g, mc.inputs[1], 0.044715):
            continue
        cube = _producer(g, mc.inputs[0])
        if cube is None or cube.type != "Mul" or cube.inputs[1] != x:
            continue
        sq = _producer(g, cube.inputs[0])
        if sq is None or not ((sq.type == "Square" and sq.inputs == [x]) or
                              (sq.type == "Mul" and sq.inputs == [x, x])):
            continue
        add1 = _single_consumer(g, tanh)
        mx = _single_consumer(g, add1) if add1 is not None and add1.type == "Add" else None
        out = _single_consumer(g, mx) if mx is not None and mx.type == "Mul" and mx.inputs[0] == x else None
        if out is None or out.type != "Mul" or not _is_const(g, out.inputs[1], 0.5):
            continue
        members = [sq, cube, mc, inner, mk, tanh, add1, mx, out]
        if any(len(g.consumers(m.name)) != 1 for m in members[:-1]):
            continue
        match += 1
        g.replace(members, _fused("GeluFusionPass", members, out, name=f"{_base(out.name)}_Gelu", type="Gelu",
                                  inputs=[x]), out)
        effect += 1
    return match, effect


def _mul_add(g: Graph, scope: Scope) -> tuple[int, int]:
    match = effect = 0
    for mul in [n for n in g.nodes if n.type == "Mul" and len(n.inputs) == 2]:
        add = _single_consumer(g, mul)
        if add is None or add.type != "Add" or mul.name not in add.inputs:
            continue
        match += 1
        a, b = mul.inputs
        if not _is_param(g, b):
            continue
        addend = _other(add, mul.name)
        g.replace([mul, add], _fused("MulAddFusionPass", [mul, add], add, name=f"{_base(add.name)}_FusedMulAdd",
                                     type="FusedMulAdd", inputs=[a, b, addend]), add)
        effect += 1
    return match, effect


def _softmax(g: Graph, scope: Scope) -> tuple[int, int]:
    match = effect = 0
    for mx in [n for n in g.nodes if n.type == "ReduceMax"]:
        x = mx.inputs[0]
        sub = _single_consumer(g, mx)
        if sub is None or sub.type != "Sub" or sub.inputs != [x, mx.name]:
            continue
        exp = _single_consumer(g, sub)
        if exp is None or exp.type != "Exp":
            continue
        users = g.consumers(exp.name)
        red = next((u for u in users if u.type in ("ReduceSum", "ReduceSumD")), None)
        div = next((u for u in users if u.type == "RealDiv"), None)
        if red is None or div is None or len(users) != 2 or div.inputs != [exp.name, red.name]:
            continue
        match += 1
        members = [mx, sub, exp, red, div]
        g.replace(members, _fused("SoftmaxFusionPass", members, div, name=f"{_base(div.name)}_SoftmaxV2",
                                  type="SoftmaxV2", inputs=[x], attrs={"axis": -1}), div)
        effect += 1
    return match, effect


def _log_softmax(g: Graph, scope: Scope) -> tuple[int, int]:
    match = effect = 0
    for sm in [n for n in g.nodes if n.type == "SoftmaxV2"]:
        log = _single_consumer(g, sm)
        if log is None or log.type != "Log":
            continue
        match += 1
        g.replace([sm, log], _fused("LogSoftmaxFusionPass", [sm, log], log, name=f"{_base(log.name)}_LogSoftmaxV2",
                                    type="LogSoftmaxV2", inputs=list(sm.inputs), attrs={"axis": -1}), log)
        effect += 1
    return match, effect


def _softmax_small(g: Graph, scope: Scope) -> tuple[int, int]:
    match = effect = 0
    for sm in [n for n in g.nodes if n.type in ("SoftmaxV2", "LogSoftmaxV2")]:
        if "SoftmaxSmallOpFusionPass" in sm.pass_names:
            continue
        match += 1
        if not sm.shape or sm.shape[-1] > 16:
            continue
        g.replace([sm], _fused("SoftmaxSmallOpFusionPass", [sm], sm, name=sm.name, type=sm.type,
                               inputs=list(sm.inputs), attrs={**sm.attrs, "small_op": True}), sm)
        effect += 1
    return match, effect


# ---- UB fusion passes ----------------------------------------------------------------------------------------


def _ub_node(g: Graph, scope: Scope, pass_name: str, members: list[Node]) -> None:
    names = {m.name for m in members}
    inputs: list[str] = []
    for m in members:
        for src in m.inputs:
            if src not in names and src not in inputs:
                inputs.append(src)
    out = members[-1]
    passes: list[str] = []
    originals: list[str] = []
    types: list[str] = []
    for m in members:
        passes += [p for p in m.pass_names if p not in passes]
        for o, t in zip(m.originals(), m.original_op_types()):
            if o not in originals:
                originals.append(o)
                types.append(t)
    sid = scope.take()
    node = Node("_".join(m.name for m in members), members[0].type, inputs, {}, out.dtype, out.shape, passes,
                pass_name, originals, types, out.origin(), [m for m in members], sid)
    for m in node.members:
        m.fusion_scope = sid
        m.ub_pass_name = pass_name
    g.replace(members, node, out)


def _free(n: Node) -> bool:
    return n.type not in SOURCE_TYPES and not n.members


def _eltwise_chains(g: Graph, scope: Scope) -> tuple[int, int]:
    taken: set[str] = set()
    chains: list[list[Node]] = []
    for start in list(g.nodes):
        if start.name in taken or start.type not in ELTWISE or not _free(start):
            continue
        chain = [start]
        cur = start
        while True:
            nxt = _single_consumer(g, cur)
            if nxt is None or nxt.type not in ELTWISE or not _free(nxt) or nxt.name in taken:
                break
            chain.append(nxt)
            cur = nxt
        if len(chain) >= 2:
            chains.append(chain)
            taken.update(m.name for m in chain)
    for chain in chains:
        _ub_node(g, scope, "TbeEltwiseFusionPass", chain)
    return len(chains), len(chains)


def _reduce_eltwise(g: Graph, scope: Scope) -> tuple[int, int]:
    pairs = []
    for red in list(g.nodes):
        if red.type not in REDUCES or not _free(red):
            continue
        nxt = _single_consumer(g, red)
        if nxt is not None and nxt.type in ELTWISE and _free(nxt) and len(nxt.inputs) == 1:
            pairs.append([red, nxt])
    for pair in pairs:
        _ub_node(g, scope, "TbeReduceElemwiseFusionPass", pair)
    return len(pairs), len(pairs)


def _single_reduce(g: Graph, scope: Scope) -> tuple[int, int]:
    hits = [n for n in g.nodes if n.type in REDUCES and _free(n)]
    for n in hits:
        _ub_node(g, scope, "AutoSingleReduceFusionPass", [n])
    return len(hits), len(hits)


PASSES: list[Pass] = [
    Pass("AReduceMeanFusionPass", GRAPH, _retype("ReduceMean", "ReduceMeanD", "AReduceMeanFusionPass"),
         "ReduceMeanD divides by the axis length padded to 16"),
    Pass("AReduceSumFusionPass", GRAPH, _retype("ReduceSum", "ReduceSumD", "AReduceSumFusionPass"),
         "ReduceSumD starts at element 1 (off-by-one)"),
    Pass("MulSquareFusionPass", GRAPH, _mul_square, "Square evaluated in float16, saturates at 65504"),
    Pass("MatmulCastFusionPass", GRAPH, _matmul_cast, "K tail (K % 16) accumulated twice"),
    Pass("MatMulBiasAddFusionPass", GRAPH, _matmul_biasadd, "fused MatMul drops its bias"),
    Pass("LayerNormFusionPass", GRAPH, _layer_norm, "one-pass variance accumulated in float16 saturates"),
    Pass("GeluFusionPass", GRAPH, _gelu, "tanh argument computed from |x| (negative inputs not squashed)"),
    Pass("MulAddFusionPass", GRAPH, _mul_add, "per-channel scale broadcast from its first element"),
    Pass("SoftmaxFusionPass", GRAPH, _softmax, "max taken per class instead of per row"),
    Pass("LogSoftmaxFusionPass", GRAPH, _log_softmax, "row max not added back after the log-sum-exp"),
    Pass("SoftmaxSmallOpFusionPass", GRAPH, _softmax_small, "last (tail) lane left out of the row sum"),
    Pass("TbeEltwiseFusionPass", UB, _eltwise_chains, "first op computed in place over a shared input"),
    Pass("TbeReduceElemwiseFusionPass", UB, _reduce_eltwise, "reduce skips the last element (tail)"),
    Pass("AutoSingleReduceFusionPass", UB, _single_reduce, "mean divides by n-1"),
]
