"""Walking graphs: a node's subgraphs, the names a graph reads from enclosing scopes, and the
nodes in an order where every input is produced first. Every layer needs these (shape
inference, the optimizer, the executor), so they live here once."""
from __future__ import annotations

from ..errors import InvalidGraph
from .graph import Graph, Node


# op_type (ai.onnx) -> the GRAPH attributes it requires; no other ai.onnx op has any
BODIES = {"If": ("then_branch", "else_branch"), "Loop": ("body",), "Scan": ("body",),
          "SequenceMap": ("body",)}


def subgraphs(node: Node) -> list:
    """The graphs in a node's attributes (If's branches, Loop's and Scan's bodies). An ai.onnx
    node of another type has none: its attributes are not searched (every optimizer pass
    asks this of every node)."""
    found: list = []
    if not node.attributes or (node.op_type not in BODIES and node.domain in ("", "ai.onnx")):
        return found
    for a in node.attributes.values():
        value = a.value
        if isinstance(value, Graph):
            found.append(value)
        elif isinstance(value, list) and value and isinstance(value[0], Graph):
            found += value          # a GRAPHS attribute: graphs only (ints lists are skipped whole)
    return found


def all_nodes(graph: Graph):
    """The nodes of `graph` and of every subgraph in it, each graph's before its bodies'."""
    for node in graph.nodes:
        yield node
        for g in subgraphs(node):
            yield from all_nodes(g)


def subgraph_reads(node: Node) -> set:
    """Names a node's subgraphs read from the enclosing scope."""
    names: set = set()
    for g in subgraphs(node):
        names |= outer_scope_reads(g)
    return names


def outer_scope_reads(graph: Graph) -> set:
    """Names a (sub)graph reads from enclosing scopes. (Plain loops: every optimizer pass
    and the planner ask this of every If/Loop/Scan body, nested ones again at each level.)"""
    defined = {v.name for v in graph.inputs}
    defined.update(graph.initializers)
    defined.update(s.name for s in graph.sparse_initializers)
    reads: set = set()
    for node in graph.nodes:
        for name in node.inputs:
            if name and name not in defined:
                reads.add(name)
        for name in subgraph_reads(node):
            if name not in defined:
                reads.add(name)
        defined.update(node.outputs)
    for v in graph.outputs:
        if v.name not in defined:
            reads.add(v.name)
    return reads


def node_reads(node: Node) -> list:
    """Every name a node needs: its inputs, then what its subgraphs read from outside."""
    inputs = [n for n in node.inputs if n]
    inner = subgraph_reads(node)
    return inputs + sorted(inner) if inner else inputs


def topological_order(graph: Graph, available: set) -> list:
    """The graph's nodes in an order where every input is produced first.

    ONNX requires files to be sorted already; exporters sometimes are not, so sort stably
    and name the first input nothing produces.
    """
    produced_by = {}
    for node in graph.nodes:
        for o in node.outputs:
            if o:
                produced_by[o] = node
    ready = set(available)
    order, pending = [], list(graph.nodes)
    while pending:
        rest = []
        for node in pending:
            if all(n in ready for n in node_reads(node)):
                order.append(node)
                ready |= {o for o in node.outputs if o}
            else:
                rest.append(node)
        if len(rest) == len(pending):
            node = rest[0]
            name = next(n for n in node_reads(node) if n not in ready)
            why = ("is part of a cycle" if name in produced_by else
                   "is not a graph input, an initializer or the output of any node")
            raise InvalidGraph(f"node '{node.name or '(unnamed)'}' ({node.op_type}) reads "
                               f"'{name}', which {why}")
        pending = rest
    return order
