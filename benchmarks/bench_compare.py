"""Benchmarks for ``fusebisect compare`` (figures printed side by side, measured in one run).

1. Native compare of two dump trees of ``--gb`` GB each vs merely reading both trees' bytes, cold page cache
   (when ``/proc/sys/vm/drop_caches`` is writable) and warm: cosine + max abs error, and all ten metrics.
2. Native compare vs the real msaccucmp on the same nano trees (``--nano-ops`` small ops): whole processes
   (``fusebisect compare`` with ``--jobs 1`` and with its default, vs ``msaccucmp.py compare``), interleaved.
3. Peak RSS of a compare subprocess vs the largest tensor pair.

Usage: python benchmarks/bench_compare.py [--gb 1.0] [--tensor-mb 64] [--nano-ops 200] [--nano-elements 4096]
       [--repeat 3] [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from fusebisect.compare.dumpfile import TensorSpec, write_dump

TS0 = 1700000000000000


def make_tree(root: Path, ops: int, elements: int, *, seed: int, encoding: str, noise: float) -> None:
    """Writes ``ops`` dump files (one float32 output of ``elements`` each) under root."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    noise_rng = np.random.default_rng(seed)
    for i in range(ops):
        base = rng.standard_normal(elements, dtype=np.float32)
        if noise:
            base += noise_rng.standard_normal(elements, dtype=np.float32) * np.float32(noise)
        write_dump(root / f"Add.op{i}.{i}.0.{TS0 + i}", op_name=f"op{i}", inputs=[],
                   outputs=[TensorSpec(base, format=2, original_shape=base.shape, address=0x10000)],
                   encoding=encoding)


