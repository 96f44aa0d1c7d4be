"""Read, decide and write CANN ``fusion_switch.cfg`` files.

Reading JSON is lenient where people slip (UTF-8 BOM, ``//``/``#``/``/* */`` comments, trailing commas; the lint
reports them) and strict where CANN is strict (values ``on``/``off``; top-level keys only ``Switch``,
``Priority``, ``ExceptionalPassOfO1Level``; Priority values strings holding integers in their level's range).
The old line format ``PassName:on|off`` is read as FE reads it (a comment or a line of spaces fails the whole
file); its entries apply to both GraphFusion and UBFusion. :func:`effective_state` answers "does this pass run?" with CANN's precedence
(FE ``FusionConfigParser::GetFusionSwitchByName``). Writing is canonical and atomic; since CANN does not re-read
a switch file whose path it has already seen in the process, :func:`write_hashed_switch_file` names each file by
its content.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from fusebisect.errors import SwitchFileError, UsageError
from fusebisect.fsutil import atomic_write_bytes, atomic_write_text, is_stream_path, names_descriptor, not_regular
from fusebisect.rules.catalog import GRAPH, KINDS, UB, Catalog, normalize_kind

RULE_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")
TOP_LEVEL_KEYS = ("Switch", "Priority", "ExceptionalPassOfO1Level")
ALL = "ALL"
VALUES = ("on", "off")
# the whitespace FE's Trim takes off a key or value: C's isspace on the file's bytes (ASCII only); a full-width
# (U+3000) or no-break (U+00A0) space stays, so "off\u3000" is neither on nor off
_TRIM = " \t\n\v\f\r"
#: why a value with spaces around "on"/"off" reads as off
PADDED_VALUE = "CANN accepts the spaces but then reads anything but exactly \"on\" as off"


def validate_rule_name(name: str) -> str:
    """Return ``name`` if it only uses characters CANN pass names use (``[A-Za-z0-9_.:-]``).

    Raises UsageError naming the rule otherwise.
    """
    if not isinstance(name, str) or not RULE_NAME_RE.fullmatch(name):
        raise UsageError(f"invalid rule name {name!r}: only letters, digits and _ . : - are allowed")
    return name


@dataclass
class SwitchConfig:
    """The content of one fusion_switch.cfg."""

    graph: dict[str, str] = field(default_factory=dict)  # Switch.GraphFusion: name -> 'on'|'off' (may hold 'ALL')
    ub: dict[str, str] = field(default_factory=dict)  # Switch.UBFusion
    priority: dict = field(default_factory=dict)  # Priority (kept as read)
    o1_exceptions: list[str] = field(default_factory=list)  # ExceptionalPassOfO1Level
    legacy: bool = False  # old "Pass:off" line format (entries apply to both kinds)
    path: Path | None = None
    lenient: list[str] = field(default_factory=list)  # "LINE:COL: comment" read although CANN rejects it
    #: entries CANN reads under another name, so they do nothing (a byte-order mark kept in the first line's pass
    #: name): the name as written -> why; not in the sections
    ignored: dict[str, str] = field(default_factory=dict)
    #: keys CANN takes but that are no pass names (spaces, other characters): they match no pass, so nothing
    #: keeps them; the lint warns of each
    invalid_names: list[str] = field(default_factory=list)
    #: values CANN accepts with spaces around them and then reads as off (" on"): (section, name) -> the value as
    #: written; the sections hold "off" for them
    padded_values: dict[tuple[str, str], str] = field(default_factory=dict)

    def section(self, kind: str) -> dict[str, str]:
        """The name -> value map of one kind ('GraphFusion'/'UBFusion'; 'graph'/'ub' accepted)."""
        return self.graph if normalize_kind(kind) == GRAPH else self.ub

    def mentioned(self) -> list[str]:
        """Every pass name the file names (ALL excluded), sorted, each once."""
        return sorted({n for n in (*self.graph, *self.ub) if n != ALL})


# --------------------------------------------------------------------------------------------------------------
# Lenient JSON reader that keeps positions


@dataclass
class Node:
    """A JSON value with the offset where it starts."""

    value: object  # dict (list of pairs) / list / str / int / float / bool / None
    offset: int
    kind: str  # 'object' | 'array' | 'string' | 'number' | 'bool' | 'null'
    pairs: list[tuple[str, int, "Node"]] | None = None  # objects: (key, key offset, value), file order
    items: list["Node"] | None = None  # arrays


@dataclass
class Leniency:
    """Something fusebisect accepted but CANN's JSON parser would reject."""

    what: str  # 'comment' | 'trailing comma' | 'control character'
    offset: int


