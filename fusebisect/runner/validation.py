"""Check every ``fusebisect run`` option before anything runs or is written.

An execution can cost hours, so a bad value is a one-line usage error (exit 2) before the first one, and before
the journal is written: a journal holding a bad value would refuse the corrected rerun as "another command".
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Mapping

from fusebisect.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from fusebisect.runner.session import RunOptions

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
    dup = sorted({d for d in ids if ids.count(d) > 1}, key=int)
    if dup:
        raise UsageError(f"{where}: device {', '.join(dup)} given more than once")
    return ids
