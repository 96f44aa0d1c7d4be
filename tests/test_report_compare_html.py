"""`fusebisect compare --html`: the compare report uses the shared HTML building blocks."""

import re
import subprocess
import sys

from fusebisect.cli.app import main


def _sim(cwd, *args):
    env_args = {"DUMP_GE_GRAPH": "2", "DUMP_GRAPH_PATH": "g"}
    import os

    subprocess.run([sys.executable, "-m", "fusebisect.sim", "train", "--steps", "2", "--dump-step", "0",
                    "--dump-path", "d", *args], cwd=cwd, env={**os.environ, **env_args}, check=True,
                   capture_output=True)


def test_compare_html_marks_the_first_divergence(tmp_path):
    on, off = tmp_path / "on", tmp_path / "off"
    on.mkdir()
    off.mkdir()
    cfg = tmp_path / "off.cfg"
    cfg.write_text('{"Switch":{"GraphFusion":{"ALL":"off"},"UBFusion":{"ALL":"off"}}}')
    _sim(on, "--faulty", "MatMulBiasAddFusionPass")
    _sim(off, "--fusion-switch-file", str(cfg))
    out = tmp_path / "r.html"
    rc = main(["--quiet", "compare", str(on / "d"), str(off / "d"), "--my-graph", str(on / "g"), "--golden-graph",
               str(off / "g"), "--html", str(out), "--json"])
    assert rc == 1
    html = out.read_text()
    assert "First divergence:" in html and "MatMulBiasAddFusionPass" in html
    assert html.count("<svg") == 1 and "first divergence" in html
    assert not re.search(r"https?://", html)


def test_overflow_html_names_the_first_overflow(tmp_path):
    import os

    subprocess.run([sys.executable, "-m", "fusebisect.sim", "train", "--steps", "2", "--overflow", "--dump-path",
                    "d"], cwd=tmp_path, env={**os.environ, "DUMP_GE_GRAPH": "2", "DUMP_GRAPH_PATH": "g"},
                   check=True, capture_output=True)
    out = tmp_path / "o.html"
    assert main(["--quiet", "overflow", str(tmp_path / "d"), "--graph", str(tmp_path / "g"), "--html", str(out),
                 "--json"]) == 1
    html = out.read_text()
    assert "First overflow:</b> MatMulV2 fc1_MatMul (AIC, status 256)" in html
    assert main(["--quiet", "overflow", str(tmp_path / "d"), "--scan", "--html", str(out), "--json"]) == 1
    scanned = out.read_text()
    assert "First overflow:</b> MatMulV2 fc1_MatMul (found by scanning the op dumps)" in scanned
    assert "which --scan does not read" in scanned   # the notes the terminal prints on stderr
    assert "Diagnosis:" in html and "MatMulBiasAddFusionPass" in html
    assert "<td>inf</td>" in html  # an infinite max is shown as such, not as a blank
    assert not re.search(r"https?://", html)