class _JSONSyntaxError(Exception):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_MAX_DEPTH = 100
_NUMBER_RE = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0
        self.lenient: list[Leniency] = []

    def skip(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            ch = text[self.pos]
            if ch in " \t\r\n":
                self.pos += 1
            elif ch == "#" or text.startswith("//", self.pos):
                self.lenient.append(Leniency("comment", self.pos))
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                self.lenient.append(Leniency("comment", self.pos))
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise _JSONSyntaxError("unterminated /* comment", self.pos)
                self.pos = end + 2
            else:
                break

    def document(self) -> Node:
        self.skip()
        if self.pos >= len(self.text):
            raise _JSONSyntaxError("empty file (expected a JSON object)", self.pos)
        node = self.value()
        self.skip()
        if self.pos < len(self.text):
            raise _JSONSyntaxError(f"unexpected {self.text[self.pos]!r} after the JSON value", self.pos)
        return node

    def value(self) -> Node:
        self.skip()
        if self.pos >= len(self.text):
            raise _JSONSyntaxError("unexpected end of file", self.pos)
        ch = self.text[self.pos]
        if ch in "{[":
            if self.depth >= _MAX_DEPTH:   # a switch file is 3 levels deep; this keeps the parser's stack bounded
                raise _JSONSyntaxError(f"nested deeper than {_MAX_DEPTH} levels", self.pos)
            self.depth += 1
            try:
                return self.obj() if ch == "{" else self.arr()
            finally:
                self.depth -= 1
        if ch == '"':
            start = self.pos
            return Node(self.string(), start, "string")
        for word, val, kind in (("true", True, "bool"), ("false", False, "bool"), ("null", None, "null")):
            if self.text.startswith(word, self.pos):
                start = self.pos
                self.pos += len(word)
                return Node(val, start, kind)
        m = _NUMBER_RE.match(self.text, self.pos)
        if m and m.end() > self.pos:
            start = self.pos
            self.pos = m.end()
            s = m.group(0)
            if len(s) > 400:   # Python refuses int() past 4300 digits; no switch file value is that long
                raise _JSONSyntaxError(f"a number of {len(s)} characters", start)
            return Node(float(s) if any(c in s for c in ".eE") else int(s), start, "number")
        if ch == "'":
            raise _JSONSyntaxError("strings need double quotes", self.pos)
        raise _JSONSyntaxError(f"unexpected {ch!r} (expected a value)", self.pos)

    def string(self) -> str:
        text = self.text
        self.pos += 1
        out = []
        while True:
            if self.pos >= len(text):
                raise _JSONSyntaxError("unterminated string", self.pos)
            ch = text[self.pos]
            if ch == '"':
                self.pos += 1
                return "".join(out)
            if ch == "\\":
                esc = text[self.pos + 1: self.pos + 2]
                if esc in _ESCAPES:
                    out.append(_ESCAPES[esc])
                    self.pos += 2
                elif esc == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[self.pos + 2: self.pos + 6]):
                    out.append(self._unicode_escape())
                else:
                    raise _JSONSyntaxError("invalid escape in string", self.pos)
            elif ch == "\n":
                raise _JSONSyntaxError("unterminated string (newline inside quotes)", self.pos)
            elif ch < " ":   # JSON wants \t, \u0009...; CANN's parser rejects the raw character
                self.lenient.append(Leniency("control character", self.pos))
                out.append(ch)
                self.pos += 1
            else:
                out.append(ch)
                self.pos += 1

    def _unicode_escape(self) -> str:
        """The character of the \\uXXXX escape at ``pos`` (a surrogate pair's two escapes make one character), and
        moves past it; a lone surrogate is an error, as in CANN's parser."""
        text, at = self.text, self.pos
        code = int(text[at + 2: at + 6], 16)
        self.pos += 6
        if 0xD800 <= code <= 0xDBFF:
            low = text[self.pos: self.pos + 6]
            if re.fullmatch(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}", low):
                self.pos += 6
                return chr(0x10000 + ((code - 0xD800) << 10) + (int(low[2:], 16) - 0xDC00))
        if 0xD800 <= code <= 0xDFFF:
            raise _JSONSyntaxError(f"lone surrogate \\u{code:04X} in string (a pair \\uD8xx\\uDCxx makes one "
                                   "character)", at)
        return chr(code)

    def obj(self) -> Node:
        start = self.pos
        self.pos += 1
        pairs: list[tuple[str, int, Node]] = []
        comma_at = None
        while True:
            self.skip()
            if self.pos >= len(self.text):
                raise _JSONSyntaxError("unterminated object (missing '}')", start)
            ch = self.text[self.pos]
            if ch == "}":
                if comma_at is not None:
                    self.lenient.append(Leniency("trailing comma", comma_at))
                self.pos += 1
                return Node({k: v.value for k, _, v in pairs}, start, "object", pairs=pairs)
            if pairs and comma_at is None:
                raise _JSONSyntaxError("expected ',' or '}'", self.pos)
            if ch != '"':
                why = "strings need double quotes" if ch == "'" else "expected a double-quoted key"
                raise _JSONSyntaxError(why, self.pos)
            key_at = self.pos
            key = self.string()
            self.skip()
            if self.text[self.pos: self.pos + 1] != ":":
                raise _JSONSyntaxError("expected ':' after the key", self.pos)
            self.pos += 1
            pairs.append((key, key_at, self.value()))
            self.skip()
            comma_at = None
            if self.text[self.pos: self.pos + 1] == ",":
                comma_at = self.pos
                self.pos += 1

    def arr(self) -> Node:
        start = self.pos
        self.pos += 1
        items: list[Node] = []
        comma_at = None
        while True:
            self.skip()
            if self.pos >= len(self.text):
                raise _JSONSyntaxError("unterminated array (missing ']')", start)
            if self.text[self.pos] == "]":
                if comma_at is not None:
                    self.lenient.append(Leniency("trailing comma", comma_at))
                self.pos += 1
                return Node([i.value for i in items], start, "array", items=items)
            if items and comma_at is None:
                raise _JSONSyntaxError("expected ',' or ']'", self.pos)
            items.append(self.value())
            self.skip()
            comma_at = None
            if self.text[self.pos: self.pos + 1] == ",":
                comma_at = self.pos
                self.pos += 1


