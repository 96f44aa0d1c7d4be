"""Fast, selective reader of GE graph dumps in protobuf text format (``ge_proto_*.txt``, a ``ge.proto.ModelDef``).

It extracts only what fusebisect needs from each op (name, type, id, inputs, a few op attrs, and a few attrs of
each ``output_desc``) and skips everything else (weights, large attr values, input descs) by matching whole
brace-balanced blocks with one precompiled regular expression, so a file of hundreds of MB reads many times
faster than ``google.protobuf.text_format.Parse`` would build the full message tree.

The grammar follows protobuf's text format, not the printer's layout: whitespace and line breaks are free
(a message may sit on one line), ``#`` comments, ``,``/``;`` separators, ``<...>`` message delimiters,
``field: [a, b]`` repeated-value lists, adjacent string literals that concatenate, and C escapes (``\\"``,
``\\\\``, octal ``\\ddd``, hex ``\\xHH``) are all accepted. Strings are decoded leniently: UTF-8, else GBK (what
Huawei's own scripts assume), else UTF-8 with replacement characters.

The result is a list of :class:`RawGraph` holding :class:`RawOp` records whose attrs are plain dicts of the
``AttrDef`` oneof (``{"s": str}``, ``{"i": int}``, ``{"b": bool}``, ``{"list": {"s": [...], "i": [...]}}``);
``fusebisect.compare.graph`` turns them into ``OpInfo``. Every malformation raises
:class:`fusebisect.errors.GraphFormatError` with the line and column.
"""

from __future__ import annotations

import contextlib
import gc
import re
from dataclasses import dataclass, field

from fusebisect.errors import GraphFormatError

#: op attrs we extract (everything else is skipped unread)
OP_ATTR_KEYS = frozenset({
    "pass_name", "pass_name_ub", "_datadump_original_op_names", "_datadump_original_op_types",
    "fusion_scope", "_datadump_is_multiop", "_L1_fusion_sub_graph_no",
})
#: output_desc attrs we extract
DESC_ATTR_KEYS = frozenset({
    "_datadump_origin_name", "_datadump_origin_output_index", "origin_format", "_datadump_origin_format",
    "origin_shape",
})


@dataclass
class RawOp:
    """One ``OpDef`` reduced to the extracted fields (attr values as AttrDef-oneof dicts)."""

    name: str = ""
    type: str = ""
    id: int | None = None                      # None when the field is absent (proto3 default 0)
    inputs: list[str] = field(default_factory=list)
    attrs: dict[str, dict] = field(default_factory=dict)
    outputs: list[dict[str, dict]] = field(default_factory=list)   # per output_desc: its extracted attrs


@dataclass
class RawGraph:
    """One ``GraphDef``: its name and ops in file order."""

    name: str = ""
    ops: list[RawOp] = field(default_factory=list)


# --------------------------------------------------------------------------------------------------- regexes
_WS = rb"[ \t\r\n\f\v]*"
_SEPWS = rb"[ \t\r\n\f\v,;]*"
_STR = rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"' + rb"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'"
_PLAIN = rb"[^{}<>\"']*"


def _block_pattern(depth: int) -> bytes:
    """A regex matching a ``{...}``/``<...>`` block nested at most ``depth`` levels, strings kept atomic."""
    inner = None
    for _ in range(depth):
        alt = _STR if inner is None else _STR + rb"|" + inner
        inner = rb"[{<]" + _PLAIN + rb"(?:(?:" + alt + rb")" + _PLAIN + rb")*[}>]"
    return inner


_BLOCK_SRC = _block_pattern(14)
_BLOCK = re.compile(_BLOCK_SRC).match
_FIELD = re.compile(_SEPWS + rb"([A-Za-z_][A-Za-z0-9_]*)" + _WS + rb"(:?)" + _WS).match
_END = re.compile(_SEPWS + rb"[}>]").match
_EOF = re.compile(_SEPWS + rb"\Z").match
_STR_AT = re.compile(_STR).match
_WS_STR = re.compile(_WS + rb"(" + _STR + rb")").match
_SKIP_SCAN = re.compile(rb"(" + _STR + rb")|([{<])|([}>])|([\"'])")
_TOKEN = re.compile(rb"[-+]?[A-Za-z0-9_.][A-Za-z0-9_.+-]*").match
_LIST_SEP = re.compile(_WS + rb"([,\]])" + _WS).match
_WSM = re.compile(_WS).match
_COMMENT_OR_STR = re.compile(rb"(" + _STR + rb")|#[^\n]*")
# `attr { key: "..." value { ... } }` in one match: the common layout, skipped or parsed without a token loop
_MAP_ENTRY = re.compile(rb"[{<]" + _SEPWS + rb"key" + _WS + rb":" + _WS + rb"(" + _STR + rb")" + _SEPWS
                        + rb"value" + _WS + rb":?" + _WS + rb"(" + _BLOCK_SRC + rb")" + _SEPWS + rb"[}>]").match
