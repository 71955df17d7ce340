"""numpy's broadcasting over flat Python lists (row-major), for the few places that compute
on host values without numpy: shape inference's tracked constants, the string operators."""
from __future__ import annotations

import math


def strides(shape) -> list:
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= d
    return out[::-1]


def broadcast_shape(*shapes) -> tuple:
    """The shape the given concrete shapes broadcast to; ValueError when they do not."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for dims in zip(*[(1,) * (rank - len(s)) + tuple(s) for s in shapes]):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_map(fn, operands, out_shape) -> list:
    """Elementwise `fn` over operands [(items, shape)] broadcast to the fixed `out_shape`."""
    n = math.prod(out_shape)
    out_strides = strides(out_shape)
    plans = []
    for items, shape in operands:
        padded = [1] * (len(out_shape) - len(shape)) + list(shape)
        st = strides(padded)
        plans.append((items, [0 if d == 1 else s for d, s in zip(padded, st)]))
    result = []
    for flat in range(n):
        idx = [(flat // s) % d if d else 0 for s, d in zip(out_strides, out_shape)]
        args = [items[sum(i * s for i, s in zip(idx, st))] for items, st in plans]
        result.append(fn(*args))
    return result