_NEWLINES: tuple[str, list[int]] = ("", [])   # the last text's newline offsets (a lint asks for many positions)


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a character offset in ``text``."""
    global _NEWLINES
    if _NEWLINES[0] is not text:
        _NEWLINES = (text, [m.start() for m in re.finditer("\n", text)])
    newlines = _NEWLINES[1]
    offset = max(0, min(offset, len(text)))
    before = bisect.bisect_left(newlines, offset)   # newlines before the offset
    col = offset - (newlines[before - 1] + 1 if before else 0) + 1
    return before + 1, col


def _strip_bom(text: str) -> tuple[str, bool]:
    if text.startswith("\ufeff"):
        return text[1:], True
    return text, False


def looks_like_json(text: str) -> bool:
    """True if the first non-blank, non-comment character is '{' or '[' (JSON), False for the old line format.

    Comments are those the lenient reader skips (``#``, ``//``, ``/* */`` over any number of lines)."""
    reader = _Reader(text)
    try:
        reader.skip()
    except _JSONSyntaxError:
        # a /* left open: JSON if a line after it starts like JSON (its reader then says where the comment
        # starts), else the old format, which reports the comment line
        return any(line.lstrip().startswith(("{", "[")) for line in text[reader.pos:].splitlines()[1:])
    if reader.pos < len(text):
        return text.startswith(("{", "["), reader.pos)
    # nothing but blanks and comments: an empty file is refused as it is (FE's CheckFileEmpty); anything else fails
    # FE's JSON parse and is read as the old format, where only empty lines are skipped
    return not text


def read_json_tree(text: str, path=None) -> tuple[Node, list[Leniency]]:
    """Parse lenient JSON; return the root node and what was accepted leniently.

    Raises SwitchFileError with line and column on a syntax error.
    """
    reader = _Reader(text)
    try:
        node = reader.document()
    except _JSONSyntaxError as exc:
        line, col = line_col(text, exc.offset)
        raise SwitchFileError(f"invalid JSON: {exc.message}", path=path, line=line, column=col) from None
    return node, reader.lenient


# --------------------------------------------------------------------------------------------------------------
# Interpretation (shared by the strict parser and the linter)


@dataclass
class Problem:
    """One finding about a switch file."""

    severity: str  # 'error' (CANN rejects the file or the entry is invalid) | 'warning' (likely not what you mean)
    #                | 'info' (true but not actionable)
    code: str  # short id, e.g. 'invalid-value', 'unknown-rule'
    message: str
    line: int | None = None
    column: int | None = None
    rule: str | None = None
    section: str | None = None


# FE's JudgePriority for a user file: Top [0, 1000), Main [1000, 2000), Down [2000, 3000)
PRIORITY_RANGES = {"Top": (0, 1000), "Main": (1000, 2000), "Down": (2000, 3000)}


def _kept_pairs(node: Node, dropped) -> list[tuple[str, int, Node]]:
    """The (name, offset, value) pairs of a JSON object that CANN's reader keeps: the last of duplicate keys (an
    earlier value is never judged). ``dropped(name, offset)`` is called for each earlier one, with the offset of
    the value kept."""
    pairs = node.pairs or []
    final = {name: i for i, (name, _at, _val) in enumerate(pairs)}
    kept = []
    for i, (name, at, value) in enumerate(pairs):
        if final[name] == i:
            kept.append((name, at, value))
        else:
            dropped(name, pairs[final[name]][1])
    return kept


def _check_priority(node: Node, add) -> None:
    """What FE's CheckLastLayerFormatForPriorityPart rejects in ``Priority`` (each fails the whole file): a value
    that is not a string holding an integer (a JSON number throws in its reader), one outside its level's range,
    a pass in two levels of one section (one set of names spans Top, Main and Down). A pass twice in one level is
    a warning: the JSON reader keeps its last value before FE looks."""
    def twice_at(label):
        return lambda key, at: add("duplicate", f"{label}{key} appears twice: CANN reads the last one only", at,
                                   severity="warning")

    for sec, _sec_at, levels in _kept_pairs(node, twice_at("Priority.")):
        if levels.kind != "object":
            continue   # the schema names the type
        seen: dict[str, str] = {}    # pass name -> the level that named it first
        for level, _level_at, passes in _kept_pairs(levels, twice_at(f"Priority.{sec}.")):
            bounds = PRIORITY_RANGES.get(level.strip(_TRIM))
            if bounds is None or passes.kind != "object":
                continue
            def twice(name, at, sec=sec, level=level):
                add("duplicate", f"Priority.{sec}.{level}.{name} appears twice in that level: CANN reads the last "
                    "value only", at, severity="warning")

            for name, name_at, val in _kept_pairs(passes, twice):
                label = f"Priority.{sec}.{level}.{name}"
                key = name.strip(_TRIM)
                if key in seen:
                    add("duplicate", f"{label} is also in {seen[key]}: CANN rejects the file (a pass may have one "
                        "priority level)", name_at)
                seen.setdefault(key, level.strip(_TRIM))
                text = val.value.strip(_TRIM) if val.kind == "string" else None
                if text is None or not re.fullmatch(r"-?[0-9]+", text):
                    shown = json.dumps(val.value) if val.kind != "object" else "an object"
                    hint = f" (write \"{val.value}\")" if val.kind == "number" and isinstance(val.value, int) else ""
                    add("priority", f"{label} = {shown}: CANN needs a string holding an integer{hint}", val.offset)
                elif len(text) > 12 or not bounds[0] <= int(text) < bounds[1]:   # (int() refuses 4300+ digits)
                    shown = text if len(text) <= 12 else f"{text[:12]}... ({len(text)} digits)"
                    add("priority", f"{label} = {shown}: a {level.strip(_TRIM)} priority must be in "
                        f"[{bounds[0]}, {bounds[1]})", val.offset)


def _interpret_json(root: Node, text: str, problems: list[Problem], where: dict | None = None,
                    catalog: Catalog | None = None) -> SwitchConfig:
    """Fill a SwitchConfig from the tree; append every structural problem (error severity) to ``problems``.

    ``where`` (optional) receives ``(section, name) -> (line, column)`` of each accepted entry. ``catalog``
    (optional) tells whether the file's own ExceptionalPassOfO1Level list changes anything: without it, a file
    whose Switch names no pass is said to switch nothing only when that list is empty.
    """
    cfg = SwitchConfig()
    where = {} if where is None else where

    def add(code, msg, offset, rule=None, section=None, severity="error"):
        line, col = line_col(text, offset)
        problems.append(Problem(severity, code, msg, line, col, rule, section))

    if root.kind != "object":
        add("not-object", "the file must be a JSON object with a \"Switch\" key", root.offset)
        return cfg
    # CANN reads the file with nlohmann::json, which keeps the last of duplicate keys (at every level): an earlier
    # copy is never judged.
    last = "; CANN's JSON reader keeps only the last one"

    def top_twice(key, at):
        add("duplicate", f"duplicate top-level key {key!r}{last}", at, severity="warning")

    for key, key_at, node in _kept_pairs(root, top_twice):
        raw_key = key
        # FE checks the keys trimmed, but reads its switch map, priorities and exceptions by the exact keys: a
        # padded key passes the check, its part is checked too, and then nothing of it is used
        keep = key in TOP_LEVEL_KEYS
        if not keep and key.strip(_TRIM) in TOP_LEVEL_KEYS:
            add("padded-key", f"top-level key {key!r}: CANN checks it without the spaces but reads only "
                f"{key.strip(_TRIM)!r} exactly, so this part of the file does nothing", key_at, severity="warning")
            key = key.strip(_TRIM)
        elif not keep:
            hint = next((k for k in TOP_LEVEL_KEYS if k.lower() == key.lower()), None)
            add("top-level-key", f"top-level key {key!r} is not allowed: CANN accepts only Switch, Priority and "
                f"ExceptionalPassOfO1Level" + (f" (did you mean {hint!r}?)" if hint else ""), key_at)
            continue
        if key == "Switch":
            if node.kind != "object":
                add("type", "\"Switch\" must be an object with GraphFusion and/or UBFusion", node.offset)
                continue
            def sec_twice(sec, at):
                add("duplicate", f"duplicate section {sec!r} in Switch{last}", at, section=sec, severity="warning")

            for sec, sec_at, sec_node in _kept_pairs(node, sec_twice):
                used = keep and sec in KINDS
                padded = repr(raw_key) if not keep else f"Switch.{sec!r}"   # (the key CANN does not read)
                if sec not in KINDS and sec.strip(_TRIM) in KINDS:
                    bare = sec.strip(_TRIM)
                    add("padded-key", f"section {sec!r} in Switch: CANN checks it without the spaces but reads "
                        f"only {bare!r} exactly, so its entries do nothing", sec_at, section=bare, severity="warning")
                    sec = bare
                elif sec not in KINDS:
                    hint = next((k for k in KINDS if k.lower() == sec.lower()), None)
                    add("section", f"unknown section {sec!r} in Switch: expected GraphFusion or UBFusion"
                        + (f" (did you mean {hint!r}?)" if hint else ""), sec_at, section=sec)
                    continue
                if sec_node.kind != "object":
                    add("type", f"Switch.{sec} must be an object of \"PassName\": \"on\"|\"off\"", sec_node.offset,
                        section=sec)
                    continue
                target = cfg.section(sec) if used else {}   # (a part CANN ignores is checked, never used)
                def located(name, at, sec=sec, used=used, padded=padded):
                    """An entry kept: where it is, or (under a key CANN does not read) why it does nothing."""
                    if used:
                        where[(sec, name)] = line_col(text, at)
                    else:
                        cfg.ignored.setdefault(name, f"named under {padded}: CANN checks that key without its spaces "
                                                     "but reads only the exact one, so this entry does nothing")

                def twice(name, at, sec=sec):
                    add("duplicate", f"{name} appears twice in Switch.{sec}{last}", at, rule=name, section=sec,
                        severity="warning")

                for name, name_at, val in _kept_pairs(sec_node, twice):
                    if not RULE_NAME_RE.fullmatch(name):
                        # CANN stores the name as it is, which matches no pass (its value is still checked)
                        fix = (f" (did you mean {name.strip(_TRIM)!r}?)" if name.strip(_TRIM) != name and
                               RULE_NAME_RE.fullmatch(name.strip(_TRIM)) else "")
                        add("rule-name", f"{name!r} in Switch.{sec} is no pass name (only letters, digits and _ . : "
                            f"- are): CANN takes the file, but the entry matches no pass and does nothing{fix}",
                            name_at, rule=None, section=sec, severity="warning")
                        cfg.invalid_names.append(name)
                        if fix:   # the rule it was meant for: `effective` lists it, with why this entry is void
                            cfg.ignored.setdefault(name.strip(_TRIM), f"written as {name!r}: CANN keeps the spaces "
                                                                      "in the name, which matches no pass, so this "
                                                                      "entry does nothing")
                        if val.kind != "string" or val.value.strip(_TRIM) not in VALUES:
                            shown = json.dumps(val.value) if val.kind != "object" else "an object"
                            add("invalid-value", f"Switch.{sec}[{name!r}] = {shown}: the value must be exactly "
                                "\"on\" or \"off\"", val.offset, section=sec)
                        continue
                    if val.kind == "string" and val.value not in VALUES and val.value.strip(_TRIM) in VALUES:
                        # FE's check trims the value, but its switch map compares it untrimmed with "on"
                        add("padded-value", f"Switch.{sec}.{name} = {json.dumps(val.value)}: {PADDED_VALUE}",
                            val.offset, rule=name, section=sec, severity="warning")
                        target[name] = "off"
                        if used:   # (what the file says, for `effective`'s reason)
                            cfg.padded_values[(sec, name)] = val.value
                        located(name, name_at)
                        continue
                    if val.kind != "string" or val.value not in VALUES:
                        shown = json.dumps(val.value) if val.kind != "object" else "an object"
                        add("invalid-value", f"Switch.{sec}.{name} = {shown}: the value must be exactly \"on\" or "
                            "\"off\"", val.offset, rule=name, section=sec)
                        continue
                    target[name] = val.value
                    located(name, name_at)
        elif key == "Priority":
            if node.kind != "object":
                add("type", "\"Priority\" must be an object", node.offset)
                continue
            _check_priority(node, add)
            if keep:
                cfg.priority = node.value  # type: ignore[assignment]
                for sec, _at, levels in node.pairs or []:   # where each pass name is, for the catalog's warnings
                    for level, _at2, passes in (levels.pairs or []) if levels.kind == "object" else []:
                        for name, name_at, _val in (passes.pairs or []) if passes.kind == "object" else []:
                            where.setdefault((f"Priority.{sec}.{level}", name), line_col(text, name_at))
        else:
            if node.kind != "array" or any(i.kind != "string" for i in node.items or []):
                add("type", "\"ExceptionalPassOfO1Level\" must be an array of pass names", node.offset)
                continue
            if keep:
                cfg.o1_exceptions = list(node.value)  # type: ignore[arg-type]
                for item in node.items or []:
                    where.setdefault((O1_KEY, item.value), line_col(text, item.offset))
    # the file's own ExceptionalPassOfO1Level list turns on what it names (FE reads it before the switch map): it
    # switches something when it names a pass that would not run without the file (a built-in "off" default)
    o1 = ", and ExceptionalPassOfO1Level names only passes that run without the file" if cfg.o1_exceptions else ""
    if problems or cfg.graph or cfg.ub or (o1 and (catalog is None or _o1_list_switches(cfg, catalog))):
        return cfg
    if not any(key == "Switch" for key, _at, _node in root.pairs or []):
        add("no-switch", f"no \"Switch\" key{o1}: this file switches nothing", root.offset, severity="warning")
    else:   # (as an old-format file of empty lines)
        switch = [node for key, _at, node in root.pairs or [] if key == "Switch"][-1]
        add("switches-nothing", f"\"Switch\" names no pass{o1}: this file switches nothing", switch.offset,
            severity="warning")
    return cfg


def _interpret_legacy(text: str, problems: list[Problem], where: dict | None = None,
                      bom: bool = False) -> SwitchConfig:
    """Old format: one ``PassName:on|off`` per line, applying to both kinds; duplicates are errors.

    As FE's LoadOldFormatFusionSwitchFile reads it: lines split at "\\n", only empty ones skipped (a line of
    spaces, a comment or the blank line of a CRLF file has no colon and fails the whole file), the name and the
    value split at the first colon and trimmed."""
    cfg = SwitchConfig(legacy=True)
    where = {} if where is None else where
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.split("\n"), start=1):
        if bom and lineno == 1 and not raw.strip(_TRIM):   # FE's line reader keeps a byte-order mark: a line of it
            problems.append(Problem("error", "syntax", "a byte-order mark alone on the first line: CANN's "
                                    "old-format reader fails the whole file on it", 1, 1))
            continue
        if not raw:
            continue
        s = raw.strip(_TRIM)
        if not s:
            problems.append(Problem("error", "syntax", "a blank line of spaces or a carriage return (CRLF): CANN's "
                                    "old-format reader skips only empty lines, and this one fails the whole file",
                                    lineno, 1))
            continue
        raw = raw.rstrip("\r")
        col = raw.index(s[0]) + 1
        name, sep, value = s.partition(":")
        name, value = name.strip(_TRIM), value.strip(_TRIM)
        commented = name.startswith(("#", "//", "/*"))   # the format has no comments: FE reads the line as any other
        if sep and not name and value in VALUES:
            problems.append(Problem("warning", "no-name", f"{s!r} names no pass: CANN skips the line", lineno, col))
            continue
        if not sep or not name:
            problems.append(Problem("error", "syntax", "a comment without a colon: CANN's old-format reader has no "
                                    "comments, and this line fails the whole file" if commented else
                                    f"expected PassName:on or PassName:off, got {s!r}", lineno, col))
            continue
        if commented:
            if value not in VALUES:
                problems.append(Problem("error", "invalid-value", f"{name}:{value}: CANN reads this comment as an "
                                        "entry, and a value other than on or off fails the whole file", lineno,
                                        col + s.index(":") + 1))
            elif name in seen:
                problems.append(Problem("error", "duplicate", f"{name} appears twice (first on line {seen[name]})",
                                        lineno, col))
            else:
                seen[name] = lineno
                problems.append(Problem("warning", "commented-out", f"{name}:{value}: the old format has no "
                                        f"comments; CANN reads an entry for a pass named {name!r}, which switches "
                                        "nothing", lineno, col))
            continue
        if value not in VALUES:
            problems.append(Problem("error", "invalid-value", f"{name}:{value}: the value must be exactly on or off",
                                    lineno, col + s.index(":") + 1,
                                    rule=name if RULE_NAME_RE.fullmatch(name) else None))
            continue
        if not RULE_NAME_RE.fullmatch(name):
            # FE stores the name as it is (trimmed), which matches no pass (duplicates of it still fail the file)
            if name in seen:
                problems.append(Problem("error", "duplicate", f"{name!r} appears twice (first on line {seen[name]})",
                                        lineno, col))
                continue
            seen[name] = lineno
            problems.append(Problem("warning", "rule-name", f"{name!r} is no pass name (only letters, digits and "
                                    "_ . : - are): CANN takes the file, but the entry matches no pass and does "
                                    "nothing", lineno, col))
            cfg.invalid_names.append(name)
            continue
        if bom and lineno == 1:
            # the line is read like any other (a bad value or no colon fails the file), but FE keeps the
            # byte-order mark in this pass name, which then matches no pass (nor a later line of the same name)
            problems.append(Problem("warning", "bom", f"UTF-8 byte-order mark: CANN's old-format reader keeps it "
                                    f"in the first line's pass name, so {name}'s entry does nothing (save the "
                                    f"file without it)", 1, 1, rule=name))
            cfg.ignored[name] = ("line 1: a UTF-8 byte-order mark starts the file, and CANN's old-format reader "
                                 "keeps it in this pass name: this entry does nothing (save the file without it)")
            continue
        if name in seen:
            problems.append(Problem("error", "duplicate", f"{name} appears twice (first on line {seen[name]})",
                                    lineno, col, rule=name))
            continue
        seen[name] = lineno
        cfg.graph[name] = value
        cfg.ub[name] = value
        where[(GRAPH, name)] = where[(UB, name)] = (lineno, col)
    if not text.strip("\n"):
        problems.append(Problem("warning", "switches-nothing", "the file names no pass: CANN reads it (the old "
                                "line format, every line empty) and it switches nothing", 1, 1))
    return cfg


