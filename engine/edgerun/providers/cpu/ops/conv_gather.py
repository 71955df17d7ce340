"""im2col by one fancy index: Conv's method for short outputs (a few output positions).

Streaming models (silero VAD) run many convolutions whose output holds one to a few
positions per channel. Their GEMM is small, so the fixed cost of building the columns
decides: here it is one precomputed index (kernel positions x output positions into the
flattened input) and a single `take`, with padding read from one zero column appended to
each input instead of a padded copy of it.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..native import products

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


@dataclass(frozen=True)
class GatherIndex:
    """Where gathered columns come from: `index[c * K + k, p]` is the position that channel
    c's kernel position k reads for output position p in one batch's input, flattened, with
    `tail` appended (a 0 that windows over padding read, a 1 for a bias row), or None when
    nothing is appended."""
    index: np.ndarray
    tail: Optional[np.ndarray]


_ZERO = np.zeros(1, np.float32)


@functools.lru_cache(maxsize=256)
def channel_gather_index(in_shape: tuple, kernel: tuple, strides: tuple, dilations: tuple,
                         pads_begin: tuple, out_shape: tuple, channels: int) -> GatherIndex:
    """The GatherIndex of a group-1 convolution over (channels, *in_shape) inputs."""
    index, reads_padding = gather_index(in_shape, kernel, strides, dilations, pads_begin,
                                        out_shape)
    length = math.prod(in_shape)
    flat = np.where(index < 0, channels * length,                      # -1: the tail's 0
                    np.arange(channels)[:, None, None] * length + index[None])
    flat = flat.reshape(channels * index.shape[0], index.shape[1])
    flat.flags.writeable = False
    return GatherIndex(flat, _ZERO if reads_padding else None)


def with_ones_row(gather: GatherIndex, channels: int, in_size: int) -> GatherIndex:
    """`gather` with one more index row reading a 1 appended to each image's `channels` x
    `in_size` values: W with the bias as its last column then adds the bias inside the
    GEMM."""
    tail = np.array([0, 1] if gather.tail is not None else [1], np.float32)
    extra = np.full((1, gather.index.shape[1]), channels * in_size + len(tail) - 1,
                    gather.index.dtype)
    index = np.concatenate([gather.index, extra])
    index.flags.writeable = False
    return GatherIndex(index, tail)


def gathered_conv(w2, bias, gather: GatherIndex, in_shape: tuple, out_shape: tuple):
    """fn(x): the conv of x of `in_shape` (N, C, *S), as (N, M, *out_shape), with W as
    (M, C * kernel positions) and `bias` (M,) or None, in x's dtype: one gather of the
    columns and one GEMM per image (OpenBLAS multiplies small products without packing W:
    one GEMM over all images' columns side by side crosses that size and runs slower).
    Everything else is prepared here: a conv of a few positions costs a few us, and this
    glue as much again when done per call."""
    batch, channels, in_size = in_shape[0], in_shape[1], math.prod(in_shape[2:])
    shape = (batch, w2.shape[0]) + tuple(out_shape)
    if gather.index.shape[1] == 1:
        return _one_position_conv(w2, bias, gather.index[:, 0], channels * in_size, shape)
    if bias is not None:
        w2 = np.concatenate([w2, bias[:, None]], axis=1)
        gather = with_ones_row(gather, channels, in_size)
    tail = None if gather.tail is None else gather.tail.astype(w2.dtype)
    index = gather.index

    def gathered(x):
        if batch == 1:
            flat = x.reshape(-1)
            if tail is not None:
                flat = np.concatenate((flat, tail))
            return products.matmul(w2, flat.take(index)).reshape(shape)
        rows = x.reshape(batch, -1)
        if tail is not None:
            rows = np.concatenate((rows, np.broadcast_to(tail, (batch, tail.size))), axis=1)
        return products.matmul(w2, rows.take(index, axis=1)).reshape(shape)

    return gathered


def _one_position_conv(w2, bias, rows, in_values: int, shape: tuple):
    """One output position: the taps that read padding multiply zeros, so they are dropped
    with their weights (a k3 conv of a length-1 input keeps a third of W); when the live taps
    read the input in order, x itself is the column (each image's, side by side)."""
    live = rows < in_values                     # the rest read the appended zero
    weights = np.ascontiguousarray(w2[:, live])
    rows = rows[live]
    if np.array_equal(rows, np.arange(in_values)):
        rows = None
    batch = shape[0]

    def one_position(x):
        flat = x.reshape(batch, -1)
        y = products.matmul(weights, (flat if rows is None else flat.take(rows, axis=1)).T)
        if bias is not None:
            y += bias[:, None]
        return (np.ascontiguousarray(y.T) if batch > 1 else y).reshape(shape)

    return one_position
