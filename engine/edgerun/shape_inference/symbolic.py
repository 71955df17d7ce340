"""Arithmetic on dimensions: fixed ints, symbolic names (str) and unknowns (None).

A symbolic result is spelled as an expression string ("batch*3", "(seq+1)//2"), so two
values computed the same way from the same symbols compare equal. Anything involving an
unknown dimension is unknown.
"""
from __future__ import annotations

from ..errors import InvalidGraph


def is_int(d) -> bool:
    return isinstance(d, int) and not isinstance(d, bool)


def is_known(shape) -> bool:
    """True for a shape whose every dimension is a fixed int."""
    return shape is not None and all(is_int(d) for d in shape)


def _wrap(d) -> str:
    s = str(d)
    return f"({s})" if any(c in s for c in "+-*/") else s


def add(a, b):
    if a is None or b is None:
        return None
    if is_int(a) and is_int(b):
        return a + b
    if a == 0:
        return b
    if b == 0:
        return a
    if is_int(b) and b < 0:
        return f"{a}-{-b}"
    return f"{a}+{b}"


def sub(a, b):
    if a is None or b is None:
        return None
    if is_int(a) and is_int(b):
        return a - b
    if a == b:
        return 0
    if b == 0:
        return a
    if is_int(b) and b < 0:
        return f"{a}+{-b}"
    return f"{a}-{_wrap(b)}"


def mul(a, b):
    if a is None or b is None:
        return None
    if is_int(a) and is_int(b):
        return a * b
    if a == 0 or b == 0:
        return 0
    if a == 1:
        return b
    if b == 1:
        return a
    return f"{_wrap(a)}*{_wrap(b)}"


def floordiv(a, b):
    if a is None or b is None:
        return None
    if is_int(a) and is_int(b):
        return a // b if b else None
    if b == 1:
        return a
    if is_int(b) and isinstance(a, str) and a.endswith(f"*{b}") and "+" not in a and "-" not in a:
        return a[: -len(f"*{b}")]
    return f"{_wrap(a)}//{_wrap(b)}"


def ceildiv(a, b):
    if is_int(a) and is_int(b):
        return -(-a // b) if b else None
    if b == 1:
        return a
    return floordiv(add(a, sub(b, 1)), b)


def product(dims):
    out = 1
    for d in dims:
        out = mul(out, d)
    return out


def total(dims):
    out = 0
    for d in dims:
        out = add(out, d)
    return out


def broadcast_dim(a, b, where: str = ""):
    """The broadcast of two dimensions (numpy rules); fixed sizes that differ are an error."""
    if a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    if is_int(a) and is_int(b):
        raise InvalidGraph(f"{where}: dimensions {a} and {b} do not broadcast")
    if is_int(a) and a != 1:
        return a
    if is_int(b) and b != 1:
        return b
    return None


def broadcast_shapes(shapes, where: str = ""):
    """Multidirectional broadcast of several shapes; None when any rank is unknown."""
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        padded = [1] * (rank - len(s)) + list(s)
        out = [broadcast_dim(o, d, where) for o, d in zip(out, padded)]
    return tuple(out)


def merge_dim(a, b):
    """Two observations of one dimension (If branches, loop iterations): kept if equal."""
    return a if a == b else None


def merge_shapes(a, b):
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(merge_dim(x, y) for x, y in zip(a, b))


def normalize_axis(axis: int, rank: int, where: str = "") -> int:
    if not -rank <= axis < max(rank, 1):
        raise InvalidGraph(f"{where}: axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis
