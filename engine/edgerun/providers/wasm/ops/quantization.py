"""Linear quantization on the typed kernels: QuantizeLinear, DequantizeLinear and
DynamicQuantizeLinear, as chains of casts and elementwise passes (er_cast, er_map_binary,
er_map_unary) that follow the CPU kernel's arithmetic step by step.

Scale and zero point are per tensor (scalar), per axis (1-D) or blocked (same rank as the
input, one entry per `block_size` elements along `axis`); blocked ones are gathered to the
input's length along the axis first (er_gather), so every step is a plain broadcast.
"""
from __future__ import annotations

from ....ir import dtypes
from .... import ir
from . import EDGERUN, operator
from .common import converted, derived, refuse, normalize_axis, product
from .elementwise import MAP_BINARY, MAP_UNARY, map_binary, map_unary
from .tensor import CAST_TYPES, cast_flags, take
from ..device import WasmTensor

INTEGER_RANGES = {dtypes.UINT8: (0, 255), dtypes.INT8: (-128, 127),
                  dtypes.UINT16: (0, 65535), dtypes.INT16: (-32768, 32767),
                  dtypes.UINT4: (0, 15), dtypes.INT4: (-8, 7), dtypes.UINT2: (0, 3),
                  dtypes.INT2: (-2, 1)}
FLOAT_QUANT_TYPES = frozenset({dtypes.FLOAT8E4M3FN, dtypes.FLOAT8E4M3FNUZ, dtypes.FLOAT8E5M2,
                               dtypes.FLOAT8E5M2FNUZ, dtypes.FLOAT4E2M1})


def _axis(axis: int, rank: int) -> int:
    return 0 if rank <= 1 else normalize_axis(axis, rank)


