"""ONNX node parameters decoded once for the compiling edge adapters (NNAPI, QNN).

Both platforms need the same facts from an ONNX Conv, pool, Gemm, BatchNormalization, Pad or
Slice (explicit padding, folded affine terms, clamped slice ranges); only the operation they
emit differs. `b` is the adapter's lowering Builder: it has `const(name)`, `shape(name)`
and `opset`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .edge_common import attr_str, conv_pads, ints


def const_ints(b, node, index: int):
    """The constant input `index` of `node` as a list of ints, or None when absent."""
    if len(node.inputs) > index and node.inputs[index]:
        return [int(v) for v in np.asarray(b.const(node.inputs[index])).reshape(-1)]
    return None


@dataclass
class ConvParams:
    weights: np.ndarray          # [M, C/group, kh, kw] (1-D convs get kh = 1)
    bias: np.ndarray             # [M], float32, zeros when the node has none
    strides: list
    dilations: list
    pads: list                   # ONNX order: begins then ends
    one_d: bool                  # the input is [N, C, W]: lower as [N, C, 1, W]

    @property
    def kernel(self) -> list:
        return list(self.weights.shape[2:])

    def explicit_pads(self, in_hw, auto_pad: str):
        """((top, bottom, left, right), (out_h, out_w))."""
        return conv_pads(in_hw, self.kernel, self.strides, self.dilations, self.pads, auto_pad)


def conv_params(b, node) -> ConvParams:
    w = b.const(node.inputs[1])
    kernel = list(w.shape[2:])
    strides = ints(node.attr("strides"), [1] * len(kernel))
    dil = ints(node.attr("dilations"), [1] * len(kernel))
    pads = ints(node.attr("pads"), [])
    has_bias = len(node.inputs) > 2 and node.inputs[2]
    bias = (b.const(node.inputs[2]).astype(np.float32) if has_bias
            else np.zeros(w.shape[0], np.float32))
    one_d = len(b.shape(node.inputs[0])) == 3
    if one_d:
        w = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])
        strides, dil = [1] + strides, [1] + dil
        pads = [0, pads[0], 0, pads[1]] if pads else []
    return ConvParams(w, bias, strides, dil, pads, one_d)


def pool_window(node, h: int, w: int):
    """(kernel, strides, (top, bottom, left, right), (out_h, out_w)) of a 2-D pool; ceil_mode
    becomes extra bottom/right padding."""
    if node.op_type.startswith("Global"):
        kernel, strides, pads, auto_pad, ceil = [h, w], [1, 1], [], "NOTSET", 0
    else:
        kernel = ints(node.attr("kernel_shape"))
        strides = ints(node.attr("strides"), [1, 1])
        pads, auto_pad = ints(node.attr("pads"), []), attr_str(node, "auto_pad", "NOTSET")
        ceil = node.attr("ceil_mode", 0)
    padding, out_hw = conv_pads((h, w), kernel, strides, [1, 1], pads, auto_pad, ceil)
    return kernel, strides, padding, out_hw


def pool_problem(view, node, platform: str) -> str:
    """Why a pool cannot be a platform's 2-D pool, or ''."""
    rank = view.rank(node.inputs[0])
    if rank != 4:
        return f"{node.op_type} on rank-{rank} input: {platform} pools are 2-D"
    if len([o for o in node.outputs if o]) > 1:
        return f"MaxPool's Indices output has no {platform} equivalent"
    if any(d != 1 for d in ints(node.attr("dilations"), [1, 1])):
        return f"{node.op_type} with dilations: {platform} pools have no dilation"
    if node.attr("storage_order", 0):
        return f"MaxPool storage_order=1 has no {platform} equivalent"
    return ""


def batch_norm_affine(b, node):
    """(mult, shift) in float64 with y = x * mult + shift per channel."""
    scale, bias, mean, var = (b.const(n).astype(np.float64) for n in node.inputs[1:5])
    mult = scale / np.sqrt(var + node.attr("epsilon", 1e-5))
    return mult, bias - mean * mult


def gemm_problem(view, node, op_name: str) -> str:
    """Why a Gemm cannot be a fully connected layer `op_name`, or ''."""
    if node.attr("transA", 0):
        return f"Gemm transA=1: {op_name} takes the input untransposed"
    if view.rank(node.inputs[0]) != 2:
        return "Gemm input is not 2-D"
    if len(node.inputs) > 2 and node.inputs[2]:
        cshape = view.shape(node.inputs[2])
        n = view.shape(node.inputs[1])[0 if node.attr("transB", 0) else 1]
        if cshape is None or tuple(cshape) not in ((), (1,), (n,), (1, n)):
            return f"Gemm C of shape {cshape}: {op_name}'s bias is one value per unit"
    return ""


def gemm_lower(b, node) -> None:
    """Gemm with constant B and C as the platform's fully connected operation (the builder's
    `fully_connected(x, weights, bias, y)`)."""
    weights, bias = gemm_as_fully_connected(b, node)
    b.fully_connected(node.inputs[0], weights, bias, node.outputs[0])


def gemm_as_fully_connected(b, node):
    """(weights [units, in] with alpha applied, bias [units] with beta applied), float32."""
    w = b.const(node.inputs[1]).astype(np.float32)
    weights = (w if node.attr("transB", 0) else w.T) * np.float32(node.attr("alpha", 1.0))
    units = weights.shape[0]
    if len(node.inputs) > 2 and node.inputs[2]:
        c = b.const(node.inputs[2]).astype(np.float32) * np.float32(node.attr("beta", 1.0))
        return weights, np.broadcast_to(c.reshape(-1), (units,))
    return weights, np.zeros(units, np.float32)


def pad_amounts(b, node, rank: int):
    """([[begin, end] per axis], constant value) of a constant-mode Pad."""
    if b.opset >= 11:
        pads = const_ints(b, node, 1)
        value_name = node.inputs[2] if len(node.inputs) > 2 else ""
        value = float(np.asarray(b.const(value_name)).reshape(-1)[0]) if value_name else 0.0
    else:
        pads, value = ints(node.attr("pads")), float(node.attr("value", 0.0))
    return [[pads[i], pads[i + rank]] for i in range(rank)], value


def slice_problem(view, node, opset) -> str:
    """Why a Slice cannot be a strided slice with positive steps, or ''."""
    if opset < 10:
        return "Slice-1 (attributes) is not lowered"
    if len(node.inputs) > 4 and node.inputs[4]:
        steps = np.asarray(view.constant(node.inputs[4])).reshape(-1)
        if (steps <= 0).any():
            return f"Slice with steps {steps.tolist()}: only positive steps are lowered"
    return ""


def slice_ranges(b, node, shape) -> list:
    """[[begin, end, step] per axis], clamped to the input's shape."""
    rank = len(shape)
    starts, ends = const_ints(b, node, 1), const_ints(b, node, 2)
    axes = const_ints(b, node, 3) or list(range(len(starts)))
    steps = const_ints(b, node, 4) or [1] * len(starts)
    ranges = [[0, d, 1] for d in shape]
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = a + rank if a < 0 else a
        size = shape[a]
        ranges[a] = [min(max(s + size if s < 0 else s, 0), size),
                     min(max(e + size if e < 0 else e, 0), size), st]
    return ranges
