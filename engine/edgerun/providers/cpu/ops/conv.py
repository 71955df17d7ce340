"""Convolution kernels: Conv, ConvTranspose, DeformConv, Col2Im and CausalConvWithState.

Every kernel works on N-D channels-first tensors (N, C, D1, ..., Dk).
- Conv picks a method per shape signature (`_conv_plan`, cached): 1x1 kernels are one GEMM
  on the (C, D1 * ... * Dk) view; other kernels are im2col + GEMM. The columns come from a
  flat tap layout (`TapLayout`: the input split into stride phases, padded and flattened,
  so every kernel position reads one contiguous slice per row) or, where that layout would
  waste much GEMM work on wide rows, from a strided view of the padded input. 2-D depthwise
  convolutions (one input channel per group) mix bands of rows by small GEMMs
  (conv_depthwise.py); other depthwise ones use the flat columns with one small product per
  channel. Taps that read only padding are dropped, weights included. Outputs of a few
  positions gather their columns by one index (conv_gather.py); 3x3 stride-1 convs with many
  channels use Winograd F(2x2, 3x3) (conv_winograd.py).
- ConvTranspose and Col2Im go the other way: columns are folded back into an image by
  adding each kernel position's plane into a strided slice of the output.
- The window geometry (auto_pad, pads, output size) is `ir.conv_rules.window_geometry`,
  which pool.py and the edge adapters share.

Half and exotic float types are computed in float32 and cast back; float64 stays float64.
"""
import functools
import math
from dataclasses import dataclass

from typing import Callable, NamedTuple, Optional

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ....ir.conv_rules import WindowGeometry, transpose_output_geometry, window_geometry
from ..registry import kernel
from .conv_depthwise import (RowMixLayout, band_rows, row_mix_conv, row_mix_layout,
                             row_mix_weights)
from .conv_gather import (GATHER_MAX_COLUMNS, GATHER_MAX_POSITIONS, GatherIndex,
                          channel_gather_index, gathered_conv)
from .conv_winograd import winograd_conv, winograd_pays, winograd_weights
from ..native import conv as native_conv
from ..native import parallel, products
from .forced import ForcedChoice


# ---------------------------------------------------------------- shared helpers


def _ints(values) -> list:
    """A 1-D integer tensor (or list) as a list of Python ints."""
    return [int(v) for v in np.asarray(values).reshape(-1).tolist()]


