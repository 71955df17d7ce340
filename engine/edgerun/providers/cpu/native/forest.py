"""Tree ensembles in one native call (cpu_kernels/forest.c): every row walked through every
tree and the leaves' weights aggregated, equal bit for bit to the numpy path of
providers/cpu/ops/ml.py's _Forest (the same comparisons, float64 sums in the same order).
`tables(forest)` converts a forest's node table once; `aggregate` runs it."""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import parallel
from .row_buffers import FEW_ROWS, RowBuffers
from .library import address, library
from .library import available as available  # callers ask the module they use

AGGREGATES = {"SUM": 0, "AVERAGE": 0, "MIN": 1, "MAX": 2}
VISIT_MACS = 200        # a node visit (~2 ns) in the multiply-adds parallel.py counts work in
_INT32_MAX = 2**31 - 1


# cpu_kernels/forest.c's Node: one node in 24 bytes
NODE = np.dtype([("threshold", "<f8"), ("feature", "<i4"), ("next", "<i4", (2,)),
                 ("mode", "i1"), ("missing_true", "u1"), ("unused", "<i2")])
# cpu_kernels/forest.c's Forest: the tables' addresses and sizes, passed as one pointer
FOREST = np.dtype([("nodes", "<u8"), ("roots", "<u8"), ("n_trees", "<i8"),
                   ("leaf_start", "<u8"), ("leaf_count", "<u8"), ("w_target", "<u8"),
                   ("w_value", "<u8"), ("max_steps", "<i8"), ("mode", "<i8"),
                   ("depths", "<u8")])


class Tables:
    """A forest's node table as the C kernel reads it (Node records; int32 indices, float64
    weights), and the type its comparisons round the input to first."""

    def __init__(self, forest):
        self.compare_type = forest.threshold.dtype
        nodes = np.zeros(forest.mode.size, NODE)
        nodes["threshold"] = forest.threshold
        nodes["feature"] = forest.feature
        leaf = forest.is_leaf
        # a leaf points to itself: rows walked in lockstep stay on theirs
        nodes["next"] = np.where(leaf[:, None], np.arange(leaf.size)[:, None],
                                 forest.children.reshape(-1, 2))
        nodes["mode"] = forest.mode
        nodes["missing_true"] = forest.missing_true
        self.nodes = nodes
        self.roots = np.ascontiguousarray(forest.roots, np.int32)
        self.leaf_start = np.ascontiguousarray(forest.leaf_start, np.int32)
        self.leaf_count = np.ascontiguousarray(forest.leaf_count, np.int32)
        self.w_target = np.ascontiguousarray(forest.w_target, np.int32)
        self.w_value = np.ascontiguousarray(forest.w_value, np.float64)
        decisions = np.unique(forest.mode[~leaf])
        header = np.zeros(1, FOREST)
        header["nodes"], header["roots"] = address(self.nodes), address(self.roots)
        header["n_trees"] = self.roots.size
        header["leaf_start"], header["leaf_count"] = (address(self.leaf_start),
                                                      address(self.leaf_count))
        header["w_target"], header["w_value"] = address(self.w_target), address(self.w_value)
        header["max_steps"] = forest.mode.size
        header["mode"] = decisions[0] if decisions.size == 1 else -1
        depths = tree_depths(forest.children.reshape(-1, 2), leaf, forest.roots)
        self.depths = None if depths is None else np.ascontiguousarray(depths, np.int32)
        header["depths"] = 0 if self.depths is None else address(self.depths)
        self.visits_per_row = forest.mode.size if depths is None else int(depths.sum())
        self.header = header      # holds the addresses of arrays this object keeps alive
        self.header_at = address(header)
        self.n_trees = self.roots.size
        self.few_rows: dict = {}      # per node's arguments: _FewRows


def tree_depths(children: np.ndarray, leaf: np.ndarray, roots: np.ndarray):
    """Each tree's deepest leaf (decisions from its root), level by level over every path;
    None where the nodes are not trees (a cycle, or paths that meet: more paths than
    nodes at one level)."""
    depths = np.zeros(roots.size, np.int64)
    current, owner = roots, np.arange(roots.size)
    for level in range(leaf.size + 1):
        interior = ~leaf[current]
        if not interior.any():
            return depths
        current = children[current[interior]].reshape(-1)
        owner = np.repeat(owner[interior], 2)
        if current.size > 2 * leaf.size:
            return None
        depths[owner] = level + 1
    return None


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


