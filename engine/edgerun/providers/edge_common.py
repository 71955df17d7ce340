"""What the compiling edge adapters (NNAPI, QNN) share.

- `GraphFacts`: what a platform compiler needs to know about the model before claiming a
  node and that `capability(node, opset)` alone cannot see: the type of every value and
  which values are constants (initializers, Constant nodes, and nodes whose inputs are all
  constant, folded the way onnxruntime folds them before partitioning). A provider learns
  them in `prepare_model(model)`.
- `EdgeProvider`: the provider skeleton. `capability` looks the node up in the adapter's
  table of lowering rules; `compile` returns a `LoweredPartition`, which lowers the
  partition to the platform's model form once per input-shape signature (NNAPI and QNN
  models have static shapes) and executes it on the device, or with the adapter's
  reference interpreter when the provider option {"execute": "reference"} asks for it.
- `Layouts`: ONNX is NCHW, the platforms' convolutions and pools are NHWC. Each ONNX value
  maps to a platform tensor in one layout; asking for the other inserts one transpose,
  cached, so a chain of NHWC operations pays for one transpose at each end only.
- `EdgeBuilder`: what a lowering's builder knows of the partition's ONNX values (types,
  constants, the platform tensor carrying each in each layout); each platform's builder adds
  how it makes tensors and operations.
"""
from __future__ import annotations

from typing import Optional

import functools
import warnings
from collections import Counter

import ctypes
import ctypes.util
from dataclasses import dataclass, field

import numpy as np

from ..ir import Attribute, AttrType, Graph, Model, Node, TypeInfo, dtypes
from ..ir.conv_rules import window_geometry
from ..ir.unary_ops import UNARY_OPS
from ..ir.walk import subgraphs
from ..runtime.attributes import initializer_value
from .base import ExecutionProvider

NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)
_NOT_FOLDABLE = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                 "Multinomial", "Bernoulli", "If", "Loop", "Scan", "SequenceMap"}


# ---------------------------------------------------------------- facts about the model


@dataclass
class GraphFacts:
    types: dict = field(default_factory=dict)          # value name -> ir.TypeInfo
    recipes: dict = field(default_factory=dict)        # constant name -> how to compute it
    _values: dict = field(default_factory=dict)        # constant name -> numpy array, cache

    def is_constant(self, name: str) -> bool:
        return bool(name) and name in self.recipes

    def constant(self, name: str):
        """The value of a constant (computed on first use: light models build 100s of MB of
        weights with ConstantOfShape)."""
        if name not in self._values:
            kind, what = self.recipes[name]
            if kind == "tensor":
                self._values[name] = initializer_value(what)
            elif kind == "value":
                self._values[name] = what
            else:
                self._fold(*what)
        return self._values[name]

    def _fold(self, node, opset: int) -> None:
        args = [self.constant(n) if n else None for n in node.inputs]
        result = host_evaluator()(node, opset, args)
        outs = result if isinstance(result, (tuple, list)) and len(node.outputs) > 1 else (result,)
        for name, value in zip(node.outputs, outs):
            if name:
                self._values[name] = np.asarray(value)

    def is_folded(self, node) -> bool:
        """Every output of `node` is a constant known before running."""
        outs = [o for o in node.outputs if o]
        return bool(outs) and all(o in self.recipes for o in outs)

    def type_of(self, name: str):
        return self.types.get(name)


def graph_facts(model: Model) -> GraphFacts:
    from ..shape_inference import infer_shapes

    facts = GraphFacts()
    result = infer_shapes(model)
    for message in result.warnings:          # a declared shape the model contradicts
        warnings.warn(message, RuntimeWarning, stacklevel=4)
    facts.types.update(result)
    for sub in result.subgraph_types.values():
        for name, t in sub.items():
            facts.types.setdefault(name, t)
    opsets = dict(model.opset_imports)
    _collect_constants(model.graph, opsets, facts)
    for name, items in result.values.items():
        t = result.get(name)
        if name not in facts.recipes and t is not None and t.shape is not None:
            import numpy as np

            dtype = dtypes.numpy_dtype(t.elem_type)
            facts.recipes[name] = ("value", np.array(items, dtype).reshape(t.shape))
    return facts