def drop_caches() -> bool:
    """Drops the page cache if allowed; returns True on success."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
        return True
    except OSError:
        return False


def read_bytes(*roots: Path) -> int:
    """Reads every file under roots (8 MiB chunks); returns the byte count."""
    total = 0
    buf = bytearray(8 << 20)
    view = memoryview(buf)
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                with open(path, "rb", buffering=0) as handle:
                    while True:
                        n = handle.readinto(view)
                        if not n:
                            break
                        total += n
    return total


def timed(fn, *args, **kw) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn(*args, **kw)
    return time.perf_counter() - start, value


def native(my: Path, golden: Path, algorithms, jobs: int = 1):
    from fusebisect.compare.engine import compare_dumps
    return compare_dumps(my, golden, algorithms=algorithms, jobs=jobs)


# VmHWM (peak RSS of this process image; ru_maxrss would include the parent's RSS inherited at fork)
_HWM = ("print([int(l.split()[1])*1024 for l in open('/proc/self/status') if l.startswith('VmHWM')][0])")


def peak_rss_of_compare(my: Path, golden: Path, algorithms: str) -> int:
    """Runs one compare in a fresh subprocess; returns its peak RSS in bytes."""
    code = ("import sys;from fusebisect.compare.engine import compare_dumps;"
            "compare_dumps(sys.argv[1],sys.argv[2],algorithms=sys.argv[3].split(','));" + _HWM)
    out = subprocess.run([sys.executable, "-c", code, str(my), str(golden), algorithms], check=True,
                         capture_output=True, text=True).stdout
    return int(out.strip().splitlines()[-1])


def baseline_rss() -> int:
    code = "import numpy;import fusebisect.compare.engine, fusebisect.compare.tree;" + _HWM
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return int(out.strip())


def find_msaccucmp() -> Path | None:
    try:
        import msprobe
    except ImportError:
        return None
    script = Path(msprobe.__file__).parent / "msaccucmp" / "msaccucmp.py"
    return script if script.is_file() else None


def main() -> None:
    from fusebisect.allocator import tune_allocator

    tune_allocator()  # the in-process engine runs with the allocator settings the CLI uses
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=1.0, help="size of each big dump tree in GB")
    parser.add_argument("--tensor-mb", type=int, default=64, help="size of one tensor in MB")
    parser.add_argument("--nano-ops", type=int, default=200, help="ops in the msaccucmp comparison trees")
    parser.add_argument("--nano-elements", type=int, default=4096, help="elements per op there")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each process in the msaccucmp comparison")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_compare_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        elements = args.tensor_mb * (1 << 20) // 4
        ops = max(1, int(round(args.gb * (1 << 30) / (elements * 4))))
        my, golden = work / "big_my", work / "big_golden"
        if not my.exists():
            make_tree(my, ops, elements, seed=2, encoding="binary", noise=1e-3)
            make_tree(golden, ops, elements, seed=3, encoding="binary", noise=0)
        size = sum(p.stat().st_size for p in (*my.iterdir(), *golden.iterdir()))
        print(f"trees: 2 x {ops} ops x {args.tensor_mb} MB float32 = {size / 1e9:.2f} GB total")

        cold = drop_caches()
        print(f"page cache: {'cold runs drop caches (/proc/sys/vm/drop_caches)' if cold else 'cannot drop caches: warm only'}")
        fast = ["CosineSimilarity", "MaxAbsoluteError"]
        results = {}
        for label, algs in (("cosine+maxabs", fast), ("all ten", None)):
            for temp in (["cold", "warm"] if cold else ["warm"]):
                if temp == "cold":
                    drop_caches()
                    t_read, _ = timed(read_bytes, my, golden)
                    drop_caches()
                else:
                    read_bytes(my, golden)
                    t_read, _ = timed(read_bytes, my, golden)
                t_cmp, report = timed(native, my, golden, algs)
                assert len(report.rows) == ops
                results[(label, temp)] = (t_cmp, t_read)
                print(f"{label:14s} {temp}: compare {t_cmp:6.2f} s  read bytes {t_read:6.2f} s  "
                      f"ratio {t_cmp / t_read:5.2f}x  ({size / t_cmp / 1e9:.2f} GB/s)")
        read_bytes(my, golden)
        t_jobs, _ = timed(native, my, golden, fast, 2)
        print(f"cosine+maxabs warm --jobs 2: {t_jobs:6.2f} s")

        pair = 2 * elements * 4
        base = baseline_rss()
        for algs in ("CosineSimilarity,MaxAbsoluteError", ",".join(__import__(
                "fusebisect.compare.metrics", fromlist=["ALGORITHMS"]).ALGORITHMS)):
            peak = peak_rss_of_compare(my, golden, algs)
            print(f"peak RSS ({'2 metrics' if algs.count(',') == 1 else '10 metrics'}): {peak / 1e6:.0f} MB "
                  f"= {peak / pair:.2f}x the largest tensor pair ({pair / 1e6:.0f} MB); "
                  f"interpreter+numpy baseline {base / 1e6:.0f} MB")
        if not args.keep and args.workdir is None:
            shutil.rmtree(my)
            shutil.rmtree(golden)

        script = find_msaccucmp()
        nano_my, nano_golden = work / "nano_my", work / "nano_golden"
        if not nano_my.exists():
            make_tree(nano_my, args.nano_ops, args.nano_elements, seed=2, encoding="nano", noise=1e-3)
            make_tree(nano_golden, args.nano_ops, args.nano_elements, seed=3, encoding="nano", noise=0)
        t_native, _ = timed(native, nano_my, nano_golden, None)
        cli = [sys.executable, "-m", "fusebisect", "compare", str(nano_my), str(nano_golden), "--json", "--csv",
               str(work / "ours.csv")]
        runs = {"cli --jobs 1": cli + ["--jobs", "1"], "cli default jobs": cli}
        if script is not None:
            runs["msaccucmp"] = [sys.executable, str(script), "compare", "-m", str(nano_my), "-g", str(nano_golden),
                                 "-out", str(work / "msa_out")]
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.repeat):      # interleaved, so background load hits every contender alike
            for name, argv in runs.items():
                start = time.perf_counter()
                proc = subprocess.run(argv, capture_output=True, text=True)
                times[name].append(time.perf_counter() - start)
                if proc.returncode not in (0, 1):
                    print(f"{name} failed (rc {proc.returncode}): {proc.stderr[-500:]}")
        med = {name: sorted(ts)[len(ts) // 2] for name, ts in times.items()}
        print(f"nano trees {args.nano_ops} ops x {args.nano_elements} elements, NPU vs NPU, all ten metrics, "
              f"whole processes, median of {args.repeat} (min):")
        print(f"  native in-process {t_native:6.3f} s")
        for name in runs:
            ratio = (f"  {med['msaccucmp'] / med[name]:5.1f}x faster than msaccucmp"
                     if script is not None and name != "msaccucmp" else "")
            print(f"  {name:17s} {med[name]:6.2f} s ({min(times[name]):.2f}){ratio}")
        if script is None:
            print("msaccucmp not installed: native vs msaccucmp skipped")
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
