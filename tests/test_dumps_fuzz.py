"""Mutated dump files: only DumpFormatError may escape read_dump and TensorRecord.array()."""

from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusebisect.compare import dtypes as D
from fusebisect.compare.dumpfile import TensorSpec, dump_bytes, read_dump
from fusebisect.errors import DumpFormatError


def _seeds() -> dict[str, bytes]:
    specs_in = [TensorSpec(np.arange(12, dtype=np.float16).reshape(3, 4), format=3, original_shape=(3, 4)),
                TensorSpec(np.array([1, 0, 1], np.uint8), dtype=D.DT_UINT1)]
    specs_out = [TensorSpec(np.ones((2, 2), ml_dtypes.bfloat16), original_op=("orig", 1)),
                 TensorSpec(np.array([-1, 3, 5], np.int8), dtype=D.DT_INT4)]
    seeds = {}
    for enc in ("binary", "protobuf", "nano"):
        seeds[enc] = dump_bytes(op_name="op", inputs=specs_in, outputs=specs_out, encoding=enc,
                                buffers=[] if enc == "nano" else [b"buf"])
    return seeds


SEEDS = _seeds()


def _mutate(blob: bytes, ops) -> bytes:
    data = bytearray(blob)
    for kind, pos, value in ops:
        if kind == "truncate":
            data = data[:pos % (len(data) + 1)]
        elif kind == "flip" and data:
            data[pos % len(data)] ^= (value % 255) + 1
        elif kind == "header" and len(data) >= 8:
            data[0:8] = struct.pack("<Q", value)
        elif kind == "append":
            data += bytes([value % 256]) * (pos % 17)
        elif kind == "u32" and len(data) >= 4:  # overwrite a 4-byte field (counts, tags, lengths in nano)
            at = pos % (len(data) - 3)
            data[at:at + 4] = struct.pack("<I", value % (1 << 32))
    return bytes(data)


ops = st.lists(st.tuples(st.sampled_from(["truncate", "flip", "header", "append", "u32"]),
                         st.integers(0, 1 << 16), st.integers(0, (1 << 64) - 1)), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(encoding=st.sampled_from(sorted(SEEDS)), mutations=ops)
def test_only_our_error_escapes(tmp_path, encoding, mutations):
    path = tmp_path / "Op.op.1.2.3"
    path.write_bytes(_mutate(SEEDS[encoding], mutations))
    try:
        dump = read_dump(path)
        for rec in dump.tensors():
            rec.array()
    except DumpFormatError as exc:
        assert "\n" not in str(exc)


def test_seeds_are_valid(tmp_path):
    for enc, blob in SEEDS.items():
        path = tmp_path / f"Op.op.1.2.{enc}"
        path.write_bytes(blob)
        dump = read_dump(path)
        assert dump.encoding == enc
        np.testing.assert_array_equal(dump.outputs[1].array(), [-1, 3, 5])
