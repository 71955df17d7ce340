"""MatMul, Gemm and their fused-activation forms on matmul.wgsl's register-blocked kernel."""
from __future__ import annotations

from .. import host_values
from ..memory import GpuTensorParts
from .activation import check_fused, epilogue
from .common import (as_gpu, broadcast_strides, count, lanes_here, merge_dims, padded,
                     strided_copy)
from .movement import slice_view
from .registry import Unsupported, gpu_op
from ..shaders import WORKGROUP_SIZE

MAX_BATCH_RANK = 4
# work items a GPU keeps in flight to hide its memory's latency: tens of thousands, from
# phones to data-centre parts (an H200 runs 132 x 2048); fewer tiles than this share K
BUSY_WORK_ITEMS = 1 << 15
MIN_LANE_STEPS = 4


def matmul_core(gpu, a, b, m, n, k, a_strides, b_strides, batch_shape, a_batch, b_batch,
                bias=None, bias_strides=(0, 0), bias_batch=None, alpha=1.0, beta=0.0,
                activation="", act_params=()):
    """out[batch, m, n] = act(alpha * sum_k A[m, k] B[k, n] + beta * bias[m, n]).

    *_strides are (row, column) element strides of each operand; *_batch the per-batch-dim
    strides (0 where broadcast)."""
    out = gpu.empty(tuple(batch_shape) + (m, n))
    tiles_m, tiles_n = -(-m // 4), -(-n // 4)
    batch = count(batch_shape)
    threads = batch * tiles_m * tiles_n
    if threads == 0:
        return out
    if k == 0:
        a = b = gpu.zeros(1)
        k, a_strides, b_strides, a_batch, b_batch = 1, (0, 0), (0, 0), None, None
    bias_batch = bias_batch or [0] * len(batch_shape)
    dims, (sa, sb, sc) = merge_dims(list(batch_shape), list(a_batch or [0] * len(batch_shape)),
                                    list(b_batch or [0] * len(batch_shape)), list(bias_batch))
    if len(dims) > MAX_BATCH_RANK:
        raise Unsupported(f"{len(dims)} batch dims (the kernel handles {MAX_BATCH_RANK})")
    if bias is None:
        bias, beta, bias_strides = gpu.zeros(1), 0.0, (0, 0)
    expr, act_alpha, act_beta = epilogue(activation, act_params)
    params = [m, n, k, tiles_n, tiles_m * tiles_n, a_strides[0], a_strides[1], b_strides[0],
              b_strides[1], bias_strides[0], bias_strides[1], float(alpha), float(beta),
              act_alpha, act_beta, len(dims)]
    params += (padded(dims, MAX_BATCH_RANK, 1) + padded(sa, MAX_BATCH_RANK)
               + padded(sb, MAX_BATCH_RANK) + padded(sc, MAX_BATCH_RANK))
    kernel, steps = "matmul", k
    if _vec4_ready(k, n, a_strides, b_strides, sa, sb):
        kernel, steps = "matmul_vec4", k // 4
        params[5], params[7] = a_strides[0] // 4, b_strides[0] // 4
        params[-12:-4] = [s // 4 for s in params[-12:-4]]
    lanes = k_lanes(gpu, threads, steps)
    return gpu.dispatch("matmul", kernel, out, [a, b, bias], params, threads * lanes,
                        {"ACT": expr, "LANES": lanes})


def k_lanes(gpu, tiles: int, steps: int) -> int:
    """Work items per 4x4 tile, each summing every lanes-th of the `steps` steps of K:
    doubled, up to a workgroup, while the tiles' work items leave a GPU short of
    BUSY_WORK_ITEMS and each lane keeps at least MIN_LANE_STEPS steps (lanes_here: 1 on
    software adapters)."""
    lanes = 1
    while (lanes < WORKGROUP_SIZE and tiles * lanes < BUSY_WORK_ITEMS
           and steps >= 2 * lanes * MIN_LANE_STEPS):
        lanes *= 2
    return lanes_here(gpu, lanes)


def _vec4_ready(k, n, a_strides, b_strides, a_batch, b_batch) -> bool:
    """Row-major A and B with K, N and every offset a multiple of 4: the vec4 kernel."""
    return (k % 4 == 0 and n % 4 == 0 and a_strides == (k, 1) and b_strides == (n, 1)
            and all(s % 4 == 0 for s in list(a_batch) + list(b_batch)))


def matmul(gpu, a, b, activation="", act_params=()):
    a, b = as_gpu(gpu, a), as_gpu(gpu, b)
    a_shape = (1,) + a.shape if a.ndim == 1 else a.shape
    b_shape = b.shape + (1,) if b.ndim == 1 else b.shape
    if a_shape[-1] != b_shape[-2]:
        raise ValueError(f"MatMul: inner dims differ, A {a.shape} and B {b.shape}")
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    batch = host_values.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    a_batch = broadcast_strides(a_shape[:-2], batch)
    b_batch = broadcast_strides(b_shape[:-2], batch)
    a_batch = [s * m * k for s in a_batch]
    b_batch = [s * k * n for s in b_batch]
    out = matmul_core(gpu, a, b, m, n, k, (k, 1), (n, 1), batch, a_batch, b_batch,
                      activation=activation, act_params=act_params)
    shape = batch + ((m,) if a.ndim > 1 else ()) + ((n,) if b.ndim > 1 else ())
    return out.view(shape) if shape != out.shape else out


def gemm(gpu, a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0,  # noqa: N803 - ONNX
         activation="", act_params=()):
    if isinstance(b, GpuTensorParts) and transB:
        return _gemm_in_parts(gpu, as_gpu(gpu, a), b, c, alpha, beta, transA, activation,
                              act_params)
    a, b = as_gpu(gpu, a), as_gpu(gpu, b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"Gemm takes 2-D A and B, got {a.shape} and {b.shape}")
    m, k = (a.shape[1], a.shape[0]) if transA else a.shape
    kb, n = (b.shape[1], b.shape[0]) if transB else b.shape
    if k != kb:
        raise ValueError(f"Gemm: inner dims differ, A {a.shape} (transA={transA}) and "
                         f"B {b.shape} (transB={transB})")
    a_strides = (1, m) if transA else (k, 1)
    b_strides = (1, k) if transB else (n, 1)
    bias_strides = (0, 0)
    if c is not None:
        c = as_gpu(gpu, c)
        if c.ndim > 2:
            raise ValueError(f"Gemm: C must be broadcastable to ({m}, {n}), got {c.shape}")
        bias_strides = tuple(broadcast_strides(c.shape, (m, n)))
    return matmul_core(gpu, a, b, m, n, k, a_strides, b_strides, (), None, None, c,
                       bias_strides, None, alpha, beta, activation, act_params)


@gpu_op("MatMul")
def run_matmul(gpu, ctx, a, b):
    return matmul(gpu, a, b)


@gpu_op("Gemm")
def run_gemm(gpu, ctx, a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0):  # noqa: N803
    return gemm(gpu, a, b, c, alpha, beta, transA, transB)


@gpu_op("FusedMatMul", domain="com.edgerun", check=check_fused)
def run_fused_matmul(gpu, ctx, a, b, activation="Relu", activation_params=None):
    return matmul(gpu, a, b, activation, activation_params)


@gpu_op("FusedGemm", domain="com.edgerun", check=check_fused)
def run_fused_gemm(gpu, ctx, a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0,  # noqa: N803
                   activation="Relu", activation_params=None):
    return gemm(gpu, a, b, c, alpha, beta, transA, transB, activation, activation_params)


def _gemm_in_parts(gpu, a, b, c, alpha, beta, trans_a, activation, act_params):
    """Gemm with transB=1 whose B ([N, K]) exceeds one binding: each block of B's rows gives
    a block of output columns, computed apart and copied into place."""
    if a.ndim != 2:
        raise ValueError(f"Gemm takes 2-D A and B, got {a.shape} and {b.shape}")
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    n = b.shape[0]
    if b.shape[1] != k:
        raise ValueError(f"Gemm: inner dims differ, A {a.shape} (transA={trans_a}) and "
                         f"B {b.shape} (transB=1)")
    a_strides = (1, m) if trans_a else (k, 1)
    c = None if c is None else as_gpu(gpu, c)
    out = gpu.empty((m, n))
    start = 0
    for part in b.parts:
        cols = part.shape[0]
        bias, bias_strides = None, (0, 0)
        if c is not None:
            bias = c
            if c.ndim and c.shape[-1] == n and n > 1:      # C varies along N: its columns too
                bias = slice_view(gpu, c, [start], [start + cols], [c.ndim - 1], [1])
            bias_strides = tuple(broadcast_strides(bias.shape, (m, cols)))
        block = matmul_core(gpu, a, part, m, cols, k, a_strides, (1, k), (), None, None, bias,
                            bias_strides, None, alpha, beta, activation, act_params)
        strided_copy(gpu, out, block, (m, cols), (cols, 1), (n, 1), 0, start)
        start += cols
    return out
