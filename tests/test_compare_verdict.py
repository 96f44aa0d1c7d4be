"""What a comparison concludes: NaN/Inf in my tensor is a divergence, a comparison of nothing is not a clean
result, and the run's --dumps oracle never calls a trial GOOD on a comparison that compared nothing."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from fusebisect.cli.app import main
from fusebisect.compare.dumpfile import TensorSpec, write_dump
from fusebisect.compare.engine import compare_dumps
from fusebisect.runner.oracles import BAD, GOOD, INVALID, DumpsSpec, Judge, Measurement
from fusebisect.runner.trial import TrialPaths

TS = 1700000000000001
X = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)


def _dump(root: Path, op: str, out: np.ndarray, k: int = 0, same_input: bool = True) -> None:
    """One op's dump: input X (or ``out`` itself when not ``same_input``), output ``out``."""
    root.mkdir(parents=True, exist_ok=True)
    write_dump(root / f"Add.{op}.1.{TS + k}", op_name=op, inputs=[X if same_input else out], outputs=[out])


def _pair(tmp_path: Path, mine: dict[str, np.ndarray], golden: dict[str, np.ndarray]) -> tuple[Path, Path]:
    for k, (op, out) in enumerate(mine.items()):
        _dump(tmp_path / "my", op, out, k)
    for k, (op, out) in enumerate(golden.items()):
        _dump(tmp_path / "gold", op, out, k)
    return tmp_path / "my", tmp_path / "gold"


def _plain(console: str) -> str:
    """Console output as one line of words, without the table and panel borders."""
    return " ".join(console.translate({ord(c): " " for c in "│┃"}).split())


def _with(values: dict[tuple[int, int], float]) -> np.ndarray:
    out = X.copy()
    for at, v in values.items():
        out[at] = v
    return out


