"""The walk: visit every node in order, apply its rule, refine with declared types.

Values are looked up through a chain of scopes so a subgraph (If/Loop/Scan body) sees the
names of the graphs that enclose it.
"""
from __future__ import annotations

from typing import Optional

import copy

from ..errors import InvalidGraph
from ..ir import Graph, Model, TypeInfo
from ..ir.inline_functions import inline_functions
from ..ir.walk import topological_order
from . import symbolic, values as V
from .context import InferContext, tensor, tensor_type_of
from .registry import lookup


class Scope:
    def __init__(self, parent: Optional["Scope"] = None):
        self.parent = parent
        self.types: dict = {}
        self.values: dict = {}

    def type(self, name: str):
        scope: Optional[Scope] = self
        while scope is not None:
            if name in scope.types:
                return scope.types[name]
            scope = scope.parent
        return None

    def value(self, name: str):
        scope: Optional[Scope] = self
        while scope is not None:
            if name in scope.types:
                return scope.values.get(name)
            scope = scope.parent
        return None

    def names(self) -> set:
        out: set = set()
        scope: Optional[Scope] = self
        while scope is not None:
            out |= set(scope.types)
            scope = scope.parent
        return out


class Engine:
    def __init__(self, opsets: dict):
        self.opsets = opsets
        self.warnings: list = []
        self.unfit_branches: list = []
        self.subgraph_scopes: dict = {}     # id(Graph) -> Scope
        self._symbols = 0

    def fresh_symbol(self) -> str:
        self._symbols += 1
        return f"unk__{self._symbols}"

    # ---- graphs ---------------------------------------------------------------------------

    def infer_graph(self, graph: Graph, scope: Scope, input_types: Optional[list] = None,
                    replace_inputs: bool = False) -> list:
        """Fill `scope` with every value of `graph`; returns the graph's output types.

        `input_types` (None entries: as declared) are refined by the declared input types,
        or replace them with `replace_inputs` (shapes the caller asks for)."""
        declared = {v.name: v.type for v in list(graph.value_info) + list(graph.outputs)
                    if v.type is not None}
        for name, t in graph.initializers.items():
            scope.types[name] = tensor_type_of(t)
            items = V.decode(t)
            if items is not None:
                scope.values[name] = items
        for s in graph.sparse_initializers:
            scope.types[s.name] = tensor(s.values.elem_type, tuple(s.dims))
        for i, v in enumerate(graph.inputs):
            given = input_types[i] if input_types and i < len(input_types) else None
            if given is not None:
                scope.types[v.name] = given if replace_inputs else self.refine(given, v.type,
                                                                               v.name, scope)
            elif v.name not in graph.initializers:
                scope.types[v.name] = _unknown_negative_dims(v.type)
        available = scope.names()
        for node in topological_order(graph, available):
            self.infer_node(node, scope, declared)
        return [self.refine(scope.type(v.name), v.type, v.name, scope) for v in graph.outputs]

    def infer_subgraph(self, graph: Graph, input_types: list, outer: Scope) -> list:
        scope = Scope(outer)
        self.subgraph_scopes[id(graph)] = scope
        return self.infer_graph(graph, scope, input_types)

    def refine(self, inferred, declared, name: str, scope: Scope):
        """`refine`; in the main graph a declared shape that contradicts the inferred one is
        a warning and the inferred shape wins (onnxruntime's lenient merge: exporters write
        wrong output shapes, and the model still runs). In a subgraph it stays an error,
        which the control-flow rule turns into an unknown branch type."""
        return refine(inferred, declared, name,
                      self.warnings.append if scope.parent is None else None)

    # ---- nodes ----------------------------------------------------------------------------

    def infer_node(self, node, scope: Scope, declared: dict) -> None:
        opset = self.opsets.get("" if node.domain == "ai.onnx" else node.domain, 0)
        types = [scope.type(n) if n else None for n in node.inputs]
        vals = [scope.value(n) if n else None for n in node.inputs]
        ctx = InferContext(node, opset, types, vals, self, scope)
        rule = lookup(node.op_type, node.domain, opset)
        outputs = []
        if rule is not None:
            try:
                outputs = list(rule(ctx) or [])
            except InvalidGraph as e:
                if ctx.where in str(e):
                    raise
                raise InvalidGraph(f"{ctx.where}: {e}") from e
            except Exception as e:   # noqa: BLE001 - a rule's bug must not stop inference
                self.warnings.append(f"{ctx.where}: inference failed: {type(e).__name__}: {e}")
                outputs, ctx.out_values = [], {}
        for i, name in enumerate(node.outputs):
            if not name:
                continue
            inferred = outputs[i] if i < len(outputs) else None
            t = self.refine(inferred, declared.get(name), name, scope)
            scope.types[name] = t
            items = ctx.out_values.get(i)
            if items is not None and _fits(items, t):
                scope.values[name] = items


