"""Whether numpy can be imported: the core runs without it (Pyodide pages here have none), and
every layer that has a faster numpy path asks this one cached question."""
from __future__ import annotations

import functools


@functools.cache   # asked per input and per kernel; a failed import is slow in Pyodide (~0.1 ms)
def have_numpy() -> bool:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True