_VALUE_TOKEN = rb"[-+]?[A-Za-z0-9_.][A-Za-z0-9_.+-]*"
_SCALAR_VALUE = rb"(?:" + _STR + rb")(?:" + _WS + rb"(?:" + _STR + rb"))*|" + _VALUE_TOKEN


def _skip_run(interesting: list[bytes], keys: frozenset) -> re.Pattern:
    """A regex skipping, in one match, a run of fields not named in ``interesting`` and of ``attr`` map entries
    (printer layout, plain key) whose key is not in ``keys``. It stops before anything else."""
    names = b"|".join(interesting)
    key_alt = b"|".join(re.escape(k.encode()) for k in sorted(keys))
    other_field = (rb"(?!(?:" + names + rb")\b)[A-Za-z_][A-Za-z0-9_]*" + _WS
                   + rb"(?::" + _WS + rb"(?:" + _BLOCK_SRC + rb"|" + _SCALAR_VALUE + rb")|" + _BLOCK_SRC + rb")")
    other_attr = (rb"attr" + _WS + rb":?" + _WS + rb"[{<]" + _SEPWS + rb"key" + _WS + rb":" + _WS
                  + rb"\"(?!(?:" + key_alt + rb")\")[^\"\\\n]*\"" + _SEPWS + rb"value" + _WS + rb":?" + _WS
                  + _BLOCK_SRC + _SEPWS + rb"[}>]")
    return re.compile(rb"(?:" + _SEPWS + rb"(?:" + other_attr + rb"|" + other_field + rb"))*")


_SIMPLE_ATTR = re.compile(rb"[{<]" + _SEPWS + rb"([sib])" + _WS + rb":" + _WS + rb"(" + _STR + rb"|" + _VALUE_TOKEN
                          + rb")" + _SEPWS + rb"[}>]").match
_LIST_ATTR = re.compile(rb"[{<]" + _SEPWS + rb"list" + _WS + rb":?" + _WS + rb"[{<]((?:" + _SEPWS
                        + rb"(?:[sib]|val_type)" + _WS + rb":" + _WS + rb"(?:" + _STR + rb"|" + _VALUE_TOKEN
                        + rb"))*)" + _SEPWS + rb"[}>]" + _SEPWS + rb"[}>]").match
_LIST_ITEM = re.compile(rb"([sib]|val_type)" + _WS + rb":" + _WS + rb"(" + _STR + rb"|" + _VALUE_TOKEN + rb")")
_SKIP_OP = _skip_run([b"name", b"type", b"id", b"input", b"attr", b"output_desc"], OP_ATTR_KEYS).match
_SKIP_DESC = _skip_run([b"attr"], DESC_ATTR_KEYS).match
_ESCAPE = re.compile(rb"\\(?:([0-7]{1,3})|[xX]([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))",
                     re.S)
_SIMPLE_ESCAPES = {b"n": b"\n", b"t": b"\t", b"r": b"\r", b"a": b"\a", b"b": b"\b", b"f": b"\f", b"v": b"\v",
                   b"\\": b"\\", b"'": b"'", b'"': b'"', b"?": b"?"}
_OPEN = frozenset((b"{", b"<"))
_TRUE = frozenset((b"true", b"True", b"t", b"1"))
_FALSE = frozenset((b"false", b"False", b"f", b"0"))


# --------------------------------------------------------------------------------------------------- strings
def _escape_sub(m: re.Match) -> bytes:
    octal, hx, u4, u8, simple = m.groups()
    if octal is not None:
        return bytes((int(octal, 8) & 0xFF,))
    if hx is not None:
        return bytes((int(hx, 16),))
    if u4 is not None or u8 is not None:
        code = int(u4 or u8, 16)
        return chr(code).encode("utf-8", "surrogatepass") if code <= 0x10FFFF else b"?"
    if simple in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[simple]
    raise ValueError(f"invalid escape sequence '\\{simple.decode('latin-1')}'")


