"""Benchmark of the simulated training job, measured side by side in one run.

Prints the wall and CPU time of ``python -m fusebisect.sim train`` (default 20 steps, no dumps) next to a bare
``python -c "import numpy"`` start-up, a run with a one-step dump plus golden files, and the size of that dump
tree. The target is a default run well under 2 s on one core.

Usage: python benchmarks/bench_sim.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(argv: list[str], cwd: Path, repeat: int) -> tuple[float, float]:
    """Best wall and CPU seconds of ``repeat`` runs of ``argv``."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        py = sys.executable
        base = timed([py, "-c", "import numpy"], work, args.repeat)
        default = timed([py, "-m", "fusebisect.sim", "train"], work, args.repeat)
        dump = work / "dump"
        dumped = timed([py, "-m", "fusebisect.sim", "train", "--dump-step", "0", "--dump-path", str(dump),
                        "--dump-golden", str(work / "golden")], work, 1)
        size = sum(p.stat().st_size for p in dump.rglob("*") if p.is_file())
        print(f"{'case':38s} {'wall s':>8s} {'cpu s':>8s} {'x numpy start':>14s}")
        for name, (wall, cpu) in [("python -c 'import numpy'", base), ("sim train (20 steps, no dumps)", default),
                                  ("sim train + 1-step dump + golden", dumped)]:
            print(f"{name:38s} {wall:8.3f} {cpu:8.3f} {wall / base[0]:14.1f}")
        print(f"one-step dump tree: {size / 1024:.0f} KiB (limit 20 MiB); cpus: {os.cpu_count()}")


if __name__ == "__main__":
    main()
