"""The simulator's graph IR and its interpreter: nodes with one output each, executed in list order.

A :class:`Node` is either a primitive op of the framework graph (MatMul, Add, Rsqrt...) or a fused op produced
by a fusion pass. Fused ops keep the bookkeeping GE keeps: the graph-fusion passes that produced them
(``pass_names``, accumulated), the UB-fusion pass (``ub_pass_name``), the original framework ops merged into them
and which original op's output their output stands for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

SOURCE_TYPES = ("Data", "Variable", "Const")


@dataclass
class Node:
    """One op of a simulated graph. Every node has exactly one output (index 0)."""

    name: str  # op name, only [A-Za-z0-9_] so dump file names need no escaping
    type: str  # op type as GE would print it
    inputs: list[str]  # producer node names (output 0 of each)
    attrs: dict = field(default_factory=dict)  # kernel attributes (axis, value, eps, dst_type...)
    dtype: str = "float32"  # output dtype name
    shape: tuple[int, ...] = ()  # output shape (filled in by shape inference)
    pass_names: list[str] = field(default_factory=list)  # graph-fusion passes that produced it (accumulated)
    ub_pass_name: str | None = None  # UB-fusion pass that fused it
    original_names: list[str] = field(default_factory=list)  # original framework ops merged into it
    original_types: list[str] = field(default_factory=list)
    origin_output: str | None = None  # original op whose output 0 this node's output stands for
    members: list["Node"] = field(default_factory=list)  # UB-fused: the member ops, in execution order
    fusion_scope: int | None = None  # UB fusion scope id

    @property
    def fused(self) -> bool:
        """True if a fusion pass produced this node."""
        return bool(self.pass_names or self.ub_pass_name)

    def originals(self) -> list[str]:
        """The original op names this node stands for (itself if it was not fused)."""
        return list(self.original_names) if self.original_names else [self.name]

    def original_op_types(self) -> list[str]:
        """The types of :meth:`originals`."""
        return list(self.original_types) if self.original_types else [self.type]

    def origin(self) -> str:
        """The original op whose output this node's output stands for."""
        return self.origin_output or self.name

    def all_passes(self) -> set[str]:
        """Every pass (graph or UB) that contributed to this node."""
        found = set(self.pass_names)
        if self.ub_pass_name:
            found.add(self.ub_pass_name)
        return found


class Graph:
    """An ordered list of nodes (topological order) with name lookup."""

    def __init__(self, name: str, nodes: Iterable[Node]) -> None:
        self.name = name
        self.nodes: list[Node] = list(nodes)

    def copy(self) -> "Graph":
        """A deep-enough copy: nodes and their lists are new objects, attribute values are shared."""
        def dup(n: Node) -> Node:
            return Node(n.name, n.type, list(n.inputs), dict(n.attrs), n.dtype, n.shape, list(n.pass_names),
                        n.ub_pass_name, list(n.original_names), list(n.original_types), n.origin_output,
                        [dup(m) for m in n.members], n.fusion_scope)
        return Graph(self.name, [dup(n) for n in self.nodes])

    def node(self, name: str) -> Node:
        """The node called ``name``. Raises KeyError if absent."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def get(self, name: str) -> Node | None:
        """The node called ``name`` or None."""
        for n in self.nodes:
            if n.name == name:
                return n
        return None

    def consumers(self, name: str) -> list[Node]:
        """Nodes that read the output of ``name``."""
        return [n for n in self.nodes if name in n.inputs]

    def replace(self, pattern: list[Node], fused: Node, output: Node) -> None:
        """Replace the nodes of ``pattern`` by ``fused``; readers of ``output`` now read ``fused``.

        ``fused`` takes the position of the last pattern node, which keeps the list topologically sorted as long
        as every input of ``fused`` is produced before that position (true for the convex patterns we match).
        """
        names = {n.name for n in pattern}
        last = max(self.nodes.index(n) for n in pattern)
        kept: list[Node] = []
        for i, n in enumerate(self.nodes):
            if i == last:
                kept.append(fused)
            if n.name not in names:
                kept.append(n)
        for n in kept:
            if n is not fused:
                n.inputs = [fused.name if src == output.name else src for src in n.inputs]
        self.nodes = kept

    def compute_nodes(self) -> list[Node]:
        """Nodes that run a kernel (not Data/Variable/Const)."""
        return [n for n in self.nodes if n.type not in SOURCE_TYPES]


Kernel = Callable[[Node, list[np.ndarray], frozenset[str]], np.ndarray]


def execute(graph: Graph, feeds: dict[str, np.ndarray], kernel: Kernel, faults: frozenset[str] = frozenset(),
            observer: Callable[[Node, list[np.ndarray], np.ndarray], None] | None = None) -> dict[str, np.ndarray]:
    """Run ``graph`` and return every node's output by node name.

    ``feeds`` gives the values of Data and Variable nodes; Const nodes carry ``attrs['value']``. ``kernel`` runs
    one compute node; it receives the faults that apply to that node (``faults`` intersected with the node's
    passes). ``observer(node, inputs, output)`` is called after each compute node (used for dumps). Raises
    KeyError if a feed is missing.
    """
    values: dict[str, np.ndarray] = {}
    for node in graph.nodes:
        if node.type == "Const":
            values[node.name] = node.attrs["value"]
            continue
        if node.type in ("Data", "Variable"):
            values[node.name] = feeds[node.name]
            if observer is not None and node.type == "Data":
                observer(node, [], values[node.name])
            continue
        args = [values[i] for i in node.inputs]
        out = kernel(node, args, faults & frozenset(node.all_passes()) if faults else frozenset())
        values[node.name] = out
        if observer is not None:
            observer(node, args, out)
    return values
