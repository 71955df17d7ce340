"""com.edgerun ElementwiseProgram: a chain of float32 Add, Sub, Mul, Div (of earlier values
or a scalar) and QDQ pairs over one tensor, which optimizer/fuse_elementwise_program.py makes
of a QDQ model's activation chains (x * QDQ(x + 3) ...: HardSwish between its pairs). One
native pass (native/program.py); without the native library the instructions run as the
numpy nodes they stand for. Either way the values are the separate nodes', bit for bit.

Attributes: `ops` (program.c's codes: 1 Add, 2 Sub, 3 Mul, 4 Div, 5 scalar - a, 6 scalar / a,
7 QuantizeDequantize), `operands` (two registers per instruction: 0 is x, i + 1 instruction
i's value, -1 the scalar) and `constants` (four per instruction: the scalar; a pair's scale,
zero point, low, high). The result is the last instruction's value.
"""
from __future__ import annotations

import numpy as np

from ..native import elementwise as native
from ..native import program as native_program
from ..registry import kernel
from .float_errors import ignored_float_errors

DOMAIN = "com.edgerun"
ADD, SUB, MUL, DIV, RSUB, RDIV, QUANTIZE_DEQUANTIZE = range(1, 8)
BINARY = {ADD: np.add, SUB: np.subtract, MUL: np.multiply, DIV: np.divide}


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
            c = np.float32(constants[4 * i])
            if op in BINARY:
                values.append(BINARY[op](a, values[b] if b >= 0 else c))
            elif op == RSUB:
                values.append(np.subtract(c, a))
            elif op == RDIV:
                values.append(np.divide(c, a))
            else:
                values.append(_quantize_dequantize(a, constants[4 * i:4 * i + 4]))
    return values[-1]


def _quantize_dequantize(x: np.ndarray, params) -> np.ndarray:
    """The QDQ pair [scale, zero point, low, high] (quantization.py's float32 path)."""
    from .quantization import quantize_dequantize

    scale, point, low = params[0], int(params[1]), params[2]
    dtype = np.uint8 if low == 0 else np.int8
    return quantize_dequantize(None, x, np.array(scale, np.float32), np.array(point, dtype))
