"""`fusebisect cfg ...` and `fusebisect rules list/show` end to end, in-process."""

import json

import pytest

from fusebisect.cli.app import main
from fusebisect.rules.switchfile import parse_switch_file


def run(capsys, *args):
    rc = main(list(args))
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


@pytest.mark.parametrize("cmd", [["cfg", "off"], ["cfg", "all-off"], ["cfg", "check"], ["cfg", "effective"],
                                 ["cfg", "diff"], ["rules", "list"], ["rules", "show"]])
def test_help_has_an_example(capsys, cmd):
    rc, out, _ = run(capsys, *cmd, "--help")
    assert rc == 0 and "Example: fusebisect " + " ".join(cmd) in out


def test_cfg_off_prints_and_writes(capsys, tmp_path):
    rc, out, err = run(capsys, "cfg", "off", "TbeEltwiseFusionPass", "ConvConcatFusionPass")
    assert rc == 0 and json.loads(out) == {"Switch": {"GraphFusion": {"ConvConcatFusionPass": "off"},
                                                      "UBFusion": {"TbeEltwiseFusionPass": "off"}}}
    target = tmp_path / "sw.cfg"
    rc, out, err = run(capsys, "cfg", "off", "MyPass", "--kind", "ub", "--out", str(target), "--json")
    assert rc == 0 and json.loads(out)["written"] == str(target)
    assert parse_switch_file(target).ub == {"MyPass": "off"}
    rc, out, err = run(capsys, "cfg", "off", "ConvConcatFusionPass", "--out", str(target))
    assert rc == 2 and "--force" in err and parse_switch_file(target).ub == {"MyPass": "off"}
    rc, _, _ = run(capsys, "cfg", "off", "ConvConcatFusionPass", "--out", str(target), "--force")
    assert rc == 0 and (tmp_path / "sw.cfg.bak").exists()
    assert parse_switch_file(target).graph == {"ConvConcatFusionPass": "off"}


def test_cfg_off_bad_input(capsys, tmp_path):
    rc, _, err = run(capsys, "cfg", "off", "TbeEltwiseFusionPas")
    assert rc == 2 and "did you mean TbeEltwiseFusionPass" in err and err.count("\n") == 1
    rc, _, err = run(capsys, "cfg", "off", "a;b", "--kind", "graph")
    assert rc == 2 and "invalid rule name" in err
    rc, _, err = run(capsys, "cfg", "off", "X", "--kind", "cube")
    assert rc == 2 and "--kind" in err
    rc, _, err = run(capsys, "cfg", "off", "ConvConcatFusionPass", "--out", str(tmp_path))
    assert rc == 2 and "directory" in err
    rc, _, err = run(capsys, "cfg", "off", "PassThroughFusionPass")
    assert rc == 0 and "forbidden-close" in err


def test_all_off_file_lints_clean(capsys, tmp_path):
    target = tmp_path / "off.cfg"
    assert run(capsys, "cfg", "all-off", "--out", str(target))[0] == 0
    rc, out, _ = run(capsys, "cfg", "check", str(target), "--json")
    report = json.loads(out)
    assert rc == 0 and report["ok"], report
    assert {p["severity"] for p in report["problems"]} == {"info"}
    assert "all-forbidden" in {p["code"] for p in report["problems"]}


