"""Sequence and optional operators on the host: a sequence is a Python list of WasmTensors,
an empty optional is None (as the CPU provider has them). Kernels build new lists and never
mutate the one they receive. Elements that arrive as host values are copied in."""
from __future__ import annotations

from ....ir import dtypes
from . import operator
from .common import host_values, normalize_axis
from .tensor import bind_concat, split_parts
from ..device import WasmTensor


def _tensors(dev, sequence) -> list:
    if not isinstance(sequence, (list, tuple)):
        raise TypeError(f"expected a sequence, got {type(sequence).__name__}")
    return [v if isinstance(v, WasmTensor) else dev.upload(v) for v in sequence]


def _position(dev, position, length: int, allow_end: bool) -> int:
    pos = int(dev.ints(position)[0])
    high = length if allow_end else length - 1
    if not -length <= pos <= high:
        raise ValueError(f"position {pos} is out of range [{-length}, {high}] for a sequence "
                         f"of length {length}")
    return pos + length if pos < 0 else pos


@operator("SequenceConstruct")
@host_values
def bind_sequence_construct(dev, node, opset):
    return lambda ctx, *xs, **_: _tensors(dev, xs)


@operator("SequenceEmpty")
@host_values
def bind_sequence_empty(dev, node, opset):
    return lambda ctx, **_: []


@operator("SequenceInsert")
@host_values
def bind_sequence_insert(dev, node, opset):
    def run(ctx, sequence, tensor, position=None, **_):
        result = _tensors(dev, sequence)
        tensor = dev.upload(tensor)
        if position is None:
            result.append(tensor)
        else:
            result.insert(_position(dev, position, len(result), True), tensor)
        return result
    return run


@operator("SequenceAt")
@host_values
def bind_sequence_at(dev, node, opset):
    def run(ctx, sequence, position, **_):
        items = _tensors(dev, sequence)
        return items[_position(dev, position, len(items), False)]
    return run


@operator("SequenceErase")
@host_values
def bind_sequence_erase(dev, node, opset):
    def run(ctx, sequence, position=None, **_):
        items = _tensors(dev, sequence)
        if not items:
            raise ValueError("SequenceErase on an empty sequence")
        index = len(items) - 1 if position is None else \
            _position(dev, position, len(items), False)
        return items[:index] + items[index + 1:]
    return run


@operator("SequenceLength")
@host_values
def bind_sequence_length(dev, node, opset):
    return lambda ctx, sequence, **_: dev.from_ints([len(sequence)], (), dtypes.INT64)


@operator("SplitToSequence")
@host_values
def bind_split_to_sequence(dev, node, opset):
    axis_attr, keepdims = int(node.attr("axis", 0)), int(node.attr("keepdims", 1))

    def run(ctx, x, split=None, **_):
        x = dev.upload(x)
        axis = normalize_axis(axis_attr, len(x.shape))
        dim = x.shape[axis]
        if split is None:
            parts = split_parts(dev, x, axis, [1] * dim)
            if not keepdims:
                parts = [p.view(p.shape[:axis] + p.shape[axis + 1:]) for p in parts]
            return parts
        values = list(dev.ints(split))
        if len(split.shape) == 0:
            if values[0] <= 0:
                raise ValueError(f"SplitToSequence: split must be positive, got {values[0]}")
            sizes = [min(values[0], dim - start) for start in range(0, dim, values[0])]
        else:
            sizes = values
            if sum(sizes) != dim:
                raise ValueError(f"SplitToSequence: split lengths {sizes} sum to {sum(sizes)}, "
                                 f"expected the axis size {dim}")
        return split_parts(dev, x, axis, sizes)
    return run


@operator("ConcatFromSequence")
@host_values
def bind_concat_from_sequence(dev, node, opset):
    axis_attr, new_axis = int(node.attr("axis")), int(node.attr("new_axis", 0))
    concat = bind_concat(dev, node, opset)

    def run(ctx, sequence, **_):
        items = _tensors(dev, sequence)
        if not items:
            raise ValueError("ConcatFromSequence needs at least one tensor, got an empty "
                             "sequence")
        if new_axis:
            axis = normalize_axis(axis_attr, len(items[0].shape) + 1)
            items = [t.view(t.shape[:axis] + (1,) + t.shape[axis:]) for t in items]
        return concat(ctx, *items)
    return run


@operator("Optional")
@host_values
def bind_optional(dev, node, opset):
    return lambda ctx, value=None, **_: value


@operator("OptionalHasElement")
@host_values
def bind_optional_has_element(dev, node, opset):
    return lambda ctx, value=None, **_: dev.from_ints([int(value is not None)], (), dtypes.BOOL)


@operator("OptionalGetElement")
@host_values
def bind_optional_get_element(dev, node, opset):
    def run(ctx, value=None, **_):
        if value is None:
            raise ValueError("OptionalGetElement on an empty optional")
        return value
    return run
