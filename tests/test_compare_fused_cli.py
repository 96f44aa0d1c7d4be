"""compare on a simulated fused run against its all-off run, as an engineer runs it: which step, which graph,
which rows are shown, and what a verdict can rest on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fusebisect.cli.app import main

pytestmark = pytest.mark.slow


def _train(root: Path, name: str, *extra: str) -> None:
    env = {**os.environ, "DUMP_GE_GRAPH": "2", "DUMP_GRAPH_PATH": str(root / name / "graph"),
           "ASCEND_WORK_PATH": str(root / name)}
    subprocess.run([sys.executable, "-m", "fusebisect.sim", "train", "--steps", "3", "--dump-step", "0,2",
                    "--dump-path", str(root / name / "dump"), *extra], check=True, capture_output=True, env=env,
                   cwd=root)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """A LogSoftmaxFusionPass fault: dumps of steps 0 and 2, fused and all-off, with graphs and golden .npy."""
    root = tmp_path_factory.mktemp("fused")
    assert main(["-q", "cfg", "all-off", "--out", str(root / "all-off.cfg")]) == 0
    _train(root, "f", "--faulty", "LogSoftmaxFusionPass")
    _train(root, "u", "--faulty", "LogSoftmaxFusionPass", "--fusion-switch-file", str(root / "all-off.cfg"),
           "--dump-golden", str(root / "golden"))
    return root


def _json(capsys, *argv) -> tuple[int, dict]:
    rc = main(["compare", *argv, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def _leaf(root: Path, step: int) -> Path:
    return next(root.glob(f"*/0/*/1/{step}"))


def test_a_root_of_several_steps_says_later_steps_drift_and_compares_the_earliest_on_request(runs, capsys):
    """Fused vs unfused over steps 0 and 2: the latest step ran on weights the fault drifted, so its first
    divergence is elsewhere; the note says so and --iteration earliest names the faulty rule's op."""
    args = [str(runs / "f" / "dump"), str(runs / "u" / "dump"), "--my-graph", str(runs / "f" / "graph"),
            "--golden-graph", str(runs / "u" / "graph")]
    rc, doc = _json(capsys, *args)
    assert rc == 1 and any("compare the earliest step for that (--iteration earliest)" in n for n in doc["notes"])
    rc, doc = _json(capsys, *args, "--iteration", "earliest")
    assert rc == 1 and doc["first_divergence"]["op"] == "ce_LogSoftmaxV2"
    assert "LogSoftmaxFusionPass" in doc["first_divergence"]["pass_names"]
    # a pass no switch file turns off is marked among the rules to suspect: it cannot be the fix
    assert main(["compare", *args, "--iteration", "earliest"]) == 1
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "AReduceSumFusionPass (cannot be switched off)" in out and "LogSoftmaxFusionPass" in out
    rc, doc = _json(capsys, *args, "--iteration", "earliest")
    assert doc["first_divergence"]["cannot_switch_off"] == ["AReduceSumFusionPass"]
    # fused vs unfused with my graph alone is the same mode: the same note
    rc, doc = _json(capsys, *args[:4])
    assert any("compare the earliest step for that (--iteration earliest)" in n for n in doc["notes"])
    assert main(["compare", *args, "--iteration", "first"]) == 2
    assert "--iteration first: expected latest or earliest" in capsys.readouterr().err


def test_dumps_the_graph_given_lacks_leave_no_verdict(runs, capsys, tmp_path):
    """A graph that is not the dump's: the ops it lacks are not compared, and 'no divergence' cannot be concluded
    from the rest (it said so with exit 0, where the divergent op may be among those left out)."""
    import shutil

    leaf = tmp_path / "leaf"
    shutil.copytree(_leaf(runs / "f" / "dump", 0), leaf)
    dump = next(p for p in sorted(leaf.iterdir()) if p.name.startswith("LayerNorm."))
    kind, _name, rest = dump.name.split(".", 2)
    shutil.copy(dump, leaf / f"{kind}.ghost_op.{rest}")    # an op this graph does not have
    graph = ["--my-graph", str(runs / "f" / "graph"), "--golden-graph", str(runs / "f" / "graph")]
    assert main(["compare", str(leaf), str(leaf), *graph]) == 2
    err = capsys.readouterr().err
    assert "op dump(s) have no op in it (first: " in err and "'no divergence' cannot be concluded" in err


