"""Graph capture: a model one device provider runs whole becomes one node of that provider,
whose kernel runs the graph as a subgraph and, after the first run of each input signature,
replays what that run recorded (the wasm provider's programs, wasm/program.py; the WebGPU
provider's command streams, webgpu/program.py).

`capture_graph` moves the main graph's nodes into a subgraph attribute `body` of one node with
the graph's inputs and outputs. The executor builds and partitions that subgraph like an If
branch, so its nodes keep their placements (explain() lists them), and every provider ahead
of the capturing one still gets the nodes it claims first.
"""
from __future__ import annotations

from ..errors import InvalidGraph
from ..ir import EDGERUN_DOMAIN as DOMAIN
from ..ir import Attribute, AttrType, Graph, Node
from ..ir.walk import all_nodes, topological_order

CAPTURE_OPS = ("WasmProgram", "WebGpuProgram")     # the wrapper node of each capturing provider
# operators whose outputs differ from run to run: a replay would repeat the recorded draw
RANDOM_OPS = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                        "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"})


def capture_graph(model, provider, op_type: str, ahead: tuple = ()) -> bool:
    """Wrap `model.graph` into one `op_type` node when `provider` claims every node and no
    provider `ahead` of it in priority order claims any (their nodes would receive the
    provider's device values inside the program); True when it did."""
    graph = model.graph
    opsets = model.opset_imports
    if not graph.nodes or any(n.op_type == op_type and n.domain == DOMAIN for n in graph.nodes):
        return False
    for node in graph.nodes:
        opset = opsets.get("" if node.domain == "ai.onnx" else node.domain)
        if opset is None or not provider.capability(node, opset)[0]:
            return False
        if any(other.capability(node, opset)[0] for other in ahead):
            return False
    constants = set(graph.initializers) | {s.name for s in graph.sparse_initializers}
    feeds = [v for v in graph.inputs if v.name not in constants]
    inputs = {v.name for v in graph.inputs}
    if any(v.name in inputs or v.name in constants for v in graph.outputs):
        return False                        # an output that no node computes
    try:        # a body is checked in file order: exporters do not always sort their nodes
        nodes = topological_order(graph, inputs | constants)
    except InvalidGraph:
        return False                        # left for the executor to report
    body = Graph(name=f"{graph.name or 'main'}_{provider.name}", nodes=nodes,
                 inputs=feeds, outputs=list(graph.outputs), initializers=graph.initializers,
                 sparse_initializers=graph.sparse_initializers, value_info=graph.value_info)
    graph.nodes = [Node(op_type, [v.name for v in feeds], [v.name for v in graph.outputs],
                        {"body": Attribute("body", AttrType.GRAPH, body)}, DOMAIN,
                        name=f"{provider.name}_program")]
    # initializers stay in the main graph only where they are overridable inputs
    graph.initializers = {k: t for k, t in graph.initializers.items() if k in inputs}
    graph.sparse_initializers = [s for s in graph.sparse_initializers if s.name in inputs]
    opsets.setdefault(DOMAIN, 1)
    return True


def is_capture_node(node) -> bool:
    """The wrapper capture_graph made (explain() lists its body's nodes, not it)."""
    return node.domain == DOMAIN and node.op_type in CAPTURE_OPS


def has_random_ops(graph) -> bool:
    return any(n.op_type in RANDOM_OPS for n in all_nodes(graph))
