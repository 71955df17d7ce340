"""Work a Loop or Scan body repeats unchanged at every iteration moves before the loop.

A body node is loop-invariant when everything it reads comes from outside the iteration:
the enclosing graphs' values, the body's own initializers, or other invariant nodes. An
autoregressive decoder's body typically projects the encoder's output (an outer value) at
every step: SLANet's table decoder multiplies [256, 96] features by a [96, 256] weight 500
times a run. Such nodes run once, before the loop, and the body reads their results as
outer-scope values (which Loop and Scan bodies may read):

    Loop(body: y = MatMul(outer_x, W); z = Add(y, state); ...)
      -> y' = MatMul(outer_x, W'); Loop(body: z = Add(y', state); ...)

Kept in the body: nodes that read an iteration's values (the body's inputs: the iteration
number, the condition, loop-carried and scanned values) or a variant node's outputs; nodes
with subgraphs (their branches may read the iteration's values); and nondeterministic
operators, whose every call must draw anew. The body initializers a hoisted node reads move
to the enclosing graph (renamed, and read from there by the body's other nodes too, so no
weight is stored twice); hoisted results get fresh names, and a body output that was one is
copied out by an Identity. Results are the same values computed once instead of every time.
One level per pass: a Loop within a Loop body hoists into that body.
"""
from __future__ import annotations

from .. import ir
from ..ir.host_tensor import flat_values
from ..ir.walk import subgraphs
from .graph_edit import GraphView, PassContext, rename_outer_reads

LOOPS = {"Loop": "body", "Scan": "body"}
NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                    "Multinomial", "Bernoulli", "Dropout"}


