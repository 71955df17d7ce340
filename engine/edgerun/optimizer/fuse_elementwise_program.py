"""A chain of float32 elementwise nodes over one tensor becomes one com.edgerun
ElementwiseProgram: its nodes' values computed in one native pass, block by block in the L1
cache, instead of a memory pass and a node call each (providers/cpu/ops/program.py).

QDQ models put a QuantizeDequantize pair after every activation step: HardSwish written as
Add(x, 3) -> pair -> Mul(x, .) -> pair -> Div(., 6) -> pair is six passes over the tensor
(ppocr cls: 18 of them); as a program it is one. Members are Add, Sub, Mul and Div of two
chain values or of a chain value and a float32 scalar constant, and QuantizeDequantize pairs
of one scale and zero point (fuse_quantize_dequantize_epilogue's grid_params). A chain
starts at one float32 tensor x (whose shape every member keeps: scalars of a rank above
x's are not taken), takes every member that reads only x, chain values and scalars, and
ends where exactly one of its values is read outside it. At least two nodes; at most
program.c's MAX_INSTRUCTIONS.

The pass applies where the session's providers run the program and the chain's nodes on
the same provider (`PassContext.runs_like`: the CPU's). optimizer/save.py writes the nodes
back.
"""
from __future__ import annotations

from typing import Optional

from .. import ir
from .fuse_quantize_dequantize_epilogue import grid_params
from .graph_edit import EDGERUN_DOMAIN, GraphView, PassContext, attr_floats, attr_ints, is_onnx
from .ranks import known_rank

FLOAT = 1
MAX_INSTRUCTIONS = 15                       # cpu_kernels/program.c's
# ElementwiseProgram's instruction codes (cpu_kernels/program.c's; the CPU kernel and
# save.py read them here)
ADD, SUB, MUL, DIV, RSUB, RDIV, QUANTIZE_DEQUANTIZE = range(1, 8)
BINARY = {"Add": ADD, "Sub": SUB, "Mul": MUL, "Div": DIV}
REVERSED = {"Add": ADD, "Sub": RSUB, "Mul": MUL, "Div": RDIV}     # scalar first
# code -> (op_type, scalar first) of the arithmetic instructions
ARITHMETIC = {**{code: (op, False) for op, code in BINARY.items()},
              RSUB: ("Sub", True), RDIV: ("Div", True)}


def fuse_elementwise_program(view: GraphView, ctx: PassContext) -> int:
    count = 0
    nodes = view.live_nodes()
    order = {id(node): i for i, node in enumerate(nodes)}
    for start in nodes:
        dynamic = None if view.is_dead(start) else _dynamic_inputs(view, start)
        if dynamic is None or len(set(dynamic)) != 1 or \
                view.declared_elem_type(dynamic[0]) != FLOAT or \
                not _scalars_fit(view, start, dynamic[0]):
            continue
        chain = _grow(view, start, dynamic[0], order)
        if not chain:
            continue
        fused = _program_node(view, chain, dynamic[0])
        if not ctx.runs_like(fused, chain):
            continue
        ctx.use_edgerun_domain()
        view.replace(chain, fused)
        count += 1
    return count


def _dynamic_inputs(view: GraphView, node: ir.Node) -> Optional[list]:
    """The non-constant inputs of a chain member (None: not one)."""
    if node.domain == EDGERUN_DOMAIN and node.op_type == "QuantizeDequantize":
        return [node.inputs[0]] if grid_params(view, node) is not None else None
    if not is_onnx(node, *BINARY) or len(node.inputs) != 2 or len(node.outputs) != 1 or \
            node.attr("broadcast", 0):
        return None
    dynamic = [n for n in node.inputs if view.constant(n) is None]
    if not dynamic or any(not _float32_scalar(view, n) for n in node.inputs
                          if view.constant(n) is not None):
        return None
    return dynamic


def _float32_scalar(view: GraphView, name: str) -> bool:
    value = view.constant(name)
    return value is not None and value.size == 1 and view.elem_type_of_constant(name) == FLOAT


def _grow(view: GraphView, start: ir.Node, x: str, order: dict) -> list:
    """start and the members that read only x, chain values and scalars (in graph order),
    cut back until one value, the last member's, leaves the chain; [] for fewer than two."""
    chain, values = [start], {x, start.outputs[0]}
    pending = {id(n): n for n in view.readers(start.outputs[0])}
    while pending and len(chain) < MAX_INSTRUCTIONS:
        ready = [n for n in pending.values() if _joins(view, n, values, x)]
        if not ready:
            break
        node = min(ready, key=lambda n: order.get(id(n), len(order)))
        del pending[id(node)]
        chain.append(node)
        values.add(node.outputs[0])
        pending.update((id(n), n) for n in view.readers(node.outputs[0]) if n not in chain)
    chain.sort(key=lambda n: order.get(id(n), len(order)))
    while len(chain) >= 2 and _leaving(view, chain) != [chain[-1].outputs[0]]:
        chain.pop()
    return chain if len(chain) >= 2 else []


def _joins(view: GraphView, node: ir.Node, values: set, x: str) -> bool:
    if view.is_dead(node):
        return False
    dynamic = _dynamic_inputs(view, node)
    return dynamic is not None and set(dynamic) <= values and _scalars_fit(view, node, x)


def _scalars_fit(view: GraphView, node: ir.Node, x: str) -> bool:
    """The node's scalar constants broadcast to no rank above x's."""
    ranks = [view.constant(n).ndim for n in node.inputs if view.constant(n) is not None]
    if not ranks or max(ranks) == 0:
        return True
    rank = known_rank(view, x)
    return rank is not None and max(ranks) <= rank


def _leaving(view: GraphView, chain: list) -> list:
    """The chain's values read outside it (or graph outputs)."""
    inside = {id(n) for n in chain}
    return [n.outputs[0] for n in chain
            if n.outputs[0] in view.output_names or
            any(id(r) not in inside for r in view.readers(n.outputs[0]))]


def _program_node(view: GraphView, chain: list, x: str) -> ir.Node:
    registers = {x: 0}
    ops: list = []
    operands: list = []
    constants: list = []
    for i, node in enumerate(chain):
        if node.op_type == "QuantizeDequantize":
            ops.append(QUANTIZE_DEQUANTIZE)
            operands += [registers[node.inputs[0]], -1]
            constants += grid_params(view, node) or []     # a member: not None
        else:
            a, b = node.inputs
            if view.constant(a) is not None:            # scalar first
                ops.append(REVERSED[node.op_type])
                operands += [registers[b], -1]
                constants += [view.scalar(a), 0.0, 0.0, 0.0]
            elif view.constant(b) is not None:
                ops.append(BINARY[node.op_type])
                operands += [registers[a], -1]
                constants += [view.scalar(b), 0.0, 0.0, 0.0]
            else:
                ops.append(BINARY[node.op_type])
                operands += [registers[a], registers[b]]
                constants += [0.0] * 4
        registers[node.outputs[0]] = i + 1
    return ir.Node(op_type="ElementwiseProgram", domain=EDGERUN_DOMAIN, inputs=[x],
                   outputs=[chain[-1].outputs[0]], name=chain[0].name,
                   attributes={"ops": attr_ints("ops", ops),
                               "operands": attr_ints("operands", operands),
                               "constants": attr_floats("constants", constants)})
