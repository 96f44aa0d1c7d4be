"""Switch files: lenient/strict parsing, CANN precedence, canonical atomic writing."""

import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusebisect.errors import SwitchFileError, UsageError
from fusebisect.rules.catalog import Catalog, Rule, default_catalog
from fusebisect.rules.switchfile import (
    SwitchConfig, all_off_config, check_switch_text, diff_configs, effective_state, explain_state, off_config, parse_switch_file,
    parse_switch_text, render_switch, switch_schema, validate_rule_name, write_hashed_switch_file,
    write_switch_file,
)


def _rule(name, kind, default="on", can_disable=True, builtin=None):
    return Rule(name=name, kind=kind, default=default, can_disable=can_disable, o1_exception=False,
                description="", sources=("test",), aliases=(), builtin_switch=builtin)


# A small catalog shaped like FE's unit-test fixtures (fusion_config_parser_unittest.cc).
TOY = Catalog({r.name: r for r in [
    _rule("PassThroughFusionPass", "GraphFusion", can_disable=False),
    _rule("BUILTIN_PASS1", "GraphFusion"),
    _rule("BUILTIN_PASS2", "GraphFusion"),
    _rule("CUSTOM_PASS1", "GraphFusion"),
    _rule("UB_PASS3", "UBFusion"),
    _rule("UB_PASS4", "UBFusion"),
]})


def cfg(graph=None, ub=None):
    return SwitchConfig(graph=dict(graph or {}), ub=dict(ub or {}))


# ---- CANN precedence (mirrors FE fusion_switch_01..07) ---------------------------------------------------------

def test_fusion_switch_01_builtin_all_off_with_explicit_on():
    builtin = cfg({"ALL": "off", "BUILTIN_PASS1": "on"})
    assert effective_state("BUILTIN_PASS1", None, TOY, builtin=builtin)
    assert not effective_state("BUILTIN_PASS2", None, TOY, builtin=builtin)
    assert effective_state("PassThroughFusionPass", None, TOY, builtin=builtin)


def test_fusion_switch_02_user_file_over_builtin():
    builtin = cfg({"ALL": "off", "BUILTIN_PASS1": "on"}, {"UB_PASS3": "on"})
    user = cfg({"CUSTOM_PASS1": "off"}, {"UB_PASS3": "off"})
    assert effective_state("PassThroughFusionPass", user, TOY, builtin=builtin)  # forbidden-close
    assert effective_state("BUILTIN_PASS1", user, TOY, builtin=builtin)
    assert not effective_state("CUSTOM_PASS1", user, TOY, builtin=builtin)
    assert not effective_state("UB_PASS3", user, TOY, builtin=builtin)  # although built-in says on
    assert effective_state("UB_PASS4", user, TOY, builtin=builtin)  # UB map has no ALL


def test_fusion_switch_03_builtin_explicit_on_beats_user_all_off():
    builtin = cfg({"BUILTIN_PASS1": "on"})
    user = cfg({"ALL": "off"})
    assert effective_state("BUILTIN_PASS1", user, TOY, builtin=builtin)
    assert not effective_state("BUILTIN_PASS2", user, TOY, builtin=builtin)
    assert not effective_state("BUILTIN_PASS1", cfg({"ALL": "off", "BUILTIN_PASS1": "off"}), TOY, builtin=builtin)


def test_fusion_switch_04_builtin_off_stays_off_unless_named_on():
    builtin = cfg({"BUILTIN_PASS2": "off"})
    assert not effective_state("BUILTIN_PASS2", None, TOY, builtin=builtin)
    assert not effective_state("BUILTIN_PASS2", cfg({"ALL": "on"}), TOY, builtin=builtin)
    assert effective_state("BUILTIN_PASS2", cfg({"BUILTIN_PASS2": "on"}), TOY, builtin=builtin)


def test_fusion_switch_05_exact_name_beats_all():
    assert effective_state("CUSTOM_PASS1", cfg({"ALL": "off", "CUSTOM_PASS1": "on"}), TOY, builtin=cfg())
    assert not effective_state("CUSTOM_PASS1", cfg({"ALL": "on", "CUSTOM_PASS1": "off"}), TOY, builtin=cfg())
    assert not effective_state("BUILTIN_PASS1", cfg({"ALL": "off"}), TOY, builtin=cfg())


def test_fusion_switch_06_old_format_applies_to_both_kinds():
    user = parse_switch_text("CUSTOM_PASS1:off\nUB_PASS3:off\n")
    assert user.legacy
    assert not effective_state("CUSTOM_PASS1", user, TOY, builtin=cfg())
    assert not effective_state("UB_PASS3", user, TOY, builtin=cfg())
    assert effective_state("UB_PASS4", user, TOY, builtin=cfg())


