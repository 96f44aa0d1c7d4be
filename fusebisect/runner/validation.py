"""Check every ``fusebisect run`` option before anything runs or is written.

An execution can cost hours, so a bad value is a one-line usage error (exit 2) before the first one, and before
the journal is written: a journal holding a bad value would refuse the corrected rerun as "another command".
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from fusebisect.errors import UsageError
from fusebisect.fsutil import probe_writable, resolved_path

if TYPE_CHECKING:  # pragma: no cover
    from fusebisect.runner.session import RunOptions

# Oracle options and their defaults, used when the option is not given (None). Given without their oracle
# they would be silently ignored, so that is an error.
METRIC_DEFAULTS = {"metric_mode": "last", "rtol": 1e-2, "atol": 0.0}
DUMPS_DEFAULTS = {"cosine": 0.99}
_FLAG = {"metric_mode": "--metric-mode", "rtol": "--rtol", "atol": "--atol", "expect": "--expect",
         "cosine": "--cosine", "max_abs_error": "--max-abs-error"}


def resolve_options(opts: "RunOptions") -> "RunOptions":
    """Check the oracle options against their oracles and return ``opts`` with the defaults of the options not
    given filled in. Raises UsageError for an oracle option without its oracle, or --expect with curve mode."""
    for oracle, given, names in (("--metric", opts.metric is not None, (*METRIC_DEFAULTS, "expect")),
                                 ("--dumps", opts.dumps, (*DUMPS_DEFAULTS, "max_abs_error"))):
        stray = [_FLAG[n] for n in names if getattr(opts, n) is not None]
        if stray and not given:
            raise UsageError(f"{', '.join(stray)} without {oracle}: {'they tune' if len(stray) > 1 else 'it tunes'}"
                             f" the {oracle} oracle, which is not in use; add {oracle} or drop "
                             f"{'them' if len(stray) > 1 else 'it'}")
    if opts.dumps and not opts.graph_dump:
        raise UsageError("--dumps with --no-graph-dump: the dump oracle maps fused ops to the unfused ones through "
                         "the GE graph dumps (without them the fusion itself looks like a divergence); drop "
                         "--no-graph-dump")
    if opts.expect is not None and opts.metric_mode == "curve":
        raise UsageError("--expect with --metric-mode curve: --expect is one value for the last match, curve "
                         "compares every point with the reference run; use one of them")
    filled = {k: v for k, v in {**METRIC_DEFAULTS, **DUMPS_DEFAULTS}.items() if getattr(opts, k) is None}
    return dataclasses.replace(opts, **filled)


def _number(flag: str, value: float | None, *, low: float | None = None, high: float | None = None,
            low_open: bool = False, high_open: bool = False) -> None:
    """Raise UsageError naming ``flag`` unless ``value`` (when given) is finite and within the bounds."""
    if value is None:
        return
    ok = math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        if low is not None and high is not None:
            rng = f"between {low:g} and {high:g}" + (" (exclusive)" if low_open and high_open else "")
        elif low is not None:
            rng = f"{'>' if low_open else '>='} {low:g}"
        else:
            rng = "a finite number"
        if not math.isfinite(value) and rng != "a finite number":
            rng = f"a finite number {rng}"
        raise UsageError(f"{flag} must be {rng}, got {value:g}")


def program_problem(program: str, *, env: Mapping[str, str], cwd: str | os.PathLike | None) -> str | None:
    """Why ``program`` (an argv[0]) cannot be started, or None when it can: a path (it has a separator) must be
    an executable file, relative to ``cwd``; a bare name must be found on the PATH of ``env``."""
    if "{" in program:  # a placeholder, known only per trial
        return None
    if os.sep in program or (os.altsep and os.altsep in program):
        path = Path(cwd or ".") / program
        if not path.exists():
            return "no such file"
        if path.is_dir():
            return "it is a directory"
        if not os.access(path, os.X_OK):
            return "not executable (chmod +x?)"
        return interpreter_problem(path, cwd, env)
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        return "not found on PATH"
    return interpreter_problem(Path(found), cwd, env)


_ENV_VALUED = {"-u", "--unset", "-C", "--chdir", "-P", "--path", "-a", "--argv0"}   # env options with a value


def interpreter_problem(path: Path, cwd: str | os.PathLike | None,
                        env: Mapping[str, str] | None = None) -> str | None:
    """Why the kernel would refuse to start script ``path`` (an empty file, text without a ``#!`` line, a ``#!``
    line without an interpreter), or why its ``#!`` line would fail (an interpreter that does not exist; ``env``
    given a program that is not on the PATH, or several words as one, or nothing to run but the script itself,
    which would start it again forever; a line saved with a CRLF end), or None. Exec would only say "No such file
    or directory" (env: exit 127) of a file that is there. The line is read as Linux reads it: its first 256
    bytes, and everything after the interpreter as one argument."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(256)
    except OSError:
        return None   # exec says why
    if not head:
        return "an empty file, which exec cannot start (a script needs a #! line, e.g. #!/bin/sh)"
    if not head.startswith(b"#!"):
        if b"\0" not in head and not head.startswith(b"\x7fELF"):   # text, not a program
            return f"a script without a #! line, which exec cannot start (add one, e.g. #!/bin/sh, or run: bash {path})"
        return None
    line = head[2:].split(b"\n", 1)[0].split(b"\0", 1)[0].strip(b" \t")
    if line.endswith(b"\r"):   # the interpreter, or its last argument, ends in CR: python3\r, -e\r
        return (f"its #! line ends in a carriage return (saved with CRLF line ends): "
                f"{os.fsdecode(line)!r} cannot start it (convert the file: dos2unix {path})")
    interpreter, _sep, argument = os.fsdecode(line).replace("\t", " ").partition(" ")
    argument = argument.strip(" ")
    if not interpreter:
        return "its #! line names no interpreter, so exec cannot start it"
    target = Path(cwd or ".") / interpreter
    try:
        if not target.exists():
            return f"its #! line names the interpreter {interpreter}, which does not exist"
        if target.is_dir() or not os.access(target, os.X_OK):
            return f"its #! line names the interpreter {interpreter}, which is not an executable file"
    except OSError as exc:   # a name too long to look up
        return f"its #! line names the interpreter {interpreter[:60]}..., which cannot be looked up ({exc.strerror})"
    if target.name == "env":
        return _env_problem(interpreter, argument, env)
    return None