def aggregate(t: Tables, x: np.ndarray, n_targets: int, function: str,
              base: Optional[np.ndarray] = None) -> tuple:
    """(scores [N, n_targets] float64, hit [N, n_targets] bool) as _Forest.aggregate makes
    them (with `base`, one float64 value per target: hit targets plus it, missed ones 0);
    raises ValueError for a tree with a cycle or a weight's target out of range. Up to
    FEW_ROWS rows they are views of this thread's buffers, valid until its next call."""
    if x.dtype != t.compare_type:
        x = x.astype(t.compare_type)
    divisor = float(t.n_trees) if function == "AVERAGE" else 0.0
    if x.shape[0] <= FEW_ROWS:
        scores, hit, code = _walk_few(t, x, n_targets, AGGREGATES[function], divisor, base)
    else:
        x = np.ascontiguousarray(x, np.float64)
        scores = np.empty((x.shape[0], n_targets), np.float64)
        hit = np.empty((x.shape[0], n_targets), np.uint8)
        code = _walk(t, x, n_targets, AGGREGATES[function], divisor, base, scores, hit)
    if code == 1:
        raise ValueError("tree ensemble: a tree has a cycle (a node is reached twice on a "
                         "path)")
    if code == 2:
        raise ValueError(f"a leaf weight targets an index outside [0, {n_targets})")
    return scores, hit.view(bool)


# cpu_kernels/forest.c's ForestCall: er_cpu_forest's arguments in one record (ctypes takes
# ~0.1 us an argument: ten cost more than a small forest's walk)
CALL = np.dtype([("x", "<u8"), ("n", "<i8"), ("n_features", "<i8"), ("forest", "<u8"),
                 ("n_targets", "<i8"), ("aggregate", "<i8"), ("divisor", "<f8"),
                 ("base", "<u8"), ("scores", "<u8"), ("hit", "<u8")])


class _FewRows(RowBuffers):
    """One thread's rows (input, scores, hits) for one node's calls of up to FEW_ROWS rows,
    and the kernel's arguments over them."""

    def __init__(self, t: Tables, features: int, n_targets: int, aggregate: int,
                 divisor: float, base: Optional[np.ndarray]):
        super().__init__((features, np.float64), (n_targets, np.float64),
                         (n_targets, np.bool_))       # the kernel writes hits as bytes 0/1
        x_at, scores_at, hit_at = self.at
        self.call = np.zeros(1, CALL)
        self.call[0] = (x_at, 0, features, t.header_at, n_targets, aggregate, divisor,
                        0 if base is None else address(base), scores_at, hit_at)
        self.rows = self.call["n"]           # the one field a call sets
        self.call_at = address(self.call)
        self.base = base                     # held: its address is in the record


def _walk_few(t: Tables, x: np.ndarray, n_targets: int, aggregate: int, divisor: float,
              base: Optional[np.ndarray]) -> tuple:
    """The kernel over a few rows through this thread's buffers: (scores, hit as bool,
    code), views of the buffers valid until this thread's next call for this forest."""
    n, features = x.shape
    # (a _FewRows holds its base: the id in its key cannot be another array's)
    key = (features, n_targets, aggregate, divisor, None if base is None else id(base))
    few = t.few_rows.get(key)
    if few is None:
        few = t.few_rows[key] = _FewRows(t, features, n_targets, aggregate, divisor, base)
    rows, scores, hit = few.views[n]
    rows[...] = x
    few.rows[0] = n
    return scores, hit, library().er_cpu_forest_call(few.call_at)


def _walk(t: Tables, x: np.ndarray, n_targets: int, aggregate: int, divisor: float,
          base: Optional[np.ndarray], scores: np.ndarray, hit: np.ndarray) -> int:
    """The kernel over x's rows, in parts on the native threads where there is work enough;
    its return code (the worst part's). Rows are independent: the same sums either way."""
    n, features = x.shape
    kernel = library().er_cpu_forest
    x_at, scores_at, hit_at = address(x), address(scores), address(hit)
    base_at = None if base is None else address(base)
    macs = n * t.visits_per_row * VISIT_MACS
    if macs < parallel.SPLIT_RECORD_MACS:       # one part, without parts_for's call
        return kernel(x_at, n, features, t.header_at, n_targets, aggregate, divisor, base_at,
                      scores_at, hit_at)
    ranges = parallel.split(n, parallel.parts_for(macs, n, parallel.MIN_RECORD_MACS))
    calls = np.zeros(len(ranges), CALL)        # one ForestCall per part, run on the pool
    for i, (r0, r1) in enumerate(ranges):
        calls[i] = (x_at + r0 * features * 8, r1 - r0, features, t.header_at, n_targets,
                     aggregate, divisor, base_at or 0, scores_at + r0 * n_targets * 8,
                     hit_at + r0 * n_targets)
    return parallel.run_records("er_cpu_forest_call", calls)
