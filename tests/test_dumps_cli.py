"""`inspect dump` and `dump convert`, and the real msaccucmp reading our nano files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fusebisect.cli.app import main
from fusebisect.compare.dumpfile import TensorSpec, write_dump
from fusebisect.compare.formats import from_original


def _run(capsys, *argv):
    rc = main(list(argv))
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_inspect_dump_json(tmp_path, capsys):
    x = np.array([[1.0, np.nan], [np.inf, -2.0]], np.float16)
    y = np.arange(6, dtype=np.int32)
    path = write_dump(tmp_path / "Add.add1.1.0.5", op_name="add1", inputs=[TensorSpec(x, original_shape=(2, 2))],
                      outputs=[TensorSpec(y, format=29)])
    rc, out, _ = _run(capsys, "inspect", "dump", str(path), "--json")
    assert rc == 0
    doc = json.loads(out)
    assert set(doc) == {"path", "op_name", "encoding", "inputs", "outputs"}
    assert (doc["op_name"], doc["encoding"]) == ("add1", "binary")
    assert doc["inputs"] == [{"index": 0, "dtype": "float16", "format": "ND", "shape": [2, 2],
                              "original_shape": [2, 2], "size": 8, "min": -2.0, "max": 1.0, "mean": -0.5,
                              "nan": 1, "inf": 1, "stats_of": "stored", "error": None}]
    out0 = doc["outputs"][0]
    assert (out0["format"], out0["original_shape"], out0["min"], out0["max"], out0["mean"], out0["stats_of"]) == \
        ("FRACTAL_NZ", None, 0, 5, 2.5, "stored")


def test_inspect_dump_shows_a_tensor_without_dims_as_it_reads_it(tmp_path, capsys):
    """No dims but 3 elements is read 1-D (the stats and convert did so); the shape column said () (a scalar)."""
    from fusebisect.compare.dumpfile import dump_bytes
    from fusebisect.proto import dump_data_pb2

    msg = dump_data_pb2.DumpData.FromString(dump_bytes(
        op_name="d", inputs=[], outputs=[TensorSpec(np.array([0.0, 1.0, 2.0], np.float32))], encoding="protobuf"))
    del msg.output[0].shape.dim[:]
    path = tmp_path / "D.d.4.0.400"
    path.write_bytes(msg.SerializeToString())
    rc, out, _ = _run(capsys, "inspect", "dump", str(path), "--json")
    row = json.loads(out)["outputs"][0]
    assert rc == 0 and (row["shape"], row["mean"], row["max"]) == ([3], 1.0, 2.0)


def test_inspect_dump_stats_leave_out_the_padding_of_a_private_format(tmp_path, capsys):
    logical = np.arange(1, 16, dtype=np.float32).reshape(3, 5)      # 1..15: no zero anywhere
    stored = from_original(logical, "FRACTAL_NZ")                      # zero padded to 16x16 blocks
    assert stored.size > logical.size and (stored == 0).any()
    path = write_dump(tmp_path / "MatMul.mm.1.0.5", op_name="mm", inputs=[],
                      outputs=[TensorSpec(stored, format=29, original_shape=(3, 5))])
    rc, out, _ = _run(capsys, "inspect", "dump", str(path), "--json")
    [row] = json.loads(out)["outputs"]
    assert rc == 0 and row["shape"] == list(stored.shape) and row["original_shape"] == [3, 5]
    assert (row["min"], row["max"], row["mean"], row["stats_of"]) == (1.0, 15.0, 8.0, "original")
    rc, out, _ = _run(capsys, "inspect", "dump", str(path))
    assert rc == 0 and "of the original layout" in out
    # NC1HWC0_C04 (NC1HWC0 with C0 = 4) too; a device layout without an original shape says its stats are padded
    nchw = np.arange(1, 2 * 3 * 2 * 2 + 1, dtype=np.float32).reshape(2, 3, 2, 2)
    c04 = np.zeros((2, 1, 2, 2, 4), np.float32)
    c04[:, 0, :, :, :3] = nchw.transpose(0, 2, 3, 1)
    path = write_dump(tmp_path / "Conv2D.c.1.0.6", op_name="c", inputs=[],
                      outputs=[TensorSpec(c04, format=12, original_shape=(2, 3, 2, 2)),
                               TensorSpec(stored, format=29)])
    rc, out, _ = _run(capsys, "inspect", "dump", str(path), "--json")
    first, second = json.loads(out)["outputs"]
    assert (first["min"], first["max"], first["mean"], first["stats_of"]) == (1.0, 24.0, 12.5, "original")
    assert (second["min"], second["stats_of"]) == (0.0, "stored")
    rc, out, _ = _run(capsys, "inspect", "dump", str(path))
    assert "of NC1HWC0_C04 tensors are of the original layout" in out
    assert "of FRACTAL_NZ tensors are of the stored device layout, padding included (no original shape" in " ".join(out.split())


def test_inspect_dump_table(tmp_path, capsys):
    path = write_dump(tmp_path / "Add.add1.1.0.5", op_name="add1", encoding="nano", inputs=[],
                      outputs=[TensorSpec(np.ones(3, np.float32))])
    rc, out, _ = _run(capsys, "inspect", "dump", str(path))
    assert rc == 0 and "add1" in out and "nano" in out and "float32" in out


@pytest.mark.parametrize("content", [b"", b"\x05\x00\x00\x00\x00\x00\x00\x00ab", b"garbage!" * 3])
def test_inspect_bad_file_one_line_exit_2(tmp_path, capsys, content):
    path = tmp_path / "Add.add1.1.0.5"
    path.write_bytes(content)
    rc, out, err = _run(capsys, "inspect", "dump", str(path))
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and str(path) in err and "Traceback" not in err


def test_a_tensor_of_a_dtype_without_a_decoder_leaves_the_others_shown_and_converted(tmp_path, capsys):
    """An MX matmul's float8_e8m0 scale (or a float6 tensor) cannot be decoded: the file's other tensors are
    still inspected and converted, the one that cannot be is named with the reason, as msaccucmp's convert does."""
    (tmp_path / "in").mkdir()
    x = np.arange(6, dtype=np.float32)
    path = write_dump(tmp_path / "in" / "Add.add1.1.0.5", op_name="a", inputs=[TensorSpec(x)],
                      outputs=[TensorSpec(np.zeros(2, np.uint8), dtype=37), TensorSpec(x)])
    rc, out, _ = _run(capsys, "inspect", "dump", str(path), "--json")
    rows = json.loads(out)["outputs"]
    assert rc == 0 and rows[0]["dtype"] == "float6_e3m2" and "unsupported data type" in rows[0]["error"]
    assert rows[0]["max"] is None and rows[1]["max"] == 5.0 and rows[1]["error"] is None
    rc, out, err = _run(capsys, "dump", "convert", str(path), "--out", str(tmp_path / "npy"), "--json")
    doc = json.loads(out)
    assert rc == 0 and [f["tensor"] for f in doc["files"]] == ["input.0", "output.1"]
    assert [(s["tensor"], s["reason"].startswith("output 0: ")) for s in doc["skipped"]] == [("output.0", True)]
    assert "output 0: output 0" not in err
    only = write_dump(tmp_path / "in" / "Add.add2.1.0.6", op_name="b", inputs=[],
                      outputs=[TensorSpec(np.zeros(2, np.uint8), dtype=37)])
    rc, _, err = _run(capsys, "dump", "convert", str(only), "--out", str(tmp_path / "npy2"))
    assert rc == 2 and "nothing in the 1 tensor could be converted" in err and "float6_e3m2" in err


