"""SVMClassifier with support vectors in one native call (cpu_kernels/svm.c): kernel values,
one-vs-one decisions and votes, and Platt-scaled probabilities coupled into class
probabilities, as onnxruntime computes them. At batch 1 the numpy path of
providers/cpu/ops/ml.py is a few dozen numpy calls; this is one. `Classifier` holds a node's
tables, made once; `classify` runs rows through them."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .library import address, library
from .library import available as available  # callers ask the module they use
from .row_buffers import FEW_ROWS, RowBuffers

KINDS = {"LINEAR": 0, "POLY": 1, "RBF": 2, "SIGMOID": 3}     # cpu_kernels/svm.c's kinds

# cpu_kernels/svm.c's Svm: the tables' addresses, sizes and kernel parameters
SVM = np.dtype([("vectors", "<u8"), ("coef", "<u8"), ("rho", "<u8"), ("starts", "<u8"),
                ("prob_a", "<u8"), ("prob_b", "<u8"), ("total", "<i8"), ("features", "<i8"),
                ("classes", "<i8"), ("kind", "<i8"), ("gamma", "<f8"), ("coef0", "<f8"),
                ("degree", "<f8")])


class Classifier:
    """A node's support vectors [total, features], coefficients [classes - 1, total],
    rho [pairs] (float64), vectors per class, kernel, and Platt's parameters (float32, or
    None), as svm.c reads them; the header keeps their addresses."""

    def __init__(self, vectors: np.ndarray, coef: np.ndarray, rho: np.ndarray, counts: list,
                 kind: str, params: tuple, prob_a: Optional[np.ndarray],
                 prob_b: Optional[np.ndarray]):
        self.vectors = np.ascontiguousarray(vectors, np.float64)
        self.coef = np.ascontiguousarray(coef, np.float64)
        self.rho = np.ascontiguousarray(rho, np.float64)
        self.starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.prob_a = None if prob_a is None else np.ascontiguousarray(prob_a, np.float32)
        self.prob_b = None if prob_b is None else np.ascontiguousarray(prob_b, np.float32)
        self.classes = len(counts)
        self.pairs = self.classes * (self.classes - 1) // 2
        total, features = self.vectors.shape
        header = np.zeros(1, SVM)
        for name in ("vectors", "coef", "rho", "starts", "prob_a", "prob_b"):
            array = getattr(self, name)
            header[name] = 0 if array is None else address(array)
        header["total"], header["features"], header["classes"] = total, features, self.classes
        header["kind"] = KINDS[kind]
        header["gamma"], header["coef0"], header["degree"] = params
        self.header = header
        self.header_at = address(header)
        self.scratch_size = total + 2 * self.classes + self.classes * self.classes
        self.few = RowBuffers((features, np.float64), (1, np.int64), (self.pairs, np.float32),
                              (self.classes, np.float32), (self.scratch_size, np.float64))

    def classify(self, x: np.ndarray) -> tuple:
        """(label index [n] int64, decision values [n, pairs] float32, class probabilities
        [n, classes] float32 or None) of rows x [n, features] (float32 or float64: the
        kernel reads them as float64). Up to FEW_ROWS rows the label indices are a view
        valid until this thread's next call; the rest are fresh arrays."""
        n = x.shape[0]
        if n <= FEW_ROWS:
            rows, labels, votes, coupled, _ = self.few.views[n]
            rows[...] = x
            x_at, labels_at, votes_at, coupled_at, scratch_at = self.few.at
            with_probabilities = self.prob_a is not None
            library().er_cpu_svm_classify(self.header_at, x_at, n, labels_at, votes_at,
                                          coupled_at if with_probabilities else None,
                                          scratch_at)
            return (labels.reshape(-1), votes.copy(),
                    coupled.copy() if with_probabilities else None)
        x = np.ascontiguousarray(x, np.float64)
        n = x.shape[0]
        label = np.empty(n, np.int64)
        decisions = np.empty((n, self.pairs), np.float32)
        probabilities = None if self.prob_a is None else np.empty((n, self.classes), np.float32)
        scratch = np.empty(self.scratch_size, np.float64)
        library().er_cpu_svm_classify(self.header_at, address(x), n, address(label),
                                      address(decisions), address(probabilities),
                                      address(scratch))
        return label, decisions, probabilities


def classifier(vectors: np.ndarray, coef: np.ndarray, rho: np.ndarray, counts: list,
               kind: str, params: tuple, prob_a: np.ndarray,
               prob_b: np.ndarray) -> Optional[Classifier]:
    """The node's Classifier, or None where svm.c does not apply (no library, an unknown
    kernel, two classes or more missing, tables shorter than the classes need: the numpy
    path then names the problem)."""
    classes, total = len(counts), int(sum(counts))
    pairs = classes * (classes - 1) // 2
    if library() is None or kind not in KINDS or classes < 2 or total == 0 or \
            vectors.shape[0] != total or coef.size != (classes - 1) * total or \
            rho.size < pairs or min(counts) < 0:
        return None
    with_probabilities = prob_a.size > 0
    if with_probabilities and (prob_a.size < pairs or prob_b.size < pairs):
        return None
    return Classifier(vectors, coef.reshape(classes - 1, total), rho[:pairs], counts, kind,
                      params, prob_a[:pairs] if with_probabilities else None,
                      prob_b[:pairs] if with_probabilities else None)
