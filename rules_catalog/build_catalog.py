"""Build the fusion-rule catalog JSON from ``rules_catalog_raw.tsv``.

The TSV (columns ``name, kind, default, description, source``) is the source of truth. This script turns it into
``rules_catalog/catalog.json`` and the identical package copy ``fusebisect/data/rules_catalog.json`` (the file the
installed package reads). Run it after editing the TSV or the curated facts below:

    python rules_catalog/build_catalog.py          # rewrite both JSON files
    python rules_catalog/build_catalog.py --check  # exit 1 if either file is stale

Curated facts (kind resolutions, spelling variants, SoC notes) live in this file as data, each with its evidence.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TSV = HERE / "rules_catalog_raw.tsv"
CATALOG = HERE / "catalog.json"
PACKAGE_COPY = HERE.parent / "fusebisect" / "data" / "rules_catalog.json"

SOC_950_SOURCE = ("https://www.hiascend.com/document/detail/zh/canncommercial/83RC1/graph/graphdevg/atlasag_25_0078.html "
             "(融合规则列表: Ascend 950PR/Ascend 950DT不支持UB融合); "
             "hicann/ge:docs/zh/user_guides/atc_tools/CLI_options/--fusion_switch_file.md")

# Kind of the rules the TSV leaves "unknown": (kind, why). The CANN "risky to close" list splits its names into
# graph and UB sections, but 5 of its 8 "UB" names are registered as graph passes (e.g. ArgMaxWithFusionPass) and
# its graph section holds UB passes (e.g. TbeConvDequantS16FusionPass), so that split alone is not evidence.
KIND_RESOLUTION: dict[str, tuple[str, str]] = {
    "GlobalAvgPoolPass": (
        "GraphFusion",
        "documentation spelling of the GraphFusion passes Globalavgpoolpass (FE) / GlobalavgpoolPass (GE pattern "
        "pass); no source registers this exact name",
    ),
    "sedBatchNormGradFusionPass": (
        "GraphFusion",
        "truncated entry of FusedBatchNormGradFusionPass (GraphFusion) in FE's ForbiddenClosedPass list",
    ),
    "MatMul2MatMulV2FusionPass": (
        "GraphFusion",
        "rewrites the op type MatMul to MatMulV2, a graph rewrite; UB fusion only groups TBE kernels",
    ),
    "SxpyFusionPass": (
        "GraphFusion",
        "listed in the built-in ExceptionalPassOfO1Level set, whose other six entries are all GraphFusion passes; "
        "no registration found",
    ),
    "clip_by_norm_nodivsquaresum": (
        "unknown",
        "only in FE's ForbiddenClosedPass list and FE's license pass map (id 39, between graph and UB passes); no "
        "registration found. It cannot be disabled, so the section does not matter",
    ),
    "HostShapeOptimizationPass": (
        "unknown",
        "a GE AI CPU engine pass (kCutOffWaterFlowPassName), not an FE fusion pass; the CANN doc lists it under UB "
        "fusion, but that list is unreliable. `cfg off` writes it to both sections",
    ),
    "SquareSumV1": (
        "unknown",
        "only in FE's license force-close list kForceClosePassVec (SquareSumV1 is also an op type); no registration "
        "found. `cfg off` writes it to both sections",
    ),
}

# Names that look like a rule but are a spelling of another one: no pass registers them, so a switch-file entry with
# this name has no effect. name -> (the real name, evidence).
SPELLING_OF: dict[str, str] = {
    "GlobalAvgPoolPass": "Globalavgpoolpass",
    "sedBatchNormGradFusionPass": "FusedBatchNormGradFusionPass",
}

# Spelling variants seen in documentation that are not catalog rules: alias -> real rule name.
EXTRA_ALIASES: dict[str, str] = {
    "In-placeAddRmsNormFusionPass": "InplaceAddRmsNormFusionPass",  # torchair optimization_switch.md list
}

LICENSE_NOTE = ("license-related force-close list kForceClosePassVec (FE utils/common/configuration.cc): closed "
                "when the fusion license does not cover it")

PATTERN_NOTE = ("recent CANN runs it as a GE pattern pass (REG_FUSION_PASS/REG_DECOMPOSE_PASS): the JSON "
                "Switch.GraphFusion entry or ALL decides, FE's forbidden-close and ExceptionalPassOfO1Level lists do "
                "not apply; older CANN ran it as an FE pass that a switch file could not close")

SOC_NOTES = [
    {
        "socs": ["Ascend 950PR", "Ascend 950DT"],
        "ub_fusion": False,
        "note": "No UB fusion on these SoCs: UBFusion entries have no effect and the section may be omitted.",
        "source": SOC_950_SOURCE,
    },
]


def _parse_default(raw: str) -> tuple[str, bool, bool]:
    """'on (forbidden-close)' -> (default, can_disable, o1_exception).

    A pass in the built-in ExceptionalPassOfO1Level list cannot be switched off either: FE's
    GetFusionSwitchByOptimizationOption returns "on" for it before the switch file is looked at (only
    ge.optimizationSwitch comes first), whatever the optimisation level (ascend-formats.md 5.2, step 2)."""
    default = raw.split(" ", 1)[0].strip()
    if default not in ("on", "off"):
        raise ValueError(f"bad default {raw!r}")
    o1_exception = "ExceptionalPassOfO1Level" in raw
    can_disable = "forbidden-close" not in raw and "FORBIDDEN_CLOSE" not in raw and not o1_exception
    return default, can_disable, o1_exception


def _builtin_switch(sources: list[str]) -> str | None:
    """The built-in fusion_config.json explicit Switch entry ('on'/'off'), if any source records one."""
    values = {v for s in sources for v in ("on", "off") if f"[Switch={v}]" in s}
    if len(values) > 1:
        raise ValueError(f"conflicting built-in switch entries: {sources}")
    return values.pop() if values else None


def build() -> dict:
    """Return the catalog document built from the TSV. Raises ValueError on inconsistent data."""
    with TSV.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    names = [r["name"] for r in rows]
    if len(set(names)) != len(names):
        raise ValueError("duplicate names in the TSV")
    by_lower: dict[str, list[str]] = {}
    for n in names:
        by_lower.setdefault(n.lower(), []).append(n)
    extra_by_target: dict[str, list[str]] = {}
    for alias, target in EXTRA_ALIASES.items():
        if target not in names or alias in names:
            raise ValueError(f"bad extra alias {alias} -> {target}")
        extra_by_target.setdefault(target, []).append(alias)
    spelled: dict[str, list[str]] = {}
    for variant, target in SPELLING_OF.items():
        spelled.setdefault(target, []).append(variant)

    rules = []
    for row in rows:
        name = row["name"]
        default, can_disable, o1 = _parse_default(row["default"])
        sources = [s.strip() for s in row["source"].split(" ; ") if s.strip()]
        kind = row["kind"]
        rule: dict = {"name": name}
        if kind == "unknown":
            kind, why = KIND_RESOLUTION[name]
            rule["kind"] = kind
            rule["kind_note"] = why
        else:
            rule["kind"] = kind
        variants = [v for v in by_lower[name.lower()] if v != name]
        variants += extra_by_target.get(name, [])
        variants += spelled.get(name, [])
        if name in SPELLING_OF:
            variants.append(SPELLING_OF[name])
        notes = []
        if any("[kForceClosePassVec]" in s for s in sources):
            notes.append(LICENSE_NOTE)
        if not can_disable and any("[REG_FUSION_PASS]" in s or "[REG_DECOMPOSE_PASS]" in s for s in sources):
            # GE's FusionPassExecutor::IsPassEnable reads the switch file only (ascend-formats.md 5.2, last
            # paragraph): the FE lists that keep the old FE pass of this name on do not reach it.
            can_disable = True
            notes.append(PATTERN_NOTE)
        rule.update({
            "default": default,
            "can_disable": can_disable,
            "o1_exception": o1,
            "builtin_switch": _builtin_switch(sources),
            "description": row["description"].strip(),
            "sources": sources,
            "aliases": sorted(set(variants)),
            "spelling_of": SPELLING_OF.get(name),
            "notes": notes,
        })
        if rule["builtin_switch"] == "off" and default != "off":
            raise ValueError(f"{name}: built-in Switch=off but default {default}")
        rules.append(rule)
    # a spelling no pass has answers "can it be switched off?" as the pass it spells does (switching the
    # spelling itself off does nothing either way; cfg check says so)
    by_name = {r["name"]: r for r in rules}
    for rule in rules:
        if rule["spelling_of"] in by_name:
            rule["can_disable"] = by_name[rule["spelling_of"]]["can_disable"]
    return {
        "version": 1,
        "source": "rules_catalog/rules_catalog_raw.tsv",
        "sections": {"GraphFusion": "Switch.GraphFusion", "UBFusion": "Switch.UBFusion"},
        "soc_notes": SOC_NOTES,
        "rules": rules,
    }


def render(doc: dict) -> str:
    """The catalog as canonical JSON text (2-space indent, UTF-8, trailing newline)."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check, verify) both catalog JSON files. Returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a JSON file differs from a fresh build")
    args = parser.parse_args(argv)
    text = render(build())
    stale = [p for p in (CATALOG, PACKAGE_COPY) if not p.exists() or p.read_text(encoding="utf-8") != text]
    if args.check:
        for p in stale:
            print(f"stale: {p}", file=sys.stderr)
        return 1 if stale else 0
    for p in (CATALOG, PACKAGE_COPY):
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(p)
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
