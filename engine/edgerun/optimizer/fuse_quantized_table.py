"""An elementwise chain between a DequantizeLinear of 8-bit values and a QuantizeLinear back
to 8 bits becomes a com.edgerun LookupTable: the chain's output for each of the 256 input
codes, computed now by the chain's own nodes, read per element (one byte in, one byte out)
instead of the chain's float passes.

    QuantizeLinear(f(DequantizeLinear(q, s, z)), s2, z2)  ->  LookupTable(q, T)
    T[i] = QuantizeLinear(f(DequantizeLinear(code i)))    (i the code's byte, 0..255)

QDQ models write their activations so: SiLU is DequantizeLinear -> Sigmoid -> QDQ pair ->
Mul(x, .) -> QuantizeLinear (YOLOX: 80 of them), HardSwish Add -> pair -> Clip -> pair ->
Mul -> pair -> Div -> QuantizeLinear. onnxruntime runs the same steps as its QLinear*
operators (QLinearSigmoid's own table, QLinearMul); here the whole chain is one table.

The table is taken where it saves passes: where the chain's codes come from an 8-bit
producer (a QLinearConv), or where the chain computes a transcendental function (a sigmoid
costs more than the table's QuantizeLinear, lookup and DequantizeLinear around float
neighbours); chains of cheap steps between float producers keep their float fusions.

The chain starts at one DequantizeLinear (8-bit input, one constant scale and zero point)
and takes the nodes that read only it, chain values and one-value constants (of a rank
that does not grow the input's), of the elementwise operators below, QDQ pairs inside it
included. It ends at a QuantizeLinear to 8 bits (one scale and zero point) whose inputs
depend on nothing else, where no other chain value is read outside: the largest such end is
taken. The first DequantizeLinear stays for its other readers. The table's values are the
nodes' values for the 256 codes, computed by the optimizer's evaluator (the CPU provider's
kernels), so they are the unfused graph's, bit for bit.

Applied where the session's providers run LookupTable and the chain on the same provider
(`PassContext.runs_like`: the CPU's). optimizer/save.py writes it as Cast + Gather.
"""
from __future__ import annotations

from .. import ir
from ..ir.host_tensor import HostTensor
from .qdq_patterns import (EIGHT_BIT, dequantized_type, per_tensor_dequantize,
                           per_tensor_quantize)
from .graph_edit import EDGERUN_DOMAIN, GraphView, PassContext, element_type, is_onnx
from .ranks import known_rank

MAX_NODES = 32
# Operators whose float pass costs more than a table's QuantizeLinear, lookup and
# DequantizeLinear around a float producer and reader; chains of only the others (Add, Relu,
# Clip, HardSigmoid, ...) keep their float fusions (fuse_elementwise_program, the QDQ
# epilogues) there, and become tables only between 8-bit producers and readers
TRANSCENDENTAL = {"Sigmoid", "Tanh", "Elu", "Selu", "Celu", "Softplus", "Softsign", "Exp", "Log",
                  "Sqrt", "Erf", "Sin", "Cos", "Mish", "Gelu", "Pow"}
UNARY = {"Sigmoid", "Tanh", "Relu", "LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid",
         "HardSwish", "Softplus", "Softsign", "Exp", "Log", "Sqrt", "Reciprocal", "Neg", "Abs",
         "Erf", "Floor", "Ceil", "Round", "Sin", "Cos", "Sign", "Mish", "ThresholdedRelu",
         "Gelu", "Identity"}
BINARY = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "PRelu", "Clip",
          "QuantizeLinear", "DequantizeLinear"}


def fuse_quantized_table(view: GraphView, ctx: PassContext) -> int:
    if ctx.evaluate is None:
        return 0
    count = 0
    nodes = view.live_nodes()
    order = {id(node): i for i, node in enumerate(nodes)}   # chains are members of these
    for source in nodes:
        if view.is_dead(source) or not _is_source(view, source):
            continue
        chain = _chain(view, source, order)
        if not chain or not _pays(view, source, chain):
            continue
        table = table_of(view, ctx, source, chain)
        if table is None:
            continue
        name = view.add_constant(f"{chain[-1].outputs[0]}_table", table)
        fused = ir.Node(op_type="LookupTable", domain=EDGERUN_DOMAIN, name=chain[-1].name,
                        inputs=[source.inputs[0], name], outputs=[chain[-1].outputs[0]])
        if not ctx.runs_like(fused, [source] + chain):
            continue
        ctx.use_edgerun_domain()
        view.replace(chain, fused)
        count += 1
    return count


