"""Nodes whose outputs nothing reads, and initializers nothing reads, are removed.

Graph outputs are always kept. Runs to a fixed point in one backward sweep: removing a node
can make its producers dead, and the sweep visits producers after their readers.
With IR < 4 an initializer is also listed as a graph input; removing it removes that input.
"""
from __future__ import annotations

from .graph_edit import GraphView, PassContext


def eliminate_dead(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for node in reversed(view.live_nodes()):
        if view.is_dead(node):
            continue
        if not any(view.is_used(o) for o in node.outputs if o):
            view.remove(node)
            count += 1
    graph = view.graph
    for name in list(graph.initializers):
        if not view.is_used(name) and name not in view.overridable:
            del graph.initializers[name]
            if name in view.input_names:
                graph.inputs = [v for v in graph.inputs if v.name != name]
            count += 1
    return count
