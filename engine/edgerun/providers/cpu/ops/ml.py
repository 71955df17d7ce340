"""Kernels of the `ai.onnx.ml` domain: the classic machine-learning operators.

Linear models, SVMs, tree ensembles and the small preprocessing operators that converters such
as skl2onnx emit. Where the ONNX text leaves a case open (binary classifiers with one score
column, label choice, score post-processing), these kernels follow onnxruntime, the runtime
such models are validated against. Scores are float32 like onnxruntime's; intermediate sums
use float64 and are rounded once at the end.

Tree ensembles of every format (TreeEnsembleRegressor/Classifier with (tree id, node id)
addressing, TreeEnsemble 5 with positional nodes and separate leaves) are turned into one flat
node table (`_Forest`) and evaluated for all rows and all trees at once, one tree level per
step.
"""
from __future__ import annotations

from typing import Any

import functools
import math
import struct
import time
import weakref

import numpy as np

from ..native import elementwise as native_elementwise
from ..native import forest as native_forest
from ..native import linear as native_linear
from ..native import svm as native_svm
from ..registry import binds, kernel
from .float_errors import ignored_float_errors
from .forced import ForcedChoice

ML = "ai.onnx.ml"

# ---------------------------------------------------------------------------------------------
# shared helpers
# ---------------------------------------------------------------------------------------------


def _rows(x: np.ndarray) -> np.ndarray:
    """The input as a [N, F] matrix: a vector is one row (onnxruntime's convention)."""
    if x.ndim == 0:
        raise ValueError("expected a tensor of rank 1 or 2, got a scalar")
    if x.ndim == 1:
        return x.reshape(1, -1)
    if x.ndim > 2:
        return x.reshape(x.shape[0], -1)
    return x


def _rows_f32(x: np.ndarray) -> np.ndarray:
    return _rows(np.asarray(x)).astype(np.float32, copy=False)


class _Cache:
    """Prepared per-node state (parsed trees), reused across runs.

    Keyed by the node object and a variant (e.g. the comparison dtype): attributes never
    change for a node, and a weak reference makes sure a recycled `id()` is not mistaken for
    the old node.
    """

    def __init__(self, limit: int = 64):
        self._entries: dict = {}
        self._limit = limit

    def get(self, ctx, variant, build):
        node = getattr(ctx, "node", None)
        if node is None:
            return build()
        key = (id(node), variant)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is node:
            return entry[1]
        value = build()
        if len(self._entries) >= self._limit:
            self._entries.pop(next(iter(self._entries)))
        try:
            self._entries[key] = (weakref.ref(node), value)
        except TypeError:   # a node type without weak references: do not cache
            pass
        return value


_cache = _Cache()


def bound_kernel(op_type: str, since: int = 1):
    """Register a kernel written as its bind, `bind(ctx, attributes) -> run(ctx, *inputs)`
    (registry.binds): plans call `run`, made once per node; other callers (constant folding,
    fallbacks) reach the same `run` through a cache per node."""
    def register(bind):
        @binds(bind)
        def kernel_fn(ctx, *inputs, **attrs):
            return _cache.get(ctx, "bound", lambda: bind(ctx, attrs))(ctx, *inputs)
        kernel_fn.__name__ = kernel_fn.__qualname__ = bind.__name__
        kernel(op_type, domain=ML, since=since)(kernel_fn)
        return kernel_fn
    return register

# ---- score post-processing (onnxruntime's ml_common.h semantics) ------------------------------

# TreeEnsemble (opset 5) numbering, as the ONNX spec defines it (onnxruntime 1.2x reads 1 as
# LOGISTIC and 2 as SOFTMAX, its own enum order; the spec wins here)
_TRANSFORMS_V5 = {0: "NONE", 1: "SOFTMAX", 2: "LOGISTIC", 3: "SOFTMAX_ZERO", 4: "PROBIT"}
_TRANSFORM_NAMES = set(_TRANSFORMS_V5.values())


def _check_transform(name: str) -> str:
    if name not in _TRANSFORM_NAMES:
        raise ValueError(f"post_transform must be one of {sorted(_TRANSFORM_NAMES)}, got {name!r}")
    return name


def _logistic(v: np.ndarray) -> np.ndarray:
    e = 1.0 / (1.0 + np.exp(-np.abs(v)))
    return np.where(v < 0, 1.0 - e, e).astype(v.dtype, copy=False)


def _erf_inv(x: np.ndarray) -> np.ndarray:
    # Winitzki's closed-form approximation (a = 0.147), the one onnxruntime uses, so PROBIT
    # scores agree with it rather than with an exact inverse.
    a = np.float32(0.147)
    sign = np.where(x < 0, np.float32(-1), np.float32(1))
    with ignored_float_errors():
        ln = np.log((1 - x) * (1 + x))
        t = np.float32(2 / (np.pi * 0.147)) + np.float32(0.5) * ln
        inner = -t + np.sqrt(t * t - ln / a)
        return (sign * np.sqrt(inner)).astype(x.dtype, copy=False)


def _probit(v: np.ndarray) -> np.ndarray:
    # float32 arithmetic even for double scores: the approximation is evaluated in float by
    # onnxruntime and its cancellation makes the precision visible
    v32 = v.astype(np.float32)
    return (np.float32(np.sqrt(2)) * _erf_inv(2 * v32 - 1)).astype(v.dtype, copy=False)


def _row_reduce(ufunc, s: np.ndarray) -> np.ndarray:
    """`ufunc` folded along each row of [N, C] `s`, as [N, 1]. Below 8 columns (numpy's
    pairwise-summation block, under which its reduce also adds left to right) column by
    column: numpy reduces a short last axis row by row, ~30 ns a row (178 rows of 3 scores:
    5 us against 1)."""
    columns = s.shape[1]
    if not 1 < columns < 8:
        return ufunc.reduce(s, axis=1, keepdims=True)
    out = ufunc(s[:, 0:1], s[:, 1:2])
    for j in range(2, columns):
        ufunc(out, s[:, j:j + 1], out=out)
    return out


def _softmax_rows(s: np.ndarray) -> np.ndarray:
    # (a NaN makes its row NaN whether or not the maximum skips it, as onnxruntime's does)
    if s.dtype == np.float32 and s.ndim == 2 and native_elementwise.available():
        return native_elementwise.ml_rows(s, "SOFTMAX")
    e = np.exp(s - _row_reduce(np.maximum, s))
    e /= _row_reduce(np.add, e)
    return e


def _softmax_zero_rows(s: np.ndarray) -> np.ndarray:
    """Softmax over the non-zero scores only; zero scores stay (about) zero."""
    vmax = _row_reduce(np.maximum, s)
    nonzero = np.abs(s) > 1e-7
    e = np.where(nonzero, np.exp(s - vmax), s * np.exp(-vmax))
    total = _row_reduce(np.add, np.where(nonzero, e, 0))
    with ignored_float_errors():
        return e / total


def _post_transform(scores: np.ndarray, transform: str) -> np.ndarray:
    """Apply `transform` to [N, C] scores. With a single column only PROBIT applies."""
    if transform == "NONE" or scores.shape[1] == 0:
        return scores
    if transform == "PROBIT":
        return _probit(scores)
    if scores.shape[1] == 1:
        return scores
    if transform == "LOGISTIC":
        return _logistic(scores)
    if transform == "SOFTMAX":
        return _softmax_rows(scores)
    return _softmax_zero_rows(scores)


def _two_columns(score: np.ndarray, mode, transform: str) -> np.ndarray:
    """Expand a single binary score per row into [negative class, positive class] columns.

    Under LOGISTIC: [logistic(-s), logistic(s)]. Otherwise by `mode` per row (or one mode for
    every row): 0/1 -> [1 - s, s] (probability-like weights), 2/3 -> [-s, s] (signed weights),
    -1 -> [s, 0]. PROBIT gives [probit(s), 0].
    """
    out = np.empty((score.shape[0], 2), dtype=score.dtype)
    if transform == "PROBIT":
        out[:, 0] = _probit(score)
        out[:, 1] = 0
        return out
    if transform == "LOGISTIC":
        out[:, 0] = -score
        out[:, 1] = score
        return _logistic(out)
    if np.ndim(mode) == 0:          # one mode: no per-row selection (batch-1 calls are short)
        m = int(mode)
        out[:, 0] = 1 - score if m in (0, 1) else (-score if m in (2, 3) else score)
        out[:, 1] = score if m in (0, 1, 2, 3) else 0
        return out
    mode = np.asarray(mode)
    prob = (mode == 0) | (mode == 1)
    signed = (mode == 2) | (mode == 3)
    out[:, 0] = np.where(prob, 1 - score, np.where(signed, -score, score))
    out[:, 1] = np.where(prob | signed, score, 0)
    return out


# ---------------------------------------------------------------------------------------------
# simple transforms
# ---------------------------------------------------------------------------------------------


@kernel("ArrayFeatureExtractor", domain=ML)
def array_feature_extractor(ctx, x, y):
    """Select entries of the last axis; a vector input gives a [1, K] result."""
    if x.ndim == 0:
        raise ValueError("ArrayFeatureExtractor: X must have rank >= 1")
    indices = np.asarray(y, dtype=np.int64).reshape(-1)
    if indices.size == 0:
        raise ValueError("ArrayFeatureExtractor: Y holds no index")
    size = x.shape[-1]
    if indices.min() < 0 or indices.max() >= size:     # two reductions: cheaper than a mask
        bad = (indices < 0) | (indices >= size)
        raise ValueError(f"ArrayFeatureExtractor: index {int(indices[bad][0])} is out of range "
                         f"for a last axis of size {size}")
    out = np.take(x, indices, axis=-1)
    return out.reshape(1, -1) if x.ndim == 1 else out


