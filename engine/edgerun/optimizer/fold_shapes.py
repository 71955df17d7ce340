"""Values computed from tensor shapes (Shape, Size, Gather/Concat/Slice of dimensions ...)
become constants when edgerun.shape_inference proves every element static.

Runs on the main graph only (input shapes come from the model's declared inputs), on the
infer_types pass's inference (`ctx.inferred`), and
leaves the inferred types in `ctx.inferred_types`, which later passes use for ranks.
Values that involve symbolic dimensions stay computed at run time.
"""
from __future__ import annotations

from ..ir.host_tensor import HostTensor
from .graph_edit import GraphView, PassContext

MAX_FOLDED_ELEMENTS = 4096


def fold_shapes(view: GraphView, ctx: PassContext) -> int:
    if view.graph is not ctx.model.graph:
        return 0
    result = ctx.inferred                 # the infer_types pass's
    if result is None:
        return 0
    ctx.inferred_types = dict(result)
    count = 0
    for node in view.live_nodes():
        values = [_static_value(result, name, ctx.has_numpy) for name in node.outputs if name]
        if not values or any(v is None for v in values) or not node.inputs:
            continue
        if all(view.constant(n) is not None for n in node.inputs if n):
            continue    # plain constant folding handles these
        view.remove(node)
        for name, value in zip([n for n in node.outputs if n], values):
            view.set_constant(name, value)
        count += 1
    return count


def _static_value(result, name: str, has_numpy: bool):
    items, info = result.values.get(name), result.get(name)
    if items is None or info is None or info.kind != "tensor" or info.shape is None:
        return None
    if not all(isinstance(d, int) for d in info.shape) or len(items) > MAX_FOLDED_ELEMENTS:
        return None
    if not all(isinstance(v, (int, bool)) for v in items):
        return None
    size = 1
    for d in info.shape:
        size *= d
    if size != len(items):
        return None
    if not has_numpy:
        try:
            return HostTensor.from_values(info.elem_type, info.shape, items)
        except TypeError:      # an element type struct cannot write: left computed
            return None
    import numpy as np

    from ..ir.dtypes import numpy_dtype

    return np.array(items, dtype=numpy_dtype(info.elem_type)).reshape(info.shape)
