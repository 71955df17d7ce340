"""A chain of float32 elementwise nodes over one tensor in one native pass
(cpu_kernels/program.c): com.edgerun ElementwiseProgram's instructions as the C struct
array the pass reads."""
from __future__ import annotations

import numpy as np

from . import parallel
from .library import address, library

# cpu_kernels/program.c's Instruction
INSTRUCTION = np.dtype([("op", "<i4"), ("a", "<i4"), ("b", "<i4"), ("unused", "<i4"),
                        ("c", "<f4", (4,))])


def instructions(ops, operands, constants) -> np.ndarray:
    """The program's instructions: ops[i] with registers operands[2i], operands[2i + 1] (-1:
    the scalar constants[4i]) and constants[4i:4i + 4]."""
    program = np.zeros(len(ops), INSTRUCTION)
    program["op"] = ops
    program["a"] = operands[0::2]
    program["b"] = operands[1::2]
    program["c"] = np.asarray(constants, np.float32).reshape(len(ops), 4)
    return program


def run(x: np.ndarray, program: np.ndarray) -> np.ndarray:
    """The program over float32 x (a fresh array of x's shape)."""
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    out = np.empty(x.shape, np.float32)
    ranges = parallel.value_ranges(x.size)
    if len(ranges) == 1:
        if x.size:
            library().er_cpu_elementwise_program(address(x), x.size, address(program),
                                                 len(program), address(out))
        return out
    xa, oa = address(x), address(out)
    parallel.run_split("er_cpu_elementwise_program",
                       [parallel.part_addresses(xa, ranges), parallel.part_lengths(ranges),
                        address(program), len(program), parallel.part_addresses(oa, ranges)],
                       len(ranges))
    return out