def _collect_constants(graph: Graph, opsets: dict, facts: GraphFacts) -> None:
    for name, t in graph.initializers.items():
        facts.recipes[name] = ("tensor", t)
    for node in graph.nodes:
        for g in subgraphs(node):
            _collect_constants(g, opsets, facts)
        if node.op_type in _NOT_FOLDABLE or node.domain not in ("", "ai.onnx"):
            continue
        if not all(facts.is_constant(n) for n in node.inputs if n):
            continue
        opset = opsets.get("", opsets.get("ai.onnx", 1))
        if not host_evaluator().runs(node, opset):
            continue
        for o in node.outputs:
            if o:
                facts.recipes[o] = ("node", (node, opset))


# ---------------------------------------------------------------- host arithmetic


@functools.cache
def host_evaluator():
    """What runs one ONNX node on host arrays (the CPU kernels, found through the provider
    registry as the session's constant folding finds them): the adapters fold constants with
    it, and the reference interpreters compute what a platform operation shares with ONNX."""
    from .registry import constant_evaluator

    evaluate = constant_evaluator()
    if evaluate is None:
        raise RuntimeError("the edge adapters compute constants and reference results with "
                           "numpy: pip install numpy")
    return evaluate


def run_onnx_op(op_type: str, inputs: list, opset: int, **attributes):
    """ONNX operator `op_type` (ai.onnx, at `opset`) on host arrays: `inputs` in order, None
    for an absent one; attributes as Python ints, floats, strings or int/float lists."""
    node = Node(op_type, [f"input{i}" if v is not None else "" for i, v in enumerate(inputs)],
                ["output"], {k: _attribute(k, v) for k, v in attributes.items()})
    return host_evaluator()(node, opset, list(inputs))


def _attribute(name: str, value) -> Attribute:
    if isinstance(value, str):
        return Attribute(name, AttrType.STRING, value.encode())
    if isinstance(value, float):
        return Attribute(name, AttrType.FLOAT, value)
    if isinstance(value, (list, tuple)):
        floats = any(isinstance(v, float) for v in value)
        return Attribute(name, AttrType.FLOATS if floats else AttrType.INTS,
                         [float(v) if floats else int(v) for v in value])
    return Attribute(name, AttrType.INT, int(value))


# ---------------------------------------------------------------- the provider skeleton


def rule_key(node) -> str:
    """The RULES key of a node: its op_type, domain-qualified outside ai.onnx."""
    if node.domain in ("", "ai.onnx"):
        return node.op_type
    return f"{node.domain}:{node.op_type}"


def find_library(names: list) -> str:
    """The first of `names` the dynamic loader can open, or ""."""
    for name in names:
        path = ctypes.util.find_library(name.replace("lib", "", 1).split(".so")[0]) or name
        try:
            ctypes.CDLL(path)
            return path
        except OSError:
            continue
    return ""


@dataclass
class Rule:
    """How one ONNX operator lowers: `check(view, node, opset)` returns "" or why not;
    `lower(builder, node)` emits the platform operations. Inputs at the `params` positions
    must be constants: they become the platform's static parameters, not tensors."""
    check: object
    lower: object
    params: tuple = ()


# ONNX operator -> the lowering family that runs it on the edge adapters. A platform's lowering
# module defines `_<family>_lower(builder, node)` for each family it runs, and
# `_<family>_check(view, node, opset)` where it refuses some nodes (see rule_table).
EDGE_FAMILIES = {
    "Conv": "conv", "LRN": "lrn", "BatchNormalization": "batch_norm",
    **dict.fromkeys(("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"), "pool"),
    "Clip": "clip", "HardSigmoid": "hard_sigmoid", "Reciprocal": "reciprocal",
    "HardSwish": "hard_swish", "com.edgerun:HardSwish": "hard_swish",
    "Gemm": "gemm", "MatMul": "matmul", "Softmax": "softmax", "ReduceMean": "mean",
    **dict.fromkeys(("Reshape", "Flatten", "Squeeze", "Unsqueeze"), "reshape"),
    "Concat": "concat", "Transpose": "transpose", "Pad": "pad", "Slice": "slice",
    "Identity": "identity", "Dropout": "identity",
    **dict.fromkeys(("com.edgerun:FusedConv", "com.edgerun:FusedGemm",
                     "com.edgerun:FusedMatMul"), "fused"),
}

