"""What every pass needs to read and rewrite one graph: who produces and who reads each value,
which values are constants, and edits that keep those maps current.

A pass builds a `GraphView`, walks `view.live_nodes()` and edits through the view; `commit()`
writes the node list back (new nodes go where their anchor node was, so the order stays
topological). numpy is imported only when a constant is asked for: the core must import
without it.
"""
from __future__ import annotations

from typing import Any, Optional

from .. import ir
from ..ir import EDGERUN_DOMAIN
from ..ir.host_tensor import STRUCT_FORMATS, HostTensor, flat_values
from ..ir.optional_numpy import have_numpy
from ..ir.walk import node_reads, subgraphs  # noqa: F401 - passes import subgraphs from here

ONNX_DOMAINS = ("", "ai.onnx")
# element types whose values scalar() reads as a number (with or without numpy)
NUMBER_TYPES = frozenset(STRUCT_FORMATS) - {ir.dtypes.BOOL}
FLOAT_TYPES = frozenset({ir.dtypes.FLOAT, ir.dtypes.FLOAT16, ir.dtypes.DOUBLE})


class PassContext:
    """Model-wide facts a pass reads: opset versions, unique names, the IR version rule for
    overridable initializers."""

    def __init__(self, model: ir.Model, evaluate=None, providers=None, checked_nodes=None):
        self.model = model
        # shape inference by the infer_types pass (an InferenceResult), or None
        self.inferred: Any = None
        # id(node) -> node whose operand types infer_types checks (the session's model's own
        # nodes); None checks none (optimize() on its own: tools, pack)
        self.checked_nodes = checked_nodes
        # the session's providers in priority order (objects with capability(node, opset)),
        # for fusions only some providers run; None: not known (optimize() on its own)
        self.providers = providers
        # (node, opset, input arrays) -> what its kernel returns (raising where no kernel
        # runs it): how constant folding computes; None folds nothing
        self.evaluate = evaluate
        self.opsets = model.opset_imports
        # ONNX IR < 4 lists every initializer as a graph input too; onnxruntime treats them as
        # constants there, and as overridable (not constant) from IR 4 on.
        self.inputs_override_initializers = model.ir_version >= 4
        self.inferred_types: dict = {}    # name -> ir.TypeInfo, filled by fold_shapes
        self._arrays: dict = {}           # id(ir.Tensor) -> (tensor, its numpy value)
        self._names: set = set()
        _collect_names(model.graph, self._names)
        self.has_numpy = have_numpy()

    def opset(self, domain: str = "") -> int:
        return self.opsets.get("" if domain in ONNX_DOMAINS else domain, 0)

    def fresh_name(self, base: str) -> str:
        """A value or node name no graph of the model uses yet."""
        name, n = base, 0
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        return name

    def array_of(self, tensor):
        """The value of an initializer tensor, converted once per optimize(): a numpy array,
        or without numpy (a page) a HostTensor sharing the tensor's bytes."""
        entry = self._arrays.get(id(tensor))
        if entry is None or entry[0] is not tensor:
            value = tensor.numpy() if self.has_numpy else HostTensor.from_ir(tensor)
            entry = self._arrays[id(tensor)] = (tensor, value)
        return entry[1]

    def runs_like(self, fused: ir.Node, nodes: list, only: tuple = ()) -> bool:
        """Whether the provider that would run `fused` (the first in priority order whose
        capability claims it) is the one that would run each of `nodes`: a fusion whose
        kernel only some providers have applies only where it moves no node to another
        provider. With `only` (provider names), also that it is one of those: a fusion that
        pays on their kernels alone. False when the providers are not known, or one of them
        cannot judge nodes before the optimized model is prepared (the edge adapters: they
        claim whole subgraphs from its types and constants)."""
        if not self.providers or \
                not all(p.judges_nodes_before_preparing() for p in self.providers):
            return False
        runner = self._first_claimer(fused)
        return runner is not None and (not only or runner.name in only) and \
            all(self._first_claimer(n) is runner for n in nodes)

    def _first_claimer(self, node: ir.Node):
        opset = max(self.opset(node.domain), 1)
        for provider in self.providers:
            if provider.capability(node, opset)[0]:
                return provider
        return None

    def use_edgerun_domain(self) -> None:
        self.opsets.setdefault(EDGERUN_DOMAIN, 1)


def element_type(value) -> int:
    """The ONNX element type of a constant value (numpy array or HostTensor)."""
    if isinstance(value, HostTensor):
        return value.elem_type
    return ir.dtypes.code_of_numpy(value.dtype)


