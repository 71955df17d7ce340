"""A plan's program as one generated Python function: the steps written out in order.

`run()`'s loop pays, per step, for unpacking the step, iterating its inputs and frees and
branching on what it holds. Written out, each step is one call with its inputs read by name,
one store and its `del`s: about a third less time per node on graphs of tiny operators. Values
live in Python locals where nothing outside the function needs them (see `_locals`), which
halves what each read and store costs again. A step whose result is remembered between runs
(shape_memo) tests its key in place and calls nothing on a hit; a CPU node that only
re-views a tensor by constant axes or bounds (Unsqueeze, Squeeze, Slice, Gather of one index,
Reshape, Identity) is written as its numpy expression instead of a kernel call (inline_ops).
The function is built once per plan; a failing step is found by the line its exception left.
Its source is `fn.source` (`edgerun explain MODEL --plan` prints it) and linecache holds it
under `<edgerun plan N>`, so tracebacks show the generated line.

A CPU If whose branches store no name the parent graph uses is written out too (`InlineIf`):
the condition picks one branch's steps in place, instead of a call that builds the branch's
own env (silero VAD runs seven Ifs per call, about 2 us each through a call).
"""
from __future__ import annotations

import itertools
import linecache
import weakref
from dataclasses import dataclass
from typing import Callable, Optional

from ..ir.walk import subgraph_reads
from .inline_ops import inline_expression

# Past this many steps the generated source takes longer to compile than it saves.
MAX_STEPS = 4000
_PLAN_NUMBERS = itertools.count(1)


@dataclass(frozen=True)
class Branch:
    """An If branch written into its parent's function: its program, the constants its steps
    read (bound in the generated code; env never holds them), the keys of its outputs, and
    the values it leaves in env (its outputs, values nothing reads), deleted after."""
    program: tuple
    constants: dict
    output_keys: tuple
    leftovers: tuple


@dataclass(frozen=True)
class InlineIf:
    """A CPU If step whose branches are written into the parent's function. Called (by the
    step loop, or where the condition is not one numpy element) it is `fallback`, the If's
    usual fn(env, cond). `written`: every name its branches store, nested ones included."""
    fallback: Callable
    then_branch: Branch
    else_branch: Branch
    written: frozenset

    def __call__(self, env, cond):
        return self.fallback(env, cond)


def step_count(program: tuple) -> int:
    """Steps in `program`, inlined branches included."""
    count = 0
    for entry in program:
        count += 1
        if isinstance(entry.fn, InlineIf):
            count += step_count(entry.fn.then_branch.program)
            count += step_count(entry.fn.else_branch.program)
    return count


def straight_line(program: tuple, array_type, store: Callable, failure: Callable,
                  passthrough: tuple, outputs: tuple,
                  fixed: Optional[dict] = None) -> Optional[Callable]:
    """fn(env) running `program` (GraphExecutor's step tuples) against `env`, or None when
    the program is empty or too long. `store(env, step, result)` stores a result that is not one
    array; `failure(step, exception)` builds the error raised for a failing kernel;
    exceptions of the `passthrough` types are re-raised unchanged; `outputs`: the names read
    from env after the run; `fixed`: values env holds on every run (constants no feed
    replaces), which simple operators' expressions may build on (inline_ops)."""
    if not _writable(program):
        return None
    return _generate(program, array_type, store, failure, passthrough, outputs, fixed)


def compiled_on_first_call(program: tuple, *how) -> Optional[Callable]:
    """`straight_line(program, *how)`, generated and compiled when first called (subgraph
    plans: a branch written into its parent's function never pays for its own). None where
    straight_line gives None."""
    if not _writable(program):
        return None
    compiled: list = []

    def run_program(env):
        if not compiled:
            compiled.append(_generate(program, *how))
        return compiled[0](env)

    return run_program


def _writable(program: tuple) -> bool:
    return bool(program) and step_count(program) <= MAX_STEPS


