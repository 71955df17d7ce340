"""Linear algebra: MatMul, Gemm, Einsum, Det.

Low-precision floats (float16, bfloat16, float8 ...) are computed in float32 and cast back:
numpy has no fast kernels for them and accumulating in 16 bits loses accuracy. Every output
keeps the input's dtype.
"""
import numpy as np

from ..native import products
from ..registry import binds, kernel


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype to do the arithmetic in for inputs of `dtype`."""
    dtype = np.dtype(dtype)
    if dtype in (np.float32, np.float64, np.complex64, np.complex128):
        return dtype
    if dtype.kind in "iub":
        return dtype
    return np.dtype(np.float32)   # float16 and every ml_dtypes float


def _as_compute(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return x if x.dtype == dtype else x.astype(dtype)


def _weight_as_compute(ctx, key: str, x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`x` in the compute dtype; a constant (the same array on every run: a float16 model's
    weights) is converted once per session instead of on every call (numpy converts float16
    at ~1 ns an element: for a few rows, longer than the float32 product itself)."""
    if x.dtype == dtype or ctx is None:
        return _as_compute(x, dtype)
    return ctx.prepared(("compute", key), (x,), lambda: x.astype(dtype))


# Panels: a float32 (K, N) constant right operand multiplied by a few rows goes through
# OpenBLAS faster as contiguous (384, 128) blocks (K cut in 384-row chunks, N in 128-column
# panels), each product written into (or, past the first chunk, added to) its columns of the
# result. With the weights streamed from memory as in a transformer's layers, 16 rows:
# (384, 1536) 480 -> 270 us, (1536, 384) 476 -> 279 us, (384, 384) 100 -> 60 us; from 24
# rows on it gains little or loses, single rows lose. The panels are built once the same B
# object comes back (a constant), so activations never pay for the copy.
_PANEL = 128
_PANEL_INNER = 384
_PANEL_ROWS = (2, 16)


def _panels_pay(a, b) -> bool:
    if b.ndim != 2 or a.ndim < 2 or a.dtype != np.float32 or b.dtype != np.float32:
        return False
    inner, columns = b.shape
    rows = a.size // inner if inner else 0
    return (inner <= _PANEL_INNER or inner % _PANEL_INNER == 0) and \
        columns % _PANEL == 0 and columns > _PANEL and \
        _PANEL_ROWS[0] <= rows <= _PANEL_ROWS[1] and a.flags.c_contiguous


def _panels(b):
    """B (K, N) as (K chunks, N panels, chunk rows, 128) contiguous blocks."""
    inner, columns = b.shape
    chunk = min(inner, _PANEL_INNER)
    return np.ascontiguousarray(b.reshape(inner // chunk, chunk, columns // _PANEL, _PANEL)
                                .transpose(0, 2, 1, 3))


def _matmul_by_panels(a, panels):
    chunks, count, chunk = panels.shape[:3]
    rows = a.reshape(-1, chunks * chunk)
    parts = [rows[:, k * chunk:(k + 1) * chunk] for k in range(chunks)]
    y = np.empty((rows.shape[0], count * _PANEL), np.float32)
    partial = np.empty((rows.shape[0], _PANEL), np.float32) if chunks > 1 else None
    for j in range(count):
        columns = y[:, j * _PANEL:(j + 1) * _PANEL]
        products.matmul(parts[0], panels[0, j], out=columns)
        for k in range(1, chunks):
            products.matmul(parts[k], panels[k, j], out=partial)
            columns += partial
    return y.reshape(a.shape[:-1] + (y.shape[1],))


@kernel("MatMul")
def matmul(ctx, a, b):
    if ctx is not None and _panels_pay(a, b):
        calls = ctx.prepared("panels-seen", (b,), lambda: [0])
        calls[0] += 1
        if calls[0] > 1:
            return _matmul_by_panels(a, ctx.prepared("panels", (b,), lambda: _panels(b)))
    work = _compute_dtype(a.dtype)
    result = products.matmul(_as_compute(a, work), _weight_as_compute(ctx, "b", b, work))
    return np.asarray(result).astype(a.dtype, copy=False)


_FLOAT32 = np.dtype(np.float32)


def _bind_gemm(ctx, attrs: dict):
    """Gemm with its attributes read once: float32 A (not transposed) by float32 B plus an
    optional float32 C, alpha and beta 1 (a Linear layer's export: an MLP head at batch 1 is
    mostly this kernel's own calls), as one product and one in-place add; every other case
    through `gemm`."""
    trans_b = attrs.get("transB", 0)
    plain = not attrs.get("transA", 0) and float(attrs.get("alpha", 1.0)) == 1.0 and \
        float(attrs.get("beta", 1.0)) == 1.0

    def run(ctx, a, b, c=None):
        if not plain or a.dtype != _FLOAT32 or b.dtype != _FLOAT32 or a.ndim != 2 or \
                b.ndim != 2 or (c is not None and c.dtype != _FLOAT32):
            return gemm(ctx, a, b, c, **attrs)
        right = b.T if trans_b else b
        if a.shape[1] != right.shape[0]:
            raise ValueError(f"Gemm inner dimensions differ: A' is {a.shape}, B' is "
                             f"{right.shape}")
        result = products.matmul(a, right)       # fresh
        if c is not None:
            result += c
        return result
    return run


@binds(_bind_gemm)
@kernel("Gemm")
def gemm(ctx, a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0, broadcast=0, **_):
    # `broadcast` (opset <= 6) only allowed what unidirectional broadcasting always allows.
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"Gemm expects 2-D A and B, got shapes {a.shape} and {b.shape}")
    work = _compute_dtype(a.dtype)
    left = _as_compute(a.T if transA else a, work)
    right = _weight_as_compute(ctx, "b", b, work)
    right = right.T if transB else right
    if left.shape[1] != right.shape[0]:
        raise ValueError(f"Gemm inner dimensions differ: A' is {left.shape}, B' is {right.shape}")
    result = products.matmul(left, right)       # fresh: scaled and biased in place
    if alpha != 1.0:
        result *= _scalar(alpha, work)
    if c is not None and beta != 0.0:
        bias = _weight_as_compute(ctx, "c", c, work)
        if beta != 1.0:
            bias = bias * _scalar(beta, work)
        result += bias
    return np.asarray(result).astype(a.dtype, copy=False)


def _scalar(value: float, dtype: np.dtype):
    """`value` in the compute dtype (integer Gemm keeps integer arithmetic where it can)."""
    if dtype.kind in "iu" and float(value).is_integer():
        return dtype.type(int(value))
    if dtype.kind in "iub":
        return np.float64(value)
    return dtype.type(value)


@kernel("Einsum", since=12)
def einsum(ctx, *inputs, equation):
    equation = equation.replace(" ", "")
    if not inputs:
        raise ValueError("Einsum needs at least one input")
    out_dtype = inputs[0].dtype
    work = _compute_dtype(out_dtype)
    operands = [_as_compute(x, work) for x in inputs]
    result = np.einsum(equation, *operands, optimize=len(operands) > 1)
    return np.asarray(result).astype(out_dtype, copy=False)


@kernel("Det", since=11)
def det(ctx, x):
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"Det expects a tensor of shape [*, M, M], got {x.shape}")
    work = x.dtype if x.dtype in (np.float32, np.float64) else np.dtype(np.float32)
    result = np.linalg.det(_as_compute(x, work))
    return np.asarray(result).astype(x.dtype, copy=False)