def _env_problem(interpreter: str, argument: str, env: Mapping[str, str] | None) -> str | None:
    """Why ``#!/usr/bin/env ARGUMENT`` would not start the script (ARGUMENT is one argument to env), or None."""
    again = "env would run the script itself, which starts env again, forever"
    if argument.startswith("-") and ("S" in argument.split()[0].lstrip("-") and not argument.startswith("--")
                                     or argument.startswith("--split-string")):
        words = argument.split()   # env -S splits the rest itself: the program is the first word after options
        words[0] = words[0].partition("=")[2] if words[0].startswith("--split-string=") else ""
        words = [w for w in words if w]
        program = None
        while words:
            word = words.pop(0)
            if word in _ENV_VALUED:
                if words:
                    words.pop(0)
            elif word.startswith("-") or "=" in word:
                continue   # another option (or one with its value attached), or an assignment
            else:
                program = word
                break
        if program is None:
            return f"its #! line gives env -S no program to run: {again}"
    elif not argument:
        return f"its #! line runs env with nothing to run: {again}"
    elif " " in argument:
        return (f"its #! line gives env {argument!r} as one argument (Linux does not split the rest of a #! line), "
                f"which env cannot run: write '#!{interpreter} -S {argument}'")
    elif argument.startswith("-") or "=" in argument:
        return f"its #! line gives env {argument!r} and no program to run: {again}"
    else:
        program = argument
    search = (env if env is not None else os.environ).get("PATH", os.defpath)
    if "/" not in program and shutil.which(program, path=search) is None:
        return f"its #! line runs {program} through env, and no {program} is on the PATH"
    return None


def workdir_clash(home: Path, where: Path, said: str = "") -> str | None:
    """What of the run's workdir (resolved: ``home``) the resolved output path ``where`` would replace, said as
    "the run's own journal.jsonl" or "inside the run's trials/ directory, ..." (``said`` is put after the name,
    e.g. " in --workdir"); None when it is none of them. Used by run --output and report --html/--markdown, so
    the two refuse the same things."""
    from fusebisect.runner.journal import JOURNAL_NAME, LOCK_NAME

    # .lock: the run holds it open for its whole length; a file written there is a new file, and a second run
    # would take the lock the first one no longer holds
    if where in [home / n for n in (JOURNAL_NAME, "result.json", LOCK_NAME)]:
        return f"the run's own {where.name}{said}"
    for kept, why in (("trials", "which hold its evidence"),
                      ("previous", "which keeps earlier runs' journals and evidence"),
                      # the runs' switch files, which the repro commands feed to the job
                      ("switch", "whose files its runs and repro commands use"),
                      ("repro", "whose files its runs and repro commands use")):
        if where.is_relative_to(home / kept):
            return f"inside the run's {kept}/ directory{said}, {why}"
    return None


