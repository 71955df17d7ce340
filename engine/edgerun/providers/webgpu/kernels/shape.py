"""Operators that only change metadata (views sharing the buffer), and shape arithmetic.

Shape and Size read the GPU tensor's shape, never its data. Constant, ConstantOfShape and
Range are `host_only`: their inputs are host integers and their results stay on the host until a GPU
kernel needs them (the CPU kernel computes them where numpy exists; without numpy the
functions here do).
"""
from __future__ import annotations

import math

from ....ir import dtypes
from .. import host_values
from ..host_values import FORMATS
from ..gpu import CODES, GPU_TYPES
from ..memory import GpuTensor
from .common import cast_to, count, host_floats_or_ints, host_ints, normalize_axis
from .registry import Unsupported, gpu_op


def _view(x, shape):
    """x under another shape: a GPU view, or (shape arithmetic without numpy) a host one."""
    if isinstance(x, GpuTensor):
        return x.view(shape)
    return host_values.reshaped(x, tuple(shape))


@gpu_op("Reshape", narrow=True)
def reshape(gpu, ctx, x, shape, allowzero=0):
    size = count(x.shape)
    dims = host_ints(gpu, shape)
    out = [x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(dims)]
    if -1 in out:
        known = count(d for d in out if d != -1)
        out[out.index(-1)] = size // known if known else 0
    if count(out) != size:
        raise ValueError(f"Reshape: cannot reshape {x.shape} ({size} elements) to {dims}")
    return _view(x, out)


@gpu_op("Flatten", narrow=True)
def flatten(gpu, ctx, x, axis=1):
    axis = axis + len(x.shape) if axis < 0 else axis
    return _view(x, (count(x.shape[:axis]), count(x.shape[axis:])))


@gpu_op("Squeeze", narrow=True)
def squeeze(gpu, ctx, x, axes_input=None, axes=None):
    if ctx.opset >= 13:
        axes = host_ints(gpu, axes_input)
    if axes is None:
        return _view(x, tuple(d for d in x.shape if d != 1))
    drop = {normalize_axis(a, len(x.shape)) for a in axes}
    return _view(x, tuple(d for i, d in enumerate(x.shape) if i not in drop))


@gpu_op("Unsqueeze", narrow=True)
def unsqueeze(gpu, ctx, x, axes_input=None, axes=None):
    if ctx.opset >= 13:
        axes = host_ints(gpu, axes_input)
    rank = len(x.shape) + len(axes)
    where = sorted(normalize_axis(a, rank) for a in axes)
    shape = list(x.shape)
    for a in where:
        shape.insert(a, 1)
    return _view(x, tuple(shape))


@gpu_op("Identity", narrow=True)
def identity(gpu, ctx, x):
    return x


@gpu_op("Dropout", narrow=True)
def dropout(gpu, ctx, x, ratio=None, training_mode=None, **_):
    """Inference Dropout passes `x` through; its mask (when asked for) is all ones, on the
    host: bool from opset 10, x's type before."""
    if training_mode is not None and bool(host_floats_or_ints(gpu, training_mode)[0]):
        raise Unsupported("Dropout in training mode")
    if len(ctx.node.outputs) < 2 or not ctx.node.outputs[1]:
        return x
    mask_type = dtypes.BOOL if ctx.opset >= 10 else dtypes.FLOAT
    return x, host_values.filled(mask_type, x.shape, 1)


def _cast_problem(to: int) -> str:
    return "" if to in GPU_TYPES and to != dtypes.UINT32 else (
        f"Cast to {dtypes.type_string(to)} (GPU tensors are {', '.join(sorted(CODES))}; "
        f"casting to another type would read them back)")


def check_cast(node, opset) -> str:
    return _cast_problem(node.attr("to", 0))


def check_cast_like(node, opset, types) -> str:
    target = types.get(node.inputs[1]) if len(node.inputs) > 1 else None
    if target is None or target.kind != "tensor" or not target.elem_type:
        return f"CastLike to the unknown type of '{node.inputs[1]}' (shape inference found none)"
    return _cast_problem(target.elem_type)


@gpu_op("Cast", check=check_cast, narrow=True)
def cast(gpu, ctx, x, to, saturate=1, round_mode="up"):
    if isinstance(x, GpuTensor):
        return cast_to(gpu, x, GPU_TYPES[to])
    return _host_cast(x, to)         # shape arithmetic where numpy is absent