def test_reports_are_never_written_over_or_into_the_inputs(tmp_path, capsys):
    """Inputs are read-only: an output path naming a dump, a golden file or a graph, or lying inside a dump
    directory, is a usage error, and the input is left as it was."""
    import hashlib
    import os

    subprocess.run([sys.executable, "-m", "fusebisect.sim", "train", "--steps", "2", "--overflow", "--dump-path",
                    "d", "--dump-step", "0"], cwd=tmp_path,
                   env={**os.environ, "DUMP_GE_GRAPH": "2", "DUMP_GRAPH_PATH": "g"}, check=True, capture_output=True)
    dumps = sorted(p for p in (tmp_path / "d").rglob("*") if p.is_file())
    graph = next(p for p in (tmp_path / "g").rglob("*") if p.is_file())

    def digest():
        return [hashlib.sha256(p.read_bytes()).hexdigest() for p in dumps + [graph]]

    before = digest()
    victim = next(p for p in dumps if p.name.startswith("MatMulV2"))
    cases = [
        (["overflow", str(tmp_path / "d"), "--html", str(victim)], "--html"),
        (["overflow", str(tmp_path / "d"), "--graph", str(graph), "--html", str(graph)], "--html"),
        (["compare", str(tmp_path / "d"), str(tmp_path / "d"), "--csv", str(victim)], "--csv"),
        (["compare", str(tmp_path / "d"), str(tmp_path / "d"), "--html", str(victim.parent)], "--html"),
        (["compare", str(tmp_path / "d"), str(tmp_path / "d"), "--my-graph", str(graph), "--csv", str(graph)],
         "--csv"),
        (["dump", "convert", str(tmp_path / "d"), "--out", str(victim.parent / "npy")], "--out"),
    ]
    # a single input file: the files beside it are the user's dumps too (one Opdebug file is matched against the
    # op dumps of its directory, which --html must not replace)
    opdebug = next(p for p in dumps if p.name.startswith("Opdebug."))
    cases += [
        (["overflow", str(opdebug), "--html", str(victim)], "--html"),
        (["compare", str(victim), str(victim), "--csv", str(opdebug)], "--csv"),
        (["compare", str(victim), str(victim), "--html", str(opdebug)], "--html"),
    ]
    for argv, flag in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"error: {flag} " in err and "which is only read; write it elsewhere" in err, err
    assert digest() == before
    assert not (victim.parent / "npy").exists()
    # a new file that the dump tree's readers would take for data: mapping.csv (hashed names), a .npy (golden)
    for name in ("mapping.csv", "x.npy"):
        assert main(["compare", str(tmp_path / "d"), str(tmp_path / "d"), "--csv", str(victim.parent / name)]) == 2
        err = capsys.readouterr().err
        assert "where a file of that name would be read as data; write it elsewhere" in err, err
        assert not (victim.parent / name).exists()
    # a new report file beside the dumps is fine (running from inside the dump directory), and is no dump; so is
    # writing it again
    for _ in range(2):
        assert main(["--quiet", "overflow", str(tmp_path / "d"), "--html", str(victim.parent / "report.html")]) == 1
    assert main(["--quiet", "overflow", str(tmp_path / "d"), "--json"]) == 1
    assert "report.html" not in capsys.readouterr().err and digest() == before
    # a symbolic link loop is a one-line error naming the option
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert main(["overflow", str(tmp_path / "d"), "--html", str(tmp_path / "loop" / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "error: --html " in err and "Traceback" not in err and "internal error" not in err


def test_a_report_path_in_a_missing_directory_is_an_error_not_a_new_directory(tmp_path, capsys):
    """A mistyped --html/--csv path must not create directories (run -o refuses the same)."""
    import os

    subprocess.run([sys.executable, "-m", "fusebisect.sim", "train", "--steps", "2", "--overflow", "--dump-path",
                    "d"], cwd=tmp_path, env={**os.environ, "DUMP_GE_GRAPH": "2", "DUMP_GRAPH_PATH": "g"},
                   check=True, capture_output=True)
    missing = tmp_path / "no" / "such"
    for argv, flag in ((["overflow", str(tmp_path / "d")], "--html"),
                       (["compare", str(tmp_path / "d"), str(tmp_path / "d")], "--csv"),
                       (["compare", str(tmp_path / "d"), str(tmp_path / "d")], "--html")):
        assert main([*argv, flag, str(missing / "r.out")]) == 2
        assert f"error: {flag} {missing / 'r.out'}: directory {missing} does not exist" in \
            " ".join(capsys.readouterr().err.split())
        assert main([*argv, flag, str(tmp_path)]) == 2
        assert "is a directory; give a file path" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()


def test_large_comparisons_show_the_rows_around_the_first_divergence():
    """A real network dumps thousands of tensors: the compare HTML's table (2000 rows) and the run report's chart
    (the journal keeps 2000) hold those around the first divergence, not the first ones, and say so."""
    from types import SimpleNamespace as NS

    from fusebisect.report.html import render_compare
    from fusebisect.runner.oracles import summarize_dumps

    rows = [{"index": i, "op": f"op{i}", "tensor": f"op{i}:output:0", "golden": f"op{i}",
             "cosine": 0.5 if i == 2600 else 1.0, "max_abs_error": 0.0, "reason": ""} for i in range(3000)]
    first = {"op": "op2600", "tensor": "op2600:output:0", "cosine": 0.5}
    html = render_compare(rows, first, unmatched=[], cosine=0.99, mode="npu_vs_npu", my="m", golden="g")
    assert '<tr class="hl"><td>2600</td><td>op2600</td>' in html
    assert "rows 1001–3000 of 3000, around the first divergence; --csv FILE writes all" in html
    html = render_compare(rows, first, unmatched=[], cosine=0.99, mode="npu_vs_npu", my="m", golden="g", csv="r.csv")
    assert "the CSV r.csv has all" in html
    report_rows = [NS(my_op=r["op"], tensor=r["tensor"], metrics={"CosineSimilarity": r["cosine"]}, compared=True)
                   for r in rows]
    report = NS(rows=report_rows, first_divergence=first, notes=[], execution_order=lambda: report_rows)
    summary = summarize_dumps(report)
    assert (summary["rows_total"], summary["rows_from"], len(summary["rows"])) == (3000, 1000, 2000)
    assert any(r["tensor"] == "op2600:output:0" for r in summary["rows"])
