"""The execution-provider contract (onnxruntime's IExecutionProvider, reduced to its core).

A provider says which nodes it can run (`capability`, onnxruntime's GetCapability). It then
runs them in one of two ways:

- **per-node kernels** (`kernel`): the executor calls `fn(ctx, *inputs, **attributes)` with
  the CPU calling convention (providers/cpu/ops/README.md), except that inputs and outputs
  are this provider's device values (`device` names where they live). The executor inserts
  `to_device` / `to_host` copies where a value crosses between devices, and uploads
  initializers once, at session creation.
- **compiled partitions** (`compiles = True`, the NNAPI/CoreML/QNN style): the partitioner
  hands each largest contiguous run of claimed nodes to `compile(graph, opsets)`, which returns
  one function `fn(*host_inputs) -> tuple of host outputs` for the whole subgraph.

A per-node kernel that meets inputs it has no code for at run time raises
`errors.KernelRefused`; the executor then runs that node on the next provider that claims it
(runtime/refusals.py) and tells this one through `refused`. A provider never calls another
provider's kernels itself.

`begin_run()` / `end_run()` bracket every top-level run (e.g. open and submit one GPU command
encoder); `to_host` is where a device provider flushes pending work before reading back.
"""
from __future__ import annotations

from typing import Optional

from ..ir import Graph, Node


class ExecutionProvider:
    name = ""          # short name: cpu, wasm, webgpu, coreml, nnapi, qnn
    ort_name = ""      # onnxruntime's spelling: CPUExecutionProvider, ...
    device = "cpu"     # where this provider's tensors live; "cpu" means host numpy arrays
    compiles = False   # True: claims subgraphs and compiles each into one function

    @classmethod
    def available(cls) -> tuple:
        """(True, "") when this provider can run here, else (False, why not)."""
        return True, ""

    @classmethod
    def available_with(cls, options: dict) -> tuple:
        """available() for a provider given these options (an edge adapter asked to run its
        reference interpreter runs anywhere)."""
        return cls.available()

    def __init__(self, options: Optional[dict] = None):
        self.options = dict(options or {})

    def configure(self, sess_options) -> None:
        """Take what applies from the session's SessionOptions (threads, ...)."""

    def prepare_model(self, model, ahead: tuple = ()) -> None:
        """Called once with the (optimized) ir.Model before partitioning: the place to learn
        value types and constants that `capability` decisions depend on. `ahead` are the
        providers before this one in priority order (prepared already): they pick first."""

    def capability(self, node: Node, opset: int) -> tuple:
        """(True, "") if this provider runs `node`, else (False, the reason)."""
        raise NotImplementedError

    def judges_nodes_before_preparing(self) -> bool:
        """Whether `capability` answers before prepare_model: the optimizer's provider-aware
        fusions (PassContext.runs_like) ask it then. Providers that decide from the whole
        model's types and constants (the edge adapters) cannot, and no such fusion applies
        in their sessions."""
        return True

    def kernel(self, node: Node, opset: int):
        """The function that runs `node`: fn(ctx, *inputs, **attributes)."""
        raise NotImplementedError

    def compile(self, graph: Graph, opsets: dict):
        """For compiling providers: one function running the whole partition `graph`."""
        raise NotImplementedError

    def to_device(self, value):
        """A host value (numpy array, list, None) as this provider's device value."""
        return value

    def constant_to_device(self, value):
        """A constant (initializer) as this provider's device value, made once at load."""
        return self.to_device(value)

    def to_host(self, value):
        """This provider's device value as a host value."""
        return value

    def refused(self, node: Node, why: str) -> None:
        """This provider's kernel refused `node`'s inputs at run time and the session's next
        provider ran it (runtime/refusals.py): the place to count it in `stats`."""

    def release(self) -> None:
        """The session is done: free what the provider holds for it on its device now,
        rather than when the garbage collector reaches the session."""

    def begin_run(self) -> None:
        pass

    def end_run(self) -> None:
        pass
