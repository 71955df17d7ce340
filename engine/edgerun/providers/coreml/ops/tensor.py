"""Shape and data-movement operators -> MIL reshape, transpose, concat, gather, slice_by_index,
squeeze, expand_dims, cast, reductions; constants and shapes fold to numpy while lowering.

Shapes are static here, so every shape-like input (Reshape's shape, Slice's starts, axes)
must be a constant while lowering, and is resolved to plain non-negative integers before it
reaches MIL.
"""
from __future__ import annotations

import numpy as np

from ..lowering import attr, lowers

# ONNX TensorProto element type -> (MIL dtype, numpy dtype ONNX gives the result)
CAST_TARGETS = {1: ("fp32", np.float32), 10: ("fp16", np.float16), 6: ("int32", np.int32),
                7: ("int32", np.int64), 9: ("bool", np.bool_)}


def _cast_check(node, opset):
    to = attr(node, "to")
    if to not in CAST_TARGETS:
        return f"Cast to element type {to}; ML Programs hold float32, float16, int32/64, bool"
    return ""


@lowers("Cast", mil=("cast",), check=_cast_check)
def cast(ctx, node):
    mil, dtype = CAST_TARGETS[attr(node, "to")]
    ctx.onnx_dtypes[node.outputs[0]] = np.dtype(dtype)
    value = ctx.const(node.inputs[0])
    if value is not None:
        return [value.astype(dtype)]
    if ctx.mil_dtype(node.inputs[0]) == mil:
        return [ctx.mb.identity(x=ctx.var(node.inputs[0]), name=ctx.out_name())]
    return [ctx.mb.cast(x=ctx.var(node.inputs[0]), dtype=mil, name=ctx.out_name())]


@lowers("Identity", mil=("identity",))
def identity(ctx, node):
    value = ctx.const(node.inputs[0])
    if value is not None:
        return [value]
    return [ctx.mb.identity(x=ctx.var(node.inputs[0]), name=ctx.out_name())]


def _dropout_check(node, opset):
    if len(node.outputs) > 1 and node.outputs[1]:
        return "the mask output is requested"
    if opset >= 12 and len(node.inputs) > 2 and node.inputs[2]:
        return "training_mode is an input (only inference Dropout lowers)"
    return ""


lowers("Dropout", mil=("identity",), check=_dropout_check)(identity)


def _constant_check(node, opset):
    names = set(node.attributes)
    if names & {"value", "value_float", "value_floats", "value_int", "value_ints"}:
        return ""
    return f"Constant with {sorted(names)} (strings and sparse values have no MIL form)"


@lowers("Constant", mil=("const",), check=_constant_check)
def constant(ctx, node):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in node.attributes:
            value = attr(node, key)
            if key == "value":
                return [np.asarray(value)]
            dtype = np.float32 if "float" in key else np.int64
            return [np.asarray(value, dtype)]
    raise ctx.error(f"Constant with attribute {sorted(node.attributes)}; only numeric values "
                    f"lower")


@lowers("ConstantOfShape", mil=("const",))
def constant_of_shape(ctx, node):
    shape = ctx.require_const(node.inputs[0], "shape")
    value = attr(node, "value")
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return [np.full([int(d) for d in shape.reshape(-1)], fill[0], dtype=fill.dtype)]


@lowers("Shape", mil=("const",))
def shape(ctx, node):
    dims = np.asarray(ctx.shape(node.inputs[0]), np.int64)
    start, end = attr(node, "start", 0), attr(node, "end", None)
    return [dims[start:end]]


# ---- reshaping --------------------------------------------------------------------------

def _resolved_shape(ctx, node, requested: list, source: tuple) -> list:
    allow_zero = int(attr(node, "allowzero", 0))
    dims = [source[i] if d == 0 and not allow_zero else int(d) for i, d in enumerate(requested)]
    if dims.count(-1) > 1:
        raise ctx.error(f"shape {requested} has more than one -1")
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        total = int(np.prod(source, dtype=np.int64))
        dims[dims.index(-1)] = total // known if known else 0
    if int(np.prod(dims, dtype=np.int64)) != int(np.prod(source, dtype=np.int64)):
        raise ctx.error(f"cannot reshape {list(source)} to {requested}")
    return dims


