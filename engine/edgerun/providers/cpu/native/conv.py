"""Convolutions, pools and activations in native passes (cpu_kernels/conv.c), float32, 1-D
and 2-D, any kernel, stride, dilation and padding:
- depthwise_conv: computed directly over padded phase planes (a channel multiplier too);
- pool: every window's maximum or sum, on the depthwise conv's loops;
- DirectConv: every other conv that is not a plain GEMM, 8 output channels x 32 outputs in
  registers over every input channel and tap;
- activated / activate_in_place / bias_activation: FusedConv's activations (ACTIVATIONS)
  alone or as a conv's epilogue, bit for bit the numpy in-place ones.
The convs apply their activation in the same pass. Work is split over threads (parallel.py)."""
from __future__ import annotations

from typing import Optional

import functools
import math

import numpy as np

from ....ir.conv_rules import WindowGeometry
from . import parallel
from .library import address, library
from .library import available as available  # callers ask the module they use

# activation name -> (code in conv.c, fn(params) -> the float32 parameters it reads,
# passes numpy makes over the values for it)
ACTIVATIONS = {
    "Relu": (1, lambda p: (0.0, 0.0), 1),
    "LeakyRelu": (2, lambda p: (p[0] if p else 0.01, 0.0), 2),
    "Clip": (3, lambda p: (p[0] if len(p) > 0 else -np.inf, p[1] if len(p) > 1 else np.inf), 1),
    "HardSigmoid": (4, lambda p: (p[0] if len(p) > 0 else 0.2, p[1] if len(p) > 1 else 0.5), 3),
    "HardSwish": (5, lambda p: (0.0, 0.0), 4),
    # params [scale, zero point, low, high] -> scale and the grid's ends around the zero point
    "QuantizeDequantize": (6, lambda p: (p[0], p[2] - p[1], p[3] - p[1]), 5),
    # x * sigmoid(alpha x) with fast_exp: a few ulp from the numpy formula, not bit for bit
    "Swish": (7, lambda p: (p[0] if p else 1.0, 0.0), 5),
}
# A native call costs about two numpy calls (~3 us): a pass of one or two numpy calls over
# fewer values than this is cheaper in numpy (silero's small FusedConvs: +15 us a run).
NATIVE_PASS_MIN_VALUES = 1 << 14


def pass_pays(activation: Optional[str], size: int, with_bias: bool = False) -> bool:
    """Whether one native pass beats numpy's for this activation (and a bias add) over
    `size` values."""
    entry = ACTIVATIONS.get(activation) if activation else None
    passes = (entry[2] if entry else 0) + (1 if with_bias else 0)
    return passes > 2 or size >= NATIVE_PASS_MIN_VALUES


def activation_code(activation: Optional[str], params) -> Optional[tuple]:
    """(code, float32 parameters) of an activation the native pass applies; (0, ...) for
    none; None for one it does not (the caller applies it afterwards)."""
    if activation is None:
        return 0, np.zeros(2, np.float32)
    entry = ACTIVATIONS.get(activation)
    if entry is None:
        return None
    params = list(params or ())
    if activation == "LeakyRelu" and not (params[0] if params else 0.01) > 0:
        return None       # leaky_relu_of's form holds for a positive alpha only
    return entry[0], np.asarray(entry[1](params), np.float32)


def planar_dims(x_shape: tuple, geometry) -> tuple:
    """(in_h, in_w, out_h, out_w, kh, kw, sh, sw, dh, dw, pt, pl) of a 1-D or 2-D window
    geometry, a 1-D one as the rows of a 1-high image."""
    spatial = list(x_shape[2:])
    fields = [spatial, list(geometry.out_shape), geometry.kernel, geometry.strides,
              geometry.dilations, geometry.pads_begin]
    defaults = [1, 1, 1, 1, 1, 0]
    if len(spatial) == 2:
        return tuple(v for values in fields for v in values[:2])
    return tuple(v for values, d in zip(fields, defaults) for v in (d, values[0]))


