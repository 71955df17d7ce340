"""Integer convolutions (ConvInteger, QLinearConv) on the 8-bit product kernels
(cpu_kernels/qconv.c, qgemm.c): each group's weight rows [M/group, C/group x kernel], packed
once (`ConvWeights`), times its columns of x [C/group x kernel, positions], a cache-sized
chunk of positions at a time (runs of chunks split over threads, parallel.py): x's own rows
for a 1x1 conv with unit strides and no padding, shifted views of a frame (x copied with a
border of its zero point, so that padding adds nothing) for other unit-stride windows,
im2col for strided ones. What onnxruntime's ConvInteger and QLinearConv do. int32 sums,
wrapping as ONNX's int32 output does, or QLinearConv's 8-bit outputs requantized in the
product's own epilogue (`Requantization`)."""
from __future__ import annotations

import ctypes
import functools
import math
from typing import Optional

import numpy as np

from ....ir.conv_rules import window_geometry
from . import parallel
from .conv import planar_dims
from .library import address, isa_code, library
from .qgemm import EIGHT_BIT, as_int32, count, raise_status, zero_points_fit


def applicable(x: np.ndarray, x_zero_point, w: np.ndarray, w_zero_point) -> bool:
    """Whether a convolution of x [N, C, ...] by w [M, C/group, ...] takes ConvWeights: 8-bit
    operands, x's zero point one value, w's one or one an output channel."""
    return bool(isa_code()) and x.dtype.char in EIGHT_BIT and w.dtype.char in EIGHT_BIT and \
        x.size > 0 and w.size > 0 and zero_points_fit(x_zero_point, x.dtype.char, 1) and \
        zero_points_fit(w_zero_point, w.dtype.char, w.shape[0])


# parallel.py counts work in float32 multiply-adds; an 8-bit one (64 a VPDPBUSD) costs about
# a quarter of one, so a product is split only where its parts outweigh a handoff
INT8_MAC_SHARE = 4


class _Weights(ctypes.Structure):
    """cpu_kernels/qconv.c's ConvWeights."""
    _fields_ = [("packed", ctypes.c_void_p), ("rowsum", ctypes.c_void_p),
                ("mg", ctypes.c_int64), ("k", ctypes.c_int64), ("a_signed", ctypes.c_int64),
                ("za", ctypes.c_void_p), ("za_count", ctypes.c_int64),
                ("groups", ctypes.c_int64)]


class ConvWeights:
    """A convolution's 8-bit weights [M, C/group, *kernel] as rows [M, C/group x kernel]
    with a zero point per tensor or per output channel, packed once, for `convolve`."""
    __slots__ = ("m", "depth", "groups", "signed", "packed", "rowsum", "za", "_struct",
                 "_address")

    def __init__(self, w: np.ndarray, zero_point, groups: int):
        rows = np.ascontiguousarray(w.reshape(w.shape[0], -1))
        self.m, self.depth = rows.shape
        self.groups = groups
        self.signed = int(rows.dtype.char == "b")
        lib = library()
        self.packed = np.empty(lib.er_cpu_qgemm_packed_a_size(self.m, self.depth), np.uint8)
        self.rowsum = np.empty(self.m, np.int32)
        lib.er_cpu_qgemm_pack_a(address(rows), self.depth, self.m, self.depth, self.signed,
                                address(self.packed), address(self.rowsum))
        self.za = as_int32(zero_point)
        self._struct = _Weights(address(self.packed), address(self.rowsum), self.m // groups,
                                self.depth, self.signed, address(self.za), count(self.za),
                                groups)
        self._address = ctypes.addressof(self._struct)

    def convolve(self, x: np.ndarray, kernel: tuple, strides, pads, dilations, auto_pad,
                 zero_point: int, requantization: Optional["Requantization"] = None):
        """The int32 sums [N, M, *out] of the convolution of 8-bit x [N, C, *spatial] (1 or
        2 spatial axes), centered on zero_point, or with a requantization its 8-bit outputs;
        None for windows of other ranks."""
        bound = self.bind(x.shape, x.dtype, kernel, strides, pads, dilations, auto_pad,
                          requantization)
        return None if bound is None else bound(x, zero_point)

    def bind(self, x_shape: tuple, x_dtype, kernel: tuple, strides, pads, dilations, auto_pad,
             requantization: Optional["Requantization"] = None):
        """`convolve` for one input shape, worked out once (`BoundConv`); None for windows of
        other ranks."""
        if len(x_shape) not in (3, 4):
            return None
        out_sizes, dims = _layout(tuple(x_shape), tuple(kernel), _tuple(strides), _tuple(pads),
                                  _tuple(dilations), auto_pad)
        return BoundConv(self, tuple(x_shape), np.dtype(x_dtype), out_sizes, dims,
                         requantization)


