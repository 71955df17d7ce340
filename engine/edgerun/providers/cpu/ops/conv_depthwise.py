"""Depthwise 2-D convolution by row mixing: Conv's method for one input channel per group.

A depthwise conv has no channel sum to hand to a GEMM: per channel it is a (1, taps) by
(taps, positions) product, whose columns (every kernel position's shifted copy of the input,
kh * kw of them) cost more to build than the product. Here only the kw shifts along W are
copied: S (N * C, Hp, kw, Wo) holds, for padded input row j and kernel column k, what
every output column reads there. Then a band of B output rows is one small GEMM per channel,

    Y[band] (B, Wo) = A (B, L * kw) @ S[rows of the band] (L * kw, Wo),

where the band's L = (B - 1) * sh + (kh - 1) * dh + 1 input rows are a contiguous slice of S
(one strided view serves every band) and A, prepared once, places each kernel row's weights
at the input row it reads for each output row of the band (zeros elsewhere). The zeros make
L / kh times the multiplications of the direct sum; on the short maps mobile models end with
(ppocr: 2 to 6 rows) one band covers the whole output and the copies are kw instead of
kh * kw input-sized planes: 2.2-2.5x faster there. Bands also bound the waste on larger maps,
where the band height trades GEMM calls (one per band and channel) against zeros
(`band_rows`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..native import products

# Cost model for choosing the band height, in microseconds (2-core EPYC, one BLAS thread):
# each small GEMM call, each multiply-add inside them, each element copied (into S, or out
# of a last band that runs past the output).
_GEMM_CALL_US = 0.05
_MAC_US = 0.00003
_COPY_US = 0.0006
_MAX_BAND = 16


@dataclass(frozen=True)
class RowMixLayout:
    """Where one depthwise geometry's bands lie in S."""
    band: int           # output rows per GEMM
    bands: int          # GEMMs per channel: ceil(output rows / band)
    first: int          # S's first row, as a row of the padded input
    rows: int           # S rows one band reads (the GEMM's inner size is rows * kw)
    s_rows: int         # rows of S


def row_mix_layout(x_shape: tuple, kernel: tuple, strides: tuple, dilations: tuple,
                   pads_begin: tuple, out_shape: tuple, band: int) -> RowMixLayout:
    """One band covering the output keeps only the input rows it reads (with 2 input rows
    and a 5x5 kernel, the 4 padding rows would be 2/3 of the work); several bands read
    padded rows, as each reads its own window of them."""
    height = x_shape[2]
    (kh, _), (sh, _), (dh, _) = kernel, strides, dilations
    bands = -(-out_shape[0] // band)
    span = (band - 1) * sh + (kh - 1) * dh + 1
    if bands == 1:
        top = pads_begin[0]
        rows = min(height, span - top)
        if rows > 0:
            return RowMixLayout(band, 1, top, rows, rows)
    return RowMixLayout(band, bands, 0, span, (bands * band - 1) * sh + (kh - 1) * dh + 1)


def band_rows(x_shape: tuple, kernel: tuple, strides: tuple, dilations: tuple,
              pads_begin: tuple, out_shape: tuple) -> int:
    """The band height (output rows per GEMM) the cost model rates cheapest."""
    images = x_shape[0] * x_shape[1]
    kw, (out_rows, out_cols) = kernel[1], out_shape

    def cost(band: int) -> float:
        layout = row_mix_layout(x_shape, kernel, strides, dilations, pads_begin, out_shape,
                                band)
        calls = images * layout.bands
        copied = images * layout.s_rows * kw * out_cols
        if layout.bands * band != out_rows:
            copied += images * out_rows * out_cols
        return (calls * _GEMM_CALL_US + calls * band * layout.rows * kw * out_cols * _MAC_US
                + copied * _COPY_US)

    return min(range(1, min(out_rows, _MAX_BAND) + 1), key=cost)


def row_mix_weights(w: np.ndarray, layout: RowMixLayout, strides: tuple,
                    dilations: tuple) -> np.ndarray:
    """A (1, C, 1, band, rows * kw) from W (C, 1, kh, kw): output row i of a band reads
    kernel row t at S row i * sh + t * dh - first (kernel rows outside S read padding)."""
    channels, _, kh, kw = w.shape
    sh, dh = strides[0], dilations[0]
    mix = np.zeros((channels, layout.band, layout.rows, kw), w.dtype)
    for i in range(layout.band):
        for t in range(kh):
            j = i * sh + t * dh - layout.first
            if 0 <= j < layout.rows:
                mix[:, i, j, :] = w[:, 0, t, :]
    return mix.reshape(1, channels, 1, layout.band, layout.rows * kw)


def row_mix_conv(mix: np.ndarray, bias, layout: RowMixLayout, x_shape: tuple, row_stride: int,
                 top: int, column_taps: list, out_shape: tuple):
    """fn(x): the depthwise conv of x (N, C, H, W) as a fresh (N, M, Ho, Wo) array, with
    `mix` from row_mix_weights, `bias` (M,) or None, the rows' stride and padding before,
    and `column_taps` (conv.tap_ranges along W: per kernel column k, the output columns
    o0:o1 that read the input and the input columns they read). Each input channel feeds
    M / C consecutive output channels."""
    n, in_channels, height, width = x_shape
    channels = mix.shape[1]
    repeats = channels // in_channels
    kw = mix.shape[4] // layout.rows
    out_rows, out_cols = out_shape
    band, bands, s_rows = layout.band, layout.bands, layout.s_rows
    shift = top - layout.first                  # input row r is S row r + shift
    first_input = max(0, -shift)
    last_input = min(height, s_rows - shift)
    planes = n * channels
    item = np.dtype(mix.dtype).itemsize
    row = kw * out_cols * item
    view_shape = (n, channels, bands, layout.rows * kw, out_cols)
    view_strides = (channels * s_rows * row, s_rows * row, band * row_stride * row,
                    out_cols * item, item)
    column = None if bias is None else bias.reshape(-1, 1, 1)

    def depthwise(x):
        if repeats > 1:
            x = np.repeat(x, repeats, axis=1)
        s = np.zeros((planes, s_rows, kw, out_cols), mix.dtype)
        if last_input > first_input:
            source = x.reshape(planes, height, width)[:, first_input:last_input]
            target = s[:, first_input + shift:last_input + shift]
            for k, o0, o1, columns in column_taps:
                target[:, :, k, o0:o1] = source[:, :, columns]
        windows = np.ndarray(view_shape, s.dtype, buffer=s, strides=view_strides)
        y = products.matmul(mix, windows).reshape(n, channels, bands * band, out_cols)
        if bands * band != out_rows:
            y = y[:, :, :out_rows]
            if column is None:
                return np.ascontiguousarray(y)
            return np.add(y, column)
        if column is not None:
            y += column
        return y

    return depthwise
