"""The fusion-rule catalog: every known CANN fusion pass with its kind, default and whether it can be disabled.

The data is package data (``fusebisect/data/rules_catalog.json``), generated from
``rules_catalog/rules_catalog_raw.tsv`` by ``rules_catalog/build_catalog.py``. Names are case-sensitive, exactly as
CANN compares them; known spelling variants are kept as aliases.
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass, field
from importlib import resources

from fusebisect.errors import FusebisectError

GRAPH = "GraphFusion"
UB = "UBFusion"
KINDS = (GRAPH, UB)
_KIND_ALIASES = {"graph": GRAPH, "graphfusion": GRAPH, "ub": UB, "ubfusion": UB}


def normalize_kind(kind: str | None) -> str | None:
    """Map 'graph'/'ub'/'GraphFusion'/'UBFusion' (any case) to 'GraphFusion'/'UBFusion'; None stays None.

    Raises FusebisectError for anything else.
    """
    if kind is None:
        return None
    try:
        return _KIND_ALIASES[kind.lower()]
    except KeyError:
        raise FusebisectError(f"unknown rule kind {kind!r} (expected graph or ub)") from None


@dataclass(frozen=True)
class Rule:
    """One fusion pass as the catalog knows it."""

    name: str  # exact, case-sensitive pass name
    kind: str  # 'GraphFusion' | 'UBFusion' | 'unknown'
    default: str  # 'on' | 'off' (built-in default)
    can_disable: bool  # False: forbidden-close or ExceptionalPassOfO1Level; a switch file cannot close it
    o1_exception: bool  # in the built-in ExceptionalPassOfO1Level list: always on, whatever the switch file
    description: str
    sources: tuple[str, ...]
    aliases: tuple[str, ...]  # known spelling variants (other case, documentation spellings)
    builtin_switch: str | None = None  # explicit entry in the built-in fusion_config.json ('on'/'off'), if any
    spelling_of: str | None = None  # a listing/documentation spelling of this real pass: entries here do nothing
    kind_note: str | None = None  # how an originally unknown kind was resolved, or why it stays unknown
    notes: tuple[str, ...] = field(default=())

    @property
    def always_on(self) -> str:
        """Why a switch file cannot turn it off ("forbidden-close", "in CANN's built-in ExceptionalPassOfO1Level
        list"), or "" when it can."""
        if self.can_disable:
            return ""
        return "in CANN's built-in ExceptionalPassOfO1Level list" if self.o1_exception and not any(
            "forbidden" in s.lower() for s in self.sources) else "forbidden-close"

    @property
    def ge_pattern(self) -> bool:
        """Registered as a GE pattern pass (REG_FUSION_PASS / REG_DECOMPOSE_PASS) by a source: that registration
        reads only the JSON ``Switch.GraphFusion`` of a switch file, never the old line format."""
        return any("[REG_FUSION_PASS]" in s or "[REG_DECOMPOSE_PASS]" in s for s in self.sources)

    @property
    def section(self) -> str:
        """'graph', 'ub' or 'unknown' (short kind for tables)."""
        return {GRAPH: "graph", UB: "ub"}.get(self.kind, "unknown")

    def summary(self) -> dict:
        """The ``rules list --json`` record: name, kind, default, can_disable, description."""
        return {"name": self.name, "kind": self.kind, "default": self.default, "can_disable": self.can_disable,
                "description": self.description}


class Catalog:
    """All rules by exact name, plus alias lookup, search and did-you-mean."""

    def __init__(self, rules: dict[str, Rule], soc_notes: list[dict] | None = None) -> None:
        self.rules: dict[str, Rule] = rules
        self.soc_notes: list[dict] = list(soc_notes or [])
        self._aliases: dict[str, str] = {}
        for rule in rules.values():
            for alias in rule.aliases:
                if alias not in rules:
                    self._aliases.setdefault(alias, rule.name)
        self._lower: dict[str, list[str]] = {}
        for name in rules:
            self._lower.setdefault(name.lower(), []).append(name)

    def get(self, name: str) -> Rule | None:
        """The rule with exactly this name, else the rule this alias spells, else None."""
        rule = self.rules.get(name)
        if rule is None and name in self._aliases:
            rule = self.rules[self._aliases[name]]
        return rule

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __len__(self) -> int:
        return len(self.rules)

    def case_matches(self, name: str) -> list[str]:
        """Catalog names equal to ``name`` ignoring case (exact match excluded)."""
        return [n for n in self._lower.get(name.lower(), []) if n != name]

    def search(self, text: str, kind: str | None = None) -> list[Rule]:
        """Rules whose name, alias or description contains ``text`` (case-insensitive), optionally of one kind.

        Returns them in catalog order; an empty ``text`` returns every rule of the kind. Raises FusebisectError for a
        bad ``kind``.
        """
        want = normalize_kind(kind)
        needle = text.lower()
        found = []
        for rule in self.rules.values():
            if want is not None and rule.kind != want:
                continue
            hay = " ".join((rule.name, *rule.aliases, rule.description)).lower()
            if needle in hay:
                found.append(rule)
        return found

    def suggest(self, name: str, n: int = 3) -> list[str]:
        """Up to ``n`` catalog names close to ``name`` (case differences first, then difflib), best first."""
        out = list(self.case_matches(name))
        if name in self._aliases:
            out.append(self._aliases[name])
        lowered = {k: v for k, v in self._lower.items()}
        for match in difflib.get_close_matches(name.lower(), list(lowered), n=n + len(out), cutoff=0.6):
            out.extend(lowered[match])
        seen: list[str] = []
        for cand in out:
            if cand != name and cand not in seen:
                seen.append(cand)
        return seen[:n]

    def marked_locked(self, names) -> list[str]:
        """``names`` with those no switch file turns off (forbidden-close, always on) marked "(cannot be switched
        off)": among rules to suspect, they cannot be the fix."""
        return [f"{n} (cannot be switched off)" if (r := self.get(n)) is not None and not r.can_disable else n
                for n in names]

    def disableable(self) -> list[str]:
        """Names of the rules a switch file can turn off (can_disable true and not a mere spelling), catalog order."""
        return [r.name for r in self.rules.values() if r.can_disable and r.spelling_of is None]

    def builtin_entries(self, kind: str) -> dict[str, str]:
        """The built-in fusion_config.json Switch entries for one kind ('GraphFusion'/'UBFusion'); the same dict
        on every call (do not change it)."""
        cache = self.__dict__.setdefault("_builtin_entries", {})
        if kind not in cache:
            cache[kind] = {r.name: r.builtin_switch for r in self.rules.values()
                           if r.builtin_switch is not None and r.kind == kind}
        return cache[kind]

    def ub_fusion_supported(self, soc: str) -> bool:
        """False for SoCs without UB fusion (e.g. 'Ascend 950PR'); True otherwise."""
        for note in self.soc_notes:
            if note.get("ub_fusion") is False and any(soc.lower() == s.lower() for s in note.get("socs", [])):
                return False
        return True


def _rule_from_json(obj: dict) -> Rule:
    return Rule(
        name=obj["name"], kind=obj["kind"], default=obj["default"], can_disable=obj["can_disable"],
        o1_exception=obj["o1_exception"], description=obj.get("description", ""),
        sources=tuple(obj.get("sources", ())), aliases=tuple(obj.get("aliases", ())),
        builtin_switch=obj.get("builtin_switch"), spelling_of=obj.get("spelling_of"),
        kind_note=obj.get("kind_note"), notes=tuple(obj.get("notes", ())),
    )


def catalog_from_document(doc: dict) -> Catalog:
    """Build a Catalog from a parsed catalog JSON document. Raises KeyError/TypeError if it is malformed."""
    rules = {}
    for obj in doc["rules"]:
        rule = _rule_from_json(obj)
        rules[rule.name] = rule
    return Catalog(rules, doc.get("soc_notes", []))


def catalog_text() -> str:
    """The packaged catalog JSON text. Raises FileNotFoundError if the package data is missing."""
    return resources.files("fusebisect").joinpath("data", "rules_catalog.json").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    """The packaged catalog, loaded once per process and cached. Raises FileNotFoundError if data is missing."""
    return catalog_from_document(json.loads(catalog_text()))
