"""String operators: StringConcat, StringNormalizer, StringSplit, RegexFullMatch and
TfIdfVectorizer.

Strings are object arrays of Python `str`. The semantics live in `ir/text_rules.py` (shared
with the wasm provider, which has no numpy); these kernels only move values in and out of
numpy arrays.
"""
import numpy as np

from ....ir import text_rules
from ..registry import kernel


def _strings(values: list, shape) -> np.ndarray:
    """An object array of the given shape holding `values` (a flat list of str)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


def _flat(x) -> list:
    return np.asarray(x, dtype=object).ravel().tolist()


@kernel("StringConcat", since=20)
def string_concat(ctx, x, y):
    shape, joined = text_rules.concat(_flat(x), np.shape(x), _flat(y), np.shape(y))
    return _strings(joined, shape)


@kernel("StringNormalizer", since=10)
def string_normalizer(ctx, x, case_change_action="NONE", is_case_sensitive=0, locale="",
                      stopwords=None):
    shape, words = text_rules.normalize(_flat(x), x.shape, case_change_action,
                                        is_case_sensitive, stopwords)
    return _strings(words, shape)


@kernel("StringSplit", since=20)
def string_split(ctx, x, delimiter=None, maxsplit=None):
    """Split each element; pads with '' to the longest split and returns (parts, counts)."""
    shape, parts, counts = text_rules.split(_flat(x), x.shape, delimiter, maxsplit)
    return _strings(parts, shape), np.array(counts, dtype=np.int64).reshape(x.shape)


@kernel("RegexFullMatch", since=20)
def regex_full_match(ctx, x, pattern=""):
    matches = text_rules.full_match(text_rules.compile_regex(pattern), _flat(x))
    return np.array(matches, dtype=bool).reshape(x.shape)


@kernel("TfIdfVectorizer", since=9)
def tfidf_vectorizer(ctx, x, max_gram_length, max_skip_count, min_gram_length, mode,
                     ngram_counts, ngram_indexes, pool_int64s=None, pool_strings=None,
                     weights=None):
    if x.ndim > 2:
        raise ValueError(f"TfIdfVectorizer takes a [C] or [B, C] tensor, got shape {x.shape}")
    if pool_strings is not None:
        pool = [text_rules.as_str(s) for s in pool_strings]
        rows = [[text_rules.as_str(s) for s in row] for row in np.atleast_2d(x).tolist()]
    else:
        pool = [int(v) for v in (pool_int64s or [])]
        rows = np.atleast_2d(x).astype(np.int64).tolist()
    counts = text_rules.tfidf(rows, pool, max_gram_length=max_gram_length,
                              max_skip_count=max_skip_count, min_gram_length=min_gram_length,
                              mode=mode, ngram_counts=ngram_counts, ngram_indexes=ngram_indexes,
                              weights=weights)
    width = max(ngram_indexes) + 1 if len(ngram_indexes) else 0
    out = np.array(counts, dtype=np.float32).reshape(len(rows), width)
    return out if x.ndim == 2 else out[0]
