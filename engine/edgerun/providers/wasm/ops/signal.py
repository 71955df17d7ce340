"""Window functions (HannWindow, HammingWindow, BlackmanWindow), computed on the host in
double precision: w[n] for n < size, with N = size (periodic) or size - 1 (symmetric)."""
from __future__ import annotations

import math

from ....ir import dtypes
from . import operator
from .common import converted, floats_as

WINDOWS = {
    "HannWindow": lambda phase: 0.5 - 0.5 * math.cos(phase),
    "HammingWindow": lambda phase: 25.0 / 46.0 - (1 - 25.0 / 46.0) * math.cos(phase),
    "BlackmanWindow": lambda phase: 0.42 - 0.5 * math.cos(phase) + 0.08 * math.cos(2 * phase),
}


@operator(*WINDOWS)
def bind_window(dev, node, opset):
    shape_of = WINDOWS[node.op_type]
    periodic = int(node.attr("periodic", 1))
    elem_type = int(node.attr("output_datatype", dtypes.FLOAT))

    def run(ctx, size_t, **_):
        count = int(dev.ints(converted(dev, size_t, dtypes.INT64))[0])
        if count < 0:
            raise ValueError(f"{node.op_type}: size must be non-negative, got {count}")
        period = count if periodic else count - 1
        values = [shape_of(2 * math.pi * i / period if period > 0 else 0.0)
                  for i in range(count)]
        return floats_as(dev, values, (count,), elem_type)
    return run
