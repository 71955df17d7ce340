"""Checks a decoded model must pass before any pass or provider reads it, so they never see
a graph whose structure is broken (the kernels and passes check their own values).

- the graph attributes that give control flow its bodies (If's branches, Loop's and Scan's
  body, SequenceMap's) exist and hold graphs;
- no value is produced twice (by two nodes, or by a node and as a graph input or initializer);
- every ONNX operator has as many inputs and outputs as its schema version allows, its
  attributes have the types the schema gives and the required ones are there (op_schema.py,
  generated from onnx's schemas);
- all of it, recursively, in every subgraph.
Names read before they are defined, and cycles, are found when the executor orders the nodes.
"""
from __future__ import annotations

from typing import Optional

from ..errors import InvalidGraph
from .graph import AttrType, Graph
from .op_schema import SCHEMAS
from .walk import BODIES


def validate_model(model) -> None:
    validate_graph(model.graph, opsets=model.opset_imports)


def validate_graph(graph: Graph, where: str = "the main graph",
                   opsets: Optional[dict] = None) -> None:
    opsets = opsets or {}
    defined = {v.name for v in graph.inputs} | set(graph.initializers)
    for node in graph.nodes:
        label = f"node '{node.name or '(unnamed)'}' ({node.op_type})"
        _check_arity(node, label, where, opsets)
        if node.domain in ("", "ai.onnx"):
            for name in BODIES.get(node.op_type, ()):
                attribute = node.attributes.get(name)
                if attribute is None:
                    raise InvalidGraph(f"{label} in {where} has no '{name}' attribute")
                if attribute.type != AttrType.GRAPH or not isinstance(attribute.value, Graph):
                    raise InvalidGraph(f"{label} in {where}: attribute '{name}' must be a "
                                       f"graph, got {_type_name(attribute.type)}")
        for output in node.outputs:
            if not output:
                continue
            if output in defined:
                raise InvalidGraph(f"{label} in {where} produces '{output}', which is already "
                                   f"a graph input, an initializer or another node's output")
            defined.add(output)
        for attribute in node.attributes.values():
            for sub in _graphs_of(attribute):
                validate_graph(sub, f"a subgraph of {label}", opsets)


def _graphs_of(attribute) -> list:
    if isinstance(attribute.value, Graph):
        return [attribute.value]
    if isinstance(attribute.value, list):
        return [g for g in attribute.value if isinstance(g, Graph)]
    return []


def _type_name(code: int) -> str:
    names = {v: k for k, v in vars(AttrType).items() if k.isupper()}
    return names.get(code, f"attribute type {code}")


def schema_version(table: dict, node, opsets: dict):
    """(the node's opset, the newest entry of `table`'s versions for its operator that the
    opset includes), or None for an operator onnx does not define (left to its kernel) or
    a domain the model does not import. `table`: op_schema.SCHEMAS or op_types.op_types()."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    versions = table.get((domain, node.op_type))
    opset = opsets.get(domain, opsets.get("ai.onnx") if domain == "" else None)
    if not versions or opset is None:
        return None
    chosen = None
    for version in versions:
        if version[0] <= opset:
            chosen = version
    return None if chosen is None else (opset, chosen)


def _check_arity(node, label: str, where: str, opsets: dict) -> None:
    """Input and output counts and attribute types against the node's schema version."""
    found = schema_version(SCHEMAS, node, opsets)
    if found is None:
        return
    opset, chosen = found
    _, min_in, max_in, min_out, max_out, attributes = chosen
    if not _fits(len(node.inputs), min_in, max_in):
        raise InvalidGraph(f"{label} in {where} has inputs {node.inputs}; opset {opset} takes "
                           f"{_count_text(min_in, max_in)}")
    if not _fits(len(node.outputs), min_out, max_out):
        raise InvalidGraph(f"{label} in {where} has {len(node.outputs)} outputs; opset {opset} "
                           f"gives {_count_text(min_out, max_out)}")
    for name, attribute in node.attributes.items():
        expected = attributes.get(name)
        if expected is not None and attribute.type != expected[0] and not attribute.ref_attr_name:
            raise InvalidGraph(f"{label} in {where}: attribute '{name}' must be "
                               f"{_type_name(expected[0])}, got {_type_name(attribute.type)}")
    for name, (_, required) in attributes.items():
        if required and name not in node.attributes:
            raise InvalidGraph(f"{label} in {where} lacks its required attribute '{name}'")


def _fits(count: int, low: int, high) -> bool:
    return count >= low and (high is None or count <= high)


def _count_text(low: int, high) -> str:
    if low == high:
        return str(low)
    return f"{low} to {high}" if high is not None else f"at least {low}"
