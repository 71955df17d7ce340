"""Large matrix products split over threads (parallel.py): the products of MatMul, Gemm,
the GEMM-based convolutions, attention and the recurrent projections, once the process's
runs have native parts and so keep numpy's BLAS on one thread (parallel._before_parts).
Each part is then one BLAS call on one thread: float32 ones as cblas_sgemm records on the
native pool, others as numpy calls on the Python threads. The pools run these parts and
the native kernels' alike, rather than BLAS's own threads spinning on the same cores. Until
then BLAS's threads take the products whole."""
from __future__ import annotations

from typing import NamedTuple, Optional

import ctypes
import functools
import math

import numpy as np

from . import parallel
from .library import address


def matmul(a: np.ndarray, b: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """np.matmul(a, b, out=out), split over this thread's threads where the product is large:
    parts of a's rows (or of b's columns, for a few rows), each one BLAS call on one thread.
    float32 products of matrices (a stack of rows by a matrix, or stacks of matrices, as a
    batch's pointwise convs are) go to the native pool as cblas_sgemm calls (`_sgemm_parts`:
    a hand-off of a microsecond, so parts can be small; a Python thread's part would share
    its core with the native workers still spinning after the previous node's parts);
    others run on the pool of Python threads (numpy releases the GIL inside BLAS). One pool
    runs these parts and the native kernels' alike; BLAS's own threads would spin on the
    same cores."""
    if a.ndim < 2 or b.ndim < 2 or \
            a.size * b.size < parallel.SPLIT_RECORD_MACS * a.shape[-1]:
        # (a.size * b.size / k bounds the multiply-adds: at batch 1, most products are this)
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    if not parallel.blas_pinned():           # BLAS's own threads split it
        return np.matmul(a, b, out=out)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    macs = math.prod(lead) * m * k * n
    stack = 1 if b.ndim == 2 and a.flags.c_contiguous else math.prod(lead)  # sgemm calls
    operands = _sgemm_operands(a, b, out) if macs // stack >= parallel.SPLIT_RECORD_MACS \
        or stack == 1 else None
    if operands is not None:
        done = _sgemm_parts(operands, macs) if macs >= parallel.SPLIT_RECORD_MACS else None
        return done if done is not None else np.matmul(a, b, out=out)
    # (products of other types or layouts, and stacks of matrices too small for a record
    # each: split on the Python threads)
    if macs < parallel.SPLIT_MACS:
        return np.matmul(a, b, out=out)
    by_rows = m >= n or m >= 64 * parallel.threads()
    parts = parallel.parts_for(macs, m if by_rows else n)
    if parts <= 1:
        return np.matmul(a, b, out=out)
    if out is None:
        out = np.empty(lead + (m, n), np.result_type(a, b))
    ranges = parallel.split(m if by_rows else n, parts)

    def part(i: int) -> None:
        s = slice(*ranges[i])
        if by_rows:
            np.matmul(a[..., s, :], b, out=out[..., s, :])
        else:
            np.matmul(a, b[..., s], out=out[..., s])

    parallel.run_parts(part, len(ranges))
    return out


class SgemmCalls(NamedTuple):
    """A float32 product as cblas_sgemm calls of one shape, one per matrix of the stack:
    strides in elements, the address of each matrix of a, of b and of the result."""
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    transposed: bool          # b stored as [n, k]
    a_at: list
    b_at: list
    c_at: list
    result: np.ndarray
    entry: tuple              # numpy's (cblas_sgemm address, whether ILP64)


def _sgemm_operands(a: np.ndarray, b: np.ndarray,
                    out: Optional[np.ndarray]) -> Optional[SgemmCalls]:
    """A float32 product BLAS takes as cblas_sgemm calls of one shape, one per matrix of the
    (broadcast) stack; None otherwise (or without numpy's cblas_sgemm). A stack of rows
    times one matrix folds into one matrix of rows (one call) where a's leading axes allow
    it. Each matrix needs rows of unit stride (B either way round, rows longer than k
    allowed) and the result to be C-contiguous."""
    entry = _blas_sgemm()
    if a.dtype != np.float32 or b.dtype != np.float32 or entry is None or \
            (out is not None and (out.dtype != np.float32 or not out.flags.c_contiguous)):
        return None
    k, n = b.shape[-2:]
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    shape = lead + (a.shape[-2], n)
    if out is not None and out.shape != shape:
        return None
    if b.ndim == 2 and a.ndim > 2 and a.flags.c_contiguous:
        a, lead = a.reshape(-1, k), ()
    m = a.shape[-2]
    if m == 1:
        # one row: numpy's product is a gemv; OpenBLAS's sgemm of one row packs all of b,
        # 2-4x slower (alexnet's 9216 x 4096 layer at batch 1: 8 ms, 16 on two threads)
        return None
    if a.strides[-1] != 4 or a.strides[-2] % 4 or a.strides[-2] < 4 * k or \
            min(m, k, n) == 0 or any(s % 4 for s in a.strides[:-2] + b.strides[:-2]):
        return None
    if b.strides[-1] == 4 and b.strides[-2] % 4 == 0 and b.strides[-2] >= 4 * n:
        transposed, ldb = False, b.strides[-2] // 4
    elif b.strides[-2] == 4 and b.strides[-1] % 4 == 0 and b.strides[-1] >= 4 * k:
        transposed, ldb = True, b.strides[-1] // 4
    else:
        return None
    result = out if out is not None else np.empty(shape, np.float32)
    c_at = address(result)
    return SgemmCalls(m, n, k, a.strides[-2] // 4, ldb, n, transposed, _matrices(a, lead),
                      _matrices(b, lead), [c_at + 4 * m * n * i for i in range(math.prod(lead))],
                      result, entry)


def _matrices(x: np.ndarray, lead: tuple) -> list:
    """The address of each of x's matrices (its last two axes), in the order of the
    broadcast leading shape `lead` (x's own leading axes align to its end; Python ints: a
    stack holds few matrices, and numpy's calls cost more than these sums)."""
    offsets = [address(x)]
    own = (1,) * (len(lead) - (x.ndim - 2)) + x.shape[:-2]
    strides = (0,) * (len(lead) - (x.ndim - 2)) + x.strides[:-2]
    for size, want, stride in zip(own, lead, strides):
        steps = range(want) if size == want else [0] * want
        offsets = [at + i * stride for at in offsets for i in steps]
    return offsets


def _sgemm_parts(operands: SgemmCalls, macs: int) -> Optional[np.ndarray]:
    """The result of _sgemm_operands' product as cblas_sgemm records on the native pool
    (cpu_kernels/blas_parts.c): each matrix whole where the matrices share the threads out
    evenly, else each in parts of its rows (or of b's columns, for a few rows); None where
    that is one call."""
    m, n, k, lda, ldb, ldc, transposed, a_at, b_at, c_at, result, (sgemm, ilp64) = operands
    count, threads = len(c_at), parallel.threads()
    if threads <= 1:
        return None
    by_rows = m >= n or m >= 64 * threads
    split = 1 if count % threads == 0 else \
        parallel.parts_for(macs // count, m if by_rows else n, parallel.MIN_RECORD_MACS)
    if count * split <= 1:
        return None
    one = parallel.split(m if by_rows else n, split)
    ranges = one * count
    size = [stop - start for start, stop in ranges]
    a_at, b_at, c_at = ([at for at in ats for _ in one] for ats in (a_at, b_at, c_at))
    if by_rows:
        words = [sgemm, int(ilp64), int(transposed), size, n, k,
                 [at + r[0] * lda * 4 for at, r in zip(a_at, ranges)], lda, b_at, ldb,
                 [at + r[0] * ldc * 4 for at, r in zip(c_at, ranges)], ldc]
    else:
        b_step = 4 * (ldb if transposed else 1)
        words = [sgemm, int(ilp64), int(transposed), m, size, k, a_at, lda,
                 [at + r[0] * b_step for at, r in zip(b_at, ranges)], ldb,
                 [at + r[0] * 4 for at, r in zip(c_at, ranges)], ldc]
    parallel.run_split("er_cpu_sgemm", words, len(ranges))
    return result


@functools.lru_cache(maxsize=1)
def _blas_sgemm() -> Optional[tuple]:
    """(address, whether its integers are 64-bit) of the cblas_sgemm of numpy's OpenBLAS,
    found once through threadpoolctl's list of loaded BLAS libraries; None where there is
    none (another BLAS, no threadpoolctl): products then split on the Python threads."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    for library in ThreadpoolController().select(user_api="blas").lib_controllers:
        if getattr(library, "internal_api", "") != "openblas":
            continue
        try:
            handle = ctypes.CDLL(library.filepath)
        except OSError:
            continue
        for name, ilp64 in (("scipy_cblas_sgemm64_", True), ("cblas_sgemm64_", True),
                            ("scipy_cblas_sgemm", False), ("cblas_sgemm", False)):
            entry = getattr(handle, name, None)
            if entry is not None:
                return ctypes.cast(entry, ctypes.c_void_p).value, ilp64
    return None
