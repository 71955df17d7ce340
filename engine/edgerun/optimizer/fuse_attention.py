"""Scaled dot-product attention written out in primitives becomes one Attention node:

    scores = MatMul(Q', Transpose(K)')  then  Div(c) or Mul(c)     (' = optional Mul by c)
    Y      = MatMul(Softmax(scores [+ mask], last axis), V)

which covers BERT-style exports (MatMul, Div by sqrt(head_size), Add mask, Softmax, MatMul)
and PyTorch's scaled_dot_product_attention export (Q and K^T each multiplied by
sqrt(scale)). Q, K, V must be 4-D [batch, heads, seq, head_size]; every scale factor a
constant scalar; K^T a Transpose with perm [0,1,3,2] (or [0,2,3,1] straight from a
[batch, seq, heads, head_size] tensor, which then gets a Transpose [0,2,1,3]).
The result is com.edgerun Attention with inputs (Q, K, V, mask) and `scale`: the meaning of
standard Attention (opset 23) for these inputs, but kept in edgerun's domain at every opset
because onnxruntime's Attention (1.32) rejects masks that broadcast over the query axis
([batch, 1, 1, seq], what BERT exports use), so saved files must spell it out again
(optimizer/save.py). Multiplying the scales into one changes float rounding (~1e-6
relative).
"""
from __future__ import annotations

from .. import ir
from .graph_edit import EDGERUN_DOMAIN, GraphView, PassContext, attr_float, attr_ints
from .patterns import const_side, intermediate, single_reader_of
from .ranks import known_rank

FLOAT = 1
SWAP_LAST = [0, 1, 3, 2]
FROM_SEQ_MAJOR = [0, 2, 3, 1]


def fuse_attention(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for softmax in view.live_nodes():
        if view.is_dead(softmax) or softmax.domain not in ("", "ai.onnx") \
                or softmax.op_type != "Softmax":
            continue
        if softmax.attr("axis", -1 if ctx.opset() >= 13 else 1) not in (-1, 3):
            continue
        out = single_reader_of(view, softmax, "MatMul")
        if out is None or out.inputs[0] != softmax.outputs[0] or known_rank(view, out.inputs[1]) != 4:
            continue
        match = _logits(view, softmax.inputs[0])
        if match is None:
            continue
        nodes, q, k_source, k_perm, scale, mask = match
        k = k_source
        if k_perm == FROM_SEQ_MAJOR:
            k = ctx.fresh_name(f"{k_source}_heads_first")
            view.insert(ir.Node(op_type="Transpose", inputs=[k_source], outputs=[k],
                                attributes={"perm": attr_ints("perm", [0, 2, 1, 3])}), out)
        fused = ir.Node(op_type="Attention", domain=EDGERUN_DOMAIN,
                        inputs=[q, k, out.inputs[1]] + ([mask] if mask else []),
                        outputs=[out.outputs[0]],
                        attributes={"scale": attr_float("scale", scale)}, name=softmax.name)
        ctx.use_edgerun_domain()
        view.replace(nodes + [softmax, out], fused)
        count += 1
    return count


def _logits(view: GraphView, name: str):
    """(nodes, Q, K source, K perm, scale, mask or '') for scores [+ mask]."""
    add = intermediate(view, name, "Add")
    if add is not None and len(add.inputs) == 2:
        for side in (0, 1):
            scores = _scores(view, add.inputs[side])
            if scores is not None:
                nodes, q, k, perm, scale = scores
                return nodes + [add], q, k, perm, scale, add.inputs[1 - side]
    scores = _scores(view, name)
    if scores is None:
        return None
    return scores + ("",)


def _scores(view: GraphView, name: str):
    """(nodes, Q, K source, K perm, scale) for MatMul(Q, K^T) scaled by constants."""
    nodes, scale = [], 1.0
    scaled = intermediate(view, name, "Div", "Mul")
    if scaled is not None:
        if scaled.op_type == "Div":
            c, name = _scalar_f32(view, scaled.inputs[1]), scaled.inputs[0]
            c = None if not c else 1.0 / c
        else:
            c, name = const_side(view, scaled)
            if c is not None and not _scalar_f32(view, _constant_of(view, scaled)):
                c = None
        if c is None:
            return None
        nodes.append(scaled)
        scale *= c
    mm = intermediate(view, name, "MatMul")
    if mm is None:
        return None
    q_nodes, q, q_scale = _peel_scale(view, mm.inputs[0])
    k_nodes, kt, k_scale = _peel_scale(view, mm.inputs[1])
    transpose = intermediate(view, kt, "Transpose")
    if transpose is None or list(transpose.attr("perm") or []) not in (SWAP_LAST, FROM_SEQ_MAJOR):
        return None
    pre_nodes, k, pre_scale = _peel_scale(view, transpose.inputs[0])
    if list(transpose.attr("perm")) == FROM_SEQ_MAJOR and pre_nodes:
        return None
    if known_rank(view, q) != 4:
        return None
    nodes = q_nodes + pre_nodes + [transpose] + k_nodes + [mm] + nodes
    return nodes, q, k, list(transpose.attr("perm")), scale * q_scale * k_scale * pre_scale


def _peel_scale(view: GraphView, name: str):
    """([Mul], input, factor) when `name` is a Mul by a constant float32 scalar, else
    ([], name, 1)."""
    mul = intermediate(view, name, "Mul")
    if mul is not None:
        c, other = const_side(view, mul)
        if c is not None and _scalar_f32(view, _constant_of(view, mul)):
            return [mul], other, c
    return [], name, 1.0


def _constant_of(view: GraphView, node) -> str:
    return next((n for n in node.inputs if view.scalar(n) is not None), "")


def _scalar_f32(view: GraphView, name: str):
    if view.elem_type_of_constant(name) != FLOAT:
        return None
    return view.scalar(name)
