"""The kernels of ir/unary_ops.py's rows: each row's numpy formula, compiled once.

The rows in HAND_WRITTEN keep the kernels activations.py gives them (in place, fewer
buffers, integer inputs); the differential tests hold those to the same formulas. Every other
row is registered here, so a new row is a new CPU operator.
"""
from __future__ import annotations

import functools

import numpy as np

from ....ir.unary_ops import UNARY_OPS, UnaryOp, params_from_list
from ..registry import kernel
from .activations import sigmoid_of, softplus_of
from .elementwise import float_math, is_ml_float
from .erf import erf
from .float_errors import ignored_float_errors

HAND_WRITTEN = {"Relu", "Sigmoid", "Tanh", "HardSwish", "Gelu"}

_NAMESPACE = {"np": np, "erf": erf, "sigmoid": sigmoid_of, "softplus": softplus_of}


@functools.cache
def formula(name: str):
    """fn(x, p0, p1): the row's numpy formula, its attributes given in the row's order."""
    row = UNARY_OPS[name]
    names = [attribute for attribute, _ in row.params]
    unused = ["_p" + str(i) for i in range(len(names), 2)]
    return eval(f"lambda x, {', '.join(names + unused)}: {row.numpy}", dict(_NAMESPACE))


def apply(name: str, x: np.ndarray, params=()) -> np.ndarray:
    """The row `name` on x, its attributes from a list in the row's order (defaults after)."""
    fn = formula(name)
    p0, p1 = params_from_list(UNARY_OPS[name], params)
    return _in_dtype(lambda v: fn(v, p0, p1), x, UNARY_OPS[name])


def _in_dtype(fn, x: np.ndarray, row: UnaryOp) -> np.ndarray:
    """fn(x) in x's dtype: floats in at least float32, integers in their own type where the
    row says the formula holds there, else through float64."""
    if x.dtype == np.float32 or x.dtype == np.float64:
        with ignored_float_errors():
            return np.asarray(fn(x)).astype(x.dtype, copy=False)
    if x.dtype.kind == "f" or is_ml_float(x.dtype):
        return float_math(fn, x)
    with ignored_float_errors():
        if row.integers:
            return np.asarray(fn(x)).astype(x.dtype, copy=False)
        return np.asarray(fn(x.astype(np.float64))).astype(x.dtype)


def _register(row: UnaryOp) -> None:
    fn = formula(row.name)
    defaults = row.params

    def run(ctx, x, **attrs):          # consumed_inputs (opset 1) and unknown legacy ones: ignored
        p0, p1 = (list(attrs.get(name, default) for name, default in defaults) + [0.0, 0.0])[:2]
        return _in_dtype(lambda v: fn(v, p0, p1), x, row)

    run.__name__ = run.__qualname__ = row.name.lower()
    kernel(row.name)(run)


for _row in UNARY_OPS.values():
    if _row.name not in HAND_WRITTEN:
        _register(_row)
