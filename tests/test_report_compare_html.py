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
    assert "First overflow:</b> MatMulV2 fc1_MatMul" in html
    assert "Diagnosis:" in html and "MatMulBiasAddFusionPass" in html
    assert "<td>inf</td>" in html  # an infinite max is shown as such, not as a blank
    assert not re.search(r"https?://", html)
