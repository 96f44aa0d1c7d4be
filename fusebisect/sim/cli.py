"""The simulator's own command line (``python -m fusebisect.sim train``), also behind ``fusebisect sim train``.

Kept free of typer/rich so a simulated run starts fast.
"""

from __future__ import annotations

import os
import sys

from fusebisect.errors import FusebisectError
from fusebisect.sim.options import build_parser, resolve

USAGE = ("usage: python -m fusebisect.sim train [options]   (a SIMULATOR for demos and tests; train --help)\n"
         "       python -m fusebisect.sim check [--log F] [--rtol R]   (its accuracy check; check --help)")


def main(argv: list[str] | None = None) -> int:
    """Run the simulator CLI on ``argv`` (default ``sys.argv[1:]``); returns the exit code: 0 ok, 1 simulated
    compile failure, 2 usage or input error (``check``: its own codes, 255 when it cannot run)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        print()
        print(build_parser().format_help())
        return 0 if args else 2
    if args[0] == "check":
        # a check that cannot run exits CANNOT_RUN (255), not 2: under `fusebisect run --check` 1-127 is BAD, and a
        # broken check would put the blame on the job
        from fusebisect.sim.check import CANNOT_RUN, main as check_main

        try:
            return check_main(args[1:])
        except SystemExit as exc:   # argparse: --help (0) or a bad flag (2)
            return CANNOT_RUN if exc.code else 0
        except FusebisectError as exc:
            print(f"fusebisect: error: {exc}", file=sys.stderr)
            return CANNOT_RUN
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            print(f"fusebisect.sim: error: {where}{exc.strerror or exc}", file=sys.stderr)
            return CANNOT_RUN
        except Exception as exc:   # a check that fails in itself has no verdict on the job (1 would be BAD)
            print(f"fusebisect.sim check: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
            return CANNOT_RUN
    if args[0] != "train":
        print(f"fusebisect.sim: error: unknown command {args[0]!r}\n{USAGE}", file=sys.stderr)
        return 2
    try:
        from fusebisect.sim.train import run

        return run(resolve(args[1:])).exit_code
    except SystemExit as exc:  # argparse: --help (0) or bad flag (2)
        return int(exc.code or 0)
    except FusebisectError as exc:
        print(f"fusebisect: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:   # `sim train | head`: as a process killed by SIGPIPE (141), silently
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:   # a --dump-path that is a file, a golden dir that exists as a file, ...
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"fusebisect.sim: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