def _generate(program: tuple, array_type, store: Callable, failure: Callable,
              passthrough: tuple, outputs: tuple, fixed: Optional[dict] = None) -> Callable:
    def one_value(step, result):
        """What `store` keeps for a single-output step's result that is not an array."""
        scratch = {}
        store(scratch, step, result)
        return scratch[step.single_output]

    stored: set = set()
    resident = set(outputs)
    _collect_names(program, stored, resident)
    fixed = {name: value for name, value in (fixed or {}).items()
             if name not in stored and name not in resident}
    writer = _Writer({"ARRAY": array_type, "store": store, "failure": failure,
                      "PASSTHROUGH": passthrough, "one_value": one_value},
                     _locals(stored, resident), fixed)
    writer.lines += ["def run_program(env):", "    try:"]
    writer.write(program, {}, " " * 8)
    writer.lines += ["    except PASSTHROUGH:", "        raise",
                     "    except Exception as e:",
                     "        raise failure(steps[STEP_AT[e.__traceback__.tb_lineno]], e) from e"]
    writer.names["steps"] = writer.steps
    writer.names["STEP_AT"] = writer.step_at
    source = "\n".join(writer.lines) + "\n"
    filename = f"<edgerun plan {next(_PLAN_NUMBERS)}>"
    # tracebacks and debuggers show the generated lines: linecache serves this source
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), writer.names)
    run_program = writer.names["run_program"]
    run_program.source = source
    weakref.finalize(run_program, linecache.cache.pop, filename, None)
    return run_program


def _locals(stored: set, resident: set) -> dict:
    """Value name -> the Python local that holds it in the generated function: every single
    array a written step stores, but those that must be found in env (`resident`: the graph's
    outputs, what steps with subgraphs store or read through them (their subgraphs see env),
    and multi-output steps' results). An inlined If whose condition is not a one-element
    array goes through its kernel: the locals its branches read are copied into env just
    before."""
    return {name: f"v{i}" for i, name in enumerate(sorted(stored - resident))}


def _collect_names(program: tuple, stored: set, resident: set) -> None:
    """Add to `stored` the single arrays the program's written steps store, and to
    `resident` the names that must live in env (see `_locals`)."""
    for fn, ctx, inputs, attrs, single, frees, step in program:
        outputs = {name for name in step.outputs if name}
        if isinstance(fn, InlineIf):
            resident |= outputs
            _collect_names(fn.then_branch.program, stored, resident)
            _collect_names(fn.else_branch.program, stored, resident)
        elif ctx is None:
            resident |= outputs | subgraph_reads(step.node)
        elif single:
            stored.add(single)
        else:
            resident |= outputs