def test_fusion_switch_07_forbidden_close_ignores_everything():
    user = cfg({"ALL": "off", "PassThroughFusionPass": "off"})
    assert effective_state("PassThroughFusionPass", user, TOY, builtin=cfg({"PassThroughFusionPass": "off"}))


def test_section_decides_and_no_file_means_default():
    assert effective_state("UB_PASS3", cfg({"UB_PASS3": "off"}), TOY, builtin=cfg())  # wrong section: no effect
    assert effective_state("ANY_CUSTOM", None, TOY, builtin=cfg())
    # names the catalog lacks: the one section naming them decides, or --kind
    assert not effective_state("ANY_CUSTOM", cfg({"ANY_CUSTOM": "off"}), TOY, builtin=cfg())
    assert effective_state("ANY_CUSTOM", cfg({"ANY_CUSTOM": "off"}), TOY, kind="ub", builtin=cfg())
    on, why = explain_state("PassThroughFusionPass", cfg({"PassThroughFusionPass": "off"}), TOY)
    assert on and "forbidden" in why


def test_real_catalog_precedence():
    cat = default_catalog()
    user = cfg({"ALL": "off"}, {"ALL": "off"})
    assert effective_state("GridSampler3DFusionPass", user, cat)  # built-in explicit on
    assert not effective_state("TbeEltwiseFusionPass", user, cat)
    assert effective_state("PassThroughFusionPass", user, cat)
    assert not effective_state("GridSampler2DFusionPass", None, cat)  # built-in off default
    assert effective_state("GridSampler2DFusionPass", cfg({"GridSampler2DFusionPass": "on"}), cat)
    # all-off closes everything that can be closed
    off = all_off_config(cat)
    for name in cat.disableable():
        assert not effective_state(name, off, cat), name


def test_diff_configs():
    cat = default_catalog()
    a = cfg({"ConvConcatFusionPass": "off"})
    b = cfg({}, {"TbeEltwiseFusionPass": "off"})
    changes = {c["rule"]: c for c in diff_configs(a, b, cat)}
    assert set(changes) == {"ConvConcatFusionPass", "TbeEltwiseFusionPass"}
    assert (changes["ConvConcatFusionPass"]["a"], changes["ConvConcatFusionPass"]["b"]) == ("off", "on")
    assert diff_configs(a, a, cat) == []
    assert len(diff_configs(None, cfg({}, {"ALL": "off"}), cat)) > 50


# ---- reading ----------------------------------------------------------------------------------------------------

def test_lenient_json_bom_comments_trailing_commas():
    text = ('\ufeff{\n  // closed for the repro\n  "Switch": {\n    "GraphFusion": {"A": "off", /* x */ "B": "on",},\n'
            '    # hash comment\n    "UBFusion": {"C": "off"},\n  },\n}\n')
    c = parse_switch_text(text)
    assert c.graph == {"A": "off", "B": "on"} and c.ub == {"C": "off"} and not c.legacy


@pytest.mark.parametrize("head", ["/* switch file for run 7 */\n", "/* switch file\n   for run 7 */\n\n",
                                  "// run 7\n/* closed\n   for the repro */ "])
def test_a_json_file_that_starts_with_a_block_comment_is_json(head):
    """A /* */ comment before the JSON, on one line or several, is read as the // and # ones are: the file is
    JSON (CANN's parser rejects the comment, which the lint reports), not the old line format."""
    text = head + '{"Switch":{"GraphFusion":{"LayerNormFusionPass":"off"}}}\n'
    c = parse_switch_text(text)
    assert not c.legacy and c.graph == {"LayerNormFusionPass": "off"} and c.lenient
    report = check_switch_text(text, default_catalog())
    assert report.format == "json" and {p.code for p in report.problems} == {"comment"}, report.problems


def test_a_block_comment_in_an_old_format_file_is_a_comment_cann_fails_on():
    report = check_switch_text("/* closed for run 7 */\nLayerNormFusionPass:off\n", default_catalog())
    assert report.format == "legacy"
    [error] = [p for p in report.problems if p.severity == "error"]
    assert error.line == 1 and "a comment without a colon" in error.message
    # a /* left open before the JSON: read as JSON, whose reader says where the comment starts
    with pytest.raises(SwitchFileError, match="line 1, column 1: invalid JSON: unterminated /\\* comment"):
        parse_switch_text('/* run 7\n{"Switch":{"GraphFusion":{"LayerNormFusionPass":"off"}}}\n')