# The inputs the platforms take as static parameters (baked into the model): a node whose
# such input is not a constant stays off the adapter.
CONSTANT_INPUTS = {
    "Conv": (1, 2), "com.edgerun:FusedConv": (1, 2), "Gemm": (1, 2),
    "com.edgerun:FusedGemm": (1, 2), "BatchNormalization": (1, 2, 3, 4), "Clip": (1, 2),
    "Reshape": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Dropout": (1, 2),
    "Pad": (1, 2, 3), "Slice": (1, 2, 3, 4),
    **dict.fromkeys(("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"), (1,)),
}


def rule_table(lowerings: dict, families: dict) -> dict:
    """A platform's RULES from its lowering module's functions (`lowerings`: its globals()):
    every operator of `families` (EDGE_FAMILIES with the platform's own unary, binary and
    reduce operators) whose family the module lowers. Identity/Dropout and the fused
    operators are lowered here, the same for every platform."""
    shared = {"_identity_check": identity_check, "_identity_lower": identity_lower}
    rules: dict = {}
    for op, family in families.items():
        if family == "fused":
            check, lower = _fused_check(rules), _fused_lower(rules)
        else:
            lower = lowerings.get(f"_{family}_lower") or shared.get(f"_{family}_lower")
            if lower is None:
                continue                    # the platform does not lower this family
            check = lowerings.get(f"_{family}_check") or \
                shared.get(f"_{family}_check") or _takes_any
        rules[op] = Rule(check, lower, CONSTANT_INPUTS.get(op, ()))
    return rules


def _takes_any(view, node, opset) -> str:
    return ""


def _fused_check(rules: dict):
    """A Fused* node lowers when its base node and its activation both do."""
    def check(view, node, opset) -> str:
        base, activation, tmp = split_fused(node)
        rule = rules.get(activation.op_type)
        if rule is None:
            return (f"fused activation {activation.op_type}: "
                    f"{view.provider.platform} has no lowering for it")
        view.facts.types.setdefault(tmp, view.type(node.outputs[0]))
        return rules[base.op_type].check(view, base, opset) or \
            rule.check(view, activation, opset)
    return check


def _fused_lower(rules: dict):
    def lower(b, node) -> None:
        base, activation, tmp = split_fused(node)
        b.types[tmp] = b.types[node.outputs[0]]
        b.readers[tmp] = 1
        rules[base.op_type].lower(b, base)
        rules[activation.op_type].lower(b, activation)
    return lower


class NodeView:
    """What a capability check sees of a node: its values' types and constants."""

    def __init__(self, facts: GraphFacts, provider):
        self.facts = facts
        self.provider = provider

    def type(self, name: str):
        return self.facts.type_of(name)

    def shape(self, name: str):
        t = self.facts.type_of(name)
        return None if t is None or t.kind != "tensor" else t.shape

    def rank(self, name: str):
        s = self.shape(name)
        return None if s is None else len(s)

    def is_constant(self, name: str) -> bool:
        return self.facts.is_constant(name)

    def constant(self, name: str):
        return self.facts.constant(name)


