"""Runs a planned graph: the tight loop behind `InferenceSession.run`.

A `GraphExecutor` is built once per graph (the main graph at session creation, each subgraph
of If/Loop/Scan when its parent is built): it binds every node to a kernel, converts
attributes and computes when each value dies. `run()` then only moves values between a
per-call dict and the kernels, so concurrent runs share nothing mutable: through the plan's
steps written out as one function (straight_line.py), or this module's loop for plans too long
to compile and for profiled runs.
"""
from __future__ import annotations

from typing import Optional

import functools
import threading
import time
from dataclasses import dataclass

from ..ir.host_tensor import HostTensor

try:
    import numpy as np
    _ARRAY: type = np.ndarray
    _SCALARS: tuple = (np.generic, int, float, bool, complex)
except ImportError:          # Pyodide without numpy: values are HostTensors
    np = None  # type: ignore[assignment]
    _ARRAY = HostTensor
    _SCALARS = ()
from ..errors import EdgerunError, Fail, InvalidGraph
from ..ir import Graph, Node
from ..ir.walk import outer_scope_reads, subgraphs, topological_order
from . import cancel
from .attributes import initializer_value, kernel_attributes
from .kernel_context import KernelContext
from .partition import Partitioner
from .refusals import refusable
from .plan import GraphPlan, ProgramStep, Step, compute_frees
from .shape_memo import outputs_sharing_memory, remembering, shape_determined_steps
from .straight_line import Branch, InlineIf, compiled_on_first_call, straight_line


