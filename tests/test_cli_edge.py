"""The CLI edge: version, help, and how errors become exit codes."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fusebisect import __version__
from fusebisect.cli.app import main
from fusebisect.fsutil import atomic_write_bytes, atomic_write_text


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"fusebisect {__version__}"


def test_unknown_command_is_a_usage_error(capsys):
    assert main(["no-such-command"]) == 2
    assert "No such command" in capsys.readouterr().err


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / "sub" / "f.txt"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["f.txt"]


def test_atomic_write_of_a_name_that_nearly_fills_name_max(tmp_path):
    target = tmp_path / ("d" * 250 + ".npy")      # 254 characters: the temporary name must still fit
    atomic_write_bytes(target, b"x")
    assert target.read_bytes() == b"x" and [p.name for p in tmp_path.iterdir()] == [target.name]


def test_atomic_write_follows_a_link_and_writes_into_a_fifo(tmp_path):
    import os
    import stat
    import threading

    real = tmp_path / "real.cfg"
    real.write_text("old")
    link = tmp_path / "link.cfg"
    link.symlink_to(real)
    atomic_write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"     # the link stays, its target is replaced
    # a path that is not a regular file (a FIFO here; /dev/null alike) is written into, never replaced by a file
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    atomic_write_bytes(fifo, b"through the pipe")
    reader.join(10)
    assert got == [b"through the pipe"] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_atomic_write_gives_normal_permissions(tmp_path, monkeypatch):
    import stat

    import fusebisect.fsutil as fsutil

    monkeypatch.setattr(fsutil, "_UMASK", 0o022)
    fresh = atomic_write_text(tmp_path / "new.txt", "x")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
    fresh.chmod(0o600)
    atomic_write_text(fresh, "y")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600  # an existing file keeps its mode


def test_cli_start_up_does_not_import_numpy():
    import subprocess
    import sys

    # commands that need numpy import it themselves; `--version`, `cfg` and `rules` stay light
    proc = subprocess.run([sys.executable, "-c", "import sys, fusebisect.cli.app; print('numpy' in sys.modules)"],
                          capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"


def test_verbose_run_shows_each_runs_switch_file_and_command(tmp_path, capsys):
    import sys

    from fusebisect.cli.app import main

    rc = main(["--verbose", "run", "--rules", "GeluFusionPass", "--workdir", str(tmp_path / "w"), "--",
               sys.executable, "-c", "pass", "{trial_dir}"])
    assert rc == 1  # a job that never fails: not reproduced
    err = capsys.readouterr().err
    assert "switch file " + str(tmp_path / "w" / "switch") in err
    assert "trial dir   " + str(tmp_path / "w" / "trials") in err
    assert f"command     {sys.executable} -c pass {tmp_path / 'w' / 'trials'}" in err  # placeholder substituted
    main(["run", "--rules", "GeluFusionPass", "--workdir", str(tmp_path / "w2"), "--", sys.executable, "-c", "pass"])
    assert "switch file" not in capsys.readouterr().err


def test_report_refuses_one_file_for_both_formats(tmp_path, capsys):
    out = tmp_path / "report.out"
    assert main(["report", str(tmp_path), "--html", str(out), "--markdown", str(out)]) == 2
    assert "--html and --markdown name the same file" in capsys.readouterr().err and not out.exists()
    # a mistyped directory is an error, not a new directory
    assert main(["report", str(tmp_path), "--markdown", str(tmp_path / "no" / "r.md")]) == 2
    assert f"directory {tmp_path / 'no'} does not exist" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()


def test_a_fifo_given_as_an_input_file_is_an_error_not_a_hang(tmp_path, capsys):
    """Reading a FIFO waits for a writer forever: every reader refuses it, naming it (exit 2)."""
    import os
    import sys

    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    work = tmp_path / "w"
    work.mkdir()
    os.mkfifo(work / "journal.jsonl")
    for argv in (["cfg", "check", str(fifo)], ["cfg", "effective", str(fifo)], ["inspect", "dump", str(fifo)],
                 ["inspect", "graph", str(fifo)], ["rules", "fired", str(fifo)], ["report", str(work)],
                 ["run", "--rules", str(fifo), "--workdir", str(tmp_path / "w2"), "--", sys.executable, "-c", "0"]):
        assert main(argv) == 2, argv
        assert "not a regular file (a FIFO" in capsys.readouterr().err, argv


def test_an_output_to_dev_stdout_writes_into_the_stream_not_over_the_file_behind_it(tmp_path):
    """`--csv /dev/stdout > res.txt`: /dev/stdout leads to res.txt, and replacing that file would leave the
    shell's stdout in an unlinked one (everything printed after lost)."""
    out = tmp_path / "res.txt"
    code = ("import sys; from fusebisect.fsutil import atomic_write_bytes; print('before', flush=True); "
            "atomic_write_bytes('/dev/stdout', b'csv\\n'); print('after', flush=True)")
    with open(out, "wb") as handle:
        subprocess.run([sys.executable, "-c", code], stdout=handle, check=True)
    assert out.read_text().split() == ["before", "csv", "after"]


