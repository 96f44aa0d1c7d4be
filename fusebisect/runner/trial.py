"""Execute the user's command once for one configuration: environment, placeholders, logs, timeout.

The trial contract (other tools and users rely on it exactly). Each execution of CMD gets:

- ``FUSEBISECT_SWITCH_FILE``: absolute path of that configuration's switch file (content hash in the name);
- ``FUSEBISECT_TRIAL_DIR``: a fresh, empty directory for this execution; ``FUSEBISECT_DUMP_DIR`` = its ``dump/``;
- ``ASCEND_WORK_PATH`` = the trial dir (where CANN writes ``fusion_result.json``);
- ``DUMP_GE_GRAPH=2``, ``DUMP_GRAPH_LEVEL=3``, ``DUMP_GRAPH_PATH`` = its ``graph/`` (unless graph dumps are off);
- ``ASCEND_RT_VISIBLE_DEVICES`` = its device slot when ``--devices`` is given;
- the placeholders ``{switch_file}``, ``{trial_dir}``, ``{dump_dir}`` substituted in CMD's arguments;
- the working directory and environment otherwise unchanged; stdout/stderr saved as ``stdout.log``/``stderr.log``
  in the trial dir.

CMD is an argv list, never a shell string. It starts in a new session (its own process group); on timeout or
interruption the whole group is killed, so no grandchild survives.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from fusebisect.errors import UsageError

PLACEHOLDERS = ("{switch_file}", "{trial_dir}", "{dump_dir}")
_PLACEHOLDER_RE = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS))
KILL_GRACE_SECONDS = 2.0  # SIGTERM first, SIGKILL after this


@dataclass(frozen=True)
class TrialPaths:
    """Where one execution lives on disk."""

    trial_dir: Path  # fresh, empty directory of this execution
    switch_file: Path | None  # the configuration's switch file (absolute)

    @property
    def dump_dir(self) -> Path:
        return self.trial_dir / "dump"

    @property
    def graph_dir(self) -> Path:
        return self.trial_dir / "graph"

    @property
    def stdout_path(self) -> Path:
        return self.trial_dir / "stdout.log"

    @property
    def stderr_path(self) -> Path:
        return self.trial_dir / "stderr.log"


@dataclass
class ExecResult:
    """What happened to one process run."""

    exit_code: int | None  # None when killed by us (timeout/interrupt); negative = killed by that signal
    seconds: float
    timed_out: bool = False
    interrupted: bool = False


class ProcessRegistry:
    """The process groups currently running, so an interrupt can kill them all (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: dict[int, subprocess.Popen] = {}
        self.stopping = False  # set when the user interrupted: no new process starts

    def add(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs[proc.pid] = proc

    def remove(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.pop(proc.pid, None)

    def kill_all(self) -> None:
        """Stop accepting work and kill every running process group (SIGKILL)."""
        with self._lock:
            self.stopping = True
            procs = list(self._procs.values())
        for proc in procs:
            kill_group(proc, grace=0.0)


def kill_group(proc: subprocess.Popen, *, grace: float = KILL_GRACE_SECONDS) -> None:
    """Kill ``proc``'s whole process group: SIGTERM, then SIGKILL after ``grace`` seconds. Returns nothing;
    never raises for processes that are already gone."""
    try:
        pgid = os.getpgid(proc.pid)
    except (ProcessLookupError, PermissionError):
        pgid = proc.pid  # leader already reaped: its group id is its pid
    if grace > 0:
        _signal_group(pgid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(pgid, signal.SIGKILL)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
        pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def substitute(argv: Sequence[str], paths: TrialPaths) -> list[str]:
    """Return ``argv`` with ``{switch_file}``, ``{trial_dir}``, ``{dump_dir}`` replaced by this trial's paths.

    Other braces are left alone (no ``str.format``), so ``{`` in a user's argument is safe, and one pass replaces
    them all: a path that itself holds a placeholder's text is not replaced again. Never raises.
    """
    mapping = {
        "{switch_file}": str(paths.switch_file) if paths.switch_file else "",
        "{trial_dir}": str(paths.trial_dir),
        "{dump_dir}": str(paths.dump_dir),
    }
    return [_PLACEHOLDER_RE.sub(lambda m: mapping[m.group(0)], arg) for arg in argv]


def trial_env(base: Mapping[str, str], paths: TrialPaths, *, graph_dump: bool = True,
              device: str | None = None) -> dict[str, str]:
    """Return the environment of one execution: ``base`` plus the trial contract's variables."""
    env = dict(base)
    if paths.switch_file is not None:
        env["FUSEBISECT_SWITCH_FILE"] = str(paths.switch_file)
    env["FUSEBISECT_TRIAL_DIR"] = str(paths.trial_dir)
    env["FUSEBISECT_DUMP_DIR"] = str(paths.dump_dir)
    env["ASCEND_WORK_PATH"] = str(paths.trial_dir)
    if graph_dump:
        env["DUMP_GE_GRAPH"] = "2"
        env["DUMP_GRAPH_LEVEL"] = "3"
        env["DUMP_GRAPH_PATH"] = str(paths.graph_dir)
    if device is not None:
        env["ASCEND_RT_VISIBLE_DEVICES"] = device
    return env


def prepare_dir(paths: TrialPaths, *, graph_dump: bool = True) -> None:
    """Create the trial dir (must not exist yet: every execution gets a fresh one) and its dump/ (and graph/).

    Raises FileExistsError if the trial dir already exists."""
    paths.trial_dir.parent.mkdir(parents=True, exist_ok=True)
    paths.trial_dir.mkdir()
    paths.dump_dir.mkdir()
    if graph_dump:
        paths.graph_dir.mkdir()


PGID_SUFFIX = ".pgid"   # TRIAL_DIR.pgid, beside the trial dir, while its process group may be alive: the group id


def pgid_file(trial_dir: Path) -> Path:
    """Where the group id of ``trial_dir``'s execution is kept while it runs (outside the job's fresh dir)."""
    return trial_dir.with_name(trial_dir.name + PGID_SUFFIX)


def leftover_processes(trial_dir: Path) -> tuple[int, list[int]] | None:
    """The process group an earlier fusebisect started for ``trial_dir`` and did not see end (it was killed
    itself, e.g. ``kill -9``): (group id, pids still alive in it), or None when the trial left no group id.

    Only processes of that group whose environment names this trial dir (FUSEBISECT_TRIAL_DIR) count, so a
    reused id never points at someone else's process. Needs /proc (Linux); elsewhere the list is empty."""
    try:
        pgid = int(pgid_file(trial_dir).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None
    alive = [pid for pid, dirs in _trial_processes(pgid) if any(Path(d).name == trial_dir.name for d in dirs)]
    return pgid, alive


_TRIAL_ENV = b"FUSEBISECT_TRIAL_DIR="


def _trial_processes(pgid: int | None = None):
    """Yield (pid, its FUSEBISECT_TRIAL_DIR values) for every process that carries one (of group ``pgid`` only,
    when given). Reads /proc (Linux); elsewhere yields nothing."""
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if pgid is not None:
                stat = (entry / "stat").read_bytes()
                if int(stat[stat.rindex(b")") + 2:].split()[2]) != pgid:   # after "(comm)": state ppid pgrp
                    continue
            env = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        dirs = [os.fsdecode(v[len(_TRIAL_ENV):]) for v in env if v.startswith(_TRIAL_ENV)]
        if dirs:
            yield int(entry.name), dirs


def kill_leftovers(trial_dir: Path, *, grace: float = KILL_GRACE_SECONDS) -> list[int]:
    """Kill what :func:`leftover_processes` finds for ``trial_dir`` (SIGTERM, SIGKILL after ``grace``), forget
    the group id, and return the pids that were alive."""
    found = leftover_processes(trial_dir)
    if found is None:   # no group id known (killed while its job was starting): kill_detached finds the job
        pgid_file(trial_dir).unlink(missing_ok=True)
        return []
    pgid, alive = found

    def still_alive() -> bool:
        again = leftover_processes(trial_dir)
        return bool(again and again[1])

    if alive:
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and still_alive():
            time.sleep(0.05)
        if still_alive():
            _signal_group(pgid, signal.SIGKILL)
    pgid_file(trial_dir).unlink(missing_ok=True)
    return alive


def kill_detached(trial_env: str | None) -> list[int]:
    """SIGKILL the processes outside the trial's group that still carry its environment (FUSEBISECT_TRIAL_DIR
    equal to ``trial_env``): a job can leave its group (``setsid``, a daemon) and would outlive the execution,
    holding the device. Returns the pids killed; needs /proc (Linux), elsewhere nothing is found."""
    if not trial_env:
        return []
    killed: list[int] = []
    for _ in range(3):   # one that forked while we looked is caught by the next pass
        found = [pid for pid, dirs in _trial_processes()
                 if trial_env in dirs and pid != os.getpid() and pid not in killed]
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
    return killed


def run_process(argv: Sequence[str], *, env: Mapping[str, str], stdout: Path, stderr: Path,
                timeout: float | None = None, cwd: str | os.PathLike | None = None,
                registry: ProcessRegistry | None = None, group_file: Path | None = None) -> ExecResult:
    """Run ``argv`` (no shell) in a new session with output appended to the two files; return its result.

    On timeout the whole process group is killed and ``timed_out`` is set; when the registry is stopping
    (interrupt) ``interrupted`` is set. Leftover processes of the group are killed after the leader exits, and
    so are processes that left the group but carry this execution's FUSEBISECT_TRIAL_DIR.
    ``group_file`` holds the group id while the group may be alive (see :func:`kill_leftovers`).
    Raises UsageError when the program cannot be started (not found / not executable).
    """
    if registry is not None and registry.stopping:
        return ExecResult(exit_code=None, seconds=0.0, interrupted=True)
    start = time.monotonic()
    if group_file is not None:   # before the job starts: a kill -9 before its group id is known leaves this mark,
        group_file.write_text("starting\n", encoding="ascii")   # and the rerun looks for the job by its trial dir
    with open(stdout, "ab") as out, open(stderr, "ab") as err:
        try:
            proc = subprocess.Popen(list(argv), env=dict(env), cwd=cwd, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:   # not found, not executable, no #! line and no binary (Exec format error)...
            if group_file is not None:
                group_file.unlink(missing_ok=True)
            hint = " (a script needs a #! line)" if exc.errno == errno.ENOEXEC else ""
            raise UsageError(f"cannot run command {argv[0]!r}: {exc.strerror or exc}{hint}") from exc
    if group_file is not None:
        group_file.write_text(f"{proc.pid}\n", encoding="ascii")   # start_new_session: the group id is the pid
    if registry is not None:
        registry.add(proc)
        if registry.stopping:  # interrupted between the check above and the registration
            kill_group(proc, grace=0.0)
    timed_out = False
    try:
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc)
            code = None
        except BaseException:  # Ctrl-C (KeyboardInterrupt) while waiting: the group must not outlive us
            kill_group(proc, grace=0.0)
            raise
        else:
            _signal_group(proc.pid, signal.SIGKILL)  # no orphans: leftovers of the group go too
    finally:
        kill_detached(env.get("FUSEBISECT_TRIAL_DIR"))   # processes that left the group (setsid) go too
        if registry is not None:
            registry.remove(proc)
        if group_file is not None:
            group_file.unlink(missing_ok=True)
    seconds = time.monotonic() - start
    interrupted = registry is not None and registry.stopping
    if interrupted:
        code = None
    return ExecResult(exit_code=code, seconds=seconds, timed_out=timed_out, interrupted=interrupted)


@dataclass
class Execution:
    """One execution of CMD for one configuration, ready to run."""

    command: list[str]  # CMD argv, placeholders not yet substituted
    paths: TrialPaths
    base_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    graph_dump: bool = True
    device: str | None = None
    timeout: float | None = None
    cwd: str | None = None

    @property
    def env(self) -> dict[str, str]:
        return trial_env(self.base_env, self.paths, graph_dump=self.graph_dump, device=self.device)

    @property
    def argv(self) -> list[str]:
        return substitute(self.command, self.paths)

    def run(self, registry: ProcessRegistry | None = None) -> ExecResult:
        """Create the fresh trial dir and run CMD; return its result (see :func:`run_process`).

        Raises FileExistsError if the trial dir exists, UsageError if CMD cannot be started."""
        prepare_dir(self.paths, graph_dump=self.graph_dump)
        return run_process(self.argv, env=self.env, stdout=self.paths.stdout_path,
                           stderr=self.paths.stderr_path, timeout=self.timeout, cwd=self.cwd, registry=registry,
                           group_file=pgid_file(self.paths.trial_dir))


def numbered_trial_dirs(trials: Path) -> dict[int, Path]:
    """The trial dirs under ``trials`` (named ``NNNN-KEY``) by run number; {} when there is no such dir."""
    found: dict[int, Path] = {}
    if trials.is_dir():
        for child in sorted(trials.iterdir()):
            head = child.name.split("-", 1)[0]
            if head.isdigit() and child.is_dir():
                found.setdefault(int(head), child)
    return found


def _piece_end(data: bytes, forced: bool) -> int:
    """Where a piece of log may end: after its last line end (``\\n``, or the ``\\r`` of progress bars). Without
    one, a piece only ends once it is ``forced`` (too long): after its last blank, else anywhere."""
    cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
    if cut or not forced:
        return cut
    cut = max(data.rfind(b" "), data.rfind(b"\t")) + 1
    return cut or len(data)


def iter_text(path: Path, block: int = 1 << 20):
    """Yield the text of a log file in pieces of about ``block`` bytes that end at line ends (``\\n`` or
    ``\\r``; UTF-8, undecodable bytes replaced), so a log of any size is scanned in bounded memory and no
    match is split. Only a line of more than 64 blocks is cut (at a blank). Yields nothing when the file does
    not exist."""
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return
    with handle:
        carry = b""
        while True:
            data = handle.read(block)
            if not data:
                break
            data = carry + data
            cut = _piece_end(data, forced=len(data) > 64 * block)
            carry = data[cut:]
            if cut:
                yield data[:cut].decode("utf-8", errors="replace")
        if carry:
            yield carry.decode("utf-8", errors="replace")


def read_text(path: Path, limit: int = 64 * 1024 * 1024) -> str:
    """Return the text of a log file (UTF-8, undecodable bytes replaced; at most ``limit`` bytes from the end).
    Returns '' when the file does not exist."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


__all__ = ["PLACEHOLDERS", "TrialPaths", "ExecResult", "ProcessRegistry", "Execution", "kill_group",
           "substitute", "trial_env", "prepare_dir", "run_process", "read_text", "iter_text",
           "numbered_trial_dirs"]
