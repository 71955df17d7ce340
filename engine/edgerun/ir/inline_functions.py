"""Inline model-local functions (ModelProto.functions) into the graphs that call them.

Every call node becomes a copy of the function body with internal names made unique,
formal inputs/outputs bound to the caller's names and `ref_attr_name` attributes taken from
the caller (or the function's defaults). Runs before planning, so kernels only ever see
operators from real operator sets.
"""
from __future__ import annotations

import copy
import itertools

from .. import ir
from ..errors import InvalidGraph
from .walk import subgraphs

_MAX_DEPTH = 64


def inline_functions(model: ir.Model) -> None:
    if not model.functions:
        return
    table = {(f.domain, f.name, f.overload): f for f in model.functions}
    counter = itertools.count()
    _inline_graph(model.graph, table, counter, 0)
    for f in model.functions:
        for domain, version in f.opset_imports.items():
            model.opset_imports.setdefault(domain, version)


def _inline_graph(graph: ir.Graph, table: dict, counter, depth: int) -> None:
    nodes = []
    for node in graph.nodes:
        _inline_subgraphs(node, table, counter, depth)
        fn = table.get((node.domain, node.op_type, node.overload))
        if fn is None:
            nodes.append(node)
        else:
            nodes += _expand_call(node, fn, table, counter, depth)
    graph.nodes = nodes


def _inline_subgraphs(node: ir.Node, table: dict, counter, depth: int) -> None:
    for g in subgraphs(node):
        _inline_graph(g, table, counter, depth)


def _expand_call(call: ir.Node, fn: ir.Function, table: dict, counter, depth: int) -> list:
    if depth > _MAX_DEPTH:
        raise InvalidGraph(f"function '{fn.name}' calls itself more than {_MAX_DEPTH} levels deep")
    prefix = f"{fn.name}__{next(counter)}__"
    rename = {formal: actual for formal, actual in zip(fn.inputs, call.inputs)}
    rename.update({formal: "" for formal in fn.inputs[len(call.inputs):]})
    rename.update({formal: actual for formal, actual in zip(fn.outputs, call.outputs)})
    body = []
    for node in fn.nodes:
        new = copy.deepcopy(node)
        new.inputs = [_renamed(n, rename, prefix) for n in node.inputs]
        new.outputs = [_renamed(n, rename, prefix) for n in node.outputs]
        new.name = prefix + (node.name or node.op_type)
        new.attributes = _bind_attributes(new.attributes, call, fn)
        for g in subgraphs(new):
            _rename_outer_reads(g, rename, prefix, call, fn)
        body.append(new)
    sub = ir.Graph(nodes=body)
    _inline_graph(sub, table, counter, depth + 1)
    return sub.nodes


def _renamed(name: str, rename: dict, prefix: str) -> str:
    if not name:
        return name
    return rename[name] if name in rename else prefix + name


def _bind_attributes(attributes: dict, call: ir.Node, fn: ir.Function) -> dict:
    bound = {}
    for name, a in attributes.items():
        if not a.ref_attr_name:
            bound[name] = a
            continue
        source = call.attributes.get(a.ref_attr_name) or fn.attribute_defaults.get(a.ref_attr_name)
        if source is not None:
            bound[name] = ir.Attribute(name=name, type=source.type, value=source.value)
    return bound


def _rename_outer_reads(graph: ir.Graph, rename: dict, prefix: str, call, fn,
                        shadow: frozenset = frozenset()) -> None:
    """Inside a body's subgraph, names from the function scope get the same renaming;
    names the subgraph (or an enclosing subgraph, `shadow`) defines are left alone."""
    local = set(shadow) | {v.name for v in graph.inputs} | set(graph.initializers)
    for node in graph.nodes:
        node.inputs = [n if (not n or n in local) else _renamed(n, rename, prefix)
                       for n in node.inputs]
        node.attributes = _bind_attributes(node.attributes, call, fn)
        local |= {o for o in node.outputs if o}
        for g in subgraphs(node):
            _rename_outer_reads(g, rename, prefix, call, fn, frozenset(local))
    for v in graph.outputs:
        if v.name not in local:
            v.name = _renamed(v.name, rename, prefix)
