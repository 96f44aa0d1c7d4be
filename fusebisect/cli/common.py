"""Shared CLI plumbing: consoles (results to stdout, logs to stderr), JSON output, global flags.

Colour follows rich's rules: ``NO_COLOR`` disables it, and a non-TTY stream gets plain text.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from fusebisect.console import PipeConsole, exit_pipe_closed
from fusebisect.jsonutil import to_jsonable


@dataclass
class GlobalState:
    """Flags given before the sub-command (``fusebisect --debug compare ...``)."""

    debug: bool = False  # show tracebacks for errors
    quiet: bool = False  # only results, no progress or log lines
    verbose: bool = False  # extra log lines on stderr


state = GlobalState()


def _console(stream, width: int | None = None) -> Console:
    # emoji=False: a message holding "name:x:" (a switch file line, a path) is printed as it is, never as an emoji.
    # markup=False: text, table cells and titles are printed as they are (a path or an op name holding "[/x]" is
    # data, not a style tag); a line styled on purpose passes markup=True and escapes what it interpolates.
    return PipeConsole(file=stream, no_color=bool(os.environ.get("NO_COLOR")) or None, soft_wrap=False,
                       highlight=False, width=width, emoji=False, markup=False)


def out(width: int | None = None) -> Console:
    """The console for results (stdout), ``width`` columns wide if given (else the terminal's; 80 in a pipe).
    Created per call so tests capturing sys.stdout see the output."""
    return _console(sys.stdout, width)


def print_table(table: Any) -> None:
    """Print ``table`` on stdout; in a pipe or a file as wide as its longest row, so no name is folded in two
    (``| grep NAME`` finds every one); in a terminal folded to its width."""
    from rich.cells import cell_len

    console = out()
    if not console.is_terminal:
        # the widest cell of each column, plus each column's padding and rule (rich's Measurement of a big table
        # takes half as long as printing it)
        need = sum(max([cell_len(str(col.header)), *(cell_len(str(cell)) for cell in col.cells)])
                   for col in table.columns) + 3 * len(table.columns) + 1
        if need > console.width:
            console = out(need)
    console.print(table)


def err() -> Console:
    """The console for progress and log lines (stderr)."""
    return _console(sys.stderr)


def log(message: str, *, markup: bool = False) -> None:
    """A log line on stderr, unless ``--quiet``: never cut into lines (a path in it stays whole) and read as
    rich markup only when ``markup`` (so a '[' in a path is printed as it is)."""
    if not state.quiet:
        err().print(message, soft_wrap=True, markup=markup, highlight=False)


def log_wrote(path: Any) -> None:
    """Log "wrote PATH" for an output file; nothing for stdout or stderr (``-``, ``/dev/stdout``): the text is
    there (or, stdout closed, nowhere)."""
    from fusebisect.fsutil import is_stream_path

    if not is_stream_path(path):
        log(f"wrote {path}")


def stdout_outputs(outputs: list[tuple[str, Any]], json_out: bool) -> bool:
    """Check that at most one document goes to stdout: of the output files (``(flag, path)``, ``-`` or
    /dev/stdout for stdout) and --json. Returns True when an output file is stdout (the command then prints
    nothing else there: no table after an HTML page). Raises UsageError for two on stdout."""
    from fusebisect.errors import UsageError
    from fusebisect.fsutil import stream_fd

    on_stdout = [f"{flag} {path}" for flag, path in outputs if path is not None and stream_fd(Path(path)) == 1]
    if len(on_stdout) > 1 or (on_stdout and json_out):
        both = " and ".join(on_stdout + (["--json"] if json_out else []))
        raise UsageError(f"{both}: both would go to stdout; give a file for one of them")
    return bool(on_stdout)


def print_json(obj: Any) -> None:
    """Write ``obj`` as JSON to stdout (one document, newline-terminated, valid UTF-8). Text that is not valid
    Unicode (a file name of non-UTF-8 bytes, read with surrogate escapes; a lone surrogate in a file read) is
    written as \\u escapes, so the document stays parseable."""
    doc = to_jsonable(obj)
    text = _indented(doc, "", False)
    try:   # (stdout in Latin-1 or ASCII: escaped, never "?" for a name)
        text.encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        text = _indented(doc, "", True)
    write_out(text + "\n")


_ONE_PER_LINE = 32   # a longer list of objects (compare's tensors, run's trials) is written one object per line


def _indented(value: Any, pad: str, ascii_only: bool) -> str:
    """``json.dumps(value, indent=2)``, except that a long list of objects puts each on one line: as readable, and
    written by json's C encoder (the indenting one is pure Python: a tenth of a 2000-tensor compare's time)."""
    inner = pad + "  "
    if isinstance(value, dict) and value:
        items = (f"{inner}{json.dumps(k, ensure_ascii=ascii_only)}: {_indented(v, inner, ascii_only)}"
                 for k, v in value.items())
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and value:
        if len(value) > _ONE_PER_LINE and all(isinstance(v, dict) for v in value):
            items = (inner + json.dumps(v, ensure_ascii=ascii_only) for v in value)
        else:
            items = (inner + _indented(v, inner, ascii_only) for v in value)
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(value, ensure_ascii=ascii_only)


def write_out(text: str) -> None:
    """Write ``text`` to stdout as it is; a reader that closed the pipe (``| head``) ends the command as SIGPIPE
    would (exit 141). With stdout closed (``>&-``) nothing is written, as for the other output."""
    if sys.stdout is None:
        return
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        exit_pipe_closed()


_groups: dict[str, Any] = {}


def group(app, name: str, help: str):
    """Return the sub-command group ``name`` of ``app``, creating and attaching it on first use.

    Lets two command modules add commands to one group (``inspect dump`` and ``inspect graph``).
    """
    import typer

    if name not in _groups:
        sub = typer.Typer(name=name, help=help, no_args_is_help=True, rich_markup_mode="rich")
        app.add_typer(sub, name=name)
        _groups[name] = sub
    return _groups[name]
