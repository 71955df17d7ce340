"""Loss kernels: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Both take class scores of shape (N, C) or (N, C, d1, ..., dk) and integer targets of shape
(N) or (N, d1, ..., dk). A target equal to `ignore_index` contributes nothing, neither to the
loss nor to the weight total that `mean` divides by.
"""
from __future__ import annotations

import numpy as np

from ..registry import kernel

_REDUCTIONS = ("none", "sum", "mean")


def _work_dtype(x: np.ndarray):
    return np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)


def _nll(log_prob: np.ndarray, target: np.ndarray, weight, ignore_index, reduction: str,
         out_dtype) -> np.ndarray:
    """The negative log-likelihood of `target` under `log_prob` (N, C, ...), reduced."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    if log_prob.ndim < 2:
        raise ValueError(f"input must be at least 2-D (N, C, ...), got shape {log_prob.shape}")
    expected = log_prob.shape[:1] + log_prob.shape[2:]
    if target.shape != expected:
        raise ValueError(f"target shape {target.shape} does not match input shape "
                         f"{log_prob.shape} (expected {expected})")
    num_classes = log_prob.shape[1]
    target = target.astype(np.int64)
    ignored = target == ignore_index if ignore_index is not None else np.zeros(target.shape, bool)
    safe_target = np.where(ignored, 0, target)
    if safe_target.size and (safe_target.min() < 0 or safe_target.max() >= num_classes):
        raise ValueError(f"target values must lie in [0, {num_classes}) or equal ignore_index")

    picked = np.take_along_axis(log_prob, safe_target[:, None], axis=1)[:, 0]
    if weight is not None:
        sample_weight = weight.astype(log_prob.dtype)[safe_target]
    else:
        sample_weight = np.ones(target.shape, dtype=log_prob.dtype)
    sample_weight = np.where(ignored, 0, sample_weight).astype(log_prob.dtype)
    loss = -picked * sample_weight

    if reduction == "none":
        return loss.astype(out_dtype)
    total = loss.sum()
    if reduction == "sum":
        return np.asarray(total, dtype=out_dtype)
    return np.asarray(total / sample_weight.sum(), dtype=out_dtype)


@kernel("NegativeLogLikelihoodLoss", since=12)
def negative_log_likelihood_loss(ctx, x, target, weight=None, ignore_index=None,
                                 reduction="mean"):
    return _nll(x.astype(_work_dtype(x)), target, weight, ignore_index, reduction, x.dtype)


def _log_softmax_classes(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


@kernel("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy_loss(ctx, scores, labels, weights=None, ignore_index=None,
                               reduction="mean"):
    log_prob = _log_softmax_classes(scores.astype(_work_dtype(scores)))
    loss = _nll(log_prob, labels, weights, ignore_index, reduction, scores.dtype)
    if ctx.num_outputs > 1:
        return loss, log_prob.astype(scores.dtype)
    return loss
