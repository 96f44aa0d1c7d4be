"""Verdicts: exit status, metric (last/curve, tolerances, NaN, --expect), check exit codes, combination."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fusebisect.errors import UsageError
from fusebisect.runner.oracles import (BAD, GOOD, INVALID, PENDING, UNKNOWN, Judge, Measurement, RunAborted,
                                       Verdict, close, combine, compile_metric, exit_code_verdict, parse_check,
                                       parse_metric, rank_prior)
from fusebisect.runner.trial import ExecResult, TrialPaths, iter_text


def m(**kw) -> Measurement:
    kw.setdefault("exit_code", 0)
    kw.setdefault("seconds", 1.0)
    return Measurement(**kw)


@pytest.mark.parametrize("code,outcome", [(0, GOOD), (125, INVALID), (1, BAD), (127, BAD), (128, "abort"),
                                          (255, "abort"), (-9, "abort"), (None, "abort")])
def test_git_bisect_exit_codes(code, outcome):
    assert exit_code_verdict(code)[0] == outcome


def test_exit_status_oracle():
    j = Judge()
    assert j.exit_status_only and not j.needs_reference
    assert j.judge(m(exit_code=0), reference=None, is_reference=False).outcome == GOOD
    assert j.judge(m(exit_code=2), reference=None, is_reference=False).outcome == BAD
    assert j.judge(m(exit_code=125), reference=None, is_reference=False).outcome == INVALID
    assert j.judge(m(exit_code=-11), reference=None, is_reference=False).outcome == INVALID  # signal: not BAD
    assert j.judge(m(exit_code=None, timed_out=True), reference=None, is_reference=False).reason == "timeout"


@pytest.mark.parametrize("regex,msg", [("loss [0-9.]+", "exactly one capture group"),
                                       ("(a)(b)", "exactly one capture group"), ("(", "invalid regular")])
def test_metric_regex_usage_errors(regex, msg):
    with pytest.raises(UsageError, match=msg):
        compile_metric(regex)


def test_metric_mode_and_tolerance_usage_errors():
    with pytest.raises(UsageError, match="--metric-mode"):
        compile_metric("(x)", mode="first")
    with pytest.raises(UsageError, match="rtol"):
        compile_metric("(x)", rtol=-1)


def test_parse_metric_skips_non_numbers_and_reads_nan():
    spec = compile_metric(r"loss (\S+)")
    assert parse_metric("loss 1.5\nloss abc\nloss nan\n", spec)[0] == 1.5
    values = parse_metric("loss 1.5\nloss abc\nloss nan\n", spec)
    assert len(values) == 2 and math.isnan(values[1])


def test_a_loss_printed_as_nan_counts_even_where_the_group_cannot_match_it():
    """'loss ([0-9.]+)' cannot capture 'loss nan': the last match would be the last finite loss before the job
    diverged (a GOOD verdict for a NaN run). The NaN/Inf printed in the number's place is read as a value."""
    spec = compile_metric(r"step \d+ loss[:=] ?([0-9.]+) lr")
    log = "step 1 loss: 1.5 lr\nstep 2 loss=NaN lr\nstep 3 loss: -inf lr\nstep 4 loss info lr\nstep 5 loss: nanos lr\n"
    values = parse_metric(log, spec)
    assert values[0] == 1.5 and math.isnan(values[1]) and values[2] == -math.inf and len(values) == 3
    words = compile_metric(r"loss ([0-9.]+)")   # other words that start like nan/inf are not a loss
    assert parse_metric("loss 1.5\nloss nan-check: passed\nloss nan/inf check: ok\nloss infos\n", words) == [1.5]
    assert len(parse_metric("loss nan, lr 0.1\nloss (loss inf)\n", words)) == 2
    named = compile_metric(r"loss=(?P<v>[\d.]+) \(x\)")
    assert math.isnan(parse_metric("loss=1.0 (x)\nloss=nan (x)\n", named)[-1])
    capturing = compile_metric(r"loss ([0-9.]+|nan)")   # the group matches nan itself: read once
    assert len(parse_metric("loss 1.0\nloss nan\n", capturing)) == 2
    j = Judge(metric=compile_metric(r"loss ([0-9.]+)"))
    v = j.judge(m(metric=parse_metric("loss 1.0\nloss nan\n", j.metric)[-1]), reference=m(metric=1.0),
                is_reference=False)
    assert v.outcome == BAD and v.reason == "metric nan vs reference 1"
    # a reference whose loss diverged cannot be compared with: INVALID (a gate then says so), never GOOD
    v = j.judge(m(metric=float("nan")), reference=None, is_reference=True)
    assert v.outcome == INVALID and v.reason == "the reference's metric is nan: no run can be compared with it"


