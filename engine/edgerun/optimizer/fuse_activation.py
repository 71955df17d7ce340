"""Conv, Gemm or MatMul followed by an activation becomes com.edgerun FusedConv, FusedGemm or
FusedMatMul (see providers/cpu/ops/fused.py): one node, the activation applied in place.

Activations: Relu, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish (MobileNetV3, PP-LCNet),
Clip with constant bounds, and Swish (fuse_swish's x * Sigmoid(x): YOLO-style detectors) where
the session's providers run the fused node where they ran the pair (onnxruntime's fused
operators have no Swish, so a saved model writes it back as Sigmoid and Mul).
Only when the base operator's output feeds nothing but the activation, and for float32
(onnxruntime's FusedConv and FusedGemm, which saved files use, are float only).
"""
from __future__ import annotations

from .. import ir
from .graph_edit import EDGERUN_DOMAIN, GraphView, PassContext, attr_floats, attr_string

FUSABLE = {"Conv": "FusedConv", "Gemm": "FusedGemm", "MatMul": "FusedMatMul"}
# activations some providers' fused kernels lack (the edge adapters'): fused only where the
# fused node stays on the provider that ran the pair
NEEDS_SAME_PROVIDER = {"Swish"}
FLOAT = 1


def fuse_activation(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for act in view.live_nodes():
        if view.is_dead(act) or not _activation_domain(act) or not act.inputs:
            continue
        params = activation_params(view, act)
        if params is None:
            continue
        base = view.produced_by(act.inputs[0], *FUSABLE)
        if base is None or view.only_reader(base.outputs[0]) is not act:
            continue
        if len(base.outputs) != 1 or not is_float32(view, base):
            continue
        attributes = dict(base.attributes)
        attributes["activation"] = attr_string("activation", act.op_type)
        attributes["activation_params"] = attr_floats("activation_params", params)
        fused = ir.Node(op_type=FUSABLE[base.op_type], domain=EDGERUN_DOMAIN,
                        inputs=list(base.inputs), outputs=[act.outputs[0]],
                        attributes=attributes, name=base.name)
        if act.op_type in NEEDS_SAME_PROVIDER and not ctx.runs_like(fused, [base, act]):
            continue
        view.replace([base, act], fused)
        ctx.use_edgerun_domain()
        count += 1
    return count


def _activation_domain(act) -> bool:
    """ONNX's activations, and com.edgerun's HardSwish and Swish: fuse_hard_swish's and
    fuse_swish's forms below opset 14 and 24 (ppocr cls: 18 Conv + HardSwish pairs)."""
    return act.domain in ("", "ai.onnx") or \
        (act.domain == EDGERUN_DOMAIN and act.op_type in ("HardSwish", "Swish"))


def activation_params(view: GraphView, act):
    """The activation's parameters as a list of floats, or None if it cannot be fused."""
    op = act.op_type
    if op in ("Relu", "Sigmoid", "Tanh", "HardSwish") and len(act.outputs) == 1:
        return []
    if op == "LeakyRelu":
        return [act.attr("alpha", 0.01)]
    if op == "HardSigmoid":
        return [act.attr("alpha", 0.2), act.attr("beta", 0.5)]
    if op == "Swish":
        return [act.attr("alpha", 1.0)]
    if op == "Clip":
        if "min" in act.attributes or "max" in act.attributes:      # opset < 11
            return [act.attr("min", -3.4028234663852886e38), act.attr("max", 3.4028234663852886e38)]
        bounds = []
        for i, default in ((1, -3.4028234663852886e38), (2, 3.4028234663852886e38)):
            if len(act.inputs) > i and act.inputs[i]:
                value = view.scalar(act.inputs[i])
                if value is None:
                    return None
                bounds.append(value)
            else:
                bounds.append(default)
        return bounds
    return None


def is_float32(view: GraphView, base) -> bool:
    """Judged by the weight, which is a constant in every model worth fusing."""
    weight = base.inputs[1] if len(base.inputs) > 1 else ""
    if weight in view.graph.initializers or view.constant(weight) is not None:
        return view.elem_type_of_constant(weight) == FLOAT
    for v in list(view.graph.inputs) + list(view.graph.value_info):
        if v.name in base.inputs and v.type is not None:
            return v.type.elem_type == FLOAT
    return False