def expand_param(dev, param: WasmTensor, shape, axis: int, block: int) -> WasmTensor:
    """A scale or zero point as a tensor that broadcasts element-wise against `shape`."""
    if param is None:
        return None
    if len(param.shape) == 0 or (param.size == 1 and not block):
        return param.view(())
    axis = _axis(axis, len(shape))
    if block and block > 0:
        if len(param.shape) != len(shape):
            raise ValueError(f"blocked quantization needs a scale of rank {len(shape)}, got "
                             f"shape {list(param.shape)}")
        blocks = param.shape[axis]
        if -(-shape[axis] // block) != blocks or any(
                p != s for i, (p, s) in enumerate(zip(param.shape, shape)) if i != axis):
            raise ValueError(f"scale shape {list(param.shape)} with block_size {block} along "
                             f"axis {axis} does not tile input shape {list(shape)}")
        return take(dev, param, axis, [a // block for a in range(shape[axis])])
    if block < 0:
        raise ValueError(f"block_size must be positive, got {block}")
    if len(param.shape) != 1 or param.size != shape[axis]:
        raise ValueError(f"per-axis scale must be 1-D of length {shape[axis]} (axis {axis} of "
                         f"{list(shape)}), got shape {list(param.shape)}")
    dims = [1] * len(shape)
    dims[axis] = param.size
    return param.view(dims)


def _binary(dev, name: str, a, b, out_type: int):
    return map_binary(dev, MAP_BINARY.index(name), a, b, out_type)


def quantize_values(dev, values: WasmTensor, zero_point, code: int, flags: int) -> WasmTensor:
    """Real values (already divided by the scale) to element type `code`: integers round
    half to even, add the zero point and saturate (NaN to the lowest value, as onnxruntime);
    float8/float4 add it and convert."""
    if code in INTEGER_RANGES:
        low, high = INTEGER_RANGES[code]
        q = converted(dev, map_unary(dev, MAP_UNARY.index("Round"), values, values.elem_type),
                      dtypes.DOUBLE)
        if zero_point is not None:
            q = _binary(dev, "Add", q, converted(dev, zero_point, dtypes.DOUBLE), dtypes.DOUBLE)
        q = map_unary(dev, MAP_UNARY.index("Saturate"), q, dtypes.DOUBLE, float(low), float(high))
        return converted(dev, q, code)
    if zero_point is not None:
        values = _binary(dev, "Add", converted(dev, values, dtypes.FLOAT),
                         converted(dev, zero_point, dtypes.FLOAT), dtypes.FLOAT)
    return converted(dev, values, code, flags)


def _check_types(*tensors) -> bool:
    return all(t is None or (isinstance(t, WasmTensor) and t.elem_type in CAST_TYPES)
               for t in tensors)


@operator("QuantizeLinear")
def bind_quantize(dev, node, opset):
    axis, block = int(node.attr("axis", 1)), int(node.attr("block_size", 0))
    output_dtype, precision = int(node.attr("output_dtype", 0)), int(node.attr("precision", 0))
    flags = cast_flags(node, opset) & 1            # saturate=0 only (no round_mode here)

    def run(ctx, x, scale, zero_point=None, **attrs):
        if not _check_types(x, scale, zero_point):
            refuse(node, x, scale, zero_point)
        code = zero_point.elem_type if zero_point is not None else (output_dtype or dtypes.UINT8)
        if zero_point is not None and output_dtype and output_dtype != code:
            raise TypeError(f"QuantizeLinear: output_dtype {dtypes.type_string(output_dtype)} "
                            f"differs from the zero point's type {dtypes.type_string(code)}")
        if code not in INTEGER_RANGES and code not in FLOAT_QUANT_TYPES:
            raise TypeError(f"QuantizeLinear: {dtypes.type_string(code)} is not a quantized type")
        compute = precision or scale.elem_type           # the division's precision
        if _per_tensor(scale, zero_point) and compute == scale.elem_type and \
                code in INTEGER_RANGES and x.elem_type in DIVIDED_FLOATS:
            return quantize_per_tensor(dev, x, scale, zero_point, code)
        full_scale = expand_param(dev, scale, x.shape, axis, block)
        scaled = _binary(dev, "Div", converted(dev, x, compute), converted(dev, full_scale, compute),
                         compute)
        return quantize_values(dev, scaled, expand_param(dev, zero_point, x.shape, axis, block),
                               code, flags)
    return run


@operator("DequantizeLinear")
def bind_dequantize(dev, node, opset):
    axis, block = int(node.attr("axis", 1)), int(node.attr("block_size", 0))
    output_dtype = int(node.attr("output_dtype", 0))

    def run(ctx, x, scale, zero_point=None, **attrs):
        if not _check_types(x, scale, zero_point):
            refuse(node, x, scale, zero_point)
        out_type = output_dtype or scale.elem_type
        if out_type == dtypes.FLOAT and x.elem_type in SMALL_INTEGERS and \
                scale.elem_type == dtypes.FLOAT and _per_tensor(scale, zero_point):
            return dequantize_per_tensor(dev, x, scale, zero_point)
        compute = dtypes.DOUBLE if out_type == dtypes.DOUBLE else dtypes.FLOAT
        zp = expand_param(dev, zero_point, x.shape, axis, block)
        if x.elem_type in INTEGER_RANGES or x.elem_type == dtypes.INT32:
            centered = converted(dev, x, dtypes.INT64)
            if zp is not None:
                centered = _binary(dev, "Sub", centered, converted(dev, zp, dtypes.INT64),
                                   dtypes.INT64)
            centered = converted(dev, centered, compute)
        else:
            centered = converted(dev, x, compute)
            if zp is not None:
                centered = _binary(dev, "Sub", centered, converted(dev, zp, compute), compute)
        full_scale = converted(dev, expand_param(dev, scale, x.shape, axis, block), compute)
        return converted(dev, _binary(dev, "Mul", centered, full_scale, compute), out_type)
    return run


@operator("QuantizeDequantize", domains=EDGERUN)
def bind_quantize_dequantize(dev, node, opset):
    """com.edgerun QuantizeDequantize (the optimizer's fusion of a QDQ pair) as its two
    nodes: here for a page where the WebGPU provider, which runs it in one pass, hands a node
    back to this provider."""
    quantize = bind_quantize(dev, node, opset)
    dequantize = bind_dequantize(dev, ir.Node(
        op_type="DequantizeLinear", inputs=node.inputs, outputs=node.outputs, name=node.name,
        attributes={key: node.attributes[key] for key in ("axis", "block_size")
                    if key in node.attributes}), opset)

    def run(ctx, x, scale, zero_point=None, **attrs):
        return dequantize(ctx, quantize(ctx, x, scale, zero_point), scale, zero_point)
    return run


@operator("DynamicQuantizeLinear")
def bind_dynamic_quantize(dev, node, opset):
    """uint8 with a scale and zero point from x's range widened to include 0 (scale 1 for a
    constant-zero input, as onnxruntime): er_dynamic_quantize computes all three in linear
    memory, so nothing is read back and a recorded program replays it."""
    def run(ctx, x, **_):
        x = converted(dev, x, dtypes.FLOAT)
        y = dev.empty(x.shape, dtypes.UINT8)
        scale = dev.empty((), dtypes.FLOAT)
        zero = dev.empty((), dtypes.UINT8)
        dev.call("er_dynamic_quantize", x.ptr, x.size, y.ptr, scale.ptr, zero.ptr)
        return y, scale, zero
    return run


DIVIDED_FLOATS = (dtypes.FLOAT, dtypes.DOUBLE, dtypes.FLOAT16, dtypes.BFLOAT16)


def _per_tensor(scale: WasmTensor, zero_point) -> bool:
    """One scale (float32 or float64) and at most one zero point."""
    return scale.size == 1 and scale.elem_type in (dtypes.FLOAT, dtypes.DOUBLE) and \
        (zero_point is None or zero_point.size == 1)


SMALL_INTEGERS = (dtypes.UINT8, dtypes.INT8, dtypes.UINT16, dtypes.INT16)


def dequantize_per_tensor(dev, x: WasmTensor, scale: WasmTensor, zero_point) -> WasmTensor:
    """er_dequantize_linear: float32(x - zero_point) * scale in one pass (8- and 16-bit x,
    float32 out: the difference is exact, so the same values as the general chain)."""
    y = dev.empty(x.shape, dtypes.FLOAT)
    if y.size:
        dev.call("er_dequantize_linear", x.ptr, x.elem_type, scale.ptr,
                 zero_point.ptr if zero_point is not None else 0,
                 zero_point.elem_type if zero_point is not None else 0, y.ptr, y.size)
    return y


def quantize_per_tensor(dev, x: WasmTensor, scale: WasmTensor, zero_point, code: int):
    """er_quantize_linear: divide, round half to even, add the zero point, saturate, in one
    pass (the division in the scale's precision)."""
    low, high = INTEGER_RANGES[code]
    y = dev.empty(x.shape, code)
    if y.size:
        dev.call("er_quantize_linear", x.ptr, x.elem_type, scale.ptr, scale.elem_type,
                 zero_point.ptr if zero_point is not None else 0,
                 zero_point.elem_type if zero_point is not None else 0, y.ptr, code, y.size,
                 low, high)
    return y


# ---- integer products -----------------------------------------------------------------------

EIGHT_BIT = (dtypes.UINT8, dtypes.INT8)


def _zero_point(zero_point, operand: WasmTensor, count: int, what: str) -> tuple:
    """(pointer or 0, one per line?) of a MatMulInteger zero point: a scalar (or one value),
    or one per row of A / column of B (`count` of them), of its operand's type."""
    if zero_point is None:
        return 0, 0
    if zero_point.elem_type != operand.elem_type:
        raise TypeError(f"{what} zero point of {dtypes.type_string(zero_point.elem_type)} for "
                        f"a {dtypes.type_string(operand.elem_type)} operand")
    if zero_point.size == 1:
        return zero_point.ptr, 0
    if len(zero_point.shape) != 1 or zero_point.size != count:
        raise ValueError(f"{what} zero point of shape {list(zero_point.shape)}: expected a "
                         f"scalar or [{count}]")
    return zero_point.ptr, 1


def integer_matmul(dev, a: WasmTensor, b: WasmTensor, a_zero_point=None,
                   b_zero_point=None) -> WasmTensor:
    """(a - a_zero_point) @ (b - b_zero_point) as int32 for 8-bit a and b (numpy's matmul
    shapes: 1-D promoted, batches broadcast; a's zero point per row, b's per column)."""
    from .common import broadcast_shape, broadcast_strides

    ashape = [1] + list(a.shape) if len(a.shape) == 1 else list(a.shape)
    bshape = list(b.shape) + [1] if len(b.shape) == 1 else list(b.shape)
    (m, k), (k2, n) = ashape[-2:], bshape[-2:]
    if k != k2:
        raise ValueError(f"MatMul inner dimensions differ: {list(a.shape)} x {list(b.shape)}")
    a_zp, a_per_row = _zero_point(a_zero_point, a, m, "A")
    b_zp, b_per_col = _zero_point(b_zero_point, b, n, "B")
    batch = list(broadcast_shape(ashape[:-2], bshape[:-2]))
    y = dev.empty(batch + [m, n], dtypes.INT32)
    a_strides = broadcast_strides(ashape[:-2], batch) if batch else []
    b_strides = broadcast_strides(bshape[:-2], batch) if batch else []
    packed = _packed_weight(dev, b, b_zero_point, k, n, b_zp, b_per_col)
    for i in range(product(batch)):
        index, rest = [], i
        for d in reversed(batch):
            index.append(rest % d)
            rest //= d
        index.reverse()
        ao = sum(x * s for x, s in zip(index, a_strides)) * m * k
        bo = sum(x * s for x, s in zip(index, b_strides)) * k * n
        if packed is not None:
            dev.call("er_igemm_packed", m, n, k, a.ptr + ao, a.elem_type, k, 1, a_zp,
                     a_per_row, packed.ptr, y.ptr + i * m * n * 4, n)
            continue
        dev.call("er_igemm", m, n, k, a.ptr + ao, a.elem_type, k, 1, a_zp, a_per_row,
                 b.ptr + bo, b.elem_type, n, 1, b_zp, b_per_col, y.ptr + i * m * n * 4, n)
    final = batch + ([] if len(a.shape) == 1 else [m]) + ([] if len(b.shape) == 1 else [n])
    return y.view(final)


def _packed_weight(dev, b: WasmTensor, zero_point, k: int, n: int, b_zp: int, b_per_col: int):
    """A constant 2-D B (a weight) and zero point packed once per session for
    er_igemm_packed (the panels er_igemm packs on every call), or None for other B."""
    constant = b.block.casts is not None and (zero_point is None or
                                              zero_point.block.casts is not None)
    if not constant or len(b.shape) != 2 or not k or not n:
        return None

    def pack():
        packed = dev.empty((dev.call("er_ipacked_b_count", n, k),), dtypes.INT16)
        dev.call("er_ipack_b", n, k, b.ptr, b.elem_type, n, 1, b_zp, b_per_col, packed.ptr)
        return packed
    zp_key = None if zero_point is None else (zero_point.block.ptr, zero_point.offset)
    return derived(dev, b, ("packed for er_igemm", zp_key), pack)


@operator("MatMulInteger")
def bind_matmul_integer(dev, node, opset):

    def run(ctx, a, b, a_zero_point=None, b_zero_point=None, **attrs):
        if any(t is not None and t.elem_type not in EIGHT_BIT
               for t in (a, b, a_zero_point, b_zero_point)):
            refuse(node, a, b, a_zero_point, b_zero_point)
        return integer_matmul(dev, a, b, a_zero_point, b_zero_point)
    return run


@operator("MatMulIntegerToFloat", domains=("com.microsoft",))
def bind_matmul_integer_to_float(dev, node, opset):
    """onnxruntime's contrib operator, as the optimizer fuses MatMulInteger -> Cast -> Mul
    [-> Add]: the int32 product, then er_scale_int32 (float32, scaled, biased) in one pass."""

    def run(ctx, a, b, a_scale, b_scale, a_zero_point=None, b_zero_point=None, bias=None,
            **attrs):
        inputs = (a, b, a_scale, b_scale, a_zero_point, b_zero_point, bias)
        n = b.shape[-1] if len(b.shape) >= 2 else 1
        floats = [t for t in (a_scale, b_scale, bias) if t is not None]
        if a.elem_type not in EIGHT_BIT or b.elem_type not in EIGHT_BIT or \
                any(t.elem_type != dtypes.FLOAT or t.size not in (1, n) for t in floats) or \
                a_scale.size != 1:
            refuse(node, *inputs)
        acc = integer_matmul(dev, a, b, a_zero_point, b_zero_point)
        y = dev.empty(acc.shape, dtypes.FLOAT)
        if y.size:
            dev.call("er_scale_int32", acc.ptr, y.ptr, y.size // n, n, a_scale.ptr, b_scale.ptr,
                     int(b_scale.size > 1), bias.ptr if bias is not None else 0,
                     int(bias is not None and bias.size > 1))
        return y
    return run


@operator("QLinearMatMul")
def bind_qlinear_matmul(dev, node, opset):

    def run(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
            y_zero_point=None, **attrs):
        inputs = (a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point)
        if a.elem_type not in EIGHT_BIT or b.elem_type not in EIGHT_BIT or \
                not _check_types(*inputs):
            refuse(node, *inputs)
        product_t = integer_matmul(dev, a, b, a_zero_point, b_zero_point)
        if len(a_scale.shape) == 1 and a_scale.size > 1 and len(a.shape) >= 2:
            a_scale = a_scale.view((a_scale.size, 1))
        return requantize(dev, product_t, a_scale, b_scale, y_scale, y_zero_point, a.elem_type)
    return run


def requantize(dev, acc: WasmTensor, a_scale, b_scale, y_scale, y_zero_point,
               input_type: int) -> WasmTensor:
    """An int32 product accumulated from quantized operands, as y's quantized type:
    acc * (a_scale * b_scale / y_scale) in double, the multiplier formed in the scales' own
    type (the spec's TS), then rounded, offset and saturated like QuantizeLinear."""
    scale_type = a_scale.elem_type
    multiplier = _binary(dev, "Div", _binary(dev, "Mul", a_scale, b_scale, scale_type),
                         y_scale, scale_type)
    values = _binary(dev, "Mul", converted(dev, acc, dtypes.DOUBLE),
                     converted(dev, multiplier, dtypes.DOUBLE), dtypes.DOUBLE)
    code = y_zero_point.elem_type if y_zero_point is not None else input_type
    return quantize_values(dev, values, y_zero_point, code, 0)


# ---- integer convolution --------------------------------------------------------------------

def _conv_check(node, opset) -> str:
    from .conv import check_conv
    return check_conv(node, opset)


def integer_conv(dev, node, x: WasmTensor, w: WasmTensor, x_zero_point=None,
                 w_zero_point=None) -> WasmTensor:
    """conv(x - x_zero_point, w - w_zero_point) as int32 for 8-bit x and w (1-D and 2-D;
    x's zero point one value, w's one value or one per output channel): er_conv2d_int8."""
    from .conv import conv_geometry

    group = int(node.attr("group", 1))
    n, c = x.shape[:2]
    m = w.shape[0]
    if c % group or m % group or w.shape[1] * group != c:
        raise ValueError(f"{node.op_type} group={group}: input has {c} channels, weight "
                         f"{list(w.shape)}")
    if x_zero_point is not None and x_zero_point.size != 1:
        raise ValueError(f"{node.op_type}: x's zero point must be one value, got shape "
                         f"{list(x_zero_point.shape)}")
    w_zp, w_per_channel = _zero_point(w_zero_point, w, m, "w")
    if x_zero_point is not None and x_zero_point.elem_type != x.elem_type:
        raise TypeError(f"x zero point of {dtypes.type_string(x_zero_point.elem_type)} for "
                        f"a {dtypes.type_string(x.elem_type)} input")
    g = conv_geometry(x.shape, w.shape, node)
    spatial = len(x.shape) - 2
    y = dev.empty([n, m] + g["out"][-spatial:], dtypes.INT32)
    if y.size == 0:
        return y
    (kh, kw), (sh, sw), (dh, dw) = g["kernel"], g["strides"], g["dilations"]
    (oh, ow), (h, wd) = g["out"], g["size"]
    dev.set_args([n, c, h, wd, m, group, kh, kw, sh, sw, g["begin"][0], g["begin"][1],
                  dh, dw, oh, ow])
    pointwise = kh == kw == sh == sw == 1 and g["begin"] == [0, 0] and (oh, ow) == (h, wd)
    col = None if pointwise else dev.scratch((c // group) * kh * kw * oh * ow)
    dev.call("er_conv2d_int8", x.ptr, x.elem_type, x_zero_point.ptr if x_zero_point else 0,
             w.ptr, w.elem_type, w_zp, w_per_channel, y.ptr, col.ptr if col else 0)
    return y


def _integer_conv_inputs(*tensors) -> bool:
    return all(t is None or t.elem_type in EIGHT_BIT for t in tensors)


@operator("ConvInteger", check=_conv_check)
def bind_conv_integer(dev, node, opset):

    def run(ctx, x, w, x_zero_point=None, w_zero_point=None, **attrs):
        if not _integer_conv_inputs(x, w, x_zero_point, w_zero_point) or len(x.shape) > 4:
            refuse(node, x, w, x_zero_point, w_zero_point)
        return integer_conv(dev, node, x, w, x_zero_point, w_zero_point)
    return run


@operator("QLinearConv", check=_conv_check)
def bind_qlinear_conv(dev, node, opset):

    def run(ctx, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
            y_zero_point=None, B=None, **attrs):
        inputs = (x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B)
        if not _integer_conv_inputs(x, w, x_zero_point, w_zero_point, y_zero_point) or \
                len(x.shape) > 4 or (B is not None and B.elem_type != dtypes.INT32) or \
                not _check_types(x_scale, w_scale, y_scale):
            refuse(node, *inputs)
        acc = integer_conv(dev, node, x, w, x_zero_point, w_zero_point)
        channel = (-1,) + (1,) * (len(x.shape) - 2)        # broadcasts over (N, M, *spatial)
        if B is not None:
            acc = _binary(dev, "Add", acc, B.view((B.size,) + channel[1:]), dtypes.INT32)
        if w_scale.size > 1:
            w_scale = w_scale.view((w_scale.size,) + channel[1:])
        return requantize(dev, acc, x_scale, w_scale, y_scale, y_zero_point, x.elem_type)
    return run
