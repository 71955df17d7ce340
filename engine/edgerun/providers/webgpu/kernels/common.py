"""Helpers shared by the kernel modules: operand conversion and shape/stride arithmetic."""
from __future__ import annotations

from typing import Optional

from ....ir import dtypes
from .. import host_values
from ..gpu import GPU_TYPES
from ..memory import GpuTensor, GpuTensorParts
from ..shaders import WORKGROUP_SIZE
from .registry import Unsupported

MAX_RANK = 6


def as_gpu(gpu, value, cast: bool = False) -> GpuTensor:
    """A float32 GPU operand: float32 GPU tensors as they are, host float32 arrays uploaded;
    other element types only with `cast` (an integer Pow exponent, Scaler's integer input),
    converted on the GPU."""
    t = as_gpu_any(gpu, value, cast_host=cast)
    if t.dtype == "float32":
        return t
    if not cast:
        raise Unsupported(f"a {t.dtype} operand (the kernel takes float32)")
    return cast_to(gpu, t, "float32")


def as_gpu_any(gpu, value, cast_host: bool = False) -> GpuTensor:
    """A GPU operand of any element type GPU tensors hold (float32, int32, int64, bool):
    GPU tensors as they are, host tensors uploaded. With `cast_host`, host tensors of other
    numeric types (double, float16, int8...) are uploaded as float32."""
    if isinstance(value, GpuTensor):
        return value
    if isinstance(value, GpuTensorParts):
        raise Unsupported(f"a {value.shape} tensor split over {len(value.parts)} buffers (it "
                          f"exceeds one storage binding)")
    if not host_values.is_host_tensor(value):
        if host_values.np is None:
            raise Unsupported(f"a {type(value).__name__} operand (the GPU kernels take tensors)")
        value = host_values.np.asarray(value)
    code = host_values.elem_type(value)
    if code not in GPU_TYPES:
        if not (cast_host and code in host_values.INTEGER_TYPES | {dtypes.DOUBLE,
                                                                    dtypes.FLOAT16}):
            raise Unsupported(f"a {dtypes.type_string(code)} operand (GPU tensors are "
                              f"float32, int32, int64 or bool)")
        value = host_values.as_float32(value)
        return gpu.upload(value)
    return gpu.upload_small(value)


# (from WGSL type, to dtype) -> WGSL expression over x: ONNX Cast between GPU types
CASTS = {("f32", "float32"): "x", ("i32", "float32"): "f32(x)", ("u32", "float32"): "f32(x)",
         ("f32", "int32"): "i32(trunc(x))", ("i32", "int32"): "x", ("u32", "int32"): "i32(x)",
         ("f32", "bool"): "select(0u, 1u, x != 0.0)", ("i32", "bool"): "select(0u, 1u, x != 0)",
         ("u32", "bool"): "select(0u, 1u, x != 0u)"}
# to the 8/16-bit types (one word an element): integers wrap to their width as numpy's astype
# (a float truncated first), float16 rounds to nearest even (as_half, snippets.wgsl)
_WIDTHS = {"int8": 8, "uint8": 8, "int16": 16, "uint16": 16}
for _source, _as_int in (("i32", "x"), ("u32", "bitcast<i32>(x)"), ("f32", "i32(trunc(x))")):
    for _name, _bits in _WIDTHS.items():
        CASTS[(_source, _name)] = (f"({_as_int} & {(1 << _bits) - 1})" if _name[0] == "u" else
                                   f"(({_as_int} << {32 - _bits}u) >> {32 - _bits}u)")
    CASTS[(_source, "float16")] = "as_half(x)" if _source == "f32" else "as_half(f32(x))"


def cast_to(gpu, x: GpuTensor, dtype: str) -> GpuTensor:
    """x converted to element type `dtype` on the GPU (int64 converts like int32: it is
    stored as int32)."""
    if x.dtype == dtype:
        return x
    expr = CASTS[(x.wgsl, "int32" if dtype == "int64" else dtype)]
    if expr == "x":                      # same words: a view under the new type
        return GpuTensor(x.alloc, x.shape, dtype)
    out = gpu.empty(x.shape, dtype)
    return gpu.dispatch("elementwise", "unary", out, [x], [0.0, 0.0], x.size,
                        {"EXPR": expr, "T": x.wgsl, "OT": out.wgsl})


def gpu_indices(gpu, indices, bounds: list, op: str) -> tuple:
    """(int32/int64 GPU tensor, shape) of an index operand. Host indices are checked against
    `bounds` (one axis length, or one per column of the last dim: ScatterND's tuples), then
    uploaded; GPU indices are read where they are (kernels count negatives back and never
    read or write out of bounds, but cannot raise)."""
    if isinstance(indices, GpuTensor):
        if indices.dtype not in ("int32", "int64"):
            raise Unsupported(f"{indices.dtype} indices")
        return indices, indices.shape
    if host_values.elem_type(indices) not in host_values.INTEGER_TYPES:
        raise Unsupported("indices that are not integers")
    items = host_values.values(indices)
    shape = host_values.shape(indices)
    for column, n in enumerate(bounds):
        picked = items[column::len(bounds)]
        if picked and (min(picked) < -n or max(picked) >= n):
            raise ValueError(f"{op}: indices out of range [-{n}, {n - 1}]")
    if host_values.elem_type(indices) not in (dtypes.INT32, dtypes.INT64):
        indices = host_values.make(dtypes.INT32, shape, items)
    return gpu.upload_small(indices), shape


def host_ints(gpu, value) -> Optional[list]:
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


def lanes_here(gpu, lanes: int) -> int:
    """`lanes` work items to share an output on a GPU; 1 on software adapters (lavapipe,
    SwiftShader), so their kernels get lanes.wgsl's text without workgroup memory or barrier
    (expensive there, and SwiftShader crashed a Chromium renderer on them)."""
    return 1 if gpu.device.software else lanes


def row_dispatch(gpu, kernel: str, out: GpuTensor, inputs: list, params: list, rows: int,
                 length: int, subs: Optional[dict] = None) -> GpuTensor:
    """Record rows.wgsl's `kernel` over `rows` rows of `length` elements each: every row
    shared by the most lanes (a power of two up to a workgroup) that each get an element
    (lanes_here). `params` are the kernel's after the work-item count, which this
    prepends."""
    lanes = lanes_here(gpu, min(WORKGROUP_SIZE, 1 << (max(length, 1).bit_length() - 1)))
    return gpu.dispatch("rows", kernel, out, inputs, params, rows * lanes,
                        {**(subs or {}), "LANES": lanes})


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
    return gpu.dispatch("movement", "strided_copy", out, [x], params, n, {"T": x.wgsl})
