"""Overflow records built byte by byte (struct) for both layouts and every unit, decoded natively."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusebisect.compare.overflow import (
    decode_record,
    decode_record_ex,
    status_meanings,
)
from fusebisect.errors import DumpFormatError

MAGIC = 0x5A5A5A5A


def old_block(*, dha=(0, 0, 0, 0, 0, 0), l2=(0, 0, 0, 0, 0, 0), aic=(0, 0, 0, 0, 0, 0),
              dha_status=0, l2_status=0, kernel_code=0, block_idx=0, aic_status=0) -> bytes:
    """The old 2048-byte record: three 6-u64 info blocks, then the three status areas."""
    buf = bytearray(2048)
    struct.pack_into("<6Q", buf, 0, *dha)
    struct.pack_into("<6Q", buf, 128, *l2)
    struct.pack_into("<6Q", buf, 256, *aic)
    struct.pack_into("<Q", buf, 512, dha_status)
    struct.pack_into("<Q", buf, 768, l2_status)
    struct.pack_into("<3Q", buf, 1024, kernel_code, block_idx, aic_status)
    return bytes(buf)


def new_entry(acc_type: int, values: tuple[int, ...], *, valid: int = 1, data_len: int | None = None) -> bytes:
    body = struct.pack(f"<{len(values)}Q", *values)
    return struct.pack("<IIII", valid, acc_type, 0, len(body) if data_len is None else data_len) + body


def new_record(version: int, *entries: bytes) -> bytes:
    return struct.pack("<II", MAGIC, version) + b"".join(entries)


def aic_values(*, model_id=1, stream_id=2, task_id=3, task_type=0, context_id=0xFFFFFFFF, thread_id=0xFFFFFFFF,
               pc_start=0x1234, para_base=0x5678, core_id=7, block_id=9, status=(0x20,)) -> tuple[int, ...]:
    return (model_id, stream_id, task_id, task_type, context_id, thread_id, pc_start, para_base, core_id, block_id,
            *status)


# ---------------------------------------------------------------------------------------------------- old layout

def test_old_layout_ai_core_float_overflow():
    data = old_block(aic=(5, 1, 327, 0, 0xABC, 0xDEF), kernel_code=0x77, block_idx=4, aic_status=0x20)
    assert len(data) == 2048
    recs = {r.unit: r for r in decode_record(data)}
    assert set(recs) == {"DHA Atomic Add", "L2 Atomic Add", "AI Core"}
    aic = recs["AI Core"]
    assert (aic.layout, aic.model_id, aic.stream_id, aic.task_id, aic.status) == ("old", 5, 1, 327, 0x20)
    assert aic.fields["kernel_code"] == 0x77 and aic.fields["block_idx"] == 4 and aic.fields["pc_start"] == 0xABC
    assert aic.overflow and aic.meanings == ["0x20: floating-point computation overflow"]
    assert not recs["DHA Atomic Add"].overflow and recs["DHA Atomic Add"].meanings == []
    assert not recs["L2 Atomic Add"].overflow


@pytest.mark.parametrize("code,word", [(0x9, "overflow"), (0xA, "underflow"), (0xB, "source"),
                                       (0xC, "destination"), (0xD, "both")])
def test_old_layout_dha_codes_all_decode(code, word):
    # today's tool only matched 0x9 (hex-case bug) and then crashed on it
    data = old_block(dha=(0, 3, 12, 0, 0, 0), dha_status=code << 8)
    dha = next(r for r in decode_record(data) if r.unit == "DHA Atomic Add")
    assert dha.overflow and (dha.task_id, dha.stream_id) == (12, 3)
    assert len(dha.meanings) == 1 and f"0x{code:x}" in dha.meanings[0] and word in dha.meanings[0]


@pytest.mark.parametrize("code,word", [(1, "overflow"), (2, "underflow"), (3, "source"), (4, "destination"),
                                       (5, "both")])
def test_old_layout_l2_codes(code, word):
    data = old_block(l2=(0, 0, 44, 0, 0, 0), l2_status=code << 16)
    l2 = next(r for r in decode_record(data) if r.unit == "L2 Atomic Add")
    assert l2.task_id == 44 and l2.overflow
    assert len(l2.meanings) == 1 and l2.meanings[0].startswith(f"L2 code {code:03b}: ")
    assert word in l2.meanings[0]


def test_old_layout_all_zero_does_not_crash():
    recs = decode_record(bytes(2048))
    assert len(recs) == 3 and not any(r.overflow for r in recs)
    assert all(r.meanings == [] for r in recs)


def test_old_layout_several_units_at_once():
    data = old_block(dha=(0, 0, 5, 0, 0, 0), aic=(0, 0, 6, 0, 0, 0), dha_status=0xC00, aic_status=0x120)
    over = {r.unit: r for r in decode_record(data) if r.overflow}
    assert set(over) == {"DHA Atomic Add", "AI Core"}
    assert over["AI Core"].meanings == ["0x20: floating-point computation overflow",
                                        "0x100: overflow converting FP32 or INT32 to FP16"]


# ---------------------------------------------------------------------------------------------------- new layout

@pytest.mark.parametrize("acc_type,unit", [(0, "AIC"), (1, "AIV")])
def test_new_layout_aic_aiv(acc_type, unit):
    data = new_record(0, new_entry(acc_type, aic_values(task_id=3, stream_id=0, status=(8,))))
    (rec,) = decode_record(data)
    assert (rec.layout, rec.unit, rec.task_id, rec.stream_id, rec.status, rec.version) == ("new", unit, 3, 0, 8, 0)
    assert rec.context_id is None and rec.thread_id is None  # 0xFFFFFFFF = not set
    assert rec.fields["core_id"] == 7 and rec.fields["block_id"] == 9 and rec.fields["para_base"] == 0x5678
    assert rec.meanings == ["0x8: signed-integer minimum negated (NEG sign-bit overflow)"]


def test_new_layout_valid_context_and_thread_ids_kept():
    data = new_record(0, new_entry(0, aic_values(context_id=4, thread_id=1)))
    (rec,) = decode_record(data)
    assert (rec.context_id, rec.thread_id) == (4, 1)
    data = new_record(0, new_entry(0, aic_values(context_id=0xFFFFFFFFFFFFFFFF, thread_id=0xFFFF)))
    (rec,) = decode_record(data)
    assert (rec.context_id, rec.thread_id) == (None, None)


def test_new_layout_version1_four_word_status():
    data = new_record(1, new_entry(0, aic_values(status=(0x20, 0, 0xBEEF, 0))))
    assert len(data) == 8 + 16 + 14 * 8
    (rec,) = decode_record(data)
    assert rec.status_words == (0x20, 0, 0xBEEF, 0) and rec.status == 0x20
    assert rec.meanings == ["0x20: floating-point computation overflow", "status word 2: 0xbeef"]
    # overflow is any non-zero word, even when word 0 is clear
    (rec,) = decode_record(new_record(1, new_entry(1, aic_values(status=(0, 0, 0, 1)))))
    assert rec.overflow and rec.meanings == ["status word 3: 0x1"]


def test_new_layout_version1_with_one_word_data_len_trusts_data_len():
    recs, problems = decode_record_ex(new_record(1, new_entry(0, aic_values(status=(0x20,)))))
    assert recs[0].status_words == (0x20,)
    assert problems == [] and "one-word status: read as one" in recs[0].note


def test_new_layout_sdma():
    values = (1, 6, 77, 3, 2, 0, 0x1000, 0x2000, 5, 0x9 << 8)
    (rec,) = decode_record(new_record(0, new_entry(3, values)))
    assert (rec.unit, rec.task_id, rec.stream_id, rec.context_id, rec.thread_id) == ("SDMA", 77, 6, 2, 0)
    assert rec.fields["src_addr"] == 0x1000 and rec.fields["dst_addr"] == 0x2000 and rec.fields["channel_id"] == 5
    assert rec.status == 0x900 and rec.meanings == ["SDMA status 0x900 (no public decoding for this unit)"]


def test_new_layout_aicpu():
    values = (1, 2, 88, 1, 3, 11, 4, 0x20)   # ..., context_id, cpu_id, thread_id, status
    (rec,) = decode_record(new_record(0, new_entry(2, values)))
    assert (rec.unit, rec.task_id, rec.context_id, rec.thread_id) == ("AICPU", 88, 3, 4)
    assert rec.fields["cpu_id"] == 11 and rec.status == 0x20 and rec.overflow


def test_new_layout_several_entries_and_zero_padding():
    data = new_record(0, new_entry(0, aic_values(task_id=1, status=(0x20,))),
                      new_entry(1, aic_values(task_id=2, status=(0,))),
                      new_entry(3, (0, 0, 3, 0, 0, 0, 0, 0, 0, 1))) + bytes(64)
    recs, problems = decode_record_ex(data)
    assert [(r.unit, r.task_id, r.entry, r.overflow) for r in recs] == [
        ("AIC", 1, 0, True), ("AIV", 2, 1, False), ("SDMA", 3, 2, True)]
    assert problems == []


def test_new_layout_truncated_second_entry_is_a_problem_not_a_crash():
    data = new_record(0, new_entry(0, aic_values()), new_entry(0, aic_values())[:40])
    recs, problems = decode_record_ex(data)
    assert len(recs) == 1 and "truncated" in problems[0] and "entry 1" in problems[0]


def test_new_layout_invalid_entry_skipped():
    recs, problems = decode_record_ex(new_record(0, new_entry(0, aic_values(), valid=0)))
    assert recs == [] and "valid flag is 0" in problems[0]


# ---------------------------------------------------------------------------------------------------- garbage

@pytest.mark.parametrize("data,needle", [
    (b"", "0 bytes"),
    (b"\x01\x02\x03", "3 bytes"),
    (bytes(2047), "2047 bytes"),
    (bytes(4096), "4096 bytes"),
    (struct.pack("<II", MAGIC, 0), "shorter than its 24-byte header"),
    (new_record(0, struct.pack("<IIII", 1, 9, 0, 88) + bytes(88)), "unknown acc_type 9"),
    (new_record(0, new_entry(0, aic_values())[:50]), "truncated"),
    (new_record(1, new_entry(0, aic_values(status=(1, 2, 3, 4)))[:16 + 12 * 8]), "truncated"),
])
def test_garbage_raises_dump_format_error(data, needle):
    with pytest.raises(DumpFormatError) as exc:
        decode_record(data)
    assert needle in str(exc.value)


# ---------------------------------------------------------------------------------------------------- status decoding

def test_ai_core_every_bit_and_unknown_bits():
    meanings = status_meanings("AI Core", 0x8 | 0x10 | 0x20 | 0x80 | 0x100 | 0x400 | 0x1 | 0x40 | (1 << 40))
    assert len(meanings) == 7
    assert meanings[-1] == f"unknown status bits 0x{0x1 | 0x40 | (1 << 40):x}"
    assert "CUBE accumulation overflow" in meanings[5]


@pytest.mark.parametrize("status", [0x900, 0xA00, 0xB00, 0xC00, 0xD00])
def test_dha_codes_compare_as_ints(status):
    (meaning,) = status_meanings("DHA Atomic Add", status)
    assert meaning.startswith(f"DHA code 0x{status >> 8:x}: ")
    assert "unknown" not in meaning


def test_dha_unknown_code_and_extra_bits():
    assert status_meanings("DHA Atomic Add", 0xE00 | 0x3) == ["unknown DHA atomic add code 0xe",
                                                             "unknown status bits 0x3"]


def test_l2_unknown_codes_and_extra_bits():
    assert status_meanings("L2 Atomic Add", 0b110 << 16) == ["unknown L2 atomic add code 110"]
    assert status_meanings("L2 Atomic Add", 1 << 20) == [f"unknown status bits 0x{1 << 20:x}"]


def test_zero_status_has_no_meaning_for_every_unit():
    for unit in ("AI Core", "AIC", "AIV", "AICPU", "SDMA", "DHA Atomic Add", "L2 Atomic Add"):
        assert status_meanings(unit, 0) == [] and status_meanings(unit, (0, 0, 0, 0)) == []


def test_status_meanings_never_raise_on_odd_ints():
    for value in (-1, 2**64 - 1, 2**70):
        assert status_meanings("AI Core", value)
        assert status_meanings("DHA Atomic Add", value)
        assert status_meanings("L2 Atomic Add", value)


# ---------------------------------------------------------------------------------------------------- fuzz


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.booleans(), st.integers(0, 3))
def test_any_bytes_decode_or_raise_dump_format_error(tail, with_magic, version):
    data = (struct.pack("<II", MAGIC, version) + tail) if with_magic else tail
    try:
        records, problems = decode_record_ex(data)
    except DumpFormatError as exc:
        assert str(exc)
        return
    for rec in records:
        assert isinstance(rec.meanings, list)
        assert rec.unit in ("AIC", "AIV", "AICPU", "SDMA", "AI Core", "DHA Atomic Add", "L2 Atomic Add")
    assert all(isinstance(p, str) for p in problems)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**64 - 1), st.sampled_from(["AI Core", "AIC", "AIV", "AICPU", "SDMA", "DHA Atomic Add",
                                                   "L2 Atomic Add"]))
def test_every_status_word_is_explained_or_shown_as_hex(status, unit):
    meanings = status_meanings(unit, status)
    assert bool(meanings) == bool(status)


def test_a_status_beyond_the_layout_is_never_silently_dropped():
    # version 0 header, but data_len holds four status words, the overflow in word 2
    four = new_entry(0, aic_values(status=(0, 0, 0x20, 0)))
    records, problems = decode_record_ex(new_record(0, four))
    assert [r.status_words for r in records] == [(0, 0, 0x20, 0)] and records[0].overflow
    # every byte was read (data_len is what the writer wrote): a note on the record, not damage
    assert problems == [] and records[0].note == ("acc_list entry 0 at byte 8: version 0 but data_len 112 fits a "
                                                  "four-word status: read as four")
    # a data_len longer than any layout: the bytes it does not explain are reported, not silently skipped
    longer = new_entry(0, aic_values(status=(0, 0x20, 0)))
    records, problems = decode_record_ex(new_record(0, longer))
    assert not any(r.overflow for r in records) and "data_len 104 is more than the 88 bytes" in problems[0]
