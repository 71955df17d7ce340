"""The guard for kernels that load and store float32, float64, float16 and bfloat16 themselves
(through wasm_kernels/elemtypes.h) and compute in double: no conversion copies in or out, and
float64 keeps its precision. Other element types are refused (ops/common.refuse)."""
from __future__ import annotations

from ....ir import dtypes
from ..device import WasmTensor
from .common import refuse

KERNEL_FLOATS = frozenset({dtypes.FLOAT, dtypes.DOUBLE, dtypes.FLOAT16, dtypes.BFLOAT16})


def typed_or_refused(dev, node, opset, fast, float_inputs=(0,)):
    """`fast` when every input at `float_inputs` (absent ones aside) holds one of the
    KERNEL_FLOATS, else refuses them (the next provider runs the node)."""

    def run(ctx, *inputs, **attrs):
        checked = [inputs[i] for i in float_inputs if i < len(inputs) and inputs[i] is not None]
        if all(isinstance(v, WasmTensor) and v.elem_type in KERNEL_FLOATS for v in checked):
            return fast(ctx, *inputs)
        refuse(node, *inputs)
    return run


def scalar_int(dev, t: WasmTensor, op_type: str, what: str) -> int:
    """The one value of a scalar (or one-element) integer input."""
    values = dev.ints(t)
    if len(values) != 1:
        raise ValueError(f"{op_type}: {what} must be a scalar, got shape {list(t.shape)}")
    return int(values[0])
