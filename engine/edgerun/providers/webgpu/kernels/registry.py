"""The table of WebGPU operators and the decorator that fills it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional


from ..device import Unsupported  # noqa: F401 - kernels raise it for inputs they cannot take


@dataclass
class GpuOp:
    op_type: str
    domain: str
    run: Callable                      # run(gpu, ctx, *inputs, **attributes)
    check: Optional[Callable] = None   # check(node, opset) -> "" or why not
    host_only: bool = False            # shape arithmetic: always computed on the host
    typed: bool = False                # check(node, opset, types): types maps value names
                                       # to their ir.TypeInfo (shape inference, see provider)
    narrow: bool = False               # takes 8/16-bit tensors (gpu.NARROW_TYPES): moves
                                       # their words, or knows their wrapping and rounding


OPS: dict = {}   # (domain, op_type) -> GpuOp


def gpu_op(*op_types: str, domain: str = "", check: Optional[Callable] = None,
           host_only: bool = False, typed: bool = False, narrow: bool = False):
    def register(fn):
        for op in op_types:
            OPS[(domain, op)] = GpuOp(op, domain, fn, check, host_only, typed, narrow)
        return fn
    return register


def lookup(op_type: str, domain: str) -> Optional[GpuOp]:
    return OPS.get(("" if domain == "ai.onnx" else domain, op_type))