def _fits(items, t) -> bool:
    if t is not None and t.kind == "sequence":
        return items == []               # an empty sequence (SequenceEmpty)
    if t is None or t.kind != "tensor" or not symbolic.is_known(t.shape):
        return False
    return len(items) == symbolic.product(t.shape) and len(items) <= V.MAX_ELEMENTS


# ---- declared types -----------------------------------------------------------------------

def refine(inferred, declared, name: str, warn=None):
    """Combine an inferred type with a declared one (value_info, graph input/output).

    Fixed dims win over symbols, symbols over unknowns, inferred over declared otherwise;
    two different fixed dims (or ranks, or element types) are an InvalidGraph error.
    """
    if declared is None or declared.kind not in _KINDS or (
            declared.kind == "tensor" and not declared.elem_type and declared.shape is None):
        return inferred
    if inferred is None:
        return declared
    if inferred.kind != declared.kind:
        if inferred.kind == "tensor" and not inferred.elem_type and inferred.shape is None:
            return declared
        raise InvalidGraph(f"value '{name}': inferred type {inferred.type_string()} but "
                           f"declared {declared.type_string()}")
    if inferred.kind in ("sequence", "optional"):
        elem = refine(inferred.elem, declared.elem, name, warn)
        return TypeInfo(kind=inferred.kind, elem=elem)
    if inferred.kind not in ("tensor", "sparse_tensor"):
        return inferred
    elem = inferred.elem_type or declared.elem_type
    if inferred.elem_type and declared.elem_type and inferred.elem_type != declared.elem_type:
        raise InvalidGraph(f"value '{name}': inferred element type "
                           f"{inferred.type_string()} but declared {declared.type_string()}")
    shape = _refine_shape(inferred.shape, declared.shape, name, warn)
    return TypeInfo(kind=inferred.kind, elem_type=elem, shape=shape,
                    denotation=declared.denotation)


_KINDS = ("tensor", "sparse_tensor", "sequence", "optional", "map")


def _unknown_negative_dims(t):
    """A declared input type with exporters' -1 ("unknown") dims made unknown (None)."""
    if t is None or t.kind != "tensor" or t.shape is None:
        return t
    if not any(symbolic.is_int(d) and d < 0 for d in t.shape):
        return t
    shape = tuple(None if symbolic.is_int(d) and d < 0 else d for d in t.shape)
    return TypeInfo(kind=t.kind, elem_type=t.elem_type, shape=shape, elem=t.elem,
                    key_type=t.key_type, denotation=t.denotation)


def _refine_shape(inferred, declared, name: str, warn=None):
    """The inferred shape with the declared one's known dims filled in. A contradiction
    raises InvalidGraph, or with `warn` is reported through it and the inferred shape kept."""
    if declared is None:
        return inferred
    # some exporters write -1 (or 0 with a name) for an unknown dim
    declared = tuple(None if symbolic.is_int(d) and d < 0 else d for d in declared)
    if inferred is None:
        return declared
    conflict = None
    if len(inferred) != len(declared):
        conflict = (f"value '{name}': inferred shape {_show(inferred)} but declared "
                    f"{_show(declared)} (different ranks)")
    elif any(symbolic.is_int(a) and symbolic.is_int(b) and a != b
             for a, b in zip(inferred, declared)):
        conflict = (f"value '{name}': inferred shape {_show(inferred)} but declared "
                    f"{_show(declared)}")
    if conflict and warn is None:
        raise InvalidGraph(conflict)
    if conflict:
        warn(f"{conflict}; the inferred shape is used")
        return inferred
    out = []
    for a, b in zip(inferred, declared):
        if symbolic.is_int(a):
            out.append(a)
        elif symbolic.is_int(b):
            out.append(b)
        elif isinstance(b, str) and (a is None or a.startswith("unk__")):
            out.append(b)
        else:
            out.append(a)
    return tuple(out)


def _show(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def prepare_model(model: Model) -> Graph:
    """The graph to infer: a copy with model-local functions expanded when there are any."""
    if not model.functions:
        return model.graph
    clone = copy.copy(model)
    clone.graph = copy.deepcopy(model.graph)
    inline_functions(clone)
    return clone.graph
