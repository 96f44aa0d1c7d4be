"""Find and explain floating-point overflows in an Ascend dump directory.

One job: turn ``Opdebug.Node_OpDebug.*`` overflow records (or, with ``scan=True``, ordinary dumps) into a list of
overflowing ops with their tensors' statistics and a one-line diagnosis.

Record layouts (every integer little-endian), decoded natively, without msaccucmp:

* **old** (exactly 2048 bytes): DHA Atomic Add info @0, L2 Atomic Add info @128, AI Core info @256 (each
  ``model_id, stream_id, task_id, task_type, pc_start, para_base`` as u64), DHA status @512, L2 status @768, AI Core
  ``kernel_code, block_idx, status`` @1024.
* **new** (first u32 == 0x5A5A5A5A): ``u32 magic, u32 version``, then one or more ``acc_list`` entries
  ``{u32 valid, u32 acc_type (0 AIC, 1 AIV, 2 AICPU, 3 SDMA), u32 rsv, u32 data_len}`` + ``data_len`` bytes of u64
  fields. AIC/AIV: ``model_id, stream_id, task_id, task_type, context_id, thread_id, pc_start, para_base, core_id,
  block_id, status`` (version 1: ``status`` is 4 words). SDMA: ``..., thread_id, src_addr, dst_addr, channel_id,
  status``. AICPU: ``..., context_id, cpu_id, thread_id, status``.

Status words: AI Core/AIC/AIV bits (0x8, 0x10, 0x20, 0x80, 0x100, 0x400); DHA atomic add code in bits 8-15
(0x9..0xD); L2 atomic add code in bits 16-18 (0..5). Anything else is shown as raw hex. A zero status means no
overflow for that unit.

Matching: a record points at the op dump with the same task_id and stream_id (and context_id/thread_id when both
the record and the file name carry a valid one) in the *same iteration directory* as the Opdebug file; among
several candidates the last one dumped before the Opdebug file wins.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Sequence

import numpy as np

from fusebisect.compare.mapping import dump_file_spelling
from fusebisect.compare.tensorstats import summarize
from fusebisect.errors import DumpFormatError, FusebisectError, UsageError

# --------------------------------------------------------------------------------------------------------------
# Record layouts

OLD_RECORD_SIZE = 2048
NEW_MAGIC = 0x5A5A5A5A
FLOAT16_MAX = 65504.0

#: ids that mean "not set" (u16, u32 and u64 all-ones; msaccucmp uses 65535)
INVALID_IDS = frozenset({0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF})

ACC_TYPES = {0: "AIC", 1: "AIV", 2: "AICPU", 3: "SDMA"}
_AIC_FIELDS = ("model_id", "stream_id", "task_id", "task_type", "context_id", "thread_id", "pc_start", "para_base",
               "core_id", "block_id", "status")
_SDMA_FIELDS = ("model_id", "stream_id", "task_id", "task_type", "context_id", "thread_id", "src_addr", "dst_addr",
                "channel_id", "status")
_AICPU_FIELDS = ("model_id", "stream_id", "task_id", "task_type", "context_id", "cpu_id", "thread_id", "status")
_NEW_FIELDS = {"AIC": _AIC_FIELDS, "AIV": _AIC_FIELDS, "SDMA": _SDMA_FIELDS, "AICPU": _AICPU_FIELDS}
STATUS_WORDS_V1 = 4

_OLD_INFO_FIELDS = ("model_id", "stream_id", "task_id", "task_type", "pc_start", "para_base")
_OLD_UNITS = (  # unit, info offset, status offset
    ("DHA Atomic Add", 0, 512),
    ("L2 Atomic Add", 128, 768),
    ("AI Core", 256, 1024),
)

#: AI Core (AIC/AIV) status bits -> meaning
AI_CORE_BITS = {
    0x8: "signed-integer minimum negated (NEG sign-bit overflow)",
    0x10: "integer add/sub/mul/multiply-add overflow",
    0x20: "floating-point computation overflow",
    0x80: "negative value converted to an unsigned type",
    0x100: "overflow converting FP32 or INT32 to FP16",
    0x400: "CUBE accumulation overflow",
}
#: DHA atomic add code (status bits 8-15) -> meaning
DHA_ATOMIC_CODES = {
    0x9: "atomic add overflow (result too large)",
    0xA: "atomic add underflow (result too small)",
    0xB: "atomic add source operand is NaN/invalid",
    0xC: "atomic add destination operand is NaN/invalid",
    0xD: "atomic add source and destination are both NaN/invalid",
}
#: L2 atomic add code (status bits 16-18) -> meaning (0 = no error)
L2_ATOMIC_CODES = {
    0b001: "L2 atomic add overflow",
    0b010: "L2 atomic add underflow",
    0b011: "L2 atomic add source operand is NaN",
    0b100: "L2 atomic add destination operand is NaN",
    0b101: "L2 atomic add source and destination are both NaN",
}
#: order in which units are shown when several overflow at once (AI Core first, as users are advised)
_UNIT_PRIORITY = {"AI Core": 0, "AIC": 0, "AIV": 1, "AICPU": 2, "SDMA": 3, "DHA Atomic Add": 4, "L2 Atomic Add": 5}


@dataclass
class OverflowRecord:
    """One unit's entry of an Opdebug record."""

    layout: str                       # 'old' | 'new'
    unit: str                         # 'AI Core' | 'DHA Atomic Add' | 'L2 Atomic Add' | 'AIC' | 'AIV' | 'AICPU' | 'SDMA'
    model_id: int
    stream_id: int
    task_id: int
    task_type: int
    status_words: tuple[int, ...]     # one word, or four for new-layout version 1 AIC/AIV
    context_id: int | None = None     # None when absent or invalid (all ones)
    thread_id: int | None = None
    version: int | None = None        # new layout only
    entry: int = 0                    # index of the acc_list entry (new) / 0 (old)
    fields: dict[str, int] = field(default_factory=dict)   # every raw field as decoded
    note: str = ""                    # how a header that disagrees with its data_len was read (fully read)

    @property
    def status(self) -> int:
        """The status: its one word, or for the four words of a version-1 record the first non-zero one (0 when
        all are zero)."""
        return next((w for w in self.status_words if w), 0)

    @property
    def overflow(self) -> bool:
        """True when any status word is non-zero."""
        return any(self.status_words)

    @property
    def meanings(self) -> list[str]:
        """English meaning of every set status bit/code; unknown ones as raw hex. [] when status is 0."""
        return status_meanings(self.unit, self.status_words)


