"""Tree ensembles in one native call (cpu_kernels/forest.c): every row walked through every
tree and the leaves' weights aggregated, equal bit for bit to the numpy path of
providers/cpu/ops/ml.py's _Forest (the same comparisons, float64 sums in the same order).
`tables(forest)` converts a forest's node table once; `aggregate` runs it."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .library import address, library
from .library import available as available  # callers ask the module they use

AGGREGATES = {"SUM": 0, "AVERAGE": 0, "MIN": 1, "MAX": 2}
_INT32_MAX = 2**31 - 1


# cpu_kernels/forest.c's Node: one node in 24 bytes
NODE = np.dtype([("threshold", "<f8"), ("feature", "<i4"), ("next", "<i4", (2,)),
                 ("mode", "i1"), ("missing_true", "u1"), ("unused", "<i2")])


class Tables:
    """A forest's node table as the C kernel reads it (Node records; int32 indices, float64
    weights), and the type its comparisons round the input to first."""

    def __init__(self, forest):
        self.compare_type = forest.threshold.dtype
        nodes = np.zeros(forest.mode.size, NODE)
        nodes["threshold"] = forest.threshold
        nodes["feature"] = forest.feature
        nodes["next"] = forest.children.reshape(-1, 2)
        nodes["mode"] = forest.mode
        nodes["missing_true"] = forest.missing_true
        self.nodes = nodes
        self.roots = np.ascontiguousarray(forest.roots, np.int32)
        self.leaf_start = np.ascontiguousarray(forest.leaf_start, np.int32)
        self.leaf_count = np.ascontiguousarray(forest.leaf_count, np.int32)
        self.w_target = np.ascontiguousarray(forest.w_target, np.int32)
        self.w_value = np.ascontiguousarray(forest.w_value, np.float64)
        self.max_steps = int(forest.mode.size)
        # the tables' addresses, taken once (the arrays live as long as this object)
        self.nodes_at, self.roots_at = address(self.nodes), address(self.roots)
        self.leaves_at = (address(self.leaf_start), address(self.leaf_count),
                          address(self.w_target), address(self.w_value))


def tables(forest) -> Optional[Tables]:
    """The forest's tables, or None where the kernel does not apply: thresholds neither
    float32 nor float64 (float16 compares in its own rounding), or indices past int32."""
    if forest.threshold.dtype not in (np.float32, np.float64):
        return None
    nodes = forest.mode.size
    if max(nodes * 2, forest.w_target.size, int(forest.w_target.max(initial=0)),
           int(forest.feature.max(initial=0))) > _INT32_MAX:
        return None
    # the kernel trusts its indices: every one is checked here, once (a malformed model's
    # bad index is then the numpy path's error, not a read out of bounds)
    children = np.concatenate([forest.children, forest.roots])
    if children.size and (children.min() < 0 or children.max() >= nodes):
        return None
    leaves = forest.leaf_count > 0
    if (forest.leaf_start[leaves] + forest.leaf_count[leaves] > forest.w_target.size).any():
        return None
    return Tables(forest)


def aggregate(t: Tables, x: np.ndarray, n_targets: int, function: str) -> tuple:
    """(scores [N, n_targets] float64, hit [N, n_targets] bool) as _Forest.aggregate makes
    them; raises ValueError for a tree with a cycle or a weight's target out of range."""
    x = np.ascontiguousarray(np.asarray(x, t.compare_type), np.float64)
    n = x.shape[0]
    scores = np.zeros((n, n_targets), np.float64)
    hit = np.zeros((n, n_targets), np.uint8)
    code = library().er_cpu_forest(address(x), n, x.shape[1], t.nodes_at, t.roots_at,
                                   t.roots.size, *t.leaves_at, n_targets, AGGREGATES[function],
                                   t.max_steps, address(scores), address(hit))
    if code == 1:
        raise ValueError("tree ensemble: a tree has a cycle (a node is reached twice on a "
                         "path)")
    if code == 2:
        raise ValueError(f"a leaf weight targets an index outside [0, {n_targets})")
    if function == "AVERAGE" and t.roots.size:
        scores /= t.roots.size
    return scores, hit.view(bool)