def tensor_of(value, name: str) -> ir.Tensor:
    """A constant value (numpy array or HostTensor) as an initializer named `name`."""
    if isinstance(value, HostTensor):
        return value.to_ir(name)
    from ..ir.tensor_numpy import numpy_to_tensor

    return numpy_to_tensor(value, name)


def _collect_names(graph: ir.Graph, names: set) -> None:
    names.update(v.name for v in graph.inputs)
    names.update(v.name for v in graph.outputs)
    names.update(graph.initializers)
    for node in graph.nodes:
        names.update(node.inputs)
        names.update(node.outputs)
        if node.name:
            names.add(node.name)
        for sub in subgraphs(node):
            _collect_names(sub, names)


def is_onnx(node: ir.Node, *op_types: str) -> bool:
    return node.domain in ONNX_DOMAINS and node.op_type in op_types


def attr_int(name: str, value: int) -> ir.Attribute:
    return ir.Attribute(name=name, type=ir.AttrType.INT, value=int(value))


def attr_float(name: str, value: float) -> ir.Attribute:
    return ir.Attribute(name=name, type=ir.AttrType.FLOAT, value=float(value))


def attr_floats(name: str, values) -> ir.Attribute:
    return ir.Attribute(name=name, type=ir.AttrType.FLOATS, value=[float(v) for v in values])


def attr_ints(name: str, values) -> ir.Attribute:
    return ir.Attribute(name=name, type=ir.AttrType.INTS, value=[int(v) for v in values])


def attr_string(name: str, value: str) -> ir.Attribute:
    return ir.Attribute(name=name, type=ir.AttrType.STRING, value=value.encode("utf-8"))


def attr_text(node: ir.Node, name: str, default: str = "") -> str:
    value = node.attr(name, default)
    return value.decode("utf-8") if isinstance(value, bytes) else value