def test_an_output_through_another_process_descriptor_is_appended_and_files_under_dev_are_replaced(tmp_path):
    """/proc/PID/fd/N names a stream another process writes (its output redirected to a file): appended to.
    A plain file on a filesystem mounted under /dev (/dev/shm, the usual fast scratch) is replaced like any
    other: it was appended to, so a rewritten switch file held two JSON documents."""
    out = tmp_path / "log.txt"
    with open(out, "wb") as handle:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdout=handle)
    try:
        out.write_bytes(b"theirs\n")
        atomic_write_bytes(f"/proc/{proc.pid}/fd/1", b"ours\n")
        assert out.read_bytes() == b"theirs\nours\n"
    finally:
        proc.kill()
        proc.wait()
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        pytest.skip("no writable /dev/shm on this machine")
    target = Path(tempfile.mkdtemp(dir=shm)) / "x.cfg"
    try:
        atomic_write_text(target, "one")
        atomic_write_text(target, "two")
        assert target.read_text() == "two"
    finally:
        shutil.rmtree(target.parent)


def test_an_output_path_through_a_link_and_dotdot_is_written_where_the_kernel_resolves_it(tmp_path):
    (tmp_path / "real" / "deeper").mkdir(parents=True)
    (tmp_path / "lnk").symlink_to(tmp_path / "real" / "deeper")
    atomic_write_text(tmp_path / "lnk" / ".." / "sub" / "x.cfg", "data")   # the kernel: real/sub/x.cfg
    assert (tmp_path / "real" / "sub" / "x.cfg").read_text() == "data" and not (tmp_path / "sub").exists()


def test_a_stdout_in_latin1_or_closed_is_no_internal_error(tmp_path):
    """Rich truncates cells with "…", which Latin-1 lacks: it was an internal error (exit 3) after a whole run.
    The JSON stays exact (escaped); with stdout closed (>&-) --json writes nothing, as the tables do."""
    env = {**os.environ, "PYTHONIOENCODING": "latin-1", "COLUMNS": "40"}
    res = subprocess.run([sys.executable, "-m", "fusebisect", "rules", "list"], capture_output=True, env=env)
    assert res.returncode == 0 and b"internal error" not in res.stderr and b"LayerNormFusionPass" in res.stdout
    cfg = tmp_path / "\u878d\u5408.cfg"   # a Chinese name: \u-escaped in the JSON, not "?"
    cfg.write_text('{"Switch": {"GraphFusion": {"GeluFusionPass": "off"}}}', encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "fusebisect", "cfg", "effective", str(cfg), "--json"],
                         capture_output=True, env=env)
    assert res.returncode == 0 and json.loads(res.stdout)["file"] == str(cfg)
    res = subprocess.run([sys.executable, "-m", "fusebisect", "rules", "list", "--json"], capture_output=True,
                         stdout=None, stdin=subprocess.DEVNULL, env=env, pass_fds=(), close_fds=True,
                         preexec_fn=lambda: os.close(1))
    assert res.returncode == 0 and b"internal error" not in res.stderr


def test_a_switch_file_written_to_dev_stdout_is_streamed_without_backup_or_exists_check(tmp_path):
    """`cfg ... --out /dev/stdout >> app.txt`: --force copied the redirected file to /dev/stdout.bak; without
    --force a fresh `> new.cfg` was refused as an existing file."""
    out = tmp_path / "app.txt"
    out.write_text("existing\n")
    for extra in (["--force"], []):
        with open(out, "ab") as handle:
            res = subprocess.run([sys.executable, "-m", "fusebisect", "cfg", "all-off", "--out", "/dev/stdout", *extra],
                                 stdout=handle, stderr=subprocess.PIPE, text=True)
        assert res.returncode == 0, res.stderr
    assert not Path("/dev/stdout.bak").exists()
    text = out.read_text()
    assert text.startswith("existing\n") and text.count('"Switch"') == 2