class GraphExecutor:
    def __init__(self, graph: Graph, opsets: dict, partitioner: Partitioner,
                 outer_names: frozenset = frozenset(), subgraph: bool = False):
        self.graph = graph
        self.is_subgraph = subgraph   # its plans' functions are compiled when first run
        self.opsets = opsets
        self.partitioner = partitioner
        self.constants = {name: initializer_value(t) for name, t in graph.initializers.items()}
        for s in graph.sparse_initializers:
            self.constants[s.name] = initializer_value(s)
        self.input_names = tuple(v.name for v in graph.inputs)
        self.output_names = tuple(v.name for v in graph.outputs)
        self.outer_reads = tuple(sorted(outer_scope_reads(graph)))
        self.subgraphs: dict = {}     # id(subgraph) -> GraphExecutor
        self.copy_steps = 0           # device <-> host copies per run (excluding subgraphs)
        self._value_types: Optional[dict] = None   # name -> TypeInfo, inferred when needed
        self.plan = self._build_plan(outer_names)

    def subgraph_copy_steps(self) -> int:
        """Device <-> host copies planned inside If/Loop/Scan bodies, per execution of each."""
        return sum(sub.copy_steps + sub.subgraph_copy_steps() for sub in self.subgraphs.values())

    # ---- planning -------------------------------------------------------------------------

    def _opset_of(self, node: Node) -> int:
        opset = self.opsets.get(_domain_key(node.domain))
        if opset is None:
            raise InvalidGraph(f"node '{node.name or node.op_type}' uses domain "
                               f"'{node.domain}', which the model does not import "
                               f"(opset_import has {sorted(self.opsets)})")
        return opset

    def _build_plan(self, outer_names: frozenset) -> GraphPlan:
        """Bind every node to its kernel (once), then place values with graph inputs and
        outputs on the host: the plan `run()` uses unless told otherwise."""
        host_names = set(self.constants) | set(self.input_names) | set(outer_names)
        self._host_names = host_names
        nodes = topological_order(self.graph, host_names)
        units = self.partitioner.units(nodes, self._opset_of, set(self.output_names),
                                       self.graph.initializers)
        self._bound: list = []
        visible = set(host_names)
        for unit in units:
            self._bound.append(self._bind_unit(unit, visible))
            visible |= {o for o in unit.node.outputs if o}
        for name in self.output_names:
            if name not in visible:
                raise InvalidGraph(f"graph output '{name}' is not produced by any node, input "
                                   f"or initializer")
        self.device_constants: dict = {}
        self._plans: dict = {}
        plan = self._place({}, {})
        self.copy_steps = plan.copies
        return plan

    def plan_for(self, input_devices: Optional[dict] = None,
                 output_devices: Optional[dict] = None) -> GraphPlan:
        """The plan for graph inputs fed, and outputs wanted, on other devices than the host
        (IO binding): name -> device ("webgpu"...); an output mapped to None is not wanted
        and stays where it is produced. Built on first use and kept; kernels are the ones
        bound at creation, only the copies between devices differ."""
        ins = {n: d for n, d in (input_devices or {}).items() if d != "cpu"}
        outs = {n: d for n, d in (output_devices or {}).items() if d != "cpu"}
        if not ins and not outs:
            return self.plan
        key = (frozenset(ins.items()), frozenset(outs.items()))
        with _PLAN_LOCK:
            plan = self._plans.get(key)
            if plan is None:
                plan = self._plans[key] = self._place(ins, outs)
        return plan

    def plan_on(self, device: str) -> GraphPlan:
        """The plan whose inputs arrive on `device` and whose outputs stay there (the body
        of a captured graph)."""
        return self.plan_for(dict.fromkeys(self.input_names, device),
                             dict.fromkeys(self.output_names, device))

    def _place(self, input_devices: dict, output_devices: dict) -> GraphPlan:
        placer = _ValuePlacer(self, self._host_names, input_devices)
        for b in self._bound:
            for name in b.host_reads:                   # subgraphs read enclosing values on host
                placer.key_on(name, "cpu")
            placer.add_step(b.node, b.provider, b.device, b.fn, b.ctx, b.attrs)
        output_keys = tuple(placer.key_on(name, output_devices.get(name, "cpu"))
                            if output_devices.get(name, "cpu") is not None
                            else placer.input_key(name)     # unwanted: left where it is
                            for name in self.output_names)
        steps = placer.steps
        input_keys = {name: placer.input_key(name) for name in self.input_names}
        local = {o for s in steps for o in s.outputs if o} | set(input_keys.values())
        compute_frees(steps, keep=set(output_keys), local_names=local)
        # what run() copies first: every constant, and None under '' (an omitted input)
        self._initial_env = {**self.constants, **self.device_constants, "": None}
        self._outer_reads_unset = tuple(n for n in self.outer_reads if n not in self._initial_env)
        # the steps as ProgramSteps (named tuples: run() unpacks them instead of reading
        # attributes); a node with subgraphs gets ctx None and a function of (env, *inputs)
        remembered = shape_determined_steps(steps, self.constants, set(output_keys))
        names = (set(self._initial_env) | set(input_keys.values()) | set(self.outer_reads) |
                 {n for s in steps for n in s.inputs + s.outputs if n})
        program = tuple(ProgramStep(remembering(s, remembered[i], _as_value)
                                    if i in remembered else s.fn, s.ctx,
                                    s.inputs, s.attrs, s.single_output, s.free_after, s)
                        if s.ctx is not None else
                        ProgramStep(self._inlined(s, self._subgraph_step(s), names), None,
                                    s.inputs, {}, s.single_output, s.free_after, s)
                        for i, s in enumerate(steps))
        generate = compiled_on_first_call if self.is_subgraph else straight_line
        fixed = {name: value for name, value in self.constants.items()
                 if name not in self.input_names}      # a feed may replace an initializer
        runner = generate(program, _ARRAY, _store_outputs, _kernel_failure, (EdgerunError,),
                          output_keys, fixed)
        return GraphPlan(graph=self.graph, steps=steps, constants=self.constants,
                         input_names=self.input_names, output_names=self.output_names,
                         input_keys=input_keys, output_keys=output_keys,
                         copies=placer.copies + len(placer.inner_copies),
                         inner_copies=tuple(placer.inner_copies),
                         program=program, runner=runner,
                         copied_outputs=outputs_sharing_memory(steps, remembered, output_keys))

    def _bind_unit(self, unit, visible: set) -> "_BoundUnit":
        node, provider = unit.node, unit.provider
        if unit.body is not None:                       # a compiled partition: host in, host out
            self._annotate_types(unit.body)
            compiled = provider.compile(unit.body, self.opsets)
            return _BoundUnit(node, provider, "cpu", _call_compiled(compiled), None, {}, ())
        opset = self._opset_of(node)
        fn = provider.kernel(node, opset)
        # a kernel marked host_io takes and returns host values: it moves them itself
        device = "cpu" if getattr(fn, "host_io", False) else provider.device
        # a captured graph's kernel runs its body with inputs and outputs on its device
        body_device = getattr(fn, "body_on_device", None)
        if device != "cpu":
            fn = refusable(fn, node, opset, provider, unit.fallback)
        host_reads = []
        for sub in subgraphs(node):
            sub_executor = GraphExecutor(sub, self.opsets, self.partitioner,
                                         frozenset(visible), subgraph=True)
            self.subgraphs[id(sub)] = sub_executor
            if body_device is not None:
                sub_executor.copy_steps = sub_executor.plan_on(body_device).copies
            host_reads += [n for n in sorted(outer_scope_reads(sub)) if n in visible]
        static_ctx = None if _has_subgraphs(node) else KernelContext(node, opset)
        attrs = kernel_attributes(node.attributes)
        if static_ctx is not None and hasattr(fn, "bind"):
            fn, attrs = _applied(fn, static_ctx, attrs)
        return _BoundUnit(node, provider, device, fn, static_ctx, attrs, tuple(host_reads))

    def _subgraph_step(self, step: Step):
        """fn(env, *inputs) running a node with subgraphs against one run's values.

        A CPU If with a one-element numpy condition runs its branch directly; everything else
        goes through its kernel with a context whose run_graph sees `env`."""
        opset = self._step_opset(step)

        def through_kernel(env, *inputs):
            run_graph = functools.partial(self._run_subgraph, env, None)
            return step.fn(KernelContext(step.node, opset, run_graph), *inputs, **step.attrs)

        node = step.node
        if node.op_type != "If" or _domain_key(node.domain) != "" or step.provider != "cpu" \
                or np is None:
            return through_kernel
        then_branch = self.subgraphs[id(node.attributes["then_branch"].value)]
        else_branch = self.subgraphs[id(node.attributes["else_branch"].value)]

        single = len(node.outputs) == 1      # returned alone: run() stores it directly

        def run_if(env, cond):
            if type(cond) is not np.ndarray or cond.size != 1:
                return through_kernel(env, cond)       # the kernel explains what is wrong
            branch = then_branch if cond.reshape(-1)[0] else else_branch
            values = branch.run(_NO_FEEDS, outer=env)
            return values[0] if single else tuple(values)

        run_if.runs_branches = True  # type: ignore[attr-defined]
        return run_if

    def _inlined(self, step: Step, fn, names: set):
        """`fn` as an InlineIf where it is a CPU If (see `_subgraph_step`) whose branches
        store no name in `names` (those this graph's values use)."""
        if not getattr(fn, "runs_branches", False):
            return fn
        node = step.node
        branches = [self._as_branch(self.subgraphs[id(node.attributes[key].value)])
                    for key in ("then_branch", "else_branch")]
        if None in branches:
            return fn
        written = frozenset().union(*(_written(b.program) for b in branches))
        if written & names:
            return fn
        return InlineIf(fn, branches[0], branches[1], written)

    @staticmethod
    def _as_branch(sub: "GraphExecutor"):
        """`sub`'s default plan as a Branch, or None when it is not written out itself."""
        plan = sub.plan
        if plan.program and plan.runner is None:        # too long to write out
            return None
        freed = {name for entry in plan.program for name in entry.frees}
        stored = [name for entry in plan.program for name in entry.step.outputs if name]
        return Branch(plan.program, sub._initial_env, plan.output_keys,
                      tuple(name for name in stored if name not in freed))

    def _annotate_types(self, body: Graph) -> None:
        """Give a partition's inputs and outputs the types shape inference finds, so
        compiling providers can lower it at session creation."""
        if self._value_types is None:
            try:
                from ..shape_inference import infer_shapes
                self._value_types = dict(infer_shapes(self.graph, opsets=self.opsets))
            except Exception:   # noqa: BLE001 - untyped partitions are still valid
                self._value_types = {}
        for v in list(body.inputs) + list(body.outputs):
            if v.type is None:
                v.type = self._value_types.get(v.name)

    # ---- running --------------------------------------------------------------------------

    def run(self, feeds: dict, outer: Optional[dict] = None, profile: Optional[list] = None,
            plan: Optional[GraphPlan] = None) -> list:
        """Run with `feeds` (name -> value); `outer` holds names visible from enclosing graphs.

        With `profile` (a list), each step appends (name, op_type, provider, start, seconds).
        `plan` (from `plan_for`) says on which device inputs come and outputs go; feeds are
        then that device's values (GpuTensor...), and so are the outputs it keeps there.
        """
        plan = plan or self.plan
        env = self._initial_env.copy()
        if outer:
            for name in self._outer_reads_unset:
                if name in outer:
                    env[name] = outer[name]
        if plan is self.plan:
            if feeds:
                env.update(feeds)
        else:
            keys = plan.input_keys
            for name, value in feeds.items():
                env[keys.get(name, name)] = value
        for key in plan.input_key_list:
            if key not in env:
                env[key] = None           # an omitted optional input
        watched = cancel.watched()
        if profile is None and watched is None and plan.runner is not None:
            plan.runner(env)
        elif profile is not None:
            self._run_profiled(env, profile, plan, watched)
        else:
            value_of = env.__getitem__
            for fn, ctx, inputs, attrs, single, frees, step in plan.program:
                if watched is not None and watched.terminate:
                    cancel.check(watched)
                try:
                    if ctx is None:       # a node with subgraphs: runs against this run's env
                        result = fn(env, *map(value_of, inputs))
                    elif attrs:
                        result = fn(ctx, *map(value_of, inputs), **attrs)
                    else:
                        result = fn(ctx, *map(value_of, inputs))
                except EdgerunError:
                    raise
                except Exception as e:   # noqa: BLE001 - every kernel failure gets its node
                    raise _kernel_failure(step, e) from e
                if single and type(result) is _ARRAY:
                    env[single] = result       # the common case, kept cheap
                else:
                    _store_outputs(env, step, result)
                if frees:
                    for name in frees:
                        del env[name]
        outputs = [env[key] for key in plan.output_keys]
        if plan.copied_outputs:
            for i in plan.copied_outputs:
                outputs[i] = _copied(outputs[i])
        return outputs

    def _run_profiled(self, env: dict, profile: list, plan: GraphPlan, watched=None) -> None:
        """The loop of `run`, timing every step into `profile`."""
        run_graph = functools.partial(self._run_subgraph, env, profile)
        for step in plan.steps:
            cancel.check(watched)
            ctx = step.ctx
            if ctx is None:
                ctx = KernelContext(step.node, self._step_opset(step),  # type: ignore[arg-type]
                                    run_graph)
            started = time.perf_counter()
            try:
                result = step.fn(ctx, *[env[n] for n in step.inputs], **step.attrs)
            except EdgerunError:
                raise
            except Exception as e:   # noqa: BLE001
                raise _kernel_failure(step, e) from e
            profile.append((step.node.name, step.node.op_type, step.provider, started,
                            time.perf_counter() - started))
            _store_outputs(env, step, result)
            for name in step.free_after:
                del env[name]

    def _step_opset(self, step: Step) -> Optional[int]:
        return self.opsets.get(_domain_key(step.node.domain))

    def _run_subgraph(self, env: dict, profile, graph: Graph, inputs: list,
                      on_device: Optional[str] = None) -> list:
        cancel.check(cancel.watched())            # each Loop or Scan iteration
        sub = self.subgraphs[id(graph)]
        if len(inputs) != len(sub.input_names):
            raise ValueError(f"subgraph '{graph.name}' takes {len(sub.input_names)} inputs, "
                             f"got {len(inputs)}")
        plan = None if on_device is None else sub.plan_on(on_device)
        return sub.run(dict(zip(sub.input_names, inputs)), outer=env, profile=profile,
                       plan=plan)