def _valid_id(value: int) -> int | None:
    return None if value in INVALID_IDS else value


def _u64s(data: bytes, offset: int, count: int) -> tuple[int, ...]:
    return struct.unpack_from(f"<{count}Q", data, offset)


def _decode_old(data: bytes) -> list[OverflowRecord]:
    records = []
    for unit, info_off, status_off in _OLD_UNITS:
        info = dict(zip(_OLD_INFO_FIELDS, _u64s(data, info_off, len(_OLD_INFO_FIELDS))))
        if unit == "AI Core":
            kernel_code, block_idx, status = _u64s(data, status_off, 3)
            info.update(kernel_code=kernel_code, block_idx=block_idx)
        else:
            (status,) = _u64s(data, status_off, 1)
        info["status"] = status
        records.append(OverflowRecord(
            layout="old", unit=unit, model_id=info["model_id"], stream_id=info["stream_id"],
            task_id=info["task_id"], task_type=info["task_type"], status_words=(status,), fields=info))
    return records


def _decode_new(data: bytes) -> tuple[list[OverflowRecord], list[str]]:
    if len(data) < 8 + 16:
        raise DumpFormatError(f"new-layout overflow record is {len(data)} bytes, shorter than its 24-byte header")
    magic, version = struct.unpack_from("<II", data, 0)
    records: list[OverflowRecord] = []
    problems: list[str] = []
    offset = 8
    entry = 0
    while offset + 16 <= len(data):
        valid, acc_type, rsv, data_len = struct.unpack_from("<IIII", data, offset)
        if entry > 0 and valid == 0 and acc_type == 0 and data_len == 0:
            break  # zero padding after the last entry
        where = f"acc_list entry {entry} at byte {offset}"
        unit = ACC_TYPES.get(acc_type)
        if unit is None:
            msg = f"{where}: unknown acc_type {acc_type} (expected 0 AIC, 1 AIV, 2 AICPU, 3 SDMA)"
            if entry == 0:
                raise DumpFormatError(msg)
            problems.append(msg + "; rest of the record ignored")
            break
        names = _NEW_FIELDS[unit]
        words = STATUS_WORDS_V1 if unit in ("AIC", "AIV") and version >= 1 else 1
        need = (len(names) - 1 + words) * 8
        note = ""   # (the data_len a header disagrees with is what the writer wrote: every byte is read)
        if unit in ("AIC", "AIV") and version >= 1 and data_len == len(names) * 8:
            words, need = 1, len(names) * 8   # version 1 header but a one-word status: trust data_len
            note = f"{where}: version {version} but data_len {data_len} fits a one-word status: read as one"
        elif unit in ("AIC", "AIV") and version == 0 and data_len == (len(names) - 1 + STATUS_WORDS_V1) * 8:
            words, need = STATUS_WORDS_V1, data_len   # the reverse: a four-word status behind a version 0 header
            note = f"{where}: version 0 but data_len {data_len} fits a four-word status: read as four"
        elif data_len > need:   # bytes the layout does not explain may hold a status word
            problems.append(f"{where}: data_len {data_len} is more than the {need} bytes of its layout; the rest "
                            "is not read")
        body = offset + 16
        if data_len < need or body + need > len(data):
            have = min(data_len, len(data) - body)
            msg = (f"{where}: {unit} data is {have} bytes, needs {need} "
                   f"({len(names) - 1 + words} u64 fields, version {version})")
            if entry == 0:
                raise DumpFormatError("truncated overflow record: " + msg)
            problems.append("truncated: " + msg + "; entry ignored")
            break
        values = _u64s(data, body, len(names) - 1 + words)
        info = dict(zip(names[:-1], values[:len(names) - 1]))
        status_words = tuple(values[len(names) - 1:])
        info["status"] = status_words[0]
        if valid != 1:
            problems.append(f"{where}: valid flag is {valid}, not 1; entry ignored")
        else:
            records.append(OverflowRecord(
                layout="new", unit=unit, model_id=info["model_id"], stream_id=info["stream_id"],
                task_id=info["task_id"], task_type=info["task_type"], status_words=status_words,
                context_id=_valid_id(info["context_id"]), thread_id=_valid_id(info["thread_id"]),
                version=version, entry=entry, fields={"magic": magic, "version": version, "rsv": rsv,
                                                      "data_len": data_len, **info}, note=note))
        offset = body + max(data_len, need)
        entry += 1
    return records, problems


def decode_record_ex(data: bytes) -> tuple[list[OverflowRecord], list[str]]:
    """Decode one Opdebug output's bytes, old or new layout.

    Returns ``(records, problems)``: every unit's record (status 0 included; filter on ``.overflow``) and
    non-fatal problems (a later acc_list entry truncated or invalid). Raises DumpFormatError when nothing can be
    decoded (too short, neither the new magic nor the 2048-byte old block, an unknown first acc_type).
    """
    data = bytes(data)
    if len(data) >= 4 and struct.unpack_from("<I", data, 0)[0] == NEW_MAGIC:
        return _decode_new(data)
    if len(data) == OLD_RECORD_SIZE:
        return _decode_old(data), []
    raise DumpFormatError(
        f"overflow record of {len(data)} bytes is neither the new layout (magic 0x5A5A5A5A) "
        f"nor the old {OLD_RECORD_SIZE}-byte block")


def decode_record(data: bytes) -> list[OverflowRecord]:
    """Decode one Opdebug output's bytes (old 2048-byte or new magic layout) into its unit records.

    Returns every unit's record, including those with status 0 (no overflow). Raises DumpFormatError on short or
    garbage data.
    """
    return decode_record_ex(data)[0]


