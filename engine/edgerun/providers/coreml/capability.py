"""Which ONNX nodes the CoreML provider claims, and why it refuses the others.

The table is the lowering registry (`lowering.LOWERINGS`): an operator is claimed when it has
a lowering to MIL ops, its opset is one the lowering handles, and its attributes pass the
lowering's check. `python -m edgerun.providers.coreml.capability` prints the table.

What a node alone cannot tell (the partitioner asks before shapes are known) is checked when
a partition is lowered for concrete inputs, and a failure there runs that partition on the
CPU provider with a warning saying why. Those ML Program constraints (iOS15+):
- dtypes: float32 and float16 compute; int64 values travel as int32; bool; nothing else;
- shapes: static per input signature, rank 1 to 5;
- shape-like inputs (Reshape shape, Slice starts/ends, axes, Clip bounds before opset 11)
  must be constants while lowering (shape arithmetic on static shapes folds).
"""
from __future__ import annotations

from ...ir import AttrType, Node
from .lowering import LOWERINGS

_SUBGRAPH_TYPES = (AttrType.GRAPH, AttrType.GRAPHS)


def _registry() -> dict:
    from . import ops  # noqa: F401  (registers every lowering)
    return LOWERINGS


def check(node: Node, opset: int) -> tuple:
    """(True, "") when the CoreML provider claims `node`, else (False, the reason)."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    label = f"{domain or 'ai.onnx'}::{node.op_type}"
    entry = _registry().get((domain, node.op_type))
    if entry is None:
        return False, f"{label} has no ML Program lowering"
    if opset < entry.since:
        return False, f"{label} at opset {opset}; the lowering handles opset {entry.since}+"
    if any(a.type in _SUBGRAPH_TYPES for a in node.attributes.values()):
        return False, f"{label} holds a subgraph; ML Programs get flat partitions"
    why = entry.check(node, opset) if entry.check else ""
    if why:
        return False, f"{label}: {why}"
    return True, ""


def table() -> list:
    """(ONNX operator, MIL ops it lowers to, attribute check name or '') for every entry."""
    rows = []
    for (domain, op), entry in sorted(_registry().items()):
        check_name = entry.check.__name__.strip("_") if entry.check else ""
        rows.append((f"{domain + '::' if domain else ''}{op}", ", ".join(entry.mil_ops),
                     check_name))
    return rows


def main() -> None:
    print(f"{'ONNX operator':34s} {'MIL ops':44s} attribute check")
    for op, mil, check_name in table():
        print(f"{op:34s} {mil:44s} {check_name}")


if __name__ == "__main__":
    main()