def _reshape_to(ctx, node, dims: list):
    value = ctx.const(node.inputs[0])
    if value is not None:
        return value.reshape(dims)
    return ctx.mb.reshape(x=ctx.var(node.inputs[0]), shape=dims, name=ctx.out_name())


@lowers("Reshape", mil=("reshape",))
def reshape(ctx, node):
    if ctx.opset < 5:
        requested = list(attr(node, "shape"))
    else:
        requested = ctx.require_const(node.inputs[1], "shape").reshape(-1).tolist()
    return [_reshape_to(ctx, node, _resolved_shape(ctx, node, requested,
                                                   ctx.shape(node.inputs[0])))]


@lowers("Flatten", mil=("reshape",))
def flatten(ctx, node):
    source = ctx.shape(node.inputs[0])
    axis = int(attr(node, "axis", 1)) % (len(source) + 1)
    rows = int(np.prod(source[:axis], dtype=np.int64))
    return [_reshape_to(ctx, node, [rows, int(np.prod(source[axis:], dtype=np.int64))])]


@lowers("Transpose", mil=("transpose",))
def transpose(ctx, node):
    rank = ctx.rank(node.inputs[0])
    perm = [int(p) for p in attr(node, "perm", None) or range(rank - 1, -1, -1)]
    return [ctx.mb.transpose(x=ctx.var(node.inputs[0]), perm=perm, name=ctx.out_name())]


@lowers("Concat", mil=("concat",))
def concat(ctx, node):
    names = [n for n in node.inputs if n]
    axis = int(attr(node, "axis")) % ctx.rank(names[0])
    return [ctx.mb.concat(values=[ctx.var(n) for n in names], axis=axis, name=ctx.out_name())]


def _axes(ctx, node, input_index: int, attr_until: int):
    """Axes from the attribute (opset < attr_until) or the optional input, else None."""
    if ctx.opset < attr_until:
        axes = attr(node, "axes", None)
        return None if axes is None else [int(a) for a in axes]
    if len(node.inputs) > input_index and node.inputs[input_index]:
        return ctx.require_const(node.inputs[input_index], "axes").reshape(-1).tolist()
    return None


@lowers("Squeeze", mil=("squeeze",))
def squeeze(ctx, node):
    shape = ctx.shape(node.inputs[0])
    axes = _axes(ctx, node, 1, 13)
    axes = [i for i, d in enumerate(shape) if d == 1] if axes is None else \
        sorted(int(a) % len(shape) for a in axes)
    if len(axes) == len(shape):
        raise ctx.error(f"squeezing every axis of {list(shape)} gives a rank-0 tensor")
    return [ctx.mb.squeeze(x=ctx.var(node.inputs[0]), axes=axes, name=ctx.out_name())]


@lowers("Unsqueeze", mil=("expand_dims",))
def unsqueeze(ctx, node):
    rank = ctx.rank(node.inputs[0])
    axes = _axes(ctx, node, 1, 13)
    out_rank = rank + len(axes)
    axes = sorted(int(a) % out_rank for a in axes)
    value = ctx.const(node.inputs[0])
    if value is not None:
        return [np.expand_dims(value, tuple(axes))]
    return [ctx.mb.expand_dims(x=ctx.var(node.inputs[0]), axes=axes, name=ctx.out_name())]


@lowers("Gather", mil=("gather",))
def gather(ctx, node):
    data, indices = node.inputs[0], node.inputs[1]
    shape = ctx.shape(data)
    axis = int(attr(node, "axis", 0)) % len(shape)
    index_values = ctx.const(indices)
    if index_values is not None:      # negative indices count from the end, as in ONNX
        index_values = (index_values.astype(np.int64) % shape[axis]).astype(np.int32)
        index = index_values if index_values.ndim else index_values.reshape(())
        return [ctx.mb.gather(x=ctx.var(data), indices=index, axis=axis, name=ctx.out_name())]
    return [ctx.mb.gather(x=ctx.var(data), indices=ctx.var(indices), axis=axis,
                          name=ctx.out_name())]


