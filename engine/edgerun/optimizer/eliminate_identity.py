"""Identity, and Dropout at inference, pass their input through: readers read the input.

When the pass-through value is a graph output its name must survive, so instead the node
that produced the input is renamed to write the output name directly; when that is not
possible (the input is a graph input, an initializer or another graph output) the node stays.
Dropout is removed only when its mask output is unused and training_mode is absent or a
constant false.
"""
from __future__ import annotations

from ..ir.host_tensor import flat_values
from .graph_edit import GraphView, PassContext, is_onnx, subgraphs


def eliminate_identity(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for node in view.live_nodes():
        if view.is_dead(node) or not _passes_through(view, node):
            continue
        source, target = node.inputs[0], node.outputs[0]
        if target not in view.output_names:
            view.remove(node)
            view.rename_reads(target, source)
            count += 1
        elif _can_rename_producer(view, source):
            producer = view.producer[source]
            view.remove(node)
            producer.outputs = [target if n == source else n for n in producer.outputs]
            view.producer[target] = producer
            del view.producer[source]
            view.rename_reads(source, target)
            count += 1
    return count


def _passes_through(view: GraphView, node) -> bool:
    if not node.inputs or not node.inputs[0] or not node.outputs:
        return False
    if is_onnx(node, "Identity"):
        return len(node.outputs) == 1
    if is_onnx(node, "Dropout"):
        if any(view.is_used(o) for o in node.outputs[1:] if o):
            return False
        if len(node.inputs) > 2 and node.inputs[2]:
            training = view.constant(node.inputs[2])
            return training is not None and not bool(flat_values(training)[0])
        return True
    return False


def _can_rename_producer(view: GraphView, source: str) -> bool:
    producer = view.producer.get(source)
    if producer is None or source in view.output_names:
        return False
    # a subgraph that reads `source` from outside would need the rename too; rename_reads
    # does that, but a subgraph that *defines* the target name would shadow it: stay safe
    return not any(True for r in view.readers(source) for _ in subgraphs(r))
