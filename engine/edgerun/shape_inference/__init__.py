"""Static shape and type inference for every operator the CPU provider runs.

    result = infer_shapes(model, {"input": ("batch", 3, 224, 224)})
    result["logits"]            # ir.TypeInfo(kind="tensor", elem_type=1, shape=("batch", 1000))
    result.values["shape_out"]  # [1, 3, 4]: a small int tensor known before running
    result.dim_values["s"]      # ["batch", 3]: an int tensor of dimensions, symbols included

Dimensions are ints (fixed), strings (symbolic) or None (unknown), as in ir.TypeInfo.shape.
Data-dependent sizes (NonZero, Unique, ...) get fresh symbols "unk__N". Declared types
(graph inputs/outputs, value_info) refine what is inferred; a fixed declared dim that
contradicts a fixed inferred one is an InvalidGraph error. Operators without a rule give
no type (absent from the result), never an exception.
"""
from __future__ import annotations

from typing import Optional

from ..ir import Graph, Model, TypeInfo
from . import symbolic
from .engine import Engine, Scope, prepare_model, refine
from .registry import covered_ops, infer, lookup

__all__ = ["InferenceResult", "infer_shapes", "covered_ops", "infer", "lookup"]

DEFAULT_OPSETS = {"": 21, "ai.onnx.ml": 5, "ai.onnx.preview.training": 1,
                  "ai.onnx.preview": 1, "com.edgerun": 1}


class InferenceResult(dict):
    """name -> ir.TypeInfo for every value of the main graph whose type is known.

    values:         name -> flat list of ints, row-major, for small integer/bool tensors
                    whose every element is known before running (shape arithmetic included)
    dim_values:     name -> flat list of dims (int, symbol or None) for small integer
                    tensors whose length is known, e.g. Shape of a symbolic input
    subgraph_types: id(ir.Graph) -> {name: TypeInfo} for If/Loop/Scan bodies (the body's
                    own values; enclosing names are in the parent's dict)
    warnings:       rules that failed on a node (a bug, not a model error), one line each
    unfit_branches: If branches (condition unknown) that contradict the inferred shapes, so
                    cannot be the branch taken; the If's outputs come from the other one
    """

    def __init__(self):
        super().__init__()
        # value name -> known elements (the attribute hides dict.values)
        self.values: dict = {}  # type: ignore[assignment]
        self.dim_values: dict = {}
        self.subgraph_types: dict = {}
        self.warnings: list = []
        self.unfit_branches: list = []


def infer_shapes(model_or_graph, input_shapes: Optional[dict] = None,
                 opsets: Optional[dict] = None) -> InferenceResult:
    """Infer the type of every value of a Model (or Graph, with `opsets` domain -> version).

    `input_shapes` maps graph input names to shapes (tuples of int/str/None) or to
    ir.TypeInfo; they replace the declared shapes of those inputs.
    """
    if isinstance(model_or_graph, Model):
        graph = prepare_model(model_or_graph)
        opsets = dict(opsets or model_or_graph.opset_imports)
    elif isinstance(model_or_graph, Graph):
        graph = model_or_graph
        opsets = dict(opsets or DEFAULT_OPSETS)
    else:
        raise TypeError(f"infer_shapes takes an ir.Model or ir.Graph, got "
                        f"{type(model_or_graph).__name__}")
    if "ai.onnx" in opsets and "" not in opsets:
        opsets[""] = opsets["ai.onnx"]
    engine = Engine(opsets)
    scope = Scope()
    engine.infer_graph(graph, scope, _input_types(graph, input_shapes or {}),
                       replace_inputs=True)
    return _result(engine, scope)


def _input_types(graph: Graph, input_shapes: dict) -> list:
    unknown = set(input_shapes) - {v.name for v in graph.inputs}
    if unknown:
        raise ValueError(f"input_shapes names {sorted(unknown)}, which are not graph inputs "
                         f"(inputs: {[v.name for v in graph.inputs]})")
    types: list = []
    for v in graph.inputs:
        given = input_shapes.get(v.name)
        if given is None:
            types.append(None)
        elif isinstance(given, TypeInfo):
            types.append(given)
        else:
            elem = v.type.elem_type if v.type is not None else 0
            types.append(TypeInfo(kind="tensor", elem_type=elem, shape=tuple(given)))
    # given shapes replace declared ones: drop the declared shape so refine keeps them
    for i, v in enumerate(graph.inputs):
        if types[i] is not None and v.type is not None and v.type.kind == "tensor":
            types[i] = refine(types[i], TypeInfo(kind="tensor", elem_type=v.type.elem_type),
                              v.name)
    return types


def _result(engine: Engine, scope: Scope) -> InferenceResult:
    result = InferenceResult()
    _fill(result, scope)
    result.warnings = list(engine.warnings)
    result.unfit_branches = list(engine.unfit_branches)
    for key, sub in engine.subgraph_scopes.items():
        result.subgraph_types[key] = {n: t for n, t in sub.types.items() if t is not None}
    return result


def _fill(result: InferenceResult, scope: Scope) -> None:
    for name, t in scope.types.items():
        if t is not None:
            result[name] = t
    for name, items in scope.values.items():
        t = scope.types.get(name)
        if t is None or t.kind != "tensor" or t.elem_type not in _INT_TYPES:
            continue
        dims = [d if symbolic.is_int(d) or isinstance(d, str) else None for d in items]
        result.dim_values[name] = dims
        if all(symbolic.is_int(d) for d in dims):
            result.values[name] = dims


_INT_TYPES = {2, 3, 4, 5, 6, 7, 9, 12, 13}
