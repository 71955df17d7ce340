"""Winograd F(2x2, 3x3): Conv's method for 3x3, stride-1 convolutions with many channels.

Each 2x2 block of outputs is computed from a 4x4 tile of the input through 16 products
instead of 36 (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015):

    Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A

The filter transform U = G g Gᵀ is prepared once per weight tensor, (16, M, C). Per call the
input tiles are transformed (V, (16, C, tiles): only additions), multiplied as 16 GEMMs
(M, C) @ (C, tiles), and the products transformed back to 2x2 outputs (additions again). That
is 2.25x fewer multiplications than im2col; the transforms' passes over memory eat part of it,
so the method pays only where the GEMMs dominate: many input and output channels over a
moderate, even-sized output (see `winograd_pays`, measured on this project's CPU models).
Its error is that of a 3x3 dot product in float32 plus a few roundings in the transforms:
about 1e-6 relative to the largest output, like im2col's.
"""
from __future__ import annotations

import numpy as np

from ..native.products import matmul as split_matmul

# G (4x3): the filter transform
_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])

# transforms run over blocks of about this many elements per tile position, so that their
# 16 intermediate planes stay in the CPU cache
_BLOCK = 16384

# where winograd_pays (measured against im2col on a 2-core EPYC, one BLAS thread)
_MIN_IN_CHANNELS = 96
_MIN_OUT_CHANNELS = 128
_MIN_SIDE = 14
_MAX_POSITIONS = 56 * 56


def winograd_pays(x_shape, w_shape, group: int, strides, dilations, out_shape) -> bool:
    """Whether F(2x2, 3x3) beats im2col for this 2-D conv: 1.2x (128 channels over 28x28 or
    56x56) to 1.6x (256 and 512 channels) faster where taken. Odd output sides waste a
    row or column of tiles (13x13: no faster), large maps of few channels are bound by the
    transforms (64 channels over 224x224: 0.55x)."""
    return (len(x_shape) == 4 and tuple(w_shape[2:]) == (3, 3) and group == 1
            and all(s == 1 for s in strides) and all(d == 1 for d in dilations)
            and x_shape[1] >= _MIN_IN_CHANNELS and w_shape[0] >= _MIN_OUT_CHANNELS
            and all(side % 2 == 0 and side >= _MIN_SIDE for side in out_shape)
            and out_shape[0] * out_shape[1] <= _MAX_POSITIONS)


def winograd_weights(w: np.ndarray) -> np.ndarray:
    """U = G g Gᵀ of W (M, C, 3, 3) as (16, M, C) in W's dtype, computed in float64."""
    u = np.einsum("ik,mckl,jl->ijmc", _G, w.astype(np.float64), _G)
    return np.ascontiguousarray(u.reshape(16, w.shape[0], w.shape[1]).astype(w.dtype))


def winograd_conv(x: np.ndarray, u: np.ndarray, bias, pads_begin, out_shape) -> np.ndarray:
    """The conv of x (N, C, H, W) whose filter transform is `u` (16, M, C), with `bias` (M,)
    or None, input padding `pads_begin` and output spatial shape `out_shape`:
    (N, M, *out_shape), fresh."""
    batch, m = x.shape[0], u.shape[1]
    if batch == 1:
        return _one_image(x[0], u, bias, pads_begin, out_shape)[None]
    out = np.empty((batch, m) + tuple(out_shape), x.dtype)
    for n in range(batch):
        out[n] = _one_image(x[n], u, bias, pads_begin, out_shape)
    return out


def _one_image(x, u, bias, pads_begin, out_shape):
    channels, m = x.shape[0], u.shape[1]
    tiles_h, tiles_w = (out_shape[0] + 1) // 2, (out_shape[1] + 1) // 2
    tiles = tiles_h * tiles_w
    padded = _padded(x, pads_begin, 2 * tiles_h + 2, 2 * tiles_w + 2)
    step = max(1, _BLOCK // tiles)          # channels per block of the transforms
    v = np.empty((4, 4, channels, tiles_h, tiles_w), x.dtype)
    scratch = np.empty((4, 4, min(step, channels), tiles_h, tiles_w), x.dtype)
    for c0 in range(0, channels, step):
        c1 = min(channels, c0 + step)
        _input_transform(padded[c0:c1], scratch[:, :, :c1 - c0], v[:, :, c0:c1],
                         tiles_h, tiles_w)
    products = split_matmul(u, v.reshape(16, channels, tiles)).reshape(4, 4, m, tiles_h,
                                                                      tiles_w)
    y = np.empty((m, tiles_h, 2, tiles_w, 2), x.dtype)
    scratch = np.empty((2, 4, min(step, m), tiles_h, tiles_w), x.dtype)
    for m0 in range(0, m, step):
        m1 = min(m, m0 + step)
        block = y[m0:m1]
        _output_transform(products[:, :, m0:m1], scratch[:, :, :m1 - m0], block)
        if bias is not None:
            block += bias[m0:m1, None, None, None, None]
    y = y.reshape(m, 2 * tiles_h, 2 * tiles_w)
    return y[:, :out_shape[0], :out_shape[1]]


def _padded(x, pads_begin, height: int, width: int):
    """x (C, H, W) placed at pads_begin in zeros of (C, height, width) (which hold it: the
    tiles cover every output, so the padded input's last row and column)."""
    padded = np.zeros((x.shape[0], height, width), x.dtype)
    top, left = pads_begin
    padded[:, top:top + x.shape[1], left:left + x.shape[2]] = x
    return padded


def _input_transform(padded, t, v, tiles_h: int, tiles_w: int) -> None:
    """v[i, j] = (Bᵀ d B)[i, j] for every 4x4 tile d of `padded` (stride 2): rows, then
    columns, each combination one add or subtract of two planes."""
    d = [[padded[:, i:i + 2 * tiles_h:2, j:j + 2 * tiles_w:2] for j in range(4)]
         for i in range(4)]
    for j in range(4):
        _b_transposed(d[0][j], d[1][j], d[2][j], d[3][j], t[:, j])
    for i in range(4):
        _b_transposed(t[i, 0], t[i, 1], t[i, 2], t[i, 3], v[i])


def _b_transposed(d0, d1, d2, d3, out) -> None:
    """Bᵀ (rows 1 0 -1 0 / 0 1 1 0 / 0 -1 1 0 / 0 1 0 -1) over four planes, into out[0..3]."""
    np.subtract(d0, d2, out=out[0])
    np.add(d1, d2, out=out[1])
    np.subtract(d2, d1, out=out[2])
    np.subtract(d1, d3, out=out[3])


def _output_transform(products, s, y) -> None:
    """y (M, th, 2, tw, 2) = Aᵀ m A (Aᵀ rows 1 1 1 0 / 0 1 -1 -1) for every tile's 4x4
    products: rows into s, then columns into the 2x2 outputs."""
    for j in range(4):
        _a_transposed(products[0, j], products[1, j], products[2, j], products[3, j],
                      s[0, j], s[1, j])
    for i in range(2):
        _a_transposed(s[i, 0], s[i, 1], s[i, 2], s[i, 3],
                      y[:, :, i, :, 0], y[:, :, i, :, 1])


def _a_transposed(m0, m1, m2, m3, out0, out1) -> None:
    np.add(m0, m1, out=out0)
    out0 += m2
    np.subtract(m1, m2, out=out1)
    out1 -= m3
