"""What a kernel can see besides its inputs and attributes."""
from __future__ import annotations

from typing import Callable, Optional

from ..ir import Graph, Node


class KernelContext:
    """Passed as the first argument of every CPU kernel.

    - `node`: the ir.Node being run (for names in error messages, output count).
    - `opset`: the opset version imported for the node's domain.
    - `run_graph(graph, inputs)`: run a subgraph attribute (If/Loop/Scan bodies,
      SequenceMap); `inputs` bind positionally to `graph.inputs`, names from the enclosing
      scopes are visible; returns the list of graph outputs.
    """

    __slots__ = ("node", "opset", "_run_graph")

    def __init__(self, node: Node, opset: int, run_graph: Optional[Callable] = None):
        self.node = node
        self.opset = opset
        self._run_graph = run_graph

    @property
    def num_outputs(self) -> int:
        return len(self.node.outputs)

    def run_graph(self, graph: Graph, inputs: list) -> list:
        if self._run_graph is None:
            raise RuntimeError("this context cannot run subgraphs")
        return self._run_graph(graph, inputs)
