"""MatMul (batched, broadcast) and Gemm on the packed SGEMM, with fused activations."""
from __future__ import annotations

from . import EDGERUN, operator
from .common import broadcast_shape, contiguous_strides, float_or_refused, product
from .elementwise import (AFFINE, NO_ACTIVATION, activation_of, apply_activation, binary,
                          check_activation)

ADD = 0


def check_fused(node, opset) -> str:
    return check_activation(node)


@operator("MatMul")
@operator("FusedMatMul", domains=EDGERUN, check=check_fused)
def bind_matmul(dev, node, opset):
    act = activation_of(node) if node.op_type == "FusedMatMul" else NO_ACTIVATION

    def run(ctx, a, b, **_):
        y = matmul(dev, a, b)
        apply_activation(dev, y, *act)
        return y
    return float_or_refused(dev, node, opset, run)


def matmul(dev, a, b):
    ashape, bshape = list(a.shape), list(b.shape)
    if not ashape or not bshape:
        raise ValueError("MatMul inputs must have rank >= 1")
    a1, b1 = len(ashape) == 1, len(bshape) == 1
    if a1:
        ashape = [1] + ashape
    if b1:
        bshape = bshape + [1]
    m, k = ashape[-2:]
    k2, n = bshape[-2:]
    if k != k2:
        raise ValueError(f"MatMul inner dimensions differ: {a.shape} x {b.shape}")
    batch = list(broadcast_shape(ashape[:-2], bshape[:-2]))
    out_shape = batch + [m, n]
    y = dev.empty(out_shape)
    final = batch + ([] if a1 else [m]) + ([] if b1 else [n])
    if y.size == 0:
        return y.view(final)
    abatch, bbatch = ashape[:-2], bshape[:-2]
    nb = product(batch)
    if product(bbatch) == 1 and product(abatch) == nb:          # fold A's batch into M
        dev.call("er_sgemm", nb * m, n, k, a.ptr, k, 1, b.ptr, n, 1, y.ptr, n, 0)
    elif _same_batch(abatch, batch) and _same_batch(bbatch, batch):
        dev.call("er_sgemm_batch", nb, m, n, k, a.ptr, k, 1, m * k, b.ptr, n, 1, k * n,
                 y.ptr, m * n, 0)
    elif product(abatch) == 1 and _same_batch(bbatch, batch):
        dev.call("er_sgemm_batch", nb, m, n, k, a.ptr, k, 1, 0, b.ptr, n, 1, k * n,
                 y.ptr, m * n, 0)
    elif product(bbatch) == 1 and _same_batch(abatch, batch):
        dev.call("er_sgemm_batch", nb, m, n, k, a.ptr, k, 1, m * k, b.ptr, n, 1, 0,
                 y.ptr, m * n, 0)
    else:                                                        # general broadcast: per product
        astr = _batch_strides(abatch, batch, m * k)
        bstr = _batch_strides(bbatch, batch, k * n)
        for i, index in enumerate(_indices(batch)):
            ao = sum(x * s for x, s in zip(index, astr)) * 4
            bo = sum(x * s for x, s in zip(index, bstr)) * 4
            dev.call("er_sgemm", m, n, k, a.ptr + ao, k, 1, b.ptr + bo, n, 1,
                     y.ptr + i * m * n * 4, n, 0)
    return y.view(final)


def _same_batch(shape, batch) -> bool:
    return [1] * (len(batch) - len(shape)) + list(shape) == list(batch)


def _batch_strides(shape, batch, block: int) -> list:
    full = [1] * (len(batch) - len(shape)) + list(shape)
    strides = contiguous_strides(full)
    return [0 if full[i] == 1 else strides[i] * block for i in range(len(batch))]


def _indices(shape):
    if not shape:
        yield ()
        return
    for i in range(shape[0]):
        for rest in _indices(shape[1:]):
            yield (i,) + rest


def check_gemm(node, opset) -> str:
    if node.op_type == "FusedGemm":
        return check_activation(node)
    if opset < 7 and node.attr("broadcast", 0) == 0 and len(node.inputs) > 2:
        return "Gemm with broadcast=0 (opset < 7)"
    return ""


@operator("Gemm", check=check_gemm)
@operator("FusedGemm", domains=EDGERUN, check=check_gemm)
def bind_gemm(dev, node, opset):
    alpha = float(node.attr("alpha", 1.0))
    beta = float(node.attr("beta", 1.0))
    trans_a, trans_b = int(node.attr("transA", 0)), int(node.attr("transB", 0))
    act = activation_of(node) if node.op_type == "FusedGemm" else NO_ACTIVATION

    def run(ctx, a, b, c=None, **_):
        if len(a.shape) != 2 or len(b.shape) != 2:
            raise ValueError(f"Gemm takes 2-D inputs, got {list(a.shape)} and {list(b.shape)}")
        m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
        k2, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
        if k != k2:
            raise ValueError(f"Gemm inner dimensions differ: {k} vs {k2}")
        rsa, csa = (1, m) if trans_a else (k, 1)
        rsb, csb = (1, k) if trans_b else (n, 1)
        y = dev.empty((m, n))
        use_c = c is not None and beta != 0.0 and y.size
        if use_c and alpha == 1.0 and beta == 1.0:       # C pre-filled, GEMM accumulates
            broadcast_into(dev, c, y)
            dev.call("er_sgemm", m, n, k, a.ptr, rsa, csa, b.ptr, rsb, csb, y.ptr, n, 1)
        else:
            dev.call("er_sgemm", m, n, k, a.ptr, rsa, csa, b.ptr, rsb, csb, y.ptr, n, 0)
            if alpha != 1.0:
                dev.call("er_unary", AFFINE, y.ptr, y.ptr, y.size, alpha, 0.0)
            if use_c:
                if beta != 1.0:
                    scaled = dev.empty(c.shape)
                    dev.call("er_unary", AFFINE, c.ptr, scaled.ptr, c.size, beta, 0.0)
                    c = scaled
                y = binary(dev, "er_binary", ADD, y, c, y.elem_type)
        apply_activation(dev, y, *act)
        return y
    return float_or_refused(dev, node, opset, run)


def broadcast_into(dev, src, dst) -> None:
    """Fill contiguous `dst` with `src` broadcast to its shape (bias pre-fill)."""
    from .common import broadcast_strides, merge_dims

    dims, (ds, ss) = merge_dims(dst.shape, contiguous_strides(dst.shape),
                                broadcast_strides(src.shape, dst.shape))
    dev.set_args(dims + ds + ss)
    dev.call("er_copy_strided", dst.ptr, src.ptr, src.itemsize, len(dims))