def test_json_string_escapes_and_control_characters_as_cann_reads_them():
    """A surrogate pair of \\u escapes is one character (a duplicate of it is the same key); a lone surrogate is
    invalid JSON; a raw tab inside quotes is read but is an error CANN's parser would reject."""
    report = check_switch_text('{"Switch":{"GraphFusion":{"X\\ud83d\\ude00":"off","X\\ud83d\\ude00":"on"}}}', TOY)
    messages = [p.message for p in report.problems]
    assert any("X\U0001F600 appears twice" in m for m in messages), messages
    assert any("'X\U0001F600' in Switch.GraphFusion is no pass name" in m for m in messages), messages
    with pytest.raises(SwitchFileError, match=r"lone surrogate \\uD83D"):
        parse_switch_text('{"Switch":{"GraphFusion":{"X\\ud83d":"off"}}}')
    tab = '{"Switch":{"GraphFusion":{"GeluFusionPass":"on\t"}}}'
    assert parse_switch_text(tab).lenient == ["1:47: control character"]
    errors = [p for p in check_switch_text(tab, TOY).problems if p.severity == "error"]
    assert [(p.code, p.line, p.column) for p in errors] == [("control-character", 1, 47)]


def test_lint_of_ge_pattern_passes_follows_ge_precedence():
    """A GE pattern pass reads only Switch.GraphFusion: FE's ExceptionalPassOfO1Level list does not keep it on, and
    an old-format ALL:off leaves every one of them on (the lint says so, as `cfg effective` does)."""
    catalog = default_catalog()
    pattern = next(r.name for r in catalog.rules.values() if r.ge_pattern and r.can_disable)
    text = json.dumps({"Switch": {"GraphFusion": {pattern: "off"}}, "ExceptionalPassOfO1Level": [pattern]})
    assert not [p for p in check_switch_text(text, catalog).problems if p.code == "own-o1-exception"]
    assert not effective_state(pattern, parse_switch_text(text), catalog)
    fe_pass = "LayerNormFusionPass"
    text = json.dumps({"Switch": {"GraphFusion": {fe_pass: "off"}}, "ExceptionalPassOfO1Level": [fe_pass]})
    assert [p.rule for p in check_switch_text(text, catalog).problems if p.code == "own-o1-exception"] == [fe_pass]
    legacy = check_switch_text("ALL:off\n", catalog)
    [warning] = [p for p in legacy.problems if p.code == "legacy-all-ge-pattern"]
    n = sum(1 for r in catalog.rules.values() if r.ge_pattern and r.can_disable)
    assert warning.severity == "warning" and f"leaves on the {n} GE pattern passes" in warning.message
    assert effective_state(pattern, parse_switch_text("ALL:off\n"), catalog)
    assert not [p for p in check_switch_text('{"Switch":{"GraphFusion":{"ALL":"off"}}}', catalog).problems
                if p.code == "legacy-all-ge-pattern"]


def test_lint_warns_when_the_files_own_o1_list_names_a_ge_pattern_pass_it_closes():
    """GE reads only Switch.GraphFusion for a GE pattern pass: the file's ExceptionalPassOfO1Level list does not
    keep it on, so a file that lists it and closes it (by name or with ALL) is warned of, as `cfg effective`
    shows it off; listed and left on, it runs and nothing is said."""
    catalog = default_catalog()
    pattern = "MatMulBiasAddFusionPass"
    assert catalog.rules[pattern].ge_pattern and catalog.rules[pattern].can_disable
    for graph, key in (({"ALL": "off"}, "ALL"), ({pattern: "off"}, pattern)):
        text = json.dumps({"Switch": {"GraphFusion": graph}, "ExceptionalPassOfO1Level": [pattern]})
        assert not effective_state(pattern, parse_switch_text(text), catalog)
        report = check_switch_text(text, catalog)
        [warning] = [p for p in report.problems if p.code == "o1-ge-pattern"]
        assert not report.ok and warning.severity == "warning" and warning.rule == pattern
        assert (warning.line, warning.column) == (1, text.index(f'["{pattern}"]') + 2)
        assert f"Switch.GraphFusion.{key} = off closes it" in warning.message
    for graph in ({}, {"ALL": "off", pattern: "on"}):
        text = json.dumps({"Switch": {"GraphFusion": graph}, "ExceptionalPassOfO1Level": [pattern]})
        assert not [p for p in check_switch_text(text, catalog).problems if p.code == "o1-ge-pattern"]


