"""A simulated Ascend training target for demos and tests (numpy only; no NPU, no CANN).

``python -m fusebisect.sim train`` trains a small MLP whose graph goes through simulated fusion passes named after
real CANN rules, honours fusion_switch.cfg, and writes CANN's artifacts. :data:`RULES` lists the simulated rules,
:data:`RULE_KINDS` their kinds and :data:`RULE_FAULTS` what each rule's faulty kernel gets wrong.
"""

from fusebisect.sim.passes import PASSES

RULES: list[str] = [p.name for p in PASSES]
RULE_KINDS: dict[str, str] = {p.name: p.kind for p in PASSES}
RULE_FAULTS: dict[str, str] = {p.name: p.fault for p in PASSES}

__all__ = ["RULES", "RULE_KINDS", "RULE_FAULTS"]
