"""The table of inference rules: one decorator, one dict, like the CPU kernel registry.

A rule is `fn(ctx) -> list` (shape_inference.context.InferContext) returning one
ir.TypeInfo (or None when unknown) per node output; it may also record the value of a
small output with `ctx.set_value(i, items)`.

    @infer("Relu", "Sigmoid")            # several operators, one rule
    def same_as_input(ctx): ...

    @infer("Squeeze", since=13)          # behaviour changed at opset 13
    def squeeze_13(ctx): ...
"""
from __future__ import annotations

from typing import Callable

_RULES: dict = {}   # (domain, op_type) -> list of (since_version, fn), sorted by version


def _norm_domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def infer(*op_types: str, domain: str = "", since: int = 1) -> Callable:
    """Register `fn` for every op in `op_types` of `domain`, for opset versions >= `since`."""

    def register(fn: Callable) -> Callable:
        for op_type in op_types:
            entries = _RULES.setdefault((_norm_domain(domain), op_type), [])
            entries.append((since, fn))
            entries.sort(key=lambda e: e[0])
        return fn

    return register


def lookup(op_type: str, domain: str, opset: int):
    """The rule for this op at this opset version, or None."""
    _load_rules()
    entries = _RULES.get((_norm_domain(domain), op_type))
    if not entries:
        return None
    chosen = None
    for since, fn in entries:
        if since <= (opset or 0):
            chosen = fn
    return chosen or entries[0][1]


def covered_ops() -> list:
    """Every (domain, op_type) with a rule."""
    _load_rules()
    return sorted(_RULES)


_loaded = False


def _load_rules() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from . import ops  # noqa: F401  (each module registers its rules on import)
