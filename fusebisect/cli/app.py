"""The ``fusebisect`` entry point.

Command groups live in ``fusebisect/cli/cmd_*.py``; each defines ``register(app)``. Errors raised as
:class:`fusebisect.errors.FusebisectError` become one line on stderr and exit code 2 (``--debug`` shows the
traceback). Exit codes: 0 success/clean, 1 "found something" (divergence, overflow, lint problems, not found),
2 usage or input error, 3 internal error, 130 interrupted.
"""

from __future__ import annotations

import codecs
import importlib
import os
import pkgutil
import signal
import sys
import threading
import traceback
from typing import Annotated, Optional

import typer

try:  # typer >= 0.26 vendors its own click
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # pragma: no cover - older typer uses click itself
    from click.exceptions import ClickException, UsageError

import fusebisect
from fusebisect.cli import common
from fusebisect.errors import FusebisectError

app = typer.Typer(
    name="fusebisect",
    help=(
        "Find the CANN fusion rule(s) that break your model's accuracy on Ascend NPUs.\n\n"
        "Example: fusebisect run --metric 'loss ([0-9.]+)' -- bash train.sh"
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        common.write_out(f"fusebisect {fusebisect.__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only results; no progress or logs.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="More log lines on stderr (run, demo: each run's switch file, trial dir and command).")] = False,
) -> None:
    common.state.debug = debug or common.state.debug
    if quiet and verbose:
        raise typer.BadParameter("--quiet and --verbose contradict each other; give one", param_hint="'--quiet'")
    common.state.quiet = quiet
    common.state.verbose = verbose


def _register_commands() -> None:
    import fusebisect.cli as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            importlib.import_module(f"fusebisect.cli.{info.name}").register(app)


_register_commands()


_STDOUT_ERRORS = "fusebisect-stdout"


def _stdout_errors(exc: UnicodeError):
    """The stdout error handler: a lone surrogate (a file name's non-UTF-8 byte) is written back as that byte, any
    other character the encoding lacks as "?"."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    chunk = exc.object[exc.start:exc.end]
    if all("\udc80" <= c <= "\udcff" for c in chunk):
        return bytes(ord(c) - 0xDC00 for c in chunk), exc.end
    return "?" * len(chunk), exc.end


codecs.register_error(_STDOUT_ERRORS, _stdout_errors)


def _writable(fd: int) -> bool:
    """True when ``fd`` is open for writing (a closed stderr can be taken over by a file the launcher opened read
    only, such as a shell script's own: writes to it fail as if it were closed)."""
    import fcntl

    try:
        return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY
    except OSError:
        return False


_FILE_OUTPUTS = ("--csv", "--html", "--markdown", "--output")   # options naming an output file, any command


def _refuse_directory_outputs(args: list[str]) -> None:
    """An output file given with a trailing '/' (``--csv out/``) names a directory that does not exist yet; the
    path the options receive has lost the slash and would become a plain file. Raises UsageError. (dump
    convert's --out is a directory; run's command after '--' is not looked at.)"""
    command = next((a for a in args if not a.startswith("-")), "")
    flags = _FILE_OUTPUTS + (("--out", "-o") if command == "cfg" else ("-o",) if command == "run" else ())
    for i, arg in enumerate(args):
        if arg == "--":
            return
        flag, eq, value = arg.partition("=")
        if flag not in flags:
            continue
        if not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
        if value != "-" and value.endswith(("/", os.sep)):
            from fusebisect.errors import UsageError

            raise UsageError(f"{flag} {value}: names a directory (it ends in /); give a file path")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return the exit code (also used by tests, which call it in-process)."""
    args = list(sys.argv[1:] if argv is None else argv)
    common.state.debug = "--debug" in args
    if argv is None:  # the fusebisect process itself, not a host program calling main() in-process
        from fusebisect.allocator import tune_allocator

        tune_allocator()
        # typer prints --help through rich consoles of its own, which exit 1 when the reader closed the pipe:
        # make every console of this process end as SIGPIPE would (141), as ours do
        from rich.console import Console

        from fusebisect.console import PipeConsole

        Console.on_broken_pipe = PipeConsole.on_broken_pipe  # type: ignore[method-assign]
        # A file name's non-UTF-8 byte is a lone surrogate in Python: print it back as that byte (stdout, as ls
        # does) or as its escape (stderr), not as an internal error, whatever the locale made the streams; a
        # character the stream's encoding lacks (rich's "…" under Latin-1 or ASCII) becomes "?" on stdout.
        for stream, errors in ((sys.stdout, _STDOUT_ERRORS), (sys.stderr, "backslashreplace")):
            if getattr(stream, "errors", None) in ("strict", "surrogateescape") and hasattr(stream, "reconfigure"):
                stream.reconfigure(errors=errors)
        if not _writable(2):   # stderr closed (2>&-): messages go nowhere, the exit code stays the command's own
            sys.stderr = open(os.devnull, "w", encoding="utf-8")
    handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    try:
        _refuse_directory_outputs(args)
        rv = app(args=args, prog_name="fusebisect", standalone_mode=False)
    except FusebisectError as exc:
        if common.state.debug:
            traceback.print_exc()
        print(f"fusebisect: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ClickException as exc:
        if isinstance(exc, UsageError):   # one line naming the option, like every other error
            where = exc.ctx.command_path if exc.ctx is not None else "fusebisect"
            message = " ".join(exc.format_message().split())
            misplaced = next((g for g in ("--quiet", "--verbose", "--debug", "-q", "-v")
                              if message == f"No such option: {g}"), None)
            if misplaced is not None and where != "fusebisect":   # a global option given after the command
                message += (f"; it is an option of fusebisect itself: put it before the command "
                            f"(fusebisect {misplaced} ...)")
            if message:   # (a command group given no command has printed its help: nothing more to say)
                print(f"fusebisect: error: {message} (see '{where} --help')", file=sys.stderr)
        else:
            exc.show()
        return exc.exit_code if exc.exit_code else 2
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        print("fusebisect: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if common.state.debug:
            traceback.print_exc()
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"fusebisect: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: say so briefly, full traceback with --debug
        if common.state.debug:
            traceback.print_exc()
        print(f"fusebisect: internal error: {type(exc).__name__}: {exc} (rerun with --debug for details)",
              file=sys.stderr)
        return 3
    finally:
        if argv is not None and threading.current_thread() is threading.main_thread():
            # in-process callers get their handlers back (an interrupted run ignores further signals while it
            # cleans up; the fusebisect process itself exits with them ignored)
            for signum, handler in zip((signal.SIGINT, signal.SIGTERM), handlers):
                if handler is not None:
                    signal.signal(signum, handler)
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
