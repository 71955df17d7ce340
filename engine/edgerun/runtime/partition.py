"""Partitioning: which provider runs each node.

Providers are asked in priority order; the first whose `capability` claims a node runs it
and the reasons of those that refused are kept for `explain()`. The next provider after it
that claims the node too is its `fallback`: it runs the node when the kernel refuses its
inputs at run time (runtime/refusals.py). Nodes claimed by a compiling
provider (NNAPI/CoreML/QNN style) are grouped into the largest contiguous runs, each becoming
one partition node whose body is an ir.Graph. The CPU provider takes what nobody else claims.
"""
from __future__ import annotations

from typing import Any, Optional

from dataclasses import dataclass, field

from ..errors import NotImplementedOp
from ..ir import Graph, Node, ValueInfo
from ..ir.walk import subgraph_reads


@dataclass
class Placement:
    node: Node                       # the original node
    provider: Any                    # the ExecutionProvider that runs it
    refusals: list = field(default_factory=list)   # "provider: reason" of earlier providers
    fallback: Any = None             # the later provider that also claims it, if any


@dataclass
class Unit:
    """What the planner turns into one step: a node, or a compiled partition of nodes."""
    provider: Any
    node: Node                       # for a partition: a synthetic node over its boundary
    body: Optional[Graph] = None     # the partition's subgraph, when compiled
    fallback: Any = None             # see Placement.fallback


class Partitioner:
    def __init__(self, providers: list):
        self.providers = providers
        self.placements: list = []   # every node of every graph planned, in order

    def place(self, node: Node, opset: int) -> Placement:
        refusals: list = []
        for i, provider in enumerate(self.providers):
            ok, why = provider.capability(node, opset)
            if ok:
                later = self.providers[i + 1:] if provider.device != "cpu" else []
                placement = Placement(node, provider, refusals,
                                      self._fallback(node, opset, later))
                self.placements.append(placement)
                return placement
            refusals.append(f"{provider.name}: {why}")
        domain = node.domain or "ai.onnx"
        raise NotImplementedOp(
            f"node '{node.name or '(unnamed)'}' uses operator {domain}::{node.op_type} "
            f"(opset {opset}), which no provider implements ({'; '.join(refusals)})")

    @staticmethod
    def _fallback(node: Node, opset: int, later: list):
        """The first of `later` (providers after the device provider placing `node`) with
        per-node kernels that claims `node`. Host kernels (the CPU provider's) never refuse
        their inputs, so they are given none."""
        for provider in later:
            if not provider.compiles and provider.capability(node, opset)[0]:
                return provider
        return None

    def units(self, nodes: list, opset_of, graph_outputs: set, constants: dict) -> list:
        """Place `nodes` (topologically ordered) and group compiled runs into partitions."""
        units: list = []
        run: list = []
        for node in nodes:
            placement = self.place(node, opset_of(node))
            p = placement.provider
            if p.compiles and run and run[0][1] is p:
                run.append((node, p))
                continue
            if run:
                units.append(_partition_unit(run, nodes, graph_outputs, constants, len(units)))
                run = []
            if p.compiles:
                run = [(node, p)]
            else:
                units.append(Unit(p, node, fallback=placement.fallback))
        if run:
            units.append(_partition_unit(run, nodes, graph_outputs, constants, len(units)))
        return units


def _partition_unit(run: list, all_nodes: list, graph_outputs: set, constants: dict,
                    index: int) -> Unit:
    """One compiled partition: initializers it reads become its own initializers, other
    values read from outside become its inputs, values used later become its outputs."""
    provider = run[0][1]
    members = [n for n, _ in run]
    inside = {id(n) for n in members}
    produced = {o for n in members for o in n.outputs if o}
    inputs, seen = [], set()
    for n in members:
        for name in n.inputs:
            if name and name not in produced and name not in seen and name not in constants:
                seen.add(name)
                inputs.append(name)
    read_outside = set()
    for n in all_nodes:
        if id(n) not in inside:
            read_outside |= set(n.inputs)
            read_outside |= subgraph_reads(n)      # If/Loop/Scan bodies read enclosing values
    outputs = [o for n in members for o in n.outputs
               if o and (o in read_outside or o in graph_outputs)]
    name = f"{provider.name}_partition_{index}"
    used = {i for n in members for i in n.inputs}
    body = Graph(name=name, nodes=members, inputs=[ValueInfo(i) for i in inputs],
                 outputs=[ValueInfo(o) for o in outputs],
                 initializers={k: t for k, t in constants.items() if k in used})
    node = Node(op_type=f"{provider.name}Partition", inputs=inputs, outputs=outputs,
                domain="edgerun.partition", name=name)
    return Unit(provider, node, body)