def test_log_pieces_end_at_line_ends_and_lose_no_match(tmp_path):
    log = tmp_path / "stdout.log"
    lines = [f"step {i} loss {i / 7:.6f} " + "x" * (i % 50) for i in range(3000)]
    log.write_bytes(("\n".join(lines) + "\nloss 9.5").encode() + b"\xff" * 3000 + b"\nloss 10.25")
    spec = compile_metric(r"^step \d+ loss ([0-9.]+)")
    whole = parse_metric(log.read_bytes().decode("utf-8", errors="replace"), spec)
    pieces = list(iter_text(log, block=1000))
    text_pieces = [p for p in pieces if "\ufffd" not in p][:-1]   # the 3000-byte binary line is cut
    assert len(text_pieces) > 50 and all(p.endswith("\n") for p in text_pieces)
    assert [v for p in pieces for v in parse_metric(p, spec)] == whole and len(whole) == 3000
    tail = compile_metric(r"loss ([0-9.]+)")
    assert [v for p in iter_text(log, block=1000) for v in parse_metric(p, tail)][-2:] == [9.5, 10.25]
    assert list(iter_text(tmp_path / "missing.log")) == []


@pytest.mark.parametrize("header", ["", "x", "a longer header line naming the rules turned off"])
def test_progress_bar_logs_without_newlines_lose_no_curve_point(tmp_path, header):
    """tqdm-style output: records separated by carriage returns only, far longer than one piece. Where a piece
    ends must not depend on earlier output, or the same losses would read differently in two runs."""
    log = tmp_path / "stdout.log"
    records = "".join(f"\rstep {i} loss {1 + (i % 8) / 8}" for i in range(3000))
    log.write_text(header + "\n" + records, encoding="utf-8")
    spec = compile_metric(r"loss ([0-9.]+)")
    want = [1 + (i % 8) / 8 for i in range(3000)]
    assert [v for p in iter_text(log, block=1000) for v in parse_metric(p, spec)] == want
    # one long line (30 blocks, no line end at all) is read whole
    log.write_text(header + " ".join(f"loss {1 + (i % 8) / 8}" for i in range(3000)), encoding="utf-8")
    assert [v for p in iter_text(log, block=1000) for v in parse_metric(p, spec)] == want


def test_metric_curve_is_read_from_the_whole_of_a_long_log(tmp_path):
    # A job that prints its losses first and then 70 MB of logs (CANN's plog on stdout does) keeps its curve.
    paths = TrialPaths(trial_dir=tmp_path, switch_file=None)
    with open(paths.stdout_path, "wb") as out:
        out.write(b"".join(b"loss %.3f\n" % (1 / (i + 1)) for i in range(5)))
        out.write((b"[INFO] GE(1234) graph_optimize.cc:42 fusion pass applied" + b"." * 965 + b"\n") * 70_000)
    judge = Judge(metric=compile_metric(r"loss ([0-9.]+)", mode="curve"))
    got = judge.measure(ExecResult(exit_code=0, seconds=1.0), paths, env={})
    assert list(got.curve) == [1.0, 0.5, 0.333, 0.25, 0.2] and got.metric == 0.2


