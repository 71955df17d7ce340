"""Threads for the native kernels: the CPU provider's counterpart of onnxruntime's intra-op
pool. ctypes releases the GIL during a call, so parts of one kernel's work (ranges of rows or
channels) run at once on a process-wide pool of Python threads.

The count is SessionOptions.intra_op_num_threads, set for the calling thread at the start of
each run (CPUProvider.begin_run); 0, or a call outside a run, means every core this process
may use, as onnxruntime's default. Work is split only where each part has at least
MIN_PART_MACS multiply-adds: a handoff to the pool costs tens of microseconds.

Large matrix products split here too (`matmul`), each part one single-threaded BLAS call: a
run keeps numpy's BLAS at one thread, because its own threads spin after each product and
then fight this pool's for the cores (ddddocr's detector on 2 cores: 87 ms on one thread,
97 ms with both pools, 72 ms with this one alone).
"""
from __future__ import annotations

from typing import Callable, Optional

import concurrent.futures
import os
import threading

MIN_PART_MACS = 1 << 23      # ~50-100 us of a native kernel's work on one core

_local = threading.local()
_pool: list = []             # the shared executor, made on first use
_pool_lock = threading.Lock()


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def set_threads(count: int) -> None:
    """The thread count for native kernels called from this thread (0: every core)."""
    _local.threads = count


def threads() -> int:
    count = getattr(_local, "threads", 0)
    return count if count > 0 else cores()


def parts_for(macs: int, limit: int) -> int:
    """How many parts to split `macs` multiply-adds into (at most `limit`, at least 1)."""
    return max(1, min(threads(), limit, macs // MIN_PART_MACS))


def split(length: int, parts: int) -> list:
    """[(begin, end)] of `parts` near-equal ranges covering range(length)."""
    bounds = [length * i // parts for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(parts) if bounds[i] < bounds[i + 1]]


def run_parts(fn: Callable[[int], None], parts: int) -> None:
    """fn(0), ..., fn(parts - 1), the first in this thread and the rest on the pool; returns
    when all are done, raising the first error."""
    if parts <= 1:
        fn(0)
        return
    pending = [_executor().submit(fn, i) for i in range(1, parts)]
    try:
        fn(0)
    finally:
        for future in pending:
            future.result()


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    with _pool_lock:
        if not _pool:
            _pool.append(concurrent.futures.ThreadPoolExecutor(
                max_workers=max(1, cores() - 1), thread_name_prefix="edgerun-native"))
        return _pool[0]


def matmul(a, b, out: Optional[object] = None):
    """np.matmul(a, b[, out]); a large product of a 2-D (or C-contiguous N-D) float `a` and
    a 2-D `b` of its type in parts over the rows of a or the columns of b, whichever are
    more, on this run's threads; a batch of products (3-D a and b, one batch) in parts of
    the batch."""
    import numpy as np

    if a.ndim == 3 and b.ndim == 3 and out is None and a.shape[0] == b.shape[0] and \
            a.dtype == b.dtype and a.dtype.kind == "f":
        return _batched(a, b)
    if b.ndim != 2 or a.ndim < 2 or a.dtype != b.dtype or a.dtype.kind != "f" or \
            (a.ndim > 2 and not a.flags.c_contiguous) or \
            (out is not None and not out.flags.c_contiguous):
        return np.matmul(a, b, out=out)
    k, n = b.shape
    rows = a.reshape(-1, k)
    m = rows.shape[0]
    parts = parts_for(m * n * k, max(m, n) // 8)
    if parts == 1:
        return np.matmul(a, b, out=out)
    y = np.empty((m, n), a.dtype) if out is None else out.reshape(m, n)
    by_rows = m >= n
    ranges = split(m if by_rows else n, parts)

    def part(i: int) -> None:
        lo, hi = ranges[i]
        if by_rows:
            np.matmul(rows[lo:hi], b, out=y[lo:hi])
        else:
            np.matmul(rows, b[:, lo:hi], out=y[:, lo:hi])
    run_parts(part, len(ranges))
    return y.reshape(a.shape[:-1] + (n,)) if out is None else out


def _batched(a, b):
    import numpy as np

    batch, m, k = a.shape
    n = b.shape[2]
    parts = parts_for(batch * m * n * k, batch)
    if parts == 1:
        return np.matmul(a, b)
    y = np.empty((batch, m, n), a.dtype)
    ranges = split(batch, parts)

    def part(i: int) -> None:
        lo, hi = ranges[i]
        np.matmul(a[lo:hi], b[lo:hi], out=y[lo:hi])
    run_parts(part, len(ranges))
    return y
