"""The kernels of ir/unary_ops.py's rows: each row's numpy formula, compiled once.

The rows in HAND_WRITTEN keep the kernels activations.py gives them (in place, fewer
buffers), which fall back to `apply` here for the dtypes their fast paths do not take; the
differential tests hold them to the same formulas. Every other row is registered here, so a
new row is a new CPU operator.

Formulas are computed in at least float32 (float16 and bfloat16 inputs round once, at the
end) and written to avoid overflow: sigmoid and softplus never exponentiate a large positive
number.
"""
from __future__ import annotations

import functools

import numpy as np

from ....ir import EDGERUN_DOMAIN
from ....ir.unary_ops import UNARY_OPS, UnaryOp, params_from_list, params_of
from ..native import conv as native_conv
from ..registry import binds, kernel
from .elementwise import float_math, is_ml_float
from .erf import erf
from .float_errors import ignored_float_errors

HAND_WRITTEN = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSwish", "Gelu"}
# rows the optimizer also writes in com.edgerun, below the opset that made them standard
# (optimizer/fuse_swish.py: Swish before opset 24)
EDGERUN_FORMS = {"Swish"}


def sigmoid_of(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) without overflow for any x."""
    e = np.exp(-np.abs(x))                       # in (0, 1]: no overflow for any x
    r = 1 / (1 + e)
    return np.where(x >= 0, r, e * r)


def softplus_of(x: np.ndarray) -> np.ndarray:
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|))."""
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


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
    return in_dtype(lambda v: fn(v, p0, p1), x, UNARY_OPS[name].integers)


def in_dtype(fn, x: np.ndarray, integers: bool = False) -> np.ndarray:
    """fn(x) in x's dtype: floats in at least float32, integers in their own type where the
    formula holds there (`integers`), else through float64."""
    if x.dtype == np.float32 or x.dtype == np.float64:
        with ignored_float_errors():
            return np.asarray(fn(x)).astype(x.dtype, copy=False)
    if x.dtype.kind == "f" or is_ml_float(x.dtype):
        return float_math(fn, x)
    with ignored_float_errors():
        if integers:
            return np.asarray(fn(x)).astype(x.dtype, copy=False)
        return np.asarray(fn(x.astype(np.float64))).astype(x.dtype)


_FLOAT32, _FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)


def _register(row: UnaryOp) -> None:
    fn = formula(row.name)
    native = row.name in native_conv.ACTIVATIONS     # conv.c's activation pass takes float32

    def bind(ctx, attrs: dict):
        """The row with the node's attributes read once; float32 and float64 inputs go
        straight to the formula (in_dtype's first case, without its call and closure), or
        float32 to the native pass where it has the row."""
        p0, p1 = params_of(row, attrs.get)

        def bound(ctx, x):
            dtype = x.dtype
            if dtype == _FLOAT32 or dtype == _FLOAT64:
                if native and dtype == _FLOAT32:
                    y = native_conv.activated(x, row.name, (p0, p1))
                    if y is not None:
                        return y
                with ignored_float_errors():
                    return np.asarray(fn(x, p0, p1)).astype(dtype, copy=False)
            return in_dtype(lambda v: fn(v, p0, p1), x, row.integers)
        return bound

    @binds(bind)
    def run(ctx, x, **attrs):          # consumed_inputs (opset 1) and unknown legacy ones: ignored
        return bind(ctx, attrs)(ctx, x)

    run.__name__ = run.__qualname__ = row.name.lower()
    kernel(row.name)(run)
    if row.name in EDGERUN_FORMS:
        kernel(row.name, domain=EDGERUN_DOMAIN)(run)


for _row in UNARY_OPS.values():
    if _row.name not in HAND_WRITTEN:
        _register(_row)
