"""im2col by one fancy index: Conv's method for short outputs (a few output positions).

Streaming models (silero VAD) run many convolutions whose output holds one to a few
positions per channel. Their GEMM is small, so the fixed cost of building the columns
decides: here it is one precomputed index (kernel positions x output positions into the
flattened input) and a single `take`, with padding read from one zero column appended to
each row instead of a padded copy of the input.
"""
from __future__ import annotations

import functools
import math

import numpy as np

# a Conv whose batch * output positions is at most this uses the gathered columns
GATHER_MAX_POSITIONS = 32
# ... and whose columns (batch * channels * kernel positions * output positions) fit here
GATHER_MAX_COLUMNS = 1 << 16


@functools.lru_cache(maxsize=256)
def gather_index(in_shape: tuple, kernel: tuple, strides: tuple, dilations: tuple,
                 pads_begin: tuple, out_shape: tuple) -> tuple:
    """(index, reads_padding): index[k, p] is the flat input position that kernel position
    k reads for output position p (both row-major), or -1 where it reads padding."""
    rank = len(in_shape)
    index = np.zeros((1,) * (2 * rank), np.int64)
    valid = np.ones((1,) * (2 * rank), bool)
    for axis in range(rank):
        positions = (np.arange(kernel[axis])[:, None] * dilations[axis]
                     + np.arange(out_shape[axis])[None, :] * strides[axis] - pads_begin[axis])
        shape = [1] * (2 * rank)                 # kernel axis `axis`, output axis rank + axis
        shape[axis], shape[rank + axis] = positions.shape
        positions = positions.reshape(shape)
        index = index + positions * math.prod(in_shape[axis + 1:])
        valid = valid & (positions >= 0) & (positions < in_shape[axis])
    index = np.where(valid, index, -1).reshape(math.prod(kernel), math.prod(out_shape))
    index.flags.writeable = False
    return index, not bool(valid.all())


def gathered_columns(x, index, reads_padding: bool):
    """(N, C, kernel positions, output positions) columns of x (N, C, *spatial)."""
    n, c = x.shape[:2]
    rows = x.reshape(n, c, -1)
    if reads_padding:                      # index -1 reads the appended zero
        rows = np.concatenate([rows, np.zeros((n, c, 1), x.dtype)], axis=2)
    return rows[:, :, index]


def gathered_conv(x, w, index, reads_padding: bool):
    """Conv of x (N, C, *S) with W (M, C, *kernel), group 1: (N, M, output positions)."""
    n, c = x.shape[:2]
    m = w.shape[0]
    columns = gathered_columns(x, index, reads_padding)
    weights = w.reshape(m, -1)
    if n == 1:
        return (weights @ columns.reshape(weights.shape[1], -1)).reshape(1, m, -1)
    return np.matmul(weights, columns.reshape(n, weights.shape[1], -1))
