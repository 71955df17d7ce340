"""Large matrix products split over the native pool (parallel.py): the products of MatMul,
Gemm, the GEMM-based convolutions, attention and the recurrent projections, once the
process's runs have native parts and so keep numpy's BLAS on one thread (parallel.run_parts).
Each part is then one BLAS call on one thread (numpy releases the GIL inside it): one pool
runs these parts and the native kernels' alike, rather than BLAS's own threads spinning on
the same cores. Until then BLAS's threads take the products whole."""
from __future__ import annotations

from typing import Optional

import math

import numpy as np

from . import parallel


def matmul(a: np.ndarray, b: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """np.matmul(a, b, out=out), split over this thread's threads where the product is large:
    parts of a's rows (or of b's columns, for a few rows), each one BLAS call on one thread
    (numpy releases the GIL inside it). One pool runs these parts and the native kernels'
    alike; BLAS's own threads would spin on the same cores."""
    if a.ndim < 2 or b.ndim < 2 or a.size * b.size < parallel.SPLIT_MACS * a.shape[-1]:
        # (a.size * b.size / k bounds the multiply-adds: at batch 1, most products are this)
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    if not parallel.blas_pinned():           # BLAS's own threads split it
        return np.matmul(a, b, out=out)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    macs = math.prod(lead) * m * k * n
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