def test_lint_checks_the_names_of_the_files_own_o1_list_and_priority():
    """A typo in ExceptionalPassOfO1Level protects nothing and one in Priority ranks nothing: they are warned of
    as in Switch (case, unknown with did-you-mean, no pass name, a listing's misspelling), with their position.
    The 'passes CANN always runs' count leaves out the listings' misspellings, which name no pass."""
    catalog = default_catalog()
    text = ('{"Switch": {"GraphFusion": {"GeluFusionPass": "on"}},\n'
            ' "ExceptionalPassOfO1Level": ["GeluFusionpass", "bad name!", "LayerNormFusionPass"],\n'
            ' "Priority": {"GraphFusion": {"Top": {"NoSuchPassXyz": "5", "sedBatchNormGradFusionPass": "6"}}}}')
    found = {(p.code, p.line, p.column) for p in check_switch_text(text, catalog).problems
             if p.severity == "warning"}
    assert found == {("case-mismatch", 2, 31), ("rule-name", 2, 49), ("unknown-rule", 3, 39), ("spelling", 3, 61)}
    messages = " | ".join(p.message for p in check_switch_text(text, catalog).problems)
    assert "ExceptionalPassOfO1Level: no rule 'GeluFusionpass'; names are case-sensitive: did you mean " \
           "'GeluFusionPass'?" in messages
    assert "Priority.GraphFusion.Top: 'NoSuchPassXyz' is not in the catalog" in messages
    [note] = [p for p in check_switch_text('{"Switch": {"GraphFusion": {"ALL": "off"}}}', catalog).problems
              if p.code == "all-forbidden"]
    always = [r for r in catalog.rules.values() if r.kind == "GraphFusion" and not r.can_disable]
    assert any(r.spelling_of for r in always)
    assert f"never closes the {sum(not r.spelling_of for r in always)} GraphFusion passes" in note.message


@pytest.mark.parametrize("text,line,col,words", [
    ('{"Switch": {"GraphFusion": {"A": "On"}}}', 1, 34, "exactly"),
    ('{"Switch": {"GraphFusion": {"A": true}}}', 1, 34, "exactly"),
    ('{"Switch": {}, "Other": {}}', 1, 16, "Switch, Priority"),
    ('{"switch": {}}', 1, 2, "did you mean 'Switch'"),
    ('{"Switch": {"UbFusion": {}}}', 1, 13, "did you mean 'UBFusion'"),
    ('{\n  "Switch": {\n    "GraphFusion": {"A": "off" "B": "on"}\n  }\n}', 3, 32, "expected ','"),
    ('{"Switch": {"GraphFusion": {"A": "off"}}', 1, 1, "unterminated"),
    ("{'Switch': {}}", 1, 2, "double quotes"),
    ("", 1, 1, "empty"),
    ('{"Priority": {"GraphFusion": {"Top": {"A": ' + "9" * 5000 + '}}}}', 1, 44, "a number of 5000 characters"),
])
def test_strict_errors_have_line_and_column(text, line, col, words):
    with pytest.raises(SwitchFileError) as info:
        parse_switch_text(text, "f.cfg")
    err = info.value
    assert (err.line, err.column) == (line, col), str(err)
    assert words in str(err) and str(err).startswith("f.cfg: line")


def test_schema_agrees_with_the_strict_parser():
    validator = jsonschema.Draft202012Validator(switch_schema())
    good = {"Switch": {"GraphFusion": {"ALL": "off", "X.y:z-1": "on"}, "UBFusion": {}},
            "Priority": {"GraphFusion": {"Main": {"X": "1003"}}}, "ExceptionalPassOfO1Level": ["X"]}
    assert not list(validator.iter_errors(good))
    parse_switch_text(json.dumps(good))
    # what FE's check takes (keys compared without surrounding spaces, any pass name), though it then ignores it
    for taken in ({" Switch ": {"GraphFusion": {"A": "off"}}}, {"Switch": {" UBFusion": {"A": "off"}}},
                  {"Switch": {"GraphFusion": {"A b": "off", " A": " on "}}}, {"Priority": {"GraphFusion": {" Top": {}}}}):
        assert not list(validator.iter_errors(taken)), taken
        parse_switch_text(json.dumps(taken))
    for bad in ({"Switch": {"GraphFusion": {"A": "ON"}}}, {"Other": {}}, {"Switch": {"ubfusion": {}}},
                {"Switch": {"GraphFusion": {"A b": "maybe"}}}, {"Switch": []}, {"ExceptionalPassOfO1Level": "X"},
                {"Switch": {}, "Priority": {"GraphFusion": {"Top": {"X": 5}}}}):
        assert list(validator.iter_errors(bad)), bad
        with pytest.raises(SwitchFileError):
            parse_switch_text(json.dumps(bad))


