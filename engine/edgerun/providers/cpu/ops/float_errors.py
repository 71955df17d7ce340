"""`with ignored_float_errors():`, numpy's errstate(all="ignore") at a fraction of its cost.

Kernels compute through overflow, division by zero and NaN the way IEEE arithmetic defines
(the results are the operators' results); numpy would warn about each. np.errstate silences it
but builds numpy's error-state object on every entry: ~1.9 us, more than a Sqrt of a few
hundred values, paid by every unary math op, Softmax, GELU and Sum per call. Here that object
is built once and entering the block only sets numpy's context variable (~0.2 us). Where
numpy lacks those internals (other versions) the block is plain np.errstate.
"""
from __future__ import annotations

import numpy as np

try:                        # numpy 2: the error state lives in a context variable
    from numpy._core._ufunc_config import (  # type: ignore[attr-defined]  # private
        _extobj_contextvar, _make_extobj)
    _IGNORE_ALL = _make_extobj(all="ignore")
except (ImportError, TypeError):    # pragma: no cover - other numpy versions
    _extobj_contextvar = None


class _Ignored:
    __slots__ = ("_token",)

    def __enter__(self):
        self._token = _extobj_contextvar.set(_IGNORE_ALL)

    def __exit__(self, *exc):
        _extobj_contextvar.reset(self._token)


def ignored_float_errors():
    """A context in which numpy neither warns about nor raises floating-point errors."""
    return _Ignored() if _extobj_contextvar is not None else np.errstate(all="ignore")
