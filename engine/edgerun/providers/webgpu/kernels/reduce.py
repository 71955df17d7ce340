"""Reduce* over any axes, Softmax and LogSoftmax, LpNormalization, Hardmax, Einsum, DFT and
STFT, on reduce.wgsl."""
from __future__ import annotations

import math

from ....ir import dtypes
from .. import host_values
from .common import (as_gpu, as_gpu_any, count, host_ints, merge_dims, normalize_axis,
                     padded, row_dispatch, strided_copy, strides_of)
from .elementwise import binary
from .registry import Unsupported, gpu_op

# op -> (MAP over v, COMBINE over acc and v, FINAL over acc and count)
REDUCTIONS = {
    "ReduceSum": ("v", "acc + v", "acc"),
    "ReduceMean": ("v", "acc + v", "acc / count"),
    "ReduceMax": ("v", "max(acc, v)", "acc"),
    "ReduceMin": ("v", "min(acc, v)", "acc"),
    "ReduceProd": ("v", "acc * v", "acc"),
    "ReduceL1": ("abs(v)", "acc + v", "acc"),
    "ReduceL2": ("v * v", "acc + v", "sqrt(acc)"),
    "ReduceSumSquare": ("v * v", "acc + v", "acc"),
    "ReduceLogSum": ("v", "acc + v", "log(acc)"),
    # log(exp(acc) + exp(v)) without overflow; equal infinities would give inf - inf = NaN
    "ReduceLogSumExp": ("v", "select(max(acc, v) + log(1.0 + exp(-abs(acc - v))), acc, "
                        "acc == v && abs(v) > 3.4e38)",
                        "acc"),
}
AXES_INPUT_SINCE = {"ReduceSum": 13}          # the others take axes as an input from 18
# reductions whose result over one element is that element (noop_with_empty_axes returns x;
# the others keep their per-element part: |x|, x * x, log x)
ONE_ELEMENT_IDENTITY = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"}


def reduce(gpu, x, op, axes, keepdims=True):
    x = as_gpu(gpu, x)
    axes = sorted({normalize_axis(a, x.ndim) for a in axes})
    strides = strides_of(x.shape)
    kept = [i for i in range(x.ndim) if i not in axes]
    out_shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keepdims or i not in axes)
    r = count([x.shape[i] for i in axes])
    if r == 0:
        raise Unsupported("an empty reduction")
    kdims, (kstrides,) = merge_dims([x.shape[i] for i in kept], [strides[i] for i in kept])
    rdims, (rstrides,) = merge_dims([x.shape[i] for i in axes], [strides[i] for i in axes])
    out = gpu.empty(out_shape)
    mapped, combine, final = REDUCTIONS[op]
    outputs = count(out_shape)
    params = ([r, len(kdims)] + padded(kdims, fill=1) + padded(kstrides)
              + [len(rdims)] + padded(rdims, fill=1) + padded(rstrides) + [outputs])
    return row_dispatch(gpu, "reduce", out, [x], params, outputs, r,
                        {"MAP": mapped, "COMBINE": combine, "FINAL": final})


def _reduce_op(op):
    @gpu_op(op)
    def run(gpu, ctx, x, axes_input=None, axes=None, keepdims=1, noop_with_empty_axes=0):
        if ctx.opset >= AXES_INPUT_SINCE.get(op, 18):
            axes = host_ints(gpu, axes_input)
        if not axes and noop_with_empty_axes:
            if op in ONE_ELEMENT_IDENTITY:
                return as_gpu(gpu, x)
            return reduce(gpu, x, op, [], bool(keepdims))   # |x|, x * x, log(x) remain
        if not axes:
            axes = list(range(len(x.shape)))
        return reduce(gpu, x, op, axes, bool(keepdims))
    return run


for _op in REDUCTIONS:
    _reduce_op(_op)


@gpu_op("LpNormalization")
def lp_normalization(gpu, ctx, x, axis=-1, p=2):
    if int(p) not in (1, 2):
        raise ValueError(f"LpNormalization: p={p} (1 or 2)")
    norm = reduce(gpu, x, "ReduceL1" if int(p) == 1 else "ReduceL2", [axis])
    return binary(gpu, x, norm, "select(x / y, 0.0, y == 0.0)")      # 0 over a zero norm


def softmax(gpu, x, axis, opset, log):
    x = as_gpu(gpu, x)
    if x.size == 0:
        return gpu.empty(x.shape)
    axis = normalize_axis(axis, x.ndim)
    if opset < 13:             # the input is seen as 2-D [prod(:axis), prod(axis:)]
        length, inner = count(x.shape[axis:]), 1
    else:
        length, inner = x.shape[axis], count(x.shape[axis + 1:])
    out = gpu.empty(x.shape)
    rows = x.size // length
    return row_dispatch(gpu, "softmax", out, [x], [length, inner, rows], rows, length,
                        {"LOG": int(log)})