def test_a_switch_file_written_through_a_descriptor_to_a_users_file_keeps_its_backup(tmp_path):
    """/dev/fd/3 open on an existing production file stands for that file: refused without --force, never
    appended to (it was, with no .bak, once every /dev/fd/N counted as a stream). --json with --out /dev/stdout
    would mix the file and the JSON on stdout: refused."""
    prod = tmp_path / "prod.cfg"
    prod.write_text('{"Switch": {"GraphFusion": {"GeluFusionPass": "off"}}}\n')
    before = prod.read_bytes()
    with open(prod, "rb") as handle:
        res = subprocess.run([sys.executable, "-m", "fusebisect", "cfg", "off", "LayerNormFusionPass", "--out",
                              f"/dev/fd/{handle.fileno()}"], pass_fds=(handle.fileno(),), capture_output=True,
                             text=True)
    assert res.returncode == 2 and "a descriptor open on the file" in res.stderr, res.stderr
    assert prod.read_bytes() == before
    # a pipe behind the descriptor (a shell's >(cmd)) has nothing to keep: written into
    read_end, write_end = os.pipe()
    try:
        res = subprocess.run([sys.executable, "-m", "fusebisect", "cfg", "off", "LayerNormFusionPass", "--out",
                              f"/dev/fd/{write_end}"], pass_fds=(write_end,), capture_output=True, text=True)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            assert res.returncode == 0 and b'"LayerNormFusionPass": "off"' in pipe.read(), res.stderr
    finally:
        for fd in (read_end, write_end):
            try:
                os.close(fd)
            except OSError:
                pass
    res = subprocess.run([sys.executable, "-m", "fusebisect", "cfg", "all-off", "--out", "/dev/stdout", "--json"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "both would go to stdout" in res.stderr and res.stdout == ""


def test_a_dash_output_is_stdout_where_a_file_can_be_streamed_and_refused_where_it_cannot(tmp_path):
    """`--out -` wrote a file named '-' in the cwd. It is stdout (no file, no backup, no 'wrote' line) for a
    switch file; refused with --json (both on stdout), for a directory output and for run's production file
    (its final run reads it). A file named '-' is written by its full path."""
    base = [sys.executable, "-m", "fusebisect"]
    res = subprocess.run([*base, "cfg", "off", "LayerNormFusionPass", "--out", "-"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert res.returncode == 0 and json.loads(res.stdout) == \
        {"Switch": {"GraphFusion": {"LayerNormFusionPass": "off"}}}, res.stderr
    assert res.stderr == "" and list(tmp_path.iterdir()) == []
    res = subprocess.run([*base, "cfg", "off", "LayerNormFusionPass", "--out", "-", "--json"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert res.returncode == 2 and "both would go to stdout" in res.stderr and res.stdout == ""
    dump = tmp_path / "d" / "Add.add.1.2.3"
    dump.parent.mkdir()
    dump.write_bytes(b"")
    res = subprocess.run([*base, "dump", "convert", str(dump), "--out", "-"], cwd=tmp_path, capture_output=True,
                         text=True)
    assert res.returncode == 2 and "--out -: names stdout; give a directory" in res.stderr, res.stderr
    res = subprocess.run([*base, "run", "--output", "-", "--workdir", str(tmp_path / "w"), "--", "true"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 2 and "--output -: the production switch file needs a file path" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
    res = subprocess.run([*base, "cfg", "off", "LayerNormFusionPass", "--out", str(tmp_path / "-")], cwd=tmp_path,
                         capture_output=True, text=True)
    assert res.returncode == 0 and "LayerNormFusionPass" in (tmp_path / "-").read_text()


def test_closed_streams_keep_the_commands_exit_codes(tmp_path):
    """stderr closed (2>&-): a bad input is still exit 2, not 1 (a write error on the message made it 1, the
    'problems found' code); stdout closed with an output of /dev/stdout writes nothing; a descriptor that is not
    open is named in the error."""
    def closed(fd):
        return lambda: os.close(fd)

    base = [sys.executable, "-m", "fusebisect"]
    missing = str(tmp_path / "missing.cfg")
    res = subprocess.run([*base, "cfg", "check", missing], preexec_fn=closed(2), stdout=subprocess.DEVNULL)
    assert res.returncode == 2
    # as a launcher script leaves it (pyenv's shims): the closed fd 2 reused by a file opened to read
    res = subprocess.run(["bash", "-c", 'exec 2</dev/null; exec "$@"', "bash", *base, "cfg", "check", missing],
                         stdout=subprocess.DEVNULL)
    assert res.returncode == 2
    res = subprocess.run([*base, "cfg", "off", "LayerNormFusionPass", "--out", "/dev/stdout"], preexec_fn=closed(1),
                         stderr=subprocess.PIPE)
    assert res.returncode == 0 and b"internal error" not in res.stderr
    res = subprocess.run([*base, "cfg", "off", "LayerNormFusionPass", "--out", "/dev/fd/7"], capture_output=True,
                         text=True)
    assert res.returncode == 2 and res.stderr == ("fusebisect: error: /dev/fd/7: cannot write it (Bad file "
                                                  "descriptor)\n"), res.stderr


def test_json_output_stays_valid_with_names_that_are_not_unicode(tmp_path, capsys):
    bad = tmp_path / "surr.cfg"
    bad.write_text('{"Switch":{"GraphFusion":{"\\\\ud800":"off"}}}', encoding="utf-8")
    assert main(["cfg", "check", str(bad), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["problems"][0]["code"] == "rule-name"
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/bad\xffname"))
    shutil.copy(Path(__file__).parent.parent / "examples" / "MatMulV2.fc1_MatMul.1.0.1700000000000001", odd)
    assert main(["inspect", "dump", str(odd), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["path"] == str(odd)


def test_a_usage_error_is_one_line_naming_the_option(capsys):
    assert main(["compare", "a", "b", "--top", "0"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "'--top'" in err and "fusebisect compare --help" in err
    # a command group given no command shows its commands, and no empty error line
    for group in ("rules", "cfg", "dump", "inspect", "sim"):
        assert main([group]) == 2
        captured = capsys.readouterr()
        assert "Commands" in captured.out and "error" not in captured.err, (group, captured.err)


def test_a_fifo_given_as_dump_input_is_named_for_what_it_is(tmp_path, capsys):
    fifo = tmp_path / "ff"
    os.mkfifo(fifo)
    (tmp_path / "gold").mkdir()
    for argv in (["compare", str(fifo), str(tmp_path / "gold")], ["overflow", str(fifo)],
                 ["dump", "convert", str(fifo), "--out", str(tmp_path / "out")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "not a regular file (a FIFO" in err and "no such file" not in err, argv


def test_a_run_and_its_reports_in_a_directory_whose_name_is_not_utf8(tmp_path, capsys, monkeypatch):
    """A non-UTF-8 byte in the workdir, an argument or an output path (Python reads it as a lone surrogate)
    reaches the journal, result.json and the HTML as its \\udcff escape, which reads back as the same path."""
    monkeypatch.chdir(tmp_path)
    work = Path(os.fsdecode(b"w\xff"))
    prod = Path(os.fsdecode(b"p\xff.cfg"))
    argv = ["-q", "run", "--json", "--metric", r"loss ([0-9.]+)", "--workdir", str(work), "-o", str(prod), "--",
            sys.executable, "-m", "fusebisect.sim", "train", "--steps", "3", "--faulty", "GeluFusionPass"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["status"] == "found" and first["switch_file"] == str(prod.absolute())
    assert json.loads((work / "result.json").read_text(encoding="utf-8"))["switch_file"] == str(prod.absolute())
    assert main(argv) == 0   # resumes from the journal
    assert json.loads(capsys.readouterr().out)["executions"] == first["executions"]
    # the fusebisect process prints such a path whatever the locale made its streams (a strict UTF-8 one here)
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    done = subprocess.run([sys.executable, "-m", "fusebisect", "report", str(work), "--html", str(work / "again.html")],
                          capture_output=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "\\udcff" in (work / "again.html").read_text(encoding="utf-8")
    shown = subprocess.run([sys.executable, "-m", "fusebisect", "report", str(work)], capture_output=True, env=env)
    assert shown.returncode == 0 and bytes(prod.absolute()) in shown.stdout, shown.stderr


def test_a_reader_that_closes_the_pipe_early_ends_the_command_as_sigpipe_would(tmp_path):
    """`fusebisect report W | head -1`: exit 141 (128 + SIGPIPE, as `yes | head` gives), not rich's 1, which
    reads as 'no culprit' or 'problems found' under pipefail; and no traceback."""
    code = ("import sys; from fusebisect.cli import common\n"
            "for i in range(20000): common.out().print(f'line {i} ' + 'x' * 60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()
    assert proc.wait(timeout=60) == 141
    assert b"Traceback" not in proc.stderr.read()
    # JSON, a switch file written to stdout, the simulator's loss lines: the same (the reader is gone before
    # the command writes anything), and the help pages (typer prints them through consoles of its own)
    for argv in (["rules", "list", "--json"], ["cfg", "all-off"], ["sim", "train", "--steps", "2"], ["--version"],
                 ["--help"], ["cfg", "check", "--help"], ["cfg", "all-off", "--out", "-"]):   # (a file on stdout)
        read_end, write_end = os.pipe()
        os.close(read_end)
        proc = subprocess.Popen([sys.executable, "-m", "fusebisect", *argv], stdout=write_end,
                                stderr=subprocess.PIPE, cwd=tmp_path)   # (the simulator writes its files here)
        os.close(write_end)
        assert proc.wait(timeout=60) == 141, (argv, proc.stderr.read())
        assert b"Traceback" not in proc.stderr.read()


def test_small_usage_errors_are_one_line_and_say_why(tmp_path, capsys):
    """-q with -v contradicts itself; the simulator's bad values are one line (argparse prints its usage); a
    --crash-when rule it does not simulate is refused as --faulty's is; dump convert into a dump file's own
    directory says why that is refused."""
    from fusebisect.compare.dumpfile import write_dump
    from fusebisect.sim.cli import main as sim_main

    assert main(["-q", "-v", "rules", "list"]) == 2
    assert "--quiet and --verbose contradict each other" in capsys.readouterr().err
    for argv, words in ((["train", "--steps", "abc"], "argument --steps: invalid int value: 'abc'"),
                        (["train", "--crash-when", "Nope=off"], "--crash-when: 'Nope' is not a simulated rule")):
        assert sim_main(argv) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, err
    import numpy as np
    dump = write_dump(tmp_path / "d" / "Add.add1.1.0.1700000000000001", op_name="add1",
                      inputs=[np.ones(3, np.float32)], outputs=[np.ones(3, np.float32)])
    assert main(["dump", "convert", str(dump), "--out", str(tmp_path / "d")]) == 2
    assert "the .npy files would mix into its dumps" in capsys.readouterr().err
    # a new directory inside it too (compare walks it), said of the file's directory, not as if it were the input
    assert main(["dump", "convert", str(dump), "--out", str(tmp_path / "d" / "npy")]) == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path / 'd' / 'npy'}: is inside the directory of {dump}, a dump directory" in err, err
    assert not (tmp_path / "d" / "npy").exists()


def test_an_output_that_cannot_be_written_is_named_by_its_flag_or_its_own_path(tmp_path, capsys, monkeypatch):
    """A directory that refuses new files (/proc here; a read-only mount) is said before the work, naming the
    flag; a write that fails later (a full disk) names the file asked for, not the temporary file beside it,
    and leaves nothing behind."""
    import errno

    assert main(["cfg", "all-off", "--out", "/proc/fusebisect-test.cfg"]) == 2
    assert capsys.readouterr().err.strip() == ("fusebisect: error: --out: cannot write in /proc (No such file or "
                                               "directory)")
    real_fsync = os.fsync

    def full_disk(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    out = tmp_path / "all.cfg"
    assert main(["cfg", "all-off", "--out", str(out)]) == 2
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert capsys.readouterr().err.strip() == (f"fusebisect: error: {out}: cannot write it (No space left on device); "
                                               "left as it was")
    assert list(tmp_path.iterdir()) == []


def test_a_symbolic_link_loop_is_called_one_by_every_command(tmp_path, capsys):
    """Every reader of an input path says 'symbolic link loop' (some said 'no such file or directory')."""
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    loop = str(tmp_path / "loop1")
    for argv in (["rules", "fired", loop], ["overflow", loop], ["dump", "convert", loop, "--out", str(tmp_path / "o")],
                 ["compare", loop, str(tmp_path)], ["compare", str(tmp_path), loop],
                 ["run", "--rules", loop, "--", "true"], ["report", loop], ["report", loop, "--json"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "a symbolic link loop (too many levels of symbolic links)" in err and err.count("\n") == 1, (argv, err)
    assert main(["overflow", str(tmp_path / "nothere")]) == 2
    assert capsys.readouterr().err.strip().endswith("nothere: no such file or directory")


def test_a_global_option_after_the_command_says_where_it_goes(capsys):
    """`fusebisect run --quiet ...`: --quiet exists, before the command; the error says so."""
    assert main(["run", "--quiet", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert "No such option: --quiet; it is an option of fusebisect itself: put it before the command" in err
    assert err.count("\n") == 1


def test_one_document_on_stdout(tmp_path):
    """`--csv -` or `--html -` with --json printed the CSV/HTML and the JSON on stdout, one after the other, and
    without --json the terminal table followed the CSV: two documents on stdout are refused, and a file on
    stdout is printed alone."""
    import numpy as np

    from fusebisect.compare.dumpfile import write_dump

    x = np.arange(6, dtype=np.float32)
    for side in ("my", "gold"):
        write_dump(tmp_path / side / "Add.a.1.0.1700000000000001", op_name="a", inputs=[x], outputs=[x])
    base = [sys.executable, "-m", "fusebisect", "compare", str(tmp_path / "my"), str(tmp_path / "gold")]
    for extra, said in ((["--csv", "-", "--json"], "--csv - and --json: both would go to stdout"),
                        (["--csv", "-", "--html", "/dev/stdout"], "--csv - and --html /dev/stdout: both would go")):
        res = subprocess.run([*base, *extra], capture_output=True, text=True)
        assert res.returncode == 2 and said in res.stderr and res.stdout == "", res.stderr
    res = subprocess.run([*base, "--csv", "-"], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.startswith("Index,OpType,") and "compare (" not in res.stdout
    assert len(res.stdout.splitlines()) == 3   # the header and the two rows, nothing after them
    res = subprocess.run([sys.executable, "-m", "fusebisect", "overflow", str(tmp_path / "my"), "--scan", "--json",
                          "--html", "-"], capture_output=True, text=True)
    assert res.returncode == 2 and "--html - and --json: both would go to stdout" in res.stderr


def test_json_on_stdout_is_indented_with_a_long_list_of_objects_one_per_line(capsys):
    """--json output reads as json.dumps(indent=2) does; a long list of objects (compare's tensors, a run's
    trials) keeps one object per line, which json's fast encoder writes."""
    from fusebisect.cli.common import print_json

    small = {"a": [1, {"b": []}], "c": {}, "d": "é", "e": None}
    print_json(small)
    assert capsys.readouterr().out == json.dumps(small, indent=2, ensure_ascii=False) + "\n"
    big = {"rows": 40, "tensors": [{"index": i, "cosine": 1.0, "op": f"op{i}"} for i in range(40)]}
    print_json(big)
    out = capsys.readouterr().out
    assert json.loads(out) == big
    assert '    {"index": 7, "cosine": 1.0, "op": "op7"},\n' in out


def test_an_output_file_with_a_trailing_slash_is_refused(tmp_path, capsys):
    """'--csv out/' names a directory that does not exist yet: a plain file named 'out' is not what was asked for.
    dump convert's --out is a directory, and a run's command after '--' is its own."""
    for argv in (["cfg", "all-off", "--out", str(tmp_path / "newcfg") + "/"],
                 ["cfg", "all-off", f"--out={tmp_path / 'newcfg'}/"],
                 ["compare", str(tmp_path), str(tmp_path), "--csv", str(tmp_path / "out") + "/"],
                 ["report", str(tmp_path), "--html", str(tmp_path / "r") + "/"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "names a directory (it ends in /); give a file path" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "newcfg").exists() and not (tmp_path / "out").exists()
    assert main(["cfg", "all-off", "--out", str(tmp_path / "ok.cfg")]) == 0
    from fusebisect.cli.app import _refuse_directory_outputs

    _refuse_directory_outputs(["run", "--metric", "x", "--", "python", "train.py", "--output", "ckpt/"])
    _refuse_directory_outputs(["dump", "convert", "dump", "--out", "npy/"])
