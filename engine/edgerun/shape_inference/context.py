"""What a rule sees of one node: its inputs' types and constant values, its attributes,
and a way to infer a subgraph. Also the small constructors rules build results with."""
from __future__ import annotations

from ..errors import InvalidGraph
from ..ir import Graph, Tensor, TypeInfo
from . import symbolic


def tensor(elem_type: int, shape) -> TypeInfo:
    return TypeInfo(kind="tensor", elem_type=elem_type or 0,
                    shape=None if shape is None else tuple(shape))


def sequence(elem: TypeInfo) -> TypeInfo:
    return TypeInfo(kind="sequence", elem=elem)


def optional(elem: TypeInfo) -> TypeInfo:
    return TypeInfo(kind="optional", elem=elem)


class InferContext:
    def __init__(self, node, opset: int, types: list, values: list, engine, scope):
        self.node = node
        self.opset = opset
        self._types = types
        self._values = values
        self._engine = engine
        self._scope = scope
        self.out_values: dict = {}    # output index -> flat list

    # ---- the node -------------------------------------------------------------------------

    @property
    def where(self) -> str:
        return f"node '{self.node.name or '(unnamed)'}' ({self.node.op_type})"

    def unfit_branch(self, message: str) -> None:
        """Record an If branch that cannot run with the inferred shapes (not taken at run time)."""
        self._engine.unfit_branches.append(f"{self.where}: {message}")

    def fail(self, message: str):
        raise InvalidGraph(f"{self.where}: {message}")

    @property
    def num_inputs(self) -> int:
        return len(self.node.inputs)

    @property
    def num_outputs(self) -> int:
        return len(self.node.outputs)

    def has(self, i: int) -> bool:
        return i < len(self.node.inputs) and bool(self.node.inputs[i])

    def attr(self, name: str, default=None):
        value = self.node.attr(name, default)
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        if isinstance(value, list) and value and isinstance(value[0], bytes):
            return [v.decode("utf-8", "replace") for v in value]
        return value

    def has_attr(self, name: str) -> bool:
        return name in self.node.attributes

    # ---- inputs ---------------------------------------------------------------------------

    def type(self, i: int):
        return self._types[i] if i < len(self._types) else None

    def elem(self, i: int) -> int:
        t = self.type(i)
        if t is None:
            return 0
        if t.kind in ("tensor", "sparse_tensor"):
            return t.elem_type
        return 0

    def shape(self, i: int):
        t = self.type(i)
        return t.shape if t is not None and t.kind in ("tensor", "sparse_tensor") else None

    def rank(self, i: int):
        s = self.shape(i)
        return None if s is None else len(s)

    def value(self, i: int):
        """The flat elements of input i when known (see values.py), else None."""
        return self._values[i] if i < len(self._values) else None

    def ints(self, i: int):
        """Input i's elements as a list of ints when every one is known, else None."""
        v = self.value(i)
        if v is None or not all(symbolic.is_int(x) for x in v):
            return None
        return list(v)

    def dims(self, i: int):
        """Input i's elements as dimensions (int, symbol or None), when its length is known."""
        v = self.value(i)
        if v is None:
            return None
        return [x if symbolic.is_int(x) or isinstance(x, str) else None for x in v]

    def scalar(self, i: int):
        v = self.value(i)
        return v[0] if v is not None and len(v) == 1 else None

    def ints_or_attr(self, i: int, name: str):
        """An operand that moved from attribute to input across opsets (axes, pads, ...)."""
        if self.has_attr(name):
            return list(self.attr(name))
        if self.has(i):
            return self.ints(i)
        return None

    # ---- outputs and helpers --------------------------------------------------------------

    def set_value(self, i: int, items) -> None:
        if items is not None:
            self.out_values[i] = list(items)

    def fresh(self) -> str:
        """A new symbolic dimension for a data-dependent size (onnxruntime's spelling)."""
        return self._engine.fresh_symbol()

    def infer_subgraph(self, graph: Graph, input_types: list) -> list:
        """Output types of `graph` with its inputs bound to `input_types` (None: declared),
        names of the enclosing graphs visible."""
        return self._engine.infer_subgraph(graph, input_types, self._scope)

    def broadcast(self, *indices):
        return symbolic.broadcast_shapes([self.shape(i) for i in indices if self.has(i)],
                                         self.where)

    def axis(self, axis: int, rank: int) -> int:
        return symbolic.normalize_axis(axis, rank, self.where)


def tensor_type_of(t: Tensor) -> TypeInfo:
    return tensor(t.elem_type, tuple(t.dims))