class EdgeProvider(ExecutionProvider):
    """A compiling provider whose partitions lower to a platform model (see module doc)."""
    compiles = True
    platform = ""          # "NNAPI", "QNN": in messages
    RULES: dict = {}       # ONNX op_type -> Rule
    tensor_label = ""      # the platform in type messages ("QNN HTP")
    element_types: frozenset = frozenset()   # element type codes its tensors may have
    max_rank = 4

    def __init__(self, options: Optional[dict] = None):
        super().__init__(options)
        execute = self.options.get("execute", "device")
        if execute not in ("device", "reference"):
            raise ValueError(f"{self.name} provider option 'execute' must be 'device' or "
                             f"'reference', got {execute!r}")
        self.execute = execute
        if execute == "device":
            ok, why = self.device_available()
            if not ok:
                raise RuntimeError(f"{self.name}: {why}; pass provider option "
                                   f"{{'execute': 'reference'}} to run the lowered model with "
                                   f"the reference interpreter")
        self.facts: Optional[GraphFacts] = None
        self.partitions: list = []       # every LoweredPartition compiled, in order

    @classmethod
    def available_with(cls, options: dict) -> tuple:
        if (options or {}).get("execute") == "reference":
            return True, ""
        return cls.available()

    def device_available(self) -> tuple:
        """available() for this instance's options (a QNN backend, say)."""
        return self.available()

    def prepare_model(self, model: Model, ahead: tuple = ()) -> None:
        """Learn the types and constants of `model` (called before partitioning)."""
        self.facts = graph_facts(model)

    # ---- capability -------------------------------------------------------------------

    def judges_nodes_before_preparing(self) -> bool:
        return self.facts is not None

    def capability(self, node, opset):
        if self.facts is None:
            return False, (f"{self.platform} needs the model's value types and constants: "
                           f"call prepare_model(model) before partitioning")
        view = NodeView(self.facts, self)
        if self.facts.is_folded(node):
            why = self.check_constant_outputs(view, node)
            return (not why), (why or "")
        rule = self.RULES.get(rule_key(node))
        if rule is None:
            return False, f"{self.platform} has no lowering for {rule_key(node)}"
        why = self.check_common(view, node, rule) or rule.check(view, node, opset)
        return (not why), (why or "")

    def check_common(self, view: NodeView, node, rule: Rule) -> str:
        """Constant parameters are constants; every tensor input and output has a type the
        target supports."""
        for i, name in enumerate(node.inputs):
            if not name:
                continue
            if i in rule.params:
                if not view.is_constant(name):
                    return (f"{node.op_type} input {i} ('{name}') must be a constant: "
                            f"{self.platform} takes it as a static parameter")
                continue
            why = self.tensor_type_problem(view.type(name), name)
            if why:
                return why
        for name in node.outputs:
            why = name and self.tensor_type_problem(view.type(name), name)
            if why:
                return why
        return ""

    def check_constant_outputs(self, view: NodeView, node) -> str:
        """A node folded to constants lowers to constant tensors of a supported type."""
        for o in node.outputs:
            t = view.type(o)
            why = self.tensor_type_problem(t, o) if t is not None else f"type of '{o}' unknown"
            if why:
                return f"constant {why}"
        return ""

    def tensor_type_problem(self, t: TypeInfo, name: str) -> str:
        """Why value `name` of type `t` cannot be a platform tensor, or "": unknown, an element
        type outside `element_types`, a rank past `max_rank`, or the platform's own limits
        (`element_type_problem`)."""
        label, supported, max_rank = self.tensor_label, self.element_types, self.max_rank
        if t is None or t.kind != "tensor":
            return f"type of '{name}' is unknown (needed to build a static {label} model)"
        if t.elem_type not in supported:
            kind = dtypes.BY_CODE[t.elem_type].name if t.elem_type in dtypes.BY_CODE else "?"
            have = ", ".join(dtypes.BY_CODE[c].name.lower() for c in supported)
            return f"'{name}' is {kind.lower()}; {label} tensors here are {have}"
        if t.shape is None:
            return f"rank of '{name}' is unknown"
        if len(t.shape) > max_rank:
            return f"'{name}' has rank {len(t.shape)}; {label} supports rank <= {max_rank}"
        return self.element_type_problem(t.elem_type, name)

    def element_type_problem(self, elem_type: int, name: str) -> str:
        """A supported element type the platform still cannot take here (its options)."""
        return ""

    # ---- compile / execute -------------------------------------------------------------

    def compile(self, graph: Graph, opsets: dict):
        part = LoweredPartition(self, graph, opsets)
        self.partitions.append(part)
        return part

    def lower(self, graph: Graph, input_types: dict, opsets: dict) -> object:
        """The platform program for `graph` with these input types."""
        types = partition_types(graph, input_types, opsets, self.constant_or_none)
        builder = self.builder(graph, types)
        builder.opset = opsets.get("", opsets.get("ai.onnx", 1))
        builder.lower_graph(graph, input_types, self.RULES)
        return builder.program()

    def builder(self, graph: Graph, types: dict) -> "EdgeBuilder":
        """The platform's builder for one partition, its values typed by `types` (it records
        the provider's options in the program)."""
        raise NotImplementedError

    def constant_or_none(self, name: str):
        """The value of `name` where the model makes it a constant, else None (a lowering's
        `constants`)."""
        facts = self.facts
        return facts.constant(name) if facts is not None and facts.is_constant(name) else None

    def run_program(self, program, inputs: list) -> list:
        if self.execute == "reference":
            return self.interpret(program, inputs)
        return self.run_on_device(program, inputs)

    def interpret(self, program, inputs: list) -> list:
        raise NotImplementedError

    def run_on_device(self, program, inputs: list) -> list:
        raise NotImplementedError


