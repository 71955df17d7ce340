"""A QDQ model's Conv of DequantizeLinear outputs, rounded to 8 bits by the QuantizeLinear
after it, becomes QLinearConv over the 8-bit values: what onnxruntime's QDQ selectors make
of it, so the convolution runs on the integer kernels (8-bit products, int32 sums, the
output requantized in the product's epilogue) instead of a float32 convolution of the
dequantized values and a rounding pass after it.

    QuantizeLinear(Conv(DequantizeLinear(qx, sx, zx), DequantizeLinear(W, sw, zw),
                        DequantizeLinear(B, sx * sw, 0)), sy, zy)
      -> QLinearConv(qx, sx, zx, W, sw, zw, sy, zy, B)

qx is any 8-bit tensor with one scale and zero point; W constant 8-bit weights [M, C/group,
*kernel] with one scale and zero point or one per output channel (DequantizeLinear's axis
0); the bias, if any, constant int32 [M] on the grid sx * sw (quantize_static's); the
QuantizeLinear one scale and an 8-bit zero point; the Conv's output read by it alone.
Depthwise convolutions (one input channel a group) stay float: with no products to share
between output channels, the float depthwise kernels with the QDQ pair as their epilogue
(fuse_quantize_dequantize_epilogue) outrun an integer path. The
result is the integer convolution requantized once: the dequantized convolution's value,
rounded once instead of per term (the spread between onnxruntime's optimized and
unoptimized runs of the same file). The DequantizeLinear nodes stay for their other readers.

It runs before constant folding, which would turn DequantizeLinear(W) into float weights,
and only where the CPU provider runs QLinearConv as it would the Conv and the QuantizeLinear
(`PassContext.runs_like`; see INTEGER_CONV_PROVIDERS). All zero points must be given
(quantize_static writes them), since QLinearConv needs them as inputs.
"""
from __future__ import annotations

from .. import ir
from ..ir.host_tensor import flat_values
from .qdq_patterns import (FLOAT, INT8, INT32, UINT8, codes_with_zero_point,
                           per_tensor_quantize, plain_dequantize)
from .graph_edit import GraphView, PassContext, element_type, is_onnx
from .patterns import close_to, input_at

# Where QLinearConv outruns the float Conv between QDQ pairs: the CPU's integer kernels. The
# wasm provider's QLinearConv (an integer conv, then the bias and requantization as
# per-channel elementwise passes) measured 2.5-5x slower in a page than its float conv with
# the pairs (squeezenet QDQ 161 against 33 ms, YOLOX 672 against 267 ms), and WebGPU's is
# unmeasured on a real GPU, so those keep the float path.
INTEGER_CONV_PROVIDERS = ("cpu",)
CONV_ATTRIBUTES = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def fuse_qdq_conv(view: GraphView, ctx: PassContext) -> int:
    count = 0
    if ctx.opset("") < 10:
        return 0
    for rounding in view.live_nodes():
        if view.is_dead(rounding) or not is_onnx(rounding, "QuantizeLinear"):
            continue
        conv = view.produced_by(rounding.inputs[0], "Conv")
        if conv is None or view.only_reader(conv.outputs[0]) is not rounding or \
                not per_tensor_quantize(view, rounding):
            continue
        operands = _operands(view, conv)
        if operands is None:
            continue
        x, w, bias = operands
        inputs = [x.inputs[0], x.inputs[1], x.inputs[2], w.inputs[0], w.inputs[1], w.inputs[2],
                  rounding.inputs[1], rounding.inputs[2]] + ([bias.inputs[0]] if bias else [])
        attributes = {k: v for k, v in conv.attributes.items() if k in CONV_ATTRIBUTES}
        fused = ir.Node(op_type="QLinearConv", name=conv.name, inputs=inputs,
                        outputs=list(rounding.outputs), attributes=attributes)
        if not ctx.runs_like(fused, [conv, rounding], only=INTEGER_CONV_PROVIDERS):
            continue
        view.replace([conv, rounding], fused)
        count += 1
    return count


def _operands(view: GraphView, conv: ir.Node):
    """(x's, w's, the bias's DequantizeLinear or None) when the Conv's operands take the
    form the fusion needs, else None."""
    if len(conv.inputs) < 2:
        return None
    x = view.produced_by(conv.inputs[0], "DequantizeLinear")
    w = view.produced_by(conv.inputs[1], "DequantizeLinear")
    if x is None or w is None or not codes_with_zero_point(view, x) or \
            not _constant_weights(view, w) or _depthwise(view, conv, w):
        return None
    bias = None
    if input_at(conv, 2):
        bias = view.produced_by(conv.inputs[2], "DequantizeLinear")
        if bias is None or not _bias_on_product_grid(view, bias, x, w):
            return None
    return x, w, bias


def _depthwise(view: GraphView, conv: ir.Node, w: ir.Node) -> bool:
    return conv.attr("group", 1) > 1 and view.constant(w.inputs[0]).shape[1] == 1


def _constant_weights(view: GraphView, dq: ir.Node) -> bool:
    """Constant 8-bit weights [M, C/group, *kernel] with a given zero point, their scale
    (float32) and zero point one value or one per output channel (axis 0)."""
    weights = view.constant(input_at(dq, 0))
    scale = view.constant(input_at(dq, 1))
    zero = view.constant(input_at(dq, 2))
    if weights is None or weights.ndim < 3 or element_type(weights) not in (UINT8, INT8) or \
            scale is None or element_type(scale) != FLOAT or zero is None or \
            element_type(zero) != element_type(weights) or zero.size != scale.size or \
            not plain_dequantize(dq):
        return False
    per_channel = scale.ndim == 1 and scale.size == weights.shape[0] and \
        dq.attr("axis", 1) in (0, -weights.ndim)
    return scale.size == 1 or per_channel


def _bias_on_product_grid(view: GraphView, dq: ir.Node, x: ir.Node, w: ir.Node) -> bool:
    """A constant int32 bias [M] with zero points 0 (or none) and a scale that is x's times
    w's (per output channel): what QLinearConv adds to its int32 sums as it is."""
    bias = view.constant(input_at(dq, 0))
    scale = view.constant(input_at(dq, 1))
    weights = view.constant(w.inputs[0])
    if bias is None or element_type(bias) != INT32 or bias.ndim != 1 or \
            bias.size != weights.shape[0] or scale is None or element_type(scale) != FLOAT or \
            scale.size not in (1, bias.size) or not plain_dequantize(dq):
        return False
    if input_at(dq, 2):
        zero = view.constant(input_at(dq, 2))
        if zero is None or any(flat_values(zero)):
            return False
    x_scale = view.scalar(x.inputs[1])
    w_scales = flat_values(view.constant(w.inputs[1]))
    bias_scales = flat_values(scale)
    return all(close_to(bias_scales[i % len(bias_scales)], x_scale * w_scales[i % len(w_scales)],
                        rel=1e-6) for i in range(bias.size))