def test_json_duplicate_keys_keep_the_last_as_cann_reads_them():
    # CANN parses the file with nlohmann::json: the last of duplicate keys wins, at every level.
    text = ('{"Switch": {"GraphFusion": {"A": "off", "B": "off", "A": "on"}, "UBFusion": {"U": "off"},\n'
            '            "UBFusion": {"V": "off"}}}')
    c = parse_switch_text(text)
    assert c.graph == {"A": "on", "B": "off"} and c.ub == {"V": "off"}
    assert parse_switch_text('{"Switch": {"GraphFusion": {"A": "off"}}, "Switch": {"UBFusion": {}}}').graph == {}
    report = check_switch_text(text, default_catalog())
    dup = [p for p in report.problems if p.code == "duplicate"]
    assert [(p.severity, p.line, p.column, p.rule or p.section) for p in dup] == [("warning", 1, 53, "A"),
                                                                                 ("warning", 2, 13, "UBFusion")]
    assert not report.ok and "keeps only the last one" in dup[0].message
    # an earlier copy of a section, of Switch, or of a Priority level is never judged: only what CANN keeps
    for kept_last in ('{"Switch": {"GraphFusion": {"GeluFusionPass": "maybe"}, "GraphFusion": {"GeluFusionPass": '
                      '"off"}}}',
                      '{"Switch": {"GraphFusion": {"GeluFusionPass": "maybe"}}, "Switch": {"GraphFusion": '
                      '{"GeluFusionPass": "off"}}}'):
        assert parse_switch_text(kept_last).graph == {"GeluFusionPass": "off"}
        report = check_switch_text(kept_last, default_catalog())
        assert [(p.severity, p.code) for p in report.problems] == [("warning", "duplicate")], report.problems
    huge = ('{"Switch": {"GraphFusion": {"GeluFusionPass": "on"}}, "Priority": {"GraphFusion": {"Top": '
            '{"GeluFusionPass": "' + "9" * 5000 + '"}}}}')
    [problem] = check_switch_text(huge, default_catalog()).problems   # a priority problem, not Python's digit limit
    assert problem.code == "priority" and "(5000 digits): a Top priority must be in [0, 1000)" in problem.message
    prio = ('{"Switch": {"GraphFusion": {"GeluFusionPass": "on"}}, "Priority": {"GraphFusion": {"Top": '
            '{"GeluFusionPass": "5000"}, "Top": {"GeluFusionPass": "5"}}}}')
    report = check_switch_text(prio, default_catalog())
    assert [(p.severity, p.code) for p in report.problems] == [("warning", "duplicate")], report.problems


def test_legacy_format():
    c = parse_switch_text("ConvConcatFusionPass:off\n\n  TbeEltwiseFusionPass : on \n")
    assert c.legacy and c.graph == c.ub == {"ConvConcatFusionPass": "off", "TbeEltwiseFusionPass": "on"}
    # FE's reader skips only empty lines and splits at the first colon: anything else fails the whole file
    for text, what in (("# comment\nA:off\n", "line 1, column 1: a comment without a colon"),
                       ("# note: x\nA:off\n", "line 1.*CANN reads this comment as an entry"),
                       ("A:off\n   \nB:off\n", "line 2, column 1: a blank line of spaces"),
                       ("A:off\r\n\r\nB:off\r\n", "line 2, column 1: a blank line of spaces or a carriage return"),
                       ("A:B:off\n", "line 1.*A:B:off: the value must be exactly on or off")):
        with pytest.raises(SwitchFileError, match=what):
            parse_switch_text(text)
    assert parse_switch_text("A:off\r\nB:on\r\n").graph == {"A": "off", "B": "on"}
    # a line commented out with its colon is an entry for a pass named "#A": it switches nothing, fails nothing
    assert parse_switch_text("#A:off\n// B:on\nC:off\n").graph == {"C": "off"}
    report = check_switch_text("#A:off\nC:off\n", default_catalog())
    assert [p.code for p in report.problems if p.severity != "info"][0] == "commented-out"
    # a byte-order mark stays in the first line's name for FE's line reader: that entry switches nothing
    assert parse_switch_text("\ufeffA:off\nB:off\n").graph == {"B": "off"}
    with pytest.raises(SwitchFileError, match="byte-order mark alone"):
        parse_switch_text("\ufeff\nB:off\n")
    # ... but that first line is still read: a bad value or a missing colon there fails the file, as without it
    with pytest.raises(SwitchFileError, match="line 1, column 3: A:maybe: the value must be exactly on or off"):
        parse_switch_text("\ufeffA:maybe\nB:off\n")
    with pytest.raises(SwitchFileError, match="line 1, column 1: expected PassName:on or PassName:off"):
        parse_switch_text("\ufeffjunk\nB:off\n")
    # (and the mark makes it another name than a later line's: no duplicate)
    assert parse_switch_text("\ufeffB:on\nB:off\n").graph == {"B": "off"}
    # FE's format check rejects Priority levels and sections it does not know, like unknown Switch sections
    for priority in ('{"GraphFusion": {"Middle": {"A": "1500"}}}', '{"Foo": {"Top": {"A": "1"}}}'):
        with pytest.raises(SwitchFileError, match="Priority"):
            parse_switch_text('{"Switch": {"GraphFusion": {"A": "off"}}, "Priority": %s}' % priority)
    assert parse_switch_text('\ufeff{"Switch": {"GraphFusion": {"A": "off"}}}').graph == {"A": "off"}
    with pytest.raises(SwitchFileError, match="line 2, column 1: A appears twice"):
        parse_switch_text("A:off\nA:on\n")
    with pytest.raises(SwitchFileError, match="line 1.*exactly on or off"):
        parse_switch_text("A:OFF\n")
    with pytest.raises(SwitchFileError, match="line 2.*PassName:on"):
        parse_switch_text("A:off\njunk\n")


