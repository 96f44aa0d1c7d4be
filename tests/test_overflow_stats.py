"""Tensor statistics and the one-line diagnosis of an overflowing op."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from fusebisect.compare.overflow import TensorStats, diagnose, tensor_stats


def test_float16_counts_nan_inf_and_saturation():
    a = np.array([1.0, 65504.0, -65504.0, np.inf, -np.inf, np.nan, 2.0, 60000.0], dtype=np.float16)
    st = tensor_stats(a.reshape(2, 4), kind="output", index=0)
    assert (st.shape, st.dtype, st.count) == ((2, 4), "float16", 8)
    assert (st.nan, st.pos_inf, st.neg_inf, st.saturated) == (1, 1, 1, 2)
    assert st.max == np.inf and st.min == -np.inf
    # mean over finite values: 1 + 65504 - 65504 + 2 + 60000 (as float16) over 5
    assert st.mean == np.mean(np.array([1, 65504, -65504, 2, np.float16(60000)], dtype=np.float64))
    assert st.abnormal and st.float16_overflow
    assert st.problem_text() == "1 NaN, 1 +Inf, 1 -Inf, 2 saturated (|x|>=65504)"


def test_float16_mean_does_not_overflow_in_float16():
    st = tensor_stats(np.full(100, 60000, dtype=np.float16), kind="input", index=1)
    assert st.mean == float(np.float16(60000)) and st.pos_inf == 0 and st.saturated == 0 and not st.abnormal


def test_float32_large_values_are_not_saturation():
    st = tensor_stats(np.array([1e6, -7e5, 3.0], dtype=np.float32), kind="output", index=0)
    assert st.saturated == 0 and not st.abnormal and st.max == 1e6 and st.min == -7e5


def test_bfloat16_and_ints_and_bool():
    bf = np.array([1.0, np.inf, np.nan], dtype=ml_dtypes.bfloat16)
    st = tensor_stats(bf, kind="input", index=0, dtype="bfloat16")
    assert (st.dtype, st.nan, st.pos_inf, st.saturated, st.min, st.max, st.mean) == ("bfloat16", 1, 1, 0, 1.0,
                                                                                      np.inf, 1.0)
    st = tensor_stats(np.array([3, -2, 8], dtype=np.int32), kind="input", index=1)
    assert (st.min, st.max, st.mean, st.abnormal) == (-2.0, 8.0, 3.0, False)
    st = tensor_stats(np.array([True, False, False, True]), kind="input", index=2)
    assert st.mean == 0.5


def test_all_nan_and_empty():
    st = tensor_stats(np.full(3, np.nan, dtype=np.float32), kind="output", index=0)
    assert st.nan == 3 and st.min is None and st.max is None and st.mean is None
    js = st.to_json()
    assert js["min"] is None and js["nan"] == 3 and js["abnormal"] is True
    st = tensor_stats(np.zeros((0, 4), dtype=np.float16), kind="output", index=0)
    assert st.count == 0 and st.min is None and not st.abnormal


def test_json_keeps_inf_flag():
    js = tensor_stats(np.array([np.inf, 1], dtype=np.float16), kind="output", index=0).to_json()
    assert js["max"] is None and js["max_is_inf"] is True and js["pos_inf"] == 1


def _st(kind, index, dtype="float16", **counts):
    return TensorStats(kind=kind, index=index, shape=(2,), dtype=dtype, count=2, **counts)


def test_diagnosis_inputs_abnormal_means_upstream():
    d = diagnose([_st("input", 0), _st("input", 1, nan=2)], [_st("output", 0, pos_inf=1)], op_type="Mul")
    assert d.startswith("Input already abnormal (input 1: 2 NaN)") and "upstream" in d
    assert "float32" not in d


def test_diagnosis_clean_inputs_fp16_output_saturates_keep_float32():
    d = diagnose([_st("input", 0)], [_st("output", 0, saturated=3)], op_type="FusedMulAdd")
    assert "keep FusedMulAdd in float32" in d and "allow_mix_precision" in d and "modify_mixlist" in d
    assert "keep_dtype" in d


def test_diagnosis_never_calls_an_input_it_could_not_decode_clean():
    unreadable = _st("input", 0, dtype="float8_e8m0")
    unreadable.error = "unsupported data type float8_e8m0 (36)"
    d = diagnose([unreadable, _st("input", 1)], [_st("output", 0, pos_inf=4)], op_type="Mul")
    assert "Inputs are clean" not in d and "keep Mul in float32" in d
    assert d.startswith("Input 0 could not be inspected (unsupported data type float8_e8m0 (36)), so a problem "
                        "starting upstream is not ruled out; and float16 output 0 overflows")
    d = diagnose([unreadable], [_st("output", 0)], op_type="Mul")
    assert "inputs or outputs" not in d and "input 0 could not be inspected" in d and "upstream" in d


def test_diagnosis_float32_output_inf_is_the_computation():
    d = diagnose([_st("input", 0, dtype="float32")], [_st("output", 0, dtype="float32", pos_inf=1)],
                 op_type="Exp")
    assert "computation of Exp overflowed" in d and "float32 (precision" not in d


def test_diagnosis_clean_tensors_means_intermediate_overflow():
    d = diagnose([_st("input", 0)], [_st("output", 0)], op_type="AvgPool")
    assert "intermediate step" in d


def test_diagnosis_fused_names_rules_and_suggests_cfg_off():
    d = diagnose([_st("input", 0)], [_st("output", 0, saturated=1)], op_type="Conv2D",
                 pass_names=["ConvBatchnormFusionPass", "TbeConvAddFusion", "ConvBatchnormFusionPass"])
    assert d.endswith("Fused by ConvBatchnormFusionPass, TbeConvAddFusion: test with "
                      "`fusebisect cfg off ConvBatchnormFusionPass TbeConvAddFusion`.")


def test_diagnosis_fused_without_graph_asks_for_it():
    d = diagnose([], [_st("output", 0)], op_name="conv1_fused", original_ops=["conv1", "bn1"])
    assert "originals conv1, bn1" in d and "--graph" in d
    # an op that is its own single original is not a fusion
    assert "--graph" not in diagnose([], [_st("output", 0)], op_name="relu1", original_ops=["relu1"])


def test_diagnosis_unmatched_and_atomic():
    d = diagnose([], [], matched=False, task_id=7, stream_id=2, unit="DHA Atomic Add")
    assert "task_id 7, stream_id 2" in d and "resolve AI Core overflows first" in d


def test_a_large_tensor_is_summarised_chunk_by_chunk_with_the_same_result(monkeypatch):
    # inspect dump and the overflow analysis summarise memory-mapped tensors of any size without copying them
    # whole: chunked, the summary is the one of the whole tensor
    import pytest

    from fusebisect.compare import tensorstats

    rng = np.random.default_rng(4)
    for a in (rng.standard_normal(1003).astype(np.float16), rng.integers(-9, 9, 1003).astype(np.int32),
              (rng.standard_normal(1003) + 1j).astype(np.complex64), rng.standard_normal(1003) > 0,
              rng.standard_normal(1003).astype(ml_dtypes.bfloat16)):
        if a.dtype.kind == "f":
            a[5], a[6], a[1000] = np.nan, np.inf, -np.inf
        whole = tensorstats.summarize(a, saturation=1.5)
        monkeypatch.setattr(tensorstats, "CHUNK", 100)
        chunked = tensorstats.summarize(a, saturation=1.5)
        monkeypatch.undo()
        assert chunked.mean == pytest.approx(whole.mean, rel=1e-12)
        assert chunked.__dict__ | {"mean": whole.mean} == whole.__dict__, a.dtype
        assert whole.saturated > 0 or a.dtype.kind == "b", a.dtype      # |x| >= 1.5 occurs in these draws
    nan_only = np.full(300, np.nan, np.float32)
    monkeypatch.setattr(tensorstats, "CHUNK", 100)
    assert tensorstats.summarize(nan_only).mean is None and tensorstats.summarize(nan_only).nan == 300


def test_diagnosis_leaves_out_the_passes_no_switch_file_turns_off():
    """ln_LayerNorm carries AReduceMeanFusionPass, which is forbidden-close: `cfg off` of it does nothing."""
    d = diagnose([_st("input", 0)], [_st("output", 0, saturated=1)], op_type="LayerNorm",
                 pass_names=["AReduceMeanFusionPass", "LayerNormFusionPass"], locked={"AReduceMeanFusionPass"})
    assert d.endswith("Fused by AReduceMeanFusionPass, LayerNormFusionPass: test with `fusebisect cfg off "
                      "LayerNormFusionPass` (AReduceMeanFusionPass cannot be switched off).")
    d = diagnose([_st("input", 0)], [_st("output", 0, saturated=1)], op_type="ReduceMean",
                 pass_names=["AReduceMeanFusionPass"], locked={"AReduceMeanFusionPass"})
    assert d.endswith("Fused by AReduceMeanFusionPass, which no switch file turns off: no fusion_switch.cfg removes "
                      "this fusion.")


def test_the_overflow_command_knows_which_passes_are_locked(tmp_path, capsys, monkeypatch):
    import subprocess
    import sys

    from fusebisect.cli.app import main

    subprocess.run([sys.executable, "-m", "fusebisect.sim", "train", "--steps", "1", "--overflow", "--dump-step",
                    "0", "--dump-path", str(tmp_path / "d")], check=True, capture_output=True, timeout=120,
                   cwd=tmp_path, env={**__import__("os").environ, "DUMP_GE_GRAPH": "2",
                                      "DUMP_GRAPH_PATH": str(tmp_path / "g")})
    import fusebisect.compare.overflow as overflow

    seen = {}
    real = overflow.analyse

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(overflow, "analyse", spy)
    main(["overflow", str(tmp_path / "d"), "--graph", str(tmp_path / "g"), "--json"])
    capsys.readouterr()
    assert "AReduceMeanFusionPass" in seen["locked"] and "LayerNormFusionPass" not in seen["locked"]


def test_diagnosis_never_calls_tensors_the_dump_left_out_clean():
    # dump_mode output (CANN's default) dumps no inputs, dump_mode input no outputs: neither side is then clean
    d = diagnose([], [_st("output", 0, pos_inf=1)], op_type="Mul")
    assert "Inputs are clean" not in d and "keep Mul in float32" in d
    assert d.startswith("Its dump holds no inputs (dump_mode output leaves them out), so a problem starting "
                        "upstream is not ruled out; and float16 output 0 overflows")
    d = diagnose([], [_st("output", 0)], op_type="Mul")
    assert "inputs or outputs" not in d and "its dump holds no inputs" in d and "upstream" in d
    d = diagnose([_st("input", 0), _st("input", 1)], [], op_type="Mul")
    assert "intermediate step (e.g." not in d and d.startswith(
        "No NaN/Inf/65504 in the inputs, but its dump holds no outputs (dump_mode input leaves them out): dump "
        "them too (dump_mode all)")
    d = diagnose([_st("input", 0, nan=1)], [], op_type="Mul")   # an abnormal input still says upstream
    assert d.startswith("Input already abnormal (input 0: 1 NaN)")
