"""String operators: StringConcat, StringNormalizer, StringSplit, RegexFullMatch and
TfIdfVectorizer.

Strings are object arrays of Python `str`. These kernels work per element in Python, which is
the natural unit for text; numeric results are built as numpy arrays in one go.
"""
import re

import numpy as np

from ..registry import kernel


def _strings(values: list, shape) -> np.ndarray:
    """An object array of the given shape holding `values` (a flat list of str)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


def _as_str(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


# --- StringConcat -----------------------------------------------------------------------------

@kernel("StringConcat", since=20)
def string_concat(ctx, x, y):
    x, y = np.broadcast_arrays(np.asarray(x, dtype=object), np.asarray(y, dtype=object))
    joined = [_as_str(a) + _as_str(b) for a, b in zip(x.ravel().tolist(), y.ravel().tolist())]
    return _strings(joined, x.shape)


# --- StringNormalizer -------------------------------------------------------------------------

_CASE_CHANGES = {"NONE": lambda s: s, "LOWER": str.lower, "UPPER": str.upper}


@kernel("StringNormalizer", since=10)
def string_normalizer(ctx, x, case_change_action="NONE", is_case_sensitive=0, locale="",
                      stopwords=None):
    """Drop stopwords, then change case. Takes [C] or [1, C]; an all-dropped input gives ['']."""
    if x.ndim == 2 and x.shape[0] != 1 or x.ndim not in (1, 2):
        raise ValueError(f"StringNormalizer takes a [C] or [1, C] tensor, got shape {x.shape}")
    try:
        change_case = _CASE_CHANGES[case_change_action]
    except KeyError:
        raise ValueError(f"case_change_action must be NONE, LOWER or UPPER, "
                         f"got {case_change_action!r}") from None
    words = [_as_str(s) for s in x.ravel().tolist()]
    if stopwords:
        if is_case_sensitive:
            stop = set(stopwords)
            words = [s for s in words if s not in stop]
        else:
            stop = {s.lower() for s in stopwords}
            words = [s for s in words if s.lower() not in stop]
    words = [change_case(s) for s in words] or [""]
    return _strings(words, (1, len(words)) if x.ndim == 2 else (len(words),))


# --- StringSplit ------------------------------------------------------------------------------

@kernel("StringSplit", since=20)
def string_split(ctx, x, delimiter=None, maxsplit=None):
    """Split each element; pads with '' to the longest split and returns (parts, counts)."""
    separator = delimiter or None          # unset or '' means runs of whitespace
    limit = -1 if maxsplit is None else maxsplit
    # An empty string has no substrings, as in onnxruntime (Python's split would give [""]).
    pieces = [_as_str(s).split(separator, limit) if s else [] for s in x.ravel().tolist()]
    counts = np.array([len(p) for p in pieces], dtype=np.int64).reshape(x.shape)
    width = max((len(p) for p in pieces), default=0)
    padded = [p + [""] * (width - len(p)) for p in pieces]
    flat = [s for p in padded for s in p]
    return _strings(flat, x.shape + (width,)), counts


# --- RegexFullMatch ---------------------------------------------------------------------------

# RE2's POSIX bracket classes, which Python's `re` does not know.
_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z",
    "print": " -~", "punct": "!-/:-@\\[-`{-~", "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z",
    "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
_POSIX_CLASS = re.compile(r"\[:(\^?)([a-z]+):\]")
_END_OF_TEXT = re.compile(r"(?<!\\)((?:\\\\)*)\\z")   # RE2 \z (end of text) is \Z in Python


def _re2_to_python(pattern: str) -> str:
    """Translate the RE2 constructs Python spells differently: [[:alpha:]] classes, \\z."""
    def replace(match):
        negated, name = match.groups()
        if name not in _POSIX_CLASSES or negated:
            return match.group(0)
        return _POSIX_CLASSES[name]
    pattern = _POSIX_CLASS.sub(replace, pattern)
    return _END_OF_TEXT.sub(lambda m: m.group(1) + "\\Z", pattern)


@kernel("RegexFullMatch", since=20)
def regex_full_match(ctx, x, pattern=""):
    try:
        regex = re.compile(_re2_to_python(pattern))
    except re.error as e:
        raise ValueError(f"invalid regex pattern {pattern!r}: {e}") from None
    matches = [regex.fullmatch(_as_str(s)) is not None for s in x.ravel().tolist()]
    return np.array(matches, dtype=bool).reshape(x.shape)


# --- TfIdfVectorizer --------------------------------------------------------------------------

def _ngram_table(pool: list, ngram_counts: list, ngram_indexes: list, min_n: int, max_n: int):
    """Map each pooled n-gram (a tuple) with min_n <= n <= max_n to its output column.

    The pool holds the 1-grams, then the 2-grams, ...; ngram_counts[k] is where the
    (k+1)-grams start. ngram_indexes is indexed by the n-gram's rank across the whole pool.
    """
    table = {}
    rank = 0
    for k, start in enumerate(ngram_counts):
        n = k + 1
        end = ngram_counts[k + 1] if k + 1 < len(ngram_counts) else len(pool)
        for pos in range(start, end - n + 1, n):
            if min_n <= n <= max_n:
                table[tuple(pool[pos:pos + n])] = ngram_indexes[rank]
            rank += 1
    return table


def _count_ngrams(row: list, table: dict, counts: np.ndarray, min_n: int, max_n: int,
                  max_skip: int) -> None:
    """Add the occurrences of each known n-gram in `row` to `counts` (one output row).

    Skips of 0..max_skip items between consecutive tokens are allowed; 1-grams, which do not
    depend on the skip, are counted once.
    """
    length = len(row)
    for skip in range(max_skip + 1):
        step = skip + 1
        smallest = max(min_n, 2) if skip else min_n
        for n in range(smallest, max_n + 1):
            span = step * (n - 1)
            for start in range(length - span):
                column = table.get(tuple(row[start:start + span + 1:step]))
                if column is not None:
                    counts[column] += 1


@kernel("TfIdfVectorizer", since=9)
def tfidf_vectorizer(ctx, x, max_gram_length, max_skip_count, min_gram_length, mode,
                     ngram_counts, ngram_indexes, pool_int64s=None, pool_strings=None,
                     weights=None):
    if mode not in ("TF", "IDF", "TFIDF"):
        raise ValueError(f"mode must be TF, IDF or TFIDF, got {mode!r}")
    if x.ndim > 2:
        raise ValueError(f"TfIdfVectorizer takes a [C] or [B, C] tensor, got shape {x.shape}")
    if pool_strings is not None:
        pool = [_as_str(s) for s in pool_strings]
        rows = [[_as_str(s) for s in row] for row in np.atleast_2d(x).tolist()]
    else:
        pool = [int(v) for v in (pool_int64s or [])]
        rows = np.atleast_2d(x).astype(np.int64).tolist()
    table = _ngram_table(pool, list(ngram_counts), list(ngram_indexes), min_gram_length,
                         max_gram_length)
    width = max(ngram_indexes) + 1 if len(ngram_indexes) else 0
    counts = np.zeros((len(rows), width), dtype=np.float32)
    for row, row_counts in zip(rows, counts):
        _count_ngrams(row, table, row_counts, min_gram_length, max_gram_length, max_skip_count)

    if mode == "IDF":
        counts = (counts > 0).astype(np.float32)
    if mode != "TF" and weights:
        # weights[j] belongs to the j-th pooled n-gram, which counts into column ngram_indexes[j]
        column_weights = np.zeros(width, dtype=np.float32)
        column_weights[np.asarray(ngram_indexes)] = weights
        counts = counts * column_weights
    return counts if x.ndim == 2 else counts[0]