@lowers("Slice", mil=("slice_by_index",))
def slice_(ctx, node):
    shape = ctx.shape(node.inputs[0])
    rank = len(shape)
    if ctx.opset < 10:
        starts, ends = attr(node, "starts"), attr(node, "ends")
        axes, steps = attr(node, "axes", None), None
    else:
        starts = ctx.require_const(node.inputs[1], "starts").reshape(-1).tolist()
        ends = ctx.require_const(node.inputs[2], "ends").reshape(-1).tolist()
        axes = (ctx.require_const(node.inputs[3], "axes").reshape(-1).tolist()
                if len(node.inputs) > 3 and node.inputs[3] else None)
        steps = (ctx.require_const(node.inputs[4], "steps").reshape(-1).tolist()
                 if len(node.inputs) > 4 and node.inputs[4] else None)
    axes = list(range(len(starts))) if axes is None else [int(a) % rank for a in axes]
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
    begin, end, stride = [0] * rank, list(shape), [1] * rank
    end_mask = [False] * rank
    for axis, s, e, step in zip(axes, starts, ends, steps):
        dim = shape[axis]
        b, e = _clamp(int(s), dim, step, start=True), _clamp(int(e), dim, step, start=False)
        begin[axis], end[axis], stride[axis] = b, e, step
        end_mask[axis] = step < 0 and e < 0          # runs down through index 0
    return [ctx.mb.slice_by_index(x=ctx.var(node.inputs[0]), begin=begin, end=end,
                                  stride=stride, end_mask=end_mask, name=ctx.out_name())]


def _clamp(index: int, dim: int, step: int, start: bool) -> int:
    """ONNX Slice clamping: negative counts from the end; positive steps clamp to [0, dim],
    negative steps to [-1, dim - 1] (-1 meaning 'through index 0')."""
    if index < 0:
        index += dim
    if step > 0:
        return min(max(index, 0), dim)
    return min(max(index, -1), dim - 1)


# ---- reductions -------------------------------------------------------------------------

REDUCTIONS = {"ReduceMean": ("reduce_mean", 18), "ReduceSum": ("reduce_sum", 13),
              "ReduceMax": ("reduce_max", 18), "ReduceMin": ("reduce_min", 18),
              "ReduceProd": ("reduce_prod", 18), "ReduceL2": ("reduce_l2_norm", 18),
              "ReduceSumSquare": ("reduce_sum_square", 18),
              "ReduceLogSumExp": ("reduce_log_sum_exp", 18)}


def _reduce(mil_op: str, axes_input_since: int):
    def lower(ctx, node):
        x = node.inputs[0]
        rank = ctx.rank(x)
        axes = _axes(ctx, node, 1, axes_input_since)
        if not axes:
            if attr(node, "noop_with_empty_axes", 0):
                return [ctx.mb.identity(x=ctx.var(x), name=ctx.out_name())]
            axes = list(range(rank))
        keep = bool(attr(node, "keepdims", 1))
        if not keep and len(set(a % rank for a in axes)) == rank:
            raise ctx.error("reducing every axis without keepdims gives a rank-0 tensor")
        return [getattr(ctx.mb, mil_op)(x=ctx.var(x), axes=sorted(a % rank for a in axes),
                                        keep_dims=keep, name=ctx.out_name())]
    return lower


for _op, (_mil, _since) in REDUCTIONS.items():
    lowers(_op, mil=(_mil,))(_reduce(_mil, _since))


def _arg_check(node, opset):
    return "select_last_index=1" if attr(node, "select_last_index", 0) else ""


def _arg(mil_op: str):
    def lower(ctx, node):
        x = node.inputs[0]
        axis = int(attr(node, "axis", 0)) % ctx.rank(x)
        keep = bool(attr(node, "keepdims", 1))
        if not keep and ctx.rank(x) == 1:
            raise ctx.error("ArgMax/ArgMin of a 1-D tensor without keepdims is rank 0")
        ctx.onnx_dtypes[node.outputs[0]] = np.dtype(np.int64)
        return [getattr(ctx.mb, mil_op)(x=ctx.var(x), axis=axis, keep_dims=keep,
                                        name=ctx.out_name())]
    return lower


lowers("ArgMax", mil=("reduce_argmax",), check=_arg_check)(_arg("reduce_argmax"))
lowers("ArgMin", mil=("reduce_argmin",), check=_arg_check)(_arg("reduce_argmin"))
