"""Allocator tuning for the fusebisect process (called by the CLI entry point, never on import).

numpy allocates a fresh temporary for most operations. glibc serves blocks above its mmap threshold (128 KiB
at start) with ``mmap``: every temporary of a mid-sized tensor then costs a system call, a page fault per
4 KiB page (zero-filled by the kernel) and an ``munmap``. Comparing dumps of many 64K-element tensors spent more
time in the kernel than in numpy. Raising the threshold keeps such blocks in the heap, where they are reused;
tensors of 64 MiB and more still come straight from ``mmap``.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def tune_allocator(mmap_threshold: int = 64 << 20, trim_threshold: int = 128 << 20) -> bool:
    """Set glibc's mmap and trim thresholds for this process. Returns False where mallopt is unavailable
    (another libc): nothing changes then. Never raises."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(M_TRIM_THRESHOLD, trim_threshold))