def _is_source(view: GraphView, node: ir.Node) -> bool:
    return is_onnx(node, "DequantizeLinear") and len(node.inputs) >= 2 and \
        per_tensor_dequantize(view, node) and dequantized_type(view, node) is not None


def _chain(view: GraphView, source: ir.Node, order: dict) -> list:
    """The chain's nodes in graph order (`order`: id(node) -> position), ending at its
    QuantizeLinear, or [] where there is none."""
    rank = known_rank(view, source.inputs[0])
    inside = {source.outputs[0]}
    members: list = []
    taken: set = set()
    grown = True
    while grown and len(members) < MAX_NODES:
        grown = False
        for name in list(inside):
            for reader in view.readers(name):
                if id(reader) in taken or not _takes(view, reader, inside, rank):
                    continue
                members.append(reader)
                taken.add(id(reader))
                inside.update(o for o in reader.outputs if o)
                grown = True
    members.sort(key=lambda node: order[id(node)])
    best: list = []
    for end in members:
        if is_onnx(end, "QuantizeLinear") and per_tensor_quantize(view, end):
            needed = _ancestors(end, members)
            if len(needed) > len(best) and _closed(view, needed, end):
                best = needed
    return best


def _pays(view: GraphView, source: ir.Node, chain: list) -> bool:
    """Whether the table saves passes: the chain's codes come from an 8-bit producer (not a
    QuantizeLinear of a float value: a QLinearConv, an input), or it computes a
    transcendental function."""
    return view.produced_by(source.inputs[0], "QuantizeLinear") is None or \
        any(node.op_type in TRANSCENDENTAL for node in chain)


def _takes(view: GraphView, node: ir.Node, inside: set, rank) -> bool:
    """An elementwise node of one output reading only chain values and one-value
    constants (of no higher rank than the chain's input)."""
    if node.domain not in ("", "ai.onnx") or len([o for o in node.outputs if o]) != 1 or \
            (node.op_type not in UNARY and node.op_type not in BINARY):
        return False
    if node.op_type in ("QuantizeLinear", "DequantizeLinear") and \
            (node.attr("block_size", 0) or node.attr("output_dtype", 0)):
        return False
    reads_chain = False
    for name in node.inputs:
        if not name:
            continue
        if name in inside:
            reads_chain = True
            continue
        value = view.constant(name)
        if value is None or value.size != 1 or \
                (value.ndim > 0 and (rank is None or value.ndim > rank)):
            return False
    return reads_chain


def _ancestors(end: ir.Node, members: list) -> list:
    """`end` and the members it depends on, in graph order."""
    producers = {o: node for node in members for o in node.outputs if o}
    needed, stack = {id(end)}, [end]
    while stack:
        for name in stack.pop().inputs:
            node = producers.get(name)
            if node is not None and id(node) not in needed:
                needed.add(id(node))
                stack.append(node)
    return [node for node in members if id(node) in needed]


def _closed(view: GraphView, nodes: list, end: ir.Node) -> bool:
    """Whether every value the nodes make, but the end's, is read by them alone."""
    ids = {id(node) for node in nodes}
    for node in nodes:
        if node is end:
            continue
        for name in node.outputs:
            if name and (name in view.output_names or
                         any(id(reader) not in ids for reader in view.readers(name))):
                return False
    return True


def table_of(view: GraphView, ctx: PassContext, source: ir.Node, chain: list):
    """The chain's output (its last node's) for every input byte 0..255 of the source
    DequantizeLinear, a constant of the end's 8-bit type; None where a node cannot be
    evaluated."""
    code = dequantized_type(view, source)
    codes = ctx.array_of(ir.Tensor(name="codes", elem_type=code, dims=(256,),
                                   raw=bytes(range(256))))
    values = {source.inputs[0]: codes}
    for node in [source] + chain:
        args = [values[n] if n in values else view.constant(n) if n else None
                for n in node.inputs]
        try:
            result = ctx.evaluate(node, ctx.opset(node.domain), args)
        except Exception:   # noqa: BLE001 - a node that cannot run now is not fused
            return None
        values[node.outputs[0]] = result[0] if isinstance(result, (tuple, list)) else result
    table = values[chain[-1].outputs[0]]
    if element_type(table) not in EIGHT_BIT or table.size != 256:
        return None
    # a one-value constant of the chain's rank broadcasts the codes to [1, .., 256]
    return table.reshape(256) if hasattr(table, "reshape") else \
        HostTensor(table.elem_type, (256,), table.data)