def _output_clashes(opts: "RunOptions", home: Path, where: Path) -> None:
    """-o (resolved: ``where``) must not name what the run reads or keeps: the workdir (resolved: ``home``)
    itself, its journal, results and trials, the --rules file, or a file the command or --check names (the
    training script). Raises UsageError."""
    if where == home:
        raise UsageError(f"--output {opts.output}: that is the --workdir; the production switch file needs a file "
                         "path")
    # (the run writes its reports there too: a production file there would be replaced by one)
    clash = workdir_clash(home, where, " in --workdir") or \
        (f"the run's own {where.name} in --workdir" if where in (home / "report.html", home / "report.md") else None)
    if clash:
        raise UsageError(f"--output {opts.output}: that is {clash}")
    named = [("--rules", opts.rules)] + [("the command", a) for a in opts.command] + \
        [("--check", a) for a in (shlex.split(opts.check) if opts.check else [])]
    # an option's value given in the same argument (--config=params.json, -cparams.json is not guessed at)
    named += [(what, arg.partition("=")[2]) for what, arg in named[1:] if arg and arg.startswith("-") and "=" in arg]
    for what, arg in named:
        if not arg or "{" in arg:
            continue
        try:
            same = Path(arg).is_file() and Path(arg).resolve() == where
        except (OSError, RuntimeError, ValueError):
            continue
        if same:
            raise UsageError(f"--output {opts.output}: that is {arg}, which {what} reads; the production switch "
                             "file would replace it")


def check_paths(opts: "RunOptions", workdir: Path) -> None:
    """--workdir must be a directory (or not exist yet); the production switch file's target must not be a
    directory, nor anything the run reads or keeps, and its directory must exist or be the --workdir, which the
    run creates. Raises UsageError."""
    home = resolved_path(workdir, "--workdir")
    if workdir.exists() and not workdir.is_dir():
        raise UsageError(f"--workdir: {workdir} exists and is not a directory")
    for link in (workdir, *workdir.absolute().parents):   # it, or a directory it would be created in
        if link.is_symlink() and not link.exists():
            raise UsageError(f"--workdir: {link} is a symbolic link to {os.readlink(link)}, which does not exist")
    if not workdir.exists():
        # it is created only once every option is checked: probe its nearest existing parent now (/proc, a
        # read-only mount, a missing permission)
        parent = workdir.absolute().parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        try:
            os.rmdir(tempfile.mkdtemp(dir=parent, prefix=".fusebisect-probe-"))
        except OSError as exc:
            raise UsageError(f"--workdir: cannot create {workdir} in {parent} ({exc.strerror or exc})") from None
    target = Path(opts.output) if opts.output is not None else workdir / "fusion_switch.cfg"
    flag = "--output" if opts.output is not None else "--workdir"
    if target.is_dir():
        raise UsageError(f"{flag}: {target} is a directory; the production switch file needs a file path")
    if str(target) == "-":
        raise UsageError("--output -: the production switch file needs a file path, not stdout (the run's final "
                         "run reads it; `fusebisect cfg ... --out -` prints one)")
    where = resolved_path(target, flag)
    if target.exists() and not where.is_file():
        raise UsageError(f"{flag}: {target} is not a regular file (a device, FIFO or socket); the production "
                         "switch file needs a file path")
    parent = where.parent
    if opts.output is not None:
        _output_clashes(opts, home, where)
        # -o in the --workdir the run is about to create (where the default -o goes) was probed with it above
        if parent != home or workdir.exists():
            if not parent.is_dir():
                raise UsageError(f"--output: directory {parent} does not exist")
            probe_writable(parent, "--output")
    if where.is_file() and not _written_here(workdir, where):
        # a file of the user's is kept as NAME.bak (or .bak.N) before it is replaced (the run's own file from an
        # earlier run in this workdir is not: a resume keeps it, --fresh moves it aside)
        from fusebisect.rules.switchfile import next_backup_path

        try:
            longest = os.pathconf(parent, "PC_NAME_MAX")
        except (OSError, ValueError):
            longest = 255
        try:
            backup = next_backup_path(where).name
        except OSError:   # a name past the limit cannot even be looked up
            backup = where.name + ".bak"
        if len(os.fsencode(backup)) > longest:
            raise UsageError(f"{flag}: {target}: its backup {backup} would be longer than the {longest} bytes a file "
                             f"name can have here; give a shorter name")


