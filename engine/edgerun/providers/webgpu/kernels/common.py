"""Helpers shared by the kernel modules: operand conversion and shape/stride arithmetic."""
from __future__ import annotations

from ....ir import dtypes
from .. import host_values
from ..memory import GpuTensor
from .registry import Unsupported

MAX_RANK = 6


def as_gpu(gpu, value, cast: bool = False) -> GpuTensor:
    """A float32 GPU operand: GPU tensors as they are, host float32 arrays uploaded (other
    dtypes only with `cast`, e.g. an integer Pow exponent)."""
    if isinstance(value, GpuTensor):
        return value
    if not host_values.is_host_tensor(value):
        if host_values.np is None:
            raise Unsupported(f"a {type(value).__name__} operand (the GPU kernels take float32)")
        value = host_values.np.asarray(value)
    code = host_values.elem_type(value)
    if code != dtypes.FLOAT:
        if not (cast and code in host_values.INTEGER_TYPES | {dtypes.DOUBLE, dtypes.FLOAT16}):
            raise Unsupported(f"a {dtypes.type_string(code)} operand (the GPU kernels take "
                              f"float32)")
        value = host_values.as_float32(value)
    return gpu.upload(value)


def host_ints(gpu, value) -> list:
    """An integer parameter tensor (shape, axes, pads...) as a list of Python ints."""
    if value is None:
        return None
    return [int(v) for v in host_floats_or_ints(gpu, value)]


def host_floats_or_ints(gpu, value) -> list:
    """The elements of a small parameter tensor (bounds, scales, indices), flattened."""
    return host_values.values(gpu.host_values(value))


def strides_of(shape) -> list:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= int(d)
    return out[::-1]


def count(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def broadcast_strides(shape, out_shape) -> list:
    """Strides of `shape` read as `out_shape` (numpy broadcasting: 0 on stretched dims)."""
    shape = [1] * (len(out_shape) - len(shape)) + list(shape)
    own = strides_of(shape)
    return [0 if d == 1 and o != 1 else s for d, o, s in zip(shape, out_shape, own)]


def merge_dims(dims: list, *stride_lists) -> tuple:
    """Drop size-1 dims and merge neighbours that stay contiguous in every stride list, so
    broadcasts and copies fit the kernels' rank limit. Returns (dims, [strides...])."""
    kept = [i for i, d in enumerate(dims) if d != 1]
    out_dims = [dims[i] for i in kept]
    out_strides = [[s[i] for i in kept] for s in stride_lists]
    i = len(out_dims) - 2
    while i >= 0:
        inner = out_dims[i + 1]
        if all(s[i] == s[i + 1] * inner for s in out_strides):
            out_dims[i] *= inner
            for s in out_strides:
                s[i] = s[i + 1]
                del s[i + 1]
            del out_dims[i + 1]
        i -= 1
    return out_dims, out_strides


def padded(values: list, n: int = MAX_RANK, fill: int = 0) -> list:
    if len(values) > n:
        raise Unsupported(f"rank {len(values)} (the GPU kernels handle up to {n})")
    return list(values) + [fill] * (n - len(values))


def normalize_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def strided_copy(gpu, out: GpuTensor, x: GpuTensor, dims, src_strides, dst_strides,
                 src_base: int = 0, dst_base: int = 0) -> GpuTensor:
    """out[dst] = x[src] over `dims` (see movement.wgsl)."""
    n = count(dims)
    if n == 0:
        return out
    dims, (src_strides, dst_strides) = merge_dims(list(dims), list(src_strides),
                                                  list(dst_strides))
    params = [len(dims)] + padded(dims, fill=1) + padded(src_strides) + padded(dst_strides)
    params += [src_base, dst_base]
    return gpu.dispatch("movement", "strided_copy", out, [x], params, n)