class GraphView:
    """Producer and consumer maps of one graph, kept current by the edit methods.

    `outer` maps the constants of enclosing graphs visible in this (sub)graph to their
    tensors: `constant()` reads them like the graph's own initializers.
    """

    def __init__(self, graph: ir.Graph, ctx: PassContext, outer: Optional[dict] = None):
        self.graph = graph
        self.ctx = ctx
        self.outer = outer or {}
        self.output_names = {v.name for v in graph.outputs}
        input_names = {v.name for v in graph.inputs}
        self.overridable = input_names if ctx.inputs_override_initializers else set()
        self.input_names = input_names
        self.producer: dict = {}
        self.consumers: dict = {}      # name -> {id(node): node} of its readers, in order
        self._dead: set = set()
        self._before: dict = {}        # id(anchor) -> nodes to insert before it
        self._constants: dict = {}
        for node in graph.nodes:
            self._index(node)

    # ---- reading ---------------------------------------------------------------------------

    def live_nodes(self) -> list:
        """A snapshot of the graph's nodes; skip those `is_dead` says a rewrite removed."""
        return list(self.graph.nodes)

    def is_dead(self, node: ir.Node) -> bool:
        return id(node) in self._dead

    def readers(self, name: str) -> list:
        return list(self.consumers.get(name, {}).values())

    def only_reader(self, name: str):
        """The single node reading `name`, or None when more read it or it is a graph output."""
        readers = self.consumers.get(name)
        if not readers or len(readers) != 1 or name in self.output_names:
            return None
        return next(iter(readers.values()))

    def is_used(self, name: str) -> bool:
        return bool(self.consumers.get(name)) or name in self.output_names

    def produced_by(self, name: str, *op_types: str):
        """The ONNX-domain node of one of `op_types` producing `name`, else None."""
        node = self.producer.get(name)
        if node is not None and is_onnx(node, *op_types):
            return node
        return None

    def constant(self, name: str):
        """The value of `name` if it is a constant initializer, else None: a numpy array, or
        a HostTensor without numpy (passes that run there read it through .shape, .ndim,
        .size, scalar() and flat_values())."""
        if not name:
            return None
        value = self._constants.get(name)
        if value is not None:
            return value
        tensor = self.graph.initializers.get(name)
        if tensor is not None:
            if name in self.overridable:
                return None
        elif name in self.outer and name not in self.producer and name not in self.input_names:
            tensor = self.outer[name]
        else:
            return None
        value = self._constants[name] = self.ctx.array_of(tensor)
        return value

    def scalar(self, name: str):
        """A constant holding exactly one number, as a Python float; else None."""
        value = self.constant(name)
        if value is None or value.size != 1 or element_type(value) not in NUMBER_TYPES:
            return None
        return float(flat_values(value)[0])

    def declared_elem_type(self, name: str):
        """The element type inference found for `name` (fold_shapes' record), else the one
        the graph declares (inputs, value_info, outputs), else None."""
        inferred = self.ctx.inferred_types.get(name)
        if inferred is not None and inferred.elem_type:
            return inferred.elem_type
        for v in list(self.graph.inputs) + list(self.graph.value_info) + list(self.graph.outputs):
            if v.name == name and v.type is not None:
                return v.type.elem_type
        return None

    def elem_type_of_constant(self, name: str) -> int:
        t = self.graph.initializers.get(name)
        if t is None and self.constant(name) is not None:
            t = self.outer[name]
        return t.elem_type if t is not None else 0

    # ---- editing ---------------------------------------------------------------------------

    def add_constant(self, base: str, array) -> str:
        """A new constant initializer holding `array` (numpy or HostTensor); its name."""
        name = self.ctx.fresh_name(base)
        self.set_constant(name, array)
        return name

    def set_constant(self, name: str, array) -> None:
        """Make `name` (a value no live node produces any more) a constant initializer."""
        self.graph.initializers[name] = tensor_of(array, name)
        if isinstance(array, HostTensor) and self.ctx.has_numpy:
            self._constants.pop(name, None)       # read back as numpy, like every constant
        else:
            self._constants[name] = array

    def set_constant_tensor(self, name: str, tensor: ir.Tensor) -> None:
        """set_constant from a tensor as stored (its bytes shared, not converted): its numpy
        value is made only if a pass asks for it."""
        import dataclasses

        self.graph.initializers[name] = dataclasses.replace(tensor, name=name)
        self._constants.pop(name, None)

    def remove(self, *nodes: ir.Node) -> None:
        for node in nodes:
            if id(node) in self._dead:
                continue
            self._dead.add(id(node))
            for name in node.outputs:
                if name and self.producer.get(name) is node:
                    del self.producer[name]
            for name in set(node_reads(node)):
                self.consumers.get(name, {}).pop(id(node), None)

    def insert(self, node: ir.Node, before: ir.Node) -> ir.Node:
        """Add `node` where `before` stands in the order (before may be removed meanwhile)."""
        if not node.name:
            node.name = self.ctx.fresh_name(f"{node.op_type}_fused")
        self._before.setdefault(id(before), []).append(node)
        self._index(node)
        return node

    def replace(self, old_nodes: list, new_node: ir.Node) -> ir.Node:
        """Remove `old_nodes` and put `new_node` where the last of them stood."""
        anchor = old_nodes[-1]
        self.remove(*old_nodes)
        return self.insert(new_node, anchor)

    def rename_reads(self, old: str, new: str) -> None:
        """Every reader of `old` (in this graph and its subgraphs) reads `new` instead."""
        for node in list(self.readers(old)):
            node.inputs = [new if n == old else n for n in node.inputs]
            for sub in subgraphs(node):
                rename_outer_reads(sub, old, new)
            self.consumers.setdefault(new, {})[id(node)] = node
        self.consumers.pop(old, None)

    def reads_changed(self, node: ir.Node) -> None:
        """`node` reads more names than when indexed (its subgraph now reads new outer
        values): index the new reads."""
        self._index(node)

    def commit(self) -> None:
        """Write the node list back: removed nodes out, inserted nodes at their anchors."""
        nodes = []
        for node in self.graph.nodes:
            nodes += [n for n in self._flatten_before(node) if id(n) not in self._dead]
            if id(node) not in self._dead:
                nodes.append(node)
        self.graph.nodes = nodes
        self._before = {}

    def _flatten_before(self, anchor: ir.Node) -> list:
        out = []
        for node in self._before.get(id(anchor), []):
            out += self._flatten_before(node)
            out.append(node)
        return out

    def _index(self, node: ir.Node) -> None:
        for name in node.outputs:
            if name:
                self.producer[name] = node
        for name in set(node_reads(node)):
            self.consumers.setdefault(name, {})[id(node)] = node


def rename_outer_reads(graph: ir.Graph, old: str, new: str) -> None:
    local = {v.name for v in graph.inputs} | set(graph.initializers)
    if old in local:
        return
    for node in graph.nodes:
        node.inputs = [new if n == old else n for n in node.inputs]
        for sub in subgraphs(node):
            rename_outer_reads(sub, old, new)
        if old in node.outputs:      # shadowed from here on
            return
    for v in graph.outputs:
        if v.name == old:
            v.name = new
