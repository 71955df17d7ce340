"""Lowering of one partition (an ir.Graph) to a Core ML ML Program, with coremltools' MIL
builder.

A partition is lowered for concrete input shapes and dtypes (ML Programs want static or
bounded shapes; edgerun builds one program per input signature). The MIL builder infers
the type and shape of every variable as ops are added, and computes the value of every op
whose inputs are all constant, so shape arithmetic (Shape -> Gather -> Concat -> Reshape)
folds away while lowering.

Each ONNX operator lowers through one function registered with `@lowers`, which also
records the MIL ops it emits and an attribute check used by `capability` (one place per
operator). A lowering function gets a `LoweringContext` and the node and returns the MIL
variables of the node's outputs. Whatever an ML Program cannot hold (a dtype other than
fp32/fp16/int32/bool, rank > 5, a non-constant shape) raises `LoweringError` naming the
node and the value.

coremltools is imported only when a program is built: capability checks work without it.
"""
from __future__ import annotations

from typing import Optional

import re
from dataclasses import dataclass, field

import numpy as np

from ...ir import Graph, Node
from ...runtime.attributes import attribute_value, initializer_value

MAX_RANK = 5
# ONNX element dtype -> the MIL dtype holding it (int64 values travel as int32, as
# coremltools' own ONNX/PyTorch converters do)
MIL_DTYPE = {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16",
             np.dtype(np.int32): "int32", np.dtype(np.int64): "int32",
             np.dtype(np.bool_): "bool"}
NUMPY_OF_MIL = {"fp32": np.float32, "fp16": np.float16, "int32": np.int32, "bool": np.bool_}
DEPLOYMENT_TARGETS = ("iOS15", "iOS16", "iOS17", "iOS18")


class LoweringError(Exception):
    """A claimed node cannot be expressed in an ML Program for these shapes and dtypes."""


@dataclass
class Lowering:
    op_type: str
    domain: str
    fn: object                    # fn(ctx, node) -> list of MIL vars, one per output
    mil_ops: tuple                # the MIL ops it emits (documentation, capability table)
    check: object = None          # check(node, opset) -> "" or why the node is refused
    since: int = 1                # lowest opset of the domain it handles


LOWERINGS: dict = {}              # (domain, op_type) -> Lowering


def lowers(op_type: str, mil: tuple, domain: str = "", check=None, since: int = 1):
    """Register a lowering function for `domain::op_type`."""
    def register(fn):
        LOWERINGS[(domain, op_type)] = Lowering(op_type, domain, fn, tuple(mil), check, since)
        return fn
    return register


def attr(node: Node, name: str, default=None):
    """A node attribute as a kernel would see it (strings as str, tensors as numpy)."""
    a = node.attributes.get(name)
    return default if a is None else attribute_value(a)


@dataclass
class MilPartition:
    """A lowered partition: the MIL program and how host values map onto it."""
    program: object                      # coremltools.converters.mil.mil.Program
    input_names: dict                    # ONNX input name -> MIL input name
    output_names: dict                   # ONNX output name -> MIL output name
    input_dtypes: dict                   # ONNX input name -> numpy dtype the program takes
    output_dtypes: dict                  # ONNX output name -> numpy dtype ONNX declares
    target: str = "iOS15"
    mil_op_counts: dict = field(default_factory=dict)


class _Builder:
    """coremltools' MIL Builder, taking name=None as "let MIL name it"."""

    def __init__(self, mb):
        self._mb = mb

    def __getattr__(self, op: str):
        build = getattr(self._mb, op)

        def call(**kwargs):
            if kwargs.get("name", "") is None:
                del kwargs["name"]
            return build(**kwargs)
        return call


