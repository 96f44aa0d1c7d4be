"""--rules FILE|NAME,...: the candidate list a user gives."""

import pytest

from fusebisect.errors import UsageError
from fusebisect.runner.validation import load_rules_spec


def test_names_on_the_command_line_and_in_a_text_file(tmp_path):
    assert load_rules_spec("GeluFusionPass, LayerNormFusionPass,GeluFusionPass") == \
        ["GeluFusionPass", "LayerNormFusionPass"]
    listing = tmp_path / "rules.txt"
    listing.write_text("# suspects\nGeluFusionPass\nMulAddFusionPass, SoftmaxFusionPass  # from the dump\n")
    assert load_rules_spec(str(listing)) == ["GeluFusionPass", "MulAddFusionPass", "SoftmaxFusionPass"]


@pytest.mark.parametrize("prefix", ["", "\ufeff", "// rules we suspect\n", "\ufeff# suspects\n\n"])
def test_a_switch_file_gives_the_rules_it_names(tmp_path, prefix):
    cfg = tmp_path / "fusion_switch.cfg"
    cfg.write_text(prefix + '{"Switch": {"GraphFusion": {"GeluFusionPass": "off"},'
                            ' "UBFusion": {"TbeEltwiseFusionPass": "off"}}}\n', encoding="utf-8")
    assert sorted(load_rules_spec(str(cfg))) == ["GeluFusionPass", "TbeEltwiseFusionPass"]


def test_an_old_format_switch_file_gives_the_rules_it_names(tmp_path):
    cfg = tmp_path / "fusion_switch.cfg"
    cfg.write_text("GeluFusionPass:off\nTbeEltwiseFusionPass : off\nMulAddFusionPass:on\n", encoding="utf-8")
    assert sorted(load_rules_spec(str(cfg))) == ["GeluFusionPass", "MulAddFusionPass", "TbeEltwiseFusionPass"]
    cfg.write_bytes(b"# the passes we suspect\r\nGeluFusionPass:OFF\r\n// and this one\r\nMulAddFusionPass:off\r\n")
    assert load_rules_spec(str(cfg)) == ["GeluFusionPass", "MulAddFusionPass"]


def test_bad_names_and_empty_lists_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="--rules"):
        load_rules_spec("Gelu$Pass")
    # a switch file CANN takes, holding a key that is no pass name: no rule to search, said rather than dropped
    odd = tmp_path / "odd.cfg"
    odd.write_text('{"Switch": {"GraphFusion": {"GeluFusionPass": "off", "My Pass": "off"}}}')
    with pytest.raises(UsageError, match="'My Pass' is no pass name"):
        load_rules_spec(str(odd))
    # names under a key CANN does not read (' GraphFusion') are refused, not dropped from the candidates
    odd.write_text('{"Switch": {" GraphFusion": {"LayerNormFusionPass": "off"}, "UBFusion": {"TbeEltwiseFusionPass": '
                   '"off"}}}')
    with pytest.raises(UsageError, match="LayerNormFusionPass is named under Switch.' GraphFusion', which CANN"):
        load_rules_spec(str(odd))
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing yet\n")
    with pytest.raises(UsageError, match="no rule names"):
        load_rules_spec(str(empty))


def test_a_malformed_name_in_the_jobs_statistics_is_excluded_not_written(tmp_path, capsys):
    import json
    import sys

    from fusebisect.cli.app import main

    job = tmp_path / "job.py"
    job.write_text(
        "import json, os, sys\n"
        "off = json.load(open(os.environ['FUSEBISECT_SWITCH_FILE'])).get('Switch', {}).get('GraphFusion', {})\n"
        "stats = {'GeluFusionPass': {'match_times': '1', 'effect_times': '0' if 'GeluFusionPass' in off else '1'},\n"
        "         'bad\"name;rm': {'match_times': '1', 'effect_times': '1'}}\n"
        "json.dump({'session_and_graph_id_0_0': {'graph_fusion': stats}},\n"
        "          open(os.path.join(os.environ['ASCEND_WORK_PATH'], 'fusion_result.json'), 'w'))\n"
        "sys.exit(1 if 'GeluFusionPass' not in off else 0)\n")
    rc = main(["--quiet", "run", "--workdir", str(tmp_path / "w"), "--json", "--", sys.executable, str(job)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and [c["rules"] for c in out["culprits"]] == [["GeluFusionPass"]]
    assert {"rule": 'bad"name;rm', "reason": "not a valid pass name (characters CANN never uses)"} in out["excluded"]
    for cfg in (tmp_path / "w" / "switch").iterdir():
        assert "bad" not in cfg.read_text()


def test_a_value_that_looks_like_a_path_is_read_as_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "rules.txt").write_text("GeluFusionPass\n")
    (tmp_path / "rules.txt").write_text("SoftmaxFusionPass\n")
    assert load_rules_spec("sub/rules.txt") == ["GeluFusionPass"]   # a path separator: a file
    assert load_rules_spec("rules.txt") == ["SoftmaxFusionPass"]    # an existing file, even without one
    with pytest.raises(UsageError, match=r"^--rules: sub/other\.txt: no such file$"):
        load_rules_spec("sub/other.txt")
    with pytest.raises(UsageError, match="empty value"):
        load_rules_spec(" ")


def test_a_rule_name_stays_a_name_when_a_file_or_directory_of_that_name_is_here(tmp_path, monkeypatch):
    """--rules GeluFusionPass with a directory (or a file) called GeluFusionPass in the working directory: the
    rule, not the file; a file that is no rule's name is still read without a path separator."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "GeluFusionPass").mkdir()
    assert load_rules_spec("GeluFusionPass") == ["GeluFusionPass"]
    (tmp_path / "GeluFusionPass").rmdir()
    (tmp_path / "GeluFusionPass").write_text("SoftmaxFusionPass\n")
    assert load_rules_spec("GeluFusionPass") == ["GeluFusionPass"]
    assert load_rules_spec("./GeluFusionPass") == ["SoftmaxFusionPass"]
    (tmp_path / "suspects").write_text("SoftmaxFusionPass\n")
    assert load_rules_spec("suspects") == ["SoftmaxFusionPass"]
