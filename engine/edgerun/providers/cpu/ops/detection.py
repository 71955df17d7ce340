"""Object detection post-processing: NonMaxSuppression.

Greedy NMS per (batch, class): candidates are visited in descending score order (ties: lower
box index first); each kept box suppresses, in one vectorized step, every later candidate
whose IoU with it exceeds the threshold. The Python loop runs once per kept box, at most
max_output_boxes_per_class times.
"""
import numpy as np

from ..registry import kernel


def _scalar_input(value, default, cast):
    """An optional scalar input (0-d or 1-element tensor), or `default` when absent/empty."""
    if value is None or np.size(value) == 0:
        return default
    return cast(np.asarray(value).reshape(-1)[0])


def _corners(boxes: np.ndarray, center_point_box: int):
    """(y_min, x_min, y_max, x_max) columns of an [N, 4] box array."""
    if center_point_box:
        x_center, y_center, width, height = boxes.T
        half_w, half_h = width / 2, height / 2
        return y_center - half_h, x_center - half_w, y_center + half_h, x_center + half_w
    y1, x1, y2, x2 = boxes.T
    # Corners may come in either order (diagonal pairs of any orientation).
    return np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)


def _iou_exceeds(box, others, threshold) -> np.ndarray:
    """For each box in `others`, whether its IoU with `box` is above `threshold`.

    A box is (y_min, x_min, y_max, x_max, area), `others` the same five columns as arrays.
    Boxes with no overlap or a degenerate (non-positive) area never suppress each other.
    """
    y_min, x_min, y_max, x_max, area = box
    o_y_min, o_x_min, o_y_max, o_x_max, o_area = others
    inter_h = np.minimum(y_max, o_y_max) - np.maximum(y_min, o_y_min)
    inter_w = np.minimum(x_max, o_x_max) - np.maximum(x_min, o_x_min)
    overlapping = (inter_h > 0) & (inter_w > 0)
    intersection = np.where(overlapping, inter_h * inter_w, 0)
    union = area + o_area - intersection
    valid = overlapping & (o_area > 0) & (union > 0) & (area > 0)
    iou = intersection / np.where(union > 0, union, 1)
    return valid & (iou > threshold)


def _select_for_class(columns, scores, max_boxes, iou_threshold, score_threshold):
    """Indices of the boxes kept for one (batch, class), in selection order.

    `columns` is (y_min, x_min, y_max, x_max, area) of every box of the batch entry.
    """
    candidates = np.arange(scores.shape[0])
    if score_threshold is not None:
        candidates = candidates[scores > score_threshold]
    # Stable sort on negated score: equal scores keep the lower box index first.
    order = candidates[np.argsort(-scores[candidates], kind="stable")]
    ranked = [c[order] for c in columns]   # box columns in visiting order
    alive = np.ones(order.shape[0], dtype=bool)
    kept = []
    position = 0
    while len(kept) < max_boxes and position < order.shape[0]:
        if not alive[position]:
            position += int(np.argmax(alive[position:]))
            if not alive[position]:
                break
        kept.append(order[position])
        box = [c[position] for c in ranked]
        later = [c[position + 1:] for c in ranked]
        alive[position + 1:] &= ~_iou_exceeds(box, later, iou_threshold)
        position += 1
    return kept


@kernel("NonMaxSuppression", since=10)
def non_max_suppression(ctx, boxes, scores, max_output_boxes_per_class=None,
                        iou_threshold=None, score_threshold=None, center_point_box=0):
    if boxes.ndim != 3 or boxes.shape[2] != 4:
        raise ValueError(f"NonMaxSuppression: boxes must be [batch, boxes, 4], got {boxes.shape}")
    if scores.ndim != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise ValueError(f"NonMaxSuppression: scores must be [batch, classes, {boxes.shape[1]}] "
                         f"for boxes {boxes.shape}, got {scores.shape}")
    max_boxes = max(_scalar_input(max_output_boxes_per_class, 0, int), 0)
    work = np.float64 if boxes.dtype == np.float64 else np.float32
    iou_limit = work(_scalar_input(iou_threshold, 0.0, float))
    score_limit = _scalar_input(score_threshold, None, float)
    if score_limit is not None:
        score_limit = scores.dtype.type(score_limit)

    selected = []
    for batch in range(boxes.shape[0]):
        corners = _corners(boxes[batch].astype(work, copy=False), center_point_box)
        columns = (*corners, (corners[2] - corners[0]) * (corners[3] - corners[1]))
        for cls in range(scores.shape[1]):
            kept = _select_for_class(columns, scores[batch, cls], max_boxes, iou_limit,
                                     score_limit)
            selected.extend((batch, cls, int(box)) for box in kept)
    return np.array(selected, dtype=np.int64).reshape(-1, 3)