def test_cfg_check_reports_problems(capsys, tmp_path):
    f = tmp_path / "user.cfg"
    f.write_text('{\n  "Switch": {\n    "GraphFusion": {\n      "ALL": "off",\n      "TbeEltwiseFusionPass": "off",\n'
                 '      "convconcatfusionpass": "off",\n      "PassThroughFusionPass": "off",\n'
                 '      "ConvConcatFusionPas": "off"\n    },\n  }\n}\n', encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    report = json.loads(out)
    codes = {p["code"]: p for p in report["problems"]}
    assert rc == 1 and not report["ok"]
    assert {"wrong-section", "case-mismatch", "cannot-disable", "unknown-rule", "all-incomplete",
            "trailing-comma"} <= set(codes)
    assert codes["wrong-section"]["line"] == 5 and codes["wrong-section"]["column"] == 7
    assert "ConvConcatFusionPass" in codes["case-mismatch"]["message"]
    assert "did you mean 'ConvConcatFusionPass'" in codes["unknown-rule"]["message"]
    assert codes["trailing-comma"]["line"] == 9
    rc, out, _ = run(capsys, "cfg", "check", str(f))
    assert rc == 1 and f"{f}:5:7: warning:" in out and "problems found" in out


def test_cfg_check_invalid_json_and_values(capsys, tmp_path):
    f = tmp_path / "bad.cfg"
    f.write_text('{"Switch": {"GraphFusion": {"A": "off"\n "B": "on"}}}', encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    p = json.loads(out)["problems"]
    assert rc == 1 and p[0]["code"] == "json" and (p[0]["line"], p[0]["column"]) == (2, 2)
    f.write_text('{"Switch": {"GraphFusion": {"ConvConcatFusionPass": "OFF"}}, "Switches": {}}', encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    codes = [x["code"] for x in json.loads(out)["problems"]]
    assert rc == 1 and "invalid-value" in codes and "top-level-key" in codes
    f.write_text('{"Switch": {"GraphFusion": {"ConvConcatFusionPass": "off"}}, "Priority": {"GraphFusion": '
                 '{"Main": {"ConvConcatFusionPass": "high"}}}}', encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    probs = json.loads(out)["problems"]
    assert rc == 1 and [x["code"] for x in probs] == ["priority"]
    assert probs[0]["message"] == ('Priority.GraphFusion.Main.ConvConcatFusionPass = "high": CANN needs a string '
                                   'holding an integer')
    # FE's custom ranges per level, and a JSON number (its reader throws on it)
    f.write_text('{"Switch": {"GraphFusion": {"ConvConcatFusionPass": "off"}}, "Priority": {"GraphFusion": '
                 '{"Top": {"ConvConcatFusionPass": "1500"}, "Down": {"AddNFusionPass": 2500}}}}',
                 encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    msgs = [x["message"] for x in json.loads(out)["problems"]]
    assert rc == 1 and msgs == ["Priority.GraphFusion.Top.ConvConcatFusionPass = 1500: a Top priority must be in "
                                "[0, 1000)", "Priority.GraphFusion.Down.AddNFusionPass = 2500: CANN needs a "
                                "string holding an integer (write \"2500\")"]
    # FE keeps one set of names over Top, Main and Down: a pass in two levels fails the file; twice in one
    # level, the JSON reader has kept the last value before FE looks
    f.write_text('{"Priority": {"GraphFusion": {"Top": {"ConvConcatFusionPass": "abc", "ConvConcatFusionPass": "6"}, '
                 '"Main": {"ConvConcatFusionPass": "1500"}}}}', encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    probs = [(x["severity"], x["message"]) for x in json.loads(out)["problems"]]
    assert rc == 1 and probs == [
        ("warning", "Priority.GraphFusion.Top.ConvConcatFusionPass appears twice in that level: CANN reads the last "
                    "value only"),
        ("error", "Priority.GraphFusion.Main.ConvConcatFusionPass is also in Top: CANN rejects the file (a pass may "
                  "have one priority level)")]
    # a Switch value CANN never sees (a later duplicate replaces it) is not judged
    f.write_text('{"Switch": {"GraphFusion": {"ConvConcatFusionPass": "bogus", "ConvConcatFusionPass": "off"}}}',
                 encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    assert rc == 1 and [x["code"] for x in json.loads(out)["problems"]] == ["duplicate"]
    assert run(capsys, "cfg", "effective", str(f), "--rule", "ConvConcatFusionPass")[0] == 0
    # a padded value passes CANN's check but reads as off
    f.write_text('{"Switch": {"GraphFusion": {"ConvConcatFusionPass": " on "}}}', encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    doc = json.loads(out)
    assert rc == 1 and [x["code"] for x in doc["problems"]] == ["padded-value"]


def test_cfg_check_warns_that_ge_pattern_passes_ignore_the_old_format(capsys, tmp_path):
    """GE pattern passes (REG_FUSION_PASS) read only the JSON Switch.GraphFusion: an old-format line for one may
    switch nothing."""
    f = tmp_path / "old.cfg"
    f.write_text("WhereFusionPass:off\nConvConcatFusionPass:off\n", encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    probs = [p for p in json.loads(out)["problems"] if p["severity"] == "warning"]
    assert rc == 1 and [(p["code"], p["rule"]) for p in probs] == [("legacy-ge-pattern", "WhereFusionPass")]
    f.write_text('{"Switch": {"GraphFusion": {"WhereFusionPass": "off"}}}', encoding="utf-8")
    assert run(capsys, "cfg", "check", str(f))[0] == 0


def test_ge_pattern_passes_follow_ges_own_switch_order(capsys, tmp_path):
    """A GE pattern pass reads the JSON Switch.GraphFusion only (exact name, then ALL, else on): an old-format
    ALL:off leaves it on, and FE's forbidden-close list (which kept the old FE pass of that name on) does not
    reach it."""
    old, new = tmp_path / "old.cfg", tmp_path / "new.cfg"
    old.write_text("ALL:off\n", encoding="utf-8")
    new.write_text('{"Switch":{"GraphFusion":{"ALL":"off"},"UBFusion":{"ALL":"off"}}}', encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "diff", str(old), str(new), "--json")
    rows = {r["rule"]: (r["a"], r["b"]) for r in json.loads(out)["changes"]}
    assert rc == 1 and rows["GlobalavgpoolPass"] == ("on", "off") and "ConvConcatFusionPass" not in rows
    rc, out, _ = run(capsys, "cfg", "effective", str(old), "--rule", "GlobalavgpoolPass", "--json")
    [state] = json.loads(out)["rules"]
    assert rc == 0 and state["effective"] == "on" and "old-format" in state["reason"]
    new.write_text('{"Switch":{"GraphFusion":{"PermuteFusionPass":"off"},"UBFusion":{"GlobalavgpoolPass":"off"}}}',
                   encoding="utf-8")
    assert run(capsys, "cfg", "check", str(new))[0] == 1     # (GlobalavgpoolPass is in the wrong section)
    rc, out, _ = run(capsys, "cfg", "effective", str(new), "--rule", "PermuteFusionPass", "--rule",
                     "GlobalavgpoolPass", "--json")
    states = {r["rule"]: r["effective"] for r in json.loads(out)["rules"]}
    assert rc == 0 and states == {"PermuteFusionPass": "off", "GlobalavgpoolPass": "on"}
    new.write_text('{"Switch":{"GraphFusion":{"PermuteFusionPass":"off"}}}', encoding="utf-8")
    assert run(capsys, "cfg", "check", str(new))[0] == 0


def test_cfg_check_prints_a_line_as_it_is_never_an_emoji(capsys, tmp_path):
    f = tmp_path / "old.cfg"
    f.write_text("# note:x:on\nConvConcatFusionPass:off\n", encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "check", str(f))
    assert rc == 1 and "# note:x:on: CANN reads this comment as an entry" in " ".join(out.split())


def test_cfg_check_lowercase_all_is_a_case_mismatch(capsys, tmp_path):
    f = tmp_path / "all.cfg"
    f.write_text('{"Switch": {"GraphFusion": {"all": "off"}}}', encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    [p] = json.loads(out)["problems"]
    assert rc == 1 and p["code"] == "case-mismatch" and "the key for every pass of a section is 'ALL'" in p["message"]


def test_cfg_check_legacy_and_clean(capsys, tmp_path):
    f = tmp_path / "old.cfg"
    f.write_text("ConvConcatFusionPass:off\nTbeEltwiseFusionPass:off\n", encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    report = json.loads(out)
    assert rc == 0 and report["format"] == "legacy" and report["ok"]
    f.write_text("ConvConcatFusionPass:off\nConvConcatFusionPass:on\n", encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    assert rc == 1 and any(p["code"] == "duplicate" and p["line"] == 2 for p in json.loads(out)["problems"])
    # An old-format ALL line applies to both kinds: each kind's built-in "on" passes stay on.
    f.write_text("ALL:off\nTbeEltwiseFusionPass:on\n", encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    left_on = {p["section"]: p["message"] for p in json.loads(out)["problems"] if p["code"] == "all-incomplete"}
    assert rc == 1 and set(left_on) == {"GraphFusion", "UBFusion"}
    assert left_on["UBFusion"].startswith("ALL (UBFusion) = off") and "TbeMatmulFixPipeFusionPass" in left_on["UBFusion"]


@pytest.mark.parametrize("text", ['{}', '{"Switch":{}}', '{"Switch":{"GraphFusion":{},"UBFusion":{}}}',
                                  '{"Priority":{}}', "\n\n"])
def test_cfg_check_gives_every_file_that_switches_nothing_the_same_verdict(capsys, tmp_path, text):
    f = tmp_path / "nothing.cfg"
    f.write_text(text)
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    [problem] = [p for p in json.loads(out)["problems"] if p["severity"] != "info"]
    assert rc == 1 and problem["severity"] == "warning" and problem["message"].endswith("switches nothing")


@pytest.mark.parametrize("text", ['{"Switch":{"GraphFusion":{}},"ExceptionalPassOfO1Level":["GridSampler2DFusionPass"]}',
                                  '{"ExceptionalPassOfO1Level":["GridSampler2DFusionPass"]}',
                                  '{"ExceptionalPassOfO1Level":["GeluFusionPass","MyNewerFusionPass"]}'])
def test_cfg_check_counts_what_the_files_own_o1_list_switches_on(capsys, tmp_path, text):
    """The file's ExceptionalPassOfO1Level list turns on a pass the built-in config closes (`cfg diff` and
    `cfg effective` show it): such a file switches something. A name the catalog lacks may be such a pass too."""
    f, none = tmp_path / "o1.cfg", tmp_path / "none.cfg"
    f.write_text(text + "\n")
    none.write_text('{"Switch":{"GraphFusion":{}}}\n')
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json", "--allow-unknown-rules")
    assert rc == 0 and not any("switches nothing" in p["message"] for p in json.loads(out)["problems"])
    if "GridSampler2D" in text:
        rc, out, _ = run(capsys, "cfg", "diff", str(none), str(f), "--json")
        assert rc == 1 and [(c["rule"], c["a"], c["b"]) for c in json.loads(out)["changes"]] == [
            ("GridSampler2DFusionPass", "off", "on")]


@pytest.mark.parametrize("text, code", [
    ('{"Switch":{"GraphFusion":{}},"ExceptionalPassOfO1Level":["GeluFusionPass","PackFusionPass"]}', "switches-nothing"),
    ('{"ExceptionalPassOfO1Level":["GeluFusionPass","MatMulBiasAddFusionPass"]}', "no-switch")])
def test_cfg_check_an_o1_list_of_passes_that_run_anyway_switches_nothing(capsys, tmp_path, text, code):
    """Passes that run without the file (default on, forbidden-close, a GE pattern pass the list does not reach):
    listing them changes nothing, and the warning says why the list does not count."""
    f, none = tmp_path / "o1.cfg", tmp_path / "none.cfg"
    f.write_text(text + "\n")
    none.write_text('{"Switch":{"GraphFusion":{}}}\n')
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    [problem] = [p for p in json.loads(out)["problems"] if p["severity"] != "info"]
    assert rc == 1 and problem["code"] == code and problem["message"].endswith(
        ", and ExceptionalPassOfO1Level names only passes that run without the file: this file switches nothing")
    assert run(capsys, "cfg", "diff", str(none), str(f))[0] == 0


def test_cfg_check_unreadable(capsys, tmp_path):
    rc, _, err = run(capsys, "cfg", "check", str(tmp_path))
    assert rc == 2 and "directory" in err and err.count("\n") == 1
    rc, _, err = run(capsys, "cfg", "check", str(tmp_path / "nope.cfg"))
    assert rc == 2 and "no such file" in err
    f = tmp_path / "gbk.cfg"
    f.write_bytes('{"Switch": {"GraphFusion": {"融合": "off"}}}'.encode("gbk"))
    rc, _, err = run(capsys, "cfg", "check", str(f))
    assert rc == 2 and "not UTF-8" in err


def effective_rows(capsys, path, *args) -> dict:
    rc, out, _ = run(capsys, "cfg", "effective", str(path), *args, "--json")
    assert rc == 0
    return {r["rule"]: r for r in json.loads(out)["rules"]}


def test_cfg_effective(capsys, tmp_path):
    f = tmp_path / "u.cfg"
    f.write_text('{"Switch": {"GraphFusion": {"ALL": "off", "ConvConcatFusionPass": "on", '
                 '"PassThroughFusionPass": "off"}}}', encoding="utf-8")
    rows = effective_rows(capsys, f)
    assert set(rows) == {"ConvConcatFusionPass", "PassThroughFusionPass"}
    assert rows["PassThroughFusionPass"]["effective"] == "on" and "forbidden" in rows["PassThroughFusionPass"]["reason"]
    rows = effective_rows(capsys, f, "--rule", "GridSampler3DFusionPass", "--rule", "MatMulBiasAddFusionPass")
    assert rows["GridSampler3DFusionPass"]["effective"] == "on"  # built-in explicit entry beats the file's ALL
    assert rows["MatMulBiasAddFusionPass"]["effective"] == "off"
    rc, out, _ = run(capsys, "cfg", "effective", str(f))
    assert rc == 0 and "ConvConcatFusionPass" in out
    rc, _, err = run(capsys, "cfg", "effective", str(f), "--rule", "bad name")
    assert rc == 2


LONGEST = "BatchMultiClassNonMaxSuppressionRefreshSubgraphConstNodeFusionPass"   # the catalog's longest name


@pytest.mark.parametrize("terminal", [False, True])
def test_effective_keeps_the_why_column_and_notes_beside_a_long_rule_name(tmp_path, capsys, monkeypatch, terminal):
    """In a pipe each rule name stays whole on its row; in an 80-column terminal a name too long to leave the why
    column room wraps. Either way the reasons and notes (a case typo, a rule in the wrong section) are shown."""
    import re

    monkeypatch.setenv("COLUMNS", "80")
    if terminal:
        monkeypatch.setenv("TTY_COMPATIBLE", "1")
        monkeypatch.setenv("NO_COLOR", "1")
    f = tmp_path / "long.cfg"
    f.write_text('{"Switch":{"GraphFusion":{"%s":"on","LayerNormFusionpass":"off","TbeEltwiseFusionPass":"off"}}}'
                 % LONGEST)
    rc, out, _ = run(capsys, "cfg", "effective", str(f))
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)
    why = [ln.split("│")[-1].strip() for ln in out.splitlines() if "│" in ln]   # the why column, line by line
    text = " ".join(why)
    assert rc == 0 and "┃ effective ┃ why" in out
    assert "names are case-sensitive: did you mean 'LayerNormFusionPass'?" in text
    assert "TbeEltwiseFusionPass is a UBFusion rule; in GraphFusion it does nothing (move it to Switch.UBFusion)" \
        in text
    assert f"{LONGEST}:onin" in "".join(text.split())   # (folded inside the name in a terminal)
    rows = [ln for ln in out.splitlines() if ln.startswith(" LayerNormFusionpass ")]
    assert rows and rows[0].split("│")[1].strip() == "off?"
    if terminal:
        assert max(len(ln) for ln in out.splitlines()) <= 80
    else:
        [row] = [ln for ln in out.splitlines() if LONGEST in ln]
        assert row.split("│")[0].strip() == LONGEST and row.split("│")[1].strip() == "on"


def test_cfg_effective_quotes_a_padded_value_as_the_file_writes_it(capsys, tmp_path):
    """CANN reads " on" as off: `effective` says so, quoting the file rather than claiming it says "off", with the
    lint's warning as a note; --json's in_file holds the value as written (only exactly "on" is on)."""
    f = tmp_path / "padv.cfg"
    f.write_text('{"Switch":{"GraphFusion":{"GeluFusionPass":" on","ALL":"off "}}}\n')
    rows = effective_rows(capsys, f, "--rule", "GeluFusionPass", "--rule", "LayerNormFusionPass")
    gelu = rows["GeluFusionPass"]
    assert gelu["effective"] == "off" and gelu["in_file"] == {"GraphFusion": " on"}
    assert gelu["reason"] == 'GeluFusionPass: " on" in the file (GraphFusion), which CANN reads as off'
    assert gelu["notes"] == ['written as " on": CANN accepts the spaces but then reads anything but exactly "on" as '
                             'off']
    assert rows["LayerNormFusionPass"]["reason"] == 'ALL: "off " in the file (GraphFusion), which CANN reads as off'
    rc, out, _ = run(capsys, "cfg", "effective", str(f), "--json")
    assert rc == 0 and json.loads(out)["all"] == {"GraphFusion": "off "}
    rc, out, _ = run(capsys, "cfg", "effective", str(f))
    assert rc == 0 and "off in the file" not in out and 'written as " on"' in out
    plain = tmp_path / "plain.cfg"
    plain.write_text('{"Switch":{"GraphFusion":{"GeluFusionPass":"on"}}}\n')
    rc, out, _ = run(capsys, "cfg", "diff", str(plain), str(f), "--json")
    [change] = [c for c in json.loads(out)["changes"] if c["rule"] == "GeluFusionPass"]
    assert change["why_b"] == gelu["reason"]


@pytest.mark.parametrize("text, args, rule", [('{"Switch":{"GraphFusion":{"Abc":"off"}}}', [], "Abc"),
                                              ('{"Switch":{"GraphFusion":{"ALL":"off"}}}', ["--rule", "ALL"], "ALL")])
def test_effective_keeps_the_rule_header_whole_beside_short_names(tmp_path, capsys, text, args, rule):
    f = tmp_path / "short.cfg"
    f.write_text(text)
    rc, out, _ = run(capsys, "cfg", "effective", str(f), *args)
    [header] = [ln for ln in out.splitlines() if "┃" in ln]
    assert rc == 0 and [c.strip() for c in header.split("┃")] == ["rule", "effective", "why"]
    assert any(ln.split("│")[0].strip() == rule for ln in out.splitlines() if "│" in ln)


def test_cfg_effective_lists_the_rules_the_files_own_o1_list_keeps_on(capsys, tmp_path):
    """Under "ALL": "off", the file's ExceptionalPassOfO1Level list keeps its rules on: `effective` listed no rule
    ("the file names no rules") unless asked for it by name."""
    f = tmp_path / "u.cfg"
    f.write_text('{"Switch": {"GraphFusion": {"ALL": "off"}}, "ExceptionalPassOfO1Level": ["GeluFusionPass", '
                 '"not a name"]}', encoding="utf-8")
    rows = effective_rows(capsys, f)
    assert set(rows) == {"GeluFusionPass"} and rows["GeluFusionPass"]["effective"] == "on"
    assert "ExceptionalPassOfO1Level" in rows["GeluFusionPass"]["reason"]


def test_check_and_effective_agree_on_a_ge_pattern_pass_the_files_own_o1_list_cannot_keep_on(capsys, tmp_path):
    f = tmp_path / "o1ge.cfg"
    f.write_text('{"Switch":{"GraphFusion":{"ALL":"off","FusedInferAttentionScoreQuantFusionPass":"off",'
                 '"GridSampler3DFusionPass":"off","IncreFlashAttentionQuantFusionPass":"off",'
                 '"LayerNormGradV3FusionPass":"off","PromptFlashAttentionQuantFusionPass":"off"}},'
                 '"ExceptionalPassOfO1Level":["MatMulBiasAddFusionPass"]}\n')
    rc, out, _ = run(capsys, "cfg", "check", str(f))
    assert rc == 1 and "warning: ExceptionalPassOfO1Level: 'MatMulBiasAddFusionPass' is a GE pattern pass" in out
    [row] = effective_rows(capsys, f, "--rule", "MatMulBiasAddFusionPass").values()
    assert row["effective"] == "off" and any("does not keep it on" in n for n in row["notes"])


def test_cfg_effective_flags_misspelt_and_misplaced_names(capsys, tmp_path):
    f = tmp_path / "u.cfg"
    f.write_text('{"Switch": {"GraphFusion": {"MatMulBiasAddFusionPas": "off", '
                 '"TbeConvStridedwriteFusionPass": "off"}}}', encoding="utf-8")
    rows = effective_rows(capsys, f)
    typo, ub = rows["MatMulBiasAddFusionPas"], rows["TbeConvStridedwriteFusionPass"]
    assert typo["kind"] == "not in catalog" and "did you mean 'MatMulBiasAddFusionPass'" in typo["notes"][0]
    # A UBFusion rule listed under GraphFusion is not read by CANN: it runs, and the reason says where CANN looked.
    assert ub["effective"] == "on" and ub["reason"] == "not named in UBFusion: default on"
    assert "move it to Switch.UBFusion" in ub["notes"][0]
    rc, out, err = run(capsys, "cfg", "effective", str(f))
    assert rc == 0 and "off?" in out and "did you mean" in out and "cfg check" in err
    # a note on ALL is shown whole (it holds '": "' itself); ALL is the section's key, not a pass in doubt
    f.write_text('{"Switch": {"UBFusion": {"ALL": "off"}}}', encoding="utf-8")
    [note] = effective_rows(capsys, f, "--rule", "ALL")["ALL"]["notes"]
    assert note.startswith("Switch.UBFusion.ALL = off leaves on the passes CANN's built-in config names \"on\""), note
    rc, out, err = run(capsys, "cfg", "effective", str(f), "--rule", "ALL")
    assert rc == 0 and "off?" not in out
    # sections that disagree: the reason says both, not only the one that said on
    f.write_text('{"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "on"}}}', encoding="utf-8")
    assert effective_rows(capsys, f, "--rule", "ALL")["ALL"]["reason"] == (
        "kind unknown, on in one section only: ALL: on in the file (UBFusion); ALL: off in the file (GraphFusion)")


def test_cfg_diff(capsys, tmp_path):
    a, b = tmp_path / "a.cfg", tmp_path / "b.cfg"
    a.write_text('{"Switch": {"GraphFusion": {"ConvConcatFusionPass": "off"}}}', encoding="utf-8")
    b.write_text("ConvConcatFusionPass:off\nTbeEltwiseFusionPass:off\n", encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "diff", str(a), str(b), "--json")
    changes = json.loads(out)["changes"]
    assert rc == 1 and [(c["rule"], c["a"], c["b"]) for c in changes] == [("TbeEltwiseFusionPass", "on", "off")]
    rc, out, _ = run(capsys, "cfg", "diff", str(a), str(a))
    assert rc == 0 and "same rules" in out
    # At 80 columns a long rule name and its kind stay whole; the long paths head the table as A and B.
    long = "AscendDequantQuantAntiquantMaxpoolFusionPass"
    b.write_text(f"{long}:off\n", encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "diff", str(a), str(b))
    assert rc == 1 and f"A: {a}\nB: {b}\n" in out
    assert [ln.split() for ln in out.splitlines() if long in ln] == [[long, "│", "GraphFusion", "│", "on", "│", "off"]]


def test_rules_list_and_show(capsys):
    rc, out, _ = run(capsys, "rules", "list", "--kind", "ub", "--search", "eltwise", "--json")
    items = json.loads(out)
    assert rc == 0 and items and all(set(i) == {"name", "kind", "default", "can_disable", "description"}
                                     for i in items)
    assert all(i["kind"] == "UBFusion" for i in items) and any(i["name"] == "TbeEltwiseFusionPass" for i in items)
    rc, out, _ = run(capsys, "rules", "list", "--json")
    assert len(json.loads(out)) == 628
    rc, out, _ = run(capsys, "rules", "list", "--search", "TbeEltwiseFusionPass")
    assert rc == 0 and "TbeEltwiseFusionPass" in out
    rc, out, _ = run(capsys, "rules", "show", "PassThroughFusionPass", "--json")
    data = json.loads(out)
    assert rc == 0 and data["can_disable"] is False and data["sources"]
    rc, out, _ = run(capsys, "rules", "show", "GlobalAvgPoolPass")
    assert rc == 0 and "spelling_of: Globalavgpoolpass" in out
    rc, _, err = run(capsys, "rules", "show", "TbeEltwiseFusionPas")
    assert rc == 1 and "did you mean TbeEltwiseFusionPass" in err
    rc, _, err = run(capsys, "rules", "show", "a/b")
    assert rc == 2 and "invalid rule name" in err
    rc, _, err = run(capsys, "rules", "list", "--kind", "vector")
    assert rc == 2


def test_effective_and_diff_warn_about_what_cann_would_not_read(tmp_path, capsys):
    commented = tmp_path / "c.cfg"
    commented.write_text('{\n // turn gelu off\n "Switch": {"GraphFusion": {"GeluFusionPass": "off",}}\n}\n')
    clean = tmp_path / "clean.cfg"
    clean.write_text('{"Switch": {"GraphFusion": {"GeluFusionPass": "off"}}}\n')
    for args in (["cfg", "effective", str(commented)], ["cfg", "diff", str(clean), str(commented)]):
        rc, _, err = run(capsys, *args)
        err = " ".join(err.split())
        assert rc == 0
        assert f"warning: {commented}:2:2: comment: CANN's JSON parser rejects this" in err
        assert f"warning: {commented}:3:52: trailing comma: CANN's JSON parser rejects this" in err
    rc, _, err = run(capsys, "cfg", "effective", str(clean))
    assert rc == 0 and "warning" not in err


def test_effective_and_diff_read_a_file_that_starts_with_a_block_comment(tmp_path, capsys):
    blk, line = tmp_path / "blk.cfg", tmp_path / "line.cfg"
    blk.write_text('/* switch file for run 7 */\n{"Switch":{"GraphFusion":{"LayerNormFusionPass":"off"}}}\n')
    line.write_text('// switch file for run 7\n{"Switch":{"GraphFusion":{"LayerNormFusionPass":"off"}}}\n')
    rc, out, err = run(capsys, "cfg", "effective", str(blk), "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["cann_rejects"] == ["1:1: comment"]
    assert [(r["rule"], r["effective"]) for r in doc["rules"]] == [("LayerNormFusionPass", "off")]
    assert f"warning: {blk}:1:1: comment: CANN's JSON parser rejects this" in " ".join(err.split())
    rc, out, _ = run(capsys, "cfg", "diff", str(line), str(blk))
    assert rc == 0 and "same rules" in out
    rc, out, _ = run(capsys, "cfg", "check", str(blk))
    assert rc == 1 and f"{blk}:1:1: error: comment: CANN's JSON parser rejects it" in " ".join(out.split())
    assert "old line format" not in out and "PassName:on" not in out


def test_a_spelling_of_a_forbidden_close_pass_points_at_the_pass_that_can_be_switched_off(capsys, tmp_path):
    f = tmp_path / "g.cfg"
    assert main(["cfg", "off", "GlobalAvgPoolPass", "--out", str(f)]) == 0
    assert "GlobalAvgPoolPass is a listing spelling of Globalavgpoolpass: no pass has this exact name" in \
        capsys.readouterr().err
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    [problem] = json.loads(out)["problems"]
    assert rc == 1 and problem["code"] == "spelling"
    assert problem["message"].endswith("this entry does nothing ('Globalavgpoolpass' is forbidden-close (CANN always "
                                       "runs it); 'GlobalavgpoolPass' is another pass, which can be switched off)")


def test_rules_list_in_a_pipe_keeps_every_row_on_one_whole_line(capsys):
    rc, out, _ = run(capsys, "rules", "list", "--kind", "ub", "--search", "conv")
    row = next(ln for ln in out.splitlines() if "TbeStridereadConvDequantStridewriteFusionPass" in ln)
    assert rc == 0 and row.split("│")[0].strip() == "TbeStridereadConvDequantStridewriteFusionPass"
    assert [c.strip() for c in row.split("│")[1:4]] == ["UBFusion", "on", "yes"]
    row = next(ln for ln in run(capsys, "rules", "list")[1].splitlines() if ln.startswith(" PackFusionPass "))
    assert [c.strip() for c in row.split("│")[1:4]] == ["GraphFusion", "on", "no"]   # grep sees it forbidden-close


def test_rules_show_keeps_source_paths_and_urls_whole(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    rc, out, _ = run(capsys, "rules", "show", "ADeformableConv2dPass", "--json")
    sources = json.loads(out)["sources"]
    assert any("a_deformable_conv2d_pass.cpp" in s for s in sources) and any(s.startswith("https://") for s in sources)
    rc, out, _ = run(capsys, "rules", "show", "ADeformableConv2dPass")
    lines = out.splitlines()
    assert rc == 0 and all(f"    - {source}" in lines for source in sources)


def test_cfg_check_accepts_custom_passes_when_told(capsys, tmp_path):
    # the production file of a run with --allow-unknown-rules names a custom pass: a note, not a warning
    f = tmp_path / "custom.cfg"
    f.write_text('{"Switch": {"GraphFusion": {"MyCustomAddFusionPass": "off", "LayerNormFusionpass": "off"}}}')
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json")
    assert rc == 1 and {p["code"] for p in json.loads(out)["problems"]} == {"unknown-rule", "case-mismatch"}
    rc, out, _ = run(capsys, "cfg", "check", str(f), "--json", "--allow-unknown-rules")
    problems = {p["rule"]: p for p in json.loads(out)["problems"]}
    assert rc == 1   # a case mismatch is still a warning: that one is a typo of a real pass
    assert problems["MyCustomAddFusionPass"]["severity"] == "info"
    assert problems["MyCustomAddFusionPass"]["message"].endswith("is not in the catalog (allowed: --allow-unknown-rules)")
    f.write_text('{"Switch": {"GraphFusion": {"MyCustomAddFusionPass": "off"}}}')
    assert run(capsys, "cfg", "check", str(f), "--allow-unknown-rules")[0] == 0


def test_paths_that_look_like_console_markup_are_printed_as_they_are(capsys, tmp_path):
    """check, effective and diff name the file given, "[/a]" and "[prod]" included (no internal error, no part of
    the name eaten as a style tag)."""
    d = tmp_path / "exp[/a]"
    d.mkdir(parents=True)
    a, b = d / "fusion_switch[prod].cfg", d / "b.cfg"
    a.write_text('{"Switch":{"GraphFusion":{"LayerNormFusionPas":"off"}}}')
    b.write_text('{"Switch":{"GraphFusion":{"LayerNormFusionPass":"off"}}}')
    rc, out, _ = run(capsys, "cfg", "check", str(a))
    assert rc == 1 and f"{a}:1:27: warning: " in out and f"{a}: problems found" in out
    rc, out, _ = run(capsys, "cfg", "effective", str(a))
    assert rc == 0 and str(a) in "".join(out.split()) and "LayerNormFusionPas" in out   # the title, wrapped
    rc, out, _ = run(capsys, "cfg", "diff", str(a), str(a))
    assert rc == 0 and f"{a} and {a} switch the same rules." in " ".join(out.split())
    rc, out, _ = run(capsys, "cfg", "diff", str(a), str(b))
    assert rc == 1 and f"A: {a}" in out and f"B: {b}" in out


def test_effective_of_a_rule_the_catalog_does_not_know_says_so(capsys, tmp_path):
    """cfg effective --rule with a misspelt name: 'on' alone would read as the state of the rule meant (which
    the file turns off); the row says the name is unknown and what was probably meant."""
    f = tmp_path / "ln.cfg"
    f.write_text('{"Switch":{"GraphFusion":{"LayerNormFusionPass":"off"}}}')
    rc, out, _ = run(capsys, "cfg", "effective", str(f), "--rule", "LayerNormFusionpass", "--json")
    [row] = json.loads(out)["rules"]
    assert rc == 0 and row["effective"] == "on"
    assert row["notes"] == ["'LayerNormFusionpass' is not in the catalog; did you mean 'LayerNormFusionPass', "
                            "'LayerNormV4FusionPass', 'AddLayerNormFusionPass'?"]


def test_effective_shows_the_entry_a_byte_order_mark_turns_into_nothing(tmp_path, capsys):
    """Old format saved 'UTF-8 with BOM': CANN keeps the mark in the first pass name, so that entry does nothing.
    `effective` lists the rule with that reason (it dropped it silently, while `check` warned); an ALL entry so
    spoilt is said on stderr."""
    bl = tmp_path / "bl.cfg"
    bl.write_bytes(b"\xef\xbb\xbfLayerNormFusionPass:off\nGeluFusionPass:off\n")
    rc, out, _ = run(capsys, "cfg", "effective", str(bl), "--json")
    rows = {r["rule"]: r for r in json.loads(out)["rules"]}
    assert rc == 0 and set(rows) == {"LayerNormFusionPass", "GeluFusionPass"}
    assert rows["LayerNormFusionPass"]["effective"] == "on"
    assert any("byte-order mark" in n and "this entry does nothing" in n for n in rows["LayerNormFusionPass"]["notes"])
    bom_all = tmp_path / "all.cfg"
    bom_all.write_bytes(b"\xef\xbb\xbfALL:off\nGeluFusionPass:on\n")
    rc, out, err = run(capsys, "cfg", "effective", str(bom_all))
    assert rc == 0 and f"warning: {bom_all}: ALL: line 1: a UTF-8 byte-order mark starts the file" in err
    # a first name no pass can have: shown like the same file without the mark, not an error naming no file
    odd = tmp_path / "odd.cfg"
    odd.write_bytes(b"\xef\xbb\xbfFoo Bar:off\nGeluFusionPass:off\n")
    rc, out, err = run(capsys, "cfg", "effective", str(odd))
    assert rc == 0 and "GeluFusionPass" in out and "invalid rule name" not in err


def test_diff_marks_names_the_catalog_lacks(tmp_path, capsys):
    """A misspelt name is off only if CANN has a pass of exactly that name: the diff says so, as `effective`
    does ('off?'), and the JSON carries in_catalog."""
    a, b = tmp_path / "a.cfg", tmp_path / "b.cfg"
    a.write_text("GeluFusionPass:off\n", encoding="utf-8")
    b.write_text('{"Switch":{"GraphFusion":{"LayerNormFusionpass":"off","GeluFusionPass":"off"}}}', encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "diff", str(a), str(b), "--json")
    assert rc == 1 and [(c["rule"], c["in_catalog"]) for c in json.loads(out)["changes"]] == \
        [("LayerNormFusionpass", False)]
    rc, out, _ = run(capsys, "cfg", "diff", str(a), str(b))
    text = " ".join(out.split())
    assert "LayerNormFusionpass │ GraphFusion │ on │ off?" in text
    assert "1 rules change state (1 of them not in the catalog: a custom pass, or a misspelt name" in text
    # a name the catalog cannot place, in both sections: two rows, one rule
    b.write_text('{"Switch":{"GraphFusion":{"MyPass":"off"},"UBFusion":{"MyPass":"off"}}}', encoding="utf-8")
    a.write_text("{}", encoding="utf-8")
    rc, out, _ = run(capsys, "cfg", "diff", str(a), str(b))
    text = " ".join(out.split())
    assert rc == 1 and "MyPass │ GraphFusion" in text and "MyPass │ UBFusion" in text
    assert "1 rules change state in 2 rows (per section for a name the catalog cannot place) (1 of them" in text


def test_json_of_effective_and_diff_says_when_cann_rejects_the_file(tmp_path, capsys):
    """A script reading --json must learn that CANN would not apply the states shown (a trailing comma fails
    FE's JSON parse, then its old-format fallback fails on the '{' line)."""
    trail, nothing = tmp_path / "trail.cfg", tmp_path / "nothing.cfg"
    trail.write_text('{"Switch":{"GraphFusion":{"LayerNormFusionPass":"off",}}}')
    nothing.write_text('{"Switch":{}}')
    rc, out, _ = run(capsys, "cfg", "effective", str(trail), "--json")
    assert rc == 0 and json.loads(out)["cann_rejects"] == ["1:54: trailing comma"]
    rc, out, _ = run(capsys, "cfg", "diff", str(trail), str(nothing), "--json")
    assert json.loads(out)["cann_rejects"] == {"a": ["1:54: trailing comma"], "b": []}
    rc, out, _ = run(capsys, "cfg", "effective", str(nothing), "--json")
    assert json.loads(out)["cann_rejects"] == []


def test_diff_in_a_pipe_keeps_every_rule_name_whole_on_its_row(tmp_path, capsys, monkeypatch):
    """`cfg diff | grep NAME` finds the rule with its states, however long the name and with an 'off?' mark."""
    monkeypatch.setenv("COLUMNS", "80")
    a, b = tmp_path / "a.cfg", tmp_path / "b.cfg"
    a.write_text('{"Switch":{"GraphFusion":{}}}')
    b.write_text('{"Switch":{"GraphFusion":{"ALL":"off","MyCustomPass":"off"}}}')
    rc, out, _ = run(capsys, "cfg", "diff", str(a), str(b), "--json")
    changes = json.loads(out)["changes"]
    rc, out, _ = run(capsys, "cfg", "diff", str(a), str(b))
    rows = {ln.split("│")[0].strip(): [c.strip() for c in ln.split("│")[1:]] for ln in out.splitlines() if "│" in ln}
    assert rc == 1 and rows == {c["rule"]: [c["kind"], c["a"], c["b"] + "?" * (not c["in_catalog"])]
                                for c in changes}
    assert rows["BatchMultiClassNonMaxSuppressionFusionPass4VectorCore"] == ["GraphFusion", "on", "off"]
    assert rows["MyCustomPass"] == ["GraphFusion", "on", "off?"]


def test_diff_compares_a_rule_of_unknown_kind_per_section(tmp_path, capsys):
    """A real pass has one kind: off in GraphFusion in one file and in UBFusion in the other cannot both work."""
    a, b = tmp_path / "a.cfg", tmp_path / "b.cfg"
    a.write_text('{"Switch":{"GraphFusion":{"SquareSumV1":"off"}}}')
    b.write_text('{"Switch":{"UBFusion":{"SquareSumV1":"off"}}}')
    rc, out, _ = run(capsys, "cfg", "diff", str(a), str(b), "--json")
    changes = json.loads(out)["changes"]
    assert rc == 1 and sorted((c["kind"], c["a"], c["b"]) for c in changes) == [
        ("GraphFusion", "off", "on"), ("UBFusion", "on", "off")]
    rc, _, _ = run(capsys, "cfg", "diff", str(a), str(a))
    assert rc == 0


def test_cfg_off_with_kind_warns_of_a_name_that_only_nearly_spells_a_rule(capsys):
    rc, out, err = run(capsys, "cfg", "off", "layernormfusionpass", "--kind", "graph", "--json")
    assert rc == 0 and any("case-sensitive" in w and "LayerNormFusionPass" in w for w in json.loads(out)["warnings"])
    rc, out, err = run(capsys, "cfg", "off", "In-placeAddRmsNormFusionPass", "--kind", "graph")
    assert rc == 0 and "spelling of 'InplaceAddRmsNormFusionPass'" in err
    rc, out, err = run(capsys, "cfg", "off", "MyCustomFusionPass", "--kind", "graph")
    assert rc == 0 and "warning" not in err      # a custom pass: no guesses
    rc, out, err = run(capsys, "cfg", "off", "ALL", "--kind", "graph")   # the key itself: nothing to warn of
    assert rc == 0 and json.loads(out) == {"Switch": {"GraphFusion": {"ALL": "off"}}} and "warning" not in err
    rc, out, err = run(capsys, "cfg", "off", "All", "--kind", "graph")
    assert rc == 0 and "warning: no rule 'All'; the key for every pass of a section is 'ALL'" in err


def test_old_format_lines_and_files_cann_accepts(tmp_path, capsys):
    """FE's old-format reader skips empty lines and lines whose name is empty; a file of only newlines is not
    empty to FE (only a 0-byte file is), fails its JSON parse and loads as the old format."""
    skipped = tmp_path / "skipped.cfg"
    skipped.write_text("LayerNormFusionPass:off\n:off\n")
    rc, out, _ = run(capsys, "cfg", "check", str(skipped))
    assert rc == 1 and "':off' names no pass: CANN skips the line" in out and "error:" not in out
    assert parse_switch_file(skipped).graph == {"LayerNormFusionPass": "off"}
    blank = tmp_path / "blank.cfg"
    blank.write_text("\n\n")
    rc, out, _ = run(capsys, "cfg", "check", str(blank))
    assert rc == 1 and "switches nothing" in out and "0 errors" in out
    rc, out, _ = run(capsys, "cfg", "effective", str(blank), "--json")
    assert rc == 0 and json.loads(out)["rules"] == []
    for text, why in (("", "empty file"), ("  \n", "blank line of spaces"), (":maybe\n", "':maybe'")):
        bad = tmp_path / "bad.cfg"
        bad.write_text(text)
        rc, _, err = run(capsys, "cfg", "effective", str(bad))
        assert rc == 2 and why in err


def _table_rows(out: str) -> list[list[str]]:
    """Each row of a table: its first cell joined over the lines it is folded on, then its other cells."""
    rows: list[list[str]] = []
    for ln in out.splitlines():
        cells = [c.strip() for c in ln.split("│")]
        if len(cells) < 2:
            continue
        if cells[1]:
            rows.append(cells)
        else:   # a folded name (or a why column) going on
            rows[-1][0] += cells[0]
    return rows


@pytest.mark.parametrize("columns", [20, 30, 40, 45, 60])
def test_tables_in_a_narrow_terminal_keep_rule_names_and_states(tmp_path, capsys, monkeypatch, columns):
    """However narrow the terminal, rules list/fired and cfg effective/diff show each rule's name (folded) beside
    its whole kind and states; a table that cannot fit is as wide as it needs, and the terminal wraps its lines."""
    import re

    from fusebisect.rules.catalog import default_catalog

    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("NO_COLOR", "1")

    def run(capsys, *args):   # (the header is bold)
        rc, out, err = globals()["run"](capsys, *args)
        return rc, re.sub(r"\x1b\[[0-9;]*m", "", out), err

    found = default_catalog().search("LayerNormGrad", None)
    rc, out, _ = run(capsys, "rules", "list", "--search", "LayerNormGrad")
    assert rc == 0 and "┃ kind        ┃ default ┃ can disable" in out
    assert [row[:4] for row in _table_rows(out)] == [
        [r.name, r.kind, r.default, "yes" if r.can_disable else "no"] for r in found]

    none, two = tmp_path / "none.cfg", tmp_path / "two.cfg"
    none.write_text('{"Switch":{"GraphFusion":{}}}')
    two.write_text('{"Switch":{"GraphFusion":{"LayerNormFusionpass":"off","GeluFusionPass":"off"}}}')
    rc, out, _ = run(capsys, "cfg", "effective", str(two))
    rows = _table_rows(out)
    assert rc == 0 and "┃ effective ┃" in out
    assert [row[:2] for row in rows] == [["GeluFusionPass", "off"], ["LayerNormFusionpass", "off?"]]
    rc, out, _ = run(capsys, "cfg", "diff", str(none), str(two))
    assert rc == 1 and _table_rows(out) == [["GeluFusionPass", "GraphFusion", "on", "off"],
                                            ["LayerNormFusionpass", "GraphFusion", "on", "off?"]]

    result = tmp_path / "fusion_result.json"
    result.write_text(json.dumps({"graph_fusion": {LONGEST: {"effect_times": "12", "match_times": "345"}},
                                  "ub_fusion": {"TbeEltwiseFusionPass": {"effect_times": "1", "match_times": "1"}}}))
    rc, out, _ = run(capsys, "rules", "fired", str(result))
    assert rc == 0 and "┃ kind        ┃ effect ┃ match ┃ repo hits ┃ graphs" in out
    assert sorted(_table_rows(out)) == [[LONGEST, "GraphFusion", "12", "345", "0", "1"],
                                        ["TbeEltwiseFusionPass", "UBFusion", "1", "1", "0", "1"]]
