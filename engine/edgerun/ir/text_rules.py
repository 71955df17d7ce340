"""The string operators' semantics in pure Python, on flat lists of `str` (no numpy: the wasm
provider runs them in a page). The CPU and wasm providers wrap these in their own tensors.

StringConcat, StringNormalizer, StringSplit, RegexFullMatch and TfIdfVectorizer's n-gram
counting live here; each function takes and returns flat lists (row-major), shapes beside.
"""
from __future__ import annotations

import re

from .broadcast import broadcast_map, broadcast_shape


def as_str(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def broadcast(a: list, a_shape, b: list, b_shape) -> tuple:
    """(shape, pairs): the two flat lists broadcast against each other, numpy's rules."""
    shape = broadcast_shape(a_shape, b_shape)
    return shape, broadcast_map(lambda x, y: (x, y), [(a, a_shape), (b, b_shape)], shape)


def concat(a: list, a_shape, b: list, b_shape) -> tuple:
    """StringConcat: (shape, items), broadcasting."""
    shape, pairs = broadcast(a, a_shape, b, b_shape)
    return shape, [as_str(x) + as_str(y) for x, y in pairs]


CASE_CHANGES = {"NONE": lambda s: s, "LOWER": str.lower, "UPPER": str.upper}


def normalize(words: list, shape, case_change_action="NONE", is_case_sensitive=0,
              stopwords=None) -> tuple:
    """StringNormalizer: drop stopwords, then change case. Takes [C] or [1, C]; an
    all-dropped input gives ['']. Returns (shape, items)."""
    if len(shape) not in (1, 2) or len(shape) == 2 and shape[0] != 1:
        raise ValueError(f"StringNormalizer takes a [C] or [1, C] tensor, got shape {list(shape)}")
    try:
        change_case = CASE_CHANGES[case_change_action]
    except KeyError:
        raise ValueError(f"case_change_action must be NONE, LOWER or UPPER, "
                         f"got {case_change_action!r}") from None
    words = [as_str(s) for s in words]
    if stopwords:
        stopwords = [as_str(s) for s in stopwords]
        if is_case_sensitive:
            stop = set(stopwords)
            words = [s for s in words if s not in stop]
        else:
            stop = {s.lower() for s in stopwords}
            words = [s for s in words if s.lower() not in stop]
    words = [change_case(s) for s in words] or [""]
    return ((1, len(words)) if len(shape) == 2 else (len(words),)), words


def split(items: list, shape, delimiter=None, maxsplit=None) -> tuple:
    """StringSplit: (parts shape, parts padded with '' to the longest split, counts)."""
    separator = as_str(delimiter) if delimiter else None   # unset or '': runs of whitespace
    limit = -1 if maxsplit is None else maxsplit
    # An empty string has no substrings, as in onnxruntime (Python's split would give [""]).
    pieces = [as_str(s).split(separator, limit) if s else [] for s in items]
    width = max((len(p) for p in pieces), default=0)
    flat = [s for p in pieces for s in p + [""] * (width - len(p))]
    return tuple(shape) + (width,), flat, [len(p) for p in pieces]


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


def compile_regex(pattern):
    """RegexFullMatch's pattern (RE2 syntax) as a Python regex."""
    pattern = as_str(pattern or "")
    try:
        return re.compile(_re2_to_python(pattern))
    except re.error as e:
        raise ValueError(f"invalid regex pattern {pattern!r}: {e}") from None


def full_match(regex, items: list) -> list:
    return [regex.fullmatch(as_str(s)) is not None for s in items]


# --- TfIdfVectorizer ------------------------------------------------------------------------

TFIDF_MODES = ("TF", "IDF", "TFIDF")


def ngram_table(pool: list, ngram_counts: list, ngram_indexes: list, min_n: int,
                max_n: int) -> dict:
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


def count_ngrams(row: list, table: dict, counts: list, min_n: int, max_n: int,
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


def tfidf(rows: list, pool: list, *, max_gram_length, max_skip_count, min_gram_length, mode,
          ngram_counts, ngram_indexes, weights=None) -> list:
    """TfIdfVectorizer on token rows (lists of str or int): one list of floats per row."""
    if mode not in TFIDF_MODES:
        raise ValueError(f"mode must be TF, IDF or TFIDF, got {mode!r}")
    ngram_indexes = list(ngram_indexes)
    table = ngram_table(pool, list(ngram_counts), ngram_indexes, min_gram_length,
                        max_gram_length)
    width = max(ngram_indexes) + 1 if ngram_indexes else 0
    result = []
    for row in rows:
        counts = [0.0] * width
        count_ngrams(row, table, counts, min_gram_length, max_gram_length, max_skip_count)
        if mode == "IDF":
            counts = [1.0 if c > 0 else 0.0 for c in counts]
        result.append(counts)
    if mode != "TF" and weights:
        # weights[j] belongs to the j-th pooled n-gram, which counts into column ngram_indexes[j]
        column_weights = [0.0] * width
        for column, w in zip(ngram_indexes, weights):
            column_weights[column] = float(w)
        result = [[c * w for c, w in zip(row, column_weights)] for row in result]
    return result