def test_read_file_errors(tmp_path):
    with pytest.raises(SwitchFileError, match="directory"):
        parse_switch_file(tmp_path)
    with pytest.raises(SwitchFileError, match="no such file"):
        parse_switch_file(tmp_path / "missing.cfg")
    bad = tmp_path / "latin1.cfg"
    bad.write_bytes(b'{"Switch": {"GraphFusion": {"Caf\xe9": "off"}}}')
    with pytest.raises(SwitchFileError, match="not UTF-8"):
        parse_switch_file(bad)
    ok = tmp_path / "ok.cfg"
    ok.write_bytes(b'\xef\xbb\xbf{"Switch": {"UBFusion": {"A": "off"}}}')
    assert parse_switch_file(ok).ub == {"A": "off"} and parse_switch_file(ok).path == ok


# ---- building and writing ---------------------------------------------------------------------------------------

def test_validate_rule_name():
    assert validate_rule_name("Tbe.Conv:2-d_x") == "Tbe.Conv:2-d_x"
    for bad in ("", "a b", "x;rm -rf", "名字", "a\n"):
        with pytest.raises(UsageError):
            validate_rule_name(bad)


def test_off_config_places_rules_by_kind():
    cat = default_catalog()
    c = off_config(["TbeEltwiseFusionPass", "ConvConcatFusionPass", "SquareSumV1"], cat)
    assert c.graph == {"ConvConcatFusionPass": "off", "SquareSumV1": "off"}
    assert c.ub == {"TbeEltwiseFusionPass": "off", "SquareSumV1": "off"}
    assert off_config(["MyCustomPass"], cat, kind="ub").ub == {"MyCustomPass": "off"}
    with pytest.raises(UsageError, match="did you mean TbeEltwiseFusionPass"):
        off_config(["TbeEltwiseFusionPas"], cat)
    with pytest.raises(UsageError, match="invalid rule name"):
        off_config(["bad name"], cat, kind="graph")


def test_render_is_canonical():
    c = cfg({"b": "off", "a": "off"}, {"z": "off"})
    text = render_switch(c)
    assert text == ('{\n  "Switch": {\n    "GraphFusion": {\n      "a": "off",\n      "b": "off"\n    },\n'
                    '    "UBFusion": {\n      "z": "off"\n    }\n  }\n}\n')
    assert parse_switch_text(text).graph == c.graph
    with pytest.raises(UsageError):
        render_switch(cfg({"a": "maybe"}))


