"""Dump tree read throughput: fusebisect's reader vs plain ``numpy.fromfile`` over the same bytes.

Builds a dump tree of ``--gb`` gigabytes (binary encoding, many files, float16/float32 tensors) in a temporary
directory, then in one run, alternating, reads every tensor of every file:

* fusebisect: ``scan_dumps`` + ``read_dump`` + ``TensorRecord.array()`` (memory-mapped, lazily decoded);
* baseline: ``numpy.fromfile(path, dtype, count, offset)`` per tensor (offsets computed beforehand, untimed).

Both sides then touch every byte, so the arrays are really materialised, in three ways measured in the same
run: ``sum`` (native-dtype sum), ``sum64`` (float64-accumulated sum, a compute-heavy cast loop) and ``max``.
Prints the throughput of each side and the ratio fusebisect / fromfile per way (target >= 0.8). Files are in the page cache after
building (warm reads); pass ``--dir`` to reuse a tree.

    python benchmarks/bench_dump_read.py --gb 0.1      # quick
    python benchmarks/bench_dump_read.py --gb 1        # the reported figure
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from fusebisect.compare.dumpfile import TensorSpec, read_dump, write_dump
from fusebisect.compare.tree import scan_dumps


def build(root: Path, gb: float, file_mb: float) -> int:
    """Write dump files totalling ``gb`` GB under a CANN leaf dir; return the number of files."""
    leaf = root / "20240101000000" / "0" / "model" / "1" / "0"
    rng = np.random.default_rng(0)
    per_file = int(file_mb * 2**20)
    n_files = max(1, int(gb * 2**30 // per_file))
    x16 = rng.standard_normal(per_file // 4 // 2).astype(np.float16)  # a quarter of the bytes as fp16 input
    x32 = rng.standard_normal(per_file * 3 // 4 // 4).astype(np.float32)  # the rest as fp32 output
    for i in range(n_files):
        write_dump(leaf / f"MatMul.op{i}.{i}.0.{1700000000000000 + i}", op_name=f"op{i}",
                   inputs=[TensorSpec(x16)], outputs=[TensorSpec(x32, original_op=(f"orig{i}", 0))])
    return n_files


@np.errstate(all="ignore")  # float16 sums overflow to inf; both sides alike
def _touch(arr: np.ndarray, how: str) -> float:
    if how == "sum":
        return float(arr.sum())
    if how == "sum64":
        return float(arr.sum(dtype=np.float64))
    return float(arr.max())


TOUCHES = ("sum", "sum64", "max")


def read_ours(root: Path, how: str = "sum") -> tuple[float, int]:
    total, nbytes = 0.0, 0
    for entry in scan_dumps(root).entries:
        for rec in read_dump(entry.path).tensors():
            total += _touch(rec.array(), how)
            nbytes += rec.size
    return total, nbytes


def plan_fromfile(root: Path) -> list[tuple[Path, np.dtype, int, int]]:
    plan = []
    for entry in scan_dumps(root).entries:
        dump = read_dump(entry.path)
        header = int(np.fromfile(entry.path, dtype="<u8", count=1)[0])
        offset = 8 + header
        for rec in dump.tensors():
            dtype = np.dtype(rec.array().dtype)
            plan.append((entry.path, dtype, rec.size // dtype.itemsize, offset))
            offset += rec.size
    return plan


def read_fromfile(plan, how: str = "sum") -> tuple[float, int]:
    total, nbytes = 0.0, 0
    for path, dtype, count, offset in plan:
        arr = np.fromfile(path, dtype=dtype, count=count, offset=offset)
        total += _touch(arr, how)
        nbytes += arr.nbytes
    return total, nbytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="size of the generated tree in GB (default 1)")
    parser.add_argument("--file-mb", type=float, default=4.0, help="size of one dump file in MB (default 4)")
    parser.add_argument("--repeat", type=int, default=3, help="alternating rounds; best of each is reported")
    parser.add_argument("--touch", nargs="+", choices=TOUCHES, default=list(TOUCHES),
                        help="how every byte is touched (default: all, each measured side by side)")
    parser.add_argument("--dir", type=Path, help="build into / reuse this directory instead of a temp dir")
    args = parser.parse_args()

    tmp = None
    root = args.dir
    if root is None:
        tmp = tempfile.mkdtemp(prefix="fusebisect-bench-")
        root = Path(tmp)
    try:
        if not any(root.rglob("MatMul.*")):
            t0 = time.perf_counter()
            n = build(root, args.gb, args.file_mb)
            print(f"built {n} files in {time.perf_counter() - t0:.1f} s under {root}")
        plan = plan_fromfile(root)
        for how in args.touch:
            ours_best = base_best = float("inf")
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                s_ours, n_ours = read_ours(root, how)
                ours_best = min(ours_best, time.perf_counter() - t0)
                t0 = time.perf_counter()
                s_base, n_base = read_fromfile(plan, how)
                base_best = min(base_best, time.perf_counter() - t0)
                # same bytes on both sides: max is exact and the float64 sum nearly so; a native float16/32
                # sum depends on the buffer's alignment (numpy's pairwise loop), so it is not compared
                assert n_ours == n_base, (n_ours, n_base)
                assert how == "sum" or np.isclose(s_ours, s_base, equal_nan=True), (how, s_ours, s_base)
            gb = n_ours / 2**30
            print(f"[{how}] {gb:.3f} GB in {len(plan)} tensors: fusebisect {ours_best:.3f} s "
                  f"({gb / ours_best:.2f} GB/s), numpy.fromfile {base_best:.3f} s ({gb / base_best:.2f} GB/s), "
                  f"ratio {base_best / ours_best:.2f} (target >= 0.8)")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