def test_nan_or_inf_in_my_tensor_is_the_first_divergence(tmp_path, capsys):
    # op a is clean, op b has one NaN, op c is all Inf: the cosine of b and c is NaN, which no threshold catches
    my, gold = _pair(tmp_path, {"a": X, "b": _with({(0, 0): np.nan}), "c": np.full_like(X, np.inf)},
                     {"a": X, "b": X, "c": X})
    report = compare_dumps(my, gold)
    by_tensor = {r.tensor: r for r in report.rows}
    assert by_tensor["a:output:0"].nonfinite == 0 and by_tensor["b:output:0"].nonfinite == 1
    assert by_tensor["c:output:0"].nonfinite == X.size
    assert report.first_divergence["tensor"] == "b:output:0" and report.first_divergence["nonfinite"] == 1
    rc = main(["compare", str(my), str(gold), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["first_divergence"]["op"] == "b" and out["compared"] == 6


def test_nan_the_golden_has_too_and_zero_tensors_are_not_divergences(tmp_path, capsys):
    same_nan = _with({(1, 2): np.nan})
    zeros = np.zeros_like(X)
    my, gold = _pair(tmp_path, {"a": same_nan, "z": zeros}, {"a": same_nan, "z": zeros})
    report = compare_dumps(my, gold)
    assert all(r.nonfinite == 0 for r in report.rows) and report.first_divergence is None
    assert main(["compare", str(my), str(gold)]) == 0
    assert "No divergence" in capsys.readouterr().out


def test_rows_that_could_not_be_compared_are_counted_and_a_compare_of_nothing_fails(tmp_path, capsys):
    for root, out in (("my", X), ("gold", X[:2])):
        _dump(tmp_path / root, "a", X)
        _dump(tmp_path / root, "s", out, k=1, same_input=False)
    my, gold = tmp_path / "my", tmp_path / "gold"
    rc = main(["compare", str(my), str(gold), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["rows"] == 3 and out["compared"] == 2 and out["not_compared"] == 1
    assert main(["compare", str(my), str(gold)]) == 0
    text = _plain(capsys.readouterr().out)
    assert "over the 2 tensors compared; 1 could not be compared" in text
    # the reason keeps msaccucmp's "[op]" prefix (not eaten as console markup) and its "(4, 8)" shapes
    assert "[s] The shape does not match ((4, 8) vs (2, 8))" in text
    only = tmp_path / "only"
    _dump(only / "my", "s", X, same_input=False)
    _dump(only / "gold", "s", X[:2], same_input=False)
    rc = main(["compare", str(only / "my"), str(only / "gold"), "--csv", str(only / "r.csv")])
    captured = capsys.readouterr()
    assert rc == 2 and "Nothing compared" in _plain(captured.out)
    assert "none of the 1 tensors could be compared (first reason: [s] The shape does not match" in captured.err
    assert (only / "r.csv").is_file()      # the CSV with the reasons is still written


def test_outputs_left_out_when_the_inputs_were_compared_get_a_note(tmp_path, capsys):
    # msaccucmp's CSV then has the input rows only: the outputs' shape mismatch must not go unsaid
    my, gold = _pair(tmp_path, {"p": X}, {"p": X[:2]})
    rc = main(["compare", str(my), str(gold), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["rows"] == 1
    assert out["notes"] == ["[p] The shape does not match ((4, 8) vs (2, 8)) for p:output:0. Those tensors are not "
                            "compared (and not in the CSV)."]


def _trial(root: Path, outs: dict[str, np.ndarray]) -> TrialPaths:
    for k, (op, out) in enumerate(outs.items()):
        _dump(root / "dump", op, out, k, same_input=False)
    return TrialPaths(root, None)


@pytest.mark.parametrize("outs, outcome, reason", [
    ({"a": X}, GOOD, ""),
    ({"a": _with({(2, 3): np.inf})}, BAD, "dumps diverge at a"),
    ({"a": X[:2]}, INVALID, "none of the 1 tensors could be compared with the reference run's"),
])
def test_dumps_oracle(tmp_path, outs, outcome, reason):
    judge = Judge(dumps=DumpsSpec())
    ok = Measurement(exit_code=0, seconds=1.0)
    reference = _trial(tmp_path / "reference", {"a": X})
    verdict = judge.judge(ok, reference=ok, is_reference=False, paths=_trial(tmp_path / "trial", outs),
                          reference_paths=reference)
    assert verdict.outcome == outcome and reason in verdict.reason


def test_two_runs_of_one_configuration_match_under_a_tight_max_abs_error(tmp_path):
    """A Cast GE inserted in both runs is compared with its namesake, not (as msaccucmp maps it) with the float32
    tensor before it, whose float16 rounding error would make a run BAD against its own configuration; a faulty
    fused op is still caught."""
    import os
    import subprocess
    import sys

    def sim(name, *args):
        root = tmp_path / name
        root.mkdir()
        env = {**os.environ, "DUMP_GE_GRAPH": "2", "DUMP_GRAPH_LEVEL": "3", "DUMP_GRAPH_PATH": "graph",
               "ASCEND_WORK_PATH": str(root)}
        subprocess.run([sys.executable, "-m", "fusebisect.sim", "train", "--dump-path", "dump", "--dump-step", "0",
                        *args], cwd=root, env=env, check=True, capture_output=True)
        return TrialPaths(root, None)

    judge = Judge(dumps=DumpsSpec(max_abs_error=1e-4, graphs=True))
    ok = Measurement(exit_code=0, seconds=1.0)
    reference, again = sim("reference"), sim("again")
    assert compare_dumps(again.dump_dir, reference.dump_dir, my_graph=again.graph_dir,
                         golden_graph=reference.graph_dir, max_abs_error=1e-4).first_divergence is not None
    verdict = judge.judge(ok, reference=ok, is_reference=False, paths=again, reference_paths=reference)
    assert verdict.outcome == GOOD, verdict.reason
    faulty = sim("faulty", "--faulty", "GeluFusionPass")
    verdict = judge.judge(ok, reference=ok, is_reference=False, paths=faulty, reference_paths=reference)
    assert verdict.outcome == BAD and "dumps diverge at" in verdict.reason


def test_a_fused_op_that_keeps_its_name_and_type_goes_through_its_original_ops(tmp_path):
    """MatMul + BiasAdd fused into a MatMul of the same name and type: compared one to one with the unfused
    MatMul (which lacks the bias) it would diverge in a job with no fault; its pass name sends it through its
    original ops."""
    import os
    import subprocess
    import sys

    from fusebisect.rules.catalog import default_catalog
    from fusebisect.rules.switchfile import all_off_config, write_switch_file

    off = write_switch_file(tmp_path / "off.cfg", all_off_config(default_catalog()))
    roots = {}
    for name, extra in (("fused", []), ("unfused", ["--fusion-switch-file", str(off)])):
        root = roots[name] = tmp_path / name
        root.mkdir()
        env = {**os.environ, "DUMP_GE_GRAPH": "2", "DUMP_GRAPH_LEVEL": "3", "DUMP_GRAPH_PATH": "graph",
               "ASCEND_WORK_PATH": str(root)}
        subprocess.run([sys.executable, "-m", "fusebisect.sim", "train", "--dump-path", "dump", "--dump-step", "0",
                        *extra], cwd=root, env=env, check=True, capture_output=True)
    for graph in (roots["unfused"] / "graph").rglob("*.txt"):   # the unfused MatMul typed like the fused one
        graph.write_text(graph.read_text().replace('type: "MatMul"\n', 'type: "MatMulV2"\n'))
    report = compare_dumps(roots["fused"] / "dump", roots["unfused"] / "dump", my_graph=roots["fused"] / "graph",
                           golden_graph=roots["unfused"] / "graph", same_ops_directly=True)
    assert report.first_divergence is None, report.first_divergence


def test_a_reference_without_dumps_is_named_as_the_missing_side(tmp_path):
    judge = Judge(dumps=DumpsSpec())
    ok = Measurement(exit_code=0, seconds=1.0)
    reference = TrialPaths(tmp_path / "reference", None)
    verdict = judge.judge(ok, reference=ok, is_reference=False, paths=_trial(tmp_path / "trial", {"a": X}),
                          reference_paths=reference)
    assert verdict.outcome == INVALID and "the all-candidates-off reference run wrote no dumps" in verdict.reason
    verdict = judge.judge(ok, reference=ok, is_reference=False, paths=TrialPaths(tmp_path / "none", None),
                          reference_paths=_trial(tmp_path / "ref2", {"a": X}))
    assert verdict.outcome == INVALID and verdict.reason == "no dumps in the trial dir"


def test_an_unreadable_dump_is_no_verdict_never_no_divergence(tmp_path, capsys):
    """A truncated dump file (a job killed while dumping, a full disk) hides its tensors: the ones that were
    read matching says nothing about them. compare exits 2 naming the file; the run's dumps oracle is INVALID."""
    my, gold = _pair(tmp_path, {"a": X, "b": -X}, {"a": X, "b": X})
    assert main(["compare", str(my), str(gold)]) == 1
    capsys.readouterr()
    # a divergence after a file that could not be read: the divergence may start earlier, and it says so
    gold_a = next(gold.glob("Add.a.*"))
    intact = gold_a.read_bytes()
    gold_a.write_bytes(intact[:-1])
    report = compare_dumps(my, gold)
    assert report.first_divergence["op"] == "b"
    assert any("the divergence may start before the first one reported" in n for n in report.notes)
    gold_a.write_bytes(intact)
    # a file of an op that ran after the divergence cannot move it: no such claim
    late, gold_late = _pair(tmp_path / "late", {"a": X, "b": -X, "c": X}, {"a": X, "b": X, "c": X})
    cut = next(late.glob("Add.c.*"))
    cut.write_bytes(cut.read_bytes()[:-1])
    report = compare_dumps(late, gold_late)
    assert report.first_divergence["op"] == "b"
    [note] = [n for n in report.notes if "could not be read" in n]
    assert note.startswith(f"1 dump file(s) could not be read (first: {cut}: size mismatch") and note.endswith(
        "their tensors were not compared; all of them are of ops that ran after the first divergence, which they do "
        "not move"), note
    # one before it and one after: the one before is named
    next(gold_late.glob("Add.a.*")).write_bytes(b"garbage!")
    [note] = [n for n in compare_dumps(late, gold_late).notes if "could not be read" in n]
    assert note.startswith("2 dump file(s) could not be read, 1 of them of ops that ran before the first divergence "
                           f"(first: {next(gold_late.glob('Add.a.*'))}") and note.endswith(
        "the divergence may start before the first one reported"), note
    victim = next(my.glob("Add.b.*"))
    victim.write_bytes(victim.read_bytes()[:-1])
    assert main(["compare", str(my), str(gold), "--json"]) == 2
    cap = capsys.readouterr()
    assert json.loads(cap.out)["first_divergence"] is None
    err = " ".join(cap.err.split())
    assert "error: 1 dump file(s) could not be read: 'no divergence' cannot be concluded (2 tensors compared); " \
        f"first: {victim}: size mismatch" in err
    assert compare_dumps(my, gold).unreadable[0]["side"] == "my"
    # the golden side too, and a golden .npy
    victim.write_bytes(next(gold.glob("Add.b.*")).read_bytes())
    next(gold.glob("Add.a.*")).write_bytes(b"garbage!")
    assert main(["compare", str(my), str(gold)]) == 2
    assert "could not be read" in capsys.readouterr().err
    assert compare_dumps(my, gold).unreadable[0]["side"] == "golden"
    npy = tmp_path / "npy"
    npy.mkdir()
    np.save(npy / f"a.0.{TS}.npy", X)
    (npy / f"b.0.{TS}.npy").write_bytes(b"\x93NUMPY broken")
    assert main(["compare", str(my), str(npy)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{npy / f'b.0.{TS}.npy'}" in err
    assert "golden .npy without --my-graph: ops are matched by name (msaccucmp requires -f here)" in err
    # the run's dumps oracle
    judge = Judge(dumps=DumpsSpec())
    ok = Measurement(exit_code=0, seconds=1.0)
    reference = _trial(tmp_path / "reference", {"a": X, "b": X})
    trial = _trial(tmp_path / "trial", {"a": X, "b": X})
    cut = next((tmp_path / "trial" / "dump").glob("Add.b.*"))
    cut.write_bytes(cut.read_bytes()[:-1])
    verdict = judge.judge(ok, reference=ok, is_reference=False, paths=trial, reference_paths=reference)
    assert verdict.outcome == INVALID and "1 dump file(s) could not be read" in verdict.reason
    # the reference's own unreadable file leaves those tensors uncompared in every run (the fault may be there):
    # no run is GOOD for the tensors that were read; one that diverges elsewhere is still BAD
    cut.write_bytes(next((tmp_path / "reference" / "dump").glob("Add.b.*")).read_bytes())
    ref_b = next((tmp_path / "reference" / "dump").glob("Add.b.*"))
    ref_b.write_bytes(ref_b.read_bytes()[:-1])
    verdict = judge.judge(ok, reference=ok, is_reference=False, paths=trial, reference_paths=reference)
    assert verdict.outcome == INVALID and "1 dump file(s) of the reference run could not be read" in verdict.reason
    bad = _trial(tmp_path / "bad", {"a": -X, "b": X})
    assert judge.judge(ok, reference=ok, is_reference=False, paths=bad, reference_paths=reference).outcome == BAD
    # a tensor whose dtype cannot be decoded is not compared; its file is not unreadable
    undecodable = tmp_path / "odd"
    write_dump(undecodable / "my" / f"Add.a.1.{TS}", op_name="a", inputs=[X],
               outputs=[X, TensorSpec(np.zeros(4, np.uint8), dtype=36)])
    (undecodable / "npy").mkdir()
    np.save(undecodable / "npy" / f"a.0.{TS}.npy", X)
    np.save(undecodable / "npy" / f"a.1.{TS}.npy", np.zeros(4, np.float32))
    report = compare_dumps(undecodable / "my", undecodable / "npy")
    assert not report.unreadable and sum(r.compared for r in report.rows) == 1
    assert main(["compare", str(undecodable / "my"), str(undecodable / "npy")]) == 0


def _fused_and_unfused(tmp_path: Path, encoding: str = "binary") -> None:
    """The simulator's fused (MatMulBiasAddFusionPass faulty) and all-off runs: tmp_path/{fused,unfused}/{dump,graph}."""
    import io

    from fusebisect.sim.options import resolve
    from fusebisect.sim.train import run

    all_off = tmp_path / "all-off.cfg"
    all_off.write_text('{"Switch":{"GraphFusion":{"ALL":"off"},"UBFusion":{"ALL":"off"}}}\n')
    for side, extra in (("fused", ["--faulty", "MatMulBiasAddFusionPass"]),
                        ("unfused", ["--fusion-switch-file", str(all_off)])):
        root = tmp_path / side
        env = {"ASCEND_WORK_PATH": str(root), "DUMP_GE_GRAPH": "2", "DUMP_GRAPH_PATH": str(root / "graph")}
        assert run(resolve(["--steps", "1", "--dump-step", "0", "--dump-path", str(root / "dump"),
                            "--dump-encoding", encoding, *extra], env),
                   stdout=io.StringIO(), stderr=io.StringIO()).exit_code == 0


def test_a_divergent_input_blames_the_op_that_produced_it(tmp_path, capsys):
    """Comparing only ln_LayerNorm (its producer fc1_MatMul, fused by the faulty rule, left out): the first divergence
    is ln_LayerNorm's input, and the rules to suspect are the producer's, not LayerNorm's."""
    _fused_and_unfused(tmp_path)
    args = ["compare", str(tmp_path / "fused" / "dump"), str(tmp_path / "unfused" / "dump"),
            "--my-graph", str(tmp_path / "fused" / "graph"), "--golden-graph", str(tmp_path / "unfused" / "graph")]
    assert main([*args, "--op", "ln_LayerNorm", "--json"]) == 1
    fd = json.loads(capsys.readouterr().out)["first_divergence"]
    assert fd["tensor"] == "ln_LayerNorm:input:0" and fd["input_of"] == "ln_LayerNorm"
    assert fd["producer"] == {"op": "fc1_MatMul", "output": 0, "compared": False}
    assert fd["pass_names"] == ["MatMulBiasAddFusionPass"] and fd["ground_truth"] == ["fc1_MatMul", "fc1_BiasAdd"]
    assert main([*args, "--op", "ln_LayerNorm"]) == 1
    assert "the divergence comes from fc1_MatMul (output 0, not compared)" in _plain(capsys.readouterr().out)
    # compared in full, the producer's own output is the first divergence
    assert main([*args, "--json"]) == 1
    fd = json.loads(capsys.readouterr().out)["first_divergence"]
    assert fd["tensor"] == "fc1_MatMul:output:0" and "producer" not in fd


def test_compare_json_lists_every_tensor(tmp_path, capsys):
    my, gold = _pair(tmp_path, {"a": X, "b": _with({(0, 1): np.inf})}, {"a": X, "b": X})
    assert main(["compare", str(my), str(gold), "--json"]) == 1
    tensors = json.loads(capsys.readouterr().out)["tensors"]
    assert [t["tensor"] for t in tensors] == ["a:input:0", "a:output:0", "b:input:0", "b:output:0"]
    assert tensors[1]["cosine"] == pytest.approx(1.0) and tensors[1]["nonfinite"] == 0 and tensors[1]["compared"]
    assert tensors[3]["cosine"] is None and tensors[3]["max_abs_error"] is None and tensors[3]["nonfinite"] == 1


@pytest.mark.parametrize("args, message", [
    (["--cosine", "2"], "--cosine 2: a cosine similarity threshold is between -1 and 1"),
    (["--max-abs-error", "-1"], "--max-abs-error -1: must be 0 or more"),
    (["--csv", "{tmp}"], "--csv {tmp}: is a directory; give a file path"),
])
def test_compare_refuses_bad_options_with_one_line(tmp_path, capsys, args, message):
    my, gold = _pair(tmp_path, {"a": X}, {"a": X})
    args = [a.format(tmp=tmp_path) for a in args]
    assert main(["compare", str(my), str(gold), *args]) == 2
    err = capsys.readouterr().err
    assert message.format(tmp=tmp_path) in err and "Traceback" not in err and ".tmp" not in err


def test_an_empty_golden_or_dump_directory_is_named_as_such(tmp_path, capsys):
    my, _ = _pair(tmp_path, {"a": X}, {})
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(my), str(tmp_path / "empty")]) == 2
    assert f"no op dump files and no golden .npy files found in {tmp_path / 'empty'}" in capsys.readouterr().err
    assert main(["dump", "convert", str(tmp_path / "empty"), "-o", str(tmp_path / "npy")]) == 2
    assert f"{tmp_path / 'empty'}: no op dump files found" in capsys.readouterr().err
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / f"Add.a.1.{TS}").write_bytes(b"junk")
    assert main(["dump", "convert", str(tmp_path / "junk"), "-o", str(tmp_path / "npy")]) == 2
    assert "nothing in the 1 dump file could be converted" in capsys.readouterr().err


def test_dumps_the_graph_does_not_know_are_noted(tmp_path, capsys):
    # the two graphs swapped: the fused dump's ops are looked up in the unfused graph
    _fused_and_unfused(tmp_path)
    fused, unfused = tmp_path / "fused", tmp_path / "unfused"
    main(["compare", str(fused / "dump"), str(unfused / "dump"), "--my-graph", str(unfused / "graph"),
          "--golden-graph", str(fused / "graph"), "--json"])
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert notes == ["4 of 12 op dumps have no op of that name in the graph given for my side (first: ln_LayerNorm); "
                     "they are not compared. Is the graph the one of this dump?",
                     "31 of 39 golden op dumps have no op of that name in the graph given for the golden side (first: "
                     "fc1_BiasAdd); the original ops of my fused ops are looked up in it. Is the graph the one of this "
                     "dump?"]
    assert main(["compare", str(fused / "dump"), str(unfused / "dump"), "--my-graph", str(fused / "graph"),
                 "--golden-graph", str(unfused / "graph"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["notes"] == []
    # a golden graph of another build (the fused one) moves the first divergence off the faulty rule's op: said.
    # The golden dumps it lacks are not used rather than left out of a verdict, so the exit code stands.
    assert main(["compare", str(fused / "dump"), str(unfused / "dump"), "--my-graph", str(fused / "graph"),
                 "--golden-graph", str(fused / "graph"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["notes"] == [
        "31 of 39 golden op dumps have no op of that name in the graph given for the golden side (first: fc1_BiasAdd); "
        "the original ops of my fused ops are looked up in it. Is the graph the one of this dump?"]


def test_the_msaccucmp_engine_gives_no_verdict_either_when_my_graph_lacks_dumped_ops(tmp_path, capsys, msaccucmp):
    """My graph from another build: the dumps it has no op for are not compared by msaccucmp either, so its
    engine says so and exits 2 as the native one does (it said "No divergence", exit 0)."""
    _fused_and_unfused(tmp_path, "nano")
    fused, unfused = tmp_path / "fused", tmp_path / "unfused"
    args = ["compare", str(fused / "dump"), str(fused / "dump"), "--my-graph", str(unfused / "graph"),
            "--golden-graph", str(unfused / "graph"), "--json"]
    notes = []
    for engine in ([], ["--engine", "msaccucmp", "--msaccucmp", str(msaccucmp.script)]):
        assert main([*args, *engine]) == 2
        cap = capsys.readouterr()
        assert "--my-graph" in cap.err and "'no divergence' cannot be concluded" in cap.err
        notes.append([n for n in json.loads(cap.out)["notes"] if "have no op of that name" in n])
    assert notes[0] == notes[1] and notes[0][0].startswith("4 of 12 op dumps have no op of that name in the graph "
                                                           "given for my side (first: ln_LayerNorm)")
    # --op an op the graph has: no longer a question of the graph
    assert main([*args, "--op", "ce_mean", "--engine", "msaccucmp", "--msaccucmp", str(msaccucmp.script)]) == 0


def test_the_same_nan_inf_on_both_sides_is_judged_on_the_other_elements(tmp_path, capsys):
    """A -inf attention mask on both sides makes msaccucmp's metrics NaN whatever the rest is: the verdict looks at
    the elements finite on both sides, and NaN/Inf on one side only (or of another kind) is a divergence."""
    masked = X.copy()
    masked[:, 3] = -np.inf
    negated = -masked
    negated[:, 3] = -np.inf      # every finite element negated, the mask kept
    lost_mask = X.copy()
    flipped = masked.copy()
    flipped[0, 3] = np.inf
    my, gold = _pair(tmp_path, {"same": masked, "neg": negated, "lost": lost_mask, "flip": flipped},
                     {"same": masked, "neg": masked, "lost": masked, "flip": masked})
    rows = {r.tensor: r for r in compare_dumps(my, gold).rows}
    same, neg = rows["same:output:0"], rows["neg:output:0"]
    assert same.nonfinite == 0 and same.finite_cosine == pytest.approx(1.0) and same.compared
    assert neg.nonfinite == 0 and neg.finite_cosine == pytest.approx(-1.0)
    assert rows["lost:output:0"].nonfinite == 4 and rows["flip:output:0"].nonfinite == 1
    assert main(["compare", str(my), str(gold), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["first_divergence"]["tensor"] == "neg:output:0"
    assert out["first_divergence"]["finite_cosine"] == pytest.approx(-1.0)
    by_tensor = {t["tensor"]: t for t in out["tensors"]}
    assert by_tensor["same:output:0"]["cosine"] is None and by_tensor["same:output:0"]["finite_cosine"] == 1.0
    masked_only = tmp_path / "masked"
    _dump(masked_only / "my", "same", masked)
    _dump(masked_only / "gold", "same", masked)
    assert main(["compare", str(masked_only / "my"), str(masked_only / "gold")]) == 0


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_a_tensor_without_an_element_finite_on_both_sides_has_no_verdict(tmp_path, capsys, value):
    """All NaN on both sides (msaccucmp writes an AccumulatedRelativeError of 0 for it) is as unjudgeable as all
    Inf (every cell NaN): no element is there to compare, so neither is "no divergence"."""
    full = np.full_like(X, value)
    for side in ("my", "gold"):
        _dump(tmp_path / side, "a", full, same_input=False)
    my, gold = tmp_path / "my", tmp_path / "gold"
    rows = compare_dumps(my, gold).rows
    assert len(rows) == 2 and all(not (r.compared and r.judged) and r.nonfinite == 0 for r in rows)
    assert main(["compare", str(my), str(gold)]) == 2
    captured = capsys.readouterr()
    assert "none of the 2 tensors could be" in captured.err and "No divergence" not in captured.out


def test_the_html_verdict_counts_tensors_not_judged_as_the_terminal_does(tmp_path, capsys):
    """An all-NaN tensor beside a clean one: the terminal says '1 not judged' in a yellow summary; the HTML
    called the comparison clean, '2 of 2 tensors compared'."""
    for side in ("my", "gold"):
        _dump(tmp_path / side, "a", X, same_input=False)
        _dump(tmp_path / side, "b", np.full_like(X, np.nan), k=1, same_input=False)
    html = tmp_path / "c.html"
    assert main(["compare", str(tmp_path / "my"), str(tmp_path / "gold"), "--html", str(html)]) == 0
    text = html.read_text()
    assert "every tensor has cosine" not in text
    assert "2 of 4 tensors compared and judged (2 compared but not judged)" in text


def test_the_divergence_panel_counts_tensors_not_judged(tmp_path, capsys):
    """A divergence elsewhere: the panel says how many tensors were compared but not judged, as the summary of
    a compare without divergence does."""
    nan = np.full_like(X, np.nan)
    for side, diverging in (("my", -X), ("gold", X)):
        _dump(tmp_path / side, "a", diverging, same_input=False)
        _dump(tmp_path / side, "b", nan, k=1, same_input=False)
    assert main(["compare", str(tmp_path / "my"), str(tmp_path / "gold")]) == 1
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "first divergent op: a" in out and "2 of 4 tensors compared but not judged (see the reason column)" in out


def test_an_all_zero_tensor_against_a_non_zero_one_diverges(tmp_path, capsys):
    """A fused op that wrote zeros has msaccucmp cosine NaN ("All the data is zero"): no threshold catches a NaN,
    so the verdict takes cosine 0 for it. Zeros on both sides are the same tensor (msaccucmp's cosine 1)."""
    zero = np.zeros_like(X)
    my, gold = _pair(tmp_path, {"ok": X, "wrote_zeros": zero, "both_zero": zero, "golden_zero": X},
                     {"ok": X, "wrote_zeros": X, "both_zero": zero, "golden_zero": zero})
    (tmp_path / "link").symlink_to(my)
    rows = {r.tensor: r for r in compare_dumps(tmp_path / "link", gold).rows}
    wrote = rows["wrote_zeros:output:0"]
    [dumped] = my.glob("*.wrote_zeros.*")
    assert math.isnan(wrote.cosine)   # msaccucmp's cell and reason, with the file's real path
    assert wrote.fail_reason == f"Cannot compare by Cosine Similarity. All the data is zero in {dumped.resolve()}."
    assert wrote.finite_cosine == 0.0 and wrote.note == "my tensor is all zero and the other is not: cosine 0"
    assert rows["golden_zero:output:0"].finite_cosine == 0.0 and "the golden is all zero" in rows["golden_zero:output:0"].note
    assert rows["both_zero:output:0"].cosine == 1.0 and rows["both_zero:output:0"].finite_cosine is None
    assert main(["compare", str(my), str(gold), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["first_divergence"]["tensor"] == "wrote_zeros:output:0"
    assert out["first_divergence"]["note"].endswith("is all zero and the other is not: cosine 0")
    # the table cuts the reason (the file's path) short, and says so: the cut path is no other file's
    assert main(["compare", str(my), str(gold)]) == 1
    out = capsys.readouterr().out
    assert "…" in out and "All the data is zero in" in _plain(out) and str(dumped.resolve()) not in _plain(out)


def _tensors_shown(console: str) -> set[str]:
    """The tensor column of the console table (the first line of each row: long cells fold)."""
    return {line.split("│")[3].strip() for line in console.splitlines() if line.count("│") > 3} - {""}


def test_top_ranks_by_the_cosine_the_verdict_uses(tmp_path, capsys):
    """--top N shows the N lowest-cosine rows: a tensor of zeros against a non-zero one ranks at cosine 0 and a
    masked tensor at the cosine of its other elements, as the verdict takes them (msaccucmp's NaN cosine ranked
    them last, so --top hid the worst tensors behind rows of cosine 1)."""
    masked = X.copy()
    masked[:, 3] = -np.inf
    negated = -masked
    negated[:, 3] = -np.inf
    noisy = X + np.float32(0.3) * np.random.default_rng(5).standard_normal(X.shape).astype(np.float32)
    my, gold = _pair(tmp_path, {"ok": X, "zeros": np.zeros_like(X), "neg": negated, "noisy": noisy},
                     {"ok": X, "zeros": X, "neg": masked, "noisy": X})
    assert main(["compare", str(my), str(gold), "--top", "2"]) == 1
    shown = _tensors_shown(capsys.readouterr().out)
    assert shown == {"neg:output:0", "zeros:output:0"}, shown
    assert main(["compare", str(my), str(gold), "--top", "3"]) == 1
    shown = _tensors_shown(capsys.readouterr().out)
    assert shown == {"neg:output:0", "zeros:output:0", "noisy:output:0"}, shown


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_nan_and_zero_outputs_of_bf16_and_fp8_dumps_diverge_too(tmp_path, capsys, dtype):
    """bfloat16 (the usual training dtype) and fp8 are numpy kind 'V' (ml_dtypes): their NaN and their all-zero
    tensors must be caught as in float16, with or without graphs."""
    import ml_dtypes
    t = getattr(ml_dtypes, dtype)
    base = (X / 4).astype(t)
    nan = base.copy()
    nan[0, 0] = np.nan
    my, gold = _pair(tmp_path, {"ok": base, "b": nan, "z": np.zeros_like(base)}, {"ok": base, "b": base, "z": base})
    rows = {r.tensor: r for r in compare_dumps(my, gold).rows}
    assert rows["ok:output:0"].nonfinite == 0 and rows["b:output:0"].nonfinite == 1
    assert rows["z:output:0"].finite_cosine == 0.0
    assert main(["compare", str(my), str(gold), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["first_divergence"]["tensor"] == "b:output:0" and out["first_divergence"]["nonfinite"] == 1


def test_identical_tensors_past_float32_range_are_not_a_divergence(tmp_path, capsys):
    """msaccucmp sums squares in float32, so identical values near 1e20 read cosine 0.000000; the CSV keeps its
    cell, the verdict recomputes in float64. Different huge tensors still diverge."""
    huge = (X * 1e20).astype(np.float32)
    other = (np.roll(X, 1) * 1e20).astype(np.float32)
    my, gold = _pair(tmp_path, {"same": huge, "diff": other}, {"same": huge, "diff": huge})
    rows = {r.tensor: r for r in compare_dumps(my, gold).rows}
    same = rows["same:output:0"]
    assert same.cosine == 0.0 and same.finite_cosine == pytest.approx(1.0) and same.max_abs_error == 0
    assert rows["diff:output:0"].finite_cosine < 0.99
    assert main(["compare", str(my), str(gold), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["first_divergence"]["tensor"] == "diff:output:0"
    only = tmp_path / "only"
    _dump(only / "my", "same", huge)
    _dump(only / "gold", "same", huge)
    assert main(["compare", str(only / "my"), str(only / "gold")]) == 0


def test_float64_values_whose_squares_overflow_are_judged_by_their_true_cosine(tmp_path, capsys):
    """float64 values past ~1e154 overflow the sums of squares (msaccucmp's cells read nan/inf): the verdict's
    float64 cosine is taken on scaled values, so opposite tensors diverge and no numpy warning reaches the user."""
    import warnings

    mine = np.array([1e160, 1.0, 2.0, 3.0])
    my, gold = _pair(tmp_path, {"opp": mine, "far": np.array([1e300, 2.0, 3.0]), "same": mine},
                     {"opp": -mine, "far": np.array([1.0, 2.0, 3.0]), "same": mine})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = {r.tensor: r for r in compare_dumps(my, gold).rows}
    assert rows["opp:output:0"].finite_cosine == pytest.approx(-1.0)
    assert rows["opp:output:0"].note == ("values past float32's range for msaccucmp's sums of squares: cosine in "
                                         "float64 -1.000000")   # not "same NaN/Inf as the golden": there is none
    assert rows["far:output:0"].finite_cosine == pytest.approx(1 / math.sqrt(14), abs=1e-6)
    assert rows["same:output:0"].finite_cosine in (None, pytest.approx(1.0))
    assert main(["compare", str(my), str(gold), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["first_divergence"]["tensor"] in ("far:output:0", "opp:output:0")
    cosines = {r["tensor"]: r["finite_cosine"] for r in out["tensors"]}
    assert cosines["opp:output:0"] == pytest.approx(-1.0) and cosines["far:output:0"] < 0.99


def test_complex_tensors_with_nan_are_judged_on_both_parts(tmp_path):
    """A NaN in complex tensors sends the verdict to the elements finite on both sides: conjugates differ there
    (their imaginary parts), and no numpy warning about discarded imaginary parts reaches the user."""
    import warnings

    z = (X[0] + 1j * X[1]).astype(np.complex64)
    z[0] = np.nan
    my, gold = _pair(tmp_path, {"conj": np.conj(z), "same": z}, {"conj": z, "same": z})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = {r.tensor: r for r in compare_dumps(my, gold).rows}
    assert rows["same:output:0"].finite_cosine == pytest.approx(1.0)
    assert rows["conj:output:0"].finite_cosine < 0.99


def test_zeros_against_a_small_golden_diverge_and_nan_rows_keep_their_sign(tmp_path):
    """A golden of 1e-10 values (norm 5e-10) is no zero tensor for msaccucmp (both norms must be at most
    2.2e-16 for cosine 1): zeros against it diverge; and the elements finite on both sides of a negated tensor
    read cosine -1 however small they are."""
    small = X * np.float32(1e-10)
    negated = -small
    negated[0, 0] = small[0, 0] = np.nan
    my, gold = _pair(tmp_path, {"z": np.zeros_like(X), "n": negated}, {"z": X * np.float32(1e-10), "n": small})
    rows = {r.tensor: r for r in compare_dumps(my, gold).rows}
    assert rows["z:output:0"].finite_cosine == 0.0
    assert rows["n:output:0"].finite_cosine == pytest.approx(-1.0)


@pytest.mark.parametrize("tiny, dtype", [(1e-170, np.float64), (1e-35, np.float32), (1e-24, np.float32),
                                         (1e-30, np.float64)])
def test_a_tensor_msaccucmp_counts_as_all_zero_diverges_from_a_non_zero_golden(tmp_path, capsys, tiny, dtype):
    """msaccucmp calls a tensor whose L2 norm is at most float64 eps "All the data is zero" (cosine NaN): the
    verdict takes its cosine as 0 against a non-zero golden, however tiny (not zero) its values are."""
    golden = np.array([1.0, 2.0, 3.0, 4.0], dtype)
    for side, data in (("my", golden * dtype(tiny)), ("gold", golden)):
        _dump(tmp_path / side, "relu1", data, same_input=False)
    rows = compare_dumps(tmp_path / "my", tmp_path / "gold").rows
    assert all(r.finite_cosine == 0.0 for r in rows), [(r.tensor, r.cosine, r.finite_cosine) for r in rows]
    assert main(["compare", str(tmp_path / "my"), str(tmp_path / "gold"), "--json"]) == 1
    first = json.loads(capsys.readouterr().out)["first_divergence"]
    assert first["note"] == "my tensor is all zero and the other is not: cosine 0", first


def test_a_msaccucmp_that_fails_in_gbk_is_a_one_line_error(tmp_path, capsys):
    """CANN's tools log Chinese text, in GBK on many hosts: its failure is reported, never an internal error."""
    fake = tmp_path / "msaccucmp.py"
    fake.write_text('import sys\nsys.stdout.buffer.write("\\u6bd4\\u5bf9\\u5931\\u8d25\\n".encode("gbk"))\n'
                    'sys.exit(1)\n')
    my, gold = _pair(tmp_path, {"a": X}, {"a": X})
    assert main(["compare", str(my), str(gold), "--engine", "msaccucmp", "--msaccucmp", str(fake)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fusebisect: error: msaccucmp failed (exit 1): ") and err.count("\n") == 1
    assert "\u6bd4\u5bf9\u5931\u8d25" in err   # decoded as GBK, readable


def test_an_integer_tensor_against_a_float_golden_is_kept_but_not_judged(tmp_path, capsys):
    """A quantized conv's int32 accumulator against the float golden conv output: msaccucmp writes the row (its
    cosine is meaningless before the per-channel dequant scale); the verdict goes on to the first float tensor
    that diverges."""
    acc = (X * 1000).astype(np.int32) * np.array([1, -3, 7, 2, 5, -1, 4, 9], dtype=np.int32)
    off = X + np.float32(0.3)
    my, gold = _pair(tmp_path, {"conv1": acc, "relu1": off}, {"conv1": X, "relu1": X})
    rows = {r.tensor: r for r in compare_dumps(my, gold).rows}
    conv = rows["conv1:output:0"]
    assert conv.compared and conv.cosine < 0.99 and not conv.judged
    assert conv.note == "int32 against a float32 golden: a quantized value before its scale, not judged"
    assert main(["compare", str(my), str(gold), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["first_divergence"]["tensor"] == "relu1:output:0"
    assert [t["judged"] for t in out["tensors"] if t["tensor"] == "conv1:output:0"] == [False]
    # with the float input row it is "no divergence, 1 not judged"; integer tensors alone: nothing was judged
    assert main(["compare", str(my), str(gold), "--op", "conv1"]) == 0
    assert "1 not judged (see the reason column)" in " ".join(capsys.readouterr().out.replace("│", " ").split())
    _dump(tmp_path / "int" / "my", "conv1", acc, same_input=False)
    _dump(tmp_path / "int" / "gold", "conv1", X, same_input=False)
    assert main(["compare", str(tmp_path / "int" / "my"), str(tmp_path / "int" / "gold")]) == 2
    captured = capsys.readouterr()
    assert "No divergence" not in captured.out and "none of the 2 tensors could be judged" in captured.err


def test_msaccucmp_path_without_its_engine_is_refused(tmp_path, capsys):
    my, gold = _pair(tmp_path, {"a": X}, {"a": X})
    assert main(["compare", str(my), str(gold), "--msaccucmp", str(tmp_path / "msaccucmp.py")]) == 2
    assert "it is for --engine msaccucmp" in capsys.readouterr().err


@pytest.mark.msaccucmp
@pytest.mark.parametrize("encoding, why", [
    ("binary", "Failed to load libascend_dump_parser.so"),   # CANN's parser library, absent here
    ("protobuf", "The header content size"),   # this msaccucmp reads a header length first: "no dump file" rows
])
def test_the_msaccucmp_engine_says_why_it_could_not_read_the_dumps(tmp_path, capsys, msaccucmp, encoding, why):
    _fused_and_unfused(tmp_path, encoding)
    fused, unfused = tmp_path / "fused", tmp_path / "unfused"
    rc = main(["compare", str(fused / "dump"), str(unfused / "dump"), "--my-graph", str(fused / "graph"),
               "--golden-graph", str(unfused / "graph"), "--engine", "msaccucmp", "--msaccucmp", str(msaccucmp.script)])
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 2 and f"msaccucmp could not read the dumps: {why}" in err and "the native engine" in err, err


@pytest.mark.msaccucmp
def test_the_msaccucmp_engine_judges_its_nan_cells(tmp_path, capsys, msaccucmp):
    """msaccucmp's CSV has NaN metrics and no reason for NaN/Inf: its mean/std cell tells which side holds them,
    and "All the data is zero" in one side is cosine 0, as the native verdict takes them; NaN/Inf on both sides
    cannot be judged from the cells, and the row says so."""
    nan, mask, other = X.copy(), X.copy(), X * 2
    nan[1, 2] = np.nan
    mask[0, :3] = -np.inf
    other[0, :3] = -np.inf
    ops = {"ok": (X, X), "mask_both": (other, mask), "zeros": (np.zeros_like(X), X), "nan_mine": (nan, X)}
    for k, (op, (mine, golden)) in enumerate(ops.items()):
        for side, data in (("my", mine), ("gold", golden)):
            (tmp_path / side).mkdir(exist_ok=True)
            write_dump(tmp_path / side / f"Add.{op}.1.0.{TS + k}", op_name=op, inputs=[X], outputs=[data],
                       encoding="nano")
    rc = main(["compare", str(tmp_path / "my"), str(tmp_path / "gold"), "--json", "--engine", "msaccucmp",
               "--msaccucmp", str(msaccucmp.script)])
    out = json.loads(capsys.readouterr().out)
    rows = {t["op"]: t for t in out["tensors"] if ":output:" in t["tensor"]}
    assert rc == 1 and out["first_divergence"]["tensor"] == "zeros:output:0", out["first_divergence"]
    assert rows["zeros"]["finite_cosine"] == 0.0
    assert rows["nan_mine"]["nonfinite"] == 1 and rows["nan_mine"]["reason"].startswith("NaN/Inf in my tensor only")
    assert not rows["mask_both"]["compared"] and rows["mask_both"]["reason"].startswith("NaN/Inf on both sides")
    assert rows["ok"]["compared"] and rows["ok"]["nonfinite"] == 0
    # a NaN at the same place on both sides leaves some cells finite (the relative errors): still no verdict on
    # its cosine or max abs error, which are NaN, so not "no divergence" for tensors that differ everywhere else
    for side, data in (("my", -nan), ("gold", nan)):
        write_dump(tmp_path / "both" / side / f"Add.a.1.0.{TS}", op_name="a", inputs=[], outputs=[data],
                   encoding="nano")
    for extra in ([], ["--max-abs-error", "1"]):
        rc = main(["compare", str(tmp_path / "both" / "my"), str(tmp_path / "both" / "gold"), "--json", "--engine",
                   "msaccucmp", "--msaccucmp", str(msaccucmp.script), *extra])
        out = capsys.readouterr()
        assert rc == 2 and "none of the 1 tensors could be judged" in out.err, (out.err, extra)
        row = next(t for t in json.loads(out.out)["tensors"] if t["tensor"] == "a:output:0")
        assert not row["judged"] and row["reason"].startswith("NaN/Inf on both sides")


@pytest.mark.msaccucmp
@pytest.mark.parametrize("mine, golden", [(np.nan, np.inf), (np.inf, -np.inf), (-np.inf, np.nan)])
def test_the_msaccucmp_engine_tells_nan_from_inf_in_a_tensor(tmp_path, capsys, msaccucmp, mine, golden):
    """NaN/Inf on both sides of another kind (NaN against Inf, Inf of the other sign) shows in the means of
    msaccucmp's mean/std cell: a divergence, as with the native engine, not a row left unjudged."""
    for side, value in (("my", mine), ("gold", golden)):
        data = X.copy()
        data[0, 0] = value
        write_dump(tmp_path / side / f"Add.a.1.0.{TS}", op_name="a", inputs=[], outputs=[data], encoding="nano")
    seen = []
    for engine in ([], ["--engine", "msaccucmp", "--msaccucmp", str(msaccucmp.script)]):
        rc = main(["compare", str(tmp_path / "my"), str(tmp_path / "gold"), "--json", *engine])
        out = json.loads(capsys.readouterr().out)
        row = next(t for t in out["tensors"] if t["tensor"] == "a:output:0")
        seen.append((rc, (out["first_divergence"] or {}).get("tensor"), row["nonfinite"] > 0))
    assert seen[0] == seen[1] == (1, "a:output:0", True), seen


@pytest.mark.msaccucmp
@pytest.mark.parametrize("mine, golden, diverges", [
    (2.0, 1.25, True), (np.nan, 1.25, True), (1.2501, 1.25, False), (1.0, 0.0, True), (0.0, 0.0, False),
    (0.000402, 0.0004, False), (6e-7, 4e-7, True), (-np.inf, np.inf, True), (np.inf, np.inf, None),
    (np.nan, np.nan, None)])
def test_the_msaccucmp_engine_judges_a_scalar_as_the_native_one(tmp_path, capsys, msaccucmp, mine, golden, diverges):
    """msaccucmp's cosine of a scalar (a loss, an overflow flag) is always 1: its error relative to the golden
    (which msaccucmp's MaxRelativeError writes as 0 for a golden of 0) and a NaN in its mean/std cell decide, as
    with the native engine. The same NaN/Inf on both sides leaves nothing to judge (exit 2)."""
    for side, value in (("my", mine), ("gold", golden)):
        write_dump(tmp_path / side / f"ReduceMeanD.loss.1.0.{TS}", op_name="loss", inputs=[], encoding="nano",
                   outputs=[np.array([value], np.float32)])
    verdicts = []
    for engine in ([], ["--engine", "msaccucmp", "--msaccucmp", str(msaccucmp.script)]):
        rc = main(["compare", str(tmp_path / "my"), str(tmp_path / "gold"), "--json", *engine])
        out = json.loads(capsys.readouterr().out)
        verdicts.append((rc, (out["first_divergence"] or {}).get("tensor")))
    assert verdicts[0] == verdicts[1] == ((1, "loss:output:0") if diverges else (0, None) if diverges is False
                                         else (2, None))


def test_a_tree_of_several_iterations_or_devices_compares_one_leaf(tmp_path, capsys):
    """Iterations (and devices) hold different data: an op missing from the latest iteration must not be taken
    from an older one, which would be a divergence that is not there."""
    def leaf(side, device, iteration):
        return tmp_path / side / "20260101000000" / str(device) / "net" / "1" / str(iteration)

    for side in ("my", "gold"):
        for device in (0, 1):
            for it, ops in ((0, ("a", "b")), (5, ("a",) if side == "my" else ("a", "b"))):
                for k, op in enumerate(ops):
                    data = X * (1 + it) + device   # another step, another device: other values
                    _dump(leaf(side, device, it), op, data, k + 10 * it)
    report = compare_dumps(tmp_path / "my", tmp_path / "gold")
    assert report.first_divergence is None
    assert {r.tensor for r in report.rows if r.compared} == {"a:input:0", "a:output:0"}
    assert report.notes[0] == (f"my dumps in {tmp_path / 'my'} hold devices 0, 1; iterations 0, 5: compared device "
                               "0, iteration 5 only (give a leaf directory to choose another)")
    # a leaf given: that leaf, no note
    report = compare_dumps(leaf("my", 1, 0), leaf("gold", 1, 0))
    assert report.first_divergence is None and not report.notes and sum(r.compared for r in report.rows) == 4
    # the earliest iteration on request (the run's dump prior: later steps ran on drifted weights)
    report = compare_dumps(tmp_path / "my", tmp_path / "gold", leaf="earliest")
    assert sum(r.compared for r in report.rows) == 4 and "device 0, iteration 0 only" in report.notes[0]


def test_the_msaccucmp_engine_rests_no_verdict_on_an_integer_tensor_against_a_float_golden(tmp_path, capsys,
                                                                                          msaccucmp):
    """An int32 accumulator against its float32 golden: msaccucmp's row is kept, no verdict rests on it (the
    native engine's rule); an integer scalar is still judged."""
    rng = np.random.default_rng(0)
    golden = rng.standard_normal(64).astype(np.float32)
    for side, conv, scalar in (("my", (golden * 100 + rng.integers(-300, 300, 64)).astype(np.int32),
                                np.array([3], np.int32)),
                               ("gold", golden, np.array([5.0], np.float32))):
        write_dump(tmp_path / side / f"Conv2D.conv_q.1.0.{TS}", op_name="conv_q", inputs=[], outputs=[conv],
                   encoding="nano")
        write_dump(tmp_path / side / f"Add.s.2.0.{TS + 1}", op_name="s", inputs=[], outputs=[scalar],
                   encoding="nano")
    seen = []
    for engine in ([], ["--engine", "msaccucmp", "--msaccucmp", str(msaccucmp.script)]):
        rc = main(["compare", str(tmp_path / "my"), str(tmp_path / "gold"), "--json", *engine])
        doc = json.loads(capsys.readouterr().out)
        judged = {t["tensor"]: (t["judged"], t["reason"]) for t in doc["tensors"]}
        seen.append((rc, doc["first_divergence"]["tensor"], judged["conv_q:output:0"]))
    assert seen[0] == seen[1]
    assert seen[1] == (1, "s:output:0", (False, "int32 against a float32 golden: a quantized value before its "
                                               "scale, not judged"))


def test_the_msaccucmp_engine_compares_the_leaf_the_native_engine_compares(tmp_path, capsys, msaccucmp):
    """msaccucmp compares one flat directory and takes the newest file of each name: a root holding another
    iteration or device on my side was flattened whole, so another step's (or device's) values were compared
    with the golden's, a divergence that is not there."""
    def leaf(side, device, iteration):
        return tmp_path / side / "20260101000000" / str(device) / "net" / "1" / str(iteration)

    for side, leaves in (("my", ((0, 0, X), (0, 1, X * 3 - 1), (1, 0, -X))), ("gold", ((0, 0, X),))):
        for device, it, data in leaves:
            leaf(side, device, it).mkdir(parents=True)
            write_dump(leaf(side, device, it) / f"Add.a.1.0.{TS + 10 * it + device}", op_name="a", inputs=[X],
                       outputs=[data], encoding="nano")
    outs = []
    for engine in ([], ["--engine", "msaccucmp", "--msaccucmp", str(msaccucmp.script)]):
        rc = main(["compare", str(tmp_path / "my"), str(tmp_path / "gold"), "--json", *engine])
        doc = json.loads(capsys.readouterr().out)
        outs.append((rc, doc["first_divergence"], [n for n in doc["notes"] if "compared device 0, iteration 0" in n]))
    assert outs[0][:2] == outs[1][:2] == (0, None)
    assert outs[0][2] == outs[1][2] and len(outs[1][2]) == 1


def test_a_dump_root_holding_two_runs_compares_the_latest_run_only(tmp_path):
    """A dump_path reused by two runs holds two timestamp directories with the same device/model/iteration: an op
    the latest run did not dump must not be taken from the earlier run."""
    def leaf(side, stamp):
        return tmp_path / side / stamp / "0" / "net" / "1" / "0"

    _dump(leaf("my", "20260101000000"), "a", X, 1)
    _dump(leaf("my", "20260101000000"), "b", -X, 2)      # the earlier run's b diverges
    _dump(leaf("my", "20260102000000"), "a", X, 3)       # the latest run dumped a only
    for op, ts in (("a", 1), ("b", 2)):
        _dump(leaf("gold", "20260101000000"), op, X, ts)
    report = compare_dumps(tmp_path / "my", tmp_path / "gold")
    assert report.first_divergence is None
    assert {r.tensor for r in report.rows if r.compared} == {"a:input:0", "a:output:0"}
    assert "2 runs (timestamp directories) under" in report.notes[0]
    assert "only the latest, 20260102000000, is read" in report.notes[0]
    # the earlier run dumped more iterations: still the latest run, never its older iterations
    _dump(leaf("my", "20260101000000").parent / "3", "b", -X, 9)
    _dump(leaf("gold", "20260101000000").parent / "3", "b", X, 9)
    report = compare_dumps(tmp_path / "my", tmp_path / "gold")
    assert report.first_divergence is None and "only the latest, 20260102000000, is read" in report.notes[0]


def test_both_sides_compare_the_same_model_and_say_when_no_leaf_is_shared(tmp_path):
    """A train and an eval model in one iteration: fused and unfused dumps hold very different op counts, so each
    side choosing its own biggest model would compare different models."""
    def leaf(side, model, mid, iteration=1):
        return tmp_path / side / "20260101000000" / "0" / model / mid / str(iteration)

    for k, op in enumerate(("t1", "t2", "t3")):
        _dump(leaf("my", "train", "1"), op, X, k)
    for k, op in enumerate(("e1", "e2", "e3", "e4", "e5")):
        _dump(leaf("my", "eval", "2"), op, X, 10 + k)
    for k, op in enumerate(("t1", "t2", "t3", "t4", "t5", "t6")):
        _dump(leaf("gold", "train", "7"), op, X, k)
    for k, op in enumerate(("e1", "e2")):
        _dump(leaf("gold", "eval", "8"), op, X, 10 + k)
    report = compare_dumps(tmp_path / "my", tmp_path / "gold")
    assert all("model train" in note for note in report.notes[:2]), report.notes
    assert {r.my_op for r in report.rows if r.compared} == {"t1", "t2", "t3"}
    # no iteration in common: said, not silent
    other = tmp_path / "other"
    _dump(other / "20260101000000" / "0" / "train" / "1" / "5", "t1", X, 0)
    _dump(other / "20260101000000" / "0" / "train" / "1" / "6", "t1", X, 1)
    report = compare_dumps(tmp_path / "my", other)
    assert any("no (device, model, iteration) in common" in note for note in report.notes), report.notes
    # one leaf on each side, at other iterations: said too (it was silent when neither side held several leaves)
    five, zero = (tmp_path / side / "20260101000000" / "0" / "train" / "1" / step for side, step in
                  (("five", "5"), ("zero", "0")))
    _dump(five, "t1", X, 0)
    _dump(zero, "t1", X, 0)
    report = compare_dumps(tmp_path / "five", tmp_path / "zero")
    assert report.notes == ["my and golden dumps have no (device, model, iteration) in common: each side's own leaf "
                            "is compared (my device 0, model train, iteration 5; golden device 0, model train, "
                            "iteration 0), which may be another step's data (give two leaf directories to choose)"]
    # two leaf directories given are the ones chosen
    assert compare_dumps(five, zero).notes == []


def test_a_scalar_diverges_by_its_relative_error(tmp_path, capsys):
    """A loss is a scalar: its cosine is 1 whatever the values (msaccucmp: "This tensor is scalar."), so the
    verdict takes its relative error against 1 - --cosine (1 % by default)."""
    def pair(name, mine, golden):
        my, gold = tmp_path / name / "my", tmp_path / name / "gold"
        _dump(my, "loss", np.array(mine, np.float32))
        _dump(gold, "loss", np.array(golden, np.float32))
        return compare_dumps(my, gold)

    far = pair("far", [1.367], [1.458])
    [row] = [r for r in far.rows if r.tensor == "loss:output:0"]
    assert row.cosine == 1.0 and row.scalar_relative_error == pytest.approx(0.0624, abs=1e-4)
    assert far.first_divergence["tensor"] == "loss:output:0"
    assert far.first_divergence["note"].startswith("a scalar: relative error 0.0624")
    assert pair("near", [1.4575], [1.458]).first_divergence is None   # 0.03 %
    assert pair("zero", [0.0], [0.0]).first_divergence is None
    assert pair("rounding", [3.0e-9], [-1.5e-9]).first_divergence is None   # near zero: relative to 1e-5
    assert pair("from_zero", [1e-3], [0.0]).first_divergence["tensor"] == "loss:output:0"
    assert main(["compare", str(tmp_path / "near" / "my"), str(tmp_path / "near" / "gold"), "--cosine",
                 "0.9999"]) == 1   # 1 - 0.9999 = 0.01 % < 0.03 %


def test_a_golden_npy_with_a_hashed_name_is_found_through_mapping_csv(tmp_path):
    long = "b" + "x" * 40
    _dump(tmp_path / "my", long, X)
    gold = tmp_path / "gold"
    gold.mkdir()
    np.save(gold / "900001.npy", X)     # an over-long name, hashed as CANN's tools hash it
    (gold / "mapping.csv").write_text(f"900001.npy,{long}.0.{TS}.npy\n")
    report = compare_dumps(tmp_path / "my", gold)
    assert report.mode == "npy_by_name" and [round(r.cosine, 6) for r in report.rows if r.compared] == [1.0]


def test_a_bfloat16_scalar_diverges_like_any_other(tmp_path):
    import ml_dtypes

    from fusebisect.compare.dumpfile import TensorSpec

    for side, value in (("my", 2.6), ("gold", 2.3)):
        (tmp_path / side).mkdir()
        write_dump(tmp_path / side / f"Add.loss.1.{TS}", op_name="loss", inputs=[X],
                   outputs=[TensorSpec(np.array([value], ml_dtypes.bfloat16))])
    fd = compare_dumps(tmp_path / "my", tmp_path / "gold").first_divergence
    assert fd["tensor"] == "loss:output:0" and fd["note"].startswith("a scalar: relative error 0.12")


def test_one_leaf_of_one_model_however_the_path_is_written(tmp_path, capsys, monkeypatch):
    """Two models in one device and iteration (a train and an eval graph) are two leaves; a leaf given as
    '../0' keeps its iteration."""
    def leaf(side, model, iteration):
        return tmp_path / side / "20260101000000" / "0" / model / "1" / str(iteration)

    for side in ("my", "gold"):
        for it in (0, 5):
            bad = side == "my" and it == 0
            _dump(leaf(side, "train", it), "a", X * (1 + it) + (0.5 if bad else 0), 10 * it)
            _dump(leaf(side, "train", it), "b", X * (1 + it), 10 * it + 1)
            _dump(leaf(side, "eval", it), "c", X * (2 + it), 10 * it + 5)
    report = compare_dumps(tmp_path / "my", tmp_path / "gold")
    assert {r.my_op for r in report.rows} == {"a", "b"}   # the train model, the one with more ops
    assert "hold models eval, train; iterations 0, 5: compared device 0, model train, iteration 5" in report.notes[0]
    monkeypatch.chdir(leaf("my", "train", 5))
    assert main(["compare", "../0", str(tmp_path / "gold")]) == 1   # iteration 0 against iteration 0: a diverges
    err = capsys.readouterr().err
    assert "model train, iteration 0 only" in err and "\\\\[" not in err


def test_of_graphs_naming_every_dumped_op_the_one_naming_fewer_others_maps_them(tmp_path):
    # the fused train graph, then an eval graph of the same ops unfused, whose extra op was never dumped
    def graph(ops):
        return json.dumps({"graph": [{"name": "g", "op": [
            {"name": n, "type": "Add", "id": i, "input": [],
             "attr": [{"key": "_datadump_original_op_names", "value": {"list": {"val_type": 1, "s": orig}}}]
             + ([{"key": "pass_name", "value": {"list": {"val_type": 1, "s": passes}}}] if passes else [])}
            for i, (n, orig, passes) in enumerate(ops)]}]})

    folder = tmp_path / "graph"
    folder.mkdir()
    (folder / "ge_proto_00000001_graph_1_Build.txt").write_text(graph([("x", ["x"], []), ("y", ["y"], ["P"])]))
    (folder / "ge_proto_00000002_graph_2_Build.txt").write_text(graph([("x", ["x"], []), ("y", ["y"], []),
                                                                      ("z", ["z"], [])]))
    _dump(tmp_path / "my", "x", X, 0)
    _dump(tmp_path / "my", "y", -X, 1)
    _dump(tmp_path / "gold", "x", X, 0)
    _dump(tmp_path / "gold", "y", X, 1)
    report = compare_dumps(tmp_path / "my", tmp_path / "gold", my_graph=folder,
                           golden_graph=folder / "ge_proto_00000002_graph_2_Build.txt")
    assert report.first_divergence["pass_names"] == ["P"]
    assert "uses ge_proto_00000001_graph_1_Build.txt" in report.notes[0]


def test_nc1hwc0_of_an_nhwc_graph_is_compared_without_its_padding(tmp_path):
    """A TensorFlow activation (original layout NHWC) stored as NC1HWC0: the padding lanes (garbage that differs
    between runs) are not compared, NPU vs NPU nor with graphs (-cf), as msaccucmp strips them too."""
    from fusebisect.compare.formats import from_original

    g = np.random.default_rng(0).standard_normal((2, 3, 5, 20)).astype(np.float32)   # NHWC, C = 20
    for side, value, pad in (("my", g + 1e-3, 7.0), ("gold", g, -7.0)):
        dev = from_original(value, "NC1HWC0", source="NHWC")
        dev[:, 1, :, :, 4:] = pad                                                     # padding lanes only
        write_dump(tmp_path / side / f"Conv2D.conv1.1.0.{TS}", op_name="conv1", inputs=[], outputs=[
            TensorSpec(dev, format=3, original_shape=(2, 3, 5, 20), original_op=("conv1", 0), origin_format="NHWC")])
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps({"graph": [{"name": "g", "op": [{
        "name": "conv1", "type": "Conv2D", "id": 1, "input": [], "attr": [], "output_desc": [{"attr": [
            {"key": "_datadump_origin_name", "value": {"s": "conv1"}},
            {"key": "_datadump_origin_output_index", "value": {"i": 0}},
            {"key": "origin_format", "value": {"s": "NHWC"}},
            {"key": "origin_shape", "value": {"list": {"val_type": 2, "i": [2, 3, 5, 20]}}}]}]}]}]}))
    for graphs in ({}, {"my_graph": graph, "golden_graph": graph}):
        report = compare_dumps(tmp_path / "my", tmp_path / "gold", **graphs)
        [row] = report.rows
        assert not row.fail_reason, (graphs, row.fail_reason)
        assert row.cosine == pytest.approx(1.0, abs=1e-5) and row.max_abs_error == pytest.approx(1e-3, rel=1e-3)
        assert report.first_divergence is None


def test_a_zero_dimensional_golden_is_compared(tmp_path):
    """A golden .npy holding a 0-d array (a loss saved with np.save(x.item())): compared as a scalar."""
    write_dump(tmp_path / "my" / f"ReduceMeanD.loss.1.0.{TS}", op_name="loss", inputs=[],
               outputs=[np.array([2.0], np.float32)])
    (tmp_path / "gold").mkdir()
    np.save(tmp_path / "gold" / f"loss.0.{TS}.npy", np.array(2.0, np.float32))
    report = compare_dumps(tmp_path / "my", tmp_path / "gold")
    assert [(r.tensor, r.compared) for r in report.rows] == [("loss:output:0", True)]
    assert report.first_divergence is None


def test_undefined_dtype_bytes_are_read_whole_and_resource_is_named_int64(tmp_path):
    """DT_UNDEFINED: msaccucmp reads all `size` bytes as int8 whatever the header's shape says (shape [2,3] over
    24 bytes read 6 and missed a divergence in the rest); DT_RESOURCE is int64 in its CSV, not 'resource'."""
    from fusebisect.compare.csvout import write_csv
    from fusebisect.proto import dump_data_pb2 as dd

    def undefined(path, values):
        path.parent.mkdir(parents=True, exist_ok=True)
        m = dd.DumpData(version="2.0", op_name="u1")
        t = m.output.add(data_type=0, format=2, size=24)
        t.shape.dim.extend([2, 3])
        header = m.SerializeToString()
        path.write_bytes(len(header).to_bytes(8, "little") + header + np.array(values, np.float32).tobytes())

    undefined(tmp_path / "my" / f"Cast.u1.1.0.{TS}", [1, 2, 3, 4, 5, 6])
    undefined(tmp_path / "gold" / f"Cast.u1.1.0.{TS}", [1, 2, 3, -4, -5, -6])
    report = compare_dumps(tmp_path / "my", tmp_path / "gold")
    [row] = report.rows
    a = np.array([1, 2, 3, 4, 5, 6], np.float32).view(np.int8).astype(np.float64)
    b = np.array([1, 2, 3, -4, -5, -6], np.float32).view(np.int8).astype(np.float64)
    assert row.shape == (24,)
    assert row.cosine == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-6)
    assert report.first_divergence is not None
    for side in ("my2", "gold2"):
        write_dump(tmp_path / side / f"Op.res.1.0.{TS}", op_name="res", inputs=[],
                   outputs=[TensorSpec(np.arange(1, 7, dtype=np.int64), dtype=23)])
    write_csv(compare_dumps(tmp_path / "my2", tmp_path / "gold2"), tmp_path / "r.csv")
    assert (tmp_path / "r.csv").read_text().splitlines()[1].startswith("0,Op,res,int64,NaN,res,int64,")


def test_the_first_divergence_of_an_op_split_in_two_names_the_op_that_diverged():
    """One original op made two NPU ops: its rows name both ('big_part1,big_part2', as msaccucmp's NPUDump
    does), and the first divergence gave that joined name, which --op refuses. It names big_part2, whose
    tensor diverged."""
    from fusebisect.compare.engine import CompareReport, CompareRow, first_divergence

    def row(index, tensor, cos):
        return CompareRow(index=index, op_type="Exp", my_op="big_part1,big_part2", golden_ops=["big"],
                          tensor=tensor, my_dtype="float32", golden_dtype="float32", shape=(2, 6),
                          metrics={"CosineSimilarity": cos, "MaxAbsoluteError": 1.0}, fail_reason="",
                          my_address=None, golden_address=None, timestamp=index)

    report = CompareReport(rows=[row(0, "big_part1:output:0", 1.0), row(1, "big_part2:output:0", 0.5)],
                           first_divergence=None, unmatched=[])
    first = first_divergence(report)
    assert (first["op"], first["tensor"]) == ("big_part2", "big_part2:output:0")


def test_dump_trees_of_other_shapes_are_compared_one_leaf_at_a_time(tmp_path):
    """Trees whose leaves were pooled or skipped without a word: a linked iteration directory (os.walk did not
    follow it: iteration 0 was compared as the latest), MindSpore's rank_{id}/{net}/{graph_id}/{iteration}
    (ranks pooled: a healthy rank hid the faulty one, exit 0), one timestamp directory per rank (the rank that
    started last was compared, not the lowest device). And a file that is no op dump is named in a note."""
    def compared(my, gold):
        report = compare_dumps(my, gold)
        return report.first_divergence and report.first_divergence["cosine"] < 0, report.notes

    # a link to the latest iteration, kept elsewhere
    for side, data in (("my", -X), ("gold", X)):
        _dump(tmp_path / "a" / side / "20260101000000" / "0" / "net" / "1" / "0", "m", X, 1)
        _dump(tmp_path / "a" / f"{side}-it3", "m", data, 2)
        (tmp_path / "a" / side / "20260101000000" / "0" / "net" / "1" / "3").symlink_to(tmp_path / "a" / f"{side}-it3")
    bad, notes = compared(tmp_path / "a" / "my", tmp_path / "a" / "gold")
    assert bad and "compared device 0, iteration 3 only" in notes[0]
    # MindSpore: rank 0 faulty, rank 1 healthy
    for side in ("my", "gold"):
        _dump(tmp_path / "b" / side / "rank_0" / "net" / "1" / "0", "m", -X if side == "my" else X, 1)
        _dump(tmp_path / "b" / side / "rank_1" / "net" / "1" / "0", "m", X, 2)
    bad, notes = compared(tmp_path / "b" / "my", tmp_path / "b" / "gold")
    assert bad and "hold devices 0, 1: compared device 0, iteration 0 only" in notes[0]
    # one timestamp directory per rank: device 1's process started a second later
    for side in ("my", "gold"):
        _dump(tmp_path / "c" / side / "20260101000000" / "0" / "net" / "1" / "0", "m", -X if side == "my" else X, 1)
        _dump(tmp_path / "c" / side / "20260101000001" / "1" / "net" / "1" / "0", "m", X, 2)
    bad, notes = compared(tmp_path / "c" / "my", tmp_path / "c" / "gold")
    assert bad and "read as the ranks of one run" in notes[0] and any("compared run 20260101000000, device 0" in n
                                                                      for n in notes)
    # a golden .npy directory reached through a link ("no golden .npy files found")
    (tmp_path / "d" / "gold").mkdir(parents=True)
    np.save(tmp_path / "d" / "gold" / f"m.0.{TS}.npy", X)
    (tmp_path / "d" / "linked").mkdir()
    (tmp_path / "d" / "linked" / "it0").symlink_to(tmp_path / "d" / "gold")
    _dump(tmp_path / "d" / "my", "m", -X, 1)
    bad, _notes = compared(tmp_path / "d" / "my", tmp_path / "d" / "linked")
    assert bad
    # a file that is no op dump (a hashed name whose mapping.csv was not copied)
    (tmp_path / "c" / "my" / "20260101000000" / "0" / "net" / "1" / "0" / "0123456789").write_bytes(b"x")
    _bad, notes = compared(tmp_path / "c" / "my", tmp_path / "c" / "gold")
    assert any(n.startswith("1 file(s) in ") and "are not op dumps and were left out (first: " in n
               and "0123456789" in n for n in notes), notes


@pytest.mark.msaccucmp
def test_the_msaccucmp_engine_answers_as_the_native_one(tmp_path, capsys, msaccucmp):
    """Three ways the msaccucmp engine answered otherwise: an input's divergence blamed the reading op's passes,
    not its producer's; a truncated dump read 'There is no dump file' and the rest 'no divergence' (exit 0);
    and its reasons named the temporary links it read, gone once it was done."""
    _fused_and_unfused(tmp_path, "nano")
    fused, unfused = tmp_path / "fused", tmp_path / "unfused"
    base = ["compare", str(fused / "dump"), str(unfused / "dump"), "--my-graph", str(fused / "graph"),
            "--golden-graph", str(unfused / "graph"), "--json"]
    engine = ["--engine", "msaccucmp", "--msaccucmp", str(msaccucmp.script)]
    firsts = []
    for extra in ([], engine):
        assert main([*base, "--op", "ln_LayerNorm", *extra]) == 1
        first = json.loads(capsys.readouterr().out)["first_divergence"]
        firsts.append((first["input_of"], first["producer"]["op"], first["pass_names"]))
    assert firsts[0] == firsts[1] == ("ln_LayerNorm", "fc1_MatMul", ["MatMulBiasAddFusionPass"])
    # a clean pair but for one cut-short dump: no verdict (exit 2) from either engine
    good = tmp_path / "good"
    shutil.copytree(fused, good)
    [cut] = list((good / "dump").rglob("LayerNorm.ln_LayerNorm.*"))
    cut.write_bytes(cut.read_bytes()[:-100])
    for extra in ([], engine):
        for my_side, golden_side in ((good, fused), (fused, good)):   # the cut file on either side
            assert main(["compare", str(my_side / "dump"), str(golden_side / "dump"), *extra]) == 2
            err = capsys.readouterr().err
            assert "1 dump file(s) could not be read" in err and f"{cut}: " in err, err
    # the reasons name the user's files
    zero = tmp_path / "zero"
    for side, data in (("my", np.zeros(4, np.float32)), ("gold", np.ones(4, np.float32))):
        write_dump(zero / side / "20240101000000" / "0" / "g" / "1" / "0" / f"Add.z.1.0.{TS}", op_name="z",
                   inputs=[], outputs=[data], encoding="nano")
    assert main(["compare", str(zero / "my"), str(zero / "gold"), "--json", *engine]) == 1
    reasons = " ".join(t["reason"] or "" for t in json.loads(capsys.readouterr().out)["tensors"])
    assert str(zero / "my") in reasons and "fusebisect_msaccucmp_" not in reasons, reasons


@pytest.mark.msaccucmp
def test_the_msaccucmp_engine_compares_the_golden_step_the_native_one_does(tmp_path, capsys, msaccucmp):
    """A golden .npy directory of two steps went to msaccucmp whole: it took the newest file of each name, so
    --iteration earliest compared step 0's dumps with step 3's golden (first divergence: the model's input)."""
    import io

    from fusebisect.sim.options import resolve
    from fusebisect.sim.train import run

    all_off = tmp_path / "all-off.cfg"
    all_off.write_text('{"Switch":{"GraphFusion":{"ALL":"off"},"UBFusion":{"ALL":"off"}}}\n')
    env = {"ASCEND_WORK_PATH": str(tmp_path / "f"), "DUMP_GE_GRAPH": "2", "DUMP_GRAPH_PATH": str(tmp_path / "graph")}
    assert run(resolve(["--steps", "4", "--dump-step", "0,3", "--dump-path", str(tmp_path / "my"), "--dump-encoding",
                        "nano", "--faulty", "LayerNormFusionPass"], env), stdout=io.StringIO(),
               stderr=io.StringIO()).exit_code == 0
    assert run(resolve(["--steps", "4", "--dump-step", "0,3", "--dump-path", str(tmp_path / "u"), "--dump-encoding",
                        "nano", "--fusion-switch-file", str(all_off), "--dump-golden", str(tmp_path / "gold")],
                       {"ASCEND_WORK_PATH": str(tmp_path / "u")}), stdout=io.StringIO(),
               stderr=io.StringIO()).exit_code == 0
    seen = []
    for extra in ([], ["--engine", "msaccucmp", "--msaccucmp", str(msaccucmp.script)]):
        assert main(["compare", str(tmp_path / "my"), str(tmp_path / "gold"), "--my-graph", str(tmp_path / "graph"),
                     "--iteration", "earliest", "--json", *extra]) == 1
        doc = json.loads(capsys.readouterr().out)
        seen.append((doc["first_divergence"]["tensor"], round(doc["first_divergence"]["cosine"], 6),
                     any("the earliest (--iteration earliest) of each was compared" in n for n in doc["notes"])))
    assert seen[0] == seen[1] and seen[0][0] == "ln_LayerNorm:output:0" and seen[0][2], seen
    # one step's golden with an empty file: no verdict from either engine (msaccucmp's said 'no divergence')
    step = tmp_path / "step"
    step.mkdir()
    newest: dict = {}
    for f in sorted((tmp_path / "gold").glob("*.npy")):
        op, index, stamp = f.name[:-4].rsplit(".", 2)
        if int(stamp) > newest.get((op, index), (0, None))[0]:
            newest[(op, index)] = (int(stamp), f)
    for _stamp, f in newest.values():
        shutil.copy(f, step / f.name)
    [empty] = [f for f in step.glob("x.0.*.npy")]   # the input: every engine reads it
    empty.write_bytes(b"")
    mine = next(p for p in (tmp_path / "my").rglob("3") if p.is_dir())   # the last step's leaf
    for extra in ([], ["--engine", "msaccucmp", "--msaccucmp", str(msaccucmp.script)]):
        rc = main(["compare", str(mine), str(step), "--my-graph", str(tmp_path / "graph"), "--cosine", "0",
                   *extra])
        err = capsys.readouterr().err
        assert rc == 2 and f"{empty}: empty file" in err, (extra, err)
    # a damaged golden file the comparison reads (fused fc1_MatMul is compared with fc1_BiasAdd's output) gets no
    # verdict, also under --op; one it does not read (fc1_MatMul's own) changes nothing
    for name, op, code in (("fc1_BiasAdd", ["--op", "fc1_MatMul"], 2), ("fc1_MatMul", [], 0)):
        again = tmp_path / f"again-{name}"
        shutil.copytree(step, again)
        shutil.copy(tmp_path / "gold" / empty.name, again / empty.name)
        [damaged] = list(again.glob(f"{name}.0.*.npy"))
        damaged.write_bytes(b"")
        for extra in ([], ["--engine", "msaccucmp", "--msaccucmp", str(msaccucmp.script)]):
            rc = main(["compare", str(mine), str(again), "--my-graph", str(tmp_path / "graph"), "--cosine", "0",
                       *op, *extra])
            err = capsys.readouterr().err
            assert rc == code, (name, extra, err)


def test_a_one_element_bool_that_flips_is_a_divergence(tmp_path, capsys, msaccucmp):
    """A found-inf flag is a one-element bool: True against the golden's False is the whole tensor wrong, though
    its cosine is 1 and msaccucmp computes no error metric for bools. msaccucmp's cells cannot tell the two
    values apart, so that engine leaves the row unjudged rather than calling it clean."""
    my, gold = tmp_path / "my", tmp_path / "gold"
    my.mkdir()
    gold.mkdir()
    write_dump(my / f"Conv2D.found_inf.0.0.{TS}", op_name="found_inf", inputs=[], encoding="nano",
               outputs=[TensorSpec(np.array([True]), format=2, original_shape=(1,), address=0x1000)])
    np.save(gold / f"found_inf.0.{TS}.npy", np.array([False]))
    attr = [{"key": "origin_format", "value": {"s": "ND"}},
            {"key": "_datadump_origin_name", "value": {"s": "found_inf"}},
            {"key": "_datadump_origin_output_index", "value": {"i": 0}}]
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps({"graph": [{"name": "g", "op": [{
        "name": "found_inf", "type": "Conv2D", "id": 0, "input": [],
        "attr": [{"key": "_datadump_original_op_names", "value": {"list": {"val_type": 1, "s": ["found_inf"]}}}],
        "output_desc": [{"dtype": "DT_BOOL", "shape": {"dim": [1]}, "layout": "ND", "attr": attr}]}]}]}))
    assert main(["compare", str(my), str(gold), "--my-graph", str(graph), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["first_divergence"]["tensor"] == "found_inf:output:0"
    rc = main(["compare", str(my), str(gold), "--my-graph", str(graph), "--json", "--engine", "msaccucmp",
               "--msaccucmp", str(msaccucmp.script)])
    captured = capsys.readouterr()
    assert rc == 2 and "cannot tell True from False" in captured.err
    np.save(gold / f"found_inf.0.{TS}.npy", np.array([True]))
    assert main(["compare", str(my), str(gold), "--my-graph", str(graph)]) == 0


def test_empty_tensors_show_their_shape_and_cells_as_msaccucmp_does(tmp_path, capsys, msaccucmp):
    """An empty output (0, 2) keeps its dump shape in the Shape cell, and msaccucmp's shape rule (sum of dims ==
    their count) makes it "scalar": cosine 1.000000 and "This tensor is scalar." (DataType differs, documented)."""
    my, gold = tmp_path / "my", tmp_path / "gold"
    my.mkdir()
    gold.mkdir()
    ops = []
    for i, shape in enumerate([(0, 2), (2, 0), (0,), (0, 3)]):
        name, ts = f"e{i}", TS + i
        data = np.zeros(shape, np.float32)
        write_dump(my / f"Conv2D.{name}.{i}.0.{ts}", op_name=name, inputs=[], encoding="nano",
                   outputs=[TensorSpec(data, format=2, original_shape=shape, address=0x1000 + i)])
        np.save(gold / f"{name}.0.{ts}.npy", data)
        attr = [{"key": "origin_format", "value": {"s": "ND"}}, {"key": "_datadump_origin_name", "value": {"s": name}},
                {"key": "_datadump_origin_output_index", "value": {"i": 0}}]
        ops.append({"name": name, "type": "Conv2D", "id": i, "input": [],
                    "attr": [{"key": "_datadump_original_op_names", "value": {"list": {"val_type": 1, "s": [name]}}}],
                    "output_desc": [{"dtype": "DT_FLOAT", "shape": {"dim": list(shape)}, "layout": "ND",
                                     "attr": attr}]})
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps({"graph": [{"name": "g", "op": ops}]}))
    ours = tmp_path / "ours.csv"
    main(["compare", str(my), str(gold), "--my-graph", str(graph), "--csv", str(ours)])
    capsys.readouterr()
    proc = msaccucmp.run("compare", "-m", str(my), "-g", str(gold), "-f", str(graph), "-out", str(tmp_path / "ref"))
    [theirs] = list((tmp_path / "ref").glob("*.csv"))
    assert proc.returncode == 0, proc.stderr

    def cells(path):   # every column but the two DataType ones
        import csv
        rows = list(csv.reader(path.open()))
        return [[c for j, c in enumerate(r) if rows[0][j] != "DataType"] for r in rows]

    assert cells(ours) == cells(theirs)
    assert cells(ours)[1][6:8] == ["[0,2]", "1.000000"]
    # both engines: nothing diverges (msaccucmp's "(nan;nan)" mean/std cell of no element is no NaN in the data)
    for engine in ([], ["--engine", "msaccucmp", "--msaccucmp", str(msaccucmp.script)]):
        assert main(["compare", str(my), str(gold), "--my-graph", str(graph), *engine]) == 0, engine
        capsys.readouterr()


def test_a_padded_tensor_against_an_nd_golden_shows_its_original_shape(tmp_path, capsys):
    """NC1HWC0 and FRACTAL_Z dumps restored for an ND golden are compared flat; their Shape cell is still the
    original shape (the README's rule for padded tensors), not the element count."""
    import csv

    from fusebisect.compare.formats import from_original

    my, gold = tmp_path / "my", tmp_path / "gold"
    my.mkdir()
    gold.mkdir()
    rng = np.random.default_rng(0)
    ops = []
    for i, (fmt, code, shape) in enumerate([("NC1HWC0", 3, (1, 3, 4, 5)), ("FRACTAL_Z", 4, (17, 3, 3, 3))]):
        name, ts = f"t{i}", TS + i
        data = rng.standard_normal(shape).astype(np.float16)
        stored = from_original(data, fmt, source="NCHW")
        write_dump(my / f"Conv2D.{name}.{i}.0.{ts}", op_name=name, inputs=[], encoding="nano",
                   outputs=[TensorSpec(stored, format=code, original_shape=shape, address=0x1000 + i)])
        np.save(gold / f"{name}.0.{ts}.npy", data)
        attr = [{"key": "origin_format", "value": {"s": "ND"}}, {"key": "_datadump_origin_name", "value": {"s": name}},
                {"key": "_datadump_origin_output_index", "value": {"i": 0}}]
        ops.append({"name": name, "type": "Conv2D", "id": i, "input": [],
                    "attr": [{"key": "_datadump_original_op_names", "value": {"list": {"val_type": 1, "s": [name]}}}],
                    "output_desc": [{"dtype": "DT_FLOAT16", "shape": {"dim": list(stored.shape)}, "layout": fmt,
                                     "attr": attr}]})
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps({"graph": [{"name": "g", "op": ops}]}))
    out = tmp_path / "o.csv"
    assert main(["compare", str(my), str(gold), "--my-graph", str(graph), "--csv", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [(r["Shape"], r["CosineSimilarity"]) for r in rows] == [("[1,3,4,5]", "1.000000"),
                                                                   ("[17,3,3,3]", "1.000000")]


def test_golden_npy_data_on_my_side_is_refused_with_the_reason(tmp_path, capsys):
    np.save(tmp_path / "a.npy", X)
    gold = tmp_path / "gold"
    gold.mkdir()
    np.save(gold / f"a.0.{TS}.npy", X)
    for mine in (tmp_path / "a.npy", gold):
        assert main(["compare", str(mine), str(gold)]) == 2
        err = capsys.readouterr().err
        assert f"{mine}: golden .npy data, not an NPU dump" in err and len(err.strip().splitlines()) == 1


def test_a_dump_the_system_will_not_read_is_an_unreadable_dump(tmp_path, capsys):
    """A dangling link (or permission denied, or a file deleted meanwhile) is an unreadable dump like a cut one:
    compare writes its outputs and exits 2 naming it; dump convert skips it and writes the rest."""
    my, gold = _pair(tmp_path, {"a": X, "b": X}, {"a": X, "b": X})
    victim = next(my.glob("Add.b.*"))
    victim.unlink()
    victim.symlink_to(tmp_path / "gone")
    out = tmp_path / "o.csv"
    assert main(["compare", str(my), str(gold), "--csv", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"first: {victim}: cannot read: No such file or directory" in err and "Traceback" not in err
    assert out.is_file()
    assert main(["dump", "convert", str(my), "--out", str(tmp_path / "npy")]) == 0   # reported and skipped
    err = " ".join(capsys.readouterr().err.split())
    assert f"skipped {victim}: cannot read" in err
    assert len(list((tmp_path / "npy").glob("Add.a.*.npy"))) == 2    # its input and output