def hoist_loop_invariants(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for loop in view.live_nodes():
        if view.is_dead(loop) or loop.op_type not in LOOPS or loop.domain not in ("", "ai.onnx"):
            continue
        attribute = loop.attributes.get(LOOPS[loop.op_type])
        body = attribute.value if attribute is not None else None
        if not isinstance(body, ir.Graph):
            continue
        if loop.op_type == "Loop" or ctx.opset("") >= 9:       # Scan 8 has sequence_lens
            count += _read_unchanged_values_from_outside(loop, body, ctx.array_of)
        invariant = _invariant_nodes(body)
        if not invariant:
            continue
        moved = {id(n) for n in invariant}
        body.nodes = [n for n in body.nodes if id(n) not in moved]
        for node in invariant:
            view.insert(_moved_out(node, body, view, invariant), before=loop)
        _outputs_produced_inside(body, ctx)
        view.reads_changed(loop)            # the body reads the hoisted values
        count += len(invariant)
    return count


def _read_unchanged_values_from_outside(loop: ir.Node, body: ir.Graph, array_of) -> int:
    """A loop-carried value (Loop) or state (Scan) whose body output is its body input (the
    same name, or the input through steps that keep its value: _passed_through) holds its
    initial value at every iteration: the body's nodes read the loop's own input for it
    instead (an enclosing value), which makes them candidates to hoist. Exporters pass
    weights this way (paddle2onnx carries every weight through its Loops, and SLANet's
    encoder features as Squeeze(Unsqueeze(x) + 0), which its decoder step projects)."""
    # Loop's body inputs start with the iteration number and condition, its outputs with
    # the condition; Scan's with the states
    first, first_output = (2, 1) if loop.op_type == "Loop" else (0, 0)
    states = len(body.inputs) - first
    if loop.op_type == "Scan":
        states -= loop.attr("num_scan_inputs", 0)
    defined = {v.name for v in body.inputs} | set(body.initializers)
    defined.update(o for n in body.nodes for o in n.outputs if o)
    producer = {o: n for n in body.nodes for o in n.outputs if o}
    count = 0
    for k in range(states):
        inner, output = body.inputs[first + k].name, first_output + k
        outer = loop.inputs[first + k] if first + k < len(loop.inputs) else ""
        if not outer or outer in defined or output >= len(body.outputs) or \
                not _passed_through(body, producer, body.outputs[output].name, inner, array_of):
            continue
        for node in body.nodes:
            if inner in node.inputs:
                node.inputs = [outer if n == inner else n for n in node.inputs]
                count += 1
            for sub in subgraphs(node):
                rename_outer_reads(sub, inner, outer)
    return count


NEUTRAL = {"Add": 0.0, "Sub": 0.0, "Mul": 1.0, "Div": 1.0}


def _passed_through(body: ir.Graph, producer: dict, output: str, inner: str, array_of) -> bool:
    """Whether `output` is `inner` through Identity, adding or subtracting zero, multiplying
    or dividing by one (a one-value constant: of rank 0, or between an Unsqueeze and a
    Squeeze of the same axes, so no shape grows) and that pair: its value, but that adding
    zero turns -0.0 into +0.0 (so the hoisted reads may see a -0.0 the later iterations
    would not: the only difference)."""
    name, axes, paired = output, None, False
    for _ in range(8):
        if name == inner:
            return axes is None or paired
        node = producer.get(name)
        if node is None or node.domain not in ("", "ai.onnx") or not node.inputs:
            return False
        op, name = node.op_type, node.inputs[0]
        if op == "Squeeze" and axes is None:
            axes = _axes(body, node, array_of)
            if axes is None:
                return False
        elif op == "Unsqueeze" and axes is not None and not paired and \
                _axes(body, node, array_of) == axes:
            paired = True
        elif op in NEUTRAL and len(node.inputs) == 2:
            x, c = node.inputs
            if op in ("Add", "Mul") and _one_value(body, x, array_of) is not None:
                x, c = c, x
            value = _one_value(body, c, array_of)
            inside_pair = axes is not None and not paired
            if value is None or value[0] != NEUTRAL[op] or value[1] > (1 if inside_pair else 0):
                return False
            name = x
        elif op != "Identity":
            return False
    return False


def _one_value(body: ir.Graph, name: str, array_of):
    """(value, rank) of a body initializer holding one number, else None."""
    tensor = body.initializers.get(name)
    if tensor is None:
        return None
    value = array_of(tensor)
    if value.size != 1:
        return None
    return float(flat_values(value)[0]), len(value.shape)


def _axes(body: ir.Graph, node: ir.Node, array_of):
    """A Squeeze's or Unsqueeze's axes (input or attribute), as a list; None if unknown."""
    if len(node.inputs) > 1 and node.inputs[1]:
        tensor = body.initializers.get(node.inputs[1])
        return None if tensor is None else [int(v) for v in flat_values(array_of(tensor))]
    axes = node.attr("axes")
    return None if axes is None else [int(v) for v in axes]


def _invariant_nodes(body: ir.Graph) -> list:
    """The body's nodes (in order) that read nothing of the iteration."""
    variant = {v.name for v in body.inputs}
    invariant = []
    for node in body.nodes:
        if any(name in variant for name in node.inputs if name) or subgraphs(node) or \
                node.op_type in NONDETERMINISTIC:
            variant.update(o for o in node.outputs if o)
        else:
            invariant.append(node)
    return invariant


def _moved_out(node: ir.Node, body: ir.Graph, view: GraphView, moving: list) -> ir.Node:
    """`node`, taken out of `body`, for the enclosing graph: the body initializers it reads
    move out with it (renamed; the body's other readers read the moved one), and its outputs
    are renamed, the body and the other `moving` nodes reading them under the new names."""
    for name in dict.fromkeys(n for n in node.inputs if n and n in body.initializers):
        outer_name = view.ctx.fresh_name(name)
        view.set_constant_tensor(outer_name, body.initializers.pop(name))
        _rename(body, moving, name, outer_name)
    outputs = []
    for name in node.outputs:
        outer_name = view.ctx.fresh_name(name) if name else name
        if name:
            _rename(body, moving, name, outer_name)
        outputs.append(outer_name)
    node.outputs = outputs
    return node


def _rename(body: ir.Graph, moving: list, old: str, new: str) -> None:
    rename_outer_reads(body, old, new)
    for node in moving:
        node.inputs = [new if n == old else n for n in node.inputs]


def _outputs_produced_inside(body: ir.Graph, ctx: PassContext) -> None:
    """A body output that is now an enclosing graph's value is copied into the body by an
    Identity (body outputs are the iteration's results)."""
    inside = {v.name for v in body.inputs} | set(body.initializers)
    inside.update(o for n in body.nodes for o in n.outputs if o)
    for value in body.outputs:
        if value.name not in inside:
            copy = ctx.fresh_name(value.name)
            body.nodes.append(ir.Node(op_type="Identity", inputs=[value.name], outputs=[copy],
                                      name=ctx.fresh_name("hoisted_output")))
            value.name = copy
