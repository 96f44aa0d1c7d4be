"""The simulator's accuracy check (the demo's --check command): git-bisect exit codes on real losses."""

import subprocess
import sys

from fusebisect.sim.check import main as check_main


def _train(tmp_path, *extra):
    proc = subprocess.run([sys.executable, "-m", "fusebisect.sim", "train", "--steps", "8", *extra],
                          capture_output=True, text=True, cwd=tmp_path, check=True)
    log = tmp_path / f"log{len(list(tmp_path.glob('log*')))}.txt"
    log.write_text(proc.stdout)
    return log


def test_check_passes_correct_kernels_and_fails_a_faulty_one(tmp_path, capsys):
    assert check_main(["--log", str(_train(tmp_path))]) == 0
    assert check_main(["--log", str(_train(tmp_path, "--faulty", "MatMulBiasAddFusionPass"))]) == 1
    assert "bad" in capsys.readouterr().out


def test_check_reads_the_trial_dir_and_skips_without_losses(tmp_path, monkeypatch):
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "stdout.log").write_text("compile failed\n")
    monkeypatch.setenv("FUSEBISECT_TRIAL_DIR", str(trial))
    assert check_main([]) == 125
    assert check_main(["--log", str(tmp_path / "missing.log")]) == 125


def test_a_loss_that_is_no_number_is_a_skip_not_a_crash_read_as_bad(tmp_path, capsys):
    """'step 1 loss n/a' matched the loss line but is no number: one line and 125 (git bisect's skip); a
    traceback exits 1, which --check reads as BAD."""
    log = tmp_path / "bad.log"
    log.write_text("step 0 loss 1.457685\nstep 1 loss n/a\n")
    assert check_main(["--log", str(log)]) == 125
    err = capsys.readouterr().err
    assert err == f"check: {log}: step 1's loss 'n/a' is not a number\n"


def test_a_check_that_cannot_run_aborts_the_run_instead_of_judging_the_job_bad(tmp_path):
    """Its usage errors exited 2, which `fusebisect run --check` reads as BAD (1-127): a check given a bad
    --rtol made every run bad and the run ended not_fusion. It exits 255, outside 0-127: the run aborts."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "FUSEBISECT_TRIAL_DIR"}
    sim_check = [sys.executable, "-m", "fusebisect.sim", "check"]
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "run.log").write_text("step 0 loss 2.0\n")
    for argv in (["--rtol", "-1"], ["--bogus"], [], ["--log", str(tmp_path / "fifo")], ["--log", str(tmp_path)],
                 ["--log", str(tmp_path / "run.log"), "--seed", "-1"]):
        proc = subprocess.run([*sim_check, *argv], capture_output=True, text=True, cwd=tmp_path, env=env)
        assert proc.returncode == 255 and "Traceback" not in proc.stderr, (argv, proc.stderr)
    assert "255 the check cannot run" in " ".join(subprocess.run(
        [*sim_check, "--help"], capture_output=True, text=True, check=True).stdout.split())
    proc = subprocess.run([sys.executable, "-m", "fusebisect", "run", "--json", "--check",
                           f"{sys.executable} -m fusebisect.sim check --rtol -1", "--workdir", "w", "--",
                           sys.executable, "-m", "fusebisect.sim", "train", "--steps", "2", "--faulty",
                           "GeluFusionPass"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 1 and "--check exited 255: outside exit codes 0-127, aborting" in proc.stderr
    assert not (tmp_path / "w" / "result.json").exists()   # no verdict, no not_fusion
    assert "not_fusion" not in proc.stdout