def test_the_metric_is_read_from_stdout_or_else_stderr_never_both(tmp_path):
    # two streams interleave as their buffers flush, which differs from run to run: one stream keeps its order
    paths = TrialPaths(trial_dir=tmp_path, switch_file=None)
    paths.stderr_path.write_text("step 0 loss 5.0\nstep 1 loss 4.0\n")     # logging's step losses
    paths.stdout_path.write_text("final eval loss 1.3\n")                  # print's result
    judge = Judge(metric=compile_metric(r"loss ([0-9.]+)", mode="curve"))
    got = judge.measure(ExecResult(exit_code=0, seconds=1.0), paths, env={})
    assert (got.metric, list(got.curve)) == (1.3, [1.3])
    paths.stdout_path.write_text("epoch done\n")                           # nothing on stdout: stderr's
    got = judge.measure(ExecResult(exit_code=0, seconds=1.0), paths, env={})
    assert (got.metric, list(got.curve)) == (4.0, [5.0, 4.0])


def test_close():
    assert close(1.0, 1.0, 0, 0)
    assert close(1.009, 1.0, 1e-2, 0) and not close(1.02, 1.0, 1e-2, 0)
    assert close(0.05, 0.0, 0, 0.1)
    assert not close(float("nan"), 1.0, 1, 1) and close(float("nan"), float("nan"), 0, 0)
    assert not close(float("inf"), 1.0, 1, 1)


def test_metric_last_against_reference():
    j = Judge(metric=compile_metric(r"loss ([0-9.]+)", rtol=0.01))
    assert j.needs_reference
    ref = m(metric=2.0)
    assert j.judge(ref, reference=None, is_reference=True).outcome == GOOD
    assert j.judge(m(metric=2.01), reference=ref, is_reference=False).outcome == GOOD
    v = j.judge(m(metric=2.5), reference=ref, is_reference=False)
    assert v.outcome == BAD and "2.5 vs reference 2" in v.reason
    assert j.judge(m(metric=float("nan")), reference=ref, is_reference=False).outcome == BAD
    # before the reference exists the verdict waits
    v = j.judge(m(metric=2.5), reference=None, is_reference=False)
    assert (v.outcome, v.reason) == (UNKNOWN, PENDING)


def test_metric_missing_crash_and_timeout_are_invalid_never_bad():
    j = Judge(metric=compile_metric(r"loss ([0-9.]+)"))
    ref = m(metric=1.0)
    assert j.judge(m(metric=None), reference=ref, is_reference=False).reason == "metric not found in the output"
    v = j.judge(m(exit_code=1, metric=None), reference=ref, is_reference=False)
    assert (v.outcome, v.reason) == (INVALID, "crash (exit 1)")
    # a job that printed its loss and then exited 1 (it judges itself): said so, with what to do
    v = j.judge(m(exit_code=1, metric=9.0), reference=ref, is_reference=False)
    assert v.outcome == INVALID and v.reason.startswith("exit 1 after printing the metric (9): a job that fails is "
                                                        "no verdict under --metric; if it exits non-zero on bad "
                                                        "accuracy, drop --metric")
    assert j.judge(m(exit_code=-9, metric=9.0), reference=ref, is_reference=False).outcome == INVALID
    assert j.judge(m(timed_out=True, exit_code=None), reference=ref, is_reference=False).outcome == INVALID


def test_metric_expect():
    j = Judge(metric=compile_metric(r"acc ([0-9.]+)", expect=0.9, atol=0.01))
    assert not j.needs_reference
    assert j.judge(m(metric=0.905), reference=None, is_reference=False).outcome == GOOD
    assert j.judge(m(metric=0.5), reference=None, is_reference=False).outcome == BAD
    # with --expect, even the reference run is judged (a bad reference means "not fusion")
    assert j.judge(m(metric=0.5), reference=None, is_reference=True).outcome == BAD


def test_metric_curve_point_by_point():
    j = Judge(metric=compile_metric(r"loss ([0-9.]+)", mode="curve", rtol=0.01))
    ref = m(metric=0.5, curve=[1.0, 0.8, 0.5])
    # a run with more points than the reference is compared over the reference's length
    assert j.judge(m(metric=0.4, curve=[1.0, 0.8, 0.5, 0.4]), reference=ref, is_reference=False).outcome == GOOD
    v = j.judge(m(metric=0.5, curve=[1.0, 0.9, 0.5]), reference=ref, is_reference=False)
    assert v.outcome == BAD and "curve point 1" in v.reason
    # the last value agrees but the curve diverged in the middle: still bad (last mode would say good)
    last = Judge(metric=compile_metric(r"loss ([0-9.]+)", rtol=0.01))
    assert last.judge(m(metric=0.5, curve=[1.0, 0.9, 0.5]), reference=ref, is_reference=False).outcome == GOOD