def unescape(literal: bytes) -> bytes:
    """Return the bytes of one quoted C-escaped literal (quotes included in ``literal``).

    Raises ValueError on an invalid escape sequence.
    """
    inner = literal[1:-1]
    if b"\\" not in inner:
        return inner
    return _ESCAPE.sub(_escape_sub, inner)


def decode_text(raw: bytes) -> str:
    """Return ``raw`` decoded leniently: UTF-8, else GBK, else UTF-8 with U+FFFD replacements. Never raises."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode("gbk")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace")


# --------------------------------------------------------------------------------------------------- parser
class _Parser:
    """Recursive descent over the bytes of one text-format ModelDef, extracting only the needed fields."""

    def __init__(self, data: bytes, path=None) -> None:
        if b"#" in data:  # comments are rare in GE dumps: strip them once (strings kept, newlines kept)
            data = _COMMENT_OR_STR.sub(lambda m: m.group(1) if m.group(1) is not None else b"", data)
        self.data = data
        self.path = path

    # -- errors
    def error(self, pos: int, reason: str) -> GraphFormatError:
        data = self.data
        pos = max(0, min(pos, len(data)))
        # point at the first non-blank byte at or after pos, which is where parsing stopped
        m = _WSM(data, pos)
        if m is not None:
            pos = m.end()
        line = data.count(b"\n", 0, pos) + 1
        column = pos - (data.rfind(b"\n", 0, pos) + 1) + 1
        near = data[pos:pos + 20].split(b"\n")[0].decode("utf-8", "replace")
        where = f"line {line}, column {column}"
        if pos >= len(data):
            where += " (end of file)"
        elif near:
            where += f" near {near!r}"
        return GraphFormatError(f"not a readable GE graph text: {where}: {reason}", path=self.path)

    # -- low level
    def field(self, pos: int):
        """Return (name, has_colon, pos_after) or None when the next token is not a field name."""
        m = _FIELD(self.data, pos)
        if m is None:
            return None
        return m.group(1), m.group(2), m.end()

    def end(self, pos: int) -> int | None:
        m = _END(self.data, pos)
        return m.end() if m is not None else None

    def expect_end_or_field(self, pos: int) -> GraphFormatError:
        return self.error(pos, "expected a field name or the end of the message")

    def skip_block(self, pos: int) -> int:
        """Skip a ``{...}`` or ``<...>`` block starting at ``pos``; return the position after it."""
        m = _BLOCK(self.data, pos)
        if m is not None:
            return m.end()
        return self._skip_block_slow(pos)

    def _skip_block_slow(self, pos: int) -> int:
        # deeper than the regex handles, or malformed: count delimiters token by token
        depth = 0
        data = self.data
        for m in _SKIP_SCAN.finditer(data, pos):
            if m.group(2):
                depth += 1
            elif m.group(3):
                depth -= 1
                if depth == 0:
                    return m.end()
            elif m.group(4):
                raise self.error(m.start(), "unterminated string")
        raise self.error(len(data), "unbalanced braces: a message is not closed")

    def scalar(self, pos: int, has_colon: bytes):
        """Read one scalar value at ``pos``: ('s', bytes) for strings, ('t', token) otherwise; return (kind, v, pos)."""
        if not has_colon:
            raise self.error(pos, "expected ':' after a field name")
        data = self.data
        m = _STR_AT(data, pos)
        if m is not None:
            try:
                value = unescape(m.group(0))
                end = m.end()
                m = _WS_STR(data, end)
                while m is not None:  # adjacent literals concatenate
                    value += unescape(m.group(1))
                    end = m.end()
                    m = _WS_STR(data, end)
            except ValueError as exc:
                raise self.error(pos, str(exc)) from None
            return "s", value, end
        m = _TOKEN(data, pos)
        if m is None:
            c = data[pos:pos + 1]
            if c in (b'"', b"'"):
                raise self.error(pos, "unterminated string")
            raise self.error(pos, "expected a value")
        return "t", m.group(0), m.end()

    def values(self, pos: int, has_colon: bytes):
        """Read a scalar or a ``[a, b, ...]`` list of scalars; return (list of (kind, value), pos)."""
        data = self.data
        if data[pos:pos + 1] != b"[":
            kind, v, pos = self.scalar(pos, has_colon)
            return [(kind, v)], pos
        if not has_colon:
            raise self.error(pos, "expected ':' before a list of values")
        out = []
        pos = _WSM(data, pos + 1).end()
        if data[pos:pos + 1] == b"]":
            return out, pos + 1
        while True:
            kind, v, pos = self.scalar(pos, b":")
            out.append((kind, v))
            m = _LIST_SEP(data, pos)
            if m is None:
                raise self.error(pos, "expected ',' or ']' in a list of values")
            pos = m.end()
            if m.group(1) == b"]":
                return out, pos

    def skip_field_value(self, pos: int, has_colon: bytes) -> int:
        """Skip the value of a field we do not extract (message, list, or scalar)."""
        data = self.data
        c = data[pos:pos + 1]
        if c in _OPEN:
            return self.skip_block(pos)
        if c == b"[":
            pos = _WSM(data, pos + 1).end()
            if data[pos:pos + 1] == b"]":
                return pos + 1
            while True:
                if data[pos:pos + 1] in _OPEN:
                    pos = self.skip_block(pos)
                else:
                    _, _, pos = self.scalar(pos, b":")
                m = _LIST_SEP(data, pos)
                if m is None:
                    raise self.error(pos, "expected ',' or ']' in a list")
                pos = m.end()
                if m.group(1) == b"]":
                    return pos
        _, _, pos = self.scalar(pos, has_colon)
        return pos

    def messages(self, pos: int, parse):
        """Parse the message(s) of a message field: one ``{...}`` or a ``[{...}, {...}]`` list.

        ``parse(pos) -> pos_after`` is called at each message's opening delimiter; returns the position after.
        """
        data = self.data
        c = data[pos:pos + 1]
        if c in _OPEN:
            return parse(pos)
        if c == b"[":
            pos = _WSM(data, pos + 1).end()
            if data[pos:pos + 1] == b"]":
                return pos + 1
            while True:
                if data[pos:pos + 1] not in _OPEN:
                    raise self.error(pos, "expected '{' in a list of messages")
                pos = parse(pos)
                m = _LIST_SEP(data, pos)
                if m is None:
                    raise self.error(pos, "expected ',' or ']' in a list of messages")
                pos = m.end()
                if m.group(1) == b"]":
                    return pos
        raise self.error(pos, "expected '{' to open a message")

    # -- typed scalars
    def as_str(self, kind: str, v: bytes, pos: int) -> str:
        if kind != "s":
            raise self.error(pos, f"expected a string, got {v.decode('latin-1')!r}")
        if v.isascii():
            return v.decode("ascii")
        return decode_text(v)

    def as_int(self, kind: str, v: bytes, pos: int) -> int:
        if kind == "t":
            try:
                return int(v, 0)
            except ValueError:
                try:
                    return int(v, 10)  # leading zeros
                except ValueError:
                    pass
        raise self.error(pos, f"expected an integer, got {v.decode('latin-1')!r}")

    def as_bool(self, kind: str, v: bytes, pos: int) -> bool:
        if kind == "t":
            if v in _TRUE:
                return True
            if v in _FALSE:
                return False
        raise self.error(pos, f"expected true or false, got {v.decode('latin-1')!r}")

    # -- messages
    def parse_model(self) -> list[RawGraph]:
        data = self.data
        if data.startswith(b"\xef\xbb\xbf"):
            pos = 3
        else:
            pos = 0
        graphs: list[RawGraph] = []
        loose: RawGraph | None = None   # a bare GraphDef (ops at top level) is accepted too
        model_name = ""
        while True:
            f = self.field(pos)
            if f is None:
                if _EOF(data, pos):
                    break
                raise self.error(pos, "expected a field name")
            name, colon, pos = f
            if name == b"graph":
                pos = self.messages(pos, lambda p: self._graph(p, graphs))
            elif name == b"op":
                if loose is None:
                    loose = RawGraph(model_name)
                    graphs.append(loose)
                pos = self.messages(pos, lambda p: self._op(p, loose.ops))
            elif name == b"name" and data[pos:pos + 1] not in _OPEN:
                vals, pos = self.values(pos, colon)
                model_name = self.as_str(*vals[-1], pos) if vals else model_name
                if loose is not None:
                    loose.name = model_name
            else:
                pos = self.skip_field_value(pos, colon)
        return graphs

    def _graph(self, pos: int, graphs: list[RawGraph]) -> int:
        g = RawGraph()
        graphs.append(g)
        pos += 1
        while True:
            f = self.field(pos)
            if f is None:
                e = self.end(pos)
                if e is None:
                    raise self.expect_end_or_field(pos)
                return e
            name, colon, pos = f
            if name == b"op":
                ops = g.ops
                pos = self.messages(pos, lambda p: self._op(p, ops))
            elif name == b"name" and self.data[pos:pos + 1] not in _OPEN:
                vals, pos = self.values(pos, colon)
                for kind, v in vals:
                    g.name = self.as_str(kind, v, pos)
            else:
                pos = self.skip_field_value(pos, colon)

    def _op(self, pos: int, ops: list[RawOp]) -> int:
        op = RawOp()
        ops.append(op)
        data = self.data
        pos += 1
        field_ = _FIELD
        skip = _SKIP_OP
        while True:
            pos = skip(data, pos).end()
            m = field_(data, pos)
            if m is None:
                e = self.end(pos)
                if e is None:
                    raise self.expect_end_or_field(pos)
                return e
            name = m.group(1)
            colon = m.group(2)
            pos = m.end()
            if name == b"attr":
                pos = self.messages(pos, lambda p: self._map_entry(p, op.attrs, OP_ATTR_KEYS))
            elif name == b"output_desc":
                outputs = op.outputs
                pos = self.messages(pos, lambda p: self._desc(p, outputs))
            elif name == b"input":
                if data[pos:pos + 1] in _OPEN:
                    raise self.error(pos, "field 'input' is a string, not a message")
                vals, pos = self.values(pos, colon)
                for kind, v in vals:
                    op.inputs.append(self.as_str(kind, v, pos))
            elif name == b"name" or name == b"type":
                if data[pos:pos + 1] in _OPEN:
                    raise self.error(pos, f"field '{name.decode()}' is a string, not a message")
                vals, pos = self.values(pos, colon)
                for kind, v in vals:
                    setattr(op, name.decode(), self.as_str(kind, v, pos))
            elif name == b"id":
                if data[pos:pos + 1] in _OPEN:
                    raise self.error(pos, "field 'id' is an integer, not a message")
                vals, pos = self.values(pos, colon)
                for kind, v in vals:
                    op.id = self.as_int(kind, v, pos)
            else:
                pos = self.skip_field_value(pos, colon)

    def _desc(self, pos: int, outputs: list[dict]) -> int:
        attrs: dict[str, dict] = {}
        outputs.append(attrs)
        pos += 1
        data = self.data
        while True:
            pos = _SKIP_DESC(data, pos).end()
            f = self.field(pos)
            if f is None:
                e = self.end(pos)
                if e is None:
                    raise self.expect_end_or_field(pos)
                return e
            name, colon, pos = f
            if name == b"attr":
                pos = self.messages(pos, lambda p: self._map_entry(p, attrs, DESC_ATTR_KEYS))
            else:
                pos = self.skip_field_value(pos, colon)

    def _map_entry(self, pos: int, attrs: dict, keys: frozenset) -> int:
        """Parse one ``attr { key: ... value { ... } }`` entry; store the value only if the key is wanted."""
        data = self.data
        m = _MAP_ENTRY(data, pos)
        if m is not None:  # the printer's layout: key then value, in one regex match
            lit = m.group(1)
            raw = lit[1:-1]
            if b"\\" not in raw and raw.isascii():
                key = raw.decode("ascii")
            else:
                try:
                    key = decode_text(unescape(lit))
                except ValueError as exc:
                    raise self.error(pos, str(exc)) from None
            if key in keys:
                attrs[key] = self._attr_value(m.start(2), m.end(2))
            return m.end()
        # any other layout: value before key, missing parts, separators, odd spacing
        key = ""
        value_at = None
        pos += 1
        while True:
            f = self.field(pos)
            if f is None:
                e = self.end(pos)
                if e is None:
                    raise self.expect_end_or_field(pos)
                break
            name, colon, pos = f
            if name == b"key" and data[pos:pos + 1] not in _OPEN:
                vals, pos = self.values(pos, colon)
                for kind, v in vals:
                    key = self.as_str(kind, v, pos)
            elif name == b"value":
                if data[pos:pos + 1] not in _OPEN:
                    raise self.error(pos, "expected '{' after 'value'")
                value_at = pos
                pos = self.skip_block(pos)
            else:
                raise self.error(pos, f"unknown field '{name.decode('latin-1')}' in an attr entry")
        if key in keys:
            attrs[key] = self._attr_def(value_at)[0] if value_at is not None else {}
        return e

    def _attr_value(self, start: int, end: int) -> dict:
        """Parse the AttrDef block spanning [start, end): one-regex fast paths for the printer's layouts of a
        single s/i/b value and of a flat list, the general parser otherwise."""
        data = self.data
        m = _SIMPLE_ATTR(data, start)
        if m is not None and m.end() == end:
            kind, tok = m.group(1), m.group(2)
            pos = m.start(2)
            if kind == b"s":
                return {"s": self.as_str(*self._literal(tok, pos), pos)}
            if kind == b"i":
                return {"i": self.as_int("t", tok, pos)}
            return {"b": self.as_bool("t", tok, pos)}
        m = _LIST_ATTR(data, start)
        if m is not None and m.end() == end:
            lst: dict = {}
            base = m.start(1)
            for item in _LIST_ITEM.finditer(m.group(1)):
                kind, tok = item.group(1), item.group(2)
                pos = base + item.start(2)
                if kind == b"s":
                    lst.setdefault("s", []).append(self.as_str(*self._literal(tok, pos), pos))
                elif kind == b"i":
                    lst.setdefault("i", []).append(self.as_int("t", tok, pos))
                elif kind == b"b":
                    lst.setdefault("b", []).append(self.as_bool("t", tok, pos))
            return {"list": lst}
        return self._attr_def(start)[0]

    def _literal(self, tok: bytes, pos: int) -> tuple[str, bytes]:
        if tok[:1] not in (b'"', b"'"):
            return "t", tok
        try:
            return "s", unescape(tok)
        except ValueError as exc:
            raise self.error(pos, str(exc)) from None

    def _attr_def(self, pos: int) -> tuple[dict, int]:
        """Parse an ``AttrDef`` block at ``pos`` keeping s/i/b/list (the oneof: last one set wins)."""
        value: dict = {}
        pos += 1
        while True:
            f = self.field(pos)
            if f is None:
                e = self.end(pos)
                if e is None:
                    raise self.expect_end_or_field(pos)
                return value, e
            name, colon, pos = f
            if name == b"list":
                if self.data[pos:pos + 1] not in _OPEN:
                    raise self.error(pos, "expected '{' after 'list'")
                lst = value.get("list") if "list" in value else {}
                value = {"list": lst}
                pos = self._list_value(pos, lst)
            elif name in (b"s", b"i", b"b") and self.data[pos:pos + 1] not in _OPEN:
                vals, pos = self.values(pos, colon)
                for kind, v in vals:
                    if name == b"s":
                        value = {"s": self.as_str(kind, v, pos)}
                    elif name == b"i":
                        value = {"i": self.as_int(kind, v, pos)}
                    else:
                        value = {"b": self.as_bool(kind, v, pos)}
            else:
                if name in (b"f", b"bt", b"dt", b"func", b"td", b"t", b"g", b"list_list_int",
                            b"list_list_float", b"expression"):
                    value = {name.decode(): None}
                pos = self.skip_field_value(pos, colon)

    def _list_value(self, pos: int, lst: dict) -> int:
        pos += 1
        while True:
            f = self.field(pos)
            if f is None:
                e = self.end(pos)
                if e is None:
                    raise self.expect_end_or_field(pos)
                return e
            name, colon, pos = f
            if name in (b"s", b"i", b"b") and self.data[pos:pos + 1] not in _OPEN:
                vals, pos = self.values(pos, colon)
                key = name.decode()
                out = lst.setdefault(key, [])
                for kind, v in vals:
                    if name == b"s":
                        out.append(self.as_str(kind, v, pos))
                    elif name == b"i":
                        out.append(self.as_int(kind, v, pos))
                    else:
                        out.append(self.as_bool(kind, v, pos))
            else:
                pos = self.skip_field_value(pos, colon)


def parse_model_text(data: bytes, path=None) -> list[RawGraph]:
    """Return the graphs of a text-format ``ge.proto.ModelDef`` (bytes), with only the extracted fields.

    A bare ``GraphDef`` (ops at the top level) is accepted as one graph. Raises GraphFormatError (naming
    ``path``, line and column) when the text is not valid protobuf text format.
    """
    with no_gc():
        try:
            return _Parser(data, path).parse_model()
        except RecursionError:
            raise GraphFormatError("not a readable GE graph text: messages nested too deeply",
                                   path=path) from None


@contextlib.contextmanager
def no_gc():
    """Pause the cyclic garbage collector while building millions of small acyclic records (its full passes
    over them would make reading a large graph superlinear); restores the previous state."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