@gpu_op("CastLike", check=check_cast_like, typed=True, narrow=True)
def cast_like(gpu, ctx, x, target, saturate=1, round_mode="up"):
    to = CODES[target.dtype] if isinstance(target, GpuTensor) else host_values.elem_type(target)
    if to not in GPU_TYPES or to == dtypes.UINT32:
        raise Unsupported(_cast_problem(to))
    return cast(gpu, ctx, x, to)


def _host_cast(x, to: int):
    source = host_values.elem_type(x)
    if host_values.np is None and source not in host_values.FORMATS and \
            source != dtypes.FLOAT16:
        raise Unsupported(f"a {dtypes.type_string(source)} operand (its values cannot be read "
                          f"without numpy)")
    items = host_values.values(x)
    if to in (dtypes.FLOAT, dtypes.FLOAT16):
        items = [float(v) for v in items]
    elif to == dtypes.BOOL:
        items = [1 if v else 0 for v in items]
    else:
        items = [int(v) for v in items]     # Python's int() truncates toward zero, as Cast
        bits = dtypes.BY_CODE[to].bits
        if bits < 32:                       # wrapped to the width, as numpy's astype
            low = -(1 << (bits - 1)) if to in (dtypes.INT8, dtypes.INT16) else 0
            items = [(v - low) % (1 << bits) + low for v in items]
    return host_values.make(to, host_values.shape(x), items)


@gpu_op("Shape", narrow=True)
def shape_of(gpu, ctx, x, start=0, end=None):
    dims = list(x.shape)[start:end] if end is not None else list(x.shape)[start:]
    return host_values.make(dtypes.INT64, (len(dims),), dims)


@gpu_op("Size", narrow=True)
def size_of(gpu, ctx, x):
    return host_values.make(dtypes.INT64, (), [count(x.shape)])


@gpu_op("Constant", host_only=True)
def constant(gpu, ctx, value=None, value_float=None, value_floats=None, value_int=None,
             value_ints=None, **other):
    if value is not None:
        return value
    for items, code, scalar in ((value_float, dtypes.FLOAT, True),
                                (value_floats, dtypes.FLOAT, False),
                                (value_int, dtypes.INT64, True),
                                (value_ints, dtypes.INT64, False)):
        if items is not None:
            return host_values.make(code, () if scalar else (len(items),),
                                    [items] if scalar else list(items))
    raise Unsupported(f"a Constant given as {', '.join(sorted(other))}")


@gpu_op("ConstantOfShape", host_only=True)
def constant_of_shape(gpu, ctx, shape, value=None):
    if value is None:
        return host_values.filled(dtypes.FLOAT, host_ints(gpu, shape), 0.0)
    return host_values.filled(host_values.elem_type(value), host_ints(gpu, shape),
                              host_values.values(value)[0])


@gpu_op("Range", host_only=True)
def range_of(gpu, ctx, start, limit, delta):
    first, stop, step = (host_floats_or_ints(gpu, v)[0] for v in (start, limit, delta))
    n = max(int(math.ceil((stop - first) / step)), 0)
    return host_values.make(host_values.elem_type(start), (n,),
                            [first + i * step for i in range(n)])


# window -> its terms (a0, a1, a2): a0 - a1 cos(phase) + a2 cos(2 phase)
WINDOWS = {"HannWindow": (0.5, 0.5, 0.0), "HammingWindow": (25 / 46, 21 / 46, 0.0),
           "BlackmanWindow": (0.42, 0.5, 0.08)}


def _check_window(node, opset) -> str:
    code = node.attr("output_datatype", dtypes.FLOAT)
    return "" if code in FORMATS else f"a window of {dtypes.type_string(code)}"


def _window_op(op):
    @gpu_op(op, host_only=True, check=_check_window)
    def run(gpu, ctx, size, output_datatype=dtypes.FLOAT, periodic=1):
        """A window of `size` samples (a host value: shape-sized, computed once per run)."""
        n = int(host_floats_or_ints(gpu, size)[0])
        if n < 0:
            raise ValueError(f"{op}: size {n}")
        period = n if periodic else n - 1
        a0, a1, a2 = WINDOWS[op]
        phases = [2 * math.pi * i / period if period > 0 else 0.0 for i in range(n)]
        values = [a0 - a1 * math.cos(p) + a2 * math.cos(2 * p) for p in phases]
        if output_datatype in host_values.INTEGER_TYPES:
            values = [int(v) for v in values]          # truncated, as numpy's astype
        return host_values.make(output_datatype, (n,), values)
    return run


for _op in WINDOWS:
    _window_op(_op)
