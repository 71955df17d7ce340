"""Simple CPU operators written into the generated plan code as one numpy expression.

Streaming models run many nodes that only re-view a tensor (silero VAD: ~20 Unsqueeze,
Squeeze, Slice, Gather and Identity nodes per call around its LSTM and STFT) or square one.
Through its kernel each costs a call and the parsing of its constant axes or bounds, ~1 us;
written as an indexing, `squeeze` or product expression with those constants bound once,
~0.2 us. Only forms whose numpy semantics are the operator's are written: constant,
non-negative axes, Slice steps > 0 (Python's slice clamping is ONNX's there), a scalar Gather
index, Reshape without 0 dims, Pow by a scalar 2. Every other node, and any input that does
not fit at run time (numpy raises, and the step's failure names the node), goes through the
kernel as before.

`inline_expression(op_type, attrs, sources, constant, bind)` gives the expression or None:
`sources[i]` is the code reading input i, `constant(i)` that input's value when it is a
constant (else None), `bind(value)` a name the code can use for a value.
"""
from __future__ import annotations

from typing import Callable, Optional


def inline_expression(op_type: str, attrs: dict, sources: list, constant: Callable,
                      bind: Callable) -> Optional[str]:
    writer = _WRITERS.get(op_type)
    if writer is None or not sources or sources[0] is None:
        return None
    return writer(attrs, sources, constant, bind)


def _int_list(value) -> Optional[list]:
    """A constant integer tensor (at most 1-D) or attribute list as Python ints, else None.
    (numpy-free: the runtime core imports without it.)"""
    if isinstance(value, (list, tuple)):
        return list(value) if all(type(v) is int for v in value) else None
    if _integer_kind(value) and value.ndim <= 1:
        return [int(v) for v in value.reshape(-1).tolist()]
    return None


def _dtype_kind(value):
    """The numpy dtype kind of a constant array ('i', 'u', 'f', ...), else None."""
    return getattr(getattr(value, "dtype", None), "kind", None)


def _integer_kind(value) -> bool:
    return _dtype_kind(value) in ("i", "u")


def _axes(attrs: dict, sources: list, constant: Callable) -> Optional[list]:
    """`axes` from input 1 (opset 13+) or the attribute (earlier); [] when absent."""
    if len(sources) > 1 and sources[1] is not None:
        return _int_list(constant(1))
    return _int_list(attrs["axes"]) if attrs.get("axes") is not None else []


def _identity(attrs, sources, constant, bind):
    return sources[0]


def _unsqueeze(attrs, sources, constant, bind):
    axes = _axes(attrs, sources, constant)
    if not axes or min(axes) < 0 or len(set(axes)) != len(axes):
        return None
    index = tuple(None if i in axes else slice(None) for i in range(max(axes) + 1))
    return f"{sources[0]}[{bind(index + (Ellipsis,))}]"


def _squeeze(attrs, sources, constant, bind):
    axes = _axes(attrs, sources, constant)
    if axes is None or (axes and min(axes) < 0):
        return None
    return f"{sources[0]}.squeeze({bind(tuple(axes))})" if axes else f"{sources[0]}.squeeze()"


# numpy arrays have at most this many axes: a larger constant axis is left to the kernel,
# which names the problem (an index tuple that long would be built first)
MAX_RANK = 64


def _slice(attrs, sources, constant, bind):
    if len(sources) > 1:            # opset 10+: starts, ends, axes, steps as inputs
        values = []
        for i in range(1, 5):
            present = i < len(sources) and sources[i] is not None
            values.append(constant(i) if present else None)
            if present and values[-1] is None:
                return None         # computed at run time
    else:                           # opset 1: attributes
        values = [attrs.get("starts"), attrs.get("ends"), attrs.get("axes"), None]
    starts, ends, axes, steps = (None if v is None else _int_list(v) for v in values)
    if any(v is not None and c is None for v, c in zip(values, (starts, ends, axes, steps))):
        return None                 # not integers: the kernel explains
    if starts is None or ends is None or len(starts) != len(ends):
        return None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if len(axes) != len(starts) or len(steps) != len(starts) or not starts or \
            min(axes) < 0 or max(axes) >= MAX_RANK or len(set(axes)) != len(axes) or \
            min(steps) < 1:
        return None
    index = [slice(None)] * (max(axes) + 1)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[axis] = slice(start, end, step)
    return f"{sources[0]}[{bind(tuple(index) + (Ellipsis,))}]"


def _gather(attrs, sources, constant, bind):
    indices = constant(1) if len(sources) > 1 else None
    axis = attrs.get("axis", 0)
    if not _integer_kind(indices) or indices.ndim != 0 or not 0 <= axis < MAX_RANK:
        return None
    index = (slice(None),) * axis + (int(indices), Ellipsis)
    return f"{sources[0]}[{bind(index)}]"


def _reshape(attrs, sources, constant, bind):
    shape = _int_list(constant(1)) if len(sources) > 1 else None
    if shape is None or 0 in shape or sum(d < -1 for d in shape) or shape.count(-1) > 1:
        return None
    return f"{sources[0]}.reshape({bind(tuple(shape))})"


def _pow(attrs, sources, constant, bind):
    """x ** 2 as x * x (variances, STFT magnitudes): exact in x's dtype, as the kernel's."""
    exponent = constant(1) if len(sources) > 1 else None
    if _dtype_kind(exponent) not in ("f", "i", "u") or exponent.ndim != 0 or \
            float(exponent) != 2.0:
        return None
    return f"{sources[0]} * {sources[0]}"


_WRITERS = {"Pow": _pow, "Identity": _identity, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze,
            "Slice": _slice, "Gather": _gather, "Reshape": _reshape}
