"""The simulator's ``--overflow`` output, found and explained end to end by ``fusebisect overflow``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fusebisect.cli.app import main


def run_sim(tmp_path: Path, layout: str, encoding: str) -> tuple[Path, Path]:
    dump, graphs = tmp_path / "dump", tmp_path / "graphs"
    env = dict(os.environ, DUMP_GE_GRAPH="2", DUMP_GRAPH_PATH=str(graphs), ASCEND_WORK_PATH=str(tmp_path))
    for key in list(env):
        if key.startswith("FUSEBISECT_"):
            del env[key]
    proc = subprocess.run([sys.executable, "-m", "fusebisect.sim", "train", "--overflow", "--steps", "2",
                           "--dump-step", "1", "--dump-path", str(dump), "--opdebug-layout", layout,
                           "--dump-encoding", encoding],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(dump.rglob("Opdebug.Node_OpDebug.*")), "the simulator wrote no Opdebug record"
    return dump, graphs


@pytest.mark.slow
@pytest.mark.parametrize("layout,encoding,unit", [("new", "binary", "AIC"), ("old", "nano", "AI Core"),
                                                  ("new", "protobuf", "AIC")])
def test_simulator_overflow_found_and_explained(tmp_path, capsys, layout, encoding, unit):
    dump, graphs = run_sim(tmp_path, layout, encoding)
    assert main(["overflow", str(dump), "--graph", str(graphs), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["problems"] == [] and doc["overflows"]
    first = doc["overflows"][0]
    assert first["unit"] == unit and first["status"] != 0 and first["meanings"]
    assert first["dump_file"] and Path(first["dump_file"]).parent == Path(first["opdebug_file"]).parent
    assert first["op_type"].startswith("MatMul") and first["pass_names"]
    assert not any(s["abnormal"] for s in first["inputs"])
    out = first["outputs"][0]
    assert out["dtype"] == "float16" and (out["pos_inf"] + out["neg_inf"] + out["saturated"]) > 0
    assert "float32" in first["diagnosis"] and f"fusebisect cfg off {first['pass_names'][0]}" in first["diagnosis"]
    # the human view says the same
    assert main(["overflow", str(dump), "--graph", str(graphs)]) == 1
    text = capsys.readouterr().out
    assert f"[{first['op_type']}] {first['op_name']}" in text and "fusion rules:" in text
