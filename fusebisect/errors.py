"""Exceptions that carry a message fit for the user.

Every error a user can cause (bad file, bad flag) is a :class:`FusebisectError`. The CLI turns it into one
line on stderr and exit code 2; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import os


class FusebisectError(Exception):
    """A user-facing error. ``str(err)`` is one line naming the file or flag and the reason; ``exit_code`` is the
    CLI's exit status for it (2: bad input or usage)."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path) if path is not None else None
        self.reason = message
        super().__init__(f"{self.path}: {message}" if self.path else message)


class DumpFormatError(FusebisectError):
    """A dump file is truncated, malformed, or uses a dtype/format we cannot decode."""


class GraphFormatError(FusebisectError):
    """A GE graph dump (txt/json/pb) cannot be read."""


class SwitchFileError(FusebisectError):
    """A fusion_switch.cfg cannot be read, or would be invalid if written."""

    def __init__(self, message: str, *, path=None, line: int | None = None, column: int | None = None) -> None:
        self.line = line
        self.column = column
        where = ""
        if line is not None:
            where = f"line {line}" + (f", column {column}" if column is not None else "") + ": "
        super().__init__(where + message, path=path)


class UsageError(FusebisectError):
    """A flag or argument combination that cannot work."""