class BoundConv:
    """A convolution's native call for one input shape: the layout, output shape, frame size
    and the call's fixed arguments worked out once (a kernel's Python around the call cost
    ~9 us a node, against onnxruntime's ~1 us for a small QLinearConv); a call makes the
    output, fills the frames and runs the parts."""
    __slots__ = ("weights", "requantization", "dims", "out_shape", "dtype", "positions",
                 "frames_size", "macs", "limit", "_fixed")

    def __init__(self, weights: ConvWeights, x_shape: tuple, x_dtype, out_sizes: tuple, dims,
                 requantization: Optional["Requantization"]):
        lib = library()
        images, channels = x_shape[:2]
        # held: the call reads their memory by address
        self.weights, self.requantization, self.dims = weights, requantization, dims
        self.positions = math.prod(out_sizes)
        self.out_shape = (images, weights.m) + tuple(out_sizes)
        self.dtype = np.dtype(np.int32) if requantization is None else requantization.dtype
        self.frames_size = 0 if dims is None else \
            lib.er_cpu_qconv_frames_size(address(dims), images, channels)
        self.macs = images * weights.m * weights.depth * self.positions // INT8_MAC_SHARE
        self.limit = images * weights.groups * max(1, self.positions // 32)
        self._fixed = (images, address(dims), self.positions, int(x_dtype.char == "b"))

    def __call__(self, x: np.ndarray, zero_point: int) -> np.ndarray:
        """The convolution of x (of the bound shape) centered on x's zero point."""
        lib = library()
        x = np.ascontiguousarray(x)
        out = np.empty(self.out_shape, self.dtype)
        frames = None
        if self.frames_size:
            frames = np.empty(self.frames_size, np.uint8)
            lib.er_cpu_qconv_fill_frames(address(x), x.shape[0], x.shape[1], address(self.dims),
                                         zero_point, address(frames))
        requantization = self.requantization
        head = (self.weights._address, address(x)) + self._fixed + (
            zero_point, None if requantization is None else requantization.address,
            address(frames))
        parts = parallel.parts_for(self.macs, self.limit, parallel.MIN_RECORD_MACS)
        status = parallel.run_split("er_cpu_qconv", list(head) + [
            list(range(parts)), parts, address(out)], parts)
        if status:
            raise_status(status, self.weights.m, self.weights.depth, self.positions)
        return out


class _Requant(ctypes.Structure):
    """cpu_kernels/qgemm.h's Requant."""
    _fields_ = [("bias", ctypes.c_void_p), ("mult", ctypes.c_void_p), ("zy", ctypes.c_int32),
                ("lo", ctypes.c_int32), ("hi", ctypes.c_int32)]


class Requantization:
    """QLinearConv's output step per output channel m, done in the product's epilogue:
    y = saturate(round_half_even(float32(int32 sum + bias[m]) * multiplier[m]) + y_zero_point),
    multiplier = x_scale * w_scale[m] / y_scale, all in float32 as onnxruntime's
    requantization (and the numpy path: both give the same bytes)."""
    __slots__ = ("dtype", "bias", "multiplier", "_struct", "address")

    def __init__(self, channels: int, bias, multiplier: np.ndarray, zero_point: int,
                 dtype) -> None:
        self.dtype = np.dtype(dtype)
        self.bias = None if bias is None else \
            np.ascontiguousarray(np.broadcast_to(np.asarray(bias, np.int32), (channels,)))
        self.multiplier = np.ascontiguousarray(
            np.broadcast_to(np.asarray(multiplier, np.float32).reshape(-1), (channels,)))
        info = np.iinfo(self.dtype)
        self._struct = _Requant(address(self.bias), address(self.multiplier), zero_point,
                                info.min, info.max)
        self.address = ctypes.addressof(self._struct)


def _tuple(values):
    return tuple(values) if values else None


@functools.lru_cache(maxsize=256)
def _layout(x_shape: tuple, kernel: tuple, strides, pads, dilations, auto_pad) -> tuple:
    """(output spatial sizes, the window's dims as an int64 array (er_cpu_qconv's), None
    where x is its own columns)."""
    geometry = window_geometry(x_shape[2:], kernel, strides, dilations, pads, auto_pad)
    out_sizes = tuple(geometry.out_shape)
    if all(k == 1 for k in kernel) and all(s == 1 for s in geometry.strides) and \
            not any(geometry.pads_begin) and out_sizes == tuple(x_shape[2:]):
        return out_sizes, None
    return out_sizes, np.array(planar_dims(x_shape, geometry), np.int64)
