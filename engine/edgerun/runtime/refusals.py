"""Device kernels that refuse their inputs at run time, and who runs the node then.

Capability is decided per node before any value exists, so a wasm or WebGPU kernel can still
meet inputs it has no code for: an element type shape inference could not pin down, a host
value the device does not hold, a layout only known at run time. Such a kernel raises
`errors.KernelRefused`; the executor then runs the node on its `fallback`, the next provider
in the session's priority order that claims it too (runtime/partition.py). Inputs go to the
host and onto the fallback's device, results come back onto the refusing provider's device:
the same copies the executor plans between providers, made here only when a refusal
happens, and counted by the refusing provider (`refused`, in its stats). A routine refusal
(WebGPU's arithmetic on host values) keeps its results on the host: that provider holds
small host values as its own. No provider calls another provider's kernels; `explain()`
names each node's fallback.
"""
from __future__ import annotations

from ..errors import KernelRefused, NotImplementedOp

try:
    import numpy as np
    _SCALARS: tuple = (np.generic, int, float, bool)
except ImportError:          # Pyodide without numpy: kernels return HostTensors
    np = None  # type: ignore[assignment]
    _SCALARS = ()


def refusable(fn, node, opset: int, provider, fallback):
    """`fn` (the kernel `provider` bound for `node`) with its refusals handled: run by
    `fallback`'s kernel, or, with no fallback, an error naming the node and the reason."""
    label = f"node '{node.name or '(unnamed)'}' ({node.op_type})"
    if fallback is None:
        def refused_for_good(ctx, *inputs, **attrs):
            try:
                return fn(ctx, *inputs, **attrs)
            except KernelRefused as why:
                raise NotImplementedOp(
                    f"{label}: the {provider.name} kernel does not take {why}, and no later "
                    f"provider in this session runs {node.op_type} (natively, the CPU "
                    f"provider would; it needs numpy)") from None
        return refused_for_good

    other = fallback.kernel(node, opset)

    def to_fallback(value):
        return None if value is None else fallback.to_device(provider.to_host(value))

    def back(value, routine: bool):
        if _SCALARS and isinstance(value, _SCALARS):
            value = np.asarray(value)
        if value is None:
            return None
        value = fallback.to_host(value)
        return value if routine else provider.to_device(value)

    def run(ctx, *inputs, **attrs):
        try:
            return fn(ctx, *inputs, **attrs)
        except KernelRefused as why:
            if not why.routine:
                provider.refused(node, f"{label}: {why}")
            result = other(ctx, *[to_fallback(v) for v in inputs], **attrs)
            if isinstance(result, tuple):
                return tuple(back(r, why.routine) for r in result)
            return back(result, why.routine)
    return run
