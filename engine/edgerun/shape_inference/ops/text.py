"""String operators."""
from __future__ import annotations

from ...ir import dtypes
from ..context import tensor
from ..registry import infer
from ._common import int64, same_as_input


@infer("RegexFullMatch")
def regex_full_match(ctx):
    return [same_as_input(ctx, elem_type=dtypes.BOOL)]


@infer("StringConcat")
def string_concat(ctx):
    return [tensor(dtypes.STRING, ctx.broadcast(0, 1))]


@infer("StringNormalizer")
def string_normalizer(ctx):
    s = ctx.shape(0)
    # stopwords may remove every item, which leaves [1] (or [1, 1]) holding ""
    if s is None:
        return [tensor(dtypes.STRING, None)]
    out = tuple(s[:-1]) + (ctx.fresh() if ctx.attr("stopwords") else s[-1],)
    return [tensor(dtypes.STRING, out)]


@infer("StringSplit")
def string_split(ctx):
    s = ctx.shape(0)
    out = None if s is None else tuple(s) + (ctx.fresh(),)
    return [tensor(dtypes.STRING, out), int64(s)]


@infer("TfIdfVectorizer")
def tfidf_vectorizer(ctx):
    s = ctx.shape(0)
    size = max(ctx.attr("ngram_indexes") or [-1]) + 1
    out = None if s is None else (tuple(s[:-1]) + (size,) if len(s) == 2 else (size,))
    return [tensor(dtypes.FLOAT, out)]
