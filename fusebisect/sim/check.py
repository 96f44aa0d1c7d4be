"""``python -m fusebisect.sim check``: the accuracy check a user would write for the simulated job.

It reads the losses a run printed (``$FUSEBISECT_TRIAL_DIR/stdout.log`` by default) and compares them, point
by point, with a reference curve computed in-process by the same model with correct kernels (the "CPU/GPU
golden" of a real project). Exit codes follow ``git bisect run``: 0 good, 1 bad, 125 cannot tell (no losses),
255 the check itself cannot run (a bad option, no log to read): outside 0-127, so ``fusebisect run --check``
aborts instead of reading a broken check as BAD.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
import tempfile
from pathlib import Path

from fusebisect.errors import UsageError

LOSS_RE = re.compile(r"^step (\d+) loss (\S+)$", re.M)

# git bisect's "abort": a check that cannot run must not say "bad" (2, the usual usage error, is 1-127: BAD)
CANNOT_RUN = 255


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fusebisect.sim check",
        description="SIMULATOR accuracy check: compare a simulated run's printed losses with the reference "
                    "curve of the same model with correct kernels. Exit 0 good, 1 bad, 125 no losses found, "
                    f"{CANNOT_RUN} the check cannot run (a bad option, no --log and no $FUSEBISECT_TRIAL_DIR, a --log "
                    "that is not a regular file): outside 0-127, so `fusebisect run --check` aborts the run rather than "
                    "reading it as bad.")
    parser.add_argument("--log", type=Path, help="the run's output (default: $FUSEBISECT_TRIAL_DIR/stdout.log)")
    parser.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance per step (default 1e-3)")
    parser.add_argument("--steps", type=int, default=None, help="steps of the reference (default: as logged)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulated job (default 0)")
    return parser


def reference_losses(steps: int, seed: int) -> list[float]:
    """Losses of the simulated job with every kernel correct (no faults), computed without writing anything."""
    from fusebisect.sim.options import SimOptions
    from fusebisect.sim.train import run

    with tempfile.TemporaryDirectory(prefix="fusebisect-sim-check-") as tmp:
        opts = SimOptions(steps=steps, seed=seed, work_path=Path(tmp))
        return run(opts, stdout=io.StringIO(), stderr=io.StringIO()).losses


def main(argv: list[str]) -> int:
    """Run the check; returns 0 (good), 1 (bad) or 125 (skip). Raises UsageError when it cannot run (the
    simulator's command line exits :data:`CANNOT_RUN` for it); argparse's SystemExit for --help or a bad flag."""
    args = build_parser().parse_args(argv)
    if not args.rtol >= 0 or args.rtol == float("inf"):   # (NaN fails every comparison)
        raise UsageError(f"--rtol must be a finite number >= 0, got {args.rtol}")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be >= 1, got {args.steps}")
    if args.seed < 0:   # (as train refuses it)
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    log = args.log
    if log is None:
        trial = os.environ.get("FUSEBISECT_TRIAL_DIR")
        if not trial:
            raise UsageError("--log not given and FUSEBISECT_TRIAL_DIR is not set")
        log = Path(trial) / "stdout.log"
    from fusebisect.fsutil import not_regular

    if why := not_regular(log) or ("a directory, not the run's output" if log.is_dir() else None):
        raise UsageError(f"--log {log}: {why}")
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        print(f"check: cannot read {log}: {exc.strerror}", file=sys.stderr)
        return 125
    logged: dict[int, float] = {}
    for m in LOSS_RE.finditer(text):
        try:
            logged[int(m.group(1))] = float(m.group(2))
        except ValueError:   # not a loss the job printed: no verdict (git bisect's skip), not a crash read as bad
            print(f"check: {log}: step {m.group(1)}'s loss {m.group(2)!r} is not a number", file=sys.stderr)
            return 125
    if not logged:
        print(f"check: no 'step N loss X' lines in {log}", file=sys.stderr)
        return 125
    steps = args.steps or (max(logged) + 1)
    reference = reference_losses(steps, args.seed)
    worst = 0.0
    for step, value in logged.items():
        if step >= len(reference):
            continue
        ref = reference[step]
        rel = abs(value - ref) / max(abs(ref), 1e-12) if value == value else float("inf")
        worst = max(worst, rel)
    verdict = "good" if worst <= args.rtol else "bad"
    print(f"check: worst relative loss difference {worst:.3g} (rtol {args.rtol:g}): {verdict}")
    return 0 if verdict == "good" else 1