def test_metric_curve_that_ends_early_is_bad():
    """A job that stops after 2 of 3 steps and exits 0 aborted its training: the matching prefix is not GOOD."""
    j = Judge(metric=compile_metric(r"loss ([0-9.]+)", mode="curve", rtol=0.01))
    ref = m(metric=0.5, curve=[1.0, 0.8, 0.5])
    v = j.judge(m(metric=0.8, curve=[1.0, 0.8]), reference=ref, is_reference=False)
    assert v.outcome == BAD and v.reason == "curve ends after 2 points, the reference has 3"


def test_check_codes_and_abort():
    j = Judge(check=["true"])
    assert not j.needs_reference
    assert j.judge(m(check_exit_code=0), reference=None, is_reference=False).outcome == GOOD
    assert j.judge(m(check_exit_code=125), reference=None, is_reference=False).outcome == INVALID
    assert j.judge(m(check_exit_code=3), reference=None, is_reference=False).outcome == BAD
    with pytest.raises(RunAborted, match="--check exited 200: outside exit codes 0-127"):
        j.judge(m(check_exit_code=200), reference=None, is_reference=False)
    with pytest.raises(RunAborted, match=r"--check was killed by signal 11 \(SIGSEGV\): outside exit codes 0-127"):
        j.judge(m(check_exit_code=-11), reference=None, is_reference=False)
    # the job crashed: the check is not consulted, the trial is skipped
    assert j.judge(m(exit_code=2, check_exit_code=None), reference=None, is_reference=False).outcome == INVALID
    # the job ran to its end and the check hit --timeout: said so, not read as the job's timeout
    v = j.judge(m(exit_code=0, timed_out=True), reference=None, is_reference=False)
    assert v.outcome == INVALID and v.reason == "--check timed out"
    assert j.judge(m(exit_code=None, timed_out=True), reference=None, is_reference=False).reason == "timeout"


def test_the_prior_puts_last_a_pass_whose_earlier_fusions_ran_clean():
    """The first divergent op X carries passes G (generic, listed first) and S. G also fused op A, which ran
    before X and matched the reference: S is the likelier culprit. Without such evidence, the pass fusing fewer
    ops comes first; with none either, the op's own order stays."""
    from types import SimpleNamespace as NS

    def row(op, passes, cosine=1.0):
        return NS(my_op=op, tensor=f"{op}:output:0", pass_names=passes, ub_pass_name=None, compared=True,
                  judged=True, cosine=cosine, max_abs_error=0.0, nonfinite=0, finite_cosine=None,
                  scalar_relative_error=None, metrics={})

    def report(rows, first):
        return NS(first_divergence={"op": first, "tensor": f"{first}:output:0"}, execution_order=lambda: rows)

    rows = [row("A", ["G"]), row("X", ["G", "S"], cosine=0.5), row("B", ["G"], cosine=0.2)]
    assert rank_prior(["G", "S"], report(rows, "X")) == ["S", "G"]
    rows = [row("X", ["G", "S"], cosine=0.5), row("B", ["G"], cosine=0.2)]   # G fused more ops, none clean
    assert rank_prior(["G", "S"], report(rows, "X")) == ["S", "G"]
    rows = [row("X", ["G", "S"], cosine=0.5)]
    assert rank_prior(["G", "S"], report(rows, "X")) == ["G", "S"]


def test_two_oracles_waiting_for_the_reference_are_one_pending_verdict():
    v = combine([Verdict(UNKNOWN, PENDING), Verdict(UNKNOWN, PENDING)])
    assert v.outcome == UNKNOWN and v.reason == PENDING


