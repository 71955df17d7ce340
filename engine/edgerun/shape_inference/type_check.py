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

from ..errors import InvalidGraph
from ..ir.op_types import ANY_TYPES, op_types
from ..ir.walk import subgraphs

MAX_LISTED = 5


def check_types(graph, result, opsets: dict, only=None) -> None:
    """Raise InvalidGraph listing the type problems of `graph` and its subgraphs, given
    shape inference's `result` (an InferenceResult over the model)."""
    problems = type_problems(graph, result, opsets, only=only)
    if problems:
        more = f" (and {len(problems) - MAX_LISTED} more)" if len(problems) > MAX_LISTED else ""
        raise InvalidGraph("the model gives operators types they do not take: " +
                           "; ".join(problems[:MAX_LISTED]) + more)


def type_problems(graph, result, opsets: dict, types=None, only=None) -> list:
    types = dict(result) if types is None else types
    problems: list = []
    for node in graph.nodes:
        if only is None or only.get(id(node)) is node:
            problems += _node_problems(node, types, opsets)
        for body in subgraphs(node):
            inner = {**types, **result.subgraph_types.get(id(body), {})}
            problems += type_problems(body, result, opsets, inner, only)
    return problems


def own_nodes(graph) -> dict:
    """id(node) -> node for every node of `graph` and its subgraphs (check_types' `only`)."""
    found = {}
    for node in graph.nodes:
        found[id(node)] = node
        for body in subgraphs(node):
            found.update(own_nodes(body))
    return found


def _schema(node, opsets: dict):
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    versions = op_types().get((domain, node.op_type))
    opset = opsets.get(domain, opsets.get("ai.onnx") if domain == "" else None)
    if not versions or opset is None:
        return None
    fitting = [v for v in versions if v[0] <= opset]
    return fitting[-1] if fitting else None


def _node_problems(node, types: dict, opsets: dict) -> list:
    schema = _schema(node, opsets)
    if schema is None:
        return []
    since, params, constraints = schema
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