@kernel("Binarizer", domain=ML)
def binarizer(ctx, x, threshold=0.0):
    return (x > threshold).astype(x.dtype)


@bound_kernel("Normalizer")
def normalizer(ctx, attrs: dict):
    norm = attrs.get("norm", "MAX")
    if norm not in ("MAX", "L1", "L2"):
        raise ValueError(f"Normalizer: norm must be MAX, L1 or L2, got {norm!r}")

    def run(ctx, x):
        if x.ndim > 2:
            raise ValueError(f"Normalizer: expected rank 1 or 2, got rank {x.ndim}")
        v = _rows_f32(x)
        if native_elementwise.available():
            return native_elementwise.ml_rows(v, norm).reshape(x.shape)
        if norm == "MAX":       # onnxruntime's: from the lowest float, NaN never the maximum
            scale = np.fmax(_row_reduce(np.fmax, v), np.finfo(np.float32).min)
        elif norm == "L1":
            scale = _row_reduce(np.add, np.abs(v))
        else:
            scale = np.sqrt(_row_reduce(np.add, v * v))
        scale[scale == 0] = 1
        return np.divide(v, scale, dtype=np.float32).reshape(x.shape)
    return run


@bound_kernel("Scaler")
def scaler(ctx, attrs: dict):
    offset, scale = attrs.get("offset"), attrs.get("scale")
    made: dict = {}         # features -> (shift, factor)

    def run(ctx, x):
        v = np.asarray(x).astype(np.float32, copy=False)
        features = v.shape[-1] if v.ndim else 1
        weights = made.get(features)
        if weights is None:
            weights = made[features] = (_per_feature(offset, features, "offset", 0.0),
                                        _per_feature(scale, features, "scale", 1.0))
        y = v - weights[0]          # float32 both (_per_feature)
        y *= weights[1]
        return y
    return run


def _per_feature(values, features: int, name: str, default: float):
    if not values:
        return np.float32(default)
    arr = np.asarray(values, dtype=np.float32)
    if arr.size not in (1, features):
        raise ValueError(f"Scaler: {name} has {arr.size} values; expected 1 or {features}")
    return arr if arr.size > 1 else arr[0]


@kernel("Imputer", domain=ML)
def imputer(ctx, x, imputed_value_floats=None, imputed_value_int64s=None,
            replaced_value_float=0.0, replaced_value_int64=0):
    if np.issubdtype(x.dtype, np.floating):
        values, replaced = imputed_value_floats, replaced_value_float
    else:
        values, replaced = imputed_value_int64s, replaced_value_int64
    if not values:
        raise ValueError("Imputer: the imputed_value_* attribute matching the input type is empty")
    values = np.asarray(values).astype(x.dtype)
    features = x.shape[-1] if x.ndim else 1
    if values.size != 1 and values.size != features:
        values = values[:1]   # onnxruntime: any other length falls back to the first value
    if values.size == features and x.ndim >= 2:
        fill = np.broadcast_to(values, x.shape)
    else:
        fill = values.reshape(-1)[0] if values.size == 1 else values
    if isinstance(replaced, float) and np.isnan(replaced):
        hit = np.isnan(x) if np.issubdtype(x.dtype, np.floating) else np.zeros(x.shape, bool)
    else:
        hit = x == np.asarray(replaced).astype(x.dtype)
    return np.where(hit, fill, x).astype(x.dtype, copy=False)


@kernel("OneHotEncoder", domain=ML)
def one_hot_encoder(ctx, x, cats_int64s=None, cats_strings=None, zeros=1):
    if x.dtype == object:
        categories = cats_strings or []
        flat = x.reshape(-1)
    else:
        categories = cats_int64s or []
        flat = x.reshape(-1).astype(np.int64)
    if not categories:
        raise ValueError("OneHotEncoder: the cats_* attribute matching the input type is empty")
    position = _index_of(flat, categories)
    if not zeros and (position < 0).any():
        raise ValueError("OneHotEncoder: unknown category and zeros=0")
    out = np.zeros((flat.size, len(categories)), dtype=np.float32)
    found = np.flatnonzero(position >= 0)
    out[found, position[found]] = 1.0
    return out.reshape(x.shape + (len(categories),))


def _index_of(flat: np.ndarray, categories: list) -> np.ndarray:
    """Position of each element in `categories` (the last one on repeats), -1 if absent."""
    table = {c: i for i, c in enumerate(categories)}
    return _lookup(flat, table, np.int64, -1)


def _lookup(x: np.ndarray, table: dict, out_dtype, default, nan_keys: bool = False) -> np.ndarray:
    """Map every element of `x` through `table` (a dict), `default` where absent.

    Each distinct input value is looked up once. With `nan_keys` a NaN key matches NaN
    inputs; otherwise NaN matches nothing.
    """
    flat = x.reshape(-1)
    try:
        uniques, inverse = np.unique(flat, return_inverse=True)
    except TypeError:   # values numpy cannot order (mixed objects): map one by one
        uniques, inverse = flat, np.arange(flat.size)
    nan_value = default
    if nan_keys:
        for k, v in table.items():
            if isinstance(k, float) and k != k:
                nan_value = v
    mapped = []
    for u in uniques.tolist():
        if isinstance(u, float) and u != u:
            mapped.append(nan_value)
        else:
            mapped.append(table.get(u, default))
    values = np.array(mapped, dtype=out_dtype) if mapped else np.zeros(0, dtype=out_dtype)
    return values[inverse.reshape(-1)].reshape(x.shape)


# ---------------------------------------------------------------------------------------------
# label / category / map conversions
# ---------------------------------------------------------------------------------------------


@kernel("LabelEncoder", domain=ML)
def label_encoder_1(ctx, x, classes_strings=None, default_int64=-1, default_string="_Unused"):
    """Opset 1: strings -> their index in classes_strings, or int64 indices -> strings."""
    classes = classes_strings or []
    if x.dtype == object:
        return _lookup(x, {c: i for i, c in enumerate(classes)}, np.int64, default_int64)
    return _lookup(x.astype(np.int64), dict(enumerate(classes)), object, default_string)


@kernel("LabelEncoder", domain=ML, since=2)
def label_encoder_2(ctx, x, keys_floats=None, keys_int64s=None, keys_strings=None,
                    keys_tensor=None, values_floats=None, values_int64s=None,
                    values_strings=None, values_tensor=None, default_float=-0.0,
                    default_int64=-1, default_string="_Unused", default_tensor=None):
    """Opsets 2 and 4: keys_* -> values_*; opset 4 adds the *_tensor forms."""
    keys = _first_given(keys_tensor, keys_floats, keys_int64s, keys_strings)
    if keys is None:
        raise ValueError("LabelEncoder: one of keys_floats, keys_int64s, keys_strings, "
                         "keys_tensor is required")
    if values_tensor is not None:
        out_dtype = object if values_tensor.dtype.kind in "OUS" else values_tensor.dtype
        values = values_tensor.reshape(-1).tolist()
        default = _tensor_default(default_tensor, out_dtype, default_float, default_int64,
                                  default_string)
    elif values_floats is not None:
        out_dtype, values = np.float32, values_floats
        default = _scalar_default(default_tensor, default_float)
    elif values_int64s is not None:
        out_dtype, values = np.int64, values_int64s
        default = _scalar_default(default_tensor, default_int64)
    elif values_strings is not None:
        out_dtype, values = object, values_strings
        default = _scalar_default(default_tensor, default_string)
    else:
        raise ValueError("LabelEncoder: one of values_floats, values_int64s, values_strings, "
                         "values_tensor is required")
    keys = keys.reshape(-1).tolist() if isinstance(keys, np.ndarray) else list(keys)
    if len(keys) != len(values):
        raise ValueError(f"LabelEncoder: {len(keys)} keys but {len(values)} values")
    keys = [_text(k) for k in keys]
    values = [_text(v) for v in values]
    if x.dtype != object and keys and isinstance(keys[0], float):
        keys = [float(np.asarray(k, dtype=x.dtype)) for k in keys]   # compare at input precision
    table = dict(zip(keys, values))
    # NaN keys match NaN inputs from opset 4 on (onnxruntime's opset-2 kernel never matches)
    return _lookup(x, table, out_dtype, _text(default), nan_keys=ctx.opset >= 4)


def _first_given(*candidates):
    for c in candidates:
        if c is not None:
            return c
    return None


def _text(v):
    return v.decode("utf-8") if isinstance(v, bytes) else v


def _scalar_default(default_tensor, fallback):
    if default_tensor is not None and np.asarray(default_tensor).size:
        return _first_item(default_tensor)
    return fallback


def _first_item(tensor):
    first = np.asarray(tensor).reshape(-1)[0]
    return first.item() if isinstance(first, np.generic) else first


def _tensor_default(default_tensor, out_dtype, default_float, default_int64, default_string):
    if default_tensor is not None and np.asarray(default_tensor).size:
        return _first_item(default_tensor)
    if out_dtype is object:
        return default_string
    if np.issubdtype(out_dtype, np.integer):
        return default_int64
    return default_float


@kernel("CategoryMapper", domain=ML)
def category_mapper(ctx, x, cats_int64s=None, cats_strings=None, default_int64=-1,
                    default_string="_Unused"):
    ints, strings = cats_int64s or [], cats_strings or []
    if len(ints) != len(strings):
        raise ValueError(f"CategoryMapper: {len(strings)} cats_strings but {len(ints)} cats_int64s")
    if x.dtype == object:
        return _lookup(x, dict(zip(strings, ints)), np.int64, default_int64)
    return _lookup(x.astype(np.int64), dict(zip(ints, strings)), object, default_string)


