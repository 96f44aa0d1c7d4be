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
from typing import Any, Iterable, Sequence

import numpy as np

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

    @property
    def status(self) -> int:
        """The primary status word (word 0)."""
        return self.status_words[0] if self.status_words else 0

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
        if unit in ("AIC", "AIV") and version >= 1 and data_len == len(names) * 8:
            words, need = 1, len(names) * 8   # version 1 header but a one-word status: trust data_len
            problems.append(f"{where}: version {version} but data_len {data_len} fits a one-word status")
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
                                                      "data_len": data_len, **info}))
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