def status_meanings(unit: str, status_words: Sequence[int] | int) -> list[str]:
    """English meanings of a status for ``unit``; unknown bits/codes are given as raw hex. [] for status 0.

    Never raises for any integer input.
    """
    words = [status_words] if isinstance(status_words, int) else list(status_words)
    if not words:
        return []
    status = int(words[0])
    if status < 0:  # a signed reading of a u64 word
        status &= 0xFFFFFFFFFFFFFFFF
    out: list[str] = []
    if unit in ("AI Core", "AIC", "AIV"):
        rest = status
        for bit, text in AI_CORE_BITS.items():
            if status & bit:
                out.append(f"0x{bit:x}: {text}")
                rest &= ~bit
        if rest:
            out.append(f"unknown status bits 0x{rest:x}")
    elif unit == "DHA Atomic Add":
        code = (status >> 8) & 0xFF
        if code:
            text = DHA_ATOMIC_CODES.get(code)
            out.append(f"DHA code 0x{code:x}: {text}" if text else f"unknown DHA atomic add code 0x{code:x}")
        rest = status & ~0xFF00
        if rest:
            out.append(f"unknown status bits 0x{rest:x}")
    elif unit == "L2 Atomic Add":
        code = (status >> 16) & 0b111
        if code:
            text = L2_ATOMIC_CODES.get(code)
            out.append(f"L2 code {code:03b}: {text}" if text else f"unknown L2 atomic add code {code:03b}")
        rest = status & ~(0b111 << 16)
        if rest:
            out.append(f"unknown status bits 0x{rest:x}")
    elif status:
        out.append(f"{unit} status 0x{status:x} (no public decoding for this unit)")
    for i, word in enumerate(words[1:], start=1):
        if word:
            out.append(f"status word {i}: 0x{int(word) & 0xFFFFFFFFFFFFFFFF:x}")
    return out


# --------------------------------------------------------------------------------------------------------------
# Tensor statistics and diagnosis (pure numpy)

@dataclass
class TensorStats:
    """Summary of one input or output tensor of an overflowing op.

    ``min``/``max`` ignore NaN (so an Inf shows), ``mean`` is over finite values. ``saturated`` counts finite
    float16 values with ``|x| >= 65504`` (0 for other dtypes).
    """

    kind: str                         # 'input' | 'output'
    index: int
    shape: tuple[int, ...]
    dtype: str
    format: str = "ND"
    count: int = 0
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    nan: int = 0
    pos_inf: int = 0
    neg_inf: int = 0
    saturated: int = 0
    error: str | None = None          # why no statistics could be computed

    @property
    def abnormal(self) -> bool:
        """True when the tensor holds NaN, +/-Inf or float16-saturated values."""
        return bool(self.nan or self.pos_inf or self.neg_inf or self.saturated)

    @property
    def float16_overflow(self) -> bool:
        """True for a float16 tensor reaching +/-65504 or Inf."""
        return self.dtype == "float16" and bool(self.saturated or self.pos_inf or self.neg_inf)

    def problem_text(self) -> str:
        """e.g. ``'2 NaN, 1 +Inf, 3 saturated (|x|>=65504)'``; '' when clean."""
        parts = [f"{n} {label}" for n, label in ((self.nan, "NaN"), (self.pos_inf, "+Inf"), (self.neg_inf, "-Inf"),
                                                  (self.saturated, "saturated (|x|>=65504)")) if n]
        return ", ".join(parts)

    def to_json(self) -> dict:
        """Plain-JSON form (NaN/Inf statistics become null)."""
        def num(v):
            return v if v is None or math.isfinite(v) else None
        return {"kind": self.kind, "index": self.index, "shape": list(self.shape), "dtype": self.dtype,
                "format": self.format, "count": self.count, "min": num(self.min), "max": num(self.max),
                "min_is_inf": self.min is not None and math.isinf(self.min),
                "max_is_inf": self.max is not None and math.isinf(self.max),
                "mean": num(self.mean), "nan": self.nan, "pos_inf": self.pos_inf, "neg_inf": self.neg_inf,
                "saturated": self.saturated, "abnormal": self.abnormal, "error": self.error}


def tensor_stats(array: np.ndarray, *, kind: str, index: int, dtype: str | None = None,
                 format: str = "ND") -> TensorStats:
    """Statistics of ``array``: shape, min, max, mean and NaN/+Inf/-Inf/float16-saturation counts.

    ``dtype`` is the dump's dtype name (defaults to the array's). Returns a TensorStats; never raises for a
    numeric array (an unsupported element type gives ``error`` set).
    """
    arr = np.asarray(array)
    name = dtype or str(arr.dtype)
    st = TensorStats(kind=kind, index=index, shape=tuple(int(d) for d in arr.shape), dtype=name, format=format,
                     count=int(arr.size))
    if arr.size == 0:
        return st
    try:
        summary = summarize(arr, FLOAT16_MAX if name == "float16" or arr.dtype == np.float16 else None)
    except (TypeError, ValueError) as exc:
        st.error = f"cannot summarise dtype {name}: {exc}"
        return st
    st.nan, st.pos_inf, st.neg_inf, st.saturated = summary.nan, summary.pos_inf, summary.neg_inf, summary.saturated
    if summary.min is not None:
        st.min, st.max = float(summary.min), float(summary.max)
    st.mean = summary.mean
    return st


