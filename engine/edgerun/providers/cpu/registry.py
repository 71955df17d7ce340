"""The CPU provider's kernel registry: one decorator, one table.

A kernel is a plain function `fn(ctx, *inputs, **attributes)`:
- `inputs` are numpy arrays (object arrays for strings), Python lists for sequences, and
  None for an omitted optional input or an empty optional value;
- `attributes` arrive as keyword arguments with Python values (int, float, str, list,
  numpy array for TENSOR, ir.Graph for GRAPH); a kernel declares defaults for optional ones;
- it returns one value, or a tuple/list with one entry per output (the runner keeps as many
  as the node names).
`ctx` (runtime.kernel_context.KernelContext) gives the opset version, the node and a way to
run subgraphs (If, Loop, Scan).

A kernel may also offer `fn.bind(ctx, attributes) -> bound(ctx, *inputs)` (see `binds`): the
kernel with a node's attributes applied once, when the plan is made, for kernels whose work
at small sizes is mostly reading attributes (parsing, choosing a formula, converting lists)
and passing them as keywords. A plan calls the bound function; everything else (constant
folding, other providers) calls the kernel itself, so both must give the same results.

Adding an operator touches one place: a decorated function in `ops/<family>.py`.
"""
from __future__ import annotations

from typing import Callable

_KERNELS: dict = {}   # (domain, op_type) -> list of (since_version, fn), sorted by version

ONNX_DOMAINS = ("", "ai.onnx")


def _norm_domain(domain: str) -> str:
    return "" if domain in ONNX_DOMAINS else domain


def kernel(op_type: str, domain: str = "", since: int = 1) -> Callable:
    """Register `fn` for `op_type` in `domain` for opset versions >= `since`."""

    def register(fn: Callable) -> Callable:
        entries = _KERNELS.setdefault((_norm_domain(domain), op_type), [])
        entries.append((since, fn))
        entries.sort(key=lambda e: e[0])
        return fn

    return register


def binds(bind: Callable) -> Callable:
    """Decorator giving a kernel its `bind` (see the module docstring)."""

    def attach(fn: Callable) -> Callable:
        fn.bind = bind       # type: ignore[attr-defined]
        return fn

    return attach


def lookup(op_type: str, domain: str, opset: int):
    """The kernel for this op at this opset version, or None."""
    _load_ops()
    entries = _KERNELS.get((_norm_domain(domain), op_type))
    if not entries:
        return None
    chosen = None
    for since, fn in entries:
        if since <= opset:
            chosen = fn
    return chosen or entries[0][1]


def supported_ops() -> list:
    _load_ops()
    return sorted(_KERNELS)


_loaded = False


def _load_ops() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from . import ops  # noqa: F401  (each module registers its kernels on import)
