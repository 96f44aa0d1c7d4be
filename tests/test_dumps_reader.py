"""Dump file reading and writing: every encoding, every dtype, the size rule and one-line errors."""

from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
import pytest

from fusebisect.compare import dtypes as D
from fusebisect.compare.dumpfile import TensorSpec, dump_bytes, read_dump, write_dump
from fusebisect.errors import DumpFormatError

# ---------------------------------------------------------------- hand-built bytes (independent of our writer)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, wire: int, payload: bytes | int) -> bytes:
    key = _varint((number << 3) | wire)
    if wire == 0:
        return key + _varint(payload)
    return key + _varint(len(payload)) + payload


def _shape(dims) -> bytes:
    return b"".join(_field(1, 0, d) for d in dims)  # Shape.dim, unpacked varints (parsers accept both)


def test_binary_file_built_by_hand_is_read_back(tmp_path):
    """A binary dump assembled with struct and hand-encoded protobuf varints, not our writer or pb2 classes."""
    x = np.arange(6, dtype="<f2").reshape(2, 3)
    y = np.array([[1, -2], [3, 300]], dtype="<i4")
    # OpInput: data_type=1, format=2, shape=3, size=5, original_shape=6, address=8
    op_input = (_field(1, 0, 2) + _field(2, 0, 2) + _field(3, 2, _shape([2, 3])) + _field(5, 0, x.nbytes)
                + _field(6, 2, _shape([2, 3])) + _field(8, 0, 0x1000))
    # OpOutput: data_type=1, format=2, shape=3, original_op=4 {name=1, output_index=2}, size=6
    op_output = (_field(1, 0, 7) + _field(2, 0, 3) + _field(3, 2, _shape([2, 2]))
                 + _field(4, 2, _field(1, 2, b"orig/conv") + _field(2, 0, 1)) + _field(6, 0, y.nbytes))
    space = _field(3, 0, 5)  # Workspace.size = 5
    # DumpData: version=1, dump_time=2, output=3, input=4, op_name=6, space=8
    header = (_field(1, 2, b"2.0") + _field(2, 0, 1700000000000002) + _field(3, 2, op_output)
              + _field(4, 2, op_input) + _field(6, 2, b"conv1") + _field(8, 2, space))
    blob = struct.pack("<Q", len(header)) + header + x.tobytes() + y.tobytes() + b"LOG!!"
    path = tmp_path / "Conv2D.conv1.1.0.1700000000000002"
    path.write_bytes(blob)

    dump = read_dump(path)
    assert dump.encoding == "binary"
    assert (dump.op_name, dump.version, dump.dump_time) == ("conv1", "2.0", 1700000000000002)
    (inp,), (out,) = dump.inputs, dump.outputs
    assert (inp.dtype_name, inp.format_name, inp.shape, inp.original_shape, inp.address) == \
        ("float16", "ND", (2, 3), (2, 3), 0x1000)
    assert (out.dtype_name, out.format_name, out.original_op) == ("int32", "NC1HWC0", ("orig/conv", 1))
    np.testing.assert_array_equal(inp.array(), x)
    np.testing.assert_array_equal(out.array(), y)
    assert dump.spaces[0].raw().tobytes() == b"LOG!!"
    assert not inp.array().flags.owndata  # a view on the mapped file, not a copy


NANO_SAMPLE = bytes.fromhex("".join("""
db000000 00000000 5a5a5a5a 07000000 04000000 4c000000 01000000 03000000
02000000 00000000 00000000 00000000 00000000 00000000 10000000 00000000
20000000 00000000 08000000 04000000 00000000 01000000 08000000 04000000
00000000 05000000 77000000 01000000 00000000 02000000 00000000 00000000
00000000 02000000 00000000 00000000 00000000 00000000 18000000 00000000
3f000000 00000000 10000000 02000000 00000000 03000000 00000000 01000000
10000000 02000000 00000000 03000000 00000000 02000000 07000000 6f726967
5f6f7000 00000001 00000002 00000003 00000000 00000000 00803f00 00004000
00404000 00804000 00a040""".split()))


