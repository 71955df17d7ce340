"""A Scaler (ai.onnx.ml) read only by a Gemm with constant weights folds into that Gemm:

    ((x - offset) * scale) @ B + C  =  x @ (scale[:, None] * B) + (C - (offset * scale) @ B)

so a scikit-learn pipeline (StandardScaler, then a linear model or an MLP) skips one pass
over its input. x reaches the Gemm through a Cast to float: Scaler accepts double and
integer inputs and always yields float, which a Cast already between the two (skl2onnx
writes one) gives as well.

Folding subtracts two terms where Scaler subtracts before scaling: where |offset * scale| is
large (a feature whose mean is far from zero relative to its spread) the rounding of those
terms would swamp the difference, so such Scalers stay.
"""
from __future__ import annotations

from .. import ir
from .graph_edit import GraphView, PassContext, attr_float, attr_int, is_onnx

FLOAT = 1                    # TensorProto.FLOAT
MAX_OFFSET_TIMES_SCALE = 8.0


def fold_scaler(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for gemm in view.live_nodes():
        if view.is_dead(gemm) or not is_onnx(gemm, "Gemm") or gemm.attr("transA", 0):
            continue
        cast = view.produced_by(gemm.inputs[0], "Cast")
        if cast is not None and (cast.attr("to") != FLOAT or
                                 view.only_reader(cast.outputs[0]) is not gemm):
            cast = None
        scaled = cast.inputs[0] if cast is not None else gemm.inputs[0]
        scaler = view.producer.get(scaled)
        if scaler is None or scaler.domain != "ai.onnx.ml" or scaler.op_type != "Scaler" or \
                view.only_reader(scaled) is not (cast or gemm):
            continue
        folded = _folded(view, scaler, gemm)
        if folded is None:
            continue
        _rewrite(view, ctx, scaler, cast, gemm, *folded)
        count += 1
    return count


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
    features, n = weights.shape
    offset = _per_feature(scaler.attr("offset"), features, 0.0)
    scale = _per_feature(scaler.attr("scale"), features, 1.0)
    if offset is None or scale is None or (c is not None and c.size not in (1, n)):
        return None
    if np.abs(offset * scale).max(initial=0.0) > MAX_OFFSET_TIMES_SCALE:
        return None
    alpha, beta = float(gemm.attr("alpha", 1.0)), float(gemm.attr("beta", 1.0))
    scaled_weights = scale[:, None] * weights
    bias = -alpha * ((offset * scale) @ weights)
    if c is not None:
        bias = bias + beta * c.astype(np.float64).reshape(-1)
    new_b = scaled_weights.T if transposed else scaled_weights
    return new_b.astype(np.float32), bias.astype(np.float32)


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
    """Scaler [-> Cast] -> Gemm becomes Cast -> Gemm (x must still reach it as float)."""
    to_float = ir.Node(op_type="Cast", inputs=[scaler.inputs[0]],
                       outputs=[cast.outputs[0] if cast is not None else
                                ctx.fresh_name(f"{scaler.outputs[0]}_float")],
                       attributes={"to": attr_int("to", FLOAT)},
                       name=cast.name if cast is not None else f"{scaler.name}_cast")
    view.replace([scaler] + ([cast] if cast is not None else []), to_float)
    attributes = dict(gemm.attributes)
    attributes["beta"] = attr_float("beta", 1.0)
    folded = ir.Node(op_type="Gemm", domain=gemm.domain,
                     inputs=[to_float.outputs[0],
                             view.add_constant(f"{gemm.inputs[1]}_scaled", new_b),
                             view.add_constant(f"{gemm.name or 'gemm'}_bias_scaled", new_c)],
                     outputs=list(gemm.outputs), attributes=attributes, name=gemm.name)
    view.replace([gemm], folded)
