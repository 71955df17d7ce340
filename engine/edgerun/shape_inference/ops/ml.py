"""ai.onnx.ml operators. Models take [N, F] rows (a 1-D input is one row); labels are int64
or strings depending on which class-label attribute is set."""
from __future__ import annotations

from ...ir import TypeInfo, dtypes
from .. import symbolic
from ..context import sequence, tensor
from ..registry import infer
from ._common import same_as_input

ML = "ai.onnx.ml"


def _rows(ctx, i: int = 0):
    s = ctx.shape(i)
    if s is None:
        return None
    return 1 if len(s) <= 1 else s[0]


def _label_type(ctx) -> int:
    return dtypes.STRING if ctx.attr("classlabels_strings") else dtypes.INT64


@infer("ArrayFeatureExtractor", domain=ML)
def array_feature_extractor(ctx):
    s, idx = ctx.shape(0), ctx.shape(1)
    k = symbolic.product(idx) if idx is not None else None
    if s is None:
        return [tensor(ctx.elem(0), None)]
    out = (1, k) if len(s) == 1 else tuple(s[:-1]) + (k,)
    return [tensor(ctx.elem(0), out)]


@infer("Binarizer", "Imputer", domain=ML)
def same(ctx):
    return [same_as_input(ctx)]


@infer("Normalizer", "Scaler", domain=ML)
def float_same(ctx):
    return [same_as_input(ctx, elem_type=dtypes.FLOAT)]


@infer("CategoryMapper", domain=ML)
def category_mapper(ctx):
    elem = dtypes.INT64 if ctx.elem(0) == dtypes.STRING else dtypes.STRING
    return [same_as_input(ctx, elem_type=elem)]


@infer("LabelEncoder", domain=ML)
def label_encoder(ctx):
    if ctx.opset < 2:
        elem = dtypes.INT64 if ctx.elem(0) == dtypes.STRING else dtypes.STRING
    elif ctx.has_attr("values_tensor"):
        elem = ctx.node.attr("values_tensor").elem_type
    elif ctx.has_attr("values_strings"):
        elem = dtypes.STRING
    elif ctx.has_attr("values_int64s"):
        elem = dtypes.INT64
    else:
        elem = dtypes.FLOAT
    return [same_as_input(ctx, elem_type=elem)]


@infer("OneHotEncoder", domain=ML)
def one_hot_encoder(ctx):
    s = ctx.shape(0)
    n = len(ctx.attr("cats_strings") or ctx.attr("cats_int64s") or [])
    return [tensor(dtypes.FLOAT, None if s is None else tuple(s) + (n,))]


@infer("CastMap", domain=ML)
def cast_map(ctx):
    elem = {"TO_FLOAT": dtypes.FLOAT, "TO_INT64": dtypes.INT64,
            "TO_STRING": dtypes.STRING}.get(ctx.attr("cast_to", "TO_FLOAT"), 0)
    width = ctx.attr("max_map", 1) if ctx.attr("map_form", "DENSE") == "SPARSE" else None
    return [tensor(elem, (1, width))]


@infer("DictVectorizer", domain=ML)
def dict_vectorizer(ctx):
    vocab = ctx.attr("string_vocabulary") or ctx.attr("int64_vocabulary") or []
    t = ctx.type(0)
    value = t.elem if t is not None and t.kind == "map" else None
    rows = 1
    if t is not None and t.kind == "sequence":
        value, rows = (t.elem.elem if t.elem is not None else None), None
    return [tensor(value.elem_type if value is not None else 0, (rows, len(vocab)))]


@infer("FeatureVectorizer", domain=ML)
def feature_vectorizer(ctx):
    widths = ctx.attr("inputdimensions") or []
    return [tensor(dtypes.FLOAT, (_rows(ctx), sum(widths)))]


@infer("ZipMap", domain=ML)
def zipmap(ctx):
    key = dtypes.STRING if ctx.attr("classlabels_strings") else dtypes.INT64
    return [sequence(TypeInfo(kind="map", key_type=key, elem=tensor(dtypes.FLOAT, ())))]


def _classifier(ctx, columns):
    rows = _rows(ctx)
    return [tensor(_label_type(ctx), (rows,)), tensor(dtypes.FLOAT, (rows, columns))]


@infer("LinearClassifier", domain=ML)
def linear_classifier(ctx):
    labels = ctx.attr("classlabels_strings") or ctx.attr("classlabels_ints") or []
    targets = len(ctx.attr("intercepts") or []) or None
    columns = 2 if targets == 1 and len(labels) == 2 else targets
    return _classifier(ctx, columns)


@infer("SVMClassifier", "TreeEnsembleClassifier", domain=ML)
def classifier(ctx):
    return _classifier(ctx, None)


@infer("LinearRegressor", domain=ML)
def linear_regressor(ctx):
    return [tensor(dtypes.FLOAT, (_rows(ctx), ctx.attr("targets", 1)))]


@infer("SVMRegressor", domain=ML)
def svm_regressor(ctx):
    return [tensor(dtypes.FLOAT, (_rows(ctx), 1))]


@infer("TreeEnsembleRegressor", domain=ML)
def tree_ensemble_regressor(ctx):
    return [tensor(dtypes.FLOAT, (_rows(ctx), ctx.attr("n_targets", 1)))]


@infer("TreeEnsemble", domain=ML)
def tree_ensemble(ctx):
    return [tensor(ctx.elem(0), (_rows(ctx), ctx.attr("n_targets", 1)))]
