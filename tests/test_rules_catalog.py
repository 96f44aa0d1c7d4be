"""The rules catalog: generated data matches its TSV source and schema; lookup, search and did-you-mean."""

import csv
import importlib.util
import json
from pathlib import Path

import jsonschema
import pytest

from fusebisect.rules.catalog import Catalog, catalog_text, default_catalog, normalize_kind
from fusebisect.errors import FusebisectError

ROOT = Path(__file__).resolve().parents[1]
CATALOG_DIR = ROOT / "rules_catalog"


def _build_module():
    spec = importlib.util.spec_from_file_location("build_catalog", CATALOG_DIR / "build_catalog.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tsv_rows():
    with (CATALOG_DIR / "rules_catalog_raw.tsv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def test_rebuild_gives_the_checked_in_json_and_package_copy():
    build = _build_module()
    text = build.render(build.build())
    assert (CATALOG_DIR / "catalog.json").read_text(encoding="utf-8") == text
    assert catalog_text() == text  # the copy the installed package reads (importlib.resources)
    assert build.main(["--check"]) == 0


def test_catalog_validates_against_its_schema():
    schema = json.loads((CATALOG_DIR / "catalog.schema.json").read_text(encoding="utf-8"))
    doc = json.loads(catalog_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
    broken = json.loads(catalog_text())
    broken["rules"][0]["default"] = "ON"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(broken)


def test_passes_in_the_builtin_o1_exception_list_cannot_be_disabled():
    """FE turns a pass of ExceptionalPassOfO1Level on before it reads the switch file, at any optimisation level:
    a file cannot close it, run must not search it, and a file's own list keeps its passes on too."""
    from fusebisect.rules.switchfile import check_switch_text, explain_state, parse_switch_text

    cat = default_catalog()
    rule = cat.rules["LayerNormV4FusionPass"]
    assert rule.o1_exception and not rule.can_disable and "LayerNormV4FusionPass" not in cat.disableable()
    assert rule.always_on == "in CANN's built-in ExceptionalPassOfO1Level list"
    assert cat.rules["MapIndexFusionPass"].always_on == "forbidden-close"
    cfg = parse_switch_text('{"Switch":{"GraphFusion":{"LayerNormV4FusionPass":"off"}}}')
    on, why = explain_state("LayerNormV4FusionPass", cfg, cat)
    assert on and why.startswith("in CANN's built-in ExceptionalPassOfO1Level list")
    codes = {p.code for p in check_switch_text('{"Switch":{"GraphFusion":{"LayerNormV4FusionPass":"off"}}}',
                                               cat).problems}
    assert "cannot-disable" in codes
    own = parse_switch_text('{"Switch":{"GraphFusion":{"GeluFusionPass":"off"}},'
                            '"ExceptionalPassOfO1Level":["GeluFusionPass"]}')
    assert explain_state("GeluFusionPass", own, cat) == (
        True, "in this file's ExceptionalPassOfO1Level list: CANN never switches it off")
    assert "own-o1-exception" in {p.code for p in check_switch_text(
        '{"Switch":{"GraphFusion":{"GeluFusionPass":"off"}},"ExceptionalPassOfO1Level":["GeluFusionPass"]}',
        cat).problems}


def test_every_tsv_row_is_a_rule_with_its_facts():
    cat = default_catalog()
    rows = _tsv_rows()
    assert len(cat) == len(rows) == 628
    for row in rows:
        rule = cat.rules[row["name"]]
        assert rule.default == row["default"].split()[0]
        if not rule.spelling_of:   # (a spelling answers as the pass it spells: see below)
            assert rule.can_disable == (rule.ge_pattern or ("forbidden-close" not in row["default"]
                                                            and "FORBIDDEN_CLOSE" not in row["default"]
                                                            and "ExceptionalPassOfO1Level" not in row["default"]))
        if row["kind"] != "unknown":
            assert rule.kind == row["kind"]
        assert len(rule.sources) == len([s for s in row["source"].split(" ; ") if s.strip()])


def test_forbidden_close_and_o1_counts_match_the_reference():
    cat = default_catalog()
    forbidden = [r for r in cat.rules.values() if not r.can_disable]
    # 90 ForbiddenClosedPass names plus ApplyRotaryPosEmbTensorMoveFusionPass (FORBIDDEN_CLOSE attr), plus the
    # documentation spelling GlobalAvgPoolPass, which answers as the forbidden-close Globalavgpoolpass it spells,
    # plus the 6 passes of the built-in ExceptionalPassOfO1Level list that are not forbidden-close; less the 7
    # of them that recent CANN runs as GE pattern passes (6 forbidden-close, 1 in the O1 list), which the
    # switch file does close
    pattern = [r.name for r in cat.rules.values() if r.ge_pattern and any("FE pass" in n for n in r.notes)]
    assert sorted(pattern) == ["ADeformableConv2dPass", "DepthwiseDfFusionPass", "DepthwiseDwMulFusionPass",
                               "DepthwiseToConv2dFusionPass", "PReluGradFusionPass", "PermuteFusionPass",
                               "WeightQuantBatchMatmulV2TransposeFusionPass"]
    assert all(cat.rules[n].can_disable for n in pattern)
    assert len(forbidden) == 98 - 7
    assert sum(r.always_on == "forbidden-close" for r in forbidden) == 92 - 6
    assert cat.rules["GlobalAvgPoolPass"].spelling_of == "Globalavgpoolpass"
    assert all(r.can_disable == cat.rules[r.spelling_of].can_disable for r in cat.rules.values() if r.spelling_of)
    assert not cat.rules["ApplyRotaryPosEmbTensorMoveFusionPass"].can_disable
    assert cat.rules["MapIndexFusionPass"].o1_exception and not cat.rules["MapIndexFusionPass"].can_disable
    assert sum(r.o1_exception for r in cat.rules.values()) == 7


def test_unknown_kinds_resolved_or_explained():
    cat = default_catalog()
    unknown_in_tsv = [r["name"] for r in _tsv_rows() if r["kind"] == "unknown"]
    assert len(unknown_in_tsv) == 7
    for name in unknown_in_tsv:
        assert cat.rules[name].kind_note, name
    assert cat.rules["GlobalAvgPoolPass"].kind == "GraphFusion"
    assert cat.rules["sedBatchNormGradFusionPass"].spelling_of == "FusedBatchNormGradFusionPass"
    assert cat.rules["SquareSumV1"].kind == "unknown"
    assert any("kForceClosePassVec" in n for n in cat.rules["SquareSumV1"].notes)


def test_builtin_switch_entries():
    cat = default_catalog()
    assert cat.rules["GridSampler3DFusionPass"].builtin_switch == "on"
    assert cat.rules["GridSampler2DFusionPass"].builtin_switch == "off"
    assert cat.rules["GridSampler2DFusionPass"].default == "off"
    assert set(cat.builtin_entries("UBFusion")) >= {"TbeMatmulFixPipeFusionPass", "TbeMatmulFixpipeFusionPass"}
    assert all(cat.rules[n].kind == "GraphFusion" for n in cat.builtin_entries("GraphFusion"))


def test_names_are_case_sensitive_and_aliases_resolve():
    cat = default_catalog()
    a, b = cat.rules["TbeMatmulFixPipeFusionPass"], cat.rules["TbeMatmulFixpipeFusionPass"]
    assert (a.default, b.default) == ("on", "off")  # two different passes
    assert "TbeMatmulFixpipeFusionPass" in a.aliases
    assert cat.get("tbematmulfixpipefusionpass") is None
    assert cat.get("In-placeAddRmsNormFusionPass").name == "InplaceAddRmsNormFusionPass"
    assert "In-placeAddRmsNormFusionPass" in cat
    assert "NoSuchPass" not in cat


def test_suggest_search_disableable():
    cat = default_catalog()
    assert cat.suggest("TbeEltwiseFusionPas")[0] == "TbeEltwiseFusionPass"
    assert cat.suggest("tbeeltwisefusionpass")[0] == "TbeEltwiseFusionPass"
    assert cat.suggest("Zzzzzzzzzzzzzz") == []
    ub_conv = cat.search("conv", kind="ub")
    assert ub_conv and all(r.kind == "UBFusion" for r in ub_conv)
    assert any("conv" in r.name.lower() for r in ub_conv)
    assert len(cat.search("", kind="graph")) == sum(r.kind == "GraphFusion" for r in cat.rules.values())
    dis = cat.disableable()
    assert "TbeEltwiseFusionPass" in dis and "PassThroughFusionPass" not in dis
    assert "GlobalAvgPoolPass" not in dis  # a spelling: switching it does nothing


def test_soc_notes_and_kind_names():
    cat = default_catalog()
    assert not cat.ub_fusion_supported("Ascend 950PR")
    assert not cat.ub_fusion_supported("ascend 950dt")
    assert cat.ub_fusion_supported("Ascend910B")
    assert normalize_kind("ub") == "UBFusion" and normalize_kind("GraphFusion") == "GraphFusion"
    with pytest.raises(FusebisectError):
        normalize_kind("cube")


def test_default_catalog_is_cached():
    assert default_catalog() is default_catalog()
    assert isinstance(default_catalog(), Catalog)


@pytest.mark.slow
def test_catalog_and_switch_schema_load_from_a_built_wheel(tmp_path):
    import subprocess
    import sys
    import zipfile

    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(tmp_path / "dist")], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("fusebisect-*.whl")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import fusebisect.rules.catalog as c; "
            "import fusebisect.rules.switchfile as s; assert c.__file__.startswith(sys.argv[1]), c.__file__; "
            "print(len(c.default_catalog()), s.switch_schema()['title'])")
    # -S: no site-packages, so the editable install cannot supply the data
    out = subprocess.run([sys.executable, "-S", "-c", code, str(site)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "628 CANN fusion_switch.cfg (JSON format)"
