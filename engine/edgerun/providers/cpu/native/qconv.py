"""Integer convolutions (ConvInteger, QLinearConv) on the 8-bit product kernels
(cpu_kernels/qconv.c, qgemm.c): each group's weight rows [M/group, C/group x kernel], packed
once (`ConvWeights`), times its columns of x [C/group x kernel, positions], im2col padded with
x's zero point so that padding adds nothing (`columns`; none for a 1x1 conv with unit strides
and no padding): what onnxruntime's ConvInteger and QLinearConv do. int32 sums, wrapping as
ONNX's int32 output does."""
from __future__ import annotations

import functools
import math

import numpy as np

from ....ir.conv_rules import window_geometry
from .conv import planar_dims
from .library import address, isa_code, library
from .qgemm import EIGHT_BIT, as_int32, count, raise_status, zero_points_fit


def applicable(x: np.ndarray, x_zero_point, w: np.ndarray, w_zero_point) -> bool:
    """Whether a convolution of x [N, C, ...] by w [M, C/group, ...] takes ConvWeights: 8-bit
    operands, x's zero point one value, w's one or one an output channel."""
    return bool(isa_code()) and x.dtype.char in EIGHT_BIT and w.dtype.char in EIGHT_BIT and \
        x.size > 0 and w.size > 0 and zero_points_fit(x_zero_point, x.dtype.char, 1) and \
        zero_points_fit(w_zero_point, w.dtype.char, w.shape[0])


class ConvWeights:
    """A convolution's 8-bit weights [M, C/group, *kernel] as rows [M, C/group x kernel]
    with a zero point per tensor or per output channel, packed once, for `times`."""
    __slots__ = ("m", "depth", "signed", "packed", "rowsum", "za", "_a")

    def __init__(self, w: np.ndarray, zero_point, groups: int):
        rows = np.ascontiguousarray(w.reshape(w.shape[0], -1))
        self.m, self.depth = rows.shape
        self.signed = int(rows.dtype.char == "b")
        lib = library()
        self.packed = np.empty(lib.er_cpu_qgemm_packed_a_size(self.m, self.depth), np.uint8)
        self.rowsum = np.empty(self.m, np.int32)
        lib.er_cpu_qgemm_pack_a(address(rows), self.depth, self.m, self.depth, self.signed,
                                address(self.packed), address(self.rowsum))
        self.za = as_int32(zero_point)
        self._a = (address(self.packed), address(self.rowsum), self.m // groups, self.depth,
                   self.signed, address(self.za), count(self.za), groups)

    def times(self, cols: np.ndarray, zero_point: int) -> np.ndarray:
        """The int32 products [N, M, P] of every image's and group's columns, cols [N, C x
        kernel, P] (8-bit, P's stride 1, C x kernel's uniform), centered on zero_point."""
        images, _, n = cols.shape
        out = np.empty((images, self.m, n), np.int32)
        status = library().er_cpu_qgemm_grouped(
            *self._a, images, address(cols), cols.strides[1], cols.strides[0],
            int(cols.dtype.char == "b"), zero_point, n, address(out))
        if status:
            raise_status(status, self.m, self.depth, n)
        return out


def columns(x: np.ndarray, kernel: tuple, strides, pads, dilations, auto_pad, pad: int):
    """(x's columns [N, C x kernel, positions] for ConvWeights.times, the output's spatial
    sizes): x itself, reshaped, for a 1x1 kernel with unit strides and no padding; 1-D and
    2-D windows natively; None for other ranks."""
    n, channels = x.shape[:2]
    out_sizes, dims = _layout(x.shape, tuple(kernel), _tuple(strides), _tuple(pads),
                              _tuple(dilations), auto_pad)
    if dims is None:
        cols = x.reshape(n, channels, -1)
        return (cols if cols.strides[-1] == 1 else np.ascontiguousarray(cols)), out_sizes
    if x.ndim not in (3, 4):
        return None
    x = np.ascontiguousarray(x)
    out = np.empty((n, channels * math.prod(kernel), math.prod(out_sizes)), x.dtype)
    library().er_cpu_im2col_u8(address(x), n, channels, address(dims), pad & 0xFF, address(out))
    return out, out_sizes


def _tuple(values):
    return tuple(values) if values else None


@functools.lru_cache(maxsize=256)
def _layout(x_shape: tuple, kernel: tuple, strides, pads, dilations, auto_pad) -> tuple:
    """(output spatial sizes, im2col's dims as an int64 array, None where x is its own
    columns)."""
    geometry = window_geometry(x_shape[2:], kernel, strides, dilations, pads, auto_pad)
    out_sizes = tuple(geometry.out_shape)
    if all(k == 1 for k in kernel) and all(s == 1 for s in geometry.strides) and \
            not any(geometry.pads_begin) and out_sizes == tuple(x_shape[2:]):
        return out_sizes, None
    return out_sizes, np.array(planar_dims(x_shape, geometry), np.int64)