def test_write_never_overwrites_without_force(tmp_path):
    target = tmp_path / "fusion_switch.cfg"
    write_switch_file(target, cfg({"A": "off"}))
    first = target.read_text()
    with pytest.raises(UsageError, match="--force"):
        write_switch_file(target, cfg({"B": "off"}))
    assert target.read_text() == first
    write_switch_file(target, cfg({"B": "off"}), force=True)
    assert (tmp_path / "fusion_switch.cfg.bak").read_text() == first
    assert parse_switch_file(target).graph == {"B": "off"}
    with pytest.raises(UsageError, match="directory"):
        write_switch_file(tmp_path, cfg({"A": "off"}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fusion_switch.cfg", "fusion_switch.cfg.bak"]


def test_hashed_file_names(tmp_path):
    a = write_hashed_switch_file(tmp_path / "sw", cfg({"A": "off"}))
    again = write_hashed_switch_file(tmp_path / "sw", cfg({"A": "off"}))
    b = write_hashed_switch_file(tmp_path / "sw", cfg({"B": "off"}))
    assert a == again and a != b
    assert a.name.startswith("fusion_switch.") and a.suffix == ".cfg" and len(a.name.split(".")[1]) == 12
    assert parse_switch_file(b).graph == {"B": "off"}
    with pytest.raises(UsageError):
        write_hashed_switch_file(a, cfg({"C": "off"}))


names = st.from_regex(r"[A-Za-z0-9_.:-]{1,20}", fullmatch=True)
sections = st.dictionaries(names, st.sampled_from(["on", "off"]), max_size=8)


@settings(max_examples=60, deadline=None)
@given(sections, sections)
def test_render_parse_round_trip(graph, ub):
    c = cfg(graph, ub)
    back = parse_switch_text(render_switch(c))
    assert back.graph == graph and back.ub == ub
    assert render_switch(back) == render_switch(c)


def test_a_backup_never_replaces_an_older_backup(tmp_path):
    target = tmp_path / "fusion_switch.cfg"
    target.write_text("user's own file\n")
    write_switch_file(target, cfg({"A": "off"}), force=True)
    write_switch_file(target, cfg({"B": "off"}), force=True)
    write_switch_file(target, cfg({"C": "off"}), force=True)
    assert (tmp_path / "fusion_switch.cfg.bak").read_text() == "user's own file\n"
    assert parse_switch_file(tmp_path / "fusion_switch.cfg.bak.1").graph == {"A": "off"}
    assert parse_switch_file(tmp_path / "fusion_switch.cfg.bak.2").graph == {"B": "off"}
    assert parse_switch_file(target).graph == {"C": "off"}


def test_a_backup_appears_whole_or_not_at_all(tmp_path, monkeypatch):
    """A kill while the old file is being kept must not leave a cut-short .bak under the final name (the rerun
    would keep it forever and write .bak.1 beside it): it is written beside it, synced, then renamed."""
    import os

    target = tmp_path / "fusion_switch.cfg"
    target.write_text("user's own file\n" * 1000)
    target.chmod(0o640)
    real_fsync = os.fsync

    def killed(fd):
        raise KeyboardInterrupt   # the first sync is the backup's: stopped before its rename
    monkeypatch.setattr(os, "fsync", killed)
    with pytest.raises(KeyboardInterrupt):
        write_switch_file(target, cfg({"A": "off"}), force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fusion_switch.cfg"]   # nor a temporary file left
    assert target.read_text() == "user's own file\n" * 1000
    monkeypatch.setattr(os, "fsync", real_fsync)
    write_switch_file(target, cfg({"A": "off"}), force=True)
    backup = tmp_path / "fusion_switch.cfg.bak"
    assert backup.read_text() == "user's own file\n" * 1000 and backup.stat().st_mode & 0o777 == 0o640
    assert parse_switch_file(target).graph == {"A": "off"}


@pytest.mark.parametrize("text", ['{"Switch":' + "[" * 100000 + "]" * 100000 + "}",
                                  '{"Switch":{"GraphFusion":' + '{"a":' * 5000 + "1" + "}" * 5000 + "}}"])
def test_absurdly_deep_nesting_is_a_syntax_error_not_a_crash(text):
    with pytest.raises(SwitchFileError, match="nested deeper than 100 levels"):
        parse_switch_text(text)


def test_line_positions_of_a_large_file_are_found_without_rescanning_it():
    """line_col indexes the text's line ends once (a lint asks for one position per entry: recounting from the
    start made 100 000 entries take minutes); positions match a plain count."""
    from fusebisect.rules.switchfile import line_col

    text = "ab\n\ncd\nefg"
    expect = {0: (1, 1), 2: (1, 3), 3: (2, 1), 4: (3, 1), 6: (3, 3), 7: (4, 1), 8: (4, 2), 11: (4, 4), 99: (4, 4), -5: (1, 1)}
    assert {o: line_col(text, o) for o in expect} == expect
    big = "x\n" * 200_000
    assert line_col(big, len(big) - 1) == (200_000, 2) and line_col(big, 3) == (2, 2)


def test_did_you_mean_hints_stop_after_the_first_two_hundred_unknown_names():
    """A did-you-mean costs milliseconds: a generated file of 20 000 custom names took a minute to lint. The
    first 200 unknown names get hints; the rest the plain message."""
    from fusebisect.rules.catalog import default_catalog
    from fusebisect.rules.switchfile import SwitchConfig, name_problems

    cfg = SwitchConfig(graph={f"GeluFusionPas{i:03d}": "off" for i in range(250)})
    found = [p for p in name_problems(cfg, default_catalog()) if p.code == "unknown-rule"]
    assert len(found) == 250
    assert sum("did you mean" in p.message for p in found) == 200
    assert found[-1].message.endswith("is not in the catalog (fine for a custom or newer pass; check the spelling)")


def test_keys_cann_checks_trimmed_and_names_it_never_matches_are_taken_and_do_nothing():
    """FE's CheckFusionConfigJsonFormat compares keys without their spaces and puts no limit on pass names, then
    reads its maps by the exact keys: such a file compiles, and its padded parts and odd names do nothing. The
    lint warns of each (it called them errors, and the simulator refused to compile such a file)."""
    cfg = parse_switch_text('{"Switch":{"GraphFusion":{"LayerNormFusionPass":"off","My Pass":"off",'
                            '" GeluFusionPass":"off"}," UBFusion":{"TbeEltwiseFusionPass":"off"}},'
                            '" Priority ":{"GraphFusion":{"Top":{"X":"5"}}}}')
    assert cfg.graph == {"LayerNormFusionPass": "off"} and cfg.ub == {} and cfg.priority == {}
    assert cfg.invalid_names == ["My Pass", " GeluFusionPass"]
    # the rules those void entries were meant for, and why each does nothing (what `cfg effective` shows)
    assert set(cfg.ignored) == {"GeluFusionPass", "TbeEltwiseFusionPass"}
    assert cfg.ignored["GeluFusionPass"].startswith("written as ' GeluFusionPass': CANN keeps the spaces")
    assert cfg.ignored["TbeEltwiseFusionPass"].startswith("named under Switch.' UBFusion': CANN checks that key")
    report = check_switch_text('{"Switch":{"GraphFusion":{" GeluFusionPass":"off"}},'
                               '" Switch":{"UBFusion":{"A":"off"}}}', TOY)
    assert not [p for p in report.problems if p.severity == "error"], report.problems
    messages = " ".join(p.message for p in report.problems)
    assert "did you mean 'GeluFusionPass'?" in messages and "reads only 'Switch' exactly" in messages
    legacy = parse_switch_text("My Pass:off\nGeluFusionPass:off\n")
    assert legacy.invalid_names == ["My Pass"] and legacy.graph == {"GeluFusionPass": "off"}
    with pytest.raises(SwitchFileError, match="appears twice"):
        parse_switch_text("My Pass:off\nMy Pass:on\n")


@pytest.mark.parametrize("space", ["\u3000", "\u00a0"])
def test_only_ascii_whitespace_is_what_cann_trims(space):
    """FE trims keys and values with C's isspace on the file's bytes: a full-width (U+3000, an IME's space) or
    no-break (U+00A0) space stays, so "off" followed by one is neither on nor off and CANN rejects the file,
    in both formats; a section or top-level key padded with one is no key CANN checks."""
    for text in ('{"Switch":{"GraphFusion":{"GeluFusionPass":"off%s"}}}' % space, f"GeluFusionPass:off{space}\n"):
        report = check_switch_text(text, TOY)
        assert any(p.severity == "error" and "must be exactly" in p.message for p in report.problems), report.problems
        with pytest.raises(SwitchFileError, match="must be exactly"):
            parse_switch_text(text)
    report = check_switch_text('{"Switch%s":{"GraphFusion":{"GeluFusionPass":"off"}}}' % space, TOY)
    assert any(p.severity == "error" and "top-level key" in p.message for p in report.problems), report.problems
    # a priority level padded with one is no level FE reads (its priorities went unchecked)
    report = check_switch_text('{"Switch":{"GraphFusion":{"LayerNormFusionPass":"off"}},"Priority":{"GraphFusion":'
                               '{"Top%s":{"GeluFusionPass":"99999"}}}}' % space, TOY)
    assert any(p.severity == "error" and p.message.startswith("Priority.GraphFusion: key 'Top")
               and "is not allowed: CANN reads only Top, Main, Down here" in p.message for p in report.problems), \
        report.problems
    # ASCII padding is still what FE takes off: a warning, the file compiles
    report = check_switch_text('{"Switch":{"GraphFusion":{"GeluFusionPass":"off\\t"}}}', TOY)
    assert not [p for p in report.problems if p.severity == "error"], report.problems