def test_a_tensor_compared_with_itself_never_diverges(runs, capsys):
    """--cosine 1: float32 sums make a tensor's cosine with itself 0.99999994; judged as printed (6 decimals)."""
    f0 = _leaf(runs / "f" / "dump", 0)
    rc, doc = _json(capsys, str(f0), str(f0), "--cosine", "1")
    assert rc == 0 and doc["first_divergence"] is None
    # through my graph only (each original op its own unfused op)
    rc, doc = _json(capsys, str(f0), str(f0), "--my-graph", str(runs / "f" / "graph"))
    assert rc == 0 and doc["first_divergence"] is None and doc["compared"] > 0


def test_top_keeps_the_first_divergence_and_the_html_numbers_rows_as_the_csv(runs, capsys, tmp_path):
    f0, u0 = _leaf(runs / "f" / "dump", 0), _leaf(runs / "u" / "dump", 0)
    graphs = ["--my-graph", str(runs / "f" / "graph"), "--golden-graph", str(runs / "u" / "graph")]
    rc, doc = _json(capsys, str(f0), str(u0), *graphs)
    first = doc["first_divergence"]
    index = next(t["index"] for t in doc["tensors"] if t["tensor"] == first["tensor"] and t["op"] == first["op"])
    # --top 1 ranks by cosine; the first divergence stays in the table whatever its rank
    assert main(["compare", str(f0), str(u0), *graphs, "--top", "1", "--html", str(tmp_path / "c.html")]) == 1
    out = capsys.readouterr().out
    assert any(line.split("│")[1].strip() == str(index) for line in out.splitlines() if line.count("│") > 3)
    # the HTML's # is the op index of the CSV and the terminal (it was a row counter)
    assert f'<tr class="hl"><td>{index}</td><td>{first["op"]}</td>' in (tmp_path / "c.html").read_text()
    assert "AReduceSumFusionPass (cannot be switched off)" in (tmp_path / "c.html").read_text()


def test_a_golden_directory_of_several_steps_is_said(runs, capsys):
    """--dump-golden over steps 0 and 2 writes two files per output into one directory: the newest of each is
    compared, with a note (the dump's side of the same situation had one; the golden's was silent)."""
    rc, doc = _json(capsys, str(_leaf(runs / "f" / "dump", 0)), str(runs / "golden"), "--my-graph",
                    str(runs / "f" / "graph"))
    assert any("holds several dumps of" in n and "the newest of each was compared" in n for n in doc["notes"])
    # --iteration earliest takes the earliest golden of each output too: step 0 against step 0, where the faulty
    # rule's op diverges first (the newest golden made the input x the first divergence)
    rc, doc = _json(capsys, str(runs / "f" / "dump"), str(runs / "golden"), "--my-graph", str(runs / "f" / "graph"),
                    "--iteration", "earliest")
    assert rc == 1 and doc["first_divergence"]["op"] == "ce_LogSoftmaxV2", doc["first_divergence"]
    assert any("the earliest (--iteration earliest) of each was compared" in n for n in doc["notes"])


def test_a_graph_of_another_build_with_the_same_op_names_is_said(runs, capsys, tmp_path):
    """My graph from a build without MatMulBiasAddFusionPass: fc1_MatMul is there too (unfused, 2 inputs), but
    the dump's fused op has 3. The op names all match, so only the inputs tell the graph is another build's."""
    assert main(["-q", "cfg", "off", "MatMulBiasAddFusionPass", "--out", str(tmp_path / "mb.cfg")]) == 0
    _train(tmp_path, "other", "--faulty", "LogSoftmaxFusionPass", "--fusion-switch-file", str(tmp_path / "mb.cfg"))
    rc, doc = _json(capsys, str(_leaf(runs / "f" / "dump", 0)), str(_leaf(runs / "u" / "dump", 0)), "--my-graph",
                    str(tmp_path / "other" / "graph"), "--golden-graph", str(runs / "u" / "graph"))
    assert any(n.startswith("2 op dump(s) have more inputs than their op in the graph given for my side (first: "
                            "fc1_MatMul)") for n in doc["notes"]), doc["notes"]
    # the graph of the dump's own build: no such note
    rc, doc = _json(capsys, str(_leaf(runs / "f" / "dump", 0)), str(_leaf(runs / "u" / "dump", 0)), "--my-graph",
                    str(runs / "f" / "graph"), "--golden-graph", str(runs / "u" / "graph"))
    assert not any("more inputs than their op" in n for n in doc["notes"])