class _Writer:
    """Source lines of one generated function and the names its code refers to. Values
    live in Python locals (`local`: name -> identifier) where they can, else in env: a
    local read or write costs about half a dict's."""

    def __init__(self, names: dict, local: dict, fixed: dict):
        self.names = names
        self.local = local
        self.fixed = fixed              # env's values that are the same on every run
        self.lines: list = []
        self.steps: list = []           # step number -> Step, for failure()
        self.step_at: dict = {}         # source line number -> the step it belongs to

    def bind(self, value) -> str:
        name = f"k{len(self.names)}"
        self.names[name] = value
        return name

    def ref(self, name: str, constants: dict) -> str:
        """Source reading value `name`: a bound constant of an inlined branch, a local, or
        env's."""
        if name in constants:
            return self.bind(constants[name])
        return self.target(name)

    def target(self, name: str) -> str:
        """Source naming where value `name` lives (to read, store or delete it)."""
        return self.local.get(name) or f"env[{name!r}]"

    def write(self, program: tuple, constants: dict, pad: str) -> None:
        for fn, ctx, inputs, attrs, single, frees, step in program:
            i = len(self.steps)
            self.steps.append(step)
            first_line = len(self.lines) + 1
            node = step.node
            self.lines.append(f"{pad}# {node.op_type} {node.name!r} on {step.provider}"
                              .replace("\n", " "))
            if isinstance(fn, InlineIf):
                self.write_if(i, fn, inputs, single, step, constants, pad)
            else:
                self.write_call(i, fn, ctx, inputs, attrs, single, constants, pad, step)
            for name in frees:
                self.lines.append(f"{pad}del {self.target(name)}")
            for line in range(first_line, len(self.lines) + 1):   # a failure's line: its step
                self.step_at.setdefault(line, i)

    def write_call(self, i, fn, ctx, inputs, attrs, single, constants, pad, step=None,
                   first=None):
        self.names[f"f{i}"] = fn
        args = [f"c{i}"] if ctx is not None else ["env"]
        if ctx is not None:
            self.names[f"c{i}"] = ctx
        args += [first] if first else [self.ref(name, constants) for name in inputs]
        if attrs and ctx is not None:
            self.names[f"a{i}"] = attrs
            args.append(f"**a{i}")
        memory = getattr(fn, "memory", None)
        expression = None
        if memory is None and step is not None and ctx is not None and \
                step.provider == "cpu" and step.node.domain in ("", "ai.onnx"):
            expression = self.inline(step, inputs, attrs, args[1:len(inputs) + 1], constants)
        if memory is not None and not first:
            self.write_memory_test(i, memory, fn.keyed_by, inputs, args[1:], constants, pad)
            self.lines.append(f"{pad}else: r = f{i}({', '.join(args)})")
        elif expression is not None:
            self.lines.append(f"{pad}r = {expression}")
        else:
            self.lines.append(f"{pad}r = f{i}({', '.join(args)})")
        if single in self.local:
            self.lines.append(f"{pad}{self.local[single]} = r if type(r) is ARRAY else "
                              f"one_value(steps[{i}], r)")
        elif single:
            self.lines.append(f"{pad}if type(r) is ARRAY: env[{single!r}] = r")
            self.lines.append(f"{pad}else: store(env, steps[{i}], r)")
        else:
            self.lines.append(f"{pad}store(env, steps[{i}], r)")

    def inline(self, step, inputs, attrs, sources, constants: dict):
        """The node as one numpy expression (inline_ops), or None: its kernel is called."""
        def constant(j):
            name = inputs[j]
            if name in constants:
                return constants[name]
            return self.fixed.get(name)

        sources = [source if name else None for name, source in zip(inputs, sources)]
        return inline_expression(step.node.op_type, attrs, sources, constant, self.bind)

    def write_memory_test(self, i, memory: list, keyed_by: str, inputs, sources: list,
                          constants: dict, pad: str) -> None:
        """`r = ` a remembered result (shape_memo) when its key still holds, tested in
        place: the call, its argument packing and the wrapper's own test cost several times
        as much on the shape chains that streaming models run every time. `sources`: the
        call's input arguments."""
        self.names[f"m{i}"] = memory
        if keyed_by == "shape":
            test = f"m[0] == {sources[0]}.shape"
        else:           # a bound constant is the same object on every run: not tested
            test = " and ".join(f"m[0][{j}] is {source}"
                                for j, (name, source) in enumerate(zip(inputs, sources))
                                if name not in constants) or "True"
        self.lines.append(f"{pad}m = m{i}[0]")
        self.lines.append(f"{pad}if m is not None and {test}: r = m[1]")

    def write_if(self, i, inline: InlineIf, inputs, single, step, constants, pad):
        """The branch chosen by a one-element numpy condition, written in place; any other
        condition goes through the If's function (whose kernel explains what is wrong)."""
        inner = pad + " " * 8
        self.lines.append(f"{pad}cond = {self.ref(inputs[0], constants)}")
        self.lines.append(f"{pad}if type(cond) is ARRAY and cond.size == 1:")
        self.lines.append(f"{pad}    if cond.reshape(-1)[0]:")
        self.write_branch(inline.then_branch, step, constants, inner)
        self.lines.append(f"{pad}    else:")
        self.write_branch(inline.else_branch, step, constants, inner)
        self.lines.append(f"{pad}else:")
        for name in sorted(subgraph_reads(step.node) & self.local.keys()):   # what it reads
            self.lines.append(f"{pad}    env[{name!r}] = {self.local[name]}")
        self.write_call(i, inline.fallback, None, inputs, {}, single, constants, pad + "    ",
                        first="cond")

    def write_branch(self, branch: Branch, step, constants: dict, pad: str) -> None:
        scope = {**constants, **branch.constants}       # the branch's names shadow outer ones
        self.lines.append(f"{pad}pass")
        self.write(branch.program, scope, pad)
        for name, key in zip(step.outputs, branch.output_keys):
            if name:
                self.lines.append(f"{pad}env[{name!r}] = {self.ref(key, scope)}")
        for name in branch.leftovers:
            if name not in step.outputs:
                self.lines.append(f"{pad}del {self.target(name)}")