_PLAN_LOCK = threading.Lock()
_NO_FEEDS: dict = {}


def _applied(fn, ctx: KernelContext, attrs: dict) -> tuple:
    """(kernel, attributes) for a step: the kernel's `bind` applied to the node's attributes
    once (registry.py), or the kernel as it is where binding fails (its run then raises the
    kernel's own error, at the node)."""
    try:
        return fn.bind(ctx, attrs), {}
    except Exception:   # noqa: BLE001 - the unbound kernel reports it when run
        return fn, attrs


@dataclass
class _BoundUnit:
    """A node (or compiled partition) bound to its kernel, before values are placed."""
    node: Node
    provider: object
    device: str
    fn: object
    ctx: object
    attrs: dict
    host_reads: tuple           # enclosing values its subgraphs read (on the host)


class _ValuePlacer:
    """Tracks on which device each value lives and inserts copies where a step needs it
    elsewhere. Host values keep their name; a copy on device D is named `name@D`. Graph
    inputs in `input_devices` (name -> device) arrive already on that device."""

    def __init__(self, executor: GraphExecutor, host_names: set,
                 input_devices: Optional[dict] = None):
        self.executor = executor
        self.location = {name: "cpu" for name in host_names}
        self.available = set(host_names)            # keys that exist at this point of the plan
        for name, device in (input_devices or {}).items():
            self.location[name] = device
            self.available.discard(name)
            self.available.add(f"{name}@{device}")
        self.providers = {p.device: p for p in executor.partitioner.providers}
        self.steps: list = []
        self.copies = 0
        self.inner_copies: list = []                # transfers host_io kernels make themselves
        self.device_constants = executor.device_constants   # shared by every plan

    def input_key(self, name: str) -> str:
        """The key of `name` where it lives now (graph inputs: where they arrive)."""
        device = self.location.get(name, "cpu")
        return name if device == "cpu" else f"{name}@{device}"

    def key_on(self, name: str, device: str) -> str:
        """The key under which `name` is available on `device`, adding a copy if needed."""
        if not name:
            return name
        key = name if device == "cpu" else f"{name}@{device}"
        if key in self.available:
            return key
        source = self.location.get(name)
        if source is None:
            return key                                # produced later: the graph check reports it
        if source == "cpu" and name in self.executor.constants:
            if key not in self.device_constants:    # weights are uploaded once, at load
                self.device_constants[key] = self.providers[device].constant_to_device(
                    self.executor.constants[name])
        else:
            src_key = name if source == "cpu" else f"{name}@{source}"
            self.steps.append(_copy_step(name, src_key, key, self.providers.get(source),
                                         self.providers.get(device)))
            self.copies += 1
        self.available.add(key)
        return key

    def add_step(self, node, provider, device, fn, ctx, attrs) -> None:
        inputs = tuple(self.key_on(n, device) for n in node.inputs)
        if device != provider.device:         # host_io: its transfers are copies all the same
            moved = [f"copy {n} cpu->{provider.device}" for n in node.inputs if n] + \
                [f"copy {n} {provider.device}->cpu" for n in node.outputs if n]
            self.inner_copies += [f"{m} (in {node.name or node.op_type})" for m in moved]
        outputs = tuple(o if (not o or device == "cpu") else f"{o}@{device}" for o in node.outputs)
        for o in node.outputs:
            if o:
                self.location[o] = device
        self.available |= {o for o in outputs if o}
        self.steps.append(Step(node=node, provider=provider.name, fn=fn, ctx=ctx, attrs=attrs,
                               inputs=inputs, outputs=outputs))


