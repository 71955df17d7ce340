"""A Scaler (ai.onnx.ml) read only by a linear step with constant weights folds into it:

    ((x - offset) * scale) @ B + C  =  x @ (scale[:, None] * B) + (C - (offset * scale) @ B)

for a Gemm (B, C its constant inputs) and for LinearClassifier / LinearRegressor (B, C their
`coefficients` and `intercepts` attributes), so a scikit-learn pipeline (StandardScaler, then
a linear model or an MLP) skips one node and one pass over its input. x may reach the step
through a Cast to float: Scaler accepts double and integer inputs and always yields float,
so unless x is float already a Cast takes the Scaler's place (onnxruntime's LinearRegressor
reads float alone).

Folding subtracts two terms where Scaler subtracts before scaling: where |offset * scale| is
large (a feature whose mean is far from zero relative to its spread) the rounding of those
terms would swamp the difference, so such Scalers stay. A Gemm adds its terms in float32;
the linear models' kernel in float64, so there only the folded weights' float32 storage
rounds (relative 6e-8 of |offset * scale| times the weight): they allow a larger ratio (a
scikit-learn StandardScaler over the wine data has 16).
"""
from __future__ import annotations

from .. import ir
from .graph_edit import GraphView, PassContext, attr_float, attr_floats, attr_int, is_onnx

FLOAT = 1                    # TensorProto.FLOAT
MAX_OFFSET_TIMES_SCALE = 8.0
MAX_OFFSET_TIMES_SCALE_LINEAR = 64.0
LINEAR_MODELS = ("LinearClassifier", "LinearRegressor")