def test_dump_convert_original_removes_padding(tmp_path, capsys):
    x = np.random.default_rng(1).standard_normal((2, 5, 3, 3)).astype(np.float32)
    w = np.random.default_rng(2).standard_normal((20, 5, 1, 1)).astype(np.float32)
    path = write_dump(tmp_path / "dump" / "Conv2D.conv1.1.0.5", op_name="conv1",
                      inputs=[TensorSpec(from_original(x, "NC1HWC0"), format=3, original_shape=x.shape),
                              TensorSpec(from_original(w, "FRACTAL_Z"), format=4, original_shape=w.shape)],
                      outputs=[TensorSpec(np.ones((2, 3), ml_bf16()), original_shape=(2, 3))])
    out_dir = tmp_path / "out"
    rc, out, _ = _run(capsys, "dump", "convert", str(path), "--out", str(out_dir), "--format", "ORIGINAL", "--json")
    assert rc == 0
    doc = json.loads(out)
    assert sorted(f["path"].rsplit("/", 1)[1] for f in doc["files"]) == [   # msaccucmp's names, converted shape
        "Conv2D.conv1.1.0.5.input.0.2x5x3x3.npy", "Conv2D.conv1.1.0.5.input.1.20x5x1x1.npy",
        "Conv2D.conv1.1.0.5.output.0.2x3.npy"]
    np.testing.assert_array_equal(np.load(out_dir / "Conv2D.conv1.1.0.5.input.0.2x5x3x3.npy"), x)
    np.testing.assert_array_equal(np.load(out_dir / "Conv2D.conv1.1.0.5.input.1.20x5x1x1.npy"), w)
    assert np.load(out_dir / "Conv2D.conv1.1.0.5.output.0.2x3.npy").dtype == np.float32
    rc, _, _ = _run(capsys, "dump", "convert", str(path), "--out", str(out_dir), "--format", "NHWC")
    assert rc == 0
    np.testing.assert_array_equal(np.load(out_dir / "Conv2D.conv1.1.0.5.input.0.2x3x3x5.npy"), x.transpose(0, 2, 3, 1))
    rc, _, _ = _run(capsys, "dump", "convert", str(path), "--out", str(out_dir))
    assert np.load(out_dir / "Conv2D.conv1.1.0.5.input.0.npy").shape == (2, 1, 3, 3, 16)