def _written_here(workdir: Path, where: Path) -> bool:
    """True when ``where`` still holds the production file the previous run in ``workdir`` wrote."""
    from fusebisect.runner.journal import previous_production

    previous = previous_production(workdir)
    return previous is not None and previous[1] is True and previous[0].resolve() == where


def check_search_options(opts: "RunOptions") -> None:
    """Ranges of the options that shape the search and the executions. Raises UsageError."""
    if opts.repeat < 1:
        raise UsageError("--repeat must be >= 1")
    if not 1 <= opts.jobs <= MAX_JOBS:   # one execution per NPU: a server holds 8 or 16
        raise UsageError(f"--jobs must be between 1 and {MAX_JOBS} (one execution per NPU), got {opts.jobs}")
    if opts.devices is not None and len(opts.devices) > MAX_JOBS:
        raise UsageError(f"--devices: {len(opts.devices)} ids; at most {MAX_JOBS} executions run at once")
    if opts.max_runs is not None and opts.max_runs < 2:
        raise UsageError(f"--max-runs must be >= 2 (the two gate runs), got {opts.max_runs}")
    _number("--confidence", opts.confidence, low=0.5, high=1.0, low_open=True, high_open=True)
    _number("--timeout", opts.timeout, low=0, low_open=True)
    _number("--rtol", opts.rtol, low=0)
    _number("--atol", opts.atol, low=0)
    _number("--expect", opts.expect)
    _number("--cosine", opts.cosine, low=-1, high=1)
    _number("--max-abs-error", opts.max_abs_error, low=0)


MAX_JOBS = 64
_DEVICE_RE = re.compile(r"[0-9]+")
DEVICES_ENV = "ASCEND_RT_VISIBLE_DEVICES"


def device_slots(opts: "RunOptions", env: Mapping[str, str]) -> list[str | None]:
    """The ASCEND_RT_VISIBLE_DEVICES value of each parallel execution slot: --devices, else (with --jobs N) the
    first N of the user's ASCEND_RT_VISIBLE_DEVICES when set, else 0..N-1; [None] (left unchanged) when one
    execution runs at a time. Raises UsageError for malformed or duplicate ids, or too few visible devices."""
    if opts.jobs < 1:
        raise UsageError("--jobs must be >= 1")
    if opts.devices is not None:
        _device_ids("--devices", list(opts.devices))
        if opts.jobs not in (1, len(opts.devices)):
            raise UsageError(f"--jobs {opts.jobs} and --devices with {len(opts.devices)} ids disagree; give one "
                             f"of them")
        return list(opts.devices)
    if opts.jobs == 1:
        return [None]
    visible = env.get(DEVICES_ENV)
    if visible is None:
        return [str(i) for i in range(opts.jobs)]
    where = f"{DEVICES_ENV}={visible!r}"
    ids = _device_ids(where, [v.strip() for v in visible.split(",")] if visible.strip() else [])
    if len(ids) < opts.jobs:
        raise UsageError(f"--jobs {opts.jobs} needs {opts.jobs} devices but {where} lists {len(ids)}; lower "
                         f"--jobs or give --devices")
    return ids[:opts.jobs]


def _device_ids(where: str, ids: list[str]) -> list[str]:
    for dev in ids:
        if not _DEVICE_RE.fullmatch(dev):
            raise UsageError(f"{where}: {dev!r} is not a device id (a non-negative integer)")
    numbers = [int(d) for d in ids]   # '00' is device 0
    dup = sorted({n for n in numbers if numbers.count(n) > 1})
    if dup:
        raise UsageError(f"{where}: device {', '.join(map(str, dup))} given more than once")
    return ids


