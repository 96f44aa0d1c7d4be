"""--rules FILE|NAME,...: the candidate list a user gives."""

import pytest

from fusebisect.errors import UsageError
from fusebisect.runner.session import load_rules_spec


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


def test_bad_names_and_empty_lists_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="--rules"):
        load_rules_spec("Gelu$Pass")
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing yet\n")
    with pytest.raises(UsageError, match="no rule names"):
        load_rules_spec(str(empty))