def ml_bf16():
    import ml_dtypes

    return ml_dtypes.bfloat16


def test_dump_convert_dir_skips_bad_files(tmp_path, capsys):
    src = tmp_path / "dump"
    write_dump(src / "Add.add1.1.0.5", op_name="a", inputs=[], outputs=[TensorSpec(np.ones(2, np.float32))])
    (src / "Add.add2.1.0.6").write_bytes(b"\x00" * 5)
    before = sorted(p.name for p in src.iterdir())
    rc, out, _ = _run(capsys, "dump", "convert", str(src), "--out", str(tmp_path / "o"), "--json")
    assert rc == 0
    doc = json.loads(out)
    assert [f["tensor"] for f in doc["files"]] == ["output.0"]
    assert [s["path"].rsplit("/", 1)[1] for s in doc["skipped"]] == ["Add.add2.1.0.6"]
    assert sorted(p.name for p in src.iterdir()) == before


def test_cfg_and_convert_outputs_in_a_missing_directory_are_errors(tmp_path, capsys):
    path = write_dump(tmp_path / "Add.add1.1.0.5", op_name="a", inputs=[], outputs=[TensorSpec(np.ones(2))])
    rc, _, err = _run(capsys, "dump", "convert", str(path), "--out", str(tmp_path / "no" / "o"))
    assert rc == 2 and f"directory {tmp_path / 'no'} does not exist" in err
    rc, _, err = _run(capsys, "cfg", "off", "GeluFusionPass", "--out", str(tmp_path / "no" / "f.cfg"))
    assert rc == 2 and f"directory {tmp_path / 'no'} does not exist" in err
    # one dump file: its own directory is input data, and an empty --out is no directory
    rc, _, err = _run(capsys, "dump", "convert", str(path), "--out", str(tmp_path))
    assert rc == 2 and "would mix into its dumps" in err and not list(tmp_path.glob("*.npy"))
    rc, _, err = _run(capsys, "dump", "convert", str(path), "--out", "")
    assert rc == 2 and "--out: empty path" in err
    assert not (tmp_path / "no").exists()


def test_dump_convert_bad_format_flag(tmp_path, capsys):
    path = write_dump(tmp_path / "Add.add1.1.0.5", op_name="a", inputs=[], outputs=[TensorSpec(np.ones(2))])
    rc, _, err = _run(capsys, "dump", "convert", str(path), "--out", str(tmp_path / "o"), "--format", "BOGUS")
    assert rc == 2 and "--format BOGUS" in err and len(err.strip().splitlines()) == 1
    # a device format is a format name, but convert never writes into one (it used to write the original layout)
    rc, _, err = _run(capsys, "dump", "convert", str(path), "--out", str(tmp_path / "o"), "--format", "FRACTAL_NZ")
    assert rc == 2 and "--format FRACTAL_NZ: a device format" in err and not (tmp_path / "o").exists()
    # the enum's mixed-case spelling (FORMAT_C1HWNCoC0) is a format name too, however written
    for name in ("C1HWNCoC0", "c1hwncoc0"):
        rc, _, err = _run(capsys, "dump", "convert", str(path), "--out", str(tmp_path / "o"), "--format", name)
        assert rc == 2 and "a device format" in err, err
    from fusebisect.compare.dumpfile import format_value
    assert format_value("C1HWNCoC0") == 25 and format_value("nc1hwc0") == format_value("FORMAT_NC1HWC0")
    # every device format, not only those convert can restore from (it wrote their data unconverted)
    for name in ("FRACTAL_ZN_LSTM", "FRACTAL_Z_G", "NHWC1C0", "C1HWC0", "FRACTAL_ZZ"):
        rc, _, err = _run(capsys, "dump", "convert", str(path), "--out", str(tmp_path / "o"), "--format", name)
        assert rc == 2 and f"--format {name}: a device format" in err and not (tmp_path / "o").exists(), err


