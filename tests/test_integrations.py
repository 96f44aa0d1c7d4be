"""Front-end hooks: each applies FUSEBISECT_SWITCH_FILE the way its framework expects, or does nothing."""

import os
from types import SimpleNamespace

import pytest

from fusebisect import integrations as hooks

ENV = {"FUSEBISECT_SWITCH_FILE": "trial/fusion_switch.abc.cfg"}
ABS = os.path.abspath("trial/fusion_switch.abc.cfg")


class _Param:
    def __init__(self):
        self.s = b""


class _ParamMap(dict):
    def __missing__(self, key):  # protobuf map semantics: reading a missing key creates it
        self[key] = _Param()
        return self[key]


class _CustomOp:
    def __init__(self, name=""):
        self.name = name
        self.parameter_map = _ParamMap()


class _Optimizers(list):
    def add(self):
        op = _CustomOp()
        self.append(op)
        return op


def _config_proto():
    return SimpleNamespace(graph_options=SimpleNamespace(rewrite_options=SimpleNamespace(
        custom_optimizers=_Optimizers())))


def test_unset_variable_is_a_no_op(monkeypatch):
    monkeypatch.delenv("FUSEBISECT_SWITCH_FILE", raising=False)
    op = _CustomOp("NpuOptimizer")
    assert hooks.apply_tf1_session_config(op) is op and "fusion_switch_file" not in op.parameter_map
    proto = _config_proto()
    hooks.apply_tf1_session_config(proto)
    assert len(proto.graph_options.rewrite_options.custom_optimizers) == 0
    assert hooks.npu_run_config_kwargs() == {}
    opts = SimpleNamespace()
    assert hooks.apply_tf2_global_options(opts) is opts and not hasattr(opts, "fusion_switch_file")
    cc = SimpleNamespace(fusion_config=SimpleNamespace())
    hooks.apply_torchair_config(cc)
    assert not hasattr(cc.fusion_config, "fusion_switch_file")
    assert hooks.mindspore_ascend_config({"precision_mode": "x"}) == {"precision_mode": "x"}
    assert hooks.atc_args() == []
    assert hooks.switch_file({"FUSEBISECT_SWITCH_FILE": ""}) is None


def test_tf1_session_config():
    op = _CustomOp("NpuOptimizer")
    hooks.apply_tf1_session_config(op, ENV)
    assert op.parameter_map["fusion_switch_file"].s == ABS.encode()
    proto = _config_proto()
    other = proto.graph_options.rewrite_options.custom_optimizers.add()
    other.name = "Other"
    hooks.apply_tf1_session_config(proto, ENV)
    opts = proto.graph_options.rewrite_options.custom_optimizers
    npu = [o for o in opts if o.name == "NpuOptimizer"]
    assert len(npu) == 1 and npu[0].parameter_map["fusion_switch_file"].s == ABS.encode()
    assert "fusion_switch_file" not in other.parameter_map
    hooks.apply_tf1_session_config(proto, ENV)  # finds the existing NpuOptimizer, adds no second one
    assert len([o for o in opts if o.name == "NpuOptimizer"]) == 1


def test_npu_run_config_tf2_torchair_atc(monkeypatch):
    monkeypatch.setenv("FUSEBISECT_SWITCH_FILE", ENV["FUSEBISECT_SWITCH_FILE"])
    assert hooks.npu_run_config_kwargs() == {"fusion_switch_file": ABS}
    opts = SimpleNamespace(fusion_switch_file=None)
    assert hooks.apply_tf2_global_options(opts).fusion_switch_file == ABS
    cc = SimpleNamespace(fusion_config=SimpleNamespace(fusion_switch_file=None))
    assert hooks.apply_torchair_config(cc).fusion_config.fusion_switch_file == ABS
    assert hooks.atc_args() == [f"--fusion_switch_file={ABS}"]


def test_mindspore_merges_without_mutating():
    given = {"precision_mode": "must_keep_origin_dtype", "ge_options": {"global": {"ge.exec.x": "1"},
                                                                         "session": {"s": "2"}}}
    out = hooks.mindspore_ascend_config(given, ENV)
    assert out["ge_options"]["global"] == {"ge.exec.x": "1", "ge.fusionSwitchFile": ABS}
    assert out["ge_options"]["session"] == {"s": "2"} and out["precision_mode"] == "must_keep_origin_dtype"
    assert "ge.fusionSwitchFile" not in given["ge_options"]["global"]
    assert hooks.mindspore_ascend_config(None, ENV) == {"ge_options": {"global": {"ge.fusionSwitchFile": ABS}}}
    with pytest.raises(TypeError):
        hooks.mindspore_ascend_config({"ge_options": "bad"}, ENV)


def test_docstring_has_a_snippet_per_front_end():
    doc = hooks.__doc__
    for needle in ("apply_tf1_session_config(", "npu_run_config_kwargs()", "apply_tf2_global_options(",
                   "apply_torchair_config(", "mindspore_ascend_config(", "atc_args()"):
        assert needle in doc
