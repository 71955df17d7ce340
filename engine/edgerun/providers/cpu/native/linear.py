"""Linear models' rows in one native call (cpu_kernels/ml_scores.c er_cpu_linear_rows):
scores, each row's top target and the score transform, for LinearClassifier and
LinearRegressor, whose numpy form at batch 1 is a dozen calls of a microsecond each."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .elementwise import ML_ROWS
from .library import address, library
from .library import available as available  # callers ask the module they use
from .row_buffers import FEW_ROWS, RowBuffers

# transforms the kernel applies itself (ml_scores.c's steps; -1: none)
TRANSFORMS = {"NONE": -1, "SOFTMAX": ML_ROWS["SOFTMAX"], "LOGISTIC": ML_ROWS["LOGISTIC"]}


class LinearRows:
    """One node's coefficients (float64 [features, targets]) and intercepts (float64
    [targets] or None), with their addresses, made once."""

    def __init__(self, coef: np.ndarray, bias: Optional[np.ndarray]):
        self.coef = np.ascontiguousarray(coef, np.float64)
        self.bias = None if bias is None else np.ascontiguousarray(bias, np.float64)
        self.features, self.targets = self.coef.shape
        self.coef_at, self.bias_at = address(self.coef), address(self.bias)
        self.few = RowBuffers((self.features, np.float32), (self.targets, np.float32),
                              (1, np.int64))

    def __call__(self, v: np.ndarray, transform: str) -> tuple:
        """(scores float32 [N, targets] after `transform` (a key of TRANSFORMS), a fresh
        array; each row's top target before it, int64 [N], up to FEW_ROWS rows a view valid
        until this thread's next call) for float32 rows v [N, features]."""
        n = v.shape[0]
        if n <= FEW_ROWS:
            rows, scores, best = self.few.views[n]
            rows[...] = v
            x_at, scores_at, best_at = self.few.at
            self._kernel(x_at, n, scores_at, best_at, transform)
            return scores.copy(), best.reshape(-1)
        v = np.ascontiguousarray(v, np.float32)
        scores = np.empty((n, self.targets), np.float32)
        best = np.empty(n, np.int64)
        self._kernel(address(v), n, address(scores), address(best), transform)
        return scores, best

    def _kernel(self, x_at: int, n: int, scores_at: int, best_at: int, transform: str):
        library().er_cpu_linear_rows(x_at, n, self.features, self.coef_at, self.bias_at,
                                     self.targets, TRANSFORMS[transform], scores_at, best_at)