def load_rules_spec(spec: str) -> list[str]:
    """Return the candidate rule names of ``--rules FILE|NAME,...``, validated, in order, each once.

    A FILE (:func:`rules_spec_is_file`) is a switch file (the rules it names) or a text file with names separated
    by newlines/commas ('#' comments). Raises UsageError for an empty value, a missing or unreadable file, an
    invalid name, or no names at all."""
    from fusebisect.rules.switchfile import looks_like_json, parse_switch_text, validate_rule_name

    if not spec.strip():
        raise UsageError("--rules: empty value; give FILE or NAME,NAME,...")
    path = Path(spec)
    names: list[str] = []
    if rules_spec_is_file(spec):
        if not path.exists():
            from fusebisect.fsutil import missing_reason

            raise UsageError(f"--rules: {spec}: {missing_reason(path, 'no such file')}")
        if path.is_dir():
            raise UsageError(f"--rules: {spec} is a directory; give a file or NAME,NAME,...")
        from fusebisect.fsutil import not_regular
        if why := not_regular(path):
            raise UsageError(f"--rules: {spec}: {why}")
        try:
            text = path.read_text(encoding="utf-8-sig")  # a BOM is common in files edited on Windows
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--rules: cannot read {spec}: {exc}") from exc
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(("#", "//"))]
        if lines and looks_like_json(text):  # the switch-file reader's own test: skips comment lines
            cfg = parse_switch_text(text, path=path)
            if cfg.invalid_names:   # CANN takes them (and ignores them), but they are no rule to search
                raise UsageError(f"--rules: {spec}: {cfg.invalid_names[0]!r} is no pass name (only letters, digits "
                                 "and _ . : - are)")
            if cfg.ignored:   # names under a key CANN does not read: meant as rules, but not where CANN reads them
                name, why = next(iter(cfg.ignored.items()))
                raise UsageError(f"--rules: {spec}: {name} is {why.partition(':')[0]}, which CANN does not read "
                                 "(fix the key, or list the rules)")
            names = cfg.mentioned() + (["ALL"] if any("ALL" in cfg.section(k) for k in ("graph", "ub")) else [])
        elif lines and all(ln.partition(":")[2].strip().lower() in ("on", "off") for ln in lines):
            # an old-format switch file (Pass:off lines; comments and CRLF are the user's notes here): its names
            names = [ln.partition(":")[0].strip() for ln in lines]
        else:
            for line in text.splitlines():
                line = line.split("#", 1)[0]
                names.extend(p.strip() for p in line.replace(",", " ").split())
    else:
        names = [p.strip() for p in spec.split(",") if p.strip()]
    if not names:
        raise UsageError(f"--rules: no rule names in {spec!r}")
    for name in names:
        try:
            validate_rule_name(name)
        except UsageError as exc:
            raise UsageError(f"--rules: {exc}") from None
    return list(dict.fromkeys(names))


def rules_spec_is_file(spec: str) -> bool:
    """True when a --rules value is a FILE: it holds a path separator, or it names an existing file and is not
    the name of a rule the catalog knows (a directory or file named after a rule in the working directory does
    not turn the rule into a file to read)."""
    if os.sep in spec or (os.altsep and os.altsep in spec):
        return True
    from fusebisect.rules.catalog import default_catalog

    if "," not in spec and default_catalog().get(spec.strip()) is not None:
        return False
    try:   # a long NAME,NAME,... list is no file name (the OS refuses names past 255 bytes: not an error here)
        return Path(spec).exists()
    except OSError:
        return False


def did_you_mean(catalog, name: str) -> str:
    """`` (did you mean A, B?)`` with the catalog's suggestions for an unknown rule name, or ''."""
    hints = catalog.suggest(name)
    return f" (did you mean {', '.join(hints)}?)" if hints else ""


def candidate_rules(opts: "RunOptions", catalog) -> list[str] | None:
    """The names of ``--rules`` (None when not given). A name the catalog does not know is a usage error with
    the catalog's suggestions (a misspelt name switches nothing off and misleads the search), unless
    ``allow_unknown_rules`` (custom passes). Raises UsageError."""
    if opts.rules is None:
        return None
    names = load_rules_spec(opts.rules)
    if "ALL" in names:   # the switch file's key for every pass of a section, not a rule: it cannot be bisected
        where = "ALL" if "ALL" in opts.rules.split(",") else f"{opts.rules} switches ALL, which"
        raise UsageError(f"--rules: {where} is the switch file's key for every pass, not a rule name; list the "
                         "rules (or leave --rules out: the rules that fired in the baseline are the candidates)")
    unknown = [n for n in names if catalog.get(n) is None]
    if unknown and not opts.allow_unknown_rules:
        parts = [repr(name) + did_you_mean(catalog, name) for name in unknown]
        raise UsageError(f"--rules: unknown rule{'s' if len(unknown) > 1 else ''} {', '.join(parts)}: not in the "
                         f"rule catalog, so switching {'them' if len(unknown) > 1 else 'it'} off would do nothing; "
                         f"fix the spelling, or pass --allow-unknown-rules for custom fusion passes")
    return names