def _copy_step(name: str, src_key: str, dst_key: str, source, target) -> Step:
    def copy(ctx, value):
        if source is not None and source.device != "cpu":
            value = source.to_host(value)
        if target is not None and target.device != "cpu":
            value = target.to_device(value)
        return value

    where = f"{source.device if source else 'cpu'}->{target.device if target else 'cpu'}"
    node = Node(op_type="MemcpyToHost" if dst_key == name else "MemcpyFromHost",
                inputs=[src_key], outputs=[dst_key], name=f"copy {name} {where}")
    return Step(node=node, provider="copy", fn=copy, ctx=KernelContext(node, 1), attrs={},
                inputs=(src_key,), outputs=(dst_key,))


def _kernel_failure(step: Step, e: Exception) -> Fail:
    return Fail(f"node '{step.node.name or '(unnamed)'}' ({step.node.op_type}) "
                f"failed: {type(e).__name__}: {e}")


def _call_compiled(compiled):
    def run_partition(ctx, *inputs):
        return tuple(compiled(*inputs))
    return run_partition


def _has_subgraphs(node: Node) -> bool:
    return any(True for _ in subgraphs(node))


def _written(program: tuple) -> set:
    """Every name `program` stores, those of its inlined branches included."""
    names: set = set()
    for entry in program:
        names.update(name for name in entry.step.outputs if name)
        if isinstance(entry.fn, InlineIf):
            names |= entry.fn.written
    return names


def _store_outputs(env: dict, step: Step, result) -> None:
    names = step.outputs
    if isinstance(result, tuple) or (isinstance(result, list) and len(names) > 1):
        values = result
    else:
        values = (result,)
    for name, value in zip(names, values):
        if name:
            env[name] = _as_value(value)


def _copied(value):
    """An array output as a fresh array (other values are returned as they are)."""
    return value.copy() if isinstance(value, _ARRAY) else value


def _as_value(value):
    """Kernels may return numpy scalars or Python numbers: store them as 0-d arrays."""
    if _SCALARS and isinstance(value, _SCALARS):
        return np.asarray(value)
    return value


def _domain_key(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


