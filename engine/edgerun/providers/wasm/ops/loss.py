"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (er_nll; the latter after
er_softmax's log-softmax over the classes, which is also its optional second output)."""
from __future__ import annotations

from ....ir import dtypes
from . import operator
from .common import converted, float_or_refused, product

REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}
INT32_RANGE = range(-2 ** 31, 2 ** 31)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def check_loss(node, opset) -> str:
    reduction = _text(node.attr("reduction", "mean"))
    if reduction not in REDUCTIONS:
        return f"reduction={reduction!r} (none, sum or mean exist)"
    ignore = node.attr("ignore_index")
    if ignore is not None and ignore not in INT32_RANGE:
        return f"ignore_index {ignore} beyond int32"
    return ""


@operator("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss", check=check_loss)
def bind_loss(dev, node, opset):
    reduction = REDUCTIONS[_text(node.attr("reduction", "mean"))]
    ignore = node.attr("ignore_index")
    softmax_first = node.op_type == "SoftmaxCrossEntropyLoss"
    want_log_prob = softmax_first and len(node.outputs) > 1 and bool(node.outputs[1])

    def run(ctx, x, target, weight=None, **_):
        if len(x.shape) < 2:
            raise ValueError(f"{node.op_type}: input must be at least 2-D (N, C, ...), got "
                             f"shape {list(x.shape)}")
        expected = x.shape[:1] + x.shape[2:]
        if tuple(target.shape) != tuple(expected):
            raise ValueError(f"{node.op_type}: target shape {list(target.shape)} does not match "
                             f"input shape {list(x.shape)} (expected {list(expected)})")
        if target.elem_type not in (dtypes.INT32, dtypes.INT64):
            target = converted(dev, target, dtypes.INT64)
        n, c, d = x.shape[0], x.shape[1], product(x.shape[2:])
        log_prob = x
        if softmax_first:
            log_prob = dev.empty(x.shape)
            if log_prob.size:
                dev.call("er_softmax", x.ptr, log_prob.ptr, n, c, d, 1)
        loss = dev.empty(expected if reduction == 0 else ())
        bad = dev.call("er_nll", log_prob.ptr, target.ptr, int(target.elem_type == dtypes.INT64),
                       weight.ptr if weight is not None else 0, loss.ptr, n, c, d,
                       int(ignore is not None), int(ignore or 0), reduction)
        if bad:
            raise IndexError(f"{node.op_type}: target at position {-1 - bad} lies outside "
                             f"[0, {c}) and is not ignore_index")
        return (loss, log_prob) if want_log_prob else loss
    return float_or_refused(dev, node, opset, run, float_inputs=[0, 2])
