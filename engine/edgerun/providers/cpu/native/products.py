"""Large matrix products split over threads (parallel.py): the products of MatMul, Gemm,
the GEMM-based convolutions, attention and the recurrent projections, once the process's
runs have native parts and so keep numpy's BLAS on one thread (parallel._before_parts).
Each part is then one BLAS call on one thread: float32 ones as cblas_sgemm records on the
native pool, others as numpy calls on the Python threads. The pools run these parts and
the native kernels' alike, rather than BLAS's own threads spinning on the same cores. Until
then BLAS's threads take the products whole."""
from __future__ import annotations

from typing import Optional

import ctypes
import functools
import math

import numpy as np

from . import parallel
from .library import address


def matmul(a: np.ndarray, b: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """np.matmul(a, b, out=out), split over this thread's threads where the product is large:
    parts of a's rows (or of b's columns, for a few rows), each one BLAS call on one thread.
    float32 products of a matrix (or a stack of rows) by a matrix go to the native pool as
    cblas_sgemm calls (`_sgemm_parts`: a hand-off of a microsecond, so parts can be small);
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
    operands = _sgemm_operands(a, b, out)
    if operands is not None:
        return _sgemm_parts(operands, macs) if macs >= parallel.SPLIT_RECORD_MACS else \
            np.matmul(a, b, out=out)
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


def _sgemm_operands(a: np.ndarray, b: np.ndarray, out: Optional[np.ndarray]) -> Optional[tuple]:
    """(A [M, k], B [k, n], whether B is stored transposed, the result [..., n], numpy's
    (cblas_sgemm, ilp64)) of a float32 product BLAS takes as one sgemm: a's leading axes fold
    into its rows (a stack of rows times one matrix), rows of unit stride, B either way
    round, a C-contiguous result; None otherwise (or without numpy's cblas_sgemm)."""
    entry = _blas_sgemm()
    if a.dtype != np.float32 or b.dtype != np.float32 or b.ndim != 2 or entry is None or \
            (out is not None and (out.dtype != np.float32 or not out.flags.c_contiguous)):
        return None
    k, n = b.shape
    shape = a.shape[:-1] + (n,)
    if out is not None and out.shape != shape:
        return None
    if a.ndim > 2:
        if not a.flags.c_contiguous:
            return None
        a = a.reshape(-1, k)
    if a.strides[1] != 4 or a.strides[0] % 4 or a.strides[0] < 4 * k or min(a.shape[0], k, n) == 0:
        return None
    if b.strides[1] == 4 and b.strides[0] % 4 == 0 and b.strides[0] >= 4 * n:
        transposed = False
    elif b.strides[0] == 4 and b.strides[1] % 4 == 0 and b.strides[1] >= 4 * k:
        transposed = True
    else:
        return None
    return a, b, transposed, out if out is not None else np.empty(shape, np.float32), entry


def _sgemm_parts(operands: tuple, macs: int) -> np.ndarray:
    """The result of _sgemm_operands' a @ b, in parts of a's rows (or of b's columns, for a
    few rows), each a cblas_sgemm on one of the native pool's threads
    (cpu_kernels/blas_parts.c)."""
    a, b, transposed, result, (sgemm, ilp64) = operands
    m, k = a.shape
    n = b.shape[1]
    c = result.reshape(m, n)
    by_rows = m >= n or m >= 64 * parallel.threads()
    parts = parallel.parts_for(macs, m if by_rows else n, parallel.MIN_RECORD_MACS)
    if parts <= 1:
        np.matmul(a, b, out=c)
        return result
    lda, ldb, ldc = a.strides[0] // 4, b.strides[1 if transposed else 0] // 4, n
    ranges = np.array(parallel.split(m if by_rows else n, parts), np.int64)
    start, size = ranges[:, 0], ranges[:, 1] - ranges[:, 0]
    a_at, b_at, c_at = address(a), address(b), address(c)
    if by_rows:
        words = [sgemm, int(ilp64), int(transposed), size, n, k, a_at + start * lda * 4, lda,
                 b_at, ldb, c_at + start * ldc * 4, ldc]
    else:
        b_step = ldb if transposed else 1
        words = [sgemm, int(ilp64), int(transposed), m, size, k, a_at, lda,
                 b_at + start * b_step * 4, ldb, c_at + start * 4, ldc]
    parallel.run_split("er_cpu_sgemm", words, parts)      # (parts > 1: the record form)
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