def test_nano_reference_sample_decodes_exactly(tmp_path):
    assert len(NANO_SAMPLE) == 267
    path = tmp_path / "Add.add1.1.0.1700000000000002"
    path.write_bytes(NANO_SAMPLE)
    dump = read_dump(path)
    assert (dump.encoding, dump.version, dump.op_name, dump.dump_time) == ("nano", "7", "add1", 1700000000000002)
    (inp,), (out,) = dump.inputs, dump.outputs
    assert (inp.dtype, inp.format, inp.shape, inp.original_shape, inp.size) == (D.DT_INT32, 2, (4,), (4,), 16)
    assert (out.dtype, out.shape, out.original_shape, out.size) == (D.DT_FLOAT, (2, 3), (2, 3), 24)
    assert out.original_op == ("orig_op", 0)
    np.testing.assert_array_equal(inp.array(), np.arange(4, dtype=np.int32))
    np.testing.assert_array_equal(out.array(), np.arange(6, dtype=np.float32).reshape(2, 3))


def test_our_nano_writer_matches_the_reference_bytes_except_version():
    blob = dump_bytes(op_name="add1", encoding="nano",
                      inputs=[TensorSpec(np.arange(4, dtype=np.int32), original_shape=(4,))],
                      outputs=[TensorSpec(np.arange(6, dtype=np.float32).reshape(2, 3), original_shape=(2, 3),
                                          original_op=("orig_op", 0))])
    assert len(blob) == len(NANO_SAMPLE)
    assert blob[:12] == NANO_SAMPLE[:12] and blob[16:] == NANO_SAMPLE[16:]  # bytes 12..15: version (ours 0)


# ---------------------------------------------------------------- round trips through our writer

ALL_DTYPES = [
    (D.DT_FLOAT, np.float32), (D.DT_FLOAT16, np.float16), (D.DT_DOUBLE, np.float64),
    (D.DT_BF16, ml_dtypes.bfloat16), (D.DT_FLOAT8_E4M3FN, ml_dtypes.float8_e4m3fn),
    (D.DT_FLOAT8_E5M2, ml_dtypes.float8_e5m2), (D.DT_INT8, np.int8), (D.DT_UINT8, np.uint8),
    (D.DT_INT16, np.int16), (D.DT_UINT16, np.uint16), (D.DT_INT32, np.int32), (D.DT_UINT32, np.uint32),
    (D.DT_INT64, np.int64), (D.DT_UINT64, np.uint64), (D.DT_BOOL, np.bool_), (D.DT_COMPLEX64, np.complex64),
    (D.DT_COMPLEX128, np.complex128),
]


