"""If, Loop, Scan, SequenceMap: their bodies are inferred with the enclosing names visible."""
from __future__ import annotations

from ...errors import InvalidGraph
from ...ir import dtypes
from .. import symbolic
from ..context import sequence, tensor
from ..registry import infer
from ._common import scalar
from .sequence import element_of, merge_types


@infer("If")
def if_(ctx):
    branches = {True: ctx.node.attr("then_branch"), False: ctx.node.attr("else_branch")}
    cond = ctx.scalar(0)
    if cond is not None and not isinstance(cond, str):
        # a constant condition: the other branch is dead, and may not even fit these shapes
        return ctx.infer_subgraph(branches[bool(cond)], [])
    results = []
    for graph in branches.values():
        try:
            results.append(ctx.infer_subgraph(graph, []))
        except InvalidGraph as e:      # a branch that cannot run with these shapes
            ctx.unfit_branch(f"branch '{graph.name}' does not fit the inferred shapes: {e}")
    if not results:
        ctx.fail("neither branch fits the inferred shapes")
    if len(results) == 1:
        return results[0]
    return [merge_types(a, b) for a, b in zip(*results)]


def _loosened(before, after):
    return [merge_types(a, b) if b is not None else a for a, b in zip(before, after)]


@infer("Loop")
def loop(ctx):
    body = ctx.node.attr("body")
    carried = [ctx.type(i) for i in range(2, ctx.num_inputs)]
    fixed = [scalar(dtypes.INT64), scalar(dtypes.BOOL)]
    outputs = ctx.infer_subgraph(body, fixed + carried)
    n = len(carried)
    loosened = _loosened(carried, outputs[1:1 + n])
    if loosened != carried:      # a carried value changes shape across iterations
        outputs = ctx.infer_subgraph(body, fixed + loosened)
        loosened = _loosened(loosened, outputs[1:1 + n])
    trip = ctx.scalar(0) if ctx.has(0) and not ctx.has(1) else None
    if not symbolic.is_int(trip):
        trip = ctx.fresh()
    scans = []
    for t in outputs[1 + n:]:
        shape = t.shape if t is not None and t.kind == "tensor" else None
        scans.append(tensor(t.elem_type if t is not None else 0,
                            None if shape is None else (trip,) + tuple(shape)))
    return loosened + scans


@infer("Scan")
def scan(ctx):
    body = ctx.node.attr("body")
    n_scan = ctx.attr("num_scan_inputs")
    if ctx.opset < 9:
        return _scan_8(ctx, body, n_scan)
    n_state = ctx.num_inputs - n_scan
    states = [ctx.type(i) for i in range(n_state)]
    axes = ctx.attr("scan_input_axes") or [0] * n_scan
    slices, length = [], None
    for k in range(n_scan):
        s = ctx.shape(n_state + k)
        if s is None:
            slices.append(tensor(ctx.elem(n_state + k), None))
            continue
        axis = ctx.axis(axes[k], len(s))
        length = length if length is not None else s[axis]
        slices.append(tensor(ctx.elem(n_state + k), tuple(d for i, d in enumerate(s)
                                                          if i != axis)))
    outputs = ctx.infer_subgraph(body, states + slices)
    finals = _loosened(states, outputs[:n_state])
    out_axes = ctx.attr("scan_output_axes") or [0] * (len(outputs) - n_state)
    scans = []
    for t, axis in zip(outputs[n_state:], out_axes):
        if t is None or t.shape is None:
            scans.append(tensor(t.elem_type if t is not None else 0, None))
            continue
        axis = ctx.axis(axis, len(t.shape) + 1)
        shape = list(t.shape)
        shape.insert(axis, length)
        scans.append(tensor(t.elem_type, tuple(shape)))
    return finals + scans


def _scan_8(ctx, body, n_scan):
    """Opset 8: optional sequence_lens first, and every tensor has a leading batch axis."""
    n_state = ctx.num_inputs - 1 - n_scan
    states, batch = [], None
    for i in range(1, 1 + n_state):
        s = ctx.shape(i)
        batch = batch if batch is not None or s is None else s[0]
        states.append(tensor(ctx.elem(i), None if s is None else tuple(s[1:])))
    slices, length = [], None
    for i in range(1 + n_state, ctx.num_inputs):
        s = ctx.shape(i)
        if s is not None:
            batch = batch if batch is not None else s[0]
            length = length if length is not None else s[1]
        slices.append(tensor(ctx.elem(i), None if s is None else tuple(s[2:])))
    outputs = ctx.infer_subgraph(body, states + slices)
    result = []
    for k, t in enumerate(outputs):
        extra = (batch,) if k < n_state else (batch, length)
        shape = None if t is None or t.shape is None else extra + tuple(t.shape)
        result.append(tensor(t.elem_type if t is not None else 0, shape))
    return result


@infer("SequenceMap")
def sequence_map(ctx):
    body = ctx.node.attr("body")
    items = []
    for i in range(ctx.num_inputs):
        t = ctx.type(i)
        items.append(element_of(t) if t is not None and t.kind == "sequence" else t)
    return [sequence(t) for t in ctx.infer_subgraph(body, items)]
