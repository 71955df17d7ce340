"""Per-thread arrays for native calls on a few rows (batch 1 and the like).

Such a call is a few microseconds, and asking an array's address costs ~0.4 us (library.
address), allocating it ~0.1-0.2 us: three arrays cost more than a small forest's walk. A
RowBuffers holds, for one thread, arrays of FEW_ROWS rows made once with their addresses,
and a view of each for every row count; a call copies its rows in, runs on the fixed
addresses and hands back views (valid until the thread's next call) or copies of them.
"""
from __future__ import annotations

import threading

import numpy as np

from .library import address

FEW_ROWS = 8     # the most rows a call takes through the buffers


class RowBuffers(threading.local):
    """Arrays [FEW_ROWS, columns] of the given dtypes, one set per thread (a threading.local
    runs __init__ again, with the same arguments, in each thread that uses it).

    `at`: their addresses, in the order given; `views[n]`: a tuple of their first n rows."""

    def __init__(self, *specs: tuple):
        arrays = [np.zeros((FEW_ROWS, columns), dtype) for columns, dtype in specs]
        self.at = tuple(address(a) for a in arrays)
        self.views = [tuple(a[:n] for a in arrays) for n in range(FEW_ROWS + 1)]