@kernel("CastMap", domain=ML)
def cast_map(ctx, x, cast_to="TO_FLOAT", map_form="DENSE", max_map=1):
    """map(int64 -> string|float) to a [1, K] tensor ordered by key."""
    if not isinstance(x, dict):
        raise TypeError(f"CastMap: expected a map, got {type(x).__name__}")
    keys = sorted(x)
    if cast_to == "TO_FLOAT":
        convert, dtype, pad = _to_float, np.float32, 0.0
    elif cast_to == "TO_INT64":
        convert, dtype, pad = _to_int64, np.int64, 0
    elif cast_to == "TO_STRING":
        convert, dtype, pad = _to_string, object, "0.f"
    else:
        raise ValueError(f"CastMap: cast_to must be TO_FLOAT, TO_STRING or TO_INT64, "
                         f"got {cast_to!r}")
    if map_form == "DENSE":
        return np.array([convert(x[k]) for k in keys], dtype=dtype).reshape(1, -1)
    if map_form != "SPARSE":
        raise ValueError(f"CastMap: map_form must be DENSE or SPARSE, got {map_form!r}")
    if keys and int(keys[0]) < 0:
        raise ValueError(f"CastMap: negative key {keys[0]} with map_form SPARSE")
    out = np.full((1, max_map), pad, dtype=dtype)
    for k in keys:
        if int(k) < max_map:
            out[0, int(k)] = convert(x[k])
    return out


def _to_float(v) -> float:
    return float(_text(v)) if isinstance(v, (str, bytes)) else float(v)


def _to_int64(v) -> int:
    return int(_text(v)) if isinstance(v, (str, bytes)) else int(float(v))


def _to_string(v) -> str:
    return _text(v) if isinstance(v, (str, bytes)) else f"{float(v):f}"


@kernel("DictVectorizer", domain=ML)
def dict_vectorizer(ctx, x, int64_vocabulary=None, string_vocabulary=None):
    """map(key -> value) to a [1, V] tensor in vocabulary order (zero where absent).

    A sequence of maps gives one row per map.
    """
    vocabulary = string_vocabulary if string_vocabulary else (int64_vocabulary or [])
    maps = x if isinstance(x, list) else [x]
    values = [v for m in maps for v in m.values()]
    dtype = _map_value_dtype(values)
    fill = "" if dtype is object else 0
    out = np.full((len(maps), len(vocabulary)), fill, dtype=dtype)
    position = {_map_key(k): i for i, k in enumerate(vocabulary)}
    for row, m in enumerate(maps):
        for k, v in m.items():
            i = position.get(_map_key(k))
            if i is not None:
                out[row, i] = v
    return out


def _map_key(k):
    if isinstance(k, np.generic):
        k = k.item()
    return _text(k)


def _map_value_dtype(values: list):
    if not values:
        return np.float32
    v = values[0]
    if isinstance(v, np.ndarray) or isinstance(v, np.generic):
        return object if np.asarray(v).dtype.kind in "OUS" else np.asarray(v).dtype
    if isinstance(v, (str, bytes)):
        return object
    if isinstance(v, (bool, int)):
        return np.int64
    return np.float32


@kernel("FeatureVectorizer", domain=ML)
def feature_vectorizer(ctx, *xs, inputdimensions=None):
    """Concatenate the inputs' features; each input is cut or zero-padded to its declared width."""
    widths = list(inputdimensions or [])
    if len(widths) != len(xs):
        raise ValueError(f"FeatureVectorizer: {len(xs)} inputs but {len(widths)} inputdimensions")
    if not xs:
        return np.zeros((1, 0), dtype=np.float32)
    n = xs[0].shape[0] if xs[0].ndim > 1 else 1
    out = np.zeros((n, int(sum(widths))), dtype=np.float32)
    start = 0
    for x, width in zip(xs, widths):
        rows = np.asarray(x).reshape(n, -1).astype(np.float32)
        take = min(width, rows.shape[1])
        out[:, start:start + take] = rows[:, :take]
        start += width
    return out


@kernel("ZipMap", domain=ML)
def zipmap(ctx, x, classlabels_int64s=None, classlabels_strings=None):
    """One {label: score} dict per row."""
    labels = classlabels_strings if classlabels_strings else (classlabels_int64s or [])
    if x.ndim == 0 or x.ndim > 2:
        raise ValueError(f"ZipMap: expected rank 1 or 2, got rank {x.ndim}")
    scores = _rows(x)
    if scores.shape[1] != len(labels):
        raise ValueError(f"ZipMap: {scores.shape[1]} scores per row but {len(labels)} class labels")
    keys = [_text(k) if isinstance(k, (str, bytes)) else int(k) for k in labels]
    return [dict(zip(keys, row)) for row in scores.astype(np.float32).tolist()]


# ---------------------------------------------------------------------------------------------
# linear models
# ---------------------------------------------------------------------------------------------


def _linear_weights(coefficients, intercepts, targets: int) -> tuple:
    """(coefficients as float64 [features, targets], intercepts as float64 or None)."""
    coef = np.asarray(coefficients, dtype=np.float32)
    if targets <= 0 or coef.size % targets:
        raise ValueError(f"{coef.size} coefficients do not split into {targets} targets")
    coef = np.ascontiguousarray(coef.reshape(targets, -1).T, dtype=np.float64)
    return coef, (np.asarray(intercepts, dtype=np.float64) if len(intercepts) else None)


def _class_labels(attrs: dict, ints: str) -> tuple:
    """(labels, whether they are strings, them as an int64 or object array) of a classifier
    from classlabels_strings or its integer attribute `ints`."""
    strings = attrs.get("classlabels_strings") or []
    labels: list = list(strings) if strings else list(attrs.get(ints) or [])
    return labels, bool(strings), np.array(labels, dtype=object if strings else np.int64)


def _linear_model(attrs: dict, targets_of):
    """weights(features) -> (coef, bias, targets, native rows or None) for a linear node,
    converted once per input width; `targets_of(features)` says how many targets its
    coefficients hold."""
    coefficients = attrs.get("coefficients") or []
    intercepts = attrs.get("intercepts") or []
    made: dict = {}

    def weights(features: int) -> tuple:
        w = made.get(features)
        if w is None:
            targets = targets_of(features)
            coef, bias = _linear_weights(coefficients, intercepts, targets)
            native = native_linear.LinearRows(coef, bias) if native_linear.available() \
                else None
            w = made[features] = (coef, bias, targets, native)
        if w[0].shape[0] != features:
            raise ValueError(f"the input has {features} features; the coefficients expect "
                             f"{w[0].shape[0]}")
        return w
    return weights


def _scores_of(v: np.ndarray, coef: np.ndarray, bias) -> np.ndarray:
    """float32 [N, targets] of rows v times coef plus bias, in float64: v widened to
    float64, the bias added to the finished products (the native kernel's order too)."""
    scores = np.dot(v, coef)         # v widened to float64 (coef is), one call
    if bias is not None:
        scores += bias
    return scores.astype(np.float32)


@bound_kernel("LinearRegressor")
def linear_regressor(ctx, attrs: dict):
    transform = _check_transform(attrs.get("post_transform", "NONE"))
    targets = attrs.get("targets", 1)
    weights = _linear_model(attrs, lambda features: targets)

    def run(ctx, x):
        v = _rows_f32(x)
        coef, bias, targets, native = weights(v.shape[1])
        if native is not None and transform in native_linear.TRANSFORMS:
            # one column takes no transform but PROBIT (_post_transform)
            return native(v, transform if targets > 1 else "NONE")[0]
        return _post_transform(_scores_of(v, coef, bias), transform)
    return run