def test_dump_convert_never_writes_through_a_link_into_its_input(tmp_path, capsys):
    """An --out file that is a link to the input dump was followed: the dump was replaced by the .npy."""
    path = write_dump(tmp_path / "in" / "Add.add.1.0.1700000000000000", op_name="add", inputs=[],
                      outputs=[TensorSpec(np.arange(6, dtype=np.float32))])
    before = path.read_bytes()
    out = tmp_path / "o"
    out.mkdir()
    (out / f"{path.name}.output.0.npy").symlink_to(path)
    rc, _, err = _run(capsys, "dump", "convert", str(path), "--out", str(out))
    assert rc == 2 and "is a link to" in err and "an input dump" in err and path.read_bytes() == before
    rc, _, err = _run(capsys, "dump", "convert", str(path.parent), "--out", str(out))   # the directory's too
    assert rc == 2 and "an input dump" in err and path.read_bytes() == before
    # a tree that reaches the dump through a linked directory: the dump is outside the tree, an input all the same
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "0").symlink_to(path.parent)
    rc, _, err = _run(capsys, "dump", "convert", str(tree), "--out", str(out))
    assert rc == 2 and "an input dump" in err and path.read_bytes() == before, err


def test_dump_convert_keeps_a_scalar_shape_and_skips_a_slice_shape_that_is_none(tmp_path, capsys):
    """A 0-d tensor was written as shape (1,) while --json said []; an FFTS+ slice JSON whose shape is
    (-2, -3) (product 6) crashed the conversion with an internal error."""
    import json as _json

    scalar = write_dump(tmp_path / "sc" / "Add.s.1.0.1700000000000000", op_name="s", inputs=[],
                        outputs=[TensorSpec(np.array(3.5, np.float32))])
    rc, out, _ = _run(capsys, "dump", "convert", str(scalar), "--out", str(tmp_path / "o3"), "--json")
    [f] = _json.loads(out)["files"]
    assert rc == 0 and f["shape"] == [] and np.load(f["path"]).shape == ()
    x = np.arange(6, dtype=np.float32)
    s = [[[{"lower": 2, "higher": 0}, {"lower": 3, "higher": 0}]]] * 2
    info = _json.dumps({"threadMode": True, "slice_instance_num": 2, "thread_id": 0, "outputCutList": [[2, 1]],
                        "input_tensor_slice": s, "output_tensor_slice": s})
    ffts = write_dump(tmp_path / "ffts" / "Conv2D.conv.1.2.1700000000000001.4.10.0.0", op_name="conv",
                      inputs=[TensorSpec(x)], outputs=[TensorSpec(x)], attrs=[("_sgt_json_info", info)])
    rc, _, err = _run(capsys, "dump", "convert", str(ffts), "--out", str(tmp_path / "o1"))
    assert rc == 2 and "internal error" not in err and "do not fill its FFTS+ slice shape [-2, -3]" in err, err


def test_dump_convert_original_never_writes_an_unconverted_device_layout(tmp_path, capsys):
    """--format ORIGINAL of a device format convert has no conversion for (FRACTAL_Z_3D, NC1HWC0_C04) is skipped
    with the reason, never written as if it had been converted; without --format the device layout is written."""
    write_dump(tmp_path / "d" / "Conv3D.w.1.0.1700000000000001", op_name="w", inputs=[],
               outputs=[TensorSpec(np.ones((36, 2, 16, 16), np.float32), format=33, original_shape=(20, 19, 2, 3, 3))])
    rc, out, err = _run(capsys, "dump", "convert", str(tmp_path / "d"), "--out", str(tmp_path / "o"), "--format",
                        "ORIGINAL", "--json")
    doc = json.loads(out)
    assert rc == 2 and doc["files"] == [] and "format FRACTAL_Z_3D cannot be converted" in doc["skipped"][0]["reason"]
    assert not list(tmp_path.glob("o/*.npy"))
    for fmt in (38, 44, 5):   # FRACTAL_ZN_LSTM, FRACTAL_ZN_RNN, NC1C0HWPAD: no conversion either
        write_dump(tmp_path / "e" / f"Conv.w{fmt}.1.0.17000000000000{fmt:02d}", op_name="w", inputs=[],
                   outputs=[TensorSpec(np.ones((4, 2, 16, 16), np.float32), format=fmt, original_shape=(8, 8))])
    rc, out, _ = _run(capsys, "dump", "convert", str(tmp_path / "e"), "--out", str(tmp_path / "oe"), "--format",
                      "ORIGINAL", "--json")
    assert rc == 2 and json.loads(out)["files"] == [] and len(json.loads(out)["skipped"]) == 3
    rc, out, _ = _run(capsys, "dump", "convert", str(tmp_path / "d"), "--out", str(tmp_path / "raw"), "--json")
    assert rc == 0 and [f["shape"] for f in json.loads(out)["files"]] == [[36, 2, 16, 16]]


