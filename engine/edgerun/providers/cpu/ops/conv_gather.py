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


@functools.lru_cache(maxsize=256)
def channel_gather_index(in_shape: tuple, kernel: tuple, strides: tuple, dilations: tuple,
                         pads_begin: tuple, out_shape: tuple, channels: int) -> tuple:
    """(flat_index, reads_padding): flat_index[c * K + k, p] is where channel c's kernel
    position k reads for output position p in the input rows (C, L), flattened, with one
    zero appended to each row when some window reads padding (index -1 reads that zero)."""
    index, reads_padding = gather_index(in_shape, kernel, strides, dilations, pads_begin,
                                        out_shape)
    length = math.prod(in_shape) + (1 if reads_padding else 0)
    within_row = np.where(index < 0, length - 1, index)
    flat = np.arange(channels)[:, None, None] * length + within_row[None]
    flat = flat.reshape(channels * index.shape[0], index.shape[1])
    flat.flags.writeable = False
    return flat, reads_padding


def with_ones_row(flat_index, reads_padding: bool, channels: int, in_size: int) -> tuple:
    """gathered_conv's index arguments with one more index row, reading a 1 placed after the
    (batch 1) input rows of `in_size` values each: W with the bias as its last column then
    adds the bias inside the GEMM."""
    ones_at = channels * (in_size + (1 if reads_padding else 0))
    extra = np.full((1, flat_index.shape[1]), ones_at, flat_index.dtype)
    index = np.concatenate([flat_index, extra])
    index.flags.writeable = False
    return index, reads_padding, True


def gathered_columns(x, flat_index, reads_padding: bool, ones: bool = False):
    """(N, C * kernel positions, output positions) contiguous columns of x (N, C, *S); with
    `ones` (batch 1), the index's last row reads a 1 appended after the rows."""
    n, c = x.shape[:2]
    rows = x.reshape(n, c, -1)
    if ones:
        length = rows.shape[2] + (1 if reads_padding else 0)
        buffer = np.empty(c * length + 1, x.dtype)
        buffer[-1] = 1
        within = buffer[:-1].reshape(c, length)
        if reads_padding:
            within[:, :-1] = rows[0]
            within[:, -1] = 0
        else:
            within[...] = rows[0]
        return buffer.take(flat_index)[None]
    if reads_padding:                      # the appended zero of each row is the padding
        padded = np.zeros((n, c, rows.shape[2] + 1), x.dtype)
        padded[:, :, :-1] = rows
        rows = padded
    return rows.reshape(n, -1).take(flat_index, axis=1)


def gathered_conv(x, w2, flat_index, reads_padding: bool, ones: bool = False):
    """Conv of x (N, C, *S) with W as (M, C * kernel positions), group 1: (N, M, positions);
    with `ones`, W's last column is the bias and the index reads a 1 for it."""
    columns = gathered_columns(x, flat_index, reads_padding, ones)
    if x.shape[0] == 1:
        return (w2 @ columns[0])[None]
    return np.matmul(w2, columns)
