"""The simulated training target: losses, switch-file precedence, faults, crash-when, flaky, determinism."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import numpy as np
import pytest

from fusebisect.rules.catalog import default_catalog
from fusebisect.rules.fired import read_fusion_result
from fusebisect.rules.switchfile import SwitchConfig, all_off_config, off_config, write_switch_file
from fusebisect.sim import RULE_FAULTS, RULE_KINDS, RULES
from fusebisect.sim.cli import main as sim_main
from fusebisect.sim.options import resolve
from fusebisect.sim.train import run

LINE = re.compile(r"^step (\d+) loss (-?[0-9.]+|nan|inf)$")
CATALOG = default_catalog()
DEFAULT_OFF = [r for r in RULES if CATALOG.get(r).default == "off"]
FORBIDDEN = [r for r in RULES if not CATALOG.get(r).can_disable]


def sim(tmp_path: Path, *args: str, env: dict | None = None):
    """Run the simulator in-process; returns (RunResult, stdout text)."""
    base = {"ASCEND_WORK_PATH": str(tmp_path)}
    base.update(env or {})
    out = io.StringIO()
    result = run(resolve(list(args), base), stdout=out, stderr=io.StringIO())
    return result, out.getvalue()


def cfg(tmp_path: Path, name: str, config: SwitchConfig) -> str:
    return str(write_switch_file(tmp_path / name, config, force=True))


@pytest.fixture(scope="module")
def switches(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("cfg")
    return {
        "off": cfg(d, "off.cfg", all_off_config(CATALOG)),
        "on": cfg(d, "on.cfg", SwitchConfig(graph={r: "on" for r in DEFAULT_OFF if RULE_KINDS[r] == "GraphFusion"},
                                             ub={r: "on" for r in DEFAULT_OFF if RULE_KINDS[r] == "UBFusion"})),
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory, switches) -> list[float]:
    """The all-fusion-off losses."""
    result, _ = sim(tmp_path_factory.mktemp("ref"), "--fusion-switch-file", switches["off"])
    return result.losses


def rel(a: list[float], b: list[float]) -> float:
    return max(abs(x / y - 1.0) for x, y in zip(a, b))


def test_rules_are_real_catalog_rules_of_both_kinds():
    assert len(RULES) >= 12
    for r in RULES:
        entry = CATALOG.get(r)
        assert entry is not None and entry.kind == RULE_KINDS[r], r
        assert RULE_FAULTS[r]
    assert {"GraphFusion", "UBFusion"} <= set(RULE_KINDS.values())
    assert FORBIDDEN and DEFAULT_OFF


def test_default_run_prints_losses_and_fusion_result(tmp_path):
    result, text = sim(tmp_path)
    lines = text.splitlines()
    assert len(lines) == 20
    assert [int(LINE.match(line).group(1)) for line in lines] == list(range(20))
    losses = [float(LINE.match(line).group(2)) for line in lines]
    assert losses[-1] < losses[0] * 0.7  # it learns
    stats = {s.name: s for s in read_fusion_result(tmp_path / "fusion_result.json")}
    for r in RULES:
        if r in DEFAULT_OFF:
            assert r not in stats
        else:
            assert stats[r].effect_times > 0 and stats[r].kind == RULE_KINDS[r], r


def test_correct_fusion_stays_close_to_fusion_off(tmp_path, switches, reference):
    fused, _ = sim(tmp_path, "--fusion-switch-file", switches["on"])
    assert set(fused.compiled.fired()) == set(RULES)
    assert rel(fused.losses, reference) < 1e-3
    assert fused.losses != reference  # the fused kernels really compute differently (float16 parts)


@pytest.mark.parametrize("rule", [r for r in RULES if r != "MulSquareFusionPass"])
def test_each_fault_makes_the_loss_drift(tmp_path, switches, reference, rule):
    faulty, text = sim(tmp_path, "--fusion-switch-file", switches["on"], "--faulty", rule)
    assert rel(faulty.losses, reference) > 0.01, rule
    assert all(np.isfinite(faulty.losses)) and len(text.splitlines()) == 20


def test_fault_only_shows_where_its_kernel_runs(tmp_path, reference):
    # MulSquare's Square ops are absorbed by LayerNorm and Gelu: its fault is invisible by default
    r1, _ = sim(tmp_path, "--faulty", "MulSquareFusionPass")
    clean, _ = sim(tmp_path)
    assert r1.losses == clean.losses
    # with LayerNorm fusion off its float16 Square saturates on the large rows
    no_ln = cfg(tmp_path, "noln.cfg", off_config(["LayerNormFusionPass"], CATALOG))
    r2, _ = sim(tmp_path, "--faulty", "MulSquareFusionPass", "--fusion-switch-file", no_ln)
    assert rel(r2.losses, reference) > 0.01
    # and a faulty rule that is switched off changes nothing
    no_gelu = cfg(tmp_path, "nogelu.cfg", off_config(["GeluFusionPass"], CATALOG))
    r3, _ = sim(tmp_path, "--faulty", "GeluFusionPass", "--fusion-switch-file", no_gelu)
    r4, _ = sim(tmp_path, "--fusion-switch-file", no_gelu)
    assert r3.losses == r4.losses


def test_a_switch_file_cann_cannot_parse_fails_the_compile(tmp_path):
    """A trailing comma or a comment is read by fusebisect's lenient reader, but FE rejects the file (and the
    old-format reading it falls back to): the simulated compile fails instead of applying it."""
    bad = tmp_path / "tc.cfg"
    bad.write_text('{"Switch":{"GraphFusion":{"LayerNormFusionPass":"off",}}}')
    err = io.StringIO()
    result = run(resolve(["--fusion-switch-file", str(bad)], {"ASCEND_WORK_PATH": str(tmp_path)}),
                 stdout=io.StringIO(), stderr=err)
    assert result.exit_code == 1 and not result.losses
    assert f"Failed to read this file[{bad}]" in err.getvalue() and "1:54: trailing comma" in err.getvalue()
    assert not (tmp_path / "fusion_result.json").exists()


def test_interaction_fault_needs_both_rules(tmp_path, reference):
    pair = "LayerNormFusionPass+MulAddFusionPass"
    both, _ = sim(tmp_path, "--faulty", pair)
    assert rel(both.losses, reference) > 0.01
    assert both.active_faults == {"LayerNormFusionPass", "MulAddFusionPass"}
    for rule in pair.split("+"):
        one_off = cfg(tmp_path, f"{rule}.cfg", off_config([rule], CATALOG))
        r, _ = sim(tmp_path, "--faulty", pair, "--fusion-switch-file", one_off)
        clean, _ = sim(tmp_path, "--fusion-switch-file", one_off)
        assert r.losses == clean.losses and not r.active_faults


def test_switch_precedence(tmp_path):
    # forbidden-close passes ignore "off", even named explicitly
    named = cfg(tmp_path, "named.cfg", SwitchConfig(graph={r: "off" for r in FORBIDDEN}))
    sim(tmp_path, "--fusion-switch-file", named)
    stats = {s.name for s in read_fusion_result(tmp_path / "fusion_result.json")}
    assert set(FORBIDDEN) <= stats
    # user ALL:on does not turn on a built-in off default; an explicit "on" does
    all_on = cfg(tmp_path, "allon.cfg", SwitchConfig(graph={"ALL": "on"}, ub={"ALL": "on"}))
    sim(tmp_path, "--fusion-switch-file", all_on)
    stats = {s.name for s in read_fusion_result(tmp_path / "fusion_result.json")}
    assert not set(DEFAULT_OFF) & stats
    explicit = cfg(tmp_path, "explicit.cfg", SwitchConfig(graph={"SoftmaxSmallOpFusionPass": "on"},
                                                           ub={"AutoSingleReduceFusionPass": "on"}))
    sim(tmp_path, "--fusion-switch-file", explicit)
    stats = {s.name: s for s in read_fusion_result(tmp_path / "fusion_result.json")}
    assert set(DEFAULT_OFF) <= set(stats)
    # an exact name beats ALL; ALL:off closes the rest
    mixed = cfg(tmp_path, "mixed.cfg", SwitchConfig(graph={"ALL": "off", "GeluFusionPass": "on"}, ub={"ALL": "off"}))
    sim(tmp_path, "--fusion-switch-file", mixed)
    stats = {s.name for s in read_fusion_result(tmp_path / "fusion_result.json")}
    assert stats == set(FORBIDDEN) | {"GeluFusionPass"}


def test_legacy_switch_file_and_env_variable(tmp_path):
    legacy = tmp_path / "legacy.cfg"
    legacy.write_text("GeluFusionPass:off\nTbeEltwiseFusionPass:off\n")
    sim(tmp_path, env={"FUSEBISECT_SWITCH_FILE": str(legacy)})
    stats = {s.name for s in read_fusion_result(tmp_path / "fusion_result.json")}
    assert "GeluFusionPass" not in stats and "TbeEltwiseFusionPass" not in stats and "LayerNormFusionPass" in stats


def test_crash_when_rule_is_off(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    off = cfg(tmp_path, "gelu_off.cfg", off_config(["GeluFusionPass"], CATALOG))
    rc = sim_main(["train", "--crash-when", "GeluFusionPass=off", "--fusion-switch-file", off, "--steps", "2"])
    cap = capsys.readouterr()
    assert rc == 1 and "compile" in cap.err and cap.out == ""
    rc = sim_main(["train", "--crash-when", "GeluFusionPass=off", "--steps", "2"])
    assert rc == 0 and len(capsys.readouterr().out.splitlines()) == 2
    # a forbidden-close rule can never be off
    forbidden_off = cfg(tmp_path, "fc.cfg", SwitchConfig(graph={"AReduceSumFusionPass": "off"}))
    assert sim_main(["train", "--crash-when", "AReduceSumFusionPass=off", "--fusion-switch-file", forbidden_off,
                     "--steps", "1"]) == 0


def test_flaky_is_seeded_and_flips_the_verdict(tmp_path, reference):
    seeds = range(30)
    hits = [sim(tmp_path, "--flaky", "0.5", "--seed", str(s), "--steps", "2")[0].perturbed for s in seeds]
    assert 0 < sum(hits) < len(hits)
    again = [sim(tmp_path, "--flaky", "0.5", "--seed", str(s), "--steps", "2")[0].perturbed for s in seeds]
    assert hits == again
    clean_bad, _ = sim(tmp_path, "--flaky", "1", "--seed", "0")
    assert rel(clean_bad.losses, reference) > 0.01  # a clean job looks bad
    faulty, _ = sim(tmp_path, "--flaky", "0", "--seed", "0", "--faulty", "LayerNormFusionPass")
    faulty_good, _ = sim(tmp_path, "--flaky", "1", "--seed", "0", "--faulty", "LayerNormFusionPass")
    assert rel(faulty.losses, reference) > 0.01 and rel(faulty_good.losses, reference) < 1e-3  # a bad one good


def test_deterministic_and_env_options_with_flags_winning(tmp_path):
    a = sim(tmp_path, "--faulty", "GeluFusionPass")[1]
    b = sim(tmp_path, "--faulty", "GeluFusionPass")[1]
    assert a == b
    env = {"FUSEBISECT_SIM_FAULTY": "GeluFusionPass", "FUSEBISECT_SIM_STEPS": "20"}
    assert sim(tmp_path, env=env)[1] == a
    assert len(sim(tmp_path, "--steps", "3", env=env)[1].splitlines()) == 3
    other = sim(tmp_path, "--faulty", "MulAddFusionPass", env=env)[1]
    assert other != a
    assert sim(tmp_path, "--seed", "7")[1] != sim(tmp_path, "--seed", "8")[1]


def test_usage_errors(tmp_path, capsys):
    assert sim_main(["train", "--faulty", "NoSuchFusionPass", "--steps", "1"]) == 2
    assert "not a simulated rule" in capsys.readouterr().err
    assert sim_main(["train", "--crash-when", "GeluFusionPass", "--steps", "1"]) == 2
    assert sim_main(["train", "--flaky", "1.5"]) == 2
    capsys.readouterr()
    assert sim_main(["train", "--seed", "-1", "--steps", "1"]) == 2     # numpy takes non-negative seeds only
    assert "--seed must be >= 0, got -1" in capsys.readouterr().err
    from fusebisect.cli.app import main
    assert main(["demo", "--seed", "-5"]) == 2
    assert "--seed must be >= 0, got -5" in capsys.readouterr().err
    bad = tmp_path / "bad.cfg"
    bad.write_text('{"Switch": {"GraphFusion": {"GeluFusionPass": "maybe"}}}')
    assert sim_main(["train", "--fusion-switch-file", str(bad)]) == 2
    assert "bad.cfg" in capsys.readouterr().err
    assert sim_main(["nope"]) == 2


def test_help_says_simulator(capsys):
    from fusebisect.cli.app import main

    assert sim_main(["train", "--help"]) == 0
    assert "SIMULATOR for demos and tests" in capsys.readouterr().out
    assert main(["sim", "train", "--help"]) == 0
    assert "SIMULATOR" in capsys.readouterr().out
    assert main(["sim", "--help"]) == 0
    assert "SIMULATED" in capsys.readouterr().out


def test_cli_group_forwards(tmp_path, capsys, monkeypatch):
    from fusebisect.cli.app import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASCEND_WORK_PATH", raising=False)
    assert main(["sim", "train", "--steps", "2", "--faulty", "GeluFusionPass"]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 2
    assert (tmp_path / "fusion_result.json").is_file()
    # its accuracy check, under the same command group: the faulty rule's losses are bad, a clean run's good
    (tmp_path / "faulty.log").write_text(out)
    assert main(["sim", "check", "--log", str(tmp_path / "faulty.log")]) == 1
    assert main(["sim", "train", "--steps", "2"]) == 0
    (tmp_path / "clean.log").write_text(capsys.readouterr().out)
    assert main(["sim", "check", "--log", str(tmp_path / "clean.log")]) == 0


def test_a_dump_path_that_is_a_file_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    from fusebisect.sim.cli import main as sim_main

    monkeypatch.chdir(tmp_path)   # (the job writes its fusion_result.json in the working directory)

    (tmp_path / "afile").write_text("mine")
    assert sim_main(["train", "--steps", "2", "--dump-step", "0", "--dump-path", str(tmp_path / "afile")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Not a directory" in err and "Traceback" not in err
    assert (tmp_path / "afile").read_text() == "mine"


def test_sim_check_refuses_what_would_judge_every_run_or_hang(tmp_path, capsys):
    from fusebisect.sim.cli import main as sim_main

    log = tmp_path / "stdout.log"
    log.write_text("step 0 loss 1.0\n")
    fifo = tmp_path / "ff"
    os.mkfifo(fifo)
    for argv, why in ((["--rtol", "nan"], "--rtol must be a finite number"), (["--rtol", "-1"], "--rtol must be"),
                      (["--steps", "-3"], "--steps must be >= 1")):
        assert sim_main(["check", "--log", str(log), *argv]) == 255   # outside 0-127: not read as BAD
        assert why in capsys.readouterr().err
    assert sim_main(["check", "--log", str(fifo)]) == 255
    assert "a FIFO" in capsys.readouterr().err


def test_options_read_as_cann_and_the_rest_of_the_tool_read_them(tmp_path):
    """dump_step takes CANN's ranges (0|3-5|10); FUSEBISECT_SIM_OVERFLOW=off is off (it turned overflow on);
    DUMP_GE_GRAPH outside 1-3 is refused whatever the value (-1 and 5 were taken)."""
    from fusebisect.errors import UsageError

    opts = resolve(["--dump-step", "0|3-5|10", "--dump-path", str(tmp_path)], {})
    assert opts.dump_steps == [0, 3, 4, 5, 10]
    for bad in ("5-3", "a-b", "-1"):
        with pytest.raises(UsageError, match="--dump-step"):
            resolve(["--dump-step", bad, "--dump-path", str(tmp_path)], {})
    for word, on in (("off", False), ("0", False), ("no", False), ("1", True), ("on", True)):
        assert resolve([], {"FUSEBISECT_SIM_OVERFLOW": word}).overflow is on, word
    for level in ("-1", "5", "x"):
        with pytest.raises(UsageError, match="DUMP_GE_GRAPH must be 1, 2 or 3"):
            resolve([], {"DUMP_GE_GRAPH": level})


def test_dump_options_a_run_cannot_honour_are_said(tmp_path):
    """--overflow replaces the data dump (as CANN's dump_debug does), and a step past the run dumps nothing:
    both said on stderr rather than silently ignored."""
    err = io.StringIO()
    run(resolve(["--steps", "2", "--dump-step", "0,7", "--dump-path", str(tmp_path / "d")],
                {"ASCEND_WORK_PATH": str(tmp_path)}), stdout=io.StringIO(), stderr=err)
    assert "warning: --dump-step 7: the run has only 2 steps (0 to 1); nothing is dumped for it" in err.getvalue()
    err = io.StringIO()
    run(resolve(["--steps", "1", "--overflow", "--dump-step", "0", "--dump-path", str(tmp_path / "o")],
                {"ASCEND_WORK_PATH": str(tmp_path)}), stdout=io.StringIO(), stderr=err)
    assert ("--overflow dumps only the overflowing ops and their Opdebug records (of the --dump-step steps that "
            "overflow): no data dump of every op is written") in err.getvalue()
    # a dump step past the run writes nothing in overflow mode too; several steps' goldens share one directory
    err = io.StringIO()
    run(resolve(["--steps", "1", "--overflow", "--dump-step", "5", "--dump-path", str(tmp_path / "o5")],
                {"ASCEND_WORK_PATH": str(tmp_path)}), stdout=io.StringIO(), stderr=err)
    assert "--dump-step 5: the run has only 1 steps (0 to 0); nothing is dumped for it" in err.getvalue()
    err = io.StringIO()
    run(resolve(["--steps", "3", "--dump-step", "0,2", "--dump-path", str(tmp_path / "d2"), "--dump-golden",
                 str(tmp_path / "g")],
                {"ASCEND_WORK_PATH": str(tmp_path)}), stdout=io.StringIO(), stderr=err)
    assert "--dump-golden with 2 dump steps writes every step's golden .npy into" in err.getvalue()