def diagnose(inputs: Sequence[TensorStats], outputs: Sequence[TensorStats], *, op_type: str = "", unit: str = "",
             matched: bool = True, task_id: int | None = None, stream_id: int | None = None,
             pass_names: Sequence[str] = (), original_ops: Sequence[str] = (), op_name: str = "",
             output_origins: Sequence[str] = (), unreadable: str | None = None,
             locked: Collection[str] = ()) -> str:
    """One line saying where to look next, following the usual overflow analysis:

    inputs already abnormal -> look upstream first; clean inputs and a float16 output saturating -> keep the op
    in float32; fused op -> name the fusion rules. ``original_ops`` is the graph's full list;
    ``output_origins`` the original op each output stands for (all a dump tells without a graph); ``task_id`` and
    ``stream_id``: the ids an unmatched record's op dump was looked for by (None: not known). Returns the
    sentence(s); never raises.
    """
    parts: list[str] = []
    if not matched and task_id is None:
        parts.append("The record leaves its task id unset and the Opdebug file's name holds none: no op dump can be "
                     "matched to it.")
    elif not matched:
        where = f"stream_id {stream_id}" if stream_id is not None else "any stream"
        parts.append(f"No op dump with task_id {task_id}, {where} in this iteration directory: "
                     f"dump all ops together with overflow detection to see this op's tensors.")
    else:
        bad_in = [s for s in inputs if s.abnormal]
        bad_out = [s for s in outputs if s.abnormal]
        fp16_out = [s for s in outputs if s.float16_overflow]
        what = op_type or "this op"
        # an input that could not be decoded is not known to be clean: the problem may start upstream
        unknown_in = [s for s in inputs if s.error]
        why = unknown_in[0].error.removeprefix(f"input {unknown_in[0].index}: ") if unknown_in else ""
        # a dump holds what dump_mode asked for: no input (or output) in it is not a clean one
        no_in = "Its dump holds no inputs (dump_mode output leaves them out)"
        no_out = "its dump holds no outputs (dump_mode input leaves them out)"
        clean = ("Inputs are clean but" if inputs and not unknown_in else
                 f"{no_in}, so a problem starting upstream is not ruled out; and" if not inputs else
                 f"Input {unknown_in[0].index} could not be inspected ({why}), so a problem starting upstream is "
                 f"not ruled out; and")
        if bad_in:
            first = bad_in[0]
            parts.append(f"Input already abnormal (input {first.index}: {first.problem_text()}): the problem starts "
                         f"upstream; look at the op producing it (or the model's inputs/constants) first.")
        elif fp16_out:
            first = fp16_out[0]
            parts.append(f"{clean} float16 output {first.index} overflows ({first.problem_text()}): "
                         f"keep {what} in float32 (precision_mode allow_mix_precision with {what} on the blacklist "
                         f"via modify_mixlist, or keep_dtype_scope).")
        elif bad_out:
            first = bad_out[0]
            parts.append(f"{clean} output {first.index} holds {first.problem_text()}: the computation "
                         f"of {what} overflowed; check its formula against these input values.")
        elif not inputs and not outputs and unreadable:
            parts.append(f"The matched op dump could not be read ({unreadable}): its tensors cannot be inspected.")
        elif not inputs and not outputs:
            parts.append("The matched op dump holds no tensors to inspect.")
        elif not outputs:
            seen = (f"Input {unknown_in[0].index} could not be inspected ({why}) and" if unknown_in else
                    "No NaN/Inf/65504 in the inputs, but")
            parts.append(f"{seen} {no_out}: dump them too (dump_mode all) to tell an overflowing output from "
                         f"an intermediate step.")
        elif not inputs:
            parts.append(f"No NaN/Inf/65504 in the outputs; {no_in[0].lower()}{no_in[1:]}: the problem may start "
                         f"upstream, or in an intermediate step.")
        elif unknown_in:
            parts.append(f"No NaN/Inf/65504 in the outputs, but input {unknown_in[0].index} could not be inspected "
                         f"({why}): the problem may start upstream, or in an intermediate step.")
        else:
            parts.append("No NaN/Inf/65504 in inputs or outputs: the overflow happened in an intermediate step "
                         "(e.g. a sum before an average); check the op's formula.")
    if unit in ("DHA Atomic Add", "L2 Atomic Add"):
        parts.append("This is an atomic-add overflow: resolve AI Core overflows first.")
    rules = list(dict.fromkeys(p for p in pass_names if p))
    originals = [o for o in dict.fromkeys(original_ops) if o and o != op_name]
    switchable = [r for r in rules if r not in locked]   # ``locked``: passes no switch file turns off
    if rules and not switchable:
        parts.append(f"Fused by {', '.join(rules)}, which no switch file turns off: no fusion_switch.cfg removes "
                     "this fusion.")
    elif rules:
        fixed = [r for r in rules if r in locked]
        parts.append(f"Fused by {', '.join(rules)}: test with `fusebisect cfg off {' '.join(switchable)}`"
                     + (f" ({', '.join(fixed)} cannot be switched off)." if fixed else "."))
    elif len(originals) > 1:
        parts.append(f"Fused op (originals {', '.join(originals)}): pass --graph to name the fusion rules.")
    elif not originals:
        others = [o for o in dict.fromkeys(output_origins) if o and dump_file_spelling(o) != dump_file_spelling(op_name)]
        if others:
            parts.append(f"Its output stands for original op {', '.join(others)}, so it is probably a fused op: "
                         f"pass --graph to name the fusion rules and all its original ops.")
    return " ".join(parts)


# --------------------------------------------------------------------------------------------------------------
# Directory analysis

@dataclass
class Overflow:
    """One overflowing op (or, in scan mode, the first abnormal tensors of an op)."""

    op_type: str
    op_name: str
    task_id: int | None
    stream_id: int | None
    timestamp: int                    # the op dump's timestamp, else the Opdebug file's
    unit: str                         # record unit, or 'scan'
    status: int
    status_words: tuple[int, ...] = ()
    meanings: list[str] = field(default_factory=list)
    inputs: list[TensorStats] = field(default_factory=list)
    outputs: list[TensorStats] = field(default_factory=list)
    pass_names: list[str] = field(default_factory=list)     # pass_name then pass_name_ub
    original_ops: list[str] = field(default_factory=list)   # the graph's _datadump_original_op_names
    #: the original op each output stands for, as the dump file records it (one name per output, not the full
    #: list of ops a fused op replaced: that needs the graph)
    output_origins: list[str] = field(default_factory=list)
    diagnosis: str = ""
    context_id: int | None = None
    thread_id: int | None = None
    matched: bool = True
    dump_file: Path | None = None
    opdebug_file: Path | None = None
    iteration: dict = field(default_factory=dict)           # device, model_name, model_id, iteration
    op_index: int = 0     # which overflowing op (1 = the first), shared by the records of one op (AI Core, DHA...)

    def to_json(self) -> dict:
        """The documented ``--json`` object (plus a few extra keys)."""
        return {"op_type": self.op_type, "op_name": self.op_name, "task_id": self.task_id,
                "stream_id": self.stream_id, "timestamp": self.timestamp, "unit": self.unit, "status": self.status,
                "meanings": list(self.meanings), "inputs": [s.to_json() for s in self.inputs],
                "outputs": [s.to_json() for s in self.outputs], "pass_names": list(self.pass_names),
                "diagnosis": self.diagnosis, "status_words": list(self.status_words),
                "context_id": self.context_id, "thread_id": self.thread_id, "original_ops": list(self.original_ops),
                "output_origins": list(self.output_origins), "matched": self.matched,
                "dump_file": str(self.dump_file) if self.dump_file else None,
                "opdebug_file": str(self.opdebug_file) if self.opdebug_file else None, "iteration": self.iteration,
                "op_index": self.op_index}