def test_the_html_shows_metrics_as_the_terminal_and_the_csv_do(runs, capsys, tmp_path):
    """6 decimals, as msaccucmp's CSV and the compare table: the HTML rounded to 6 significant digits (3.22085
    for 3.220853), so the same tensor read two ways."""
    f0, u0 = _leaf(runs / "f" / "dump", 0), _leaf(runs / "u" / "dump", 0)
    graphs = ["--my-graph", str(runs / "f" / "graph"), "--golden-graph", str(runs / "u" / "graph")]
    rc, doc = _json(capsys, str(f0), str(u0), *graphs)
    first = doc["first_divergence"]
    assert main(["compare", str(f0), str(u0), *graphs, "--html", str(tmp_path / "c.html")]) == 1
    out = capsys.readouterr().out
    html = (tmp_path / "c.html").read_text()
    for value in (first["cosine"], first["max_abs_error"]):
        assert f"{value:.6f}" in out and f"{value:.6f}" in html, value


def test_no_drift_note_when_the_earliest_step_was_the_one_compared(runs, capsys, tmp_path):
    """My side holds steps 0 and 2, the golden only step 0: step 0 is compared (the only one both have), so the
    note advising --iteration earliest would send the user to rerun for nothing."""
    import shutil

    golden = tmp_path / "u"
    shutil.copytree(runs / "u" / "dump", golden)
    shutil.rmtree(_leaf(golden, 2))
    rc, doc = _json(capsys, str(runs / "f" / "dump"), str(golden), "--my-graph", str(runs / "f" / "graph"),
                    "--golden-graph", str(runs / "u" / "graph"))
    assert rc == 1 and doc["first_divergence"]["op"] == "ce_LogSoftmaxV2"
    assert not any("--iteration earliest" in n for n in doc["notes"]), doc["notes"]


def test_fused_against_unfused_dumps_without_a_graph_say_a_graph_is_needed(runs, capsys):
    """Matched by name, a fused op meets only the unfused op of its name: its 'divergence' is the fusion itself.
    The result says a graph is needed, and calls the golden op what it is, not 'the ops it replaced'."""
    leaves = [str(_leaf(runs / side / "dump", 0)) for side in ("f", "u")]
    rc, doc = _json(capsys, *leaves)
    note = next(n for n in doc["notes"] if "give the fused side's GE graph (--my-graph)" in n)
    mine = sum(u["side"] == "golden" for u in doc["unmatched"])
    assert note.startswith(f"{mine} of my ops have no golden op of their name and "), note
    assert main(["compare", *leaves]) == rc
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "original ops it replaced" not in out and "compared with:" in out
    # with the fused side's graph the fused ops are mapped: no such note
    rc, doc = _json(capsys, *leaves, "--my-graph", str(runs / "f" / "graph"))
    assert not any("--my-graph" in n for n in doc["notes"])


def test_a_truncated_golden_file_read_for_two_ops_counts_as_one_file(runs, capsys, tmp_path):
    """ce_mul's golden output is also ce_sum's golden input: the file is one, whatever reads it."""
    import shutil

    shutil.copytree(runs / "u", tmp_path / "u")
    leaf_u = _leaf(runs / "u" / "dump", 0)
    broken = _leaf(tmp_path / "u" / "dump", 0)
    (victim,) = broken.glob("Mul.ce_mul.*")
    victim.write_bytes(victim.read_bytes()[:100])
    args = [str(leaf_u), str(broken), "--my-graph", str(runs / "u" / "graph"), "--golden-graph",
            str(tmp_path / "u" / "graph")]
    rc, doc = _json(capsys, *args)
    assert len([u for u in doc["unmatched"] if u.get("side") == "golden" and "ce_" in u["op"]]) >= 2
    assert main(["compare", *args]) == 2
    assert "error: 1 dump file(s) could not be read" in capsys.readouterr().err
