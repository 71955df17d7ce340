"""What a kernel can see besides its inputs and attributes."""
from __future__ import annotations

from typing import Callable, Optional

from ..ir import Graph, Node


_MAX_PREPARED = 64


def same_objects(held: tuple, given: tuple) -> bool:
    """Whether each of `given` is the very object at the same place in `held`."""
    for a, b in zip(held, given):
        if a is not b:
            return False
    return True


class KernelContext:
    """Passed as the first argument of every CPU kernel.

    - `node`: the ir.Node being run (for names in error messages, output count).
    - `opset`: the opset version imported for the node's domain.
    - `run_graph(graph, inputs)`: run a subgraph attribute (If/Loop/Scan bodies,
      SequenceMap); `inputs` bind positionally to `graph.inputs`, names from the enclosing
      scopes are visible; returns the list of graph outputs. With `on_device` ("webgpu"),
      the inputs are that device's values and the outputs stay on it (a captured graph).
    - `prepared(key, sources, build)`: what `build()` derives from `sources` (weights
      transposed, packed or summed), built on the first call and kept for this node while the
      same objects come back, so constant initializers are prepared once per session.
    """

    __slots__ = ("node", "opset", "_run_graph", "_prepared")

    def __init__(self, node: Node, opset: int, run_graph: Optional[Callable] = None):
        self.node = node
        self.opset = opset
        self._run_graph = run_graph
        self._prepared: dict = {}

    def prepared(self, key, sources: tuple, build: Callable):
        """`build()`, cached under `key` while every one of `sources` is the same object.

        The entry holds `sources` themselves, so an identity match cannot be a new array
        at a recycled address. Concurrent runs may both build once: the results are equal.
        """
        entry = self._prepared.get(key)
        if entry is not None and same_objects(entry[0], sources):
            return entry[1]
        value = build()
        if len(self._prepared) >= _MAX_PREPARED:     # e.g. one plan per input shape seen
            self._prepared.clear()
        self._prepared[key] = (sources, value)
        return value

    @property
    def num_outputs(self) -> int:
        return len(self.node.outputs)

    def run_graph(self, graph: Graph, inputs: list, on_device: Optional[str] = None) -> list:
        if self._run_graph is None:
            raise RuntimeError("this context cannot run subgraphs")
        if on_device is None:
            return self._run_graph(graph, inputs)
        return self._run_graph(graph, inputs, on_device)