def depthwise_conv(x: np.ndarray, w: np.ndarray, bias: Optional[np.ndarray], geometry,
                   act: tuple) -> np.ndarray:
    """The depthwise Conv of float32 x (N, C, [H,] W) by w (C * multiplier, 1, [kh,] kw) and
    optional bias, over a WindowGeometry, with activation `act` (activation_code's)."""
    return _windows(x, w.shape[0], geometry, "er_cpu_depthwise_conv",
                    lambda x, shape: [x, address(w), address(bias), shape, act[0],
                                      address(act[1])])


def pool(x: np.ndarray, geometry, total: bool) -> np.ndarray:
    """Every window's maximum (MaxPool without indices: windows of padding alone give -inf),
    or with `total` its sum, of float32 x (N, C, [H,] W) over a WindowGeometry."""
    mode = WINDOW_SUM if total else WINDOW_MAX
    return _windows(x, x.shape[1], geometry, "er_cpu_pool",
                    lambda x, shape: [x, shape, mode])


WINDOW_MAX, WINDOW_SUM = 1, 2     # conv.c's window modes


def max_pool_8bit(x: np.ndarray, geometry) -> np.ndarray:
    """Every window's maximum of 8-bit codes x (uint8 or int8, (N, C, [H,] W)) over a
    WindowGeometry (windows of padding alone give the type's lowest value): a MaxPool between
    a QDQ model's pairs, run on its codes."""
    x = np.ascontiguousarray(x)
    layout = _window_layout(x.shape, x.shape[1], tuple(tuple(v) for v in (
        geometry.out_shape, geometry.kernel, geometry.strides, geometry.dilations,
        geometry.pads_begin)))
    y = np.empty(layout.out_shape, x.dtype)
    ranges = layout.ranges(parallel.parts_for(layout.macs // BYTE_MAX_SHARE, x.shape[1],
                                              parallel.MIN_RECORD_MACS))
    scratch, scratch_at = _part_scratch(len(ranges), layout.byte_pool_scratch, np.uint8)
    parallel.run_split("er_cpu_max_pool_8bit", [
        address(x), layout.shape_address, int(x.dtype == np.int8), address(y), scratch_at,
        [at for _, at in ranges]], len(ranges))
    return y


def _part_scratch(parts: int, size: int, dtype) -> tuple:
    """(memory, addresses): `parts` scratch rows of `size` values, one per part, and each
    row's address (a per-part word of parallel.run_split; the caller holds the memory)."""
    rows = np.empty((parts, max(size, 1)), dtype)
    at = address(rows)
    return rows, [at + i * rows.strides[0] for i in range(parts)]


BYTE_MAX_SHARE = 16     # a byte maximum's share of a float multiply-add, splitting work


def _windows(x: np.ndarray, outputs: int, geometry, kernel: str, words) -> np.ndarray:
    """conv.c's depthwise window loops over x (as float32, C-contiguous) into a fresh y of
    `outputs` channels, the channels split over the native pool (parallel.run_split):
    `kernel`'s arguments words(x, geometry) then y, scratch, tap offsets and channel range,
    each an address."""
    x = np.ascontiguousarray(x, np.float32)
    layout = _window_layout(x.shape, outputs, tuple(tuple(v) for v in (
        geometry.out_shape, geometry.kernel, geometry.strides, geometry.dilations,
        geometry.pads_begin)))
    y = np.empty(layout.out_shape, np.float32)
    ranges = layout.ranges(parallel.parts_for(layout.macs, x.shape[1], parallel.MIN_RECORD_MACS))
    parts = len(ranges)
    scratch, scratch_at = _part_scratch(parts, layout.scratch, np.float32)
    offsets, offsets_at = _part_scratch(parts, layout.taps, np.int64)
    parallel.run_split(kernel, words(address(x), layout.shape_address) +
                       [address(y), scratch_at, offsets_at, [at for _, at in ranges]], parts)
    return y


