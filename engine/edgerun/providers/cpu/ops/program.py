"""com.edgerun ElementwiseProgram: a chain of float32 Add, Sub, Mul, Div (of earlier values
or a scalar) and QDQ pairs over one tensor, which optimizer/fuse_elementwise_program.py makes
of a QDQ model's activation chains (x * QDQ(x + 3) ...: HardSwish between its pairs). One
native pass (native/program.py); without the native library the instructions run as the
numpy nodes they stand for. Either way the values are the separate nodes', bit for bit.

Attributes: `ops` (the pass's codes: Add, Sub, Mul, Div, scalar - a, scalar / a,
QuantizeDequantize), `operands` (two registers per instruction: 0 is x, i + 1 instruction
i's value, -1 the scalar) and `constants` (four per instruction: the scalar; a pair's scale,
zero point, low, high). The result is the last instruction's value.
"""
from __future__ import annotations

import numpy as np

from ....ir import EDGERUN_DOMAIN as DOMAIN
from ....optimizer.fuse_elementwise_program import ARITHMETIC
from ..native import elementwise as native
from ..native import program as native_program
from ..registry import kernel
from .float_errors import ignored_float_errors
from .quantization import quantize_dequantize_on_grid

NUMPY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}


@kernel("ElementwiseProgram", domain=DOMAIN)
def elementwise_program(ctx, x, ops=(), operands=(), constants=()):
    if native.available() and x.dtype == np.float32:
        def build():
            return native_program.instructions(ops, operands, constants)
        program = build() if ctx is None else ctx.prepared("program", (), build)
        return native_program.run(x, program)
    return _interpreted(x, ops, operands, constants)


def _interpreted(x, ops, operands, constants) -> np.ndarray:
    """The instructions as the numpy nodes they stand for."""
    values = [x]
    with ignored_float_errors():
        for i, op in enumerate(ops):
            a, b = values[operands[2 * i]], operands[2 * i + 1]
            if op not in ARITHMETIC:                    # the QDQ pair
                values.append(quantize_dequantize_on_grid(a, constants[4 * i:4 * i + 4]))
                continue
            op_type, scalar_first = ARITHMETIC[op]
            other = values[b] if b >= 0 else np.float32(constants[4 * i])
            values.append(NUMPY[op_type](other, a) if scalar_first else NUMPY[op_type](a, other))
    return values[-1]
