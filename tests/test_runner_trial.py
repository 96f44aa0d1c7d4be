"""One execution: the environment/placeholder contract, logs, timeouts that leave no orphans, interrupts."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from fusebisect.errors import UsageError
from fusebisect.runner.trial import Execution, ProcessRegistry, TrialPaths, substitute

RECORDER = textwrap.dedent('''
    import json, os, sys
    keys = ["FUSEBISECT_SWITCH_FILE", "FUSEBISECT_TRIAL_DIR", "FUSEBISECT_DUMP_DIR", "ASCEND_WORK_PATH",
            "DUMP_GE_GRAPH", "DUMP_GRAPH_LEVEL", "DUMP_GRAPH_PATH", "ASCEND_RT_VISIBLE_DEVICES", "USER_VAR"]
    trial = os.environ["FUSEBISECT_TRIAL_DIR"]
    record = {"env": {k: os.environ.get(k) for k in keys}, "argv": sys.argv[1:], "cwd": os.getcwd(),
              "listing": sorted(os.listdir(trial))}
    print(json.dumps(record))
    print("to stderr", file=sys.stderr)
''')


def _paths(tmp_path: Path) -> TrialPaths:
    sw = tmp_path / "switch" / "fusion_switch.0123456789ab.cfg"
    sw.parent.mkdir()
    sw.write_text('{"Switch": {}}\n')
    return TrialPaths(trial_dir=tmp_path / "trials" / "0001-0123456789ab", switch_file=sw)


def test_env_placeholders_cwd_and_logs(tmp_path):
    script = tmp_path / "rec.py"
    script.write_text(RECORDER)
    paths = _paths(tmp_path)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    ex = Execution(command=[sys.executable, str(script), "--cfg={switch_file}", "{trial_dir}", "{dump_dir}/x",
                            "{not_a_placeholder}"],
                   paths=paths, base_env=dict(os.environ, USER_VAR="kept"), cwd=str(cwd))
    result = ex.run()
    assert result.exit_code == 0 and not result.timed_out
    rec = json.loads(paths.stdout_path.read_text())
    t = str(paths.trial_dir)
    assert rec["env"] == {
        "FUSEBISECT_SWITCH_FILE": str(paths.switch_file), "FUSEBISECT_TRIAL_DIR": t,
        "FUSEBISECT_DUMP_DIR": t + "/dump", "ASCEND_WORK_PATH": t, "DUMP_GE_GRAPH": "2", "DUMP_GRAPH_LEVEL": "3",
        "DUMP_GRAPH_PATH": t + "/graph", "ASCEND_RT_VISIBLE_DEVICES": None, "USER_VAR": "kept"}
    assert rec["argv"] == [f"--cfg={paths.switch_file}", t, t + "/dump/x", "{not_a_placeholder}"]
    assert rec["cwd"] == str(cwd)
    # a fresh dir: only what we created before the job started
    assert rec["listing"] == ["dump", "graph", "stderr.log", "stdout.log"]
    assert paths.stderr_path.read_text() == "to stderr\n"


def test_no_graph_dump_and_device(tmp_path):
    script = tmp_path / "rec.py"
    script.write_text(RECORDER)
    paths = _paths(tmp_path)
    base = {k: v for k, v in os.environ.items() if not k.startswith("DUMP_")}
    Execution(command=[sys.executable, str(script)], paths=paths, base_env=base, graph_dump=False,
              device="3").run()
    env = json.loads(paths.stdout_path.read_text())["env"]
    assert env["DUMP_GE_GRAPH"] is None and env["DUMP_GRAPH_PATH"] is None
    assert env["ASCEND_RT_VISIBLE_DEVICES"] == "3"


def test_trial_dir_must_be_fresh(tmp_path):
    paths = _paths(tmp_path)
    paths.trial_dir.mkdir(parents=True)
    with pytest.raises(FileExistsError):
        Execution(command=[sys.executable, "-c", "pass"], paths=paths).run()


def test_missing_program_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot run command"):
        Execution(command=[str(tmp_path / "nope")], paths=_paths(tmp_path)).run()


def test_a_file_exec_cannot_start_is_a_usage_error_not_an_internal_error(tmp_path):
    """An executable empty file: exec fails with ENOEXEC, which is no FileNotFoundError/PermissionError."""
    job = tmp_path / "empty.sh"
    job.write_bytes(b"")
    job.chmod(0o755)
    with pytest.raises(UsageError, match=r"Exec format error \(a script needs a #! line\)"):
        Execution(command=[str(job)], paths=_paths(tmp_path)).run()


SPAWNER = textwrap.dedent('''
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    open(sys.argv[1], "w").write(str(child.pid))
    print("spawned", flush=True)
    time.sleep(300)
''')


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return _gone(pid)


def test_timeout_kills_the_whole_group_no_orphans(tmp_path):
    script = tmp_path / "spawn.py"
    script.write_text(SPAWNER)
    pidfile = tmp_path / "grandchild.pid"
    paths = _paths(tmp_path)
    result = Execution(command=[sys.executable, str(script), str(pidfile)], paths=paths, timeout=1.0).run()
    assert result.timed_out and result.exit_code is None
    grandchild = int(pidfile.read_text())
    assert _wait_gone(grandchild), "the grandchild survived the timeout"


def test_leftover_group_members_are_killed_after_a_normal_exit(tmp_path):
    script = tmp_path / "daemon.py"
    script.write_text(textwrap.dedent('''
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        open(sys.argv[1], "w").write(str(child.pid))
    '''))
    pidfile = tmp_path / "left.pid"
    result = Execution(command=[sys.executable, str(script), str(pidfile)], paths=_paths(tmp_path)).run()
    assert result.exit_code == 0
    assert _wait_gone(int(pidfile.read_text()))


def test_a_process_that_left_the_group_is_killed_too(tmp_path):
    """A job can detach a process with setsid (a new session and group): it still carries the trial's
    environment, and must not outlive the timed-out execution (it would hold the device)."""
    script = tmp_path / "detach.py"
    script.write_text(textwrap.dedent('''
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
        open(sys.argv[1], "w").write(str(child.pid))
        time.sleep(300)
    '''))
    pidfile = tmp_path / "detached.pid"
    result = Execution(command=[sys.executable, str(script), str(pidfile)], paths=_paths(tmp_path),
                       timeout=1.5).run()
    assert result.timed_out
    assert _wait_gone(int(pidfile.read_text())), "the detached process survived the timeout"


def test_registry_kill_all_interrupts_running_executions(tmp_path):
    script = tmp_path / "spawn.py"
    script.write_text(SPAWNER)
    pidfile = tmp_path / "grandchild.pid"
    registry = ProcessRegistry()
    paths = _paths(tmp_path)
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("r", Execution(
        command=[sys.executable, str(script), str(pidfile)], paths=paths).run(registry)))
    thread.start()
    deadline = time.monotonic() + 10
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    registry.kill_all()
    thread.join(10)
    assert box["r"].interrupted and box["r"].exit_code is None
    assert _wait_gone(int(pidfile.read_text()))
    # once stopping, nothing new starts
    later = Execution(command=[sys.executable, "-c", "pass"], paths=TrialPaths(tmp_path / "t2", None)).run(registry)
    assert later.interrupted


def test_substitute_without_switch_file():
    paths = TrialPaths(trial_dir=Path("/t"), switch_file=None)
    assert substitute(["a{switch_file}b", "{dump_dir}"], paths) == ["ab", "/t/dump"]


def test_substitute_replaces_each_placeholder_once_even_inside_a_substituted_path():
    """A workdir whose name holds placeholder text: the paths put in are never substituted again."""
    paths = TrialPaths(trial_dir=Path("/w{dump_dir}/t"), switch_file=Path("/w{trial_dir}/s.cfg"))
    assert substitute(["--cfg={switch_file}", "{trial_dir}:{dump_dir}", "{other}"], paths) == [
        "--cfg=/w{trial_dir}/s.cfg", "/w{dump_dir}/t:/w{dump_dir}/t/dump", "{other}"]


def test_the_group_file_marks_the_trial_before_its_job_starts(tmp_path, monkeypatch):
    """A kill -9 between starting the job and learning its group id must still leave a mark for the rerun (it
    finds the job by its trial dir); the mark is gone once the job has ended."""
    import subprocess

    from fusebisect.runner import trial as trial_module

    group = tmp_path / "t.pgid"
    seen = []
    real = subprocess.Popen

    def spy(*args, **kwargs):
        seen.append(group.read_text() if group.exists() else None)
        return real(*args, **kwargs)

    monkeypatch.setattr(trial_module.subprocess, "Popen", spy)
    result = trial_module.run_process(["true"], env=dict(os.environ), stdout=tmp_path / "o", stderr=tmp_path / "e",
                                      group_file=group)
    assert result.exit_code == 0 and seen == ["starting\n"] and not group.exists()
    with pytest.raises(UsageError):
        trial_module.run_process([str(tmp_path / "missing")], env=dict(os.environ), stdout=tmp_path / "o",
                                 stderr=tmp_path / "e", group_file=group)
    assert not group.exists()