@gpu_op("Softmax")
def run_softmax(gpu, ctx, x, axis=None):
    return softmax(gpu, x, (1 if ctx.opset < 13 else -1) if axis is None else axis, ctx.opset,
                   False)


@gpu_op("LogSoftmax")
def run_log_softmax(gpu, ctx, x, axis=None):
    return softmax(gpu, x, (1 if ctx.opset < 13 else -1) if axis is None else axis, ctx.opset,
                   True)


# (op, select_last_index) -> the test that makes element v the new pick
ARG_TESTS = {("ArgMax", 0): "v > best", ("ArgMax", 1): "v >= best",
             ("ArgMin", 0): "v < best", ("ArgMin", 1): "v <= best"}


def _arg_op(op):
    @gpu_op(op)
    def run(gpu, ctx, x, axis=0, keepdims=1, select_last_index=0):
        x = as_gpu_any(gpu, x)
        if x.dtype == "bool":
            raise Unsupported(f"{op} over bool")
        axis = normalize_axis(axis, x.ndim)
        length = x.shape[axis]
        if length == 0:
            raise ValueError(f"{op} over an empty axis {axis} (shape {x.shape})")
        shape = list(x.shape)
        if keepdims:
            shape[axis] = 1
        else:
            del shape[axis]
        out = gpu.empty(shape, "int64")
        inner = count(x.shape[axis + 1:])
        return gpu.dispatch("reduce", "arg_extreme", out, [x], [length, inner],
                            x.size // length,
                            {"T": x.wgsl, "OT": "i32", "WRITE": "out[i] = i32(pick);",
                             "BETTER": ARG_TESTS[(op, int(select_last_index))]})
    return run


for _op in ("ArgMax", "ArgMin"):
    _arg_op(_op)

HARDMAX_WRITE = ("for (var j = 0u; j < L; j++) { out[base + j * inner] = "
                 "select(0.0, 1.0, j == pick); }")


@gpu_op("Hardmax")
def hardmax(gpu, ctx, x, axis=None):
    x = as_gpu(gpu, x)
    axis = normalize_axis((1 if ctx.opset < 13 else -1) if axis is None else axis, x.ndim)
    out = gpu.empty(x.shape)
    if x.size == 0:
        return out
    if ctx.opset < 13:          # the input is seen as 2-D [prod(:axis), prod(axis:)]
        length, inner = count(x.shape[axis:]), 1
    else:
        length, inner = x.shape[axis], count(x.shape[axis + 1:])
    return gpu.dispatch("reduce", "arg_extreme", out, [x], [length, inner], x.size // length,
                        {"T": "f32", "OT": "f32", "WRITE": HARDMAX_WRITE,
                         "BETTER": ARG_TESTS[("ArgMax", 0)]})


