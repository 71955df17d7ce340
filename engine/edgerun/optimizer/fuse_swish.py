"""x * Sigmoid(x) becomes one Swish node (SiLU: YOLO-style detectors, PP-OCR's recognisers,
EfficientNet), which fuse_activation then folds into the convolution before it: one pass over
the tensor instead of the sigmoid's several and the product's one.

    Mul(x, Sigmoid(x)) or Mul(Sigmoid(x), x), the Sigmoid read by that Mul alone

Swish is standard from opset 24 (alpha 1 is this form); older models get com.edgerun Swish
with the same meaning. Float32 only (the native pass computes in float32, rounding once where
the pair rounds twice), and only where the session's providers run Swish where they would
run the pair (`PassContext.runs_like`: not with the edge adapters, which judge whole
subgraphs later). optimizer/save.py writes the pair back.
"""
from __future__ import annotations

from .. import ir
from .graph_edit import EDGERUN_DOMAIN, GraphView, PassContext, attr_float, is_onnx
from .patterns import other_input, single_reader_of

FLOAT = 1
STANDARD_SINCE = 24


def fuse_swish(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for sigmoid in view.live_nodes():
        if view.is_dead(sigmoid) or not is_onnx(sigmoid, "Sigmoid") or not sigmoid.inputs:
            continue
        x = sigmoid.inputs[0]
        times = single_reader_of(view, sigmoid, "Mul")
        if times is None or other_input(times, sigmoid.outputs[0]) != x or \
                view.declared_elem_type(x) != FLOAT:
            continue
        standard = ctx.opset() >= STANDARD_SINCE
        fused = ir.Node(op_type="Swish", domain="" if standard else EDGERUN_DOMAIN,
                        inputs=[x], outputs=[times.outputs[0]], name=times.name,
                        attributes={"alpha": attr_float("alpha", 1.0)})
        if not ctx.runs_like(fused, [sigmoid, times]):
            continue
        if not standard:
            ctx.use_edgerun_domain()
        view.replace([sigmoid, times], fused)
        count += 1
    return count
