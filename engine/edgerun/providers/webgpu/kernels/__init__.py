"""The WebGPU provider's operator table: one decorated function per operator (family modules
below), each `run(gpu, ctx, *inputs, **attributes)` with the CPU calling convention except
that tensors are `GpuTensor`s (float32 on the GPU) or host tensors (integer shape tensors,
which stay on the host): numpy arrays, or HostTensors where numpy is absent; kernels read
them through host_values.py only.

`check(node, opset)` returns "" when the node is supported, else the reason; it sees only
the node (attributes, input/output counts), so a kernel that meets an unsupported input at
run time (a rank it has no layout for) raises `Unsupported` and the session's next provider
runs that node instead (runtime/refusals.py; counted in `stats["fallbacks"]`).
"""
from __future__ import annotations

from .registry import OPS, GpuOp, lookup  # noqa: F401
from . import (elementwise, matmul, conv, pool, reduce, normalization,  # noqa: F401,E402
               movement, shape, ml, control, rnn, index, attention, training,
               quantization)
