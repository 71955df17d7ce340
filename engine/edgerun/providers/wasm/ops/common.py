"""Shape arithmetic shared by the wasm operators (pure Python) and the float-type guard."""
from __future__ import annotations

from typing import NoReturn

from array import array

from ....ir import dtypes
from ....errors import KernelRefused
from ..device import WasmTensor

MAX_RANK = 8


def contiguous_strides(shape) -> list:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return strides[::-1]


def broadcast_shape(*shapes) -> tuple:
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {1}
        if len(dims) > 1:
            raise ValueError(f"shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_strides(shape, out_shape) -> list:
    """Strides (elements) reading a contiguous `shape` as `out_shape`: 0 where broadcast."""
    pad = len(out_shape) - len(shape)
    full = (1,) * pad + tuple(shape)
    strides = contiguous_strides(full)
    return [0 if full[i] == 1 and out_shape[i] != 1 else strides[i] for i in range(len(full))]


def merge_dims(shape, *stride_lists) -> tuple:
    """Fold adjacent dimensions that every operand walks contiguously; drop size-1 ones."""
    dims = [(shape[i], [s[i] for s in stride_lists]) for i in range(len(shape)) if shape[i] != 1]
    if not dims:
        return [1], [[1] for _ in stride_lists]
    merged = [dims[0]]
    for size, strides in dims[1:]:
        prev_size, prev = merged[-1]
        if all(p == s * size for p, s in zip(prev, strides)):
            merged[-1] = (prev_size * size, strides)
        else:
            merged.append((size, strides))
    if len(merged) > MAX_RANK:
        raise ValueError(f"the wasm kernels handle up to {MAX_RANK} dimensions after merging, "
                         f"got {len(merged)}")
    return [m[0] for m in merged], [[m[1][k] for m in merged] for k in range(len(stride_lists))]


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def product(values) -> int:
    n = 1
    for v in values:
        n *= v
    return n


def all_float(values) -> bool:
    return all(v is None or (isinstance(v, WasmTensor) and v.elem_type == dtypes.FLOAT)
               for v in values)


HOST_VALUES = "takes_host_values"      # the provider hands such kernels lists and None as is


def host_values(bind):
    """Mark a binder whose kernel takes sequences and optionals (not only WasmTensors)."""
    def binder(dev, node, opset):
        run = bind(dev, node, opset)
        setattr(run, HOST_VALUES, True)
        return run
    return binder


def refuse(node, *inputs) -> NoReturn:
    """Refuse `node`'s inputs at run time: element types (or host values) the wasm kernels do
    not compute. The executor runs the node on the session's next provider that claims it
    (runtime/refusals.py), through host copies counted in the provider's `host_fallbacks`."""
    kinds = [dtypes.type_string(v.elem_type) if isinstance(v, WasmTensor) else
             type(v).__name__ for v in inputs if v is not None]
    raise KernelRefused(f"inputs of types {kinds} (the wasm kernel of {node.op_type} "
                        f"computes float32)")


# float types the float32 kernels compute by converting in and out (as onnxruntime's CPU
# kernels compute float16): float64 loses its extra precision there
WIDENED_FLOATS = frozenset({dtypes.FLOAT16, dtypes.BFLOAT16, dtypes.DOUBLE})
# 16-bit floats: float32 holds every value and computes every result within one rounding, so
# even elementwise operators take the float32 SIMD loops on widened copies (the typed loops
# compute in double, element by element, several times slower)
HALF_FLOATS = frozenset({dtypes.FLOAT16, dtypes.BFLOAT16})
EXACT_IN_FLOAT32 = frozenset({dtypes.INT8, dtypes.UINT8, dtypes.INT16, dtypes.UINT16})


def converted(dev, x: WasmTensor, elem_type: int, flags: int = 0) -> WasmTensor:
    """`x` as another numeric element type (er_cast; `flags`: how float8 targets saturate
    and round, tensor.cast_flags). A weight's conversion is made once per session (float16
    weights of a float32 kernel, say): see `derived`."""
    if x.elem_type == elem_type:
        return x
    if x.block.casts is None:
        return _cast(dev, x, elem_type, flags)
    return derived(dev, x, (elem_type, flags), lambda: _cast(dev, x, elem_type, flags))


def derived(dev, x: WasmTensor, key: tuple, make) -> WasmTensor:
    """What `make()` derives from the constant `x` (a weight: its block has `casts`), made
    once per session and kept with x's block under `key`: outside any program being
    recorded, which holds it instead of redoing it on every replay."""
    casts = x.block.casts
    assert casts is not None, "derived() takes a constant"
    key = (x.offset, x.shape) + key
    y = casts.get(key)
    if y is None:
        with dev.outside_recording():
            y = casts[key] = make()
        y.block.casts = {}                      # a constant too
    if dev.recorder is not None:
        dev.recorder.hold(y)
    return y


def _cast(dev, x: WasmTensor, elem_type: int, flags: int) -> WasmTensor:
    y = dev.empty(x.shape, elem_type)
    if y.size and dev.call("er_cast", x.ptr, y.ptr, x.size, x.elem_type, elem_type, flags):
        raise TypeError(f"er_cast cannot convert {dtypes.type_string(x.elem_type)} to "
                        f"{dtypes.type_string(elem_type)}")
    return y


def host_floats(dev, t: WasmTensor) -> list:
    """A small numeric tensor's values read to the host as Python floats (scales, bounds,
    thresholds); float32 and float64 are read as they are, other types converted first."""
    if not t.size:
        return []
    if t.elem_type not in (dtypes.FLOAT, dtypes.DOUBLE):
        t = converted(dev, t, dtypes.DOUBLE)
    fmt = "f" if t.elem_type == dtypes.FLOAT else "d"
    return list(array(fmt, bytes(dev.read(t.ptr, t.nbytes))))


def floats_as(dev, values, shape, elem_type: int) -> WasmTensor:
    """Values computed on the host in double precision, uploaded as `elem_type`."""
    t = dev.empty(shape, dtypes.DOUBLE)
    if t.size:
        dev.write(t.ptr, array("d", values))
    return converted(dev, t, elem_type)


def float_or_refused(dev, node, opset, fast, float_inputs=None, keep_outputs=(),
                      selects_values=False):
    """`fast` when the listed inputs (default: all) are float32 tensors; when they are all
    one other float type (float16, bfloat16, float64), `fast` on float32 copies, its float32
    outputs converted back (except those at `keep_outputs`, float32 by the spec); else
    refused. With `selects_values` (outputs are input values: max pooling) 8- and 16-bit
    integers widen too, exactly."""
    widened_types = WIDENED_FLOATS | EXACT_IN_FLOAT32 if selects_values else WIDENED_FLOATS

    def run(ctx, *inputs, **attrs):
        positions = range(len(inputs)) if float_inputs is None else \
            [i for i in float_inputs if i < len(inputs)]
        checked = [inputs[i] for i in positions]
        if all_float(checked):
            return fast(ctx, *inputs)
        kinds = {v.elem_type if isinstance(v, WasmTensor) else None
                 for v in checked if v is not None}
        if len(kinds) != 1 or not kinds <= widened_types:
            refuse(node, *inputs)
        kind = kinds.pop()
        widened = list(inputs)
        for i in positions:
            if widened[i] is not None:
                widened[i] = converted(dev, widened[i], dtypes.FLOAT)
        result = fast(ctx, *widened)
        back = [converted(dev, r, kind) if isinstance(r, WasmTensor) and
                r.elem_type == dtypes.FLOAT and i not in keep_outputs else r
                for i, r in enumerate(result if isinstance(result, tuple) else (result,))]
        return tuple(back) if isinstance(result, tuple) else back[0]
    return run