@bound_kernel("LinearClassifier")
def linear_classifier(ctx, attrs: dict):
    get = attrs.get
    transform = _check_transform(get("post_transform", "NONE"))
    labels, strings, label_values = _class_labels(attrs, "classlabels_ints")
    coefficients, intercepts = get("coefficients") or [], get("intercepts") or []
    weights = _linear_model(attrs, lambda features: len(intercepts) if intercepts else
                            len(coefficients) // max(features, 1))
    if len(labels) == 2:
        positive, negative = labels[1], labels[0]
    else:
        positive, negative = ("1", "0") if strings else (1, 0)

    def run(ctx, x):
        v = _rows_f32(x)
        coef, bias, targets, native = weights(v.shape[1])
        if native is not None and targets > 1 and transform in native_linear.TRANSFORMS:
            scores, best = native(v, transform)
            return label_values[best], scores
        scores = _scores_of(v, coef, bias)
        if targets == 1:
            label = np.where(scores[:, 0] > 0, positive, negative).astype(
                object if strings else np.int64)
            if len(labels) == 2:
                return label, _two_columns(scores[:, 0], np.int64(0), transform)
            return label, _post_transform(scores, transform)
        return label_values[scores.argmax(axis=1)], _post_transform(scores, transform)
    return run


# ---------------------------------------------------------------------------------------------
# support vector machines
# ---------------------------------------------------------------------------------------------


def _kernel_params(kernel_params) -> tuple:
    if kernel_params:
        gamma, coef0, degree = (list(kernel_params) + [0.0, 0.0, 0.0])[:3]
        return float(np.float32(gamma)), float(np.float32(coef0)), float(np.float32(degree))
    return 0.0, 0.0, 0.0


class _SupportVectors:
    """A node's support vectors [V, F] in float64, with what every run's kernel reads of
    them made once: their transpose (contiguous) and their squared norms."""

    def __init__(self, values, count: int):
        self.vectors = _f32_as_f64(values).reshape(count, -1)
        self.transposed = np.ascontiguousarray(self.vectors.T)
        self.norms = (self.vectors * self.vectors).sum(axis=1)

    @property
    def features(self) -> int:
        return self.vectors.shape[1]

    def kernel(self, x: np.ndarray, kind: str, params: tuple) -> np.ndarray:
        """[N, V] kernel values between the rows of x and the support vectors (float64)."""
        gamma, coef0, degree = params
        dot = x @ self.transposed
        if kind == "RBF":
            sq = (x * x).sum(axis=1)[:, None] + self.norms - 2.0 * dot
            return np.exp(-gamma * np.maximum(sq, 0.0))
        if kind == "LINEAR":
            return dot
        if kind == "POLY":
            return (gamma * dot + coef0) ** degree
        if kind == "SIGMOID":
            return np.tanh(gamma * dot + coef0)
        raise ValueError(f"kernel_type must be LINEAR, POLY, RBF or SIGMOID, got {kind!r}")


@kernel("SVMRegressor", domain=ML)
def svm_regressor(ctx, x, coefficients=None, kernel_params=None, kernel_type="LINEAR",
                  n_supports=0, one_class=0, post_transform="NONE", rho=None,
                  support_vectors=None):
    v = _rows_f32(x).astype(np.float64)
    coef, vectors = _cache.get(ctx, "svm", lambda: (
        _f32_as_f64(coefficients),
        _SupportVectors(support_vectors, n_supports) if n_supports > 0 else None))
    bias = float(np.float32((rho or [0.0])[0]))
    if n_supports > 0:
        _check_features(v, vectors.features)
        scores = vectors.kernel(v, kernel_type, _kernel_params(kernel_params)) @ coef
    else:
        _check_features(v, coef.size)
        scores = v @ coef
    scores = (scores + bias).astype(np.float32).reshape(-1, 1)
    if one_class:
        scores = np.where(scores > 0, np.float32(1), np.float32(-1))
    return scores


def _check_features(v: np.ndarray, expected: int) -> None:
    if v.shape[1] != expected:
        raise ValueError(f"the input has {v.shape[1]} features; the model expects {expected}")


@bound_kernel("SVMClassifier")
def svm_classifier(ctx, attrs: dict):
    get = attrs.get
    post_transform = _check_transform(get("post_transform", "NONE"))
    kernel_type = get("kernel_type", "LINEAR")
    labels, _, label_values = _class_labels(attrs, "classlabels_ints")
    classes = len(labels)
    if classes == 0:
        raise ValueError("SVMClassifier: one of classlabels_ints, classlabels_strings is required")
    prob_a, prob_b = get("prob_a") or [], get("prob_b") or []
    if len(prob_a) != len(prob_b):
        raise ValueError(f"SVMClassifier: {len(prob_a)} prob_a but {len(prob_b)} prob_b values")
    counts = [int(c) for c in (get("vectors_per_class") or [])]
    if sum(counts) > 0 and len(counts) != classes:
        raise ValueError(f"SVMClassifier: {len(counts)} vectors_per_class for {classes} classes")
    coef = _f32_as_f64(get("coefficients"))
    rho = _f32_as_f64(get("rho") or [0.0])
    vectors = _SupportVectors(get("support_vectors"), sum(counts)) if sum(counts) else None
    features = vectors.features if vectors is not None else 0
    prob_a32, prob_b32 = np.asarray(prob_a, np.float32), np.asarray(prob_b, np.float32)
    all_positive = bool((coef >= 0).all())
    params = _kernel_params(get("kernel_params"))
    have_proba = prob_a32.size > 0
    pairs = classes * (classes - 1) // 2
    native = None
    if vectors is not None and native_svm.available():
        native = native_svm.classifier(vectors.vectors, coef, rho, counts, kernel_type, params,
                                       prob_a32, prob_b32)
    linear = None if vectors is not None else _linear_model(
        {"coefficients": get("coefficients") or []}, lambda features: classes)

    def with_vectors(v32: np.ndarray) -> tuple:
        """(top class, final scores) of a model with support vectors."""
        if native is not None and v32.shape[0] <= _NATIVE_SVM_ROWS:
            _check_features(v32, features)
            maxclass, pair_scores, scores = native.classify(v32)
        else:
            maxclass, pair_scores = _svc_pairwise(v32.astype(np.float64), coef, rho, counts,
                                                  vectors, kernel_type, params)
            if have_proba:
                scores = _svc_probabilities(pair_scores, prob_a32, prob_b32, classes)
        if have_proba:
            return maxclass, _post_transform(scores, post_transform)
        if classes > 2:
            return maxclass, _post_transform(pair_scores, post_transform)
        mode = np.int64(2 if post_transform == "NONE" else 0)
        return maxclass, _two_columns(pair_scores[:, 0], mode, post_transform)

    def run(ctx, x):
        v32 = _rows_f32(x)
        if vectors is not None:
            maxclass, final = with_vectors(v32)
            return label_values[maxclass], final
        w, _, _, _ = linear(v32.shape[1])
        scores = _scores_of(v32, w, None) + np.float32(rho[0])
        maxclass = scores.argmax(axis=1)
        max_weight = scores[np.arange(scores.shape[0]), maxclass]
        label = label_values[maxclass]
        if pairs == 1 and not have_proba:
            # binary linear: onnxruntime's choice between the positive label and the top
            # class (with support vectors its weight stays 0: the top class is the label)
            positive = max_weight >= 0.5 if all_positive else max_weight > 0
            label = np.where(positive, label_values[np.ones_like(maxclass)], label)
        return label, _post_transform(scores, post_transform)
    return run


# rows up to which an SVMClassifier runs in svm.c's one call (its libm exp and scalar sums,
# ~5 us a row of 120 vectors) rather than numpy's (~30 us of calls, nearly all fixed, then
# BLAS and a vectorised exp: faster per row)
_NATIVE_SVM_ROWS = 8


def _f32_as_f64(values) -> np.ndarray:
    """An attribute's float list as float32 values widened to float64 (onnxruntime reads
    the attributes as float32 and computes SVM kernels in double)."""
    return np.asarray(values or [], dtype=np.float32).astype(np.float64)


def _svc_pairwise(v, coef, rho, counts, vectors, kernel_type, params):
    """The class with the most one-vs-one votes [N] and libsvm's decision values
    [N, pairs]."""
    total = sum(counts)
    _check_features(v, vectors.features)
    kernels = vectors.kernel(v, kernel_type, params)                # [N, total]
    classes = len(counts)
    coef = coef.reshape(-1, total)
    if classes == 2:            # one pair, whose coefficients are the first row throughout
        s = kernels @ coef[0] + rho[0]
        # votes (s > 0, s <= 0): class 1 wins only where s <= 0 (NaN ties: class 0)
        return (s <= 0).astype(np.int64), s.astype(np.float32).reshape(-1, 1)
    starts = np.concatenate([[0], np.cumsum(counts)])
    n = v.shape[0]
    scores = np.zeros((n, classes * (classes - 1) // 2), dtype=np.float64)
    votes = np.zeros((n, classes), dtype=np.int64)
    k = 0
    for i in range(classes):
        si = slice(starts[i], starts[i + 1])
        for j in range(i + 1, classes):
            sj = slice(starts[j], starts[j + 1])
            s = kernels[:, si] @ coef[j - 1, si] + kernels[:, sj] @ coef[i, sj] + rho[k]
            scores[:, k] = s
            votes[:, i] += s > 0
            votes[:, j] += s <= 0
            k += 1
    return votes.argmax(axis=1), scores.astype(np.float32)


def _svc_probabilities(pair_scores, prob_a, prob_b, classes: int) -> np.ndarray:
    """Platt-scaled pairwise probabilities coupled into class probabilities (libsvm)."""
    a = prob_a[:pair_scores.shape[1]]
    b = prob_b[:pair_scores.shape[1]]
    p = 1 - _logistic(pair_scores * a + b)
    np.maximum(p, np.float32(1e-7), out=p)
    np.minimum(p, np.float32(1 - 1e-7), out=p)
    return _couple_probabilities(p, classes)


@functools.lru_cache(maxsize=64)
def _pairs(classes: int) -> tuple:
    """The (i, j) class pairs, i < j, in libsvm's order (np.triu_indices, made once per k)."""
    return np.triu_indices(classes, 1)


# rows up to which a two-class coupling runs on float32 scalars (~6 us a row) rather than
# vectorised over rows (~70 us of numpy calls, nearly all fixed): the same values either way
_SCALAR_COUPLING_ROWS = 8


def _couple_probabilities(p: np.ndarray, k: int) -> np.ndarray:
    """Wu, Lin & Weng's pairwise coupling (libsvm's multiclass_probability) of the pairwise
    probabilities p [N, pairs] (pair (i, j), i < j, in libsvm's order: P(i over j)) into
    [N, k] class probabilities, all rows at once.

    Each row iterates until its own stopping test passes, as the per-row algorithm does.
    """
    n = p.shape[0]
    if k == 2 and n <= _SCALAR_COUPLING_ROWS:
        return np.array([_couple_two(r01, 1 - r01) for r01 in p[:, 0]],
                        np.float32).reshape(n, 2)
    r = np.zeros((n, k, k), dtype=np.float32)
    iu, ju = _pairs(k)
    r[:, iu, ju] = p
    r[:, ju, iu] = 1 - p
    rt = np.swapaxes(r, 1, 2)
    q = -(rt * r)                                       # Q[t, j] = -r[j, t] * r[t, j]
    diag = (rt * rt).sum(axis=2) - (np.diagonal(r, axis1=1, axis2=2) ** 2)
    q[:, np.arange(k), np.arange(k)] = diag
    q = q.astype(np.float32)
    p = np.full((n, k), 1.0 / k, dtype=np.float32)
    eps = np.float32(0.005 / k)
    active = np.arange(n)
    for _ in range(max(100, k)):
        if active.size == 0:
            break
        qa, pa = q[active], p[active]
        qp = np.einsum("nij,nj->ni", qa, pa)
        pqp = (pa * qp).sum(axis=1)
        done = np.abs(qp - pqp[:, None]).max(axis=1) < eps
        keep = ~done
        active, qa, pa, qp, pqp = active[keep], qa[keep], pa[keep], qp[keep], pqp[keep]
        for t in range(k):
            qtt = qa[:, t, t]
            diff = (-qp[:, t] + pqp) / qtt
            pa[:, t] += diff
            scale = 1 + diff
            pqp = (pqp + diff * (diff * qtt + 2 * qp[:, t])) / scale / scale
            qp = (qp + diff[:, None] * qa[:, t, :]) / scale[:, None]
            pa = pa / scale[:, None]
        p[active] = pa
    return p


def _couple_two(r01, r10) -> list:
    """_couple_probabilities of one two-class row, on float32 scalars: the vectorised code's
    operations in its order (two-term sums, whose order cannot matter), so the same bits."""
    q = [[r10 * r10, -(r10 * r01)], [-(r01 * r10), r01 * r01]]
    p = [np.float32(0.5), np.float32(0.5)]
    eps = np.float32(0.005 / 2)
    for _ in range(100):
        qp = [q[0][0] * p[0] + q[0][1] * p[1], q[1][0] * p[0] + q[1][1] * p[1]]
        pqp = p[0] * qp[0] + p[1] * qp[1]
        if max(abs(qp[0] - pqp), abs(qp[1] - pqp)) < eps:
            break
        for t in range(2):
            qtt = q[t][t]
            diff = (-qp[t] + pqp) / qtt
            p[t] += diff
            scale = 1 + diff
            pqp = (pqp + diff * (diff * qtt + 2 * qp[t])) / scale / scale
            qp = [(qp[j] + diff * q[t][j]) / scale for j in range(2)]
            p = [v / scale for v in p]
    return p


# ---------------------------------------------------------------------------------------------
# tree ensembles
# ---------------------------------------------------------------------------------------------

_MODE_CODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3,
               "BRANCH_EQ": 4, "BRANCH_NEQ": 5, "BRANCH_MEMBER": 6, "LEAF": 7}
_LEAF = 7
_COMPARE = {0: np.less_equal, 1: np.less, 2: np.greater_equal, 3: np.greater,
            4: np.equal, 5: np.not_equal}
_AGGREGATES_V5 = {0: "AVERAGE", 1: "SUM", 2: "MIN", 3: "MAX"}


TREE_METHODS = ("level", "paths", "decisions")
# tests: within `forced_tree_method(m)`, tree ensembles find their leaves by m where it
# applies (else level by level) instead of the fastest measured
FORCED_TREE_METHOD = ForcedChoice("tree method", TREE_METHODS)
forced_tree_method = FORCED_TREE_METHOD.forced


class _Forest:
    """All trees as one flat node table.

    Node i compares x[:, feature[i]] with threshold[i] by mode[i] (a _COMPARE code) and goes to
    true_next[i] or false_next[i]; NaN goes to the true side where missing_true[i]. Leaves
    (mode _LEAF) own weights w_target/w_value[leaf_start[i] : leaf_start[i] + leaf_count[i]].
    """

    def __init__(self, feature, threshold, mode, missing_true, true_next, false_next, roots,
                 leaf_of_weight, w_target, w_value):
        self.feature = np.asarray(feature, dtype=np.int64)
        self.threshold = threshold
        self.mode = np.asarray(mode, dtype=np.int8)
        self.missing_true = np.asarray(missing_true, dtype=bool)
        self.true_next = np.asarray(true_next, dtype=np.int64)
        self.false_next = np.asarray(false_next, dtype=np.int64)
        self.roots = np.asarray(roots, dtype=np.int64)
        self.is_leaf = self.mode == _LEAF
        # leaves may be visited again while other pairs finish their path: read feature 0 there
        self.feature = np.where(self.is_leaf, 0, self.feature)
        if (self.feature < 0).any():
            raise ValueError(f"negative feature id {int(self.feature.min())} in a tree node")
        # children[2 * i] is the false branch of node i, children[2 * i + 1] the true one
        self.children = np.stack([self.false_next, self.true_next], axis=1).reshape(-1)
        self.has_missing = bool(self.missing_true[~self.is_leaf].any())
        self.modes_used = sorted(set(np.unique(self.mode[~self.is_leaf]).tolist()))
        interior = ~self.is_leaf
        self.max_feature = int(self.feature[interior].max()) if interior.any() else -1
        # weights grouped by leaf (CSR)
        order = np.argsort(leaf_of_weight, kind="stable")
        leaf_of_weight = np.asarray(leaf_of_weight, dtype=np.int64)[order]
        self.w_target = np.asarray(w_target, dtype=np.int64)[order]
        self.w_value = np.asarray(w_value, dtype=np.float64)[order]
        n = self.mode.size
        self.leaf_count = np.bincount(leaf_of_weight, minlength=n).astype(np.int64)
        self.leaf_start = np.concatenate([[0], np.cumsum(self.leaf_count)[:-1]]).astype(np.int64)
        self.one_weight_per_leaf = bool((self.leaf_count[self.is_leaf] == 1).all())
        if self.one_weight_per_leaf:   # the weight of each leaf, indexed by node
            first = np.minimum(self.leaf_start, max(self.w_target.size - 1, 0))
            self.node_target = self.w_target[first] if self.w_target.size else self.leaf_count
            self.node_value = self.w_value[first] if self.w_value.size else self.leaf_count * 0.0
        self.paths = _PathMatrices.build(self)     # None: the trees are walked instead
        self.depth = self._max_depth()             # None: some tree has a cycle
        self._methods: dict = {}                   # batch size class -> leaves method

    def _max_depth(self):
        """The most decisions on any path from a root to its leaf, or None when a path
        loops (found by following every branch level by level)."""
        frontier = np.unique(self.roots)
        for depth in range(self.mode.size + 1):
            frontier = frontier[~self.is_leaf[frontier]]
            if not frontier.size:
                return depth
            frontier = np.unique(np.concatenate([self.true_next[frontier],
                                                 self.false_next[frontier]]))
        return None

    @property
    def n_trees(self) -> int:
        return self.roots.size

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """[N, T] index of the leaf each row reaches in each tree.

        Three exact methods, whose costs depend on the batch, the tree count and depth and the
        machine: level by level, by path matrices (`_PathMatrices`, where the trees are small
        enough) and by every node's decision (where N x nodes stays small). The first batch of
        each size class (a power of two) times each method once and keeps the fastest for that
        class, as FFT and convolution libraries choose their algorithm by measuring."""
        self._check_features(x)
        forced = FORCED_TREE_METHOD.value
        if forced is not None:
            return self._candidates(x.shape[0]).get(forced, self._leaves_by_level)(x)
        size_class = max(x.shape[0], 1).bit_length()
        method = self._methods.get(size_class)
        if method is not None:
            return method(x)
        timed = []
        for order, method in enumerate(self._candidates(x.shape[0]).values()):
            started = time.perf_counter()
            leaves = method(x)
            timed.append((time.perf_counter() - started, order, method))
        self._methods[size_class] = min(timed, key=lambda t: t[:2])[2]
        return leaves

    MAX_DECISIONS = 1 << 22        # N x nodes entries of the decision table (32 MB of int64)

    def _candidates(self, n: int) -> dict:
        """TREE_METHODS name -> method, those that apply to this forest and batch."""
        methods = {"level": self._leaves_by_level}
        if self.paths is not None:
            methods["paths"] = lambda x: self.paths.leaves(self, x)
        if self.depth is not None and n * self.mode.size <= self.MAX_DECISIONS:
            methods["decisions"] = self._leaves_by_decisions
        return methods

    def _leaves_by_decisions(self, x: np.ndarray) -> np.ndarray:
        """[N, T] leaf indices from every node's decision for every row at once ([N, nodes]
        next-node table), then `depth` steps of one gather each over the (row, tree) pairs:
        a fixed handful of numpy calls plus one per level, whatever the batch."""
        n, width = x.shape[0], self.mode.size
        values = np.asarray(x, dtype=self.threshold.dtype)[:, self.feature]     # [N, nodes]
        go_true = self._compare(values, slice(None))            # type: ignore[arg-type]
        base = np.arange(0, n * width, width, dtype=np.int64)[:, None]
        following = np.where(go_true, self.true_next, self.false_next)
        following += base
        following = following.reshape(-1)
        current = (self.roots + base).reshape(-1)
        for _ in range(self.depth):
            current = following[current]
        return current.reshape(n, -1) - base

    def _leaves_by_level(self, x: np.ndarray) -> np.ndarray:
        """[N, T] index of the leaf each row reaches in each tree.

        One step per tree level over the (row, tree) pairs still on an interior node, kept in
        compact arrays: their current node and the offset of their row in the flat input.
        Leaves point to themselves, so pairs that reached one may stay in the arrays; they are
        dropped once they make up a good part of them.
        """
        n, t = x.shape[0], self.roots.size
        f = x.shape[1]
        flat_x = np.ascontiguousarray(x, dtype=self.threshold.dtype).reshape(-1)
        index = np.int32 if max(n * f, n * t, 2 * self.mode.size) < 2**31 else np.int64
        leaf = np.tile(self.roots.astype(index), n)
        active = np.flatnonzero(~self.is_leaf[leaf]).astype(index)
        current = leaf[active]
        offset = (active // t) * f
        children = self.children.astype(index, copy=False)
        for _ in range(self.mode.size + 1):
            values = flat_x[offset + self.feature[current]]
            go_true = self._compare(values, current)
            current = children[2 * current + go_true]
            done = self.is_leaf[current]
            finished = np.count_nonzero(done)
            if finished == done.size:
                leaf[active] = current
                return leaf.reshape(n, t)
            if finished * 4 >= done.size:
                leaf[active[done]] = current[done]
                keep = ~done
                active, current, offset = active[keep], current[keep], offset[keep]
        raise ValueError("tree ensemble: a tree has a cycle (a node is reached twice on a path)")

    def _compare(self, values: np.ndarray, nd: np.ndarray) -> np.ndarray:
        """Whether each value goes to its node's true branch (nd: the nodes, any shape)."""
        thresholds = self.threshold[nd]
        if len(self.modes_used) == 1:
            result = _COMPARE[self.modes_used[0]](values, thresholds)
        else:                           # nodes may broadcast against the rows' values
            modes = self.mode[nd]
            result = np.zeros(values.shape, dtype=bool)
            for code in self.modes_used:
                result |= (modes == code) & _COMPARE[code](values, thresholds)
        if self.has_missing:
            result |= self.missing_true[nd] & np.isnan(values)
        return result

    def aggregate(self, x: np.ndarray, n_targets: int, function: str, base=None):
        """Per-row, per-target aggregated leaf weights [N, C] (float64) and which were hit:
        in one native call where the CPU kernels are built (cpu_kernels/forest.c: the same
        decisions and sums), else by numpy. With `base` (float64, one value per target),
        hit targets get it added and missed ones are 0 (onnxruntime's regressors)."""
        if function not in ("SUM", "AVERAGE", "MIN", "MAX"):
            raise ValueError(f"aggregate_function must be AVERAGE, SUM, MIN or MAX, "
                             f"got {function!r}")
        tables = self._native_tables()
        if tables is not None:
            self._check_features(x)
            return native_forest.aggregate(tables, x, n_targets, function, base)
        n = x.shape[0]
        scores = np.zeros((n, n_targets), dtype=np.float64)
        hit = np.zeros((n, n_targets), dtype=bool)
        chunk = max(1, 2_000_000 // max(self.n_trees, 1))
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            leaves = self.leaves(x[start:stop])
            rows, targets, values = self._weights_of(leaves)
            if targets.size and (targets.min() < 0 or targets.max() >= n_targets):
                raise ValueError(f"a leaf weight targets index {int(targets.max())}, outside "
                                 f"[0, {n_targets})")
            flat = rows * n_targets + targets
            size = (stop - start) * n_targets
            block_hit = np.bincount(flat, minlength=size) > 0
            if function in ("SUM", "AVERAGE"):
                block = np.bincount(flat, weights=values, minlength=size)
            elif function == "MIN":
                block = np.full(size, np.inf)
                np.minimum.at(block, flat, values)
            else:                                   # MAX (checked above)
                block = np.full(size, -np.inf)
                np.maximum.at(block, flat, values)
            block_hit = block_hit.reshape(-1, n_targets)
            scores[start:stop] = np.where(block_hit, block.reshape(-1, n_targets), 0.0)
            hit[start:stop] = block_hit
        if function == "AVERAGE" and self.n_trees:
            scores /= self.n_trees
        if base is not None:
            scores = np.where(hit, scores + base, 0.0)
        return scores, hit

    def _check_features(self, x: np.ndarray) -> None:
        if x.shape[1] <= self.max_feature:
            raise ValueError(f"a tree node reads feature {self.max_feature} but the input has "
                             f"{x.shape[1]} features")

    def _native_tables(self):
        """The native kernel's tables (made once), or None: no native kernels here, a
        method forced by a test, or a forest the kernel does not take."""
        if FORCED_TREE_METHOD.value is not None or not native_forest.available():
            return None
        if not hasattr(self, "_tables"):
            self._tables = native_forest.tables(self)
        return self._tables

    def _weights_of(self, leaves: np.ndarray):
        """(row, target, value) for every weight of every reached leaf."""
        t = leaves.shape[1]
        flat = leaves.reshape(-1)
        if self.one_weight_per_leaf:
            rows = np.repeat(np.arange(leaves.shape[0], dtype=np.int64), t)
            return rows, self.node_target[flat], self.node_value[flat]
        counts = self.leaf_count[flat]
        owner = np.repeat(np.arange(flat.size, dtype=np.int64), counts)
        offsets = np.arange(owner.size, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts,
                                                                    counts)
        entry = self.leaf_start[flat][owner] + offsets
        return owner // t, self.w_target[entry], self.w_value[entry]


class _PathMatrices:
    """Trees evaluated by products instead of a walk (Hummingbird's GEMM strategy), which
    costs a fixed handful of numpy calls however deep the trees are: small batches pay
    per call, so this beats walking level by level wherever the matrices stay small.

    Per tree t, its interior nodes (padded to I) and leaves (padded to L): cond[n, t, i] is
    whether row n goes to the true branch at interior node i; paths[t, i, l] is +1 where leaf
    l lies under node i's true branch, -1 under its false branch, 0 off its path; and
    depth[t, l] counts the true turns on leaf l's path. sum_i cond * paths equals depth[t, l]
    exactly for the one leaf the row reaches (every other leaf misses a true turn or takes a
    false one), in float32 without rounding (small integers)."""

    MAX_ENTRIES = 1 << 22      # T * I * L: 16 MB of float32 paths at most
    MAX_NODES = 1 << 17        # trees larger than this are walked, not analysed

    def __init__(self, interior, leaves, paths, depth):
        self.interior = interior    # [T, I] node ids (padded with node 0, cond ignored)
        self.leaf_ids = leaves      # [T, L] node ids (padded with -1)
        self.paths = paths          # [T, I, L] float32
        self.depth = depth          # [T, 1, L] float32 (padding: unreachable)

    @classmethod
    def build(cls, forest: "_Forest"):
        if forest.mode.size > cls.MAX_NODES or not forest.n_trees:
            return None
        trees = [cls._paths_of(forest, int(root)) for root in forest.roots]
        if any(t is None for t in trees):
            return None
        width_i = max(1, max(len(inner) for inner, _, _ in trees))
        width_l = max(len(leaves) for _, leaves, _ in trees)
        if len(trees) * width_i * width_l > cls.MAX_ENTRIES:
            return None
        interior = np.zeros((len(trees), width_i), np.int64)
        leaf_ids = np.full((len(trees), width_l), -1, np.int64)
        paths = np.zeros((len(trees), width_i, width_l), np.float32)
        depth = np.full((len(trees), 1, width_l), -1.0, np.float32)    # padding: never hit
        for t, (inner, leaves, turns) in enumerate(trees):
            interior[t, :len(inner)] = inner
            leaf_ids[t, :len(leaves)] = leaves
            row = {node: i for i, node in enumerate(inner)}
            for l, path in enumerate(turns):
                for node, went_true in path:
                    paths[t, row[node], l] = 1.0 if went_true else -1.0
                depth[t, 0, l] = sum(1 for _, went_true in path if went_true)
        return cls(interior, leaf_ids, paths, depth)

    @staticmethod
    def _paths_of(forest: "_Forest", root: int):
        """(interior node ids, leaf ids, per leaf its [(node, went true)] path) of one tree,
        or None when the tree revisits a node (shared subtrees, cycles: walked instead)."""
        inner: list = []
        leaves: list = []
        turns: list = []
        seen: set = set()
        stack: list = [(root, [])]
        while stack:
            node, path = stack.pop()
            if node in seen or len(seen) > _PathMatrices.MAX_NODES:
                return None
            seen.add(node)
            if forest.is_leaf[node]:
                leaves.append(node)
                turns.append(path)
                continue
            inner.append(node)
            stack.append((int(forest.false_next[node]), path + [(node, False)]))
            stack.append((int(forest.true_next[node]), path + [(node, True)]))
        return inner, leaves, turns

    def leaves(self, forest: "_Forest", x: np.ndarray) -> np.ndarray:
        n, (t, width_l) = x.shape[0], self.leaf_ids.shape
        out = np.empty((n, t), np.int64)
        step = max(1, self.MAX_ENTRIES // max(t * (self.interior.shape[1] + width_l), 1))
        rows = np.asarray(x, dtype=forest.threshold.dtype)
        for start in range(0, n, step):
            block = rows[start:start + step]
            values = block[:, forest.feature[self.interior]]              # [n, T, I]
            cond = forest._compare(values, self.interior).astype(np.float32)
            score = np.matmul(cond.transpose(1, 0, 2), self.paths)       # [T, n, L]
            reached = np.argmax(score == self.depth, axis=2)              # [T, n]
            out[start:start + step] = np.take_along_axis(self.leaf_ids, reached, axis=1).T
        return out


def _threshold_dtype(x: np.ndarray, *tensors):
    """float64 comparisons for double inputs or double-precision thresholds, else float32."""
    if x.dtype == np.float64 or any(t is not None and t.dtype == np.float64 for t in tensors):
        return np.float64
    return np.float32


def _forest_from_ids(nodes_treeids, nodes_nodeids, nodes_featureids, nodes_modes,
                     nodes_truenodeids, nodes_falsenodeids, nodes_missing_value_tracks_true,
                     thresholds, weight_treeids, weight_nodeids, weight_ids, weights,
                     threshold_dtype) -> _Forest:
    """The (tree id, node id) format of TreeEnsembleRegressor/Classifier."""
    tree = np.asarray(nodes_treeids, dtype=np.int64)
    node = np.asarray(nodes_nodeids, dtype=np.int64)
    n = tree.size
    for name, seq in (("nodes_nodeids", node), ("nodes_featureids", nodes_featureids),
                      ("nodes_modes", nodes_modes), ("nodes_truenodeids", nodes_truenodeids),
                      ("nodes_falsenodeids", nodes_falsenodeids), ("nodes_values", thresholds)):
        if len(seq) != n:
            raise ValueError(f"{name} has {len(seq)} entries; nodes_treeids has {n}")
    try:
        mode = np.array([_MODE_CODES[m] for m in nodes_modes], dtype=np.int8)
    except KeyError as e:
        raise ValueError(f"unknown node mode {e.args[0]!r}") from None
    if (mode == 6).any():
        raise ValueError("BRANCH_MEMBER is only valid in TreeEnsemble (ai.onnx.ml opset 5)")
    locate = _id_locator(tree, node)
    leaf = mode == _LEAF
    true_next = np.where(leaf, np.arange(n), locate(tree, np.asarray(nodes_truenodeids)))
    false_next = np.where(leaf, np.arange(n), locate(tree, np.asarray(nodes_falsenodeids)))
    if ((true_next < 0) | (false_next < 0)).any():
        bad = np.flatnonzero((true_next < 0) | (false_next < 0))[0]
        raise ValueError(f"node {int(node[bad])} of tree {int(tree[bad])} points to a node that "
                         f"does not exist")
    roots: Any = np.flatnonzero(np.concatenate([[True], tree[1:] != tree[:-1]])) if n else []
    missing = np.zeros(n, dtype=bool)
    if nodes_missing_value_tracks_true:
        m = np.asarray(nodes_missing_value_tracks_true, dtype=np.int64)[:n]
        missing[:m.size] = m == 1
    owner = locate(np.asarray(weight_treeids, dtype=np.int64),
                   np.asarray(weight_nodeids, dtype=np.int64))
    if (owner < 0).any():
        raise ValueError("a weight refers to a node that does not exist")
    on_leaf = leaf[owner]   # weights on interior nodes are ignored (old converters wrote them)
    return _Forest(np.asarray(nodes_featureids, dtype=np.int64),
                   np.asarray(thresholds).astype(threshold_dtype), mode, missing,
                   true_next, false_next, roots, owner[on_leaf],
                   np.asarray(weight_ids, dtype=np.int64)[on_leaf],
                   np.asarray(weights, dtype=np.float64)[on_leaf])


def _id_locator(tree: np.ndarray, node: np.ndarray):
    """A function (tree ids, node ids) -> position in the node list, -1 where absent."""
    span = int(node.max()) + 1 if node.size else 1
    if node.size and node.min() < 0:
        raise ValueError("node ids must be >= 0")
    keys = tree * span + node
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    if sorted_keys.size > 1 and (sorted_keys[1:] == sorted_keys[:-1]).any():
        dup = sorted_keys[1:][sorted_keys[1:] == sorted_keys[:-1]][0]
        raise ValueError(f"node {int(dup % span)} of tree {int(dup // span)} is defined twice")

    def locate(trees: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        trees, nodes = np.asarray(trees, dtype=np.int64), np.asarray(nodes, dtype=np.int64)
        wanted = trees * span + nodes
        pos = np.searchsorted(sorted_keys, wanted)
        pos = np.minimum(pos, max(sorted_keys.size - 1, 0))
        ok = (nodes >= 0) & (nodes < span)
        if sorted_keys.size:
            ok &= sorted_keys[pos] == wanted
        return np.where(ok, order[pos] if sorted_keys.size else -1, -1)

    return locate


def _forest_v5(nodes_featureids, nodes_modes, nodes_splits, nodes_truenodeids,
               nodes_falsenodeids, nodes_trueleafs, nodes_falseleafs,
               nodes_missing_value_tracks_true, membership_values, leaf_targetids, leaf_weights,
               tree_roots, threshold_dtype) -> _Forest:
    """TreeEnsemble (opset 5): interior nodes and leaves in separate lists.

    Interior nodes keep their positions 0 .. n-1, leaves become n .. n + leaves - 1. A
    BRANCH_MEMBER node becomes a chain of BRANCH_EQ tests, one per member, each false side
    leading to the next test and the last one to the node's false branch.
    """
    mode = np.asarray(nodes_modes, dtype=np.int64).reshape(-1).tolist()
    n = len(mode)
    n_leaves = len(leaf_targetids)
    splits = [] if nodes_splits is None else np.asarray(nodes_splits).reshape(-1).tolist()
    for name, seq in (("nodes_featureids", nodes_featureids), ("nodes_splits", splits),
                      ("nodes_truenodeids", nodes_truenodeids),
                      ("nodes_falsenodeids", nodes_falsenodeids),
                      ("nodes_trueleafs", nodes_trueleafs), ("nodes_falseleafs", nodes_falseleafs)):
        if len(seq) != n:
            raise ValueError(f"{name} has {len(seq)} entries; nodes_modes has {n}")
    if np.asarray(leaf_weights).size != n_leaves:
        raise ValueError(f"leaf_weights has {np.asarray(leaf_weights).size} entries; "
                         f"leaf_targetids has {n_leaves}")
    feature = [int(f) for f in nodes_featureids]
    threshold = [float(s) for s in splits]
    true_next = [int(t) + (n if tl else 0) for t, tl in zip(nodes_truenodeids, nodes_trueleafs)]
    false_next = [int(f) + (n if fl else 0)
                  for f, fl in zip(nodes_falsenodeids, nodes_falseleafs)]
    missing = [False] * n
    for i, m in enumerate((nodes_missing_value_tracks_true or [])[:n]):
        missing[i] = m == 1
    # placeholders for the leaves so chained tests get positions after them
    feature += [0] * n_leaves
    threshold += [0.0] * n_leaves
    mode += [_LEAF] * n_leaves
    missing += [False] * n_leaves
    true_next += list(range(n, n + n_leaves))
    false_next += list(range(n, n + n_leaves))
    member_nodes = [i for i in range(n) if mode[i] == 6]
    members = _split_members(membership_values, len(member_nodes))
    for i, values in zip(member_nodes, members):
        mode[i] = 4
        if not values:
            threshold[i] = float("nan")   # an empty set matches nothing: NaN equals nothing
            continue
        chain = [i]
        for _ in values[1:]:
            chain.append(len(mode))
            feature.append(feature[i])
            threshold.append(0.0)
            mode.append(4)
            missing.append(missing[i])
            true_next.append(true_next[i])
            false_next.append(0)
        last_false = false_next[i]
        for k, (node, value) in enumerate(zip(chain, values)):
            threshold[node] = value
            false_next[node] = chain[k + 1] if k + 1 < len(chain) else last_false
    total = len(mode)
    roots = []
    for r in tree_roots:
        r = int(r)
        if nodes_trueleafs[r] and nodes_falseleafs[r] and \
                nodes_truenodeids[r] == nodes_falsenodeids[r]:
            roots.append(true_next[r])   # a tree that is a single leaf
        else:
            roots.append(r)
    true_arr, false_arr = np.asarray(true_next), np.asarray(false_next)
    bad = (true_arr < 0) | (true_arr >= total) | (false_arr < 0) | (false_arr >= total)
    if bad.any():
        raise ValueError(f"node {int(np.flatnonzero(bad)[0])} points outside the node/leaf lists")
    return _Forest(feature, np.asarray(threshold).astype(threshold_dtype), mode, missing,
                   true_arr, false_arr, roots, n + np.arange(n_leaves),
                   np.asarray(leaf_targetids, dtype=np.int64),
                   np.asarray(leaf_weights, dtype=np.float64).reshape(-1))


def _split_members(membership_values, count: int) -> list:
    """The NaN-separated member lists, one per BRANCH_MEMBER node in node order."""
    if count == 0:
        return []
    if membership_values is None:
        raise ValueError("BRANCH_MEMBER nodes need the membership_values attribute")
    groups: list = []
    current: list = []
    for v in np.asarray(membership_values, dtype=np.float64).reshape(-1).tolist():
        if v != v:
            groups.append(current)
            current = []
        else:
            current.append(v)
    if current:
        groups.append(current)
    if len(groups) < count:
        raise ValueError(f"membership_values holds {len(groups)} sets for {count} BRANCH_MEMBER "
                         f"nodes")
    return groups[:count]


def _tree_input(x: np.ndarray) -> np.ndarray:
    """Rows to route through the trees: doubles stay double, everything else is float32."""
    v = _rows(np.asarray(x))
    return v if v.dtype == np.float64 else v.astype(np.float32, copy=False)


def _weights_list(plain, as_tensor):
    if as_tensor is not None:
        return np.asarray(as_tensor).reshape(-1)
    return np.asarray(plain if plain is not None else [], dtype=np.float32)


def _base_values(plain, as_tensor) -> np.ndarray:
    if as_tensor is not None:
        return np.asarray(as_tensor, dtype=np.float64).reshape(-1)
    return np.asarray(plain or [], dtype=np.float32).astype(np.float64)


def _thresholds(nodes_values, nodes_values_as_tensor):
    if nodes_values_as_tensor is not None:
        return np.asarray(nodes_values_as_tensor).reshape(-1)
    return np.asarray(nodes_values if nodes_values is not None else [], dtype=np.float32)


def _forest_of(get, weights_of: str, weights: np.ndarray, dtype) -> "_Forest":
    """The node table of a TreeEnsembleRegressor (`weights_of` "target") or Classifier
    ("class") from its attributes (`get`: the attribute dict's get)."""
    return _forest_from_ids(
        get("nodes_treeids") or [], get("nodes_nodeids") or [], get("nodes_featureids") or [],
        get("nodes_modes") or [], get("nodes_truenodeids") or [], get("nodes_falsenodeids") or [],
        get("nodes_missing_value_tracks_true"),
        _thresholds(get("nodes_values"), get("nodes_values_as_tensor")),
        get(weights_of + "_treeids") or [], get(weights_of + "_nodeids") or [],
        get(weights_of + "_ids") or [], weights, dtype)


def _per_input_type(get, build):
    """state_of(x) -> (x's rows as the trees read them, build(comparison dtype)), built once
    per input dtype: attribute lists are long, a run reads arrays."""
    states: dict = {}

    def state_of(x) -> tuple:
        v = _tree_input(x)
        state = states.get(v.dtype)
        if state is None:
            state = states[v.dtype] = build(_threshold_dtype(v, get("nodes_values_as_tensor")))
        return v, state
    return state_of


@bound_kernel("TreeEnsembleRegressor")
def tree_ensemble_regressor(ctx, attrs: dict):
    get = attrs.get
    transform = _check_transform(get("post_transform", "NONE"))
    function = get("aggregate_function", "SUM")

    def build(dtype) -> tuple:      # (forest, n_targets, base values or None)
        forest = _forest_of(get, "target", _weights_list(get("target_weights"),
                                                         get("target_weights_as_tensor")), dtype)
        n_targets = get("n_targets")
        if n_targets is None:
            n_targets = int(max(get("target_ids") or [0])) + 1
        base = _base_values(get("base_values"), get("base_values_as_tensor"))
        # onnxruntime leaves targets no leaf contributed to at 0, without their base value
        return forest, n_targets, (base if base.size == n_targets else None)
    state_of = _per_input_type(get, build)

    def run(ctx, x):
        v, (forest, n_targets, base) = state_of(x)
        scores, _ = forest.aggregate(v, n_targets, function, base)
        return _post_transform(scores.astype(np.float32), transform)
    return run


@bound_kernel("TreeEnsembleClassifier")
def tree_ensemble_classifier(ctx, attrs: dict):
    get = attrs.get
    transform = _check_transform(get("post_transform", "NONE"))
    labels, strings, label_values = _class_labels(attrs, "classlabels_int64s")
    classes = len(labels)
    if classes == 0:
        raise ValueError("TreeEnsembleClassifier: one of classlabels_int64s, "
                         "classlabels_strings is required")

    def build(dtype) -> tuple:      # (forest, binary case, all weights >= 0, base values)
        weights = _weights_list(get("class_weights"), get("class_weights_as_tensor"))
        return (_forest_of(get, "class", weights, dtype), len(set(get("class_ids") or [])) == 1,
                bool((weights >= 0).all()),
                _base_values(get("base_values"), get("base_values_as_tensor")))
    state_of = _per_input_type(get, build)

    def run(ctx, x):
        v, (forest, binary_case, all_positive, base) = state_of(x)
        scores, hit = forest.aggregate(v, classes, "SUM")
        if classes != 2:
            label, z = _multiclass_tree_scores(scores, hit, base, transform)
            return label_values[label], z
        label, z = _binary_tree_scores(scores, hit, base, transform, binary_case,
                                       all_positive)
        if binary_case or strings:
            return label_values[label], z
        # onnxruntime answers 1/0 rather than a class label when both classes carry weights
        return label, z
    return run


def _multiclass_tree_scores(scores, hit, base, transform):
    """Label index (top scored class) and scores for more than two classes."""
    if base.size:
        k = min(base.size, scores.shape[1])
        scores = scores.copy()
        scores[:, :k] += base[:k]
        hit = hit.copy()
        hit[:, :k] = True
    ranked = np.where(hit, scores, -np.inf)
    label = ranked.argmax(axis=1)
    return label, _post_transform(scores.astype(np.float32), transform)


def _binary_tree_scores(scores, hit, base, transform, binary_case: bool, all_positive: bool):
    """onnxruntime's reading of two-class ensembles: label index and [N, 2] scores.

    Base values only apply to classes some leaf scored. When only class 1 is scored and there
    are two base values, class 1 gets base[1] + score[0] and class 0 its negation (0 if class 0
    was not scored either). When class 1 is not scored and there are fewer than two base
    values, the single class-0 score is expanded to two columns (see `_two_columns`); the
    positive class then needs a score above 0.5 (all weights positive) or above 0.
    """
    if 0 < scores.shape[0] <= _ROWS_ONE_BY_ONE:
        return _binary_tree_scores_by_row(scores, hit, base, transform, binary_case,
                                          all_positive)
    s0, s1 = scores[:, 0], scores[:, 1]
    h0, h1 = hit[:, 0], hit[:, 1]
    n = s0.shape[0]
    mode = np.full(n, -1, dtype=np.int64)
    two = np.ones(n, dtype=bool)
    if base.size == 2:
        new_s1 = np.where(h1, base[1] + s0, s1)
        s0 = np.where(h1, np.where(h0, -new_s1, 0.0), np.where(h0, s0 + base[0], 0.0))
        s1 = new_s1
    elif base.size == 1:
        s0 = np.where(h0, s0 + base[0], s0)
        two = h1.copy()
    elif base.size == 0:
        mode[:] = 3
        two = h1.copy()
    positive_weight = np.where(two & h1, s1, np.where(h0, s0, 0.0))
    if binary_case:
        if all_positive:
            positive = positive_weight > 0.5
            mode = np.where(positive, 0, 1)
        else:
            positive = positive_weight > 0
            mode = np.where(positive, 2, 3)
    else:
        positive = positive_weight > 0
    z = np.empty((n, 2), dtype=np.float32)
    both = np.stack([s0, s1], axis=1).astype(np.float32)
    z[two] = _post_transform(both[two], transform)
    one = ~two
    if one.any():
        z[one] = _two_columns(s0[one].astype(np.float32), mode[one], transform)
    return positive.astype(np.int64), z


# rows up to which a two-class tree ensemble's scores are read row by row on Python floats
# (~2 us a row) rather than vectorised over rows (~25 us of numpy calls, nearly all fixed):
# the same values either way
_ROWS_ONE_BY_ONE = 8


def _binary_tree_scores_by_row(scores, hit, base, transform, binary_case, all_positive):
    """_binary_tree_scores for a few rows: each row's case decided on Python floats (float64,
    as the vectorised code computes), its two columns transformed in float32 as there."""
    base = base.tolist()
    positives, pairs, kinds = [], [], []
    for (s0, s1), (h0, h1) in zip(scores.tolist(), hit.tolist()):
        mode, two = -1, True
        if len(base) == 2:
            new_s1 = base[1] + s0 if h1 else s1
            s0 = (-new_s1 if h0 else 0.0) if h1 else (s0 + base[0] if h0 else 0.0)
            s1 = new_s1
        elif len(base) == 1:
            if h0:
                s0 = s0 + base[0]
            two = h1
        elif not base:
            mode, two = 3, h1
        weight = s1 if two and h1 else (s0 if h0 else 0.0)
        positive = weight > (0.5 if binary_case and all_positive else 0)
        if binary_case:
            mode = (0 if positive else 1) if all_positive else (2 if positive else 3)
        positives.append(positive)
        pair, kind = _row_columns(s0, s1, two, mode, transform)
        pairs.append(pair)
        kinds.append(kind)
    if kinds.count(kinds[0]) == len(kinds) and kinds[0] != "PROBIT_FIRST":
        z = _post_transform(np.array(pairs, dtype=np.float32), kinds[0])
    else:
        z = np.concatenate([_row_transformed(pair, kind) for pair, kind in zip(pairs, kinds)])
    return np.array(positives, dtype=np.int64), z


def _row_columns(s0: float, s1: float, two: bool, mode: int, transform: str) -> tuple:
    """One row's two columns before their transform, and the transform they take: both
    scores under the node's transform, or one score expanded as _two_columns does."""
    if two:
        return (s0, s1), transform
    if transform == "LOGISTIC":
        return (-s0, s0), transform
    if transform == "PROBIT":
        return (s0, 0.0), "PROBIT_FIRST"
    s = _float32_value(s0)             # expanded in float32, as _two_columns computes
    if mode in (0, 1):
        return (1.0 - s, s), "NONE"
    return ((-s, s) if mode in (2, 3) else (s, 0.0)), "NONE"


_FLOAT32 = struct.Struct("f")


def _float32_value(v: float) -> float:
    """v rounded to float32 (to the nearest, ties to even: float(np.float32(v)) in a
    third of its time); past float32's range, infinity as numpy gives."""
    try:
        return _FLOAT32.unpack(_FLOAT32.pack(v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def _row_transformed(pair: tuple, kind: str) -> np.ndarray:
    row = np.array([pair], dtype=np.float32)
    if kind == "PROBIT_FIRST":
        return _two_columns(row[:, 0], np.int64(-1), "PROBIT")
    return _post_transform(row, kind)


@kernel("TreeEnsemble", domain=ML, since=5)
def tree_ensemble(ctx, x, aggregate_function=1, leaf_targetids=None, leaf_weights=None,
                  membership_values=None, n_targets=None, nodes_falseleafs=None,
                  nodes_falsenodeids=None, nodes_featureids=None, nodes_hitrates=None,
                  nodes_missing_value_tracks_true=None, nodes_modes=None, nodes_splits=None,
                  nodes_trueleafs=None, nodes_truenodeids=None, post_transform=0,
                  tree_roots=None):
    if aggregate_function not in _AGGREGATES_V5:
        raise ValueError(f"aggregate_function must be 0..3, got {aggregate_function}")
    if post_transform not in _TRANSFORMS_V5:
        raise ValueError(f"post_transform must be 0..4, got {post_transform}")
    out_dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float32
    v = _tree_input(x)
    dtype = _threshold_dtype(v, None if nodes_splits is None else np.asarray(nodes_splits))
    forest = _cache.get(ctx, dtype, lambda: _forest_v5(
        nodes_featureids or [], nodes_modes if nodes_modes is not None else [], nodes_splits,
        nodes_truenodeids or [], nodes_falsenodeids or [], nodes_trueleafs or [],
        nodes_falseleafs or [], nodes_missing_value_tracks_true, membership_values,
        leaf_targetids or [], leaf_weights if leaf_weights is not None else [],
        tree_roots or [], dtype))
    if n_targets is None:
        n_targets = int(max(leaf_targetids or [0])) + 1
    scores, _ = forest.aggregate(v, n_targets, _AGGREGATES_V5[aggregate_function])
    work = np.float64 if out_dtype == np.float64 else np.float32
    scores = _post_transform(scores.astype(work), _TRANSFORMS_V5[post_transform])
    return scores.astype(out_dtype, copy=False)