class LoweredPartition:
    """One claimed partition: lowered per input-shape signature, then executed."""

    def __init__(self, provider: EdgeProvider, graph: Graph, opsets: dict):
        self.provider = provider
        self.graph = graph
        self.opsets = opsets
        self.input_names = [v.name for v in graph.inputs]
        self.programs: dict = {}      # ((shape, dtype), ...) -> platform program

    def __call__(self, *inputs):
        import numpy as np

        arrays = [np.asarray(a) for a in inputs]
        key = tuple((a.shape, a.dtype.str) for a in arrays)
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = self.lower(arrays)
        return tuple(self.provider.run_program(program, arrays))

    def lower(self, arrays: list):
        types = {}
        for name, a in zip(self.input_names, arrays):
            code = dtypes.BY_NUMPY[a.dtype.name].code
            types[name] = TypeInfo(kind="tensor", elem_type=code, shape=tuple(a.shape))
        return self.provider.lower(self.graph, types, self.opsets)

    @property
    def node_count(self) -> int:
        return len(self.graph.nodes)


def partition_types(graph: Graph, input_types: dict, opsets: dict, constants=None) -> dict:
    """Concrete types of every value of a partition given its inputs' types. Inputs that
    are constants (`constants(name)` not None) are given as values, so shape arithmetic
    over them (Reshape's shape, Slice's ends) is known."""
    from ..ir.tensor_numpy import numpy_to_tensor
    from ..shape_inference import infer_shapes

    initializers = dict(graph.initializers)
    inputs = []
    for v in graph.inputs:
        value = constants(v.name) if constants else None
        if value is None:
            inputs.append(v)
        else:
            initializers[v.name] = numpy_to_tensor(value, v.name)
    view = Graph(name=graph.name, nodes=graph.nodes, inputs=inputs, outputs=graph.outputs,
                 initializers=initializers)
    return dict(infer_shapes(view, {v.name: input_types[v.name] for v in inputs}, opsets))


# ---------------------------------------------------------------- shared lowering helpers


def conv_pads(in_hw, kernel, strides, dilations, pads, auto_pad, ceil_mode=0):
    """(top, bottom, left, right) explicit padding and output size of a 2-D window, with
    ceil_mode folded into extra bottom/right padding (platforms have floor rounding only)."""
    g = window_geometry(in_hw, kernel, strides, dilations, pads, auto_pad, ceil_mode)
    ends = []
    for i in range(2):
        span = (g.kernel[i] - 1) * g.dilations[i] + 1
        needed = (g.out_shape[i] - 1) * g.strides[i] + span - in_hw[i] - g.pads_begin[i]
        ends.append(max(needed, 0))
    return (g.pads_begin[0], ends[0], g.pads_begin[1], ends[1]), tuple(g.out_shape)


def ints(values, default=None) -> list:
    return [int(v) for v in values] if values else list(default or [])