def test_combination_invalid_beats_bad_beats_good():
    assert combine([Verdict(GOOD), Verdict(BAD, "b")]).outcome == BAD
    assert combine([Verdict(BAD, "b"), Verdict(INVALID, "i")]).reason == "i"
    assert combine([Verdict(GOOD), Verdict(GOOD)]).outcome == GOOD
    j = Judge(metric=compile_metric(r"loss ([0-9.]+)"), check=["true"])
    ref = m(metric=1.0)
    assert j.judge(m(metric=1.0, check_exit_code=1), reference=ref, is_reference=False).outcome == BAD
    assert j.judge(m(metric=5.0, check_exit_code=125), reference=ref, is_reference=False).outcome == INVALID


def test_parse_check():
    assert parse_check("python check.py --thr '0.5 1'") == ["python", "check.py", "--thr", "0.5 1"]
    with pytest.raises(UsageError):
        parse_check("  ")
    with pytest.raises(UsageError):
        parse_check("a 'b")
    with pytest.raises(UsageError, match="--check needs a command, got the option '--jobs'"):
        parse_check("--jobs")


def test_a_reference_without_dumps_or_graph_is_invalid_itself_not_the_runs_compared_with_it(tmp_path):
    """--dumps compares every run with the all-off run's dumps and graph: a reference that wrote none cannot
    serve, and it is the run to retry (were it GOOD, the baseline would be blamed and rerun for nothing)."""
    import numpy as np

    from fusebisect.compare.dumpfile import write_dump
    from fusebisect.runner.oracles import DumpsSpec

    paths = TrialPaths(trial_dir=tmp_path / "ref", switch_file=None)
    judge = Judge(dumps=DumpsSpec(graphs=True))
    v = judge.judge(m(), reference=None, is_reference=True, paths=paths)
    assert v.outcome == INVALID and v.reason == (f"the all-candidates-off reference run wrote no dumps "
                                                 f"({paths.dump_dir}): nothing to compare runs with")
    write_dump(paths.dump_dir / "Add.a.1.0.1700000000000001", op_name="a", inputs=[], outputs=[np.ones(2)])
    v = judge.judge(m(), reference=None, is_reference=True, paths=paths)
    assert v.outcome == INVALID and v.reason == (f"dumps: no GE graph dump in {paths.graph_dir}: fused ops cannot "
                                                 "be mapped")
    # graph dumps not asked for (--no-graph-dump is refused with --dumps, but the spec allows it): dumps suffice
    assert Judge(dumps=DumpsSpec()).judge(m(), reference=None, is_reference=True, paths=paths).outcome == GOOD


def test_a_full_stop_after_the_number_is_not_part_of_it():
    """'loss 0.5.' (a sentence) read by the README's own 'loss ([0-9.]+)': 0.5, in every point of a curve, not a
    point dropped (which shifts the curve against the reference's)."""
    spec = compile_metric(r"loss ([0-9.]+)", mode="curve")
    assert parse_metric("loss 0.5\nepoch done, loss 0.4.\nloss 0.3\n", spec) == [0.5, 0.4, 0.3]
    assert parse_metric("version 1.2.3 loss 1.2.3", spec) == []      # not a number, full stop or not
    # a loss that diverged, printed as a sentence too: NaN/Inf, not the last finite loss
    assert [str(v) for v in parse_metric("loss 0.5.\nloss nan.\n", spec)] == ["0.5", "nan"]
    assert parse_metric("loss 0.4\nloss inf.\n", spec) == [0.4, float("inf")]
    assert parse_metric("loss nan.5 loss nan-check", spec) == []


def test_a_loss_printed_in_scientific_notation_is_read_whole():
    """Python prints a small loss as '1.5e-05': the README's 'loss ([0-9.]+)' stops at the 'e', and reading 1.5
    would make a converged run look a hundred thousand times worse than it is."""
    spec = compile_metric(r"loss ([0-9.]+)")
    assert parse_metric("loss 0.25\nloss 1.5e-05\nloss 2E+3\nloss 3.\n", spec) == [0.25, 1.5e-05, 2000.0, 3.0]
    # the pattern itself goes on after the number: what it matched is what it says
    assert parse_metric("loss 1.5e", compile_metric(r"loss ([0-9.]+)e")) == [1.5]
    assert parse_metric("loss 7 epochs", spec) == [7.0]