class LoweringContext:
    """What lowering functions see: MIL builder, values by ONNX name, constants."""

    def __init__(self, mb, types, graph: Graph, opsets: dict):
        self.mb = _Builder(mb)
        self.types = types
        self.graph = graph
        self.opsets = opsets
        self.vars: dict = {}            # ONNX name -> MIL Var
        self.consts: dict = {}          # ONNX name -> numpy value (initializers, folded)
        self.onnx_dtypes: dict = {}     # ONNX name -> numpy dtype the ONNX value has
        self.node: Optional[Node] = None
        self.opset = 0                  # opset of the node being lowered, in its domain

    # ---- reading inputs ----------------------------------------------------------------

    def const(self, name: str):
        """The value of input `name` when known while lowering, else None."""
        if not name:
            return None
        if name in self.consts:
            return self.consts[name]
        var = self.vars.get(name)
        if var is not None and var.val is not None and not _is_symbolic(var.val):
            return np.asarray(var.val)
        return None

    def require_const(self, name: str, what: str):
        value = self.const(name)
        if value is None:
            raise LoweringError(f"{self.where()}: input '{name}' ({what}) must be a constant "
                                f"for CoreML; it is computed at run time")
        return value

    def var(self, name: str):
        """The MIL variable of input `name` (constants become MIL const ops once)."""
        if name in self.vars:
            return self.vars[name]
        if name in self.consts:
            value = self.consts[name]
            dtype = MIL_DTYPE.get(value.dtype)
            if dtype is None:
                raise LoweringError(f"{self.where()}: constant '{name}' has dtype {value.dtype}; "
                                    f"ML Programs hold float32, float16, int32 or bool")
            self.vars[name] = self.mb.const(val=value.astype(NUMPY_OF_MIL[dtype]),
                                            name=self.fresh(name))
            return self.vars[name]
        raise LoweringError(f"{self.where()}: input '{name}' is not produced before it is read")

    def shape(self, name: str) -> tuple:
        value = self.const(name)
        if value is not None:
            return tuple(value.shape)
        return tuple(int(d) for d in self.var(name).shape)

    def rank(self, name: str) -> int:
        return len(self.shape(name))

    def mil_dtype(self, name: str) -> str:
        value = self.const(name)
        if value is not None:
            return MIL_DTYPE.get(value.dtype, str(value.dtype))
        return self.types.builtin_to_string(self.var(name).dtype)

    def numpy_dtype(self, name: str):
        return NUMPY_OF_MIL[self.mil_dtype(name)]

    def scalar(self, value, like: str):
        """A constant of the MIL dtype of input `like`."""
        return np.asarray(value, dtype=self.numpy_dtype(like))

    # ---- naming --------------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        """A MIL-safe name, unique in the program."""
        name = mil_name(base)
        self._used: set = getattr(self, "_used", set())
        candidate, k = name, 1
        while candidate in self._used:
            candidate, k = f"{name}_{k}", k + 1
        self._used.add(candidate)
        return candidate

    def out_name(self, index: int = 0) -> str:
        """The MIL name for output `index` of the node being lowered."""
        node = self.node
        assert node is not None, "out_name outside a node's lowering"
        return self.fresh(node.outputs[index] or f"{node.op_type}_unused")

    def where(self) -> str:
        n = self.node
        if n is None:
            return "partition"
        return f"node '{n.name or n.outputs[0]}' ({n.domain + '::' if n.domain else ''}{n.op_type})"

    def error(self, message: str) -> LoweringError:
        return LoweringError(f"{self.where()}: {message}")


def mil_name(name: str) -> str:
    """ONNX names may hold '/', ':', '.'...; MIL names are identifiers."""
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return safe if re.match(r"[A-Za-z_]", safe) else f"v_{safe}"


