"""The checked-in *_pb2.py modules are exactly what protoc generates from the checked-in .proto files."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_gen_script():
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts" / "gen_proto.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_modules_match_proto(tmp_path):
    gen = _load_gen_script()
    for fresh in gen.generate(tmp_path):
        checked_in = ROOT / "fusebisect" / "proto" / fresh.name
        assert checked_in.read_text() == fresh.read_text(), f"{checked_in.name} is stale: run scripts/gen_proto.py"


def test_field_numbers_follow_the_reference():
    from fusebisect.proto import dump_data_pb2 as dd
    from fusebisect.proto import ge_ir_pb2 as ge

    fields = {f.name: f.number for f in dd.DumpData.DESCRIPTOR.fields}
    assert fields["output"] == 3 and fields["input"] == 4 and fields["space"] == 8
    out = {f.name: f.number for f in dd.OpOutput.DESCRIPTOR.fields}
    assert out["original_shape"] == 7 and out["offset"] == 11
    assert dd.OutputDataType.Value("DT_BF16") == 27 and dd.OutputFormat.Value("FORMAT_FRACTAL_NZ") == 29
    op = {f.name: f.number for f in ge.OpDef.DESCRIPTOR.fields}
    assert op["output_desc"] == 34 and op["attr"] == 10 and op["id"] == 21
    assert {f.name: f.number for f in ge.ModelDef.DESCRIPTOR.fields}["graph"] == 7