@dataclass
class OverflowReport:
    """What :func:`analyse` found."""

    dump_dir: Path
    mode: str                         # 'opdebug' | 'scan'
    overflows: list[Overflow]         # the records of the first ``limit`` ops, execution order
    total: int                        # overflowing ops found in all (scan: found before stopping at the limit)
    limit: int
    records: int = 0                  # Opdebug records with an overflow (one op can have several: AI Core, DHA)
    opdebug_files: int = 0
    scanned: int = 0                  # op dump files looked at (scan mode; unreadable ones included)
    problems: list[tuple[Path, str]] = field(default_factory=list)   # per-file problems, not fatal
    notes: list[str] = field(default_factory=list)
    #: Opdebug files no record could be decoded from, with the reason (also in ``problems``)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)

    def add_unreadable(self, path: Path, reason: str, *, prefix: str = "") -> None:
        """Record an Opdebug file no record could be decoded from (in ``unreadable`` and ``problems``)."""
        self.unreadable.append((path, reason))
        self.problems.append((path, prefix + reason))

    @property
    def files_read(self) -> int:
        """The files this report is about (Opdebug files; op dumps in scan mode), unreadable ones included."""
        return self.scanned if self.mode == "scan" else self.opdebug_files

    def unreadable_summary(self) -> str:
        """``'N of M Opdebug files could not be read (first: PATH: reason)'`` (scan mode: op dump files); '' when
        every one was read."""
        if not self.unreadable:
            return ""
        path, reason = self.unreadable[0]
        kind = "op dump files" if self.mode == "scan" else "Opdebug files"
        return (f"{len(self.unreadable)} of {self.files_read} {kind} could not be read "
                f"(first: {path}: {' '.join(reason.split())})")

    def limit_text(self) -> str:
        """``'N overflowing ops in all (R records); showing the first M (--limit L).'``, or '' when every op found is
        shown."""
        shown = len({ov.op_index for ov in self.overflows})
        if self.total <= shown:
            return ""
        what = "abnormal ops (scan)" if self.mode == "scan" else "overflowing ops"
        records = f" ({self.records} records)" if self.records > self.total else ""
        return f"{self.total} {what} in all{records}; showing the first {shown} (--limit {self.limit})."

    def to_json(self) -> dict:
        """``{"overflows": [...], "total", "mode", "limit", "opdebug_files", "unreadable", "scanned", "problems",
        "notes"}``."""
        return {"overflows": [o.to_json() for o in self.overflows], "total": self.total, "records": self.records,
                "mode": self.mode,
                "limit": self.limit, "dump_dir": str(self.dump_dir), "opdebug_files": self.opdebug_files,
                "unreadable": _path_messages(self.unreadable), "scanned": self.scanned,
                "problems": _path_messages(self.problems), "notes": list(self.notes)}


def _path_messages(items: list[tuple[Path, str]]) -> list[dict]:
    return [{"path": str(p), "message": m} for p, m in items]


def _is_debug(entry) -> bool:
    return entry.op_type == "Opdebug" or entry.path.name.startswith("Opdebug.Node_OpDebug.")


def _leaf_dir(entry) -> Path:
    """The directory of a dump file: one iteration of one run (a dump root keeps each run in its own timestamp
    directory, and the same device, model and iteration numbers recur in every run)."""
    return entry.path.parent


def _iteration_dict(entry) -> dict:
    return {"device": entry.device, "model_name": entry.model_name, "model_id": entry.model_id,
            "iteration": entry.iteration}


def iteration_text(it: dict | None) -> str:
    """Where an op dump is, for people: 'device 0, model net (id 1), iteration 3' ('' when the layout is not
    known). Named, not a path: the directories differ between layouts (CANN's, MindSpore's rank_{id})."""
    it = it or {}
    parts = [f"device {it['device']}" if it.get("device") is not None else "",
             (f"model {it['model_name']}" + (f" (id {it['model_id']})" if it.get("model_id") is not None else ""))
             if it.get("model_name") else "",
             f"iteration {it['iteration']}" if it.get("iteration") is not None else ""]
    return ", ".join(p for p in parts if p)


def _name_id(entry, attr: str) -> int | None:
    """FFTS+ context/thread id from a dump name (:class:`DumpName` reads msaccucmp's positions); None for
    plain names or invalid (all-ones) ids."""
    value = getattr(entry.name, attr, None)
    return None if value is None or value in INVALID_IDS else int(value)


def _stream(entry) -> int | None:
    """The stream id in a dump file name; None when the runtime left it out (or it is all ones)."""
    return None if entry.stream_id is None or int(entry.stream_id) in INVALID_IDS else int(entry.stream_id)


