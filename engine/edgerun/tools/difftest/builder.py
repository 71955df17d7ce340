"""Building one random test graph: its operands, how they reach the node under test, its feeds.

An operand is a graph input or an initializer. A graph input may reach the node through a
layout wrapper, so that kernels see what real models hand them: a Transpose (a strided,
transposed view on the CPU provider), a Slice with step 2 or -1 (a strided or reversed
view), or an Expand of a size-1 axis (a broadcast view with stride 0). Feeds may also be
read-only arrays. The value the node reads is the same whatever the layout.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

# probabilities of each layout for a graph input that may be wrapped
LAYOUTS = (("plain", 0.55), ("transposed", 0.2), ("sliced", 0.15), ("broadcast", 0.1))


@dataclass
class Tolerance:
    """|got - want| <= atol + rtol * |want| + scaled * max|want| (floats; others exact)."""
    rtol: float = 1e-4
    atol: float = 1e-5
    scaled: float = 1e-5

    def widened(self, factor: float) -> "Tolerance":
        return Tolerance(self.rtol * factor, self.atol * factor, self.scaled * factor)


@dataclass
class Case:
    """One generated graph: an ONNX model (bytes), its feeds and how to compare outputs."""
    family: str
    model: bytes
    feeds: dict
    tolerance: Tolerance
    summary: str                     # op, attributes and shapes, one line
    seed: tuple = ()                 # (seed, index) that regenerates it
    unordered_outputs: tuple = ()    # outputs whose element order is unspecified
    layouts: dict = field(default_factory=dict)   # graph input -> layout used
    # an equivalent model the oracles run instead (an operator form onnxruntime lacks,
    # rewritten into one it has), or None
    oracle_model: Optional[bytes] = None


class GraphBuilder:
    """Collects nodes, graph inputs, initializers and feeds for one case."""

    def __init__(self, rng: np.random.Generator, opset: int, wrap_inputs: bool = True):
        self.rng = rng
        self.opset = opset
        self.wrap_inputs = wrap_inputs
        self.nodes: list = []
        self.inputs: list = []
        self.initializers: list = []
        self.outputs: list = []
        self.feeds: dict = {}
        self.layouts: dict = {}
        self.extra_opsets: dict = {}
        self._count = 0

    def name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    # ---------------------------------------------------------------- operands

    def const(self, value, name: Optional[str] = None) -> str:
        """An initializer holding `value`."""
        from onnx import numpy_helper

        name = name or self.name("c")
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def operand(self, value, const_chance: float = 0.0, wrap: bool = True,
                name: Optional[str] = None, broadcast: bool = True) -> str:
        """`value` as an initializer (with probability const_chance) or a graph input; a
        graph input may be wrapped (see module doc). `broadcast=False` keeps its values as
        given (a normalization over a constant axis divides 0 by 0 at rounding's whim).
        Returns the name the node reads."""
        value = np.asarray(value)
        if const_chance and self.rng.random() < const_chance:
            return self.const(value, name)
        layout = self._pick_layout(value) if wrap and self.wrap_inputs else "plain"
        if layout == "broadcast" and not broadcast:
            layout = "plain"
        name = name or self.name("x")
        if layout == "transposed":
            return self._transposed(value, name)
        if layout == "sliced":
            return self._sliced(value, name)
        if layout == "broadcast":
            return self._broadcast(value, name)
        self._graph_input(name, value)
        return name

    def _pick_layout(self, value) -> str:
        if value.ndim == 0 or value.size == 0 or value.dtype.kind in "OSU":
            return "plain"
        names, weights = [n for n, _ in LAYOUTS], [w for _, w in LAYOUTS]
        layout = str(self.rng.choice(names, p=weights))
        if layout == "transposed" and value.ndim < 2:
            layout = "sliced"
        if self.opset < 10 and layout in ("sliced", "broadcast"):
            return "transposed" if value.ndim >= 2 else "plain"   # Slice's inputs: opset 10
        if layout == "broadcast" and max(value.shape) < 2:
            return "plain"
        return layout

    def _graph_input(self, name: str, value) -> None:
        from onnx import helper

        self.inputs.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(value.dtype), list(value.shape)))
        self.feeds[name] = value
        self.layouts.setdefault(name, "plain")

    def _transposed(self, value, name: str) -> str:
        perm = list(range(value.ndim))
        while perm == sorted(perm):
            perm = [int(p) for p in self.rng.permutation(value.ndim)]
        inverse = [int(i) for i in np.argsort(perm)]
        source = self.name("t")
        self._graph_input(source, np.ascontiguousarray(value.transpose(perm)))
        self.layouts[source] = "transposed"
        self.node("Transpose", [source], outputs=[name], perm=inverse)
        return name

    def _sliced(self, value, name: str) -> str:
        axis = int(self.rng.integers(value.ndim))
        size = value.shape[axis]
        if self.rng.random() < 0.5:                 # step 2 over an interleaved copy
            shape = list(value.shape)
            shape[axis] = 2 * size
            wide = self._filler(value, shape)
            index = [slice(None)] * value.ndim
            index[axis] = slice(0, None, 2)
            wide[tuple(index)] = value
            starts, ends, steps = [0], [2 * size], [2]
        else:                                       # step -1 over a reversed copy
            wide = np.ascontiguousarray(np.flip(value, axis))
            starts, ends, steps = [-1], [-(2 ** 62)], [-1]
        source = self.name("s")
        self._graph_input(source, wide)
        self.layouts[source] = "sliced"
        self.node("Slice", [source, self.const(np.array(starts, np.int64)),
                            self.const(np.array(ends, np.int64)),
                            self.const(np.array([axis], np.int64)),
                            self.const(np.array(steps, np.int64))], outputs=[name])
        return name

    def _broadcast(self, value, name: str) -> str:
        """Replaces `value` along one axis by its first slice and expands it back: the
        node reads a stride-0 view (the operand's values change, its shape does not)."""
        axes = [a for a in range(value.ndim) if value.shape[a] > 1]
        axis = int(self.rng.choice(axes))
        narrow = np.ascontiguousarray(np.take(value, [0], axis=axis))
        source = self.name("b")
        self._graph_input(source, narrow)
        self.layouts[source] = "broadcast"
        self.node("Expand", [source, self.const(np.array(value.shape, np.int64))],
                  outputs=[name])
        return name

    def _filler(self, value, shape):
        """Values for the positions a strided Slice skips (they must not be read)."""
        if value.dtype.kind == "f":
            return np.full(shape, 1e4, value.dtype)
        if value.dtype.kind == "b":
            return np.ones(shape, value.dtype)
        return np.full(shape, 7, value.dtype)

    # ---------------------------------------------------------------- nodes

    def node(self, op_type: str, inputs: list, outputs: Any = 1, domain: Any = "",
             **attrs: Any) -> list:
        """Adds a node; `outputs` is a count (fresh names) or a list of names. Returns the
        output names."""
        from onnx import helper

        names = outputs if isinstance(outputs, list) else [self.name("y")
                                                            for _ in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, inputs, names, domain=domain or None,
                                           **attrs))
        return names

    def output(self, *names: str) -> None:
        self.outputs.extend(names)

    # ---------------------------------------------------------------- the case

    def build(self, family: str, summary: str, tolerance: Tolerance,
              unordered_outputs=(), oracle_nodes=None) -> Case:
        """The case; `oracle_nodes` replace the last node in the model the oracles run."""
        model = self._model(family, self.nodes)
        oracle = None if oracle_nodes is None else self._model(family,
                                                               self.nodes[:-1] + oracle_nodes)
        feeds = dict(self.feeds)
        for key, value in feeds.items():
            if self.rng.random() < 0.25:             # a read-only feed
                value = value.copy()
                value.flags.writeable = False
                feeds[key] = value
        return Case(family, model, feeds, tolerance, summary,
                    unordered_outputs=tuple(unordered_outputs), layouts=dict(self.layouts),
                    oracle_model=oracle)

    def _model(self, family: str, nodes: list) -> bytes:
        import onnx
        from onnx import helper

        graph = helper.make_graph(nodes, family, self.inputs,
                                  [onnx.ValueInfoProto(name=n) for n in self.outputs],
                                  self.initializers)
        opsets = [helper.make_opsetid("", self.opset)] + [
            helper.make_opsetid(d, v) for d, v in self.extra_opsets.items()]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="difftest")
        model.ir_version = min(model.ir_version, _ir_version_for(self.opset))
        return model.SerializeToString()


def _ir_version_for(opset: int) -> int:
    """The IR version onnx pairs with an ai.onnx opset (onnxruntime refuses newer ones)."""
    for limit, ir in ((8, 3), (9, 4), (10, 5), (11, 6), (14, 7), (18, 8), (20, 9),
                      (22, 10), (24, 11)):
        if opset <= limit:
            return ir
    return 12
