"""The simulated graph compiler: decides which passes run (CANN switch-file precedence) and applies them.

Returns the compiled graph and the per-pass statistics GE writes to ``fusion_result.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fusebisect.rules.catalog import Catalog, default_catalog
from fusebisect.rules.switchfile import SwitchConfig, effective_state
from fusebisect.sim.graph import Graph
from fusebisect.sim.passes import PASSES, Scope


@dataclass
class PassStat:
    """What one pass did in one compile."""

    name: str
    kind: str  # 'GraphFusion' | 'UBFusion'
    match_times: int
    effect_times: int


@dataclass
class Compiled:
    """A compiled graph and what the passes did."""

    graph: Graph
    enabled: dict[str, bool]  # rule -> runs (effective state)
    stats: list[PassStat] = field(default_factory=list)  # passes that ran, in order

    def fired(self) -> set[str]:
        """Rules with at least one effect."""
        return {s.name for s in self.stats if s.effect_times > 0}


def enabled_rules(config: SwitchConfig | None, catalog: Catalog | None = None) -> dict[str, bool]:
    """Effective on/off state of every simulated rule under ``config`` (None = no switch file)."""
    cat = catalog or default_catalog()
    return {p.name: effective_state(p.name, config, cat, kind=p.kind) for p in PASSES}


def compile_graph(graph: Graph, enabled: dict[str, bool]) -> Compiled:
    """Apply the enabled passes to a copy of ``graph`` in pass order; returns the result and statistics."""
    g = graph.copy()
    g.name = graph.name
    scope = Scope()
    result = Compiled(graph=g, enabled=dict(enabled))
    for p in PASSES:
        if not enabled.get(p.name, False):
            continue
        match, effect = p.run(g, scope)
        result.stats.append(PassStat(p.name, p.kind, match, effect))
    return result