def decode_switch_bytes(data: bytes, path=None) -> str:
    """Decode file bytes as UTF-8 (a BOM is allowed and kept as U+FEFF). Raises SwitchFileError otherwise."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SwitchFileError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
                              path=path) from None


def read_switch_bytes(path) -> bytes:
    """The raw bytes of a switch file. Raises SwitchFileError if missing, a directory or unreadable."""
    p = Path(path)
    if p.is_dir():
        raise SwitchFileError("is a directory, expected a fusion switch file", path=p)
    if why := not_regular(p):
        raise SwitchFileError(why, path=p)
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise SwitchFileError("no such file", path=p) from None
    except OSError as exc:
        raise SwitchFileError(f"cannot read: {exc.strerror or exc}", path=p) from None


def parse_switch_text(text: str, path=None) -> SwitchConfig:
    """Parse a switch file's text (JSON or the old line format) into a SwitchConfig.

    Raises SwitchFileError (with line and column) for invalid JSON, a top-level key other than Switch/Priority/
    ExceptionalPassOfO1Level, a value that is not on/off (a padded " on " is read as off, as FE reads it), a
    Priority value FE rejects, an invalid rule name, or, in the old format, a duplicate line, a comment or a line
    of spaces (in JSON, the last of duplicate keys counts, as in CANN's reader; ``check_switch`` warns of them).
    """
    text, bom = _strip_bom(text)
    problems: list[Problem] = []
    if looks_like_json(text):
        root, lenient = read_json_tree(text, path)
        cfg = _interpret_json(root, text, problems)
        cfg.lenient = [f"{':'.join(map(str, line_col(text, item.offset)))}: {item.what}" for item in lenient]
        if not any(p.severity == "error" for p in problems):
            # what FE's format check rejects beyond the switches (a Priority level or section it does not know)
            problems.extend(_schema_problems(root, text))
    else:
        cfg = _interpret_legacy(text, problems, bom=bom)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        first = errors[0]
        raise SwitchFileError(first.message, path=path, line=first.line, column=first.column)
    cfg.path = Path(path) if path is not None else None
    return cfg


def parse_switch_file(path) -> SwitchConfig:
    """Read and parse a switch file. Raises SwitchFileError for unreadable, non-UTF-8 or invalid files."""
    return parse_switch_text(decode_switch_bytes(read_switch_bytes(path), path), path)


# --------------------------------------------------------------------------------------------------------------
# CANN precedence


def _state_in(name: str, kind: str, config, catalog, builtin) -> tuple[bool, str]:
    """The pass's state in FE's switch map of one kind: the exact name, then ``ALL``. FE fills the map with
    ``emplace`` (first writer wins), user entries first, then the built-in ones: a key is the user's if the file
    has it, else the built-in config's (looked up, not merged: a lint asks once per entry)."""
    user = config.section(kind) if config is not None else {}
    base = builtin.section(kind) if builtin is not None else catalog.builtin_entries(kind)
    for key in (name, ALL):
        if key in user:
            return user[key] == "on", _in_file(config, kind, key, kind)
        if key in base:
            return base[key] == "on", f"{key}: {base[key]} in the built-in config ({kind})"
    return True, f"not named in {kind}: default on"


def _in_file(config: SwitchConfig, kind: str, key: str, where: str) -> str:
    """``KEY: VALUE in the file (WHERE)`` for ``key`` of the file's ``kind`` section: the value as the file writes
    it, and for a padded one how CANN reads it (a reason never says the file has "off" where it has " on")."""
    written = config.padded_values.get((kind, key))
    if written is None:
        return f"{key}: {config.section(kind)[key]} in the file ({where})"
    return f"{key}: {json.dumps(written)} in the file ({where}), which CANN reads as off"


def _pattern_state(rule: str, config: SwitchConfig | None) -> tuple[bool, str]:
    """A GE pattern pass (GE FusionPassExecutor::IsPassEnable): the exact name in the JSON Switch.GraphFusion,
    then its ALL, then on. Nothing else reaches it: not the old line format, not the UBFusion section, not the
    built-in config nor FE's forbidden-close and ExceptionalPassOfO1Level lists."""
    what = "a GE pattern pass"
    if config is None:
        return True, f"{what}, not switched: default on"
    if config.legacy:
        return True, f"{what} reads only a JSON file's Switch.GraphFusion: this old-format file leaves it on"
    section = config.section(GRAPH)
    for key in (rule, ALL):
        if key in section:
            return section[key] == "on", _in_file(config, GRAPH, key, f"GraphFusion; {what}")
    return True, f"{what}, not named in the file's Switch.GraphFusion: default on"


def explain_state(rule: str, config: SwitchConfig | None, catalog: Catalog, *, kind: str | None = None,
                  builtin: SwitchConfig | None = None) -> tuple[bool, str]:
    """Like :func:`effective_state`, also returning a short reason ("forbidden-close: always on", ...)."""
    entry = catalog.rules.get(rule)
    if entry is not None and entry.ge_pattern:
        return _pattern_state(rule, config)
    if entry is not None and not entry.can_disable:
        return True, f"{entry.always_on}: CANN never switches it off"
    if config is not None and rule in config.o1_exceptions:
        return True, "in this file's ExceptionalPassOfO1Level list: CANN never switches it off"
    want = normalize_kind(kind)
    if want is None and entry is not None and entry.kind in KINDS:
        want = entry.kind
    if want is None and config is not None:
        named = [k for k in KINDS if rule in config.section(k)]
        if len(named) == 1:  # a name the catalog cannot place: trust the section the file put it in
            want = named[0]
    if want is not None:
        return _state_in(rule, want, config, catalog, builtin)
    states = [_state_in(rule, k, config, catalog, builtin) for k in KINDS]
    if all(not on for on, _ in states):
        return False, "off in both sections (kind unknown)"
    on = [why for on, why in states if on]
    off = [why for on, why in states if not on]
    if off:   # (ALL itself, or a custom name in both sections): say both, not the one that said on
        return True, f"kind unknown, on in one section only: {on[0]}; {off[0]}"
    return True, f"kind unknown, on in both sections: {on[0]}"


def _o1_list_switches(config: SwitchConfig, catalog: Catalog) -> bool:
    """True when the file's own ExceptionalPassOfO1Level list turns on a pass that would not run without the file.

    A name the catalog lacks counts as such a pass (the built-in config of a newer CANN may close it); a name
    that is no pass name, or one of a pass that runs anyway (default on, forbidden-close, a GE pattern pass the
    list does not reach), does not.
    """
    for name in config.o1_exceptions:
        if not RULE_NAME_RE.fullmatch(name):
            continue
        if name not in catalog.rules or explain_state(name, config, catalog)[0] != explain_state(name, None,
                                                                                                  catalog)[0]:
            return True
    return False


def effective_state(rule: str, config: SwitchConfig | None, catalog: Catalog, *, kind: str | None = None,
                    builtin: SwitchConfig | None = None) -> bool:
    """Whether pass ``rule`` runs (True) under ``config``, following CANN's order:

    0. a GE pattern pass (REG_FUSION_PASS / REG_DECOMPOSE_PASS in recent CANN) reads only the JSON
       ``Switch.GraphFusion``: its exact name, then ``ALL``, else it runs (steps 1-3 do not apply to it);
    1. forbidden-close passes (ForbiddenClosedPass / FORBIDDEN_CLOSE) and passes in an ExceptionalPassOfO1Level
       list (CANN's built-in one, or the file's own) always run;
    2. in the switch map of the pass's kind, an exact (case-sensitive) name beats ``ALL``;
    3. the map holds user entries first and built-in entries only for keys the user did not set, so user entries
       beat built-in ones, a built-in explicit entry beats a user ``ALL``, and built-in ``off`` defaults stay off
       unless the user names the pass ``on``;
    4. otherwise the pass runs.

    ``builtin`` replaces the catalog's built-in fusion_config.json entries (tests, other CANN versions). ``kind``
    ('graph'/'ub'/'GraphFusion'/'UBFusion') places names the catalog lacks or whose kind is unknown; without it
    the one section of ``config`` naming the pass is used, else the pass counts as off only if both sections turn
    it off. Raises FusebisectError for a bad ``kind``.
    """
    return explain_state(rule, config, catalog, kind=kind, builtin=builtin)[0]


def diff_configs(a: SwitchConfig | None, b: SwitchConfig | None, catalog: Catalog) -> list[dict]:
    """Rules whose effective state differs between ``a`` and ``b``.

    Considers every rule either file names, the built-in entries, and, when a section holds ``ALL``, every catalog
    rule of that kind. Returns ``[{"rule", "kind", "a": "on"|"off", "b": ..., "why_a", "why_b", "in_catalog"}]``
    sorted by name (a name the catalog lacks is off only if CANN has a pass of exactly that name).
    """
    names: set[str] = set()
    for cfg in (a, b):
        if cfg is None:
            continue
        names.update(cfg.mentioned())
        for k in KINDS:
            if ALL in cfg.section(k):
                names.update(r.name for r in catalog.rules.values() if r.kind in (k, "unknown"))
    for k in KINDS:
        names.update(catalog.builtin_entries(k))
    out = []
    for name in sorted(names):
        kinds = _kinds_for(name, a, b, catalog)
        for kind in kinds:
            sa, wa = explain_state(name, a, catalog, kind=kind)
            sb, wb = explain_state(name, b, catalog, kind=kind)
            if sa != sb:
                entry = catalog.rules.get(name)
                out.append({"rule": name, "kind": kind or (entry.kind if entry else "unknown"),
                            "a": "on" if sa else "off", "b": "on" if sb else "off", "why_a": wa, "why_b": wb,
                            "in_catalog": name in catalog.rules})
    return out


def _kinds_for(name: str, a, b, catalog: Catalog) -> list[str | None]:
    """Kinds to evaluate ``name`` under: its catalog kind, else each section that names it in a or b (a name
    the catalog lacks, or a catalog rule of unknown kind), else both sections at once."""
    entry = catalog.rules.get(name)
    if entry is not None and entry.kind in KINDS:
        return [None]
    named = [k for k in KINDS if any(c is not None and name in c.section(k) for c in (a, b))]
    # a pass has one kind: where the catalog cannot say which, an entry in the other section does nothing, so
    # each section named is compared on its own
    return named or [None]


# --------------------------------------------------------------------------------------------------------------
# Building and writing


def off_config(rules: Iterable[str], catalog: Catalog, *, kind: str | None = None) -> SwitchConfig:
    """A config that switches ``rules`` off, each in its catalog section.

    ``kind`` places names the catalog lacks (and catalog rules of unknown kind); a catalog rule of unknown kind
    without ``kind`` goes into both sections. Raises UsageError for an invalid name, or an unknown name without
    ``kind`` (the message carries did-you-mean suggestions).
    """
    want = normalize_kind(kind)
    cfg = SwitchConfig()
    for name in rules:
        validate_rule_name(name)
        entry = catalog.rules.get(name)
        if entry is not None and entry.kind in KINDS:
            cfg.section(entry.kind)[name] = "off"
        elif entry is not None or want is not None:
            for k in ((want,) if want is not None else KINDS):
                cfg.section(k)[name] = "off"
        else:
            hints = catalog.suggest(name)
            hint = f"; did you mean {', '.join(hints)}?" if hints else ""
            raise UsageError(f"unknown rule {name!r} (not in the catalog; pass --kind graph|ub to use it anyway)"
                             f"{hint}")
    return cfg


def all_off_config(catalog: Catalog) -> SwitchConfig:
    """``ALL: off`` in both sections, plus an explicit ``off`` for every built-in explicit ``on`` entry (which a
    user ``ALL`` does not override). Forbidden-close passes still run. Returns the config."""
    cfg = SwitchConfig(graph={ALL: "off"}, ub={ALL: "off"})
    for k in KINDS:
        for name, value in catalog.builtin_entries(k).items():
            if value == "on" and catalog.rules[name].can_disable:
                cfg.section(k)[name] = "off"
    return cfg


def config_document(config: SwitchConfig) -> dict:
    """The JSON document for ``config`` (empty sections omitted; legacy configs become JSON)."""
    switch = {}
    if config.graph:
        switch[GRAPH] = dict(config.graph)
    if config.ub:
        switch[UB] = dict(config.ub)
    doc: dict = {"Switch": switch}
    if config.priority:
        doc["Priority"] = config.priority
    if config.o1_exceptions:
        doc["ExceptionalPassOfO1Level"] = list(config.o1_exceptions)
    return doc


def render_switch(config: SwitchConfig) -> str:
    """Canonical JSON text: sorted keys, 2-space indent, trailing newline. Raises UsageError for a bad name."""
    for name in (*config.graph, *config.ub):
        validate_rule_name(name)
    for name, value in (*config.graph.items(), *config.ub.items()):
        if value not in VALUES:
            raise UsageError(f"invalid value {value!r} for {name}: expected on or off")
    return json.dumps(config_document(config), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def next_backup_path(path) -> Path:
    """Where a backup of ``path`` goes: ``<path>.bak``, or ``<path>.bak.N`` (the first free N) when earlier
    backups exist, so a backup never replaces an older one."""
    p = Path(path)
    candidate = p.with_name(p.name + ".bak")
    n = 1
    while candidate.exists():
        candidate = p.with_name(f"{p.name}.bak.{n}")
        n += 1
    return candidate


def write_switch_file(path, config: SwitchConfig, *, force: bool = False) -> Path:
    """Write ``config`` canonically and atomically to ``path``; return the path.

    An existing file is replaced only with ``force``, and then kept as ``<path>.bak`` (``.bak.N`` if that
    exists: earlier backups are never replaced). Raises UsageError if ``path`` is a directory or exists without
    ``force``; OSError on I/O failure.
    """
    p = Path(path)
    text = render_switch(config)
    if p.is_dir():
        raise UsageError(f"{p}: is a directory, expected a file path for the switch file")
    if is_stream_path(p):   # /dev/stdout and the like: written into, nothing to keep (no .bak in /dev)
        return atomic_write_text(p, text)
    if names_descriptor(p):
        real = p.resolve()
        if not real.is_file():   # a pipe (>(cmd)), a FIFO, a terminal: written into
            return atomic_write_text(p, text)
        raise UsageError(f"{p}: a descriptor open on the file {real}: give that file's path, so that its old content "
                         "can be kept as a .bak")
    if p.exists():
        if not force:
            raise UsageError(f"{p}: already exists (use --force to replace it; the old file is kept as .bak)")
        if p.resolve().is_file():   # a device such as /dev/null has nothing to keep (and is written into)
            # through a synced temporary file renamed into place: a kill mid-copy must not leave a cut-short .bak,
            # which a rerun would keep for good (writing .bak.1 beside it)
            backup = atomic_write_bytes(next_backup_path(p), p.read_bytes())
            shutil.copystat(p, backup)   # its mode and times, as the file had them
    return atomic_write_text(p, text)


def switch_file_name(config: SwitchConfig) -> str:
    """``fusion_switch.<sha256[:12]>.cfg`` for the canonical text of ``config``."""
    digest = hashlib.sha256(render_switch(config).encode("utf-8")).hexdigest()[:12]
    return f"fusion_switch.{digest}.cfg"


def write_hashed_switch_file(directory, config: SwitchConfig) -> Path:
    """Write ``config`` to ``directory/fusion_switch.<sha256[:12]>.cfg`` (created if needed); return the path.

    Idempotent: an existing file with that name already holds this content and is left alone. Different configs
    get different paths, so a process that caches switch files by path still sees each one. Raises UsageError
    if ``directory`` is a file; OSError on I/O failure.
    """
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise UsageError(f"{d}: is a file, expected a directory for switch files")
    text = render_switch(config)
    target = d / switch_file_name(config)
    if target.is_file():
        try:
            if target.read_text(encoding="utf-8") == text:
                return target
        except (OSError, UnicodeDecodeError):
            pass
    return atomic_write_text(target, text)


# --------------------------------------------------------------------------------------------------------------
# Lint (`fusebisect cfg check`)


@dataclass
class CheckReport:
    """The findings of :func:`check_switch_text`."""

    path: str | None
    format: str  # 'json' | 'legacy'
    problems: list[Problem]
    config: SwitchConfig | None  # what CANN would apply (invalid entries dropped); None if unparseable

    @property
    def ok(self) -> bool:
        """True when there is no error or warning (info notes do not count)."""
        return not any(p.severity in ("error", "warning") for p in self.problems)

    def to_json(self) -> dict:
        """``{"file", "format", "ok", "problems": [{severity, code, message, line, column, rule, section}]}``."""
        return {"file": self.path, "format": self.format, "ok": self.ok,
                "problems": [p.__dict__.copy() for p in self.problems]}


def switch_schema() -> dict:
    """The JSON Schema of the switch file (package data ``fusebisect/data/fusion_switch.schema.json``)."""
    from importlib import resources

    text = resources.files("fusebisect").joinpath("data", "fusion_switch.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def _node_at(root: Node, path) -> Node:
    node = root
    for part in path:
        if node.kind == "object" and node.pairs is not None:
            match = [v for k, _, v in node.pairs if k == part]
            if not match:
                break
            node = match[-1]
        elif node.kind == "array" and node.items is not None and isinstance(part, int) and part < len(node.items):
            node = node.items[part]
        else:
            break
    return node


@functools.cache
def _schema_validator():
    """The validator of :func:`switch_schema`, built once (every switch file parsed is checked against it)."""
    import jsonschema

    return jsonschema.Draft202012Validator(switch_schema())


def _schema_problems(root: Node, text: str) -> list[Problem]:
    validator = _schema_validator()
    out = []
    for error in sorted(validator.iter_errors(root.value), key=lambda e: list(map(str, e.absolute_path))):
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        line, col = line_col(text, _node_at(root, error.absolute_path).offset)
        message = error.message
        patterns = error.schema.get("patternProperties") if isinstance(error.schema, dict) else None
        if error.validator == "additionalProperties" and patterns and isinstance(error.instance, dict):
            # the schema's regexes say which keys CANN reads here: named, not quoted as regexes
            allowed = [n for n in re.findall(r"[A-Za-z][A-Za-z0-9]{2,}", " ".join(patterns)) if n != "x0b"]
            bad = [k for k in error.instance if not any(re.search(pat, k) for pat in patterns)]
            if bad:
                message = (f"key {bad[0]!r} is not allowed: CANN reads only {', '.join(dict.fromkeys(allowed))} "
                           "here (ASCII spaces around them aside)")
        out.append(Problem("error", "schema", f"{where}: {message}", line, col))
    return out


def check_switch_text(text: str, catalog: Catalog, path=None, *, allow_unknown: bool = False) -> CheckReport:
    """Lint a switch file's text against CANN's rules and the catalog; return every finding.

    Errors: invalid JSON (with position), syntax CANN rejects (comments, trailing commas), invalid keys or values,
    invalid names, duplicates. Warnings: unknown names (with did-you-mean), case mismatches, documentation
    spellings, a rule in the wrong section, rules that can never be disabled, an ``ALL: off`` that leaves
    built-in explicit ``on`` entries on, a file that switches nothing. Infos: a BOM, the old format, what ``ALL`` never closes; with
    ``allow_unknown``, names the catalog lacks (custom passes) too. Never raises for content problems.
    """
    problems: list[Problem] = []
    where: dict[tuple[str, str], tuple[int, int]] = {}
    text, bom = _strip_bom(text)
    if bom and looks_like_json(text):
        problems.append(Problem("info", "bom", "UTF-8 byte-order mark at the start (CANN's JSON reader skips it)",
                                1, 1))
    if looks_like_json(text):
        fmt = "json"
        reader = _Reader(text)
        try:
            root = reader.document()
        except _JSONSyntaxError as exc:
            line, col = line_col(text, exc.offset)
            problems.append(Problem("error", "json", f"invalid JSON: {exc.message}", line, col))
            return CheckReport(None if path is None else str(path), fmt, problems, None)
        for item in reader.lenient:
            line, col = line_col(text, item.offset)
            problems.append(Problem("error", item.what.replace(" ", "-"),
                                    f"{item.what}: CANN's JSON parser rejects it (fusebisect reads it; "
                                    f"`fusebisect cfg off ... --out F` writes clean files)", line, col))
        structural: list[Problem] = []
        cfg = _interpret_json(root, text, structural, where, catalog)
        problems.extend(structural)
        if not any(p.severity == "error" for p in structural):
            problems.extend(_schema_problems(root, text))  # the interpreter and the schema should agree
    else:
        fmt = "legacy"
        cfg = _interpret_legacy(text, problems, where, bom=bom)
        problems.append(Problem("info", "legacy-format", "old line format: every entry applies to both GraphFusion "
                                "and UBFusion", 1, 1))
    problems.extend(_catalog_problems(cfg, catalog, where, allow_unknown))
    problems.sort(key=lambda p: (p.line or 0, p.column or 0))
    return CheckReport(None if path is None else str(path), fmt, problems, cfg)


_MAX_HINTS = 200   # names the catalog lacks that get did-you-mean hints, per file
O1_KEY = TOP_LEVEL_KEYS[2]   # the file's own list of passes FE keeps on


def unknown_name(name: str, label: str, catalog: Catalog, allow_unknown: bool, hint: bool) -> tuple[str, str, str]:
    """(severity, code, message) for a pass name the catalog does not hold as it is written: a spelling of a rule,
    a case mismatch, or unknown (with did-you-mean names when ``hint``: each costs ~5 ms, so a file of 20 000
    custom names gets them for its first ones only)."""
    real = catalog.get(name)
    if real is not None:
        return ("warning", "spelling", f"{label}: {name!r} is a spelling of {real.name!r}; CANN matches exact "
                f"names, so this entry does nothing (use {real.name!r})")
    if name.upper() == ALL:
        return ("warning", "case-mismatch", f"{label}: no rule {name!r}; the key for every pass of a section is "
                f"{ALL!r} (names are case-sensitive)")
    if catalog.case_matches(name):
        return ("warning", "case-mismatch", f"{label}: no rule {name!r}; names are case-sensitive: did you mean "
                f"{' or '.join(repr(n) for n in catalog.case_matches(name))}?")
    if allow_unknown:   # a custom pass, as run --allow-unknown-rules takes it
        return "info", "unknown-rule", f"{label}: {name!r} is not in the catalog (allowed: --allow-unknown-rules)"
    hints = catalog.suggest(name) if hint else []
    return ("warning", "unknown-rule", f"{label}: {name!r} is not in the catalog"
            + (f"; did you mean {', '.join(repr(h) for h in hints)}?" if hints else
               " (fine for a custom or newer pass; check the spelling)"))


def name_problems(cfg: SwitchConfig, catalog: Catalog, only: set[str] | None = None) -> list[Problem]:
    """What the catalog says about the names ``cfg`` uses (``only``: these of them): misspellings, unknown or
    case-mismatched names, rules in the wrong section, "off" for forbidden-close rules (Problems without line
    numbers)."""
    return _catalog_problems(cfg, catalog, {}, only=only)


def _catalog_problems(cfg: SwitchConfig, catalog: Catalog, where: dict,
                      allow_unknown: bool = False, only: set[str] | None = None) -> list[Problem]:
    out: list[Problem] = []
    unknown = 0   # names the catalog lacks, so far
    sections = [GRAPH] if cfg.legacy else list(KINDS)
    for sec in sections:
        for name, value in cfg.section(sec).items():
            if only is not None and name not in only:
                continue
            line, col = where.get((sec, name), (None, None))
            label = name if cfg.legacy else f"Switch.{sec}.{name}"

            def add(severity, code, message):
                out.append(Problem(severity, code, message, line, col, name, None if cfg.legacy else sec))

            if name == ALL:
                continue
            entry = catalog.rules.get(name)
            # FE's list: a GE pattern pass reads only Switch.GraphFusion (explain_state), so the list keeps it on not
            if value == "off" and name in cfg.o1_exceptions and not (entry is not None and entry.ge_pattern):
                add("warning", "own-o1-exception", f"{label}: {name} is also in this file's "
                    "ExceptionalPassOfO1Level list, which keeps it on: \"off\" does nothing")
            if entry is None:
                add(*unknown_name(name, label, catalog, allow_unknown, unknown < _MAX_HINTS))
                unknown += not allow_unknown and catalog.get(name) is None and not catalog.case_matches(name)
                continue
            if entry.spelling_of:
                real = catalog.rules.get(entry.spelling_of)
                if real is not None and not real.can_disable:   # then naming it right does nothing either
                    others = [n for n in catalog.case_matches(real.name)
                              if n != name and catalog.rules[n].can_disable and not catalog.rules[n].spelling_of]
                    fix = (f"{real.name!r} is forbidden-close (CANN always runs it)"
                           + (f"; {', '.join(repr(n) for n in others)} is another pass, which can be switched off"
                              if others else ""))
                else:
                    fix = f"use {entry.spelling_of!r}"
                add("warning", "spelling", f"{label}: {name!r} is a listing spelling of {entry.spelling_of!r}; no "
                    f"pass has this exact name, so this entry does nothing ({fix})")
            if not cfg.legacy and entry.kind in KINDS and entry.kind != sec:
                add("warning", "wrong-section", f"{label}: {name} is a {entry.kind} rule; in {sec} it does nothing "
                    f"(move it to Switch.{entry.kind})")
            if cfg.legacy and entry.ge_pattern:
                add("warning", "legacy-ge-pattern", f"{label}: {name} is registered as a GE pattern pass "
                    "(REG_FUSION_PASS/REG_DECOMPOSE_PASS) in recent CANN, and those read only the JSON "
                    "Switch.GraphFusion: in the old line format this entry may do nothing (write the file as JSON: "
                    "`fusebisect cfg off ... --out F`)")
            if value == "off" and not entry.can_disable and not entry.spelling_of:
                add("warning", "cannot-disable", f"{label}: {name} is {entry.always_on}: CANN always runs it, so "
                    "\"off\" does nothing")
            siblings = catalog.case_matches(name)
            if siblings and not entry.spelling_of:
                add("info", "case-sibling", f"{label}: {name} and {', '.join(siblings)} differ only in case and "
                    "are different passes")
    # the file's ExceptionalPassOfO1Level list and Priority name passes too: a typo there protects or ranks nothing
    named = [(O1_KEY, name) for name in dict.fromkeys(cfg.o1_exceptions)]
    for sec, levels in cfg.priority.items() if isinstance(cfg.priority, dict) else ():
        for level, passes in levels.items() if isinstance(levels, dict) else ():
            named += [(f"Priority.{sec}.{level}", name) for name in passes] if isinstance(passes, dict) else []
    for part, name in named:
        if (only is not None and name not in only) or name == ALL:
            continue
        line, col = where.get((part, name), (None, None))
        label = f"{part}: {name!r}"
        if not RULE_NAME_RE.fullmatch(name):
            out.append(Problem("warning", "rule-name", f"{label} is no pass name (only letters, digits and _ . : - "
                               "are): it matches no pass and does nothing", line, col))
            continue
        entry = catalog.rules.get(name)
        if entry is None:
            severity, code, message = unknown_name(name, part, catalog, allow_unknown, unknown < _MAX_HINTS)
            unknown += not allow_unknown and catalog.get(name) is None and not catalog.case_matches(name)
            out.append(Problem(severity, code, message, line, col, name))
        elif entry.spelling_of:
            out.append(Problem("warning", "spelling", f"{label} is a listing spelling of {entry.spelling_of!r}; "
                               f"no pass has this exact name, so it does nothing (use {entry.spelling_of!r})",
                               line, col, name))
        elif part == O1_KEY and entry.ge_pattern and not _pattern_state(name, cfg)[0]:
            # GE reads only Switch.GraphFusion for it (explain_state): listed here, it is still closed
            key = name if name in cfg.graph else ALL
            out.append(Problem("warning", "o1-ge-pattern", f"{label} is a GE pattern pass (REG_FUSION_PASS/"
                               "REG_DECOMPOSE_PASS) in recent CANN, which reads only Switch.GraphFusion for it: this "
                               f"list does not keep it on, and the file's Switch.GraphFusion.{key} = off closes it "
                               f"(name it \"on\" there to keep it on)", line, col, name))
    for sec in KINDS:   # an old-format ALL line applies to both kinds, like every line of that format
        value = cfg.section(sec).get(ALL)
        if value is None:
            continue
        line, col = where.get((sec, ALL), where.get((GRAPH, ALL), (None, None)))
        label = f"ALL ({sec})" if cfg.legacy else f"Switch.{sec}.ALL"
        named = cfg.section(sec)
        if value == "off":
            builtin_on = [n for n, v in catalog.builtin_entries(sec).items()
                          if v == "on" and n not in named and catalog.rules[n].can_disable]
            if builtin_on:
                entry = "a line <name>:off" if cfg.legacy else "\"<name>\": \"off\""
                out.append(Problem("warning", "all-incomplete", f"{label} = off leaves on the passes CANN's built-in "
                                   f"config names \"on\" ({', '.join(builtin_on)}); add {entry} for each "
                                   "to close them", line, col, ALL, sec))
            patterns = [r.name for r in catalog.rules.values()
                        if r.ge_pattern and r.can_disable and r.kind == sec] if cfg.legacy else []
            if patterns:   # they read only a JSON file's Switch.GraphFusion (explain_state)
                out.append(Problem("warning", "legacy-all-ge-pattern", f"{label} = off in the old line format leaves "
                                   f"on the {len(patterns)} GE pattern passes (REG_FUSION_PASS/REG_DECOMPOSE_PASS in "
                                   f"recent CANN, e.g. {', '.join(sorted(patterns)[:3])}): they read only a JSON "
                                   "file's Switch.GraphFusion (`fusebisect cfg all-off --out F` writes one that closes "
                                   "them)", line, col, ALL, sec))
            forbidden = [r.name for r in catalog.rules.values()   # (a listing's misspelling names no pass)
                         if r.kind == sec and not r.can_disable and not r.spelling_of]
            if forbidden:
                out.append(Problem("info", "all-forbidden", f"{label} = off never closes the {len(forbidden)} "
                                   f"{sec} passes CANN always runs (forbidden-close or in its "
                                   f"ExceptionalPassOfO1Level list, e.g. {', '.join(forbidden[:3])}); "
                                   "`fusebisect rules list --json` shows can_disable", line, col, ALL, sec))
        else:
            builtin_off = [n for n, v in catalog.builtin_entries(sec).items() if v == "off" and n not in named]
            if builtin_off:
                out.append(Problem("info", "all-on-builtin-off", f"{label} = on keeps the {len(builtin_off)} built-in "
                                   f"\"off\" passes off (e.g. {', '.join(builtin_off[:3])}); name one \"on\" to "
                                   "enable it", line, col, ALL, sec))
    return out


def check_switch_file(path, catalog: Catalog, *, allow_unknown: bool = False) -> CheckReport:
    """Lint the file at ``path``. Raises SwitchFileError if it is missing, a directory, unreadable or not UTF-8."""
    return check_switch_text(decode_switch_bytes(read_switch_bytes(path), path), catalog, path,
                             allow_unknown=allow_unknown)
