"""The rich console class the CLI's results and the runner's progress are printed with."""

from __future__ import annotations

import os
import signal
import sys

from rich.console import Console

PIPE_CLOSED_EXIT = 128 + signal.SIGPIPE   # 141: what a process killed by SIGPIPE exits with


def exit_pipe_closed() -> None:
    """A reader that closed the pipe early (``| head``): stop writing and exit as a process killed by SIGPIPE
    does (141), not 1 (which reads as 'no culprit' or 'problems found' under ``set -o pipefail``) nor with an
    error. Raises SystemExit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):   # (a stream without a descriptor: a test's capture)
            pass
    raise SystemExit(PIPE_CLOSED_EXIT)


class PipeConsole(Console):
    """A Console that ends the process as SIGPIPE would when its reader goes away (rich exits with 1)."""

    def on_broken_pipe(self) -> None:
        exit_pipe_closed()
