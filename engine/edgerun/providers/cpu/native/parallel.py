"""Threads for the native kernels and large matrix products (products.py): the CPU
provider's counterpart of onnxruntime's intra-op pool. Two pools share the work:

- the native pool (cpu_kernels/pool.c; run_split, run_records): C workers that never take
  the GIL run the parts of one kernel call (ranges of rows or channels, each a record of
  the kernel's arguments), handed over in about a microsecond, so parts of MIN_RECORD_MACS
  multiply-adds pay. The native convs, pools, integer convs and tree ensembles, and float32
  products as cblas_sgemm calls, split there; so do elementwise passes (activations,
  elementwise programs, large float32 Add/Sub/Mul/Div) of MIN_RECORD_VALUES values a part.
- a pool of Python threads (run_parts) for parts that are Python calls: products numpy
  must run itself (batched, broadcast, other dtypes; numpy releases the GIL inside BLAS),
  from MIN_PART_MACS a part: its hand-off costs tens of microseconds.

The count is SessionOptions.intra_op_num_threads, set for the calling thread at the start of
each run (CPUProvider.begin_run); 0, or a call outside a run, means every core this process
may use, as onnxruntime's default.
"""
from __future__ import annotations

from typing import Callable, Optional

import concurrent.futures
import ctypes
import functools
import os
import threading

from .library import address, library

MIN_PART_MACS = 1 << 23      # ~50-100 us of a native kernel's work on one core
SPLIT_MACS = 2 * MIN_PART_MACS    # the fewest multiply-adds parts_for splits in two
# parts handed to the native pool (run_split: C workers, a hand-off of ~1 us) may be
# smaller: ~5-20 us of work
MIN_RECORD_MACS = 1 << 20
SPLIT_RECORD_MACS = 2 * MIN_RECORD_MACS
# an elementwise pass's values per part there (~20-50 us of streaming memory on one core)
MIN_RECORD_VALUES = 1 << 16

_local = threading.local()
_pool: list = []             # the shared executor, made on first use
_pool_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def cores() -> int:
    """The cores this process may run on (asked once: a system call)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def set_threads(count: int, pin_blas: Optional[Callable[[], None]] = None) -> None:
    """The thread count for native kernels and split products called from this thread (0:
    every core); `pin_blas` sets numpy's BLAS to one thread (see _before_parts)."""
    _local.threads = count
    _local.pin_blas = pin_blas


_blas_pinned: list = []      # [True] once a run's native parts set BLAS to one thread


def blas_pinned() -> bool:
    """Whether BLAS runs on one thread for the process's runs: large products are then
    split here (products.py); until then BLAS's own threads take them."""
    return bool(_blas_pinned)


def _before_parts() -> None:
    """Before parts run on either pool: BLAS to one thread, once per process (its idle
    threads spin for ~0.1 s after each call, on the very cores the parts run on; native
    parts that scaled 1.6-1.9x alone scaled ~1.1x inside ResNet-50). A model with no native
    parts (transformers: their work is products) keeps BLAS's threads: splitting every
    product on the native pool from the first run was 13-14% slower on MiniLM seq128."""
    if not _blas_pinned:
        pin = getattr(_local, "pin_blas", None)
        if pin is not None:
            pin()
            _blas_pinned.append(True)


def threads() -> int:
    count = getattr(_local, "threads", 0)
    return count if count > 0 else cores()


def parts_for(macs: int, limit: int, minimum: int = MIN_PART_MACS) -> int:
    """How many parts to split `macs` multiply-adds into (at most `limit`, at least 1), each
    of at least `minimum` (MIN_RECORD_MACS for run_split's parts)."""
    return max(1, min(threads(), limit, macs // minimum))


def split(length: int, parts: int) -> list:
    """[(begin, end)] of `parts` near-equal ranges covering range(length)."""
    bounds = [length * i // parts for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(parts) if bounds[i] < bounds[i + 1]]


def value_ranges(n: int) -> list:
    """[(begin, end)] of an elementwise pass over n values, split for threads(): one range
    below 2 * MIN_RECORD_VALUES; each part begins on a 64-byte vector (16 float32s)."""
    parts = parts_for(n, threads(), MIN_RECORD_VALUES)
    if parts <= 1:
        return [(0, n)]
    return [(16 * b, min(16 * e, n)) for b, e in split(-(-n // 16), parts)]


def part_addresses(base: int, ranges: list, stride: int = 4) -> list:
    """Where each of `ranges` begins in memory at `base`, `stride` bytes a unit (a float32
    value, or a row): one run_split word per part."""
    return [base + stride * begin for begin, _ in ranges]


def part_lengths(ranges: list) -> list:
    return [end - begin for begin, end in ranges]


def run_parts(fn: Callable[[int], None], parts: int) -> None:
    """fn(0), ..., fn(parts - 1), the first in this thread and the rest on the pool; returns
    when all are done, raising the first error."""
    if parts <= 1:
        fn(0)
        return
    _before_parts()
    pending = [_executor().submit(fn, i) for i in range(1, parts)]
    try:
        fn(0)
    finally:
        for future in pending:
            future.result()


def run_split(kernel: str, words: list, parts: int) -> int:
    """`kernel`'s work in `parts` parts: part i's arguments are `words`, each an int, None
    (a null pointer) or a sequence of one value per part, taking its i-th. One part is a
    plain call of `kernel` here; more go to the native pool (cpu_kernels/pool.c) as records
    for its record form `kernel + "_record"` (`int fn(const uint64_t *words)`), run by the
    calling thread and up to threads() - 1 workers that never take the GIL (a hand-off of
    about a microsecond). Returns the largest code a part returned (0 for void kernels)."""
    import numpy as np   # (the provider's module imports without numpy: Pyodide's core)

    if parts <= 1:
        return getattr(library(), kernel)(*_part_words(words, 0)) or 0
    rows = np.array([[_word(w) for w in _part_words(words, i)] for i in range(parts)],
                    np.uint64)
    return run_records(kernel + "_record", rows)


def _part_words(words: list, i: int) -> list:
    """Part i's arguments: each word, or its i-th value, as a Python int (ctypes takes no
    numpy integers for pointers) or None."""
    return [None if w is None else int(w[i] if hasattr(w, "__len__") else w) for w in words]


def _word(value) -> int:
    """A record's word: a null pointer 0, a negative integer in two's complement."""
    if value is None:
        return 0
    return value if value >= 0 else value + (1 << 64)


def run_records(kernel: str, records) -> int:
    """Each of `records` (rows of a C-contiguous array: one part's record) through the
    exported `int kernel(const void *record)`, on the native pool; the largest code."""
    _before_parts()
    return library().er_cpu_pool_run(_entry(kernel), address(records), records.strides[0],
                                     records.shape[0], threads())


@functools.lru_cache(maxsize=None)
def _entry(kernel: str) -> int:
    """The address of an exported record form (looked up once)."""
    return ctypes.cast(getattr(library(), kernel), ctypes.c_void_p).value or 0


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    with _pool_lock:
        if not _pool:
            _pool.append(concurrent.futures.ThreadPoolExecutor(
                max_workers=max(1, cores() - 1), thread_name_prefix="edgerun-native"))
        return _pool[0]