class _GraphIndex:
    """Look up graph ops by the op name found in dump file names (exact, else as a dump file spells it).

    Several graphs (a train and an eval graph) may hold an op of that name: the one of the graph the dump's
    model directory names is taken; when that does not decide and the candidates differ in their fusion rules,
    ``ambiguous`` records the name."""

    def __init__(self, graph) -> None:
        self.graph = graph
        self.locked: frozenset[str] = frozenset()
        self.by_name: dict[str, list] = {}
        self.by_mangled: dict[str, list] = {}
        self.ambiguous: set[str] = set()
        if graph is not None:
            for op in graph.ops:
                self.by_name.setdefault(op.name, []).append(op)
                self.by_mangled.setdefault(dump_file_spelling(op.name), []).append(op)

    def op(self, name: str, model: str | None = None):
        if self.graph is None:
            return None
        cands = self.by_name.get(name) or self.by_mangled.get(dump_file_spelling(name)) or []
        if len(cands) > 1 and model:
            cands = [op for op in cands if op.graph == model] or cands
        if len({(tuple(op.pass_names), op.ub_pass_name) for op in cands}) > 1:
            self.ambiguous.add(name)
        return cands[0] if cands else None


def _tensor_stats(rec, kind: str) -> TensorStats:
    fmt = getattr(rec, "format_name", "ND")
    try:
        dtype = rec.dtype_name
    except Exception:  # an enum value the dtype table does not know
        dtype = f"dtype {rec.dtype}"
    try:
        arr = rec.array()
    except FusebisectError as exc:
        return TensorStats(kind=kind, index=rec.index, shape=tuple(rec.shape), dtype=dtype, format=fmt,
                           error=exc.reason if hasattr(exc, "reason") else str(exc))
    from fusebisect.compare.formats import record_original

    original = record_original(rec, arr)   # else the device layout is summarised as it is
    if original is not None:
        arr, fmt = original, f"{fmt}->original"
    return tensor_stats(arr, kind=kind, index=rec.index, dtype=dtype, format=fmt)


def _op_details(dump_path: Path, op_name: str, gindex: _GraphIndex,
                model: str | None = None) -> tuple[list, list, str | None, list, list, list]:
    """(inputs, outputs, graph op type, pass names, the graph's original ops, the outputs' origins) for one op
    dump (``model``: the model directory it sits in, which picks the graph); raises DumpFormatError, OSError."""
    from fusebisect.compare.dumpfile import read_dump

    dump = read_dump(dump_path)
    inputs = [_tensor_stats(t, "input") for t in dump.inputs]
    outputs = [_tensor_stats(t, "output") for t in dump.outputs]
    gtype, passes, originals = _graph_facts(gindex, model, dump.op_name or op_name, op_name)
    origins = list(dict.fromkeys(t.original_op[0] for t in dump.outputs if t.original_op and t.original_op[0]))
    return inputs, outputs, gtype, passes, originals, origins


def _graph_facts(gindex: _GraphIndex, model: str | None, *names: str) -> tuple[str | None, list, list]:
    """(type, fusion passes, original ops) of the first of ``names`` the graph has (in graph ``model`` when
    several graphs hold it), else (None, [], [])."""
    op = next((o for o in (gindex.op(n, model) for n in names) if o is not None), None)
    if op is None:
        return None, [], []
    return op.type, op.fusion_passes, list(op.original_op_names)


def _reason(exc: Exception) -> str:
    """The reason of a FusebisectError (without the path it names), else the OSError's text."""
    return getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)


def _load_graph(graph):
    if graph is None or not isinstance(graph, (str, Path)):
        return graph
    from fusebisect.compare.graph import load_graph
    return load_graph(graph)


def _record_stream(rec: OverflowRecord, dbg) -> int | None:
    """The record's stream id; one of all ones (not set) is read from the Opdebug file's own name, as
    precision_tool does."""
    return rec.stream_id if rec.stream_id not in INVALID_IDS else _stream(dbg)


def _record_task(rec: OverflowRecord, dbg) -> int | None:
    """The record's task id; one of all ones (not set) is read from the Opdebug file's own name, as precision_tool
    does (None when that has none either)."""
    if rec.task_id not in INVALID_IDS:
        return rec.task_id
    return None if dbg.task_id is None or int(dbg.task_id) in INVALID_IDS else int(dbg.task_id)


def _match(rec: OverflowRecord, candidates: list, debug_ts: int, stream: int | None = None):
    """The op dump of ``candidates`` (same iteration and task id) this record points at, or None.

    The stream (:func:`_record_stream`) must agree where both the record and the dump name carry one; a dump name
    without a stream id (some runtimes) matches on the task id."""
    if stream is not None:
        candidates = [e for e in candidates if _stream(e) in (None, stream)]
    pool = [e for e in candidates
            if (rec.context_id is None or _name_id(e, "context_id") in (None, rec.context_id))
            and (rec.thread_id is None or _name_id(e, "thread_id") in (None, rec.thread_id))]
    if not pool:
        return None
    exact = [e for e in pool if rec.context_id is not None and _name_id(e, "context_id") == rec.context_id]
    pool = exact or pool
    # the op's dump is written before its Opdebug record: of several dumps of that task id (a loop), the last one
    # before the record; when every one is later (clocks of other streams), the first of them
    before = [e for e in pool if e.timestamp <= debug_ts]
    if before:
        return max(before, key=lambda e: e.timestamp)
    return min(pool, key=lambda e: e.timestamp)