def fold_scaler(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for step in view.live_nodes():
        if view.is_dead(step) or not _linear_step(step) or not step.inputs:
            continue
        cast = view.produced_by(step.inputs[0], "Cast")
        if cast is not None and (cast.attr("to") != FLOAT or
                                 view.only_reader(cast.outputs[0]) is not step):
            cast = None
        scaled = cast.inputs[0] if cast is not None else step.inputs[0]
        scaler = view.producer.get(scaled)
        if scaler is None or scaler.domain != "ai.onnx.ml" or scaler.op_type != "Scaler" or \
                view.only_reader(scaled) is not (cast or step):
            continue
        if is_onnx(step, "Gemm"):
            folded = _folded(view, scaler, step)
            if folded is not None:
                _rewrite(view, ctx, scaler, cast, step, *folded)
                count += 1
        elif _fold_into_linear_model(view, ctx, scaler, cast, step):
            count += 1
    return count


def _linear_step(node: ir.Node) -> bool:
    return (is_onnx(node, "Gemm") and not node.attr("transA", 0)) or \
        (node.domain == "ai.onnx.ml" and node.op_type in LINEAR_MODELS)


def _folded(view: GraphView, scaler: ir.Node, gemm: ir.Node):
    """(B, C) of the Gemm with the Scaler folded in, or None where it does not fold."""
    import numpy as np

    b = view.constant(gemm.inputs[1])
    c_name = gemm.inputs[2] if len(gemm.inputs) > 2 else ""
    c = view.constant(c_name)
    if b is None or b.ndim != 2 or b.dtype != np.float32 or (c_name and c is None):
        return None
    transposed = bool(gemm.attr("transB", 0))
    weights = (b.T if transposed else b).astype(np.float64)         # (features, N)
    folded = _scaled(scaler, weights, MAX_OFFSET_TIMES_SCALE)
    if folded is None or (c is not None and c.size not in (1, weights.shape[1])):
        return None
    scaled_weights, shift = folded
    alpha, beta = float(gemm.attr("alpha", 1.0)), float(gemm.attr("beta", 1.0))
    bias = -alpha * shift
    if c is not None:
        bias = bias + beta * c.astype(np.float64).reshape(-1)
    new_b = scaled_weights.T if transposed else scaled_weights
    return new_b.astype(np.float32), bias.astype(np.float32)


def _scaled(scaler: ir.Node, weights, limit: float):
    """(scale[:, None] * weights, (offset * scale) @ weights) for weights (features, N) in
    float64: the folded step's weights and what its bias loses; None where the Scaler's
    attributes do not fit the features or some |offset * scale| exceeds `limit`."""
    import numpy as np

    features = weights.shape[0]
    offset = _per_feature(scaler.attr("offset"), features, 0.0)
    scale = _per_feature(scaler.attr("scale"), features, 1.0)
    if offset is None or scale is None or np.abs(offset * scale).max(initial=0.0) > limit:
        return None
    return scale[:, None] * weights, (offset * scale) @ weights


def _per_feature(values, features: int, default: float):
    """A Scaler attribute as one float64 value per feature (None if its length fits not)."""
    import numpy as np

    if not values:
        return np.full(features, default)
    try:
        values = np.asarray(values, np.float64)
    except (TypeError, ValueError):
        return None                  # not numbers: left to the Scaler kernel, which says so
    if values.size not in (1, features):
        return None
    return np.broadcast_to(values, (features,))


def _rewrite(view: GraphView, ctx: PassContext, scaler, cast, gemm, new_b, new_c) -> None:
    """Scaler [-> Cast] -> Gemm becomes [Cast ->] Gemm (x must still reach it as float)."""
    x = _float_x(view, ctx, scaler, cast)
    attributes = dict(gemm.attributes)
    attributes["beta"] = attr_float("beta", 1.0)
    folded = ir.Node(op_type="Gemm", domain=gemm.domain,
                     inputs=[x, view.add_constant(f"{gemm.inputs[1]}_scaled", new_b),
                             view.add_constant(f"{gemm.name or 'gemm'}_bias_scaled", new_c)],
                     outputs=list(gemm.outputs), attributes=attributes, name=gemm.name)
    view.replace([gemm], folded)


def _float_x(view: GraphView, ctx: PassContext, scaler, cast) -> str:
    """The Scaler's input as float, in place of the Scaler [and Cast]: itself where it is
    declared float (they go), else through a Cast that takes their place."""
    x = scaler.inputs[0]
    if view.declared_elem_type(x) == FLOAT:
        view.remove(scaler, *([cast] if cast is not None else []))
        return x
    to_float = ir.Node(op_type="Cast", inputs=[x],
                       outputs=[cast.outputs[0] if cast is not None else
                                ctx.fresh_name(f"{scaler.outputs[0]}_float")],
                       attributes={"to": attr_int("to", FLOAT)},
                       name=cast.name if cast is not None else f"{scaler.name}_cast")
    view.replace([scaler] + ([cast] if cast is not None else []), to_float)
    return to_float.outputs[0]


def _fold_into_linear_model(view: GraphView, ctx: PassContext, scaler, cast, model) -> bool:
    """Scaler [-> Cast] -> LinearClassifier / LinearRegressor becomes [Cast ->] the model,
    its coefficients scaled and intercepts shifted; False where it does not fold."""
    import numpy as np

    coefficients = model.attr("coefficients")
    if not coefficients:
        return False
    coef = np.asarray(coefficients, np.float64)
    intercepts = model.attr("intercepts")
    targets = (len(intercepts) if intercepts else
               int(model.attr("targets", 1)) if model.op_type == "LinearRegressor" else 0)
    if targets <= 0 or coef.size % targets:
        return False                # left to the kernel, which says what does not fit
    folded = _scaled(scaler, coef.reshape(targets, -1).T, MAX_OFFSET_TIMES_SCALE_LINEAR)
    if folded is None:
        return False
    scaled_weights, shift = folded                              # (features, targets)
    bias = -shift
    if intercepts:
        bias = bias + np.asarray(intercepts, np.float64)
    attributes = dict(model.attributes)
    attributes["coefficients"] = attr_floats(
        "coefficients", scaled_weights.T.reshape(-1).astype(np.float32))
    attributes["intercepts"] = attr_floats("intercepts", bias.astype(np.float32))
    x = _float_x(view, ctx, scaler, cast)
    folded = ir.Node(op_type=model.op_type, domain=model.domain, inputs=[x],
                     outputs=list(model.outputs), attributes=attributes, name=model.name)
    view.replace([model], folded)
    return True