def attr_str(node, name: str, default: str) -> str:
    v = node.attr(name, default)
    return v.decode() if isinstance(v, bytes) else v


class Layouts:
    """ONNX value name -> {layout: platform tensor}, adding transposes on demand.

    `transpose(src, perm, shape) -> tensor` is the adapter's way to emit one."""

    def __init__(self, transpose):
        self.transpose = transpose
        self.tensors: dict = {}      # name -> {"nchw": t, "nhwc": t}
        self.shapes: dict = {}       # name -> ONNX (NCHW) shape

    def set(self, name: str, tensor, layout: str, shape) -> None:
        self.tensors[name] = {layout: tensor}
        self.shapes[name] = tuple(shape)

    def alias(self, name: str, source: str) -> None:
        self.tensors[name] = self.tensors[source]
        self.shapes[name] = self.shapes[source]

    def has(self, name: str, layout: str) -> bool:
        return layout in self.tensors.get(name, {})

    def get(self, name: str, layout: str = "nchw"):
        forms = self.tensors[name]
        if layout in forms:
            return forms[layout]
        shape = self.shapes[name]
        if layout == "nhwc":
            nhwc = tuple(shape[i] for i in NCHW_TO_NHWC)
            forms["nhwc"] = self.transpose(forms["nchw"], NCHW_TO_NHWC, nhwc)
        else:
            forms["nchw"] = self.transpose(forms["nhwc"], NHWC_TO_NCHW, shape)
        return forms[layout]

    def preferred(self, name: str) -> str:
        """The layout `name` already exists in, NHWC first."""
        return "nhwc" if "nhwc" in self.tensors[name] else "nchw"


def device_array(array) -> np.ndarray:
    """A constant as the platforms take it: contiguous, 64-bit ints and floats narrowed to
    32 bits (neither NNAPI nor QNN has 64-bit tensors)."""
    array = np.ascontiguousarray(array)
    if array.dtype == np.int64:
        return array.astype(np.int32)
    if array.dtype == np.float64:
        return array.astype(np.float32)
    return array