def analyse(dump_dir, *, graph=None, limit: int = 5, scan: bool = False,
            locked: Collection[str] = ()) -> OverflowReport:
    """Find overflowing ops under ``dump_dir`` and explain the first ``limit`` of them in execution order.

    Without ``scan``: decode every ``Opdebug.Node_OpDebug.*`` file (any dump encoding, old or new record layout),
    match each non-zero record to its op dump in the same iteration directory, and summarise the op's tensors.
    With ``scan``: walk ordinary dumps in execution order and report the first ops whose tensors hold NaN/Inf or
    float16 values at +/-65504. ``graph`` is a path for :func:`load_graph` or a loaded Graph; it adds op types,
    pass names and original ops; ``locked``: passes no switch file turns off (the catalog's), which the advice to
    test the op's fusion leaves out. Returns an OverflowReport (unreadable files are listed in ``problems``; Opdebug
    files no record could be decoded from also in ``unreadable``: with any, a report without overflows does not
    mean there was none).
    Raises UsageError for ``limit < 1``, DumpFormatError/GraphFormatError if the directory or graph cannot be read
    or holds no dump file at all.
    """
    from fusebisect.compare.tree import scan_dumps

    if limit < 1:
        raise UsageError(f"--limit must be at least 1 (got {limit})")
    root = Path(dump_dir)
    if not root.exists():
        from fusebisect.fsutil import missing_reason

        raise DumpFormatError(missing_reason(root), path=root)
    gindex = _GraphIndex(_load_graph(graph))
    gindex.locked = frozenset(locked)   # passes no switch file turns off: the advice leaves them out
    tree = scan_dumps(root)
    one_record = None
    if not scan and root.is_file() and tree.entries and _is_debug(tree.entries[0]):
        # one Opdebug file: its records, matched against the op dumps of its own directory (the iteration's)
        one_record = tree.entries[0].path
        tree = scan_dumps(root.parent)
        tree.entries = [e for e in tree.entries if not _is_debug(e) or e.path == one_record]
        tree.bad = [(p, why) for p, why in tree.bad if not Path(p).name.startswith("Opdebug")]
    if not tree.entries:   # nothing to look at is not "no overflow"
        what = f" ({len(tree.bad)} files whose names are not dump file names)" if tree.bad else ""
        raise DumpFormatError(f"no dump files here{what} (neither Opdebug records nor op dumps): give the dump "
                              "directory of a run", path=root)
    from fusebisect.compare.tree import latest_run_only

    notes = latest_run_only(tree, root)
    if one_record is not None:
        notes.append(f"{root.name}: only this Opdebug file's records are read, matched against the op dumps of its "
                     "directory")
    if scan:
        report = _scan(root, tree, gindex, limit)
    else:
        report = _opdebug(root, tree, gindex, limit)
    report.notes[:0] = notes
    if gindex.ambiguous:
        names = sorted(gindex.ambiguous)
        report.notes.append(f"{len(names)} op name(s) are in several graphs with different fusion rules (e.g. "
                            f"{names[0]}): the graph named like the dump's model directory was used where one is; "
                            f"give --graph the one graph to be sure")
    return report


def _opdebug(root: Path, tree, gindex: _GraphIndex, limit: int) -> OverflowReport:
    report = OverflowReport(dump_dir=root, mode="opdebug", overflows=[], total=0, limit=limit)
    for p, msg in tree.bad:
        if Path(p).name.startswith("Opdebug"):
            report.add_unreadable(Path(p), msg)
    debug_entries = [e for e in tree.entries if _is_debug(e)]
    report.opdebug_files = len(debug_entries) + len(report.unreadable)
    if not report.opdebug_files:
        # overflow detection writes a record beside each overflowing op's dump: op dumps without any are an
        # ordinary data dump, in which nothing was checked (not "no overflow"; the mirror of --scan on records)
        ops = len(tree.entries)
        raise DumpFormatError(f"no Opdebug records here, only {ops} op dump{'s' if ops != 1 else ''}: written "
                              "without overflow detection, so nothing says whether an op overflowed; use --scan to "
                              "look for NaN/Inf/65504 in them", path=root)

    index: dict[tuple, dict[int, list]] = {}
    for e in tree.entries:
        if not _is_debug(e):
            index.setdefault(_leaf_dir(e), {}).setdefault(int(e.task_id), []).append(e)

    from fusebisect.compare.dumpfile import read_dump

    found: list[tuple[tuple, OverflowRecord, Any, Any, int | None, int | None]] = []
    zero_files = 0
    from_name = 0           # records whose unset task or stream id was read from the Opdebug file's name
    later: list[str] = []   # matches timestamped after their Opdebug file
    for dbg in debug_entries:
        try:
            dump = read_dump(dbg.path)
        except (FusebisectError, OSError) as exc:
            report.add_unreadable(dbg.path, _reason(exc), prefix="unreadable Opdebug file: ")
            continue
        if not dump.outputs:
            report.add_unreadable(dbg.path, "Opdebug file has no output tensor holding an overflow record")
            continue
        any_overflow = False
        failures: list[str] = []
        damaged: list[str] = []   # records cut short or skipped: an overflow may be in what could not be read
        for out in dump.outputs:
            try:
                raw = getattr(out, "raw", None)   # the bytes as stored, whatever dtype the header claims
                data = (np.asarray(raw()) if raw else np.ascontiguousarray(out.array())).tobytes()
                records, problems = decode_record_ex(data)
            except (FusebisectError, OSError) as exc:
                failures.append(f"output {out.index}: {_reason(exc)}")
                report.problems.append((dbg.path, failures[-1]))
                continue
            report.problems.extend((dbg.path, f"output {out.index}: {p}") for p in problems)
            damaged.extend(f"output {out.index}: {p}" for p in problems)
            for rec in records:
                if rec.note:
                    report.notes.append(f"{dbg.path}: output {out.index}: {rec.note}")
                if not rec.overflow:
                    continue
                any_overflow = True
                task, stream = _record_task(rec, dbg), _record_stream(rec, dbg)
                from_name += rec.task_id in INVALID_IDS or rec.stream_id in INVALID_IDS
                cands = index.get(_leaf_dir(dbg), {}).get(task, []) if task is not None else []
                op = _match(rec, cands, dbg.timestamp, stream)
                if op is not None and op.timestamp > dbg.timestamp:
                    later.append(f"{op.path.name} (task {task})")
                ts = op.timestamp if op is not None else dbg.timestamp
                # execution order: the time, then (a tie) the task launched first, then AI Core before DHA/L2
                found.append(((ts, task if task is not None else 1 << 64, _UNIT_PRIORITY.get(rec.unit, 9),
                               str(dbg.path), rec.entry), rec, op, dbg, task, stream))
        if len(failures) == len(dump.outputs):   # not one record decoded: this file tells nothing
            report.unreadable.append((dbg.path, failures[0]))
        elif not any_overflow and (failures or damaged):   # zeros in the part that could be read: no verdict
            report.unreadable.append((dbg.path, f"partly unreadable: {(failures or damaged)[0]}"))
        elif not any_overflow:
            zero_files += 1
    if zero_files:
        report.notes.append(f"{zero_files} Opdebug file(s) hold only zero status words (no overflow)")
    if from_name:
        report.notes.append(f"{from_name} overflow record(s) left their task or stream id unset (all ones): read from "
                            "the Opdebug file's name, as precision_tool does")
    if later:
        report.notes.append(f"{len(later)} overflow record(s) matched an op dump timestamped after the Opdebug file "
                            f"(no earlier dump of that task, e.g. {later[0]}): check the op names against the graph")
    found.sort(key=lambda item: item[0])
    # --limit counts ops: the records one op raised (AI Core and DHA in one Opdebug file, say) stay together; an
    # op is the dump matched, else what names the task
    keys = [str(op.path) if op is not None else
            (str(_leaf_dir(dbg)), task, stream, rec.context_id, rec.thread_id)
            for _sort, rec, op, dbg, task, stream in found]
    ordinal: dict = {}
    for key in keys:
        ordinal.setdefault(key, len(ordinal) + 1)
    report.total, report.records = len(ordinal), len(found)
    for k, at in sorted((ordinal[key], at) for at, key in enumerate(keys) if ordinal[key] <= limit):
        (ts, *_), rec, op, dbg, task, stream = found[at]
        report.overflows.append(_explain(rec, op, dbg, ts, gindex, report, task, stream))
        report.overflows[-1].op_index = k
    return report


