"""Pad (constant, reflect, edge, wrap; negative pads crop), from strided copies only.

The input (cropped where pads are negative) is copied into the middle of the output. For
constant mode the output is filled first; for the other modes each padded axis in turn copies
from the output itself: reflect and edge read the interior with a step of -1 or 0, wrap with
a step of 1. Axes before the current one are already padded, so their full extent is copied.
"""
from __future__ import annotations

from array import array

from ....ir import dtypes
from . import operator
from .conv import _text
from .tensor import copy_strided
from .common import contiguous_strides, normalize_axis
from ..device import INT_FORMATS

MODES = ("constant", "reflect", "edge", "wrap")
_FORMATS = {dtypes.FLOAT: "f", dtypes.DOUBLE: "d", **INT_FORMATS}


def check_pad(node, opset) -> str:
    mode = _text(node.attr("mode", b"constant"))
    return "" if mode in MODES else f"Pad mode={mode!r}"


def element_bytes(value: float, elem_type: int) -> bytes:
    """One element of `elem_type` holding `value` (the pad value of the attribute form)."""
    fmt = _FORMATS.get(elem_type)
    if fmt is None:
        raise TypeError(f"Pad value for {dtypes.type_string(elem_type)} is not supported")
    return array(fmt, [value if fmt in "fd" else int(value)]).tobytes()


@operator("Pad", check=check_pad)
def bind_pad(dev, node, opset):
    mode = _text(node.attr("mode", b"constant"))
    attr_pads = node.attr("pads", node.attr("paddings"))
    attr_value = float(node.attr("value", 0.0))

    def run(ctx, x, pads_t=None, value_t=None, axes_t=None, **_):
        rank = len(x.shape)
        if opset < 11:
            pads, element = list(attr_pads), element_bytes(attr_value, x.elem_type)
            axes = list(range(rank))
        else:
            pads = list(dev.ints(pads_t))
            element = (bytes(dev.read(value_t.ptr, x.itemsize))
                       if value_t is not None and value_t.size else bytes(x.itemsize))
            axes = ([normalize_axis(a, rank, "Pad axis") for a in dev.ints(axes_t)]
                    if axes_t is not None else list(range(rank)))
        if len(pads) != 2 * len(axes):
            raise ValueError(f"Pad expects {2 * len(axes)} pads for axes {axes}, got {pads}")
        begins, ends = [0] * rank, [0] * rank
        for i, a in enumerate(axes):
            begins[a], ends[a] = pads[i], pads[len(axes) + i]
        return pad(dev, x, begins, ends, mode, element)
    return run


def pad(dev, x, begins, ends, mode: str, element: bytes):
    rank, it = len(x.shape), x.itemsize
    crop = [max(-b, 0) for b in begins]
    size = [x.shape[i] - crop[i] - max(-ends[i], 0) for i in range(rank)]
    lo, hi = [max(b, 0) for b in begins], [max(e, 0) for e in ends]
    if min(size, default=1) < 0:
        raise ValueError(f"Pad crops more than the input's shape {list(x.shape)}")
    out = [size[i] + lo[i] + hi[i] for i in range(rank)]
    y = dev.empty(out, x.elem_type)
    if y.size == 0:
        return y
    strides, src_strides = contiguous_strides(out), contiguous_strides(x.shape)

    def at(index) -> int:
        return y.ptr + sum(i * s for i, s in zip(index, strides)) * it

    if mode == "constant" and (any(lo) or any(hi)):
        dev.fill(y, element)
    src = x.ptr + sum(c * s for c, s in zip(crop, src_strides)) * it
    copy_strided(dev, at(lo), src, it, size, strides, src_strides)
    if mode == "constant":
        return y
    for a in range(rank):
        if not lo[a] and not hi[a]:
            continue
        for count, dst_first, src_first, step in _edge_copies(mode, lo[a], hi[a], size[a], a):
            starts = [0 if i < a else lo[i] for i in range(rank)]
            shape = [out[i] if i < a else size[i] for i in range(rank)]
            shape[a] = count
            dst, source = list(starts), list(starts)
            dst[a], source[a] = dst_first, src_first
            steps = list(strides)
            steps[a] = strides[a] * step
            copy_strided(dev, at(dst), at(source), it, shape, strides, steps)
    return y


def _edge_copies(mode: str, lo: int, hi: int, d: int, axis: int) -> list:
    """(count, first output index, first source index, source step) along one axis, the
    interior being [lo, lo + d) of the output."""
    if mode == "reflect":
        if lo > d - 1 or hi > d - 1:
            raise ValueError(f"Pad reflect of {max(lo, hi)} on axis {axis} of size {d} "
                             f"(at most {d - 1})")
        return [(lo, 0, 2 * lo, -1), (hi, lo + d, lo + d - 2, -1)]
    if d == 0:
        raise ValueError(f"Pad {mode} of an empty axis {axis}")
    if mode == "edge":
        return [(lo, 0, lo, 0), (hi, lo + d, lo + d - 1, 0)]
    if lo > d or hi > d:
        raise ValueError(f"Pad wrap of {max(lo, hi)} on axis {axis} of size {d} (at most {d})")
    return [(lo, 0, d, 1), (hi, lo + d, lo, 1)]
