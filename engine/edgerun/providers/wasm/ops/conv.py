"""Conv (2-D, 1-D as H = 1, 3-D as a sum of 2-D ones): im2col + SGEMM, pointwise as plain
GEMM, depthwise direct."""
from __future__ import annotations

from ....ir.conv_rules import transpose_output_geometry
from . import EDGERUN, operator
from .common import float_or_refused, product
from .elementwise import NO_ACTIVATION, activation_of, apply_activation, check_activation
from .matmul import broadcast_into


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def check_conv(node, opset) -> str:
    if node.op_type == "FusedConv":
        why = check_activation(node)
        if why:
            return why
    kernel = node.attr("kernel_shape")
    if kernel is not None and len(kernel) not in (1, 2, 3):
        return (f"Conv over {len(kernel)} spatial dimensions (the wasm kernels do 1-D, 2-D "
                f"and 3-D)")
    pad = _text(node.attr("auto_pad", b"NOTSET"))
    if pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        return f"Conv auto_pad={pad!r}"
    return ""


def conv_geometry(x_shape, w_shape, node, max_spatial: int = 2) -> dict:
    """Output size and start pads of a 1-D or 2-D (up to `max_spatial`-D) convolution or
    pooling window; 1-D comes back as 2-D with H = 1."""
    spatial = len(x_shape) - 2
    if not 1 <= spatial <= max_spatial:
        raise ValueError(f"input of rank {len(x_shape)}: the wasm kernel does 1-D to "
                         f"{max_spatial}-D")
    kernel = list(node.attr("kernel_shape") or w_shape[2:])
    strides = list(node.attr("strides") or [1] * spatial)
    dil = list(node.attr("dilations") or [1] * spatial)
    pads = list(node.attr("pads") or [0] * (2 * spatial))
    auto = _text(node.attr("auto_pad", b"NOTSET"))
    ceil_mode = int(node.attr("ceil_mode", 0))
    size = list(x_shape[2:])
    out, begin, end = [], [], []
    for i in range(spatial):
        span = (kernel[i] - 1) * dil[i] + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-size[i] // strides[i])
            total = max(0, (o - 1) * strides[i] + span - size[i])
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            begin.append(lo)
            end.append(total - lo)
        elif auto == "VALID":
            begin.append(0)
            end.append(0)
        else:
            begin.append(pads[i])
            end.append(pads[i + spatial])
        extent = size[i] + begin[i] + end[i] - span
        if ceil_mode:
            o = -(-extent // strides[i]) + 1
            if (o - 1) * strides[i] >= size[i] + begin[i]:
                o -= 1
        else:
            o = extent // strides[i] + 1
        out.append(max(o, 0))
    if spatial == 1:                         # 1-D as a 2-D problem with H = 1
        kernel, strides, dil = [1] + kernel, [1] + strides, [1] + dil
        begin, end, out, size = [0] + begin, [0] + end, [1] + out, [1] + size
    return {"kernel": kernel, "strides": strides, "dilations": dil, "begin": begin,
            "end": end, "out": out, "size": size}


@operator("Conv", check=check_conv)
@operator("FusedConv", domains=EDGERUN, check=check_conv)
def bind_conv(dev, node, opset):
    group = int(node.attr("group", 1))
    act = activation_of(node) if node.op_type == "FusedConv" else NO_ACTIVATION

    def run(ctx, x, w, b=None, **_):
        n, c = x.shape[:2]
        m = w.shape[0]
        if c % group or m % group or w.shape[1] * group != c:
            raise ValueError(f"Conv group={group}: input has {c} channels, weight "
                             f"{list(w.shape)}")
        if 0 in x.shape[2:]:
            raise ValueError(f"Conv input has an empty spatial axis: shape {list(x.shape)}")
        if len(x.shape) == 5:
            y = conv3d(dev, node, x, w, b, group)
            apply_activation(dev, y, *act)
            return y
        g = conv_geometry(x.shape, w.shape, node)
        y = dev.empty([n, m] + g["out"][-(len(x.shape) - 2):])
        if y.size == 0:
            return y
        accumulate = 0
        if b is not None:
            broadcast_into(dev, b.view((m, 1)), y.view((n, m, product(g["out"]))))
            accumulate = 1
        conv2d_into(dev, x, w, y, g, group, accumulate)
        apply_activation(dev, y, *act)
        return y
    return float_or_refused(dev, node, opset, run)


def conv2d_into(dev, x, w, y, g: dict, group: int, accumulate: int) -> None:
    """y (N, M, OH, OW) = (or +=) the 2-D conv of x (N, C, H, W) by w, geometry `g`."""
    n, c = x.shape[:2]
    m = w.shape[0]
    (kh, kw), (sh, sw), (dh, dw) = g["kernel"], g["strides"], g["dilations"]
    (oh, ow), (h, wd) = g["out"], g["size"]
    dev.set_args([n, c, h, wd, m, group, kh, kw, sh, sw, g["begin"][0], g["begin"][1],
                  dh, dw, oh, ow])
    if group == c == m and group > 1:
        dev.call("er_depthwise2d", x.ptr, w.ptr, y.ptr, accumulate)
        return
    pointwise = (kh == kw == sh == sw == 1 and g["begin"] == [0, 0] and (oh, ow) == (h, wd))
    col = None if pointwise else dev.scratch((c // group) * kh * kw * oh * ow * 4)
    dev.call("er_conv2d", x.ptr, w.ptr, y.ptr, col.ptr if col else 0, accumulate)


def conv3d(dev, node, x, w, b, group: int):
    """A 3-D conv as a sum of 2-D ones: output depth slice od adds, for each kernel depth kd
    that lands inside the input, the 2-D conv of input slice od * sd + kd * dd - pd by the
    weights' slice kd. Depth moves outermost first (one transposed copy of x and of w), so
    every slice is contiguous; the result moves back at the end."""
    from .tensor import transpose

    g = conv_geometry(x.shape, w.shape, node, max_spatial=3)
    (kd, _, _), (sd, _, _), (dd, _, _) = g["kernel"], g["strides"], g["dilations"]
    depth, out_depth = x.shape[2], g["out"][0]
    n, m = x.shape[0], w.shape[0]
    plane = {key: value[1:] for key, value in g.items()}
    out_plane = [n, m] + g["out"][1:]
    y_t = dev.empty([out_depth] + out_plane)           # (OD, N, M, OH, OW)
    if y_t.size == 0:
        return transpose(dev, y_t, [1, 2, 0, 3, 4])
    x_t = transpose(dev, x, [2, 0, 1, 3, 4])          # (D, N, C, H, W)
    w_t = transpose(dev, w, [2, 0, 1, 3, 4])          # (KD, M, C/g, KH, KW)
    x_step, w_step, y_step = (product(t.shape[1:]) * 4 for t in (x_t, w_t, y_t))
    x_plane, w_plane = [n] + list(x.shape[1:2]) + list(x.shape[3:]), [m] + list(w.shape[1:2]) \
        + list(w.shape[3:])
    for od in range(out_depth):
        y = y_t.part(od * y_step, out_plane)
        accumulate = 0
        if b is not None:
            broadcast_into(dev, b.view((m, 1)), y.view((n, m, product(out_plane[2:]))))
            accumulate = 1
        for k in range(kd):
            source = od * sd + k * dd - g["begin"][0]
            if 0 <= source < depth:
                conv2d_into(dev, x_t.part(source * x_step, x_plane),
                            w_t.part(k * w_step, w_plane), y, plane, group, accumulate)
                accumulate = 1
        if not accumulate:                 # every kernel depth reads padding here
            dev.fill(y, bytes(4))
    return transpose(dev, y_t, [1, 2, 0, 3, 4])


def check_conv_transpose(node, opset) -> str:
    kernel = node.attr("kernel_shape")
    if kernel is not None and not 1 <= len(kernel) <= 3:
        return f"ConvTranspose over {len(kernel)} spatial axes (the kernel does 1 to 3)"
    return ""


@operator("ConvTranspose", check=check_conv_transpose)
def bind_conv_transpose(dev, node, opset):
    """Per image and group: columns = W_g^T X_g (er_sgemm), folded into the output
    (er_fold) over a bias pre-fill or zeros."""
    group = int(node.attr("group", 1))

    def run(ctx, x, w, b=None, **_):
        rank = len(x.shape) - 2
        n, c = x.shape[:2]
        if not 1 <= rank <= 3 or len(w.shape) != len(x.shape) or w.shape[0] != c or \
                group < 1 or c % group:
            raise ValueError(f"ConvTranspose group={group}: input {list(x.shape)} and weight "
                             f"{list(w.shape)} do not match (weight (C, M/group, *kernel))")
        kernel = list(node.attr("kernel_shape") or w.shape[2:])
        out, begin, strides, dilations = transpose_output_geometry(
            x.shape[2:], kernel, node.attr("strides"), node.attr("dilations"),
            node.attr("pads"), node.attr("auto_pad", "NOTSET"), node.attr("output_padding"),
            node.attr("output_shape"))
        mg, cg = w.shape[1], c // group
        m, blocks, taps, outs = mg * group, product(x.shape[2:]), product(kernel), product(out)
        y = dev.empty([n, m] + list(out))
        if y.size == 0:
            return y
        if b is not None:
            broadcast_into(dev, b.view((m, 1)), y.view((n, m, outs)))
        else:
            dev.fill(y, bytes(4))
        if blocks == 0 or cg == 0:
            return y
        col = dev.scratch(mg * taps * blocks * 4)
        fold_args = [rank, mg]
        for a in range(rank):
            fold_args += [kernel[a], x.shape[2 + a], out[a], strides[a], begin[a], dilations[a]]
        for i in range(n):
            for g in range(group):
                # A = W_g^T: (mg * taps) x cg, read from W_g (cg, mg * taps) transposed
                dev.call("er_sgemm", mg * taps, blocks, cg, w.ptr + g * cg * mg * taps * 4, 1,
                         mg * taps, x.ptr + (i * c + g * cg) * blocks * 4, blocks, 1, col.ptr,
                         blocks, 0)
                dev.set_args(fold_args)
                dev.call("er_fold", col.ptr, y.ptr + (i * m + g * mg) * outs * 4)
        return y
    return float_or_refused(dev, node, opset, run)


@operator("Col2Im")
def bind_col2im(dev, node, opset):
    """Sliding-window columns (N, C * prod(block), L) summed back into (N, C, *image):
    er_fold per image."""
    def run(ctx, x, image_t, block_t, **_):
        image, block = list(dev.ints(image_t)), list(dev.ints(block_t))
        rank = len(image)
        if len(block) != rank or not 1 <= rank <= 3 or len(x.shape) != 3:
            raise ValueError(f"Col2Im: input {list(x.shape)}, image_shape {image} and "
                             f"block_shape {block} do not match")
        strides = list(node.attr("strides") or [1] * rank)
        dilations = list(node.attr("dilations") or [1] * rank)
        pads = list(node.attr("pads") or [0] * (2 * rank))
        blocks = [(image[a] + pads[a] + pads[rank + a] - ((block[a] - 1) * dilations[a] + 1))
                  // strides[a] + 1 for a in range(rank)]
        taps = product(block)
        if x.shape[1] % taps or product(blocks) != x.shape[2]:
            raise ValueError(f"Col2Im: input {list(x.shape)} does not hold {taps}-tap columns "
                             f"for {product(blocks)} blocks")
        n, c = x.shape[0], x.shape[1] // taps
        y = dev.zeros([n, c] + image)
        args = [rank, c]
        for a in range(rank):
            args += [block[a], blocks[a], image[a], strides[a], pads[a], dilations[a]]
        for i in range(n):
            dev.set_args(args)
            dev.call("er_fold", x.ptr + i * x.shape[1] * x.shape[2] * 4,
                     y.ptr + i * c * product(image) * 4)
        return y
    return float_or_refused(dev, node, opset, run, float_inputs=[0])