class EdgeBuilder:
    """A lowering's view of the partition's ONNX values, for NNAPI's and QNN's builders.

    A platform builder supplies `constant_tensor(array, name)` (a constant operand or static
    tensor), `numpy_dtype_of(tensor)`, `_transpose(src, perm, out_dims)`,
    `reshape_tensor(tensor, dims, name)`, `input_tensor(name, shape)`, `mark_output(tensor)`
    and `program()`, and may name its tensors after the ONNX values they carry
    (`name_tensor`)."""
    platform = ""

    def __init__(self, types: dict, constants):
        self.types = types                       # value name -> TypeInfo (concrete)
        self.constants = constants               # callable name -> array or None
        self.opset = 1                           # the main domain's, set by the provider
        self.layouts = Layouts(self._transpose)
        self.readers: dict = {}                  # value name -> how many nodes/outputs read it
        self.inputs: list = []        # (ONNX name, platform tensor, position in the partition)
        self.outputs: list = []       # (ONNX name, platform tensor)

    def lower_graph(self, graph: Graph, input_types: dict, rules: dict) -> None:
        """Lower the partition: its inputs (a constant computed outside is baked in instead),
        every node not folded to constants by its rule, then its outputs."""
        for node in graph.nodes:
            for name in node.inputs:
                self.readers[name] = self.readers.get(name, 0) + 1
        for v in graph.outputs:
            self.readers[v.name] = self.readers.get(v.name, 0) + 1
        for position, v in enumerate(graph.inputs):
            if self.const(v.name) is None:
                shape = input_types[v.name].shape
                tensor = self.input_tensor(v.name, shape)
                self.layouts.set(v.name, tensor, "nchw", shape)
                self.inputs.append((v.name, tensor, position))
        for node in graph.nodes:
            if not all(self.const(o) is not None for o in node.outputs if o):
                rules[rule_key(node)].lower(self, node)
        for v in graph.outputs:
            tensor = self.get(v.name, "nchw")
            self.mark_output(tensor)
            self.outputs.append((v.name, tensor))

    def shape(self, name: str) -> tuple:
        return tuple(self.types[name].shape)

    def dtype(self, name: str):
        return dtypes.numpy_dtype(self.types[name].elem_type)

    def const(self, name: str):
        return self.constants(name) if name else None

    def get(self, name: str, layout: str = "nchw"):
        """The platform tensor carrying ONNX value `name` in `layout` (NHWC only for rank 4)."""
        if name not in self.layouts.tensors:
            value = self.const(name)
            if value is None:
                raise KeyError(f"value '{name}' reaches the {self.platform} partition from "
                               "nowhere")
            self.layouts.set(name, self.constant_tensor(value, name), "nchw", np.shape(value))
        return self.layouts.get(name, layout)

    def define(self, name: str, tensor, layout: str, onnx_shape=None) -> None:
        """ONNX value `name` is now `tensor`, in `layout`."""
        self.name_tensor(tensor, name)
        if name not in self.types:          # a value the lowering made up (1-D conv as 2-D)
            code = dtypes.code_of_numpy(self.numpy_dtype_of(tensor))
            self.types[name] = TypeInfo(kind="tensor", elem_type=code, shape=tuple(onnx_shape))
        self.layouts.set(name, tensor, layout, onnx_shape or self.shape(name))

    def get_broadcast(self, name: str, layout: str, rank: int):
        """An operand of a broadcasting operation in `layout`: a constant not yet lowered is
        padded to `rank` and, for NHWC, transposed here instead of by the device."""
        value = self.const(name)
        if layout == "nhwc" and value is not None and name not in self.layouts.tensors:
            value = np.asarray(value).reshape((1,) * (rank - np.ndim(value)) + np.shape(value))
            return self.constant_tensor(np.transpose(value, NCHW_TO_NHWC), name)
        return self.get(name, layout)

    def concat_inputs(self, node) -> tuple:
        """(inputs, layout, axis, dims) of a Concat: NHWC when every computed input is
        already NHWC, the axis and output dims in that layout."""
        shape = self.shape(node.outputs[0])
        axis = node.attr("axis")
        axis = axis + len(shape) if axis < 0 else axis
        live = [n for n in node.inputs if self.const(n) is None]
        nhwc = len(shape) == 4 and live and all(self.layouts.has(n, "nhwc") for n in live)
        layout = "nhwc" if nhwc else "nchw"
        inputs = [self.get_broadcast(n, layout, len(shape)) for n in node.inputs]
        if nhwc:
            return inputs, layout, NCHW_TO_NHWC.index(axis), tuple(shape[i] for i in NCHW_TO_NHWC)
        return inputs, layout, axis, shape

    def softmax_input(self, node) -> tuple:
        """(tensor, axis, dims) a Softmax computes over. Before opset 13 Softmax normalizes
        the flattened tail from its axis: a 2-D softmax over axis 1 of the reshaped input."""
        x = node.inputs[0]
        shape = self.shape(x)
        axis = softmax_axis(node, self.opset, len(shape))
        if self.opset < 13 and axis != len(shape) - 1:
            dims = (int(np.prod(shape[:axis])), int(np.prod(shape[axis:])))
            return self.reshape_tensor(self.get(x), dims, x), 1, dims
        return self.get(x), axis, shape

    def define_softmax(self, y: str, out, dims) -> None:
        """Softmax output `y` is `out`, computed over `dims` (softmax_input)."""
        if tuple(dims) != self.shape(y):
            out = self.reshape_tensor(out, self.shape(y), y)
        self.define(y, out, "nchw")

    def name_tensor(self, tensor, name: str) -> None:
        pass

    def reshape_tensor(self, tensor, dims, name: str):
        """`tensor`, carrying ONNX value `name`'s elements, viewed with `dims`."""
        raise NotImplementedError

    def constant_tensor(self, array, name: str):
        raise NotImplementedError

    def numpy_dtype_of(self, tensor):
        raise NotImplementedError

    def _transpose(self, src, perm, out_dims):
        raise NotImplementedError

    def input_tensor(self, name: str, shape):
        """A new platform tensor the program takes as input `name`."""
        raise NotImplementedError

    def mark_output(self, tensor) -> None:
        """`tensor` is one of the program's outputs."""
        raise NotImplementedError

    def program(self):
        """The platform program built, its inputs and outputs recorded."""
        raise NotImplementedError


