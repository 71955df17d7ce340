"""A plan's program as one generated Python function: the steps written out in order.

`run()`'s loop pays, per step, for unpacking the step, iterating its inputs and frees and
branching on what it holds. Written out, each step is one call with its inputs read by name,
one store and its `del`s: about a third less time per node on graphs of tiny operators. The
function is built once per plan; a failing step is found by the step number kept in `i`.
"""
from __future__ import annotations

from typing import Callable

# Past this many steps the generated source takes longer to compile than it saves.
MAX_STEPS = 4000


def straight_line(program: tuple, array_type, store: Callable, failure: Callable,
                  passthrough: tuple) -> Callable:
    """fn(env) running `program` (GraphExecutor's step tuples) against `env`, or None when
    the program is empty or too long. `store(env, step, result)` stores a result that is not one
    array; `failure(step, exception)` builds the error raised for a failing kernel;
    exceptions of the `passthrough` types are re-raised unchanged."""
    if not program or len(program) > MAX_STEPS:
        return None
    names = {"ARRAY": array_type, "store": store, "failure": failure,
             "PASSTHROUGH": passthrough, "steps": [entry[6] for entry in program]}
    lines = ["def run_program(env):", "    i = 0", "    try:"]
    for i, (fn, ctx, inputs, attrs, single, frees, step) in enumerate(program):
        names[f"f{i}"] = fn
        args = [f"c{i}"] if ctx is not None else ["env"]
        if ctx is not None:
            names[f"c{i}"] = ctx
        args += [f"env[{name!r}]" for name in inputs]
        if attrs and ctx is not None:
            names[f"a{i}"] = attrs
            args.append(f"**a{i}")
        lines.append(f"        i = {i}")
        lines.append(f"        r = f{i}({', '.join(args)})")
        if single:
            lines.append(f"        if type(r) is ARRAY: env[{single!r}] = r")
            lines.append(f"        else: store(env, steps[{i}], r)")
        else:
            lines.append(f"        store(env, steps[{i}], r)")
        for name in frees:
            lines.append(f"        del env[{name!r}]")
    lines += ["    except PASSTHROUGH:", "        raise",
              "    except Exception as e:",
              "        raise failure(steps[i], e) from e"]
    code = compile("\n".join(lines), "<edgerun plan>", "exec")
    exec(code, names)
    return names["run_program"]