def _explain(rec: OverflowRecord, op, dbg, ts: int, gindex: _GraphIndex, report: OverflowReport,
             task: int | None, stream: int | None) -> Overflow:
    """The Overflow of one record; ``task``/``stream``: the ids its op dump was looked for by (an unset one read
    from the Opdebug file's name; None: unknown), which it reports."""
    ov = Overflow(op_type=op.op_type if op is not None else "?", op_name=op.op_name if op is not None else "?",
                  task_id=rec.task_id if task is None else task,
                  stream_id=rec.stream_id if stream is None else stream, timestamp=ts, unit=rec.unit, status=rec.status,
                  status_words=rec.status_words, meanings=rec.meanings, context_id=rec.context_id,
                  thread_id=rec.thread_id, matched=op is not None, dump_file=op.path if op is not None else None,
                  opdebug_file=dbg.path, iteration=_iteration_dict(dbg))
    unreadable = None
    if op is not None:
        try:
            (ov.inputs, ov.outputs, gtype, ov.pass_names, ov.original_ops,
             ov.output_origins) = _op_details(op.path, op.op_name, gindex, op.model_name)
        except (FusebisectError, OSError) as exc:
            unreadable = _reason(exc)
            report.problems.append((op.path, f"unreadable op dump: {unreadable}"))
            # the graph still names the op's fusion rules
            gtype, ov.pass_names, ov.original_ops = _graph_facts(gindex, op.model_name, op.op_name)
        if gtype:
            ov.op_type = gtype
    ov.diagnosis = diagnose(ov.inputs, ov.outputs, op_type=ov.op_type if ov.op_type != "?" else "", unit=rec.unit,
                            matched=ov.matched, task_id=task, stream_id=stream,
                            pass_names=ov.pass_names, original_ops=ov.original_ops, op_name=ov.op_name,
                            output_origins=ov.output_origins, unreadable=unreadable, locked=gindex.locked)
    return ov


def _scan(root: Path, tree, gindex: _GraphIndex, limit: int) -> OverflowReport:
    debug = sum(1 for e in tree.entries if _is_debug(e))
    if debug == len(tree.entries) and all(p in tree.stray for p, _msg in tree.bad):
        raise DumpFormatError(f"no op dumps to scan, only {debug} Opdebug file(s): read their overflow records "
                              "without --scan", path=root)
    report = OverflowReport(dump_dir=root, mode="scan", overflows=[], total=0, limit=limit)
    if debug:
        report.notes.append(f"{debug} Opdebug file(s) here hold overflow records, which --scan does not read: run "
                            "without --scan to read them")
    strays = [p for p, _msg in tree.bad if p in tree.stray]
    if strays:
        report.notes.append(f"{len(strays)} file(s) here are not op dumps by their names and were not read "
                            f"(first: {strays[0]})")
    for p, msg in tree.bad:     # a file that cannot be read may hold the abnormal values: never "none found"
        if p in tree.stray:
            continue
        report.scanned += 1
        report.add_unreadable(Path(p), msg)
    for e in tree.entries:
        if _is_debug(e):
            continue
        report.scanned += 1
        try:
            inputs, outputs, gtype, passes, originals, origins = _op_details(e.path, e.op_name, gindex,
                                                                             e.model_name)
        except (FusebisectError, OSError) as exc:
            report.add_unreadable(e.path, _reason(exc), prefix="unreadable op dump: ")
            continue
        bad = [s for s in inputs + outputs if s.abnormal]
        if not bad:
            continue
        ov = Overflow(op_type=gtype or e.op_type, op_name=e.op_name, task_id=e.task_id, stream_id=e.stream_id,
                      timestamp=e.timestamp, unit="scan", status=0, status_words=(),
                      meanings=[f"{s.kind} {s.index}: {s.problem_text()}" for s in bad], inputs=inputs,
                      outputs=outputs, pass_names=passes, original_ops=originals, output_origins=origins,
                      dump_file=e.path, context_id=_name_id(e, "context_id"), thread_id=_name_id(e, "thread_id"),
                      iteration=_iteration_dict(e))
        ov.diagnosis = diagnose(inputs, outputs, op_type=ov.op_type, unit="scan", pass_names=passes,
                                original_ops=originals, op_name=e.op_name, output_origins=origins,
                                locked=gindex.locked)
        report.overflows.append(ov)
        if len(report.overflows) >= limit:
            break
    report.total = report.records = len(report.overflows)
    for k, ov in enumerate(report.overflows, start=1):
        ov.op_index = k
    if report.total >= limit and report.scanned < len(tree.bad) - len(strays) + sum(1 for e in tree.entries if not _is_debug(e)):
        report.notes.append(f"stopped after the first {limit} abnormal ops ({report.scanned} dumps read)")
    return report