def _is_symbolic(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == object


def _import_mil():
    try:
        import coremltools as ct
        from coremltools.converters.mil import Builder as mb
        from coremltools.converters.mil.mil import Function, Program, types
    except ImportError as e:
        raise LoweringError(f"lowering to CoreML needs coremltools (pip install "
                            f"coremltools==9.0): {e}") from e
    return ct, mb, Function, Program, types


def lower_partition(graph: Graph, opsets: dict, input_specs: dict, target: str = "iOS15"
                    ) -> MilPartition:
    """Lower `graph` for inputs `input_specs` (ONNX name -> (shape, numpy dtype))."""
    from . import ops  # noqa: F401  (registers every lowering)

    ct, mb, Function, Program, types = _import_mil()
    if target not in DEPLOYMENT_TARGETS:
        raise LoweringError(f"unknown minimum deployment target '{target}'; known: "
                            f"{', '.join(DEPLOYMENT_TARGETS)}")
    opset_version = getattr(ct.target, target)
    placeholders, input_names, input_dtypes = {}, {}, {}
    for v in graph.inputs:
        shape, dtype = input_specs[v.name]
        dtype = np.dtype(dtype)
        mil_dtype = MIL_DTYPE.get(dtype)
        if mil_dtype is None:
            raise LoweringError(f"partition input '{v.name}' has dtype {dtype}; ML Programs "
                                f"take float32, float16, int32/int64 (as int32) or bool")
        if len(shape) > MAX_RANK or len(shape) == 0:
            raise LoweringError(f"partition input '{v.name}' has rank {len(shape)}; ML Program "
                                f"inputs have rank 1 to {MAX_RANK}")
        name = mil_name(v.name)
        input_names[v.name] = name
        input_dtypes[v.name] = np.dtype(NUMPY_OF_MIL[mil_dtype])
        placeholders[name] = mb.placeholder(shape=tuple(int(d) for d in shape),
                                            dtype=types.string_to_builtin(mil_dtype))
    with Function(placeholders, opset_version=opset_version) as func:
        ctx = LoweringContext(mb, types, graph, opsets)
        ctx._used = set(placeholders)
        for v in graph.inputs:
            ctx.vars[v.name] = func.inputs[input_names[v.name]]
            ctx.onnx_dtypes[v.name] = np.dtype(input_specs[v.name][1])
        for name, tensor in graph.initializers.items():
            ctx.consts[name] = initializer_value(tensor)
            ctx.onnx_dtypes[name] = ctx.consts[name].dtype
        for node in graph.nodes:
            _lower_node(ctx, node)
        outputs: list = []
        output_names: dict = {}
        output_dtypes: dict = {}
        for v in graph.outputs:
            var = _output_var(ctx, v.name, outputs)
            outputs.append(var)
            output_names[v.name] = var.name
            output_dtypes[v.name] = ctx.onnx_dtypes[v.name]
        func.set_outputs(outputs)
    program = Program()
    program.add_function("main", func)
    counts: dict = {}
    for op in func.operations:
        counts[op.op_type] = counts.get(op.op_type, 0) + 1
    return MilPartition(program, input_names, output_names, input_dtypes, output_dtypes,
                        target, counts)


def _lower_node(ctx: LoweringContext, node: Node) -> None:
    ctx.node = node
    domain = "" if node.domain == "ai.onnx" else node.domain
    ctx.opset = ctx.opsets.get(domain, 1)
    entry = LOWERINGS.get((domain, node.op_type))
    if entry is None:
        raise ctx.error("no CoreML lowering (capability should have refused it)")
    try:
        results = entry.fn(ctx, node)
    except LoweringError:
        raise
    except Exception as e:   # noqa: BLE001 - coremltools' type checks: name the node
        raise ctx.error(f"MIL rejected the lowering: {type(e).__name__}: {e}") from e
    for name, result in zip(node.outputs, results):
        if not name or result is None:
            continue
        if isinstance(result, np.ndarray):
            ctx.consts[name] = result
            ctx.onnx_dtypes.setdefault(name, result.dtype)
            continue
        rank = len(result.shape)
        if rank > MAX_RANK:
            raise ctx.error(f"output '{name}' has rank {rank}; ML Programs allow at most "
                            f"{MAX_RANK}")
        ctx.vars[name] = result
        ctx.onnx_dtypes.setdefault(name, _default_onnx_dtype(ctx, node, result))


def _default_onnx_dtype(ctx: LoweringContext, node: Node, var):
    """The ONNX dtype of an output: that of an input with the same MIL dtype (int64 stays
    int64), else the natural one; lowerings set it explicitly where ONNX says otherwise."""
    mil = ctx.types.builtin_to_string(var.dtype)
    for name in node.inputs:
        if name and name in ctx.onnx_dtypes and MIL_DTYPE.get(ctx.onnx_dtypes[name]) == mil:
            return ctx.onnx_dtypes[name]
    return np.dtype(np.int64 if mil == "int32" else NUMPY_OF_MIL[mil])


def _output_var(ctx: LoweringContext, name: str, taken: list):
    """The MIL var of partition output `name`: a fresh identity where the value is a
    constant, a program input, or already another output (outputs are distinct ops)."""
    mb = ctx.mb
    ctx.node = None
    if name not in ctx.vars:
        value = ctx.const(name)
        if value is None:
            raise LoweringError(f"partition output '{name}' is not produced by the partition")
        return mb.identity(x=ctx.var(name), name=ctx.fresh(name))
    var = ctx.vars[name]
    if var.op is None or any(var is t for t in taken) or var.op.op_type == "const":
        return mb.identity(x=var, name=ctx.fresh(name))
    return var