def _as_str(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def compute_dtype(dtype):
    """The dtype arithmetic runs in: float64 stays, every other float type uses float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def pad_spatial(x, begin, end, value=0):
    """Pad (or, for negative amounts, crop) the spatial axes 2.. of `x` with `value`."""
    if min(begin) >= 0 and min(end) >= 0:           # the common case: padding only
        if not any(begin) and not any(end):
            return x
        shape = x.shape[:2] + tuple(d + b + e for d, b, e in zip(x.shape[2:], begin, end))
        padded = np.zeros(shape, x.dtype) if value == 0 else np.full(shape, value, x.dtype)
        padded[(slice(None), slice(None)) + tuple(
            slice(b, b + d) for d, b in zip(x.shape[2:], begin))] = x
        return padded
    crop = (slice(None), slice(None)) + tuple(
        slice(max(-b, 0), x.shape[2 + i] - max(-e, 0)) for i, (b, e) in enumerate(zip(begin, end)))
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    if not any(b or e for b, e in widths):
        return x
    shape = x.shape[:2] + tuple(d + b + e for d, (b, e) in zip(x.shape[2:], widths))
    padded = np.zeros(shape, x.dtype) if value == 0 else np.full(shape, value, x.dtype)
    padded[(slice(None), slice(None)) + tuple(slice(b, b + d) for d, (b, _) in
                                              zip(x.shape[2:], widths))] = x
    return padded


def padded_input(x, geometry: WindowGeometry, value=0):
    """`x` padded so that every window of `geometry` lies inside it.

    Beyond the declared end padding, ceil_mode windows may need a few more positions;
    they get `value` too (callers that count positions exclude them).
    """
    end = [max(geometry.pads_end[i], geometry.padded_extent(i) - x.shape[2 + i]
               - geometry.pads_begin[i]) for i in range(x.ndim - 2)]
    return pad_spatial(x, geometry.pads_begin, end, value)


def sliding_windows(xpad, geometry: WindowGeometry):
    """Read-only view (N, C, *kernel, *out_shape) of the windows of a padded input:
    element [n, c, k..., o...] is xpad[n, c, o * stride + k * dilation]."""
    spatial_strides = xpad.strides[2:]
    shape = xpad.shape[:2] + tuple(geometry.kernel) + tuple(geometry.out_shape)
    strides = (xpad.strides[:2]
               + tuple(s * d for s, d in zip(spatial_strides, geometry.dilations))
               + tuple(s * t for s, t in zip(spatial_strides, geometry.strides)))
    if not xpad.flags.c_contiguous:
        return as_strided(xpad, shape=shape, strides=strides, writeable=False)
    view = np.ndarray(shape, xpad.dtype, buffer=xpad, strides=strides)   # as_strided, faster
    view.flags.writeable = False
    return view


def kernel_positions(kernel):
    """Every position inside a kernel, as index tuples in row-major order."""
    return list(np.ndindex(*kernel))


def tap_ranges(length: int, size: int, kernel: int, stride: int, dilation: int,
               pad_begin: int) -> list:
    """(k, first, stop, source slice) per kernel position k along one axis whose outputs
    first..stop-1 read input positions o * stride + k * dilation - pad_begin inside
    0..length-1; positions that read only padding are left out (pools skip them, convs
    read zeros there)."""
    ranges = []
    for k in range(kernel):
        offset = k * dilation - pad_begin
        first = max(0, -(offset // stride))
        stop = max(0, min(size, (length - 1 - offset) // stride + 1))
        if stop > first:
            ranges.append((k, first, stop, slice(first * stride + offset,
                                                 (stop - 1) * stride + offset + 1, stride)))
    return ranges


def fold(columns, out_shape, pads_begin, strides, dilations):
    """Sum sliding-window columns (N, C, *kernel, *blocks) back into (N, C, *out_shape).

    Column [k..., b...] lands on output position b * stride + k * dilation - pads_begin;
    positions outside the output are dropped. Inverse of `sliding_windows` (with adds).
    """
    rank = len(out_shape)
    kernel = columns.shape[2:2 + rank]
    blocks = columns.shape[2 + rank:]
    # The canvas holds every position a column reaches and the whole output window.
    shift = [max(0, -p) for p in pads_begin]
    extent = [max((b - 1) * s + (k - 1) * d + 1 + sh, p + sh + o)
              for b, s, k, d, sh, p, o in zip(blocks, strides, kernel, dilations, shift,
                                              pads_begin, out_shape)]
    canvas = np.zeros(columns.shape[:2] + tuple(extent), dtype=columns.dtype)
    for k in kernel_positions(kernel):
        target = tuple(slice(ki * d + sh, ki * d + sh + (b - 1) * s + 1, s)
                       for ki, d, sh, b, s in zip(k, dilations, shift, blocks, strides))
        canvas[(slice(None), slice(None)) + target] += columns[(slice(None), slice(None)) + k]
    window = tuple(slice(p + sh, p + sh + o) for p, sh, o in zip(pads_begin, shift, out_shape))
    return canvas[(slice(None), slice(None)) + window]


# ---------------------------------------------------------------- flat tap layout


@dataclass(frozen=True)
class TapLayout:
    """The windows of one geometry as contiguous slices of flattened input copies: the way
    numpy sweeps a kernel fastest (every operation runs over long contiguous rows).

    Along an axis with stride s, padded position o * s + k * d lies in phase (k * d) % s of
    that axis, at index o + (k * d) // s. Each phase combination some tap uses gets one
    buffer (rows, length) holding the input's elements of that phase, padded with a fill
    value to `extent` per axis and flattened (plus room for the last tap's reach). Kernel
    position k then reads every output position at once as buffer[:, offset:offset + span],
    on an (out[0], extent[1], ..., extent[-1]) grid whose positions past out[i] are dropped
    (`cropped`). Taps that read nothing but padding are left out.
    """
    copies: tuple        # per used phase: (destination slices, source slices), or None
    extent: tuple        # buffer extent per spatial axis
    length: int          # buffer length per row
    span: int            # output grid size per row
    taps: tuple          # (kernel position number, phase number, offset) of each live tap
    cropped: bool        # whether the grid is wider than the output
    in_place: bool       # the input itself, flattened, is the only buffer: nothing to copy
    kernel: tuple        # kernel shape
    tap_steps: Optional[tuple]   # offset step per kernel axis when the taps form a full grid over
                         # one buffer (stride 1, none dropped), else None


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@functools.lru_cache(maxsize=1024)
def tap_layout(in_shape: tuple, kernel: tuple, strides: tuple, dilations: tuple,
               pads_begin: tuple, out_shape: tuple) -> TapLayout:
    """The TapLayout of windows over spatial shape `in_shape` (every argument a tuple)."""
    rank = len(in_shape)
    reach = [[k * d for k in range(size)] for size, d in zip(kernel, dilations)]
    extent = tuple(o + max(r) // s for o, r, s in zip(out_shape, reach, strides))
    axis_step = [math.prod(extent[i + 1:]) for i in range(rank)]

    def valid_range(axis, phase):
        """Indices of `phase` along `axis` that hold input elements (not padding)."""
        s, begin = strides[axis], pads_begin[axis]
        low = max(0, _ceil_div(begin - phase, s))
        high = min(extent[axis], _ceil_div(in_shape[axis] + begin - phase, s))
        return low, high

    phases: dict = {}
    taps: list = []
    for number, position in enumerate(np.ndindex(*kernel)):
        phase = tuple(reach[i][k] % strides[i] for i, k in enumerate(position))
        shift = [reach[i][k] // strides[i] for i, k in enumerate(position)]
        ranges = [valid_range(i, p) for i, p in enumerate(phase)]
        if any(q + o <= low or q >= high
               for q, o, (low, high) in zip(shift, out_shape, ranges)):
            continue                                     # this tap reads only padding
        index = phases.setdefault(phase, len(phases))
        taps.append((number, index, sum(q * st for q, st in zip(shift, axis_step))))

    copies: list = []
    for phase in phases:
        destination, source = [], []
        for axis, p in enumerate(phase):
            low, high = valid_range(axis, p)
            if high <= low:
                break
            s = strides[axis]
            first = low * s + p - pads_begin[axis]
            destination.append(slice(low, high))
            source.append(slice(first, first + (high - low - 1) * s + 1, s))
        else:
            copies.append((tuple(destination), tuple(source)))
            continue
        copies.append(None)

    grid = math.prod(extent)
    length = grid + sum((max(r) // s) * st
                        for r, s, st in list(zip(reach, strides, axis_step))[1:])
    in_place = (extent == tuple(in_shape) and length == grid and not any(pads_begin)
                and all(s == 1 for s in strides) and len(phases) == 1)
    full_grid = len(phases) == 1 and all(s == 1 for s in strides) and \
        len(taps) == math.prod(kernel)
    tap_steps = tuple(d * st for d, st in zip(dilations, axis_step)) if full_grid else None
    return TapLayout(tuple(copies), extent, length, out_shape[0] * axis_step[0] if rank else 1,
                     tuple(taps), extent[1:] != tuple(out_shape[1:]), in_place,
                     tuple(kernel), tap_steps)


def layout_of(in_shape, geometry: WindowGeometry) -> TapLayout:
    return tap_layout(tuple(in_shape), tuple(geometry.kernel), tuple(geometry.strides),
                      tuple(geometry.dilations), tuple(geometry.pads_begin),
                      tuple(geometry.out_shape))


def phase_buffers(x, layout: TapLayout, fill=0) -> list:
    """One (N * C, layout.length) buffer per phase of `layout`, from x (N, C, *S)."""
    rows = x.shape[0] * x.shape[1]
    if layout.in_place:
        return [x.reshape(rows, -1)]
    grid = math.prod(layout.extent)
    source = x.reshape((rows,) + x.shape[2:])
    everything = (slice(None),)
    buffers = []
    for copy in layout.copies:
        if fill == 0:
            buffer = np.zeros((rows, layout.length), dtype=x.dtype)
        else:
            buffer = np.full((rows, layout.length), fill, dtype=x.dtype)
        if copy is not None:
            destination, src = copy
            view = buffer[:, :grid].reshape((rows,) + layout.extent)
            view[everything + destination] = source[everything + src]
        buffers.append(buffer)
    return buffers


def tap_columns(buffers: list, layout: TapLayout):
    """(rows, live taps, span) columns: row r, tap j holds what tap j reads for row r at
    every grid position. One strided copy when the taps form a grid, else one per tap."""
    rows = buffers[0].shape[0]
    span = layout.span
    if layout.tap_steps is not None:
        buffer = buffers[0]
        step = buffer.strides[1]        # an in-place buffer may be a strided view of x
        shape = (rows,) + layout.kernel + (span,)
        strides = (buffer.strides[0],) + tuple(s * step for s in layout.tap_steps) + (step,)
        if buffer.flags.c_contiguous:
            view = np.ndarray(shape, buffer.dtype, buffer=buffer, strides=strides)
        else:
            view = as_strided(buffer, shape=shape, strides=strides, writeable=False)
        return view.reshape(rows, len(layout.taps), span)
    columns = np.empty((rows, len(layout.taps), span), dtype=buffers[0].dtype)
    for j, (_, phase, offset) in enumerate(layout.taps):
        columns[:, j, :] = buffers[phase][:, offset:offset + span]
    return columns


def grid_to_output(grid, batch: int, channels: int, geometry: WindowGeometry,
                   layout: TapLayout, bias=None):
    """Rows of output grids (N * C, span) as a fresh (N, C, *out_shape) array, bias added."""
    shaped = grid.reshape((batch, channels, geometry.out_shape[0]) + layout.extent[1:])
    if layout.cropped:
        shaped = shaped[(slice(None),) * 3 + tuple(slice(0, o) for o in geometry.out_shape[1:])]
        if bias is None:
            return np.ascontiguousarray(shaped)
        return np.add(shaped, _bias_column(bias, shaped.ndim))
    return _add_bias(shaped, bias)


# ---------------------------------------------------------------- convolution


def _check_conv_shapes(x, w, group: int, transposed: bool = False):
    if x.ndim < 3:
        raise ValueError(f"X must be (N, C, D1, ...), got shape {x.shape}")
    if w.ndim != x.ndim:
        raise ValueError(f"W must have rank {x.ndim} like X, got shape {w.shape}")
    channels = x.shape[1]
    if transposed:
        if w.shape[0] != channels:
            raise ValueError(f"W shape {w.shape} expects {w.shape[0]} input channels, X has "
                             f"{channels}")
    elif channels != w.shape[1] * group or w.shape[0] % group:
        raise ValueError(f"X has {channels} channels, W shape {w.shape} with group={group} "
                         f"expects {w.shape[1] * group} (and output channels divisible by group)")
    if group < 1 or channels % group:
        raise ValueError(f"group={group} must divide the {channels} input channels")
    if 0 in x.shape[2:]:        # onnxruntime refuses too: the output would pool to NaN later
        raise ValueError(f"X has an empty spatial axis: shape {list(x.shape)}")


def _bias_column(b, ndim: int):
    return b.reshape((1, -1) + (1,) * (ndim - 2))


def _add_bias(y, b):
    """y (fresh) with b added per channel, in place."""
    if b is not None:
        y += _bias_column(b.astype(y.dtype, copy=False), y.ndim)
    return y


def _grouped_matmul(columns, w, group: int):
    """Convolution of im2col columns (N, C, *kernel, *out) with W (M, C/group, *kernel)."""
    n = columns.shape[0]
    m = w.shape[0]
    rank = w.ndim - 2
    out_shape = columns.shape[2 + rank:]
    per_window = w.shape[1] * math.prod(w.shape[2:])
    if n == 1 and group == 1:       # one plain GEMM
        y = products.matmul(w.reshape(m, per_window), columns.reshape(per_window, -1))
        return y.reshape((1, m) + tuple(out_shape))
    cols = columns.reshape(n, group, per_window, math.prod(out_shape))
    weights = w.reshape(group, m // group, per_window)
    return products.matmul(weights, cols).reshape((n, m) + tuple(out_shape))


def _group_gemm(w2, columns, batch: int, group: int):
    """W (group, M/group, K) times columns (N * group * K, P) viewed per group: (N, M, P)."""
    per_group, k = w2.shape[1], w2.shape[2]
    if batch == 1 and group == 1:
        y = products.matmul(w2[0], columns.reshape(k, -1))
    else:
        y = products.matmul(w2, columns.reshape(batch, group, k, -1))
    return y.reshape(batch, group * per_group, -1)


def _pointwise(x, w, b, geometry: WindowGeometry, group: int):
    """1x1 kernel, no padding: one GEMM over the (C, D1 * ... * Dk) view."""
    if any(s != 1 for s in geometry.strides):
        x = x[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in geometry.strides)]
    n, c = x.shape[:2]
    m = w.shape[0]
    y = _group_gemm(w.reshape(group, m // group, c // group), x, n, group)
    return _add_bias(y.reshape((n, m) + tuple(geometry.out_shape)), b)


def _single_image_pointwise(w, b, x_shape: tuple):
    """fn(x): a batch-1, stride-1 pointwise conv as one plain GEMM over x's (C, positions)."""
    w2 = w.reshape(w.shape[0], -1)
    bias = None if b is None else b.reshape(-1, 1)
    channels, shape = x_shape[1], (1, w.shape[0]) + tuple(x_shape[2:])

    def pointwise(x):
        y = products.matmul(w2, x.reshape(channels, -1))
        if bias is not None:
            y += bias
        return y.reshape(shape)

    return pointwise


def live_weights(w, layout: TapLayout):
    """W (M, C, *kernel) as (M, C, live taps): the taps that read only padding dropped (a
    copy), or a view when every tap is live."""
    weights = w.reshape(w.shape[0], w.shape[1], -1)
    live = [number for number, _, _ in layout.taps]
    return weights if len(live) == weights.shape[2] else weights[:, :, live]


def _depthwise(x, w, b, geometry: WindowGeometry, layout: TapLayout):
    """One input channel per group: per channel, a (1, taps) x (taps, positions) product.

    The columns come from the flat tap layout as contiguous row copies; a stacked matmul
    beats summing one scaled copy per tap, whose per-channel scaling numpy runs row by row.
    """
    n, channels = x.shape[:2]
    m = w.shape[0]
    if m != channels:    # each input channel feeds m / channels consecutive output channels
        x = np.repeat(x, m // channels, axis=1)
    span = layout.span
    if not layout.taps:
        return grid_to_output(np.zeros((n * m, span), x.dtype), n, m, geometry, layout, b)
    columns = tap_columns(phase_buffers(x, layout), layout)
    weights = live_weights(w, layout)
    if n > 1:
        weights = np.tile(weights, (n, 1, 1))
    grid = products.matmul(weights, columns).reshape(n * m, span)
    return grid_to_output(grid, n, m, geometry, layout, b)


def _flat_im2col(x, w, b, geometry: WindowGeometry, layout: TapLayout, group: int):
    """im2col from the flat tap layout (contiguous row copies), then one GEMM per group.
    Taps that read only padding drop out of both the columns and the weights."""
    n, c = x.shape[:2]
    m = w.shape[0]
    weights = live_weights(w, layout)
    if not layout.taps:
        return grid_to_output(np.zeros((n * m, layout.span), x.dtype), n, m, geometry,
                              layout, b)
    columns = tap_columns(phase_buffers(x, layout), layout)      # (N * C, taps, span)
    w2 = weights.reshape(group, m // group, -1)
    y = _group_gemm(w2, columns, n, group)
    return grid_to_output(y, n, m, geometry, layout, b)


def _window_im2col(x, w, b, geometry: WindowGeometry, group: int):
    """im2col through the strided window view of the padded input, then one GEMM per group."""
    windows = sliding_windows(padded_input(x, geometry), geometry)
    return _add_bias(_grouped_matmul(windows, w, group), b)


def _spatial_kernel(kernel_shape, w):
    kernel = list(w.shape[2:])
    if kernel_shape and _ints(kernel_shape) != kernel:
        raise ValueError(f"kernel_shape {list(kernel_shape)} does not match W's spatial shape "
                         f"{kernel}")
    return kernel


# A flat layout computes `extent` columns where the output has out_shape ones; it pays
# unless that waste is large and the GEMM (not the copying) is the cost.
_FLAT_WASTE = 1.05
_SMALL_GRID = 1 << 15
_MAX_PHASES = 4      # strides past 2x2 copy the input into too many small phase buffers
_TAPS_MIN_CHANNELS = 32    # "taps": input channels (each product's inner size) from here,
_TAPS_MIN_SPAN = 512        # output grid positions from here,
_TAPS_MAX_OUTPUTS = 96      # and at most this many output channels,
_TAPS_WIDE_SPAN = 2048      # unless the grid is this wide;
_TAPS_FEW_OUTPUTS = 32      # this few output channels take taps on any grid
_CHUNKED_MIN_SPAN = 8192   # "chunked": output grids from this size (112x112 and up)
_CHUNK_COLUMNS = 512        # output positions per chunk of im2col columns
COLUMNS_SPILL_BYTES = 8 << 20   # im2col columns past this are built by chunks (or skipped)
_GATHER_SPAN = 1     # output positions per output channel below which dropped taps go
                     # to the window method (see _conv_plan)


@dataclass(frozen=True)
class ConvPlan:
    """What one Conv shape signature needs: its geometry and the method that runs it."""
    geometry: WindowGeometry
    method: str   # "pointwise", "gather", "winograd", "row_mix", "depthwise", "chunked",
    #               "taps", "flat" or "windows"
    layout: Optional[TapLayout] = None
    gather: Optional[GatherIndex] = None  # channel_gather_index(...) for the "gather" method
    row_mix: Optional[RowMixLayout] = None    # for the "row_mix" method


def _tap_gemms_pay(x_shape, w_shape, group: int, layout: TapLayout) -> bool:
    """Whether one GEMM per kernel position beats im2col: its (C, span) operand is a slice
    of the phase buffers, so the columns (C * taps * span values, rewritten on every call)
    are never built. That copy costs about 1/M of the GEMM's work: it matters for few output
    channels over wide outputs, and BLAS needs enough input channels per product (measured
    on 3x3 and 7x7 kernels, batch 1: 0.6x the time at M=32, C=128, 56x56)."""
    if x_shape[0] != 1 or group != 1 or not layout.taps or x_shape[1] < _TAPS_MIN_CHANNELS:
        return False
    if w_shape[0] <= _TAPS_FEW_OUTPUTS:     # densenet's 128 -> 32 3x3 at 14x14: 0.67x
        return True
    return layout.span >= _TAPS_MIN_SPAN and (w_shape[0] <= _TAPS_MAX_OUTPUTS or
                                               layout.span >= _TAPS_WIDE_SPAN)


def _chunked_pays(x_shape, group: int, layout: TapLayout) -> bool:
    """Whether im2col chunk by chunk beats one GEMM per tap: on wide grids the taps' GEMMs
    (inner size C) and their accumulation stream the whole output nine times; chunks of
    columns stay in cache for the one GEMM (inner size C * taps) that follows (VGG's
    64 -> 64 3x3 at 224x224: 69 -> 50 ms)."""
    return x_shape[0] == 1 and group == 1 and bool(layout.taps) and \
        x_shape[1] >= _TAPS_MIN_CHANNELS and layout.span >= _CHUNKED_MIN_SPAN


def _columns_spill(x_shape, group: int, layout: TapLayout) -> bool:
    """Whether the whole im2col matrix (C * taps * positions floats) outgrows the caches
    (COLUMNS_SPILL_BYTES), so building it chunk by chunk, or not at all (taps), pays on any
    channel count (few-channel convs on large maps: 8 -> 8 5x5 at 224x224 3.5x faster)."""
    return x_shape[0] == 1 and group == 1 and bool(layout.taps) and \
        4 * x_shape[1] * len(layout.taps) * layout.span >= COLUMNS_SPILL_BYTES


def live_tap_matrix(w, layout: TapLayout):
    """W (M, C, *kernel) as one contiguous (M, C * live taps) matrix, channel-major."""
    return np.ascontiguousarray(live_weights(w, layout).reshape(w.shape[0], -1))


def _chunked_im2col(x, w2, b, geometry: WindowGeometry, layout: TapLayout):
    """Conv (batch 1, group 1) as im2col over _CHUNK_COLUMNS output positions at a time,
    each chunk's (C * taps, chunk) columns multiplied right after they are copied."""
    buffers = phase_buffers(x, layout)
    channels, span, taps = x.shape[1], layout.span, layout.taps
    y = np.empty((w2.shape[0], span), x.dtype)
    columns = np.empty((channels, len(taps), _CHUNK_COLUMNS), x.dtype)
    for start in range(0, span, _CHUNK_COLUMNS):
        stop = min(span, start + _CHUNK_COLUMNS)
        block = columns[:, :, :stop - start]
        for j, (_, phase, offset) in enumerate(taps):
            block[:, j, :] = buffers[phase][:, offset + start:offset + stop]
        products.matmul(w2, block.reshape(-1, stop - start), out=y[:, start:stop])
    return grid_to_output(y, 1, w2.shape[0], geometry, layout, b)


def tap_weights(w, layout: TapLayout):
    """W (M, C, *kernel) as one contiguous (M, C) matrix per live tap: (taps, M, C)."""
    return np.ascontiguousarray(live_weights(w, layout).transpose(2, 0, 1))


def _tap_gemms(x, w_taps, b, geometry: WindowGeometry, layout: TapLayout):
    """Conv (batch 1, group 1) as the sum over live taps of W_tap (M, C) times the tap's
    (C, span) window of the phase buffers: a strided view BLAS reads in place."""
    buffers = phase_buffers(x, layout)
    span = layout.span
    y = partial = None
    for j, (_, phase, offset) in enumerate(layout.taps):
        rows = buffers[phase][:, offset:offset + span]
        if y is None:
            y = products.matmul(w_taps[j], rows)
            partial = np.empty_like(y)
        else:
            products.matmul(w_taps[j], rows, out=partial)
            y += partial
    return grid_to_output(y, 1, w_taps.shape[1], geometry, layout, b)


def _frozen(value):
    """An attribute value as a hashable key part."""
    if type(value) is list:
        return tuple(value)
    if value is None or isinstance(value, (int, float, str, bytes)):
        return value
    return tuple(_ints(value))


CONV_METHODS = ("pointwise", "gather", "native_direct", "winograd", "native_depthwise",
                "row_mix", "depthwise", "chunked", "taps", "flat", "windows")
# tests: within `forced_method(m)`, every Conv whose shapes m handles takes it instead of the
# one the cost model picks (plans cached under the old choice are dropped)
FORCED_METHOD = ForcedChoice("Conv method", CONV_METHODS,
                             on_change=lambda: _clear_conv_plans())
forced_method = FORCED_METHOD.forced


def _clear_conv_plans() -> None:
    _conv_plan.cache_clear()


def _direct_conv_pays(w_shape, group: int) -> bool:
    """Whether the native direct conv beats the numpy methods. It runs at about half the
    CPU's peak; BLAS's products come nearer it once they have rows (output channels) to
    spare. It pays where the numpy methods copy the input per tap (a kernel spanning two
    axes: im2col) or where the products are thin (a few output channels per group); a
    kernel along one axis with many output channels runs as per-tap products over views of
    the input ("taps"), copying nothing, at BLAS's speed (1-D convs of 64-256 channels:
    1.1-1.7x faster than the direct conv)."""
    two_axes = sum(k > 1 for k in w_shape[2:]) >= 2
    return two_axes or w_shape[0] // group <= 2 * native_conv.CONV_MB


def _is_depthwise(x_shape, w_shape, group: int) -> bool:
    """One input channel per group (each feeding w_shape[0] / group output channels)."""
    return group > 1 and group == x_shape[1] and w_shape[1] == 1


def method_applies(method: str, x_shape, w_shape, group: int, geometry: WindowGeometry,
                   native: bool = False) -> bool:
    """Whether `method` can run this conv (the cost model aside); `native`: the native
    kernels run here and the conv computes in float32."""
    kernel = list(w_shape[2:])
    depthwise = _is_depthwise(x_shape, w_shape, group)
    if method == "native_depthwise":
        return depthwise and native and len(x_shape) in (3, 4)
    if method == "native_direct":
        # image by image, in tiles of CONV_MAX_W outputs: an image's output smaller than a
        # tile leaves most of each idle (a large batch of short sequences: one GEMM over the
        # whole batch is faster)
        return not depthwise and native and len(x_shape) in (3, 4) and \
            (x_shape[0] == 1 or math.prod(geometry.out_shape) >= native_conv.CONV_MAX_W)
    if method == "pointwise":
        return all(k == 1 for k in kernel) and not any(geometry.pads_begin) and \
            not any(geometry.pads_end)
    if method == "gather":
        return group == 1
    if method == "winograd":
        return len(x_shape) == 4 and kernel == [3, 3] and group == 1 and \
            all(s == 1 for s in geometry.strides) and all(d == 1 for d in geometry.dilations)
    if method == "row_mix":
        return len(x_shape) == 4 and depthwise
    if method == "windows":
        return True
    layout = layout_of(x_shape[2:], geometry)
    if len(layout.copies) > _MAX_PHASES:
        return False
    if method == "depthwise":
        return depthwise
    if method in ("chunked", "taps"):
        return x_shape[0] == 1 and group == 1 and bool(layout.taps)
    return method == "flat"


@functools.lru_cache(maxsize=1024)
def _conv_plan(x_shape, w_shape, group, kernel_shape, strides, dilations, pads,
               auto_pad, exact: bool = False, native: bool = False,
               threaded: bool = False) -> ConvPlan:
    kernel = list(w_shape[2:])
    if kernel_shape and list(kernel_shape) != kernel:
        raise ValueError(f"kernel_shape {list(kernel_shape)} does not match W's spatial "
                         f"shape {kernel}")
    geometry = window_geometry(x_shape[2:], kernel, strides, dilations, pads, auto_pad)
    if not x_shape[0] or not all(geometry.out_shape):      # an empty output
        return ConvPlan(geometry, "windows")
    forced = FORCED_METHOD.value
    if forced and method_applies(forced, x_shape, w_shape, group, geometry, native) \
            and not (exact and forced == "winograd"):
        method = forced
    else:
        method = _choose_method(x_shape, w_shape, group, geometry, exact, native, threaded)
    return _plan_for(method, x_shape, w_shape, geometry)


def _plan_for(method: str, x_shape, w_shape, geometry: WindowGeometry) -> ConvPlan:
    """The ConvPlan of `method`: what it precomputes per shape."""
    kernel = tuple(w_shape[2:])
    if method == "gather":
        return ConvPlan(geometry, "gather", gather=channel_gather_index(
            tuple(x_shape[2:]), kernel, tuple(geometry.strides), tuple(geometry.dilations),
            tuple(geometry.pads_begin), tuple(geometry.out_shape), x_shape[1]))
    if method == "row_mix":
        shape = (tuple(x_shape), kernel, tuple(geometry.strides), tuple(geometry.dilations),
                 tuple(geometry.pads_begin), tuple(geometry.out_shape))
        return ConvPlan(geometry, "row_mix", row_mix=row_mix_layout(*shape, band_rows(*shape)))
    if method in ("depthwise", "chunked", "taps", "flat"):
        return ConvPlan(geometry, method, layout_of(x_shape[2:], geometry))
    return ConvPlan(geometry, method)


def _choose_method(x_shape, w_shape, group: int, geometry: WindowGeometry,
                   exact: bool = False, native: bool = False, threaded: bool = False) -> str:
    """The method the cost model rates fastest for this shape signature; with `exact`, one
    whose sums are plain products (integers held in floats stay exact: no Winograd). With
    `threaded` (native kernels on more than one thread), no Winograd either where the direct
    conv applies: its parts scale with the threads, Winograd's numpy transforms run on one
    (2 threads: 128 -> 128 at 28x28 1.33 against 1.80 ms, 32 -> 32 at 112x112 1.24 against
    4.83; on one thread Winograd's were the faster)."""
    if method_applies("native_depthwise", x_shape, w_shape, group, geometry, native):
        return "native_depthwise"      # direct, in one pass: faster than numpy's on any size
    channels = x_shape[1]
    kernel = list(w_shape[2:])
    unpadded = not any(geometry.pads_begin) and not any(geometry.pads_end)
    positions = x_shape[0] * math.prod(geometry.out_shape)
    one_position_batch = group == 1 and positions == x_shape[0] > 1
    if all(k == 1 for k in kernel) and unpadded and not one_position_batch:
        return "pointwise"
    # (a batch of one position each, as in squeeze-excite blocks: gathered, every image's
    # values in one GEMM instead of one per image)
    if group == 1 and positions <= GATHER_MAX_POSITIONS and \
            positions * channels * math.prod(kernel) <= GATHER_MAX_COLUMNS:
        return "gather"
    direct = method_applies("native_direct", x_shape, w_shape, group, geometry, native)
    if not exact and not (threaded and direct) and \
            winograd_pays(x_shape, w_shape, group, geometry.strides, geometry.dilations,
                          geometry.out_shape):
        return "winograd"     # (where it pays, 2.25x fewer products beat the direct conv too)
    if direct and _direct_conv_pays(w_shape, group):
        # register tiles over every tap and channel: at onnxruntime's speed where the numpy
        # methods' copies and short GEMMs are not
        return "native_direct"
    if len(x_shape) == 4 and _is_depthwise(x_shape, w_shape, group):
        return "row_mix"
    layout = layout_of(x_shape[2:], geometry)
    if len(layout.copies) > _MAX_PHASES:
        return "windows"
    if _is_depthwise(x_shape, w_shape, group):
        return "depthwise"
    if _chunked_pays(x_shape, group, layout):
        # Chunked columns copy C * taps values per output position, one GEMM per chunk; the
        # taps' GEMMs skip that copy but add into the (M, positions) output once per tap.
        # With fewer output than input channels the copy costs more (1.24x -> 1.01x of the
        # faster one over 58 shapes, 8-128 channels, 28x28-332x80 grids).
        return "taps" if w_shape[0] < channels else "chunked"
    if _tap_gemms_pay(x_shape, w_shape, group, layout):
        return "taps"
    if len(layout.taps) < math.prod(kernel) and \
            x_shape[0] * layout.span <= w_shape[0] * _GATHER_SPAN:
        # Dropping the taps that read only padding copies the live part of the weights on
        # every call: more than the skipped multiplications save on short outputs.
        return "windows"
    if w_shape[1] * math.prod(kernel) < 2 * (w_shape[0] // group):
        # A short GEMM inner size (C * taps: first layers on 1-3 channels): the flat layout's
        # saving (building columns by contiguous slices) is small against what it adds (an
        # output computed over padded rows, then cut to shape): windows, 1.19x -> 1.04x of
        # the faster one over 167 shapes.
        return "windows"
    if _columns_spill(x_shape, group, layout):
        return "taps" if w_shape[0] < channels else "chunked"
    waste = math.prod(layout.extent[1:]) / math.prod(geometry.out_shape[1:])
    columns = x_shape[0] * x_shape[1] * layout.span * math.prod(kernel)
    if waste <= _FLAT_WASTE or columns <= _SMALL_GRID:
        return "flat"
    return "windows"


def convolve(x, w, b=None, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
             pads=None, strides=None, ctx=None, exact=False):
    """Conv's result as a fresh array in the compute dtype (callers may modify it in place).

    With the node's `ctx`, the plan of each input shape and the weights in the compute dtype
    are prepared once (initializers come back as the same objects on every run). With
    `exact`, only methods whose sums are sums of the products (not Winograd's transforms):
    integer operands held in float32 give exact sums below 2**24 (ConvInteger)."""
    return convolve_activated(x, w, b, None, None, auto_pad, dilations, group, kernel_shape,
                              pads, strides, ctx, exact)[0]


def convolve_activated(x, w, b, activation, activation_params, auto_pad="NOTSET",
                       dilations=None, group=1, kernel_shape=None, pads=None, strides=None,
                       ctx=None, exact=False) -> tuple:
    """(y, activated): convolve's result, with FusedConv's `activation` already applied when
    `activated` (the native methods apply the ones they know in the same pass); else the
    caller applies it."""
    if x.ndim < 3 or w.ndim != x.ndim or x.shape[1] != w.shape[1] * group or \
            w.shape[0] % group or group < 1:
        _check_conv_shapes(x, w, group)

    def prepare():
        """The PreparedConv of this node and input shape."""
        if 0 in x.shape[2:]:         # checked once per input shape, not on every call
            _check_conv_shapes(x, w, group)
        acc = compute_dtype(x.dtype)
        native = acc == np.float32 and native_conv.available()
        plan = _conv_plan(x.shape, w.shape, group, _frozen(kernel_shape), _frozen(strides),
                          _frozen(dilations), _frozen(pads), _frozen(auto_pad), exact, native,
                          native and threaded)
        weights = w.astype(acc, copy=False)
        bias = None if b is None else b.astype(acc, copy=False)
        act = native_conv.activation_code(activation, activation_params) \
            if native and activation is not None else None
        if plan.method in ("native_direct", "native_depthwise"):   # the activation inside
            bias = None if bias is None else np.ascontiguousarray(bias)
            fused = act or native_conv.activation_code(None, None)
            if plan.method == "native_direct":
                run = native_conv.DirectConv(x.shape, w.shape, group, plan.geometry, fused,
                                             native_conv.pack_direct_weights(weights, group),
                                             bias)
            else:
                weights = np.ascontiguousarray(weights)

                def run(x):
                    return native_conv.depthwise_conv(x, weights, bias, plan.geometry, fused)
            return PreparedConv(plan, acc, None, None, run, None, act is not None)
        epilogue = None
        out_size = x.shape[0] * w.shape[0] * math.prod(plan.geometry.out_shape)
        if act is not None and native_conv.pass_pays(activation, out_size, bias is not None):
            # bias and activation after the method, in one native pass
            epilogue = (None if bias is None else np.ascontiguousarray(bias), act)
            bias = None
        whole = None
        if plan.method == "taps":
            weights = tap_weights(weights, plan.layout)
        elif plan.method == "chunked":
            weights = live_tap_matrix(weights, plan.layout)
        elif plan.method == "winograd":
            weights = winograd_weights(weights)
        elif plan.method == "row_mix":
            g = plan.geometry
            mix = row_mix_weights(weights, plan.row_mix, g.strides, g.dilations)
            column_taps = tap_ranges(x.shape[3], g.out_shape[1], g.kernel[1], g.strides[1],
                                     g.dilations[1], g.pads_begin[1])
            whole = row_mix_conv(mix, bias, plan.row_mix, x.shape, g.strides[0],
                                 g.pads_begin[0], column_taps, tuple(g.out_shape))
        elif plan.method == "gather":
            whole = gathered_conv(weights.reshape(weights.shape[0], -1), bias, plan.gather,
                                  x.shape, plan.geometry.out_shape)
        elif plan.method == "pointwise" and x.shape[0] == 1 and group == 1 and \
                all(s == 1 for s in plan.geometry.strides):
            whole = _single_image_pointwise(weights, bias, x.shape)
        return PreparedConv(plan, acc, weights, bias, whole, epilogue, epilogue is not None)

    threaded = parallel.threads() > 1
    if ctx is None:
        prepared = prepare()
    else:
        prepared = ctx.prepared(("conv", x.shape, x.dtype, exact, activation, threaded), (w, b),
                                prepare)
    x = x.astype(prepared.dtype, copy=False)
    if prepared.whole is not None:
        y = prepared.whole(x)
    else:
        y = _run_method(prepared.plan, x, prepared.weights, prepared.bias, group)
    if prepared.epilogue is not None:
        y = native_conv.bias_activation(np.ascontiguousarray(y), *prepared.epilogue)
    return y, prepared.activated


class PreparedConv(NamedTuple):
    """What convolve_activated derives once per node and input shape."""
    plan: ConvPlan
    dtype: np.dtype                   # the compute dtype
    weights: Optional[np.ndarray]     # as the method takes them (None: `whole` holds them)
    bias: Optional[np.ndarray]        # what the method adds (None: none, or the epilogue's)
    whole: Optional[Callable]         # fn(x) running the whole conv, or None: _run_method
    epilogue: Optional[tuple]         # (bias, activation code): one native pass after it
    activated: bool                   # whether the result has the activation applied


def _run_method(plan, x, w, b, group):
    """The conv by one of the numpy methods that take the prepared weights per call."""
    method = plan.method
    if method == "chunked":
        return _chunked_im2col(x, w, b, plan.geometry, plan.layout)
    if method == "taps":
        return _tap_gemms(x, w, b, plan.geometry, plan.layout)
    if method == "winograd":
        return winograd_conv(x, w, b, plan.geometry.pads_begin, plan.geometry.out_shape)
    if method == "pointwise":
        return _pointwise(x, w, b, plan.geometry, group)
    if method == "depthwise":
        return _depthwise(x, w, b, plan.geometry, plan.layout)
    if method == "flat":
        return _flat_im2col(x, w, b, plan.geometry, plan.layout, group)
    return _window_im2col(x, w, b, plan.geometry, group)


# ---------------------------------------------------------------- Conv


@kernel("Conv")
def conv(ctx, x, w, b=None, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
         pads=None, strides=None):
    y = convolve(x, w, b, auto_pad, dilations, group, kernel_shape, pads, strides, ctx)
    return y.astype(x.dtype, copy=False)


# ---------------------------------------------------------------- ConvTranspose


@kernel("ConvTranspose")
def conv_transpose(ctx, x, w, b=None, auto_pad="NOTSET", dilations=None, group=1,
                   kernel_shape=None, output_padding=None, output_shape=None, pads=None,
                   strides=None):
    _check_conv_shapes(x, w, group, transposed=True)
    kernel = _spatial_kernel(kernel_shape, w)
    out_shape, pads_begin, strides, dilations = transpose_output_geometry(
        x.shape[2:], kernel, _ints(strides or []), _ints(dilations or []), _ints(pads or []),
        auto_pad, _ints(output_padding or []), _ints(output_shape or []))
    acc = compute_dtype(x.dtype)
    n, channels = x.shape[:2]
    in_per_group = channels // group
    out_per_group = w.shape[1]
    blocks = x.shape[2:]
    xg = x.astype(acc, copy=False).reshape(n, group, in_per_group, math.prod(blocks))
    wg = w.astype(acc, copy=False).reshape(group, in_per_group, out_per_group * math.prod(kernel))
    columns = products.matmul(wg.transpose(0, 2, 1), xg)   # (N, group, M/group * K, blocks)
    columns = columns.reshape((n, group * out_per_group) + tuple(kernel) + tuple(blocks))
    y = fold(columns, out_shape, pads_begin, strides, dilations)
    y = _add_bias(np.ascontiguousarray(y), None if b is None else b.astype(acc, copy=False))
    return y.astype(x.dtype, copy=False)


# ---------------------------------------------------------------- Col2Im


@kernel("Col2Im", since=18)
def col2im(ctx, x, image_shape, block_shape, dilations=None, pads=None, strides=None):
    image_shape = _ints(image_shape)
    block_shape = _ints(block_shape)
    rank = len(image_shape)
    if len(block_shape) != rank:
        raise ValueError(f"block_shape {block_shape} and image_shape {image_shape} must have "
                         f"the same length")
    if x.ndim != 3:
        raise ValueError(f"input must be (N, C * prod(block_shape), L), got shape {x.shape}")
    block_size = math.prod(block_shape)
    if x.shape[1] % block_size:
        raise ValueError(f"input dimension 1 ({x.shape[1]}) is not a multiple of "
                         f"prod(block_shape) = {block_size}")
    geometry = window_geometry(image_shape, block_shape, strides, dilations, pads)
    if math.prod(geometry.out_shape) != x.shape[2]:
        raise ValueError(f"input has {x.shape[2]} blocks, image_shape {image_shape} with these "
                         f"pads/strides/dilations gives {geometry.out_shape}")
    acc = compute_dtype(x.dtype) if x.dtype.kind not in "iu" else x.dtype
    n, channels = x.shape[0], x.shape[1] // block_size
    columns = x.astype(acc, copy=False).reshape(
        (n, channels) + tuple(block_shape) + tuple(geometry.out_shape))
    y = fold(columns, image_shape, geometry.pads_begin, geometry.strides, geometry.dilations)
    return np.ascontiguousarray(y).astype(x.dtype, copy=False)


# ---------------------------------------------------------------- DeformConv


def _sample_multilinear(x, positions):
    """Values of x (N, G, Cg, *S) at fractional positions (N, G, P, rank), zero outside.

    Returns (N, G, Cg, P): multilinear interpolation over the 2**rank surrounding points,
    as GridSample with align_corners=1 and zero padding.
    """
    spatial = x.shape[3:]
    rank = len(spatial)
    flat = x.reshape(x.shape[:3] + (-1,))
    lower = np.floor(positions)
    result = None
    for corner in np.ndindex(*([2] * rank)):
        weight = np.ones(positions.shape[:-1], dtype=x.dtype)
        index = np.zeros(positions.shape[:-1], dtype=np.int64)
        for axis, bit in enumerate(corner):
            coord = lower[..., axis] + bit
            weight = weight * (1 - np.abs(positions[..., axis] - coord)).astype(x.dtype)
            inside = (coord >= 0) & (coord < spatial[axis])
            weight = np.where(inside, weight, 0)
            index = index * spatial[axis] + np.clip(coord, 0, spatial[axis] - 1).astype(np.int64)
        values = np.take_along_axis(flat, index[:, :, None, :], axis=3) * weight[:, :, None, :]
        result = values if result is None else result + values
    return result


@kernel("DeformConv", since=19)
def deform_conv(ctx, x, w, offset, b=None, mask=None, dilations=None, group=1,
                kernel_shape=None, offset_group=1, pads=None, strides=None):
    _check_conv_shapes(x, w, group)
    kernel = _spatial_kernel(kernel_shape, w)
    rank = len(kernel)
    geometry = window_geometry(x.shape[2:], kernel, strides, dilations, pads)
    out_shape = list(offset.shape[2:])
    if out_shape != geometry.out_shape:
        raise ValueError(f"offset spatial shape {out_shape} does not match the output shape "
                         f"{geometry.out_shape} given by pads/strides/dilations")
    n, channels = x.shape[:2]
    kernel_size = math.prod(kernel)
    if channels % offset_group or offset.shape[1] != offset_group * kernel_size * rank:
        raise ValueError(f"offset shape {offset.shape} does not fit offset_group={offset_group}, "
                         f"kernel {kernel} and {channels} input channels")
    acc = compute_dtype(x.dtype)

    # Base sampling position of each (kernel position, output position), per spatial axis.
    base = np.meshgrid(*[np.arange(k) * d for k, d in zip(kernel, geometry.dilations)],
                       *[np.arange(o) * s - p for o, s, p in
                         zip(out_shape, geometry.strides, geometry.pads_begin)], indexing="ij")
    base = np.stack([base[i] + base[rank + i] for i in range(rank)], axis=-1)   # (*K, *O, rank)
    shifts = offset.astype(acc, copy=False).reshape(
        (n, offset_group) + tuple(kernel) + (rank,) + tuple(out_shape))
    shifts = np.moveaxis(shifts, 2 + rank, -1)                                   # (N, G, *K, *O, rank)
    positions = (base.astype(acc) + shifts).reshape(n, offset_group, -1, rank)

    grouped = x.astype(acc, copy=False).reshape(
        (n, offset_group, channels // offset_group) + tuple(x.shape[2:]))
    columns = _sample_multilinear(grouped, positions)             # (N, G, Cg, K * O)
    if mask is not None:
        columns = columns * mask.astype(acc, copy=False).reshape(n, offset_group, 1, -1)
    columns = columns.reshape((n, channels) + tuple(kernel) + tuple(out_shape))
    y = _grouped_matmul(columns, w.astype(acc, copy=False), group)
    y = _add_bias(y, None if b is None else b.astype(acc, copy=False))
    return y.astype(x.dtype, copy=False)


# ---------------------------------------------------------------- CausalConvWithState


@kernel("CausalConvWithState", since=26)
def causal_conv_with_state(ctx, x, w, bias=None, past_state=None, activation="none"):
    activation = _as_str(activation or "none")
    if activation not in ("none", "silu", "swish"):
        raise ValueError(f"activation must be 'none', 'silu' or 'swish', got {activation!r}")
    if x.ndim != 3 or w.ndim != 3 or w.shape[1] != 1 or w.shape[0] != x.shape[1]:
        raise ValueError(f"expected input (B, C, L) and weight (C, 1, k), got {x.shape} and "
                         f"{w.shape}")
    batch, channels, length = x.shape
    k = w.shape[2]
    if past_state is None:
        past_state = np.zeros((batch, channels, k - 1), dtype=x.dtype)
    elif past_state.shape != (batch, channels, k - 1):
        raise ValueError(f"past_state must have shape {(batch, channels, k - 1)}, got "
                         f"{past_state.shape}")
    history = np.concatenate([past_state.astype(x.dtype, copy=False), x], axis=2)
    acc = compute_dtype(x.dtype)
    wide = history.astype(acc, copy=False)
    weights = w.astype(acc, copy=False)
    y = np.zeros((batch, channels, length), dtype=acc)
    for j in range(k):
        y += wide[:, :, j:j + length] * weights[None, :, 0, j:j + 1]
    if bias is not None:
        y += bias.astype(acc, copy=False)[None, :, None]
    if activation != "none":
        y = y / (1 + np.exp(-y))
    present_state = history[:, :, history.shape[2] - (k - 1):]
    return y.astype(x.dtype, copy=False), np.ascontiguousarray(present_state)