def _leaf_dumps(trial: Path, steps, *, op_data, device: int = 0) -> None:
    """CANN's layout {time}/{device}/{model}/{model_id}/{step}/ with one op per name in ``op_data``."""
    from fusebisect.compare.dumpfile import write_dump

    for step in steps:
        leaf = trial / "dump" / "20260101000000" / str(device) / "net" / "1" / str(step)
        for k, (op, data) in enumerate(op_data.items()):
            write_dump(leaf / f"Add.{op}.{k}.0.{1700000000000000 + 100 * step + k}", op_name=op, inputs=[],
                       outputs=[data])


def test_dumps_that_stop_steps_early_or_a_reference_file_cut_short_are_not_good(tmp_path):
    """--dumps compares the latest step both runs dumped: a run whose dumps stop before the reference's last
    step was compared on an earlier one only, and a reference file that cannot be read leaves its tensors
    uncompared in every run. GOOD would clear every rule left on (the fault may show only there): INVALID."""
    import numpy as np

    from fusebisect.runner.oracles import DumpsSpec

    data = {"a": np.arange(8, dtype=np.float32), "b": np.ones(8, np.float32)}
    ref, run = TrialPaths(tmp_path / "ref", None), TrialPaths(tmp_path / "run", None)
    _leaf_dumps(ref.trial_dir, (0, 10), op_data=data)
    _leaf_dumps(run.trial_dir, (0,), op_data=data)
    judge = Judge(dumps=DumpsSpec())
    v = judge.judge(m(), reference=m(), is_reference=False, paths=run, reference_paths=ref)
    assert v.outcome == INVALID and v.reason == ("dumps: the dumps of this run stop at step 0, the reference's go "
                                                 "on to step 10: only step 0 was compared (dumps cut short?)")
    _leaf_dumps(run.trial_dir, (10,), op_data=data)   # the same steps: compared, GOOD
    assert judge.judge(m(), reference=m(), is_reference=False, paths=run, reference_paths=ref).outcome == GOOD
    cut = next(ref.dump_dir.rglob("10/Add.b.*"))   # in the step compared
    cut.write_bytes(cut.read_bytes()[:-10])   # a full disk cut the reference's file short
    v = judge.judge(m(), reference=m(), is_reference=False, paths=run, reference_paths=ref)
    assert v.outcome == INVALID and "1 dump file(s) of the reference run could not be read" in v.reason, v.reason


def test_a_run_that_dumped_the_device_it_was_given_is_compared_with_the_reference(tmp_path):
    """Under --jobs each run has its own device: a job that writes that device id into its dump path dumped
    device 1 where the reference dumped device 0. One model each, the same: compared with each other (as
    compare pairs two single leaves), not INVALID for having nothing in common."""
    import numpy as np

    from fusebisect.runner.oracles import DumpsSpec

    data = {"a": np.arange(8, dtype=np.float32), "b": np.ones(8, np.float32)}
    ref, good, bad = (TrialPaths(tmp_path / name, None) for name in ("ref", "good", "bad"))
    _leaf_dumps(ref.trial_dir, (0,), op_data=data, device=0)
    _leaf_dumps(good.trial_dir, (0,), op_data=data, device=1)
    _leaf_dumps(bad.trial_dir, (0,), op_data={**data, "b": -data["b"]}, device=1)
    judge = Judge(dumps=DumpsSpec())
    v = judge.judge(m(), reference=m(), is_reference=False, paths=good, reference_paths=ref)
    assert v.outcome == GOOD, v.reason
    assert any("this run dumped device 1, the reference run device 0" in n for n in v.dumps["notes"])
    assert judge.judge(m(), reference=m(), is_reference=False, paths=bad, reference_paths=ref).outcome == BAD
    # another model on another device is still nothing in common
    other = TrialPaths(tmp_path / "other", None)
    _leaf_dumps(other.trial_dir, (0,), op_data=data, device=1)
    (other.dump_dir / "20260101000000" / "1" / "net").rename(other.dump_dir / "20260101000000" / "1" / "eval")
    v = judge.judge(m(), reference=m(), is_reference=False, paths=other, reference_paths=ref)
    assert v.outcome == INVALID and "nothing in common" in v.reason, v.reason
