"""The execution plan: every node bound to a kernel before the first run.

Built once per graph at session creation (and once per subgraph, lazily), so `run()` is a
tight loop: look up inputs, call the kernel, store outputs, free what is dead.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Optional

from ..ir import Graph, Node
from ..ir.walk import subgraph_reads


@dataclass
class Step:
    node: Node
    provider: str            # short name of the provider that runs it
    fn: Callable             # fn(ctx, *inputs, **attrs)
    ctx: object              # KernelContext
    attrs: dict              # attributes converted for the kernel
    inputs: tuple            # value names ('' = omitted)
    outputs: tuple           # value names ('' = not wanted)
    free_after: tuple = ()   # local values whose last reader is this step
    single_output: str = ""  # the output name when the node has exactly one output

    def __post_init__(self):
        self.single_output = self.outputs[0] if len(self.outputs) == 1 else ""


class ProgramStep(NamedTuple):
    """One step as the run loop and the generated function take it: a tuple (unpacked
    without attribute lookups) whose fields have names. `fn` is the kernel, or for a node
    with subgraphs (ctx None) a function of (this run's env, *inputs)."""
    fn: Callable
    ctx: object              # KernelContext, or None for a node with subgraphs
    inputs: tuple
    attrs: dict
    single: str              # Step.single_output
    frees: tuple             # Step.free_after
    step: Step


@dataclass
class GraphPlan:
    graph: Graph
    steps: list
    constants: dict          # initializer name -> value, ready for kernels
    input_names: tuple
    output_names: tuple
    explain: Optional[list] = None
    # graph input -> key of its value in the run's env (name@device); set by every planner
    input_keys: dict = None  # type: ignore[assignment]
    output_keys: tuple = ()  # graph output -> key read at the end (name@device when bound)
    copies: int = 0          # device <-> host copies: steps among `steps`, and inner_copies
    inner_copies: tuple = ()  # the copies host_io kernels make themselves ("copy x cpu->wasm
    #                           (in wasm_program)")
    program: tuple = ()      # the steps as ProgramSteps (GraphExecutor._place)
    runner: Optional[Callable] = None   # the program as one function of env (straight_line);
    #                                     its source: runner.source (once generated)
    copied_outputs: tuple = ()  # positions in output_keys handed out as copies (shape_memo)
    input_key_list: tuple = field(init=False)   # input_keys' values in input order (per run)

    def __post_init__(self):
        self.input_key_list = tuple((self.input_keys or {}).get(name, name)
                                    for name in self.input_names)


def compute_frees(steps: list, keep: set, local_names: set) -> None:
    """Mark each local value to be dropped right after its last use (liveness)."""
    last_use: dict = {}
    for i, step in enumerate(steps):
        for name in step.inputs:
            if name:
                last_use[name] = i
        for name in subgraph_reads(step.node):
            last_use[name] = i
    frees: dict = {}
    for name, i in last_use.items():
        if name in local_names and name not in keep:
            frees.setdefault(i, []).append(name)
    for i, step in enumerate(steps):
        step.free_after = tuple(frees.get(i, ()))