def count_types(items) -> dict:
    """How many platform operations of each type a lowered model holds."""
    return dict(Counter(item.type for item in items))


def bind_inputs(values, keys, inputs: list, dims_of, describe) -> None:
    """A reference interpreter's inputs into `values` (operand -> array), each checked
    against the dims the program declares: `dims_of(key)`, `describe(key)` naming it."""
    for key, array in zip(keys, inputs):
        want = tuple(dims_of(key))
        if tuple(array.shape) != want:
            raise ValueError(f"{describe(key)} has dimensions {list(want)}, got "
                             f"{list(array.shape)}")
        values[key] = array


def identity_check(view, node, opset) -> str:
    """Identity and Dropout (inference): the input passes through; a mask output cannot."""
    if len([o for o in node.outputs if o]) > 1:
        return f"Dropout's mask output has no {view.provider.platform} equivalent"
    return ""


def identity_lower(b: EdgeBuilder, node) -> None:
    b.get(node.inputs[0])
    b.layouts.alias(node.outputs[0], node.inputs[0])


def clip_bounds(view_or_b, node, opset):
    """Clip's (min, max), None where absent: attributes before opset 11 (and on a fused
    node's activation, split_fused), constant inputs after. `view_or_b` is a NodeView
    (capability) or a lowering builder."""
    if opset < 11 or "min" in node.attributes or "max" in node.attributes:
        return node.attr("min", None), node.attr("max", None)
    bounds = []
    for i in (1, 2):
        name = node.inputs[i] if len(node.inputs) > i else ""
        if not name:
            bounds.append(None)
            continue
        const = view_or_b.constant(name) if hasattr(view_or_b, "constant") else \
            view_or_b.const(name)
        bounds.append(None if const is None else float(np.asarray(const).reshape(-1)[0]))
    return tuple(bounds)


def reduce_axes(node, opset, view_or_b, rank: int):
    """A Reduce*'s axes, sorted and non-negative (attribute, or constant input from 13/18)."""
    if len(node.inputs) > 1 and node.inputs[1]:
        get = view_or_b.constant if hasattr(view_or_b, "constant") else view_or_b.const
        axes = [int(a) for a in np.asarray(get(node.inputs[1])).reshape(-1)]
    else:
        axes = ints(node.attr("axes"), [])
    if not axes:
        axes = list(range(rank))
    return sorted(a + rank if a < 0 else a for a in axes)


def softmax_axis(node, opset: int, rank: int) -> int:
    axis = node.attr("axis", -1 if opset >= 13 else 1)
    return axis + rank if axis < 0 else axis


def split_fused(node):
    """A com.edgerun Fused* node as (base node writing `tmp`, activation node reading `tmp`,
    tmp): the adapter lowers the base, then the activation. A fused Clip's bounds become the
    activation node's min/max attributes (`clip_bounds` reads them at any opset)."""
    base_type = node.op_type[len("Fused"):]
    attrs = {k: a for k, a in node.attributes.items()
             if k not in ("activation", "activation_params")}
    tmp = node.outputs[0] + "/before_activation"
    base = Node(op_type=base_type, inputs=list(node.inputs), outputs=[tmp], attributes=attrs,
                name=node.name)
    act = attr_str(node, "activation", "Relu")
    params = [float(p) for p in node.attr("activation_params", None) or []]
    names = ("min", "max") if act == "Clip" else \
        tuple(n for n, _ in UNARY_OPS[act].params) if act in UNARY_OPS else ()
    activation = Node(op_type=act, inputs=[tmp], outputs=[node.outputs[0]], name=node.name,
                      attributes={n: Attribute(n, AttrType.FLOAT, v)
                                  for n, v in zip(names, params)})
    return base, activation, tmp