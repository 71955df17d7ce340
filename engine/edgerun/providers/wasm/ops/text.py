"""String operators on the host, in pure Python: a page has no numpy, and text is handled per
element anyway. Linear memory holds no strings, so string tensors stay host values (numpy
object arrays where numpy exists, else HostTensors of `str`); numeric results are uploaded.
The semantics are `ir/text_rules.py`, shared with the CPU provider."""
from __future__ import annotations

from ....ir import dtypes, text_rules
from ....ir.host_tensor import HostTensor
from . import operator
from .common import host_values
from ..device import WasmTensor


def is_strings(value) -> bool:
    if isinstance(value, HostTensor):
        return value.elem_type == dtypes.STRING
    return getattr(getattr(value, "dtype", None), "kind", None) in ("O", "U", "S")


def strings_of(value, what: str) -> tuple:
    """(shape, flat list of str) of a string tensor."""
    if isinstance(value, HostTensor) and value.elem_type == dtypes.STRING:
        return value.shape, list(value.data)
    if is_strings(value):
        return tuple(value.shape), [text_rules.as_str(s) for s in value.reshape(-1).tolist()]
    kind = dtypes.type_string(value.elem_type) if isinstance(value, WasmTensor) else \
        type(value).__name__
    raise TypeError(f"{what} takes a string tensor, got {kind}")


def string_tensor(dev, shape, items: list):
    """A string result as the host holds strings: numpy's object array where numpy exists."""
    t = HostTensor(dtypes.STRING, shape, items)
    return t.numpy() if dev.numpy else t


def tokens_of(dev, value, what: str) -> tuple:
    """(shape, flat list) of a string or integer tensor, as Python str or int."""
    if isinstance(value, WasmTensor):
        if value.elem_type not in (dtypes.INT32, dtypes.INT64):
            raise TypeError(f"{what} takes string, int32 or int64 tokens, got "
                            f"{dtypes.type_string(value.elem_type)}")
        return value.shape, list(dev.ints(value))
    return strings_of(value, what)


@operator("StringConcat")
@host_values
def bind_string_concat(dev, node, opset):
    def run(ctx, x, y, **_):
        (xs, x_items), (ys, y_items) = strings_of(x, "StringConcat"), strings_of(y, "StringConcat")
        return string_tensor(dev, *text_rules.concat(x_items, xs, y_items, ys))
    return run


@operator("StringNormalizer")
@host_values
def bind_string_normalizer(dev, node, opset):
    def run(ctx, x, case_change_action="NONE", is_case_sensitive=0, stopwords=None, **_):
        shape, items = strings_of(x, "StringNormalizer")
        return string_tensor(dev, *text_rules.normalize(items, shape, case_change_action,
                                                         is_case_sensitive, stopwords))
    return run


@operator("StringSplit")
@host_values
def bind_string_split(dev, node, opset):
    def run(ctx, x, delimiter=None, maxsplit=None, **_):
        shape, items = strings_of(x, "StringSplit")
        parts_shape, parts, counts = text_rules.split(items, shape, delimiter, maxsplit)
        return string_tensor(dev, parts_shape, parts), dev.from_ints(counts, shape)
    return run


@operator("RegexFullMatch")
@host_values
def bind_regex_full_match(dev, node, opset):
    def run(ctx, x, pattern="", **_):
        shape, items = strings_of(x, "RegexFullMatch")
        matches = text_rules.full_match(text_rules.compile_regex(pattern), items)
        return dev.from_ints(matches, shape, dtypes.BOOL)
    return run


@operator("TfIdfVectorizer")
@host_values
def bind_tfidf_vectorizer(dev, node, opset):
    def run(ctx, x, max_gram_length, max_skip_count, min_gram_length, mode, ngram_counts,
            ngram_indexes, pool_int64s=None, pool_strings=None, weights=None, **_):
        shape, tokens = tokens_of(dev, x, "TfIdfVectorizer")
        if len(shape) not in (1, 2):
            raise ValueError(f"TfIdfVectorizer takes a [C] or [B, C] tensor, got shape "
                             f"{list(shape)}")
        if pool_strings is not None:
            pool = [text_rules.as_str(s) for s in pool_strings]
        else:
            pool = [int(v) for v in (pool_int64s or [])]
        width = shape[-1]
        rows = [tokens[i:i + width] for i in range(0, len(tokens), width)] if width else \
            [[] for _ in range(shape[0] if len(shape) == 2 else 1)]
        counts = text_rules.tfidf(rows, pool, max_gram_length=max_gram_length,
                                  max_skip_count=max_skip_count,
                                  min_gram_length=min_gram_length, mode=mode,
                                  ngram_counts=ngram_counts, ngram_indexes=ngram_indexes,
                                  weights=weights)
        columns = max(ngram_indexes) + 1 if len(ngram_indexes) else 0
        out_shape = (len(rows), columns) if len(shape) == 2 else (columns,)
        return dev.from_floats([v for row in counts for v in row], out_shape)
    return run


def compare_strings(dev, fn, a, b):
    """A comparison of two string tensors (Equal), as a bool tensor."""
    (sa, xa), (sb, xb) = strings_of(a, "Equal"), strings_of(b, "Equal")
    shape, pairs = text_rules.broadcast(xa, sa, xb, sb)
    return dev.from_ints([fn(x, y) for x, y in pairs], shape, dtypes.BOOL)