def test_dump_convert_of_a_tree_never_writes_two_files_to_one_name(tmp_path, capsys):
    """The same dump name in two devices' directories: both are written (in their directories), none lost."""
    name = "Add.op1.1.0.1700000000000002"
    for device, value in (("0", 1.0), ("1", 2.0)):
        write_dump(tmp_path / "d" / "20240101000000" / device / "m" / "1" / "0" / name, op_name="op1", inputs=[],
                   outputs=[TensorSpec(np.full(3, value, np.float32))])
    rc, out, err = _run(capsys, "dump", "convert", str(tmp_path / "d"), "--out", str(tmp_path / "o"), "--json")
    files = json.loads(out)["files"]
    assert rc == 0 and len(files) == 2 and len({f["path"] for f in files}) == 2
    assert sorted(float(np.load(f["path"])[0]) for f in files) == [1.0, 2.0]
    assert "keep their directories" in err
    # two iterations' dumps have different names (their timestamps): they still keep the step they are of
    for it, ts in (("0", 5), ("3", 9)):
        write_dump(tmp_path / "e" / "20240101000000" / "0" / "m" / "1" / it / f"Add.op1.1.0.170000000000000{ts}",
                   op_name="op1", inputs=[], outputs=[TensorSpec(np.full(3, 1.0, np.float32))])
    rc, out, err = _run(capsys, "dump", "convert", str(tmp_path / "e"), "--out", str(tmp_path / "p"), "--json")
    assert rc == 0 and sorted(Path(f["path"]).parent.name for f in json.loads(out)["files"]) == ["0", "3"]


