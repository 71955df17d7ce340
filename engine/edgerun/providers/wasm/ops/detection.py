"""NonMaxSuppression (er_nms). The number of boxes kept depends on the data, so a run with
this node is never recorded as a program (er_nms is not in the programs' kernel list)."""
from __future__ import annotations

from ....ir import dtypes
from . import operator
from .common import converted, host_floats


def _scalar(dev, t, default, kind):
    if t is None or t.size == 0:
        return default
    return kind(host_floats(dev, t)[0])


@operator("NonMaxSuppression")
def bind_nms(dev, node, opset):
    center = int(node.attr("center_point_box", 0))

    def run(ctx, boxes, scores, max_out_t=None, iou_t=None, score_t=None, **_):
        if len(boxes.shape) != 3 or boxes.shape[2] != 4:
            raise ValueError(f"NonMaxSuppression: boxes must be [batch, boxes, 4], got "
                             f"{list(boxes.shape)}")
        batch, n = boxes.shape[:2]
        if len(scores.shape) != 3 or scores.shape[0] != batch or scores.shape[2] != n:
            raise ValueError(f"NonMaxSuppression: scores must be [batch, classes, {n}] for "
                             f"boxes {list(boxes.shape)}, got {list(scores.shape)}")
        classes = scores.shape[1]
        max_out = max(_scalar(dev, max_out_t, 0, int), 0)
        iou = _scalar(dev, iou_t, 0.0, float)
        score_limit = _scalar(dev, score_t, None, float)
        boxes, scores = converted(dev, boxes, dtypes.FLOAT), converted(dev, scores, dtypes.FLOAT)
        capacity = batch * classes * min(n, max_out)
        out = dev.empty((max(capacity, 1), 3), dtypes.INT64)
        count = 0
        if capacity:
            scratch = dev.scratch(n * 28)
            count = dev.call("er_nms", boxes.ptr, scores.ptr, out.ptr, batch, classes, n,
                             max_out, iou, int(score_limit is not None),
                             score_limit if score_limit is not None else 0.0, center,
                             scratch.ptr)
        return out.part(0, (count, 3))
    return run