def _einsum_terms(equation: str, shapes: list) -> tuple:
    """(input label lists, output labels) of an Einsum equation, "..." expanded to one label
    per broadcast dim (digits, as letters are the equation's own)."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"Einsum: {equation!r} names {len(terms)} operands, {len(shapes)} given")
    ellipsis = max((len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes)
                    if "..." in t), default=0)
    dots = [str(k) for k in range(ellipsis)]
    labels = []
    for t, s in zip(terms, shapes):
        head, _, tail = t.partition("...")
        own = len(s) - len(head) - len(tail) if "..." in t else 0
        labels.append(list(head) + dots[ellipsis - own:] + list(tail))
        if len(labels[-1]) != len(s):
            raise ValueError(f"Einsum: term {t!r} for an operand of rank {len(s)}")
    if arrow:
        head, _, tail = rhs.partition("...")
        out = list(head) + (dots if "..." in rhs else []) + list(tail)
    else:
        seen = [c for t in labels for c in t if not c.isdigit()]
        out = dots + sorted(c for c in set(seen) if seen.count(c) == 1)
    return labels, out


@gpu_op("Einsum")
def einsum(gpu, ctx, *operands, equation=""):
    equation = equation.decode() if isinstance(equation, bytes) else equation
    tensors = [as_gpu(gpu, t) for t in operands]
    if len(tensors) not in (1, 2):
        raise Unsupported(f"Einsum of {len(tensors)} operands (the kernel takes 1 or 2)")
    labels, out_labels = _einsum_terms(equation, [t.shape for t in tensors])
    sizes = {}
    for t, ls in zip(tensors, labels):
        for label, d in zip(ls, t.shape):
            if sizes.get(label, 1) not in (1, d) and d != 1:
                raise ValueError(f"Einsum: label {label!r} is {sizes[label]} and {d}")
            sizes[label] = max(sizes.get(label, 1), d)
    summed = [c for c in sizes if c not in out_labels]
    if len(out_labels) > 6 or len(summed) > 6:
        raise Unsupported(f"Einsum over {len(out_labels)} output and {len(summed)} summed labels")

    def strides(t, ls, wanted):
        own = strides_of(t.shape)
        return [sum(s for label, s, d in zip(ls, own, t.shape) if label == w and d != 1)
                for w in wanted]

    out_shape = [sizes[c] for c in out_labels]
    out = gpu.empty(out_shape)
    if count(out_shape) == 0:
        return out
    b = tensors[1] if len(tensors) == 2 else tensors[0]
    b_labels = labels[1] if len(tensors) == 2 else []
    params = ([len(out_labels)] + padded(out_shape, fill=1) + [len(summed)]
              + padded([sizes[c] for c in summed], fill=1)
              + padded(strides(tensors[0], labels[0], out_labels))
              + padded(strides(tensors[0], labels[0], summed))
              + padded(strides(b, b_labels, out_labels)) + padded(strides(b, b_labels, summed))
              + [count([sizes[c] for c in summed])])
    return gpu.dispatch("reduce", "einsum", out, [tensors[0], b], params, count(out_shape),
                        {"TWO": int(len(tensors) == 2)})


def _twiddles(length: int):
    """cos(2 pi m / L) for m < L, then sin(...), computed in double precision."""
    angles = [2 * math.pi * m / length for m in range(length)]
    return host_values.make(dtypes.FLOAT, (2 * length,),
                            [math.cos(a) for a in angles] + [math.sin(a) for a in angles])


def dft(gpu, x, length, axis, inverse, onesided):
    """DFT of float32 x (..., 1 or 2) along `axis` (not the last): see reduce.wgsl's dft."""
    x = as_gpu(gpu, x)
    rank = x.ndim
    if not (0 <= axis <= rank - 2 or -rank <= axis <= -2) or x.shape[-1] not in (1, 2):
        raise ValueError(f"DFT: axis {axis} of a {x.shape} input")
    axis %= rank
    n = x.shape[axis]
    if length is None:
        length = 2 * (n - 1) if inverse and onesided else n
    if length < 1:
        raise ValueError(f"DFT: dft_length {length}")
    if inverse and onesided:
        mode, k, parts = 2, length, 1
    else:
        mode, parts = int(bool(inverse)), 2
        k = length // 2 + 1 if onesided else length
    shape = list(x.shape)
    shape[axis], shape[-1] = k, parts
    out = gpu.empty(shape)
    if out.size == 0:
        return out
    params = [n, count(x.shape[axis + 1:-1]), x.shape[-1], length, k, parts, mode]
    twiddle = gpu.constant(("dft twiddles", length), lambda: _twiddles(length))
    return gpu.dispatch("reduce", "dft", out, [x, twiddle], params, out.size)


@gpu_op("DFT")
def run_dft(gpu, ctx, x, dft_length=None, axis=None, inverse=0, onesided=0):
    if ctx.opset < 20:                   # the axis is an attribute (default 1)
        axis_value = 1 if axis is None else axis
    else:
        axis_value = -2 if axis is None else host_ints(gpu, axis)[0]
    length = None if dft_length is None else host_ints(gpu, dft_length)[0]
    return dft(gpu, x, length, int(axis_value), inverse, onesided)


@gpu_op("STFT")
def stft(gpu, ctx, signal, frame_step, window=None, frame_length=None, onesided=1):
    """Frames of the signal (one strided copy), windowed, then a DFT along each frame."""
    signal = as_gpu(gpu, signal)
    if signal.ndim != 3:
        raise ValueError(f"STFT signal must be [batch, length, 1 or 2], got {signal.shape}")
    batch, length, parts = signal.shape
    step = host_ints(gpu, frame_step)[0]
    if frame_length is not None:
        size = host_ints(gpu, frame_length)[0]
    else:
        size = length if window is None else count(window.shape)
    if step < 1 or not 1 <= size <= length:
        raise ValueError(f"STFT: frame_step {step}, frame_length {size}, signal {length}")
    frames = 1 + (length - size) // step
    dims = [batch, frames, size, parts]
    framed = strided_copy(gpu, gpu.empty(dims), signal, dims,
                          [length * parts, step * parts, parts, 1], strides_of(dims))
    if window is not None:
        framed = binary(gpu, framed, as_gpu(gpu, window).view((size, 1)), "x * y")
    return dft(gpu, framed, size, 2, 0, onesided)