class _WindowLayout:
    """What _windows computes once per input shape and geometry."""

    def __init__(self, x_shape: tuple, outputs: int, fields: tuple):
        out_shape, kernel, strides, dilations, pads = fields
        n, channels = x_shape[:2]
        geometry = WindowGeometry(list(out_shape), list(pads), [], list(kernel),
                                  list(strides), list(dilations))
        dims = planar_dims(x_shape, geometry)
        self.shape = np.array((n, channels, outputs // channels) + dims, np.int64)
        self.shape_address = address(self.shape)
        self.out_shape = (n, outputs) + tuple(out_shape)
        self.scratch = _depthwise_scratch(*dims)
        self.taps = dims[4] * dims[5]
        self.byte_pool_scratch = _byte_pool_scratch(*dims)
        self.macs = int(np.prod(self.out_shape)) * self.taps
        self.channels = channels
        self._ranges: dict = {}

    def ranges(self, parts: int) -> list:
        """[(channel range array, its address)] of each part."""
        found = self._ranges.get(parts)
        if found is None:
            found = self._ranges[parts] = _held(parallel.split(self.channels, parts))
        return found


def _held(bounds: list) -> list:
    """[(int64 array of each bound tuple, its address)]: kept with the layout, so the
    address stays valid (a temporary's would not)."""
    arrays = [np.array(b, np.int64) for b in bounds]
    return [(a, address(a)) for a in arrays]


@functools.lru_cache(maxsize=256)
def _window_layout(x_shape: tuple, outputs: int, fields: tuple) -> _WindowLayout:
    return _WindowLayout(x_shape, outputs, fields)


CHUNK = 64      # conv.c's outputs accumulated in registers at a time


def _depthwise_scratch(in_h, in_w, out_h, out_w, kh, kw, sh, sw, dh, dw, pt, pl) -> int:
    """Floats of conv.c's depthwise scratch: the padded phase planes, a zero tail, the
    accumulator of a block of rows (rows of phase_w, or of out_w rounded up to 64)."""
    padded_h = max(in_h + pt, (out_h - 1) * sh + (kh - 1) * dh + 1)
    padded_w = max(in_w + pl, (out_w - 1) * sw + (kw - 1) * dw + 1)
    phase_h, phase_w = -(-padded_h // sh), -(-padded_w // sw)
    block_rows = min(out_h, 1 + 4096 // phase_w)
    return sh * sw * phase_h * phase_w + phase_w + CHUNK + block_rows * (phase_w + 64)


def _byte_pool_scratch(in_h, in_w, out_h, out_w, kh, kw, sh, sw, dh, dw, pt, pl) -> int:
    """Bytes of conv.c's 8-bit max pool scratch: the padded plane and the output plane,
    with the slack its whole-vector gathers read and write past them."""
    padded_h = max(in_h + pt, (out_h - 1) * sh + (kh - 1) * dh + 1)
    padded_w = max(in_w + pl, (out_w - 1) * sw + (kw - 1) * dw + 1)
    return padded_h * padded_w + out_h * out_w + 128


CONV_MB = 8             # conv.c's output channels per register tile
CONV_MAX_W = 32         # and its widest run of outputs per tile
_BLOCK_BYTES = 256 << 10    # the phase planes of one block of output rows: about L2's share


def pack_direct_weights(w: np.ndarray, group: int) -> np.ndarray:
    """W (M, C/group, *kernel) as conv.c's direct conv reads it: [group][M_g / 8][C_g][taps][8],
    float32, the last block of each group's output channels zero-padded."""
    m, cg = w.shape[:2]
    taps = int(np.prod(w.shape[2:]))
    mg = m // group
    blocks = -(-mg // CONV_MB)
    padded = np.zeros((group, blocks * CONV_MB, cg, taps), np.float32)
    padded[:, :mg] = w.reshape(group, mg, cg, taps)
    packed = padded.reshape(group, blocks, CONV_MB, cg, taps).transpose(0, 1, 3, 4, 2)
    return np.ascontiguousarray(packed)


class DirectConv:
    """The direct conv of one input shape and its packed weights: fn(x) -> y (float32), the
    layout and every constant's address computed once (a small conv's call is mostly this
    bookkeeping)."""

    def __init__(self, x_shape: tuple, w_shape: tuple, group: int, geometry, act: tuple,
                 packed: np.ndarray, bias: Optional[np.ndarray]):
        n, channels = x_shape[:2]
        in_h, in_w, out_h, out_w, kh, kw, sh, sw, dh, dw, pt, pl = planar_dims(x_shape, geometry)
        cg = channels // group
        padded_w = max(in_w + pl, (out_w - 1) * sw + (kw - 1) * dw + 1)
        phase_w = -(-padded_w // sw)
        reach = (kh - 1) * dh // sh
        row_bytes = cg * sh * sw * phase_w * 4
        block_rows = int(min(out_h, max(1, _BLOCK_BYTES // row_bytes - reach)))
        self._held = [np.array([n, channels, w_shape[0], group, in_h, in_w, out_h, out_w,
                                kh, kw, sh, sw, dh, dw, pt, pl], np.int64),
                      np.empty(kh * kw, np.int64), packed, bias, act[1]]
        geometry_array, offsets = self._held[:2]
        library().er_cpu_conv_tap_offsets(address(geometry_array), block_rows, address(offsets))
        planes = cg * sh * sw * (block_rows + reach) * phase_w
        self.scratch_size = planes + phase_w + CONV_MAX_W + CONV_MB * block_rows * phase_w
        self.out_shape = (n, w_shape[0]) + tuple(geometry.out_shape)
        self.out_h = out_h
        self.m_blocks = -(-(w_shape[0] // group) // CONV_MB)
        self._row_blocks = -(-out_h // block_rows)
        self._weight_bytes, self._input_bytes = packed.nbytes, 4 * math.prod(x_shape)
        self.macs = int(np.prod(self.out_shape)) * cg * kh * kw
        # the constant arguments after x: weights, bias, geometry, activation, its parameters
        self._before = (address(packed), address(bias), address(geometry_array), act[0],
                        address(act[1]))
        self._offsets, self._block_rows = address(offsets), block_rows
        self._ranges: dict = {}        # parts -> [(range array, its address)]

    def ranges(self, parts: int) -> list:
        """[(range array, address)] of each part: [row begin, row end, block begin, block
        end], rows split, or the output channels' blocks where that moves fewer bytes."""
        found = self._ranges.get(parts)
        if found is None:
            if self.out_h > 1 and not self._split_channels(parts):
                bounds = [(r0, r1, 0, self.m_blocks) for r0, r1 in parallel.split(self.out_h, parts)]
            else:
                bounds = [(0, self.out_h, b0, b1)
                          for b0, b1 in parallel.split(self.m_blocks, parts)]
            found = self._ranges[parts] = _held(bounds)
        return found

    def _split_channels(self, parts: int) -> bool:
        """Whether parts over output channels read fewer bytes than parts over rows. Every
        block of output rows reads all the weights (a part has at least one block), and every
        part copies the input rows it reads: rows, weights x max(parts, row blocks) + input;
        channels, weights x row blocks + input x parts. Small maps of many channels (7x7
        512 -> 512: 9.4 MB of weights for 100 KB of input) split channels."""
        if self.m_blocks < parts:
            return False
        by_rows = self._weight_bytes * max(parts, self._row_blocks) + self._input_bytes
        by_channels = self._weight_bytes * self._row_blocks + self._input_bytes * parts
        return by_channels < by_rows

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, np.float32)
        y = np.empty(self.out_shape, np.float32)
        ranges = self.ranges(parallel.parts_for(self.macs, max(self.out_h, self.m_blocks),
                                                parallel.MIN_RECORD_MACS))
        scratch, scratch_at = _part_scratch(len(ranges), self.scratch_size, np.float32)
        parallel.run_split("er_cpu_direct_conv", [
            address(x), *self._before, address(y), scratch_at, self._offsets, self._block_rows,
            [at for _, at in ranges]], len(ranges))
        return y


def activated(x: np.ndarray, activation: str, params=()) -> Optional[np.ndarray]:
    """A fresh act(x) of float32 C-contiguous x in one native pass, or None where the native
    kernels do not take it (another dtype or layout, an activation they lack)."""
    if x.dtype != np.float32 or not pass_pays(activation, x.size) or \
            not x.flags.c_contiguous or not available():
        return None
    act = activation_code(activation, params)
    if act is None:
        return None
    y = np.empty(x.shape, np.float32)
    _split_activation(address(x), address(y), x.size, act)
    return y


def _split_activation(x: int, y: int, n: int, act: tuple) -> None:
    """er_cpu_activation over n values at addresses x and y (the same for in place), in
    parallel.value_ranges' parts."""
    ranges = parallel.value_ranges(n)
    if len(ranges) == 1:
        library().er_cpu_activation(x, y, n, act[0], address(act[1]))
        return
    parallel.run_split("er_cpu_activation", [parallel.part_addresses(x, ranges),
                                             parallel.part_addresses(y, ranges),
                                             parallel.part_lengths(ranges), act[0],
                                             address(act[1])], len(ranges))


def activate_in_place(y: np.ndarray, activation: str, params=()) -> bool:
    """y = act(y) for a float32 C-contiguous y in one native pass; False (y untouched) where
    the native kernels do not take it."""
    if y.dtype != np.float32 or not pass_pays(activation, y.size) or \
            not y.flags.c_contiguous or not y.flags.writeable or not available():
        return False
    act = activation_code(activation, params)
    if act is None:
        return False
    _split_activation(address(y), address(y), y.size, act)
    return True


def channel_affine(x: np.ndarray, factor: np.ndarray, shift: np.ndarray,
                   act: Optional[tuple] = None) -> np.ndarray:
    """x (N, C, ...) float32 times factor[c] plus shift[c] (float32, C values each) in one pass:
    numpy's x * factor + shift bit for bit; then `act` (activation_code's) in the same pass."""
    x = np.ascontiguousarray(x)
    y = np.empty(x.shape, np.float32)
    channels = x.shape[1]
    rows = x.shape[0] * channels
    code, params = act if act is not None else (0, None)
    library().er_cpu_channel_affine(address(x), address(y), rows, x.size // rows if rows else 0,
                                    address(factor), address(shift), channels, code,
                                    address(params))
    return y


def bias_activation(y: np.ndarray, bias: Optional[np.ndarray], act: tuple) -> np.ndarray:
    """y (N, M, ...) float32 C-contiguous, in place: act(y + bias[m]) (bias may be None).
    A batch of one splits its channels over threads (parts of whole rows, each reading its
    own channels' biases)."""
    channels = y.shape[1]
    rows = y.shape[0] * channels
    cols = y.size // rows if rows else 0
    ranges = parallel.value_ranges(y.size) if y.shape[0] == 1 and cols else [(0, y.size)]
    if len(ranges) == 1:
        library().er_cpu_bias_activation(address(y), rows, cols, address(bias), channels,
                                         act[0], address(act[1]))
        return y
    bounds = parallel.split(rows, len(ranges))
    ya, ba = address(y), address(bias)
    parallel.run_split("er_cpu_bias_activation",
                       [parallel.part_addresses(ya, bounds, 4 * cols), parallel.part_lengths(bounds),
                        cols, parallel.part_addresses(ba, bounds) if ba else None, channels,
                        act[0], address(act[1])], len(bounds))
    return y