@pytest.mark.msaccucmp
@pytest.mark.slow
def test_real_msaccucmp_reads_our_nano_file(tmp_path, msaccucmp):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = rng.integers(-5, 5, (3, 2)).astype(np.int32)
    y = rng.standard_normal((2, 3)).astype(np.float16)
    path = write_dump(tmp_path / "dump" / "Conv2D.conv1.1.0.1700000000000002", op_name="conv1", encoding="nano",
                      inputs=[TensorSpec(x, original_shape=x.shape), TensorSpec(w)],
                      outputs=[TensorSpec(y, original_shape=y.shape, original_op=("conv1", 0))])
    out = tmp_path / "out"
    out.mkdir()
    proc = msaccucmp.run("convert", "-d", str(path), "-out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    name = path.name
    np.testing.assert_array_equal(np.load(out / f"{name}.input.0.npy"), x)
    np.testing.assert_array_equal(np.load(out / f"{name}.input.1.npy"), w)
    np.testing.assert_array_equal(np.load(out / f"{name}.output.0.npy"), y)


def test_dump_convert_writes_buffers_and_workspaces_like_msaccucmp(msaccucmp, tmp_path, capsys):
    """Same files, same bytes as the real msaccucmp's convert (binary dump: its header parser done in Python)."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = write_dump(tmp_path / "dump" / "Add.add1.1.0.1700000000000001", op_name="add1",
                      inputs=[TensorSpec(x)], outputs=[TensorSpec(x * 2)],
                      buffers=[b"\x01\x02\x03", np.arange(5, dtype=np.uint8)], spaces=[b"workspace bytes"])
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    rc, out, _ = _run(capsys, "dump", "convert", str(path), "--out", str(ours), "--json")
    assert rc == 0
    assert sorted(f["tensor"] for f in json.loads(out)["files"]) == [
        "input.0", "l1buffer.0", "l1buffer.1", "output.0", "space.0"]
    rc, out, _ = _run(capsys, "dump", "convert", str(path), "--out", str(tmp_path / "again"))
    assert rc == 0 and f"wrote 2 .npy files and 3 .bin files to {tmp_path / 'again'}" in " ".join(out.split())
    proc = msaccucmp.run_parsing_binary("convert", "-d", str(path), "-out", str(theirs))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    names = sorted(p.name for p in theirs.iterdir() if p.suffix == ".bin")
    assert names == sorted(p.name for p in ours.iterdir() if p.suffix == ".bin") == [
        f"{path.name}.l1buffer.0.bin", f"{path.name}.l1buffer.1.bin", f"{path.name}.space.0.bin"]
    for name in names:
        assert (ours / name).read_bytes() == (theirs / name).read_bytes()
    assert (ours / f"{path.name}.space.0.bin").read_bytes() == b"workspace bytes"
    for name in (f"{path.name}.input.0.npy", f"{path.name}.output.0.npy"):
        np.testing.assert_array_equal(np.load(ours / name), np.load(theirs / name))


def test_dump_convert_layouts_and_float8_like_msaccucmp(msaccucmp, tmp_path, capsys):
    """A plain NHWC tensor of an NCHW graph (its original shape in NCHW) is transposed to NCHW, not reshaped to
    the original shape; float8_e5m2 is written as float32 that np.load reads back; both as msaccucmp's convert."""
    import ml_dtypes

    nchw = np.random.default_rng(3).standard_normal((2, 3, 5, 7)).astype(np.float32)
    nhwc = write_dump(tmp_path / "dump" / "Relu.relu.1.0.1700000000000001", op_name="relu", inputs=[],
                      outputs=[TensorSpec(np.ascontiguousarray(nchw.transpose(0, 2, 3, 1)), format=1,
                                          original_shape=nchw.shape)])
    fp8 = write_dump(tmp_path / "dump" / "Cast.cast.1.0.1700000000000002", op_name="cast", inputs=[],
                     outputs=[TensorSpec(np.array([0.125, -0.125, 0.625, 1.5], ml_dtypes.float8_e5m2))])
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for path, fmt in ((nhwc, "NCHW"), (fp8, None)):
        flags = [] if fmt is None else ["--format", fmt]
        assert _run(capsys, "dump", "convert", str(path), "--out", str(ours), *flags)[0] == 0
        proc = msaccucmp.run_parsing_binary("convert", "-d", str(path), *(["-f", fmt] if fmt else []), "-out",
                                            str(theirs))
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    name = f"{nhwc.name}.output.0.2x3x5x7.npy"   # msaccucmp puts the converted shape in the name
    np.testing.assert_array_equal(np.load(ours / name), nchw)
    np.testing.assert_array_equal(np.load(theirs / name), nchw)
    out = np.load(ours / f"{fp8.name}.output.0.npy")
    assert out.dtype == np.float32 and out.tolist() == [0.125, -0.125, 0.625, 1.5]
    assert np.load(theirs / f"{fp8.name}.output.0.npy").tolist() == out.tolist()


def test_dump_convert_shapes_ffts_thread_dumps_like_msaccucmp(msaccucmp, tmp_path, capsys):
    """An automatic-mode FFTS+ thread dump's tensors take their slice's shape; a slice JSON without a shape
    per tensor fails the file, on both sides."""
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    src = tmp_path / "dump"

    def thread_dump(name, k, in_slices):
        slices = {"threadMode": True, "slice_instance_num": 3, "thread_id": k, "outputCutList": [[3, 1]],
                  "input_tensor_slice": in_slices,
                  "output_tensor_slice": [[[{"lower": 2 * t, "higher": 2 * t + 2}, {"lower": 0, "higher": 4}]]
                                          for t in range(3)]}
        rows = x[2 * k:2 * k + 2]
        return write_dump(src / name, op_name="conv", inputs=[TensorSpec(rows.reshape(-1), format=2)],
                          outputs=[TensorSpec((rows * 2).reshape(-1), format=2, original_shape=(6, 4))],
                          attrs=[("_sgt_json_info", json.dumps(slices))])

    in_slices = [[[{"lower": 2 * t, "higher": 2 * t + 2}, {"lower": 0, "higher": 4}]] for t in range(3)]
    good = thread_dump("Conv2D.conv.1.2.1700000000000001.4.10.1.0", 1, in_slices)
    bad = thread_dump("Conv2D.conv.1.2.1700000000000002.4.10.2.0", 2, [])      # no input shapes
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    rc, out, _ = _run(capsys, "dump", "convert", str(src), "--out", str(ours), "--json")
    doc = json.loads(out)
    assert rc == 0 and [s["path"].rsplit("/", 1)[1] for s in doc["skipped"]] == [bad.name]
    assert "gives 0 input shape(s) for 1 input(s) of thread 2" in doc["skipped"][0]["reason"]
    proc = msaccucmp.run_parsing_binary("convert", "-d", str(src), "-out", str(theirs))
    made = sorted(p.name for p in theirs.iterdir() if p.suffix == ".npy")
    assert made == sorted(p.name for p in ours.iterdir()) == [f"{good.name}.input.0.npy", f"{good.name}.output.0.npy"], \
        proc.stdout[-2000:]
    for name in made:
        a, b = np.load(ours / name), np.load(theirs / name)
        assert a.shape == b.shape == (2, 4)
        np.testing.assert_array_equal(a, b)


def test_dump_convert_hashes_over_long_names_like_msaccucmp(msaccucmp, tmp_path, capsys):
    name = "Add." + "a" * 220 + ".1.0.1700000000000001"        # the dump's own name fits; its outputs do not
    path = write_dump(tmp_path / "dump" / name, op_name="a", inputs=[TensorSpec(np.ones(3, np.float32))],
                      outputs=[TensorSpec(np.arange(3, dtype=np.float32))], spaces=[b"ws"])
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    rc, _, _ = _run(capsys, "dump", "convert", str(path), "--out", str(ours))
    assert rc == 0
    proc = msaccucmp.run_parsing_binary("convert", "-d", str(path), "-out", str(theirs))
    assert proc.returncode == 0, proc.stdout[-2000:]
    files = sorted(p.name for p in ours.iterdir())
    assert files == sorted(p.name for p in theirs.iterdir()) and "mapping.csv" in files and len(files) == 4
    mine = sorted((ours / "mapping.csv").read_text().splitlines())
    assert mine == sorted((theirs / "mapping.csv").read_text().splitlines())
    assert all(len(row.split(",", 1)[1]) >= 255 for row in mine)
    for f in files:
        if f.endswith(".npy"):
            np.testing.assert_array_equal(np.load(ours / f), np.load(theirs / f))


def test_a_header_without_content_is_not_a_dump(tmp_path, capsys):
    """Eight zero bytes parse as an empty DumpData header: that is no op with no tensors, but not a dump (a
    comparison must count it unreadable, not compare nothing and pass)."""
    path = tmp_path / "Add.add1.1.0.5"
    path.write_bytes(bytes(8))
    rc, out, err = _run(capsys, "inspect", "dump", str(path))
    assert rc == 2 and out == "" and "header holds no op name, version or tensor" in err


def test_an_empty_original_shape_is_as_if_absent(tmp_path, capsys):
    stored = from_original(np.arange(15, dtype=np.float32).reshape(3, 5), "FRACTAL_NZ")
    (tmp_path / "in").mkdir()
    path = write_dump(tmp_path / "in" / "MatMul.mm.1.0.5", op_name="mm", inputs=[],
                      outputs=[TensorSpec(stored, format=29, original_shape=())])
    rc, out, err = _run(capsys, "dump", "convert", str(path), "--out", str(tmp_path / "npy"), "--format", "ORIGINAL")
    assert rc == 0, err
    [npy] = (tmp_path / "npy").glob("*.npy")
    assert np.load(npy).size == stored.size   # the padding kept: nothing says what the original is


@pytest.mark.parametrize("encoding", ["binary", "protobuf", "nano"])
def test_an_nhwc_models_device_tensor_goes_back_to_nhwc(tmp_path, capsys, encoding):
    """A TensorFlow graph's NC1HWC0 output has an NHWC original shape; the dump's original_op.format
    (_datadump_origin_format) says so, and the conversion follows it."""
    nhwc = np.random.default_rng(4).standard_normal((2, 4, 5, 3)).astype(np.float32)
    stored = from_original(nhwc, "NC1HWC0", source="NHWC")
    (tmp_path / "in").mkdir()
    path = write_dump(tmp_path / "in" / "Conv2D.conv1.1.0.17", op_name="conv1", inputs=[], encoding=encoding,
                      outputs=[TensorSpec(stored, format=3, original_shape=(2, 4, 5, 3), original_op=("conv1", 0),
                                          origin_format="NHWC")])
    rc, _, err = _run(capsys, "dump", "convert", str(path), "--out", str(tmp_path / "npy"), "--format", "ORIGINAL")
    assert rc == 0, err
    [npy] = (tmp_path / "npy").glob("*.npy")
    np.testing.assert_array_equal(np.load(npy), nhwc)
    rc, out, _ = _run(capsys, "inspect", "dump", str(path), "--json")
    [row] = json.loads(out)["outputs"]
    assert row["stats_of"] == "original" and row["mean"] == pytest.approx(float(nhwc.mean()), rel=1e-5)


def test_the_original_ops_format_is_used_only_where_it_fits(tmp_path, capsys):
    """An NHWC graph's 2-D output (an FC layer) in NC1HWC0 keeps the default conversion, which handles a 2-D
    original; a FRACTAL_NZ output is ND whatever the original op's format says (0 is also proto3's unset)."""
    (tmp_path / "in").mkdir()
    fc = np.arange(1, 41, dtype=np.float32).reshape(2, 20)
    fc_5hd = from_original(fc.reshape(2, 20, 1, 1), "NC1HWC0")
    mm = np.arange(1, 36, dtype=np.float32).reshape(5, 7)
    path = write_dump(tmp_path / "in" / "BiasAdd.fc.1.0.17", op_name="fc", inputs=[], encoding="protobuf",
                      outputs=[TensorSpec(fc_5hd, format=3, original_shape=(2, 20), original_op=("fc", 0),
                                          origin_format="NHWC"),
                               TensorSpec(from_original(mm, "FRACTAL_NZ"), format=29, original_shape=(5, 7),
                                          original_op=("mm", 0), origin_format="NCHW")])
    for fmt, want in (("ORIGINAL", [fc, mm]), ("NHWC", [None, mm])):
        out = tmp_path / f"npy_{fmt}"
        rc, _, err = _run(capsys, "dump", "convert", str(path), "--out", str(out), "--format", fmt, "--json")
        assert rc == 0, err
        got = {p.name.split(".")[6]: np.load(p) for p in out.glob("*.npy")}
        if want[0] is not None:
            np.testing.assert_array_equal(got["0"], want[0])
        np.testing.assert_array_equal(got["1"], want[1])
    rc, out, _ = _run(capsys, "inspect", "dump", str(path), "--json")
    rows = json.loads(out)["outputs"]
    assert [r["stats_of"] for r in rows] == ["original", "original"] and rows[0]["min"] == 1.0


def test_inputs_of_an_nhwc_graph_convert_in_their_own_layout(tmp_path, capsys):
    """A dump names no original layout for inputs, and a TensorFlow graph's are NHWC (weights HWCN): their
    original shape is read in the layout the device shape fits (--format's first), not refused as "NCHW"; and
    inspect's statistics are of the unpadded data."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 20)).astype(np.float16)        # NHWC activation
    w = rng.standard_normal((3, 3, 7, 20)).astype(np.float16)        # HWCN weight
    path = write_dump(tmp_path / "dump" / "Conv2D.conv1.1.0.100", op_name="conv1", outputs=[], inputs=[
        TensorSpec(from_original(x, "NC1HWC0", source="NHWC"), format=3, original_shape=x.shape),
        TensorSpec(from_original(w, "FRACTAL_Z", source="HWCN"), format=4, original_shape=w.shape)])
    for fmt, want in (("NHWC", {"input.0": x, "input.1": w.transpose(3, 0, 1, 2)}),
                      ("ORIGINAL", {"input.0": x, "input.1": w}),
                      ("NCHW", {"input.0": x.transpose(0, 3, 1, 2), "input.1": w.transpose(3, 2, 0, 1)})):
        rc, out, _ = _run(capsys, "dump", "convert", str(path), "--out", str(tmp_path / fmt), "--format", fmt,
                          "--json")
        assert rc == 0, out
        files = {f["tensor"]: np.load(f["path"]) for f in json.loads(out)["files"]}
        assert files.keys() == want.keys()
        for tensor, expected in want.items():
            np.testing.assert_array_equal(files[tensor], expected, err_msg=f"{fmt} {tensor}")
    rc, out, _ = _run(capsys, "inspect", "dump", str(path), "--json")
    assert rc == 0
    first = json.loads(out)["inputs"][0]
    assert first["stats_of"] == "original"
    assert first["mean"] == pytest.approx(float(x.astype(np.float32).mean()), rel=1e-5)


def test_an_input_whose_original_fits_several_layouts_is_skipped_with_the_reason(tmp_path, capsys):
    """An HWCN weight (3,3,3,16) as FRACTAL_Z: read as NHWC it fits the device shape too, with other data. The
    dump names no layout for an input, so no guess is written as if converted: the tensor is skipped, saying
    why."""
    w = np.random.default_rng(1).standard_normal((3, 3, 3, 16)).astype(np.float16)   # HWCN
    path = write_dump(tmp_path / "d" / "Conv2D.conv1.3.0.1700000000000001", op_name="conv1", outputs=[],
                      inputs=[TensorSpec(from_original(w, "FRACTAL_Z", source="HWCN"), format=4,
                                         original_shape=w.shape)])
    rc, _, err = _run(capsys, "dump", "convert", str(path), "--out", str(tmp_path / "o"), "--format", "NHWC")
    assert rc == 2 and "read as NHWC or HWCN, not as NCHW: the dump names no layout for it" in " ".join(err.split())