def _sample(np_dtype, shape, rng):
    if np.dtype(np_dtype) == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(np.dtype(np_dtype), np.integer):
        info = np.iinfo(np_dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(np_dtype)
    if np.issubdtype(np.dtype(np_dtype), np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np_dtype)
    return rng.standard_normal(shape).astype(np_dtype)


@pytest.mark.parametrize("encoding", ["binary", "protobuf", "nano"])
@pytest.mark.parametrize("dt,np_dtype", ALL_DTYPES, ids=[D.dtype_name(d) for d, _ in ALL_DTYPES])
def test_every_dtype_round_trips(tmp_path, encoding, dt, np_dtype):
    if encoding == "nano" and dt not in D.PROTO_TO_NANO:
        with pytest.raises(DumpFormatError, match=D.dtype_name(dt)):
            dump_bytes(op_name="x", inputs=[], outputs=[TensorSpec(np.zeros(2, np_dtype))], encoding=encoding)
        return
    rng = np.random.default_rng(dt)
    a, b = _sample(np_dtype, (3, 5), rng), _sample(np_dtype, (7,), rng)
    path = write_dump(tmp_path / "Op.op.1.2.3", op_name="op", encoding=encoding,
                      inputs=[TensorSpec(a)], outputs=[TensorSpec(b, format=3, original_shape=(7,))])
    dump = read_dump(path)
    assert dump.encoding == encoding
    assert dump.inputs[0].dtype == dt and dump.inputs[0].dtype_name == D.dtype_name(dt)
    got = dump.inputs[0].array()
    assert got.dtype == np.dtype(np_dtype) and got.shape == (3, 5)
    np.testing.assert_array_equal(got.view(np.uint8), a.view(np.uint8))
    np.testing.assert_array_equal(dump.outputs[0].array().view(np.uint8), b.view(np.uint8))
    assert dump.outputs[0].format_name == "NC1HWC0"


@pytest.mark.parametrize("encoding", ["binary", "protobuf", "nano"])
def test_packed_dtypes_unpack(tmp_path, encoding):
    bits = np.array([[1, 0, 1, 1, 0], [0, 0, 1, 1, 1]], np.uint8)
    nibbles = np.array([-8, -1, 0, 1, 7, -3, 5], np.int8)
    path = write_dump(tmp_path / "Op.op.1.2.3", op_name="op", encoding=encoding,
                      inputs=[TensorSpec(bits, dtype=D.DT_UINT1)],
                      outputs=[TensorSpec(nibbles, dtype=D.DT_INT4)])
    dump = read_dump(path)
    assert dump.inputs[0].size == 2 and dump.outputs[0].size == 4
    np.testing.assert_array_equal(dump.inputs[0].array(), bits)
    np.testing.assert_array_equal(dump.outputs[0].array(), nibbles)


def test_packed_dtypes_with_an_empty_shape_cover_all_their_bytes(tmp_path):
    """An empty shape with bytes is 1-D over all of them (msaccucmp): 4 bytes of uint1 are 32 bits, of int4 8
    nibbles, not one element."""
    path = write_dump(tmp_path / "Op.op.1.2.3", op_name="op", inputs=[],
                      outputs=[TensorSpec(np.frombuffer(bytes([0xF0, 0x0F, 0xAA, 0x55]), np.uint8), dtype=D.DT_UINT8)])
    dump = read_dump(path)
    for dtype, want in ((D.DT_UINT1, np.unpackbits(np.array([0xF0, 0x0F, 0xAA, 0x55], np.uint8))),
                        (D.DT_INT4, [0, -1, -1, 0, -6, -6, 5, 5])):
        rec = dump.outputs[0]
        rec.dtype, rec.shape = dtype, ()
        np.testing.assert_array_equal(rec.array(), want)


def test_int4_low_nibble_first_sign_extended(tmp_path):
    # byte 0x9F: low nibble 0xF (-1) then high nibble 0x9 (-7); byte 0x07: 7 then 0
    raw = np.frombuffer(bytes([0x9F, 0x07]), np.uint8)
    np.testing.assert_array_equal(D.decode(raw, D.DT_INT4, (3,)), [-1, -7, 7])


def test_uint1_is_msb_first():
    raw = np.frombuffer(bytes([0b10100000]), np.uint8)
    np.testing.assert_array_equal(D.decode(raw, D.DT_UINT1, (3,)), [1, 0, 1])


def test_hifloat8_known_codes():
    codes = np.array([0x00, 0x08, 0x88, 0x6E, 0x7E, 0x01, 0x07, 0x6F, 0xEF, 0x80, 0x40, 0x21, 0x18], np.uint8)
    want = [0.0, 1.0, -1.0, 32768.0, 2.0 ** -15, 2.0 ** -22, 2.0 ** -16, np.inf, -np.inf, np.nan,
            16.0,  # 0 10 000 00: D=3, exponent +4
            4.0 * 1.125,  # 0 01 0 0 001: D=2, exponent +2, mantissa 1/8
            0.5]  # 0 001 1 000: D=1, exponent -1
    np.testing.assert_array_equal(D.hifloat8_to_float32(codes), np.array(want, np.float32))


def test_hifloat8_round_trip_through_binary(tmp_path):
    values = np.array([0.0, 1.0, -1.5, 3.0, 1024.0, -32768.0], np.float32)
    path = write_dump(tmp_path / "Op.op.1.2.3", op_name="op", inputs=[],
                      outputs=[TensorSpec(values, dtype=D.DT_HIFLOAT8)])
    out = read_dump(path).outputs[0]
    assert out.dtype_name == "hifloat8" and out.size == values.size
    np.testing.assert_array_equal(out.array(), values)


def test_npy_is_read_as_one_output(tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = tmp_path / "conv1.0.1700000000000002.npy"
    np.save(path, a)
    dump = read_dump(path)
    assert (dump.encoding, dump.op_name, dump.dump_time) == ("npy", "conv1", 1700000000000002)
    np.testing.assert_array_equal(dump.outputs[0].array(), a)
    np.save(tmp_path / "f.npy", np.asfortranarray(a))
    np.testing.assert_array_equal(read_dump(tmp_path / "f.npy").outputs[0].array(), a)


def test_detection_is_by_content_not_name(tmp_path):
    a = np.ones(3, np.float32)
    for enc in ("binary", "protobuf", "nano"):
        path = write_dump(tmp_path / f"weird_{enc}.npy", op_name="op", inputs=[], outputs=[TensorSpec(a)],
                          encoding=enc)
        assert read_dump(path).encoding == enc


def test_buffers_and_spaces_follow_outputs(tmp_path):
    path = write_dump(tmp_path / "Op.op.1.2.3", op_name="op", inputs=[TensorSpec(np.ones(2, np.int8))],
                      outputs=[TensorSpec(np.zeros(1, np.int8))], buffers=[b"BUF"], spaces=[b"SP"])
    blob = path.read_bytes()
    assert blob.endswith(b"\x01\x01\x00BUFSP")
    dump = read_dump(path)
    assert dump.buffers[0].raw().tobytes() == b"BUF" and dump.spaces[0].raw().tobytes() == b"SP"


# ---------------------------------------------------------------- errors


def _valid(tmp_path, encoding="binary"):
    return write_dump(tmp_path / "Op.op.1.2.3", op_name="op", encoding=encoding,
                      inputs=[TensorSpec(np.arange(4, dtype=np.float32))],
                      outputs=[TensorSpec(np.arange(6, dtype=np.int16))])


@pytest.mark.parametrize("encoding", ["binary", "nano"])
def test_size_rule_says_by_how_much_and_which_file(tmp_path, encoding):
    path = _valid(tmp_path, encoding)
    path.write_bytes(path.read_bytes() + b"xyz")
    with pytest.raises(DumpFormatError) as info:
        read_dump(path)
    msg = str(info.value)
    assert str(path) in msg and "3 bytes too many" in msg and "\n" not in msg
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(DumpFormatError, match="7 bytes missing"):
        read_dump(path)


def test_empty_file(tmp_path):
    path = tmp_path / "A.b.1.2.3"
    path.write_bytes(b"")
    with pytest.raises(DumpFormatError, match="empty file"):
        read_dump(path)


def test_header_length_past_the_end(tmp_path):
    path = tmp_path / "A.b.1.2.3"
    path.write_bytes(struct.pack("<Q", 1000) + b"\x0a\x03" + b"2.0")
    with pytest.raises(DumpFormatError, match="header length 1000 runs past the end"):
        read_dump(path)


def test_garbage_protobuf_header(tmp_path):
    path = tmp_path / "A.b.1.2.3"
    path.write_bytes(struct.pack("<Q", 4) + b"\xff\xff\xff\xff")
    with pytest.raises(DumpFormatError, match="not a dump file"):
        read_dump(path)


def test_truncated_binary(tmp_path):
    path = _valid(tmp_path)
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(DumpFormatError) as info:
        read_dump(path)
    assert str(path) in str(info.value)


def test_unsupported_dtype_is_named(tmp_path):
    path = write_dump(tmp_path / "Op.op.1.2.3", op_name="op", inputs=[],
                      outputs=[TensorSpec(np.zeros(4, np.uint8), dtype=36)])  # DT_FLOAT8_E8M0
    out = read_dump(path).outputs[0]
    assert out.dtype_name == "float8_e8m0"
    with pytest.raises(DumpFormatError, match=r"output 0: unsupported data type float8_e8m0 \(36\)"):
        out.array()
    with pytest.raises(DumpFormatError, match="float8_e8m0"):
        D.numpy_dtype(36)


def test_shape_larger_than_data_is_an_error(tmp_path):
    from fusebisect.proto import dump_data_pb2 as dd

    msg = dd.DumpData(version="2.0", op_name="op")
    t = msg.output.add(data_type=D.DT_FLOAT, format=2, size=8)
    t.shape.dim.extend([4])
    header = msg.SerializeToString()
    path = tmp_path / "Op.op.1.2.3"
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(8))
    with pytest.raises(DumpFormatError, match="needs 16 bytes, the file holds 8"):
        read_dump(path).outputs[0].array()


def test_cli_error_is_one_line_exit_2(tmp_path, capsys):
    from fusebisect.cli.app import main

    path = tmp_path / "A.b.1.2.3"
    path.write_bytes(b"\x01\x02")
    rc = main(["inspect", "dump", str(path)])
    captured = capsys.readouterr()
    assert rc == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fusebisect: error: ") and str(path) in lines[0]


def test_nano_dtype_without_proto_equivalent_is_named(tmp_path):
    blob = bytearray(NANO_SAMPLE)
    blob[0x1C:0x20] = (13).to_bytes(4, "little")  # input 0 data_type: nano 13 (DT_STRING)
    path = tmp_path / "Add.add1.1.0.1700000000000002"
    path.write_bytes(bytes(blob))
    inp = read_dump(path).inputs[0]
    assert inp.dtype_name == "nano_dtype_13"
    with pytest.raises(DumpFormatError, match="input 0: unsupported data type nano_dtype_13"):
        inp.array()
