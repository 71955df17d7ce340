"""A Conv or BatchNormalization whose result a QDQ model rounds to its 8-bit grid (the op ->
com.edgerun QuantizeDequantize, the pair fuse_quantize_dequantize made) becomes com.edgerun
FusedConv or FusedBatchNormalization with the activation QuantizeDequantize: the rounding
happens in the producer's own native pass, while its rows are in the cache, instead of in a
pass and a node of its own.

onnxruntime's quantize_static writes a pair after every such node (ppocr cls: 53 Convs and
35 BatchNormalizations of its 200 pairs), and the pair keeps Conv from fusing the
BatchNormalization or activation that follows it. Only a pair with one float32 scale and one
8-bit zero point (or none) fuses; its activation_params are [scale, zero point, low, high]
(uint8's 0..255 or int8's -128..127). The CPU provider has the activation
(cpu_kernels/conv.c); the pass applies where the session's providers run the producer, the
pair and the fused node on the same provider (`PassContext.runs_like`). optimizer/save.py
writes the fused nodes back as the producer and the pair.
"""
from __future__ import annotations

from typing import Optional

from .. import ir
from .fuse_activation import is_float32
from .graph_edit import EDGERUN_DOMAIN, GraphView, PassContext, attr_floats, attr_string

FLOAT, UINT8, INT8 = 1, 2, 3
GRIDS = {UINT8: (0, 255), INT8: (-128, 127)}
FUSED = {"Conv": "FusedConv", "BatchNormalization": "FusedBatchNormalization"}


def fuse_quantize_dequantize_epilogue(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for pair in view.live_nodes():
        if view.is_dead(pair) or pair.op_type != "QuantizeDequantize" or \
                pair.domain != EDGERUN_DOMAIN:
            continue
        params = grid_params(view, pair)
        producer = view.produced_by(pair.inputs[0], *FUSED)
        if params is None or producer is None or len(producer.outputs) != 1 or \
                view.only_reader(producer.outputs[0]) is not pair or \
                not _fusable(view, producer, ctx):
            continue
        attributes = _base_attributes(producer)
        attributes["activation"] = attr_string("activation", "QuantizeDequantize")
        attributes["activation_params"] = attr_floats("activation_params", params)
        fused = ir.Node(op_type=FUSED[producer.op_type], domain=EDGERUN_DOMAIN,
                        inputs=list(producer.inputs), outputs=[pair.outputs[0]],
                        attributes=attributes, name=producer.name)
        if not ctx.runs_like(fused, [producer, pair]):
            continue
        view.replace([producer, pair], fused)
        count += 1
    return count


def _fusable(view: GraphView, producer: ir.Node, ctx: PassContext) -> bool:
    """A float32 Conv; a BatchNormalization in its inference form of opset 7 on (one output,
    no training_mode, the spatial default), float32 by its scale."""
    if producer.op_type == "Conv":
        return is_float32(view, producer)
    return ctx.opset("") >= 7 and not producer.attr("training_mode", 0) and \
        producer.attr("spatial", 1) == 1 and len(producer.inputs) == 5 and \
        view.elem_type_of_constant(producer.inputs[1]) == FLOAT


def _base_attributes(producer: ir.Node) -> dict:
    """The producer's attributes the fused node keeps: a Conv's all, a BatchNormalization's
    epsilon (momentum only matters in training)."""
    if producer.op_type == "Conv":
        return dict(producer.attributes)
    return {k: v for k, v in producer.attributes.items() if k == "epsilon"}


def grid_params(view: GraphView, pair: ir.Node) -> Optional[list]:
    """[scale, zero point, low, high] of a pair on one float32 scale and an 8-bit zero point
    given as a constant (or absent: uint8's 0, or output_dtype's), else None."""
    if pair.attr("block_size", 0) or pair.attr("precision", 0) not in (0, FLOAT) or \
            len(pair.inputs) < 2:
        return None
    scale = view.scalar(pair.inputs[1])
    if scale is None or view.elem_type_of_constant(pair.inputs[1]) != FLOAT:
        return None
    point_name = pair.inputs[2] if len(pair.inputs) > 2 else ""
    if point_name:
        point, code = view.scalar(point_name), view.elem_type_of_constant(point_name)
        if point is None:
            return None
    else:
        point, code = 0.0, pair.attr("output_dtype", 0) or UINT8
    if code not in GRIDS:
        return None
    low, high = GRIDS[code]
    return [scale, point, float(low), float(high)]
