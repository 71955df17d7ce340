"""Sequences and optionals: element types travel inside seq(...) / optional(...)."""
from __future__ import annotations

from ...ir import dtypes
from .. import symbolic
from ..context import optional, sequence, tensor
from ..registry import infer
from ._common import scalar


def merge_types(a, b):
    """One type describing values of type a or b (a sequence's items, loop iterations)."""
    if a is None or b is None:
        return None
    if a.kind != b.kind:
        return None
    if a.kind in ("sequence", "optional"):
        return type(a)(kind=a.kind, elem=merge_types(a.elem, b.elem))
    if a.kind != "tensor":
        return a
    elem = a.elem_type if a.elem_type == b.elem_type else 0
    return tensor(elem, symbolic.merge_shapes(a.shape, b.shape))


def element_of(t):
    return t.elem if t is not None and t.kind in ("sequence", "optional") else None


@infer("SequenceConstruct")
def sequence_construct(ctx):
    item = ctx.type(0)
    for i in range(1, ctx.num_inputs):
        item = merge_types(item, ctx.type(i))
    return [sequence(item)]


@infer("SequenceEmpty")
def sequence_empty(ctx):
    ctx.set_value(0, [])              # known to be empty: SequenceInsert uses that
    return [sequence(tensor(ctx.attr("dtype", dtypes.FLOAT), None))]


@infer("SequenceAt")
def sequence_at(ctx):
    return [element_of(ctx.type(0))]


@infer("SequenceInsert")
def sequence_insert(ctx):
    seq = ctx.type(0)
    item = element_of(seq)
    if ctx.value(0) == [] or item is None:
        return [sequence(ctx.type(1))]       # the first item sets the item type
    return [sequence(merge_types(item, ctx.type(1)))]


@infer("SequenceErase")
def sequence_erase(ctx):
    return [ctx.type(0)]


@infer("SequenceLength")
def sequence_length(ctx):
    return [scalar(dtypes.INT64)]


@infer("SplitToSequence")
def split_to_sequence(ctx):
    s = ctx.shape(0)
    if s is None:
        return [sequence(tensor(ctx.elem(0), None))]
    axis = ctx.axis(ctx.attr("axis", 0), len(s))
    if not ctx.has(1):
        if ctx.attr("keepdims", 1):
            return [sequence(tensor(ctx.elem(0), tuple(1 if i == axis else d
                                                       for i, d in enumerate(s))))]
        return [sequence(tensor(ctx.elem(0), tuple(d for i, d in enumerate(s) if i != axis)))]
    split = ctx.ints(1)
    dim = None
    if split is not None:
        if ctx.rank(1) == 0:
            n = split[0]
            dim = n if symbolic.is_int(s[axis]) and s[axis] % n == 0 else None
        elif len(set(split)) == 1:
            dim = split[0]
    out = list(s)
    out[axis] = dim
    return [sequence(tensor(ctx.elem(0), tuple(out)))]


@infer("ConcatFromSequence")
def concat_from_sequence(ctx):
    item = element_of(ctx.type(0))
    if item is None or item.shape is None:
        return [tensor(item.elem_type if item else 0, None)]
    s = list(item.shape)
    new_axis = ctx.attr("new_axis", 0)
    axis = ctx.axis(ctx.attr("axis"), len(s) + (1 if new_axis else 0))
    if new_axis:
        s.insert(axis, None)
    else:
        s[axis] = None
    return [tensor(item.elem_type, tuple(s))]


@infer("Optional")
def optional_(ctx):
    if ctx.has_attr("type"):
        return [optional(ctx.node.attr("type"))]
    return [optional(ctx.type(0))]


@infer("OptionalGetElement")
def optional_get_element(ctx):
    t = ctx.type(0)
    if t is not None and t.kind == "optional":
        return [t.elem]
    return [t]


@infer("OptionalHasElement")
def optional_has_element(ctx):
    return [scalar(dtypes.BOOL)]



