"""Shape computations remembered between runs.

Exported models compute many small values from tensor shapes: Shape -> Gather -> Equal -> If,
Shape -> Slice -> Concat -> Reshape. They change only when an input's shape does, yet each
node costs a kernel call per run, which on streaming models (silero VAD: a third of its nodes)
weighs as much as the arithmetic. Such a value is *shape-determined*: the output of Shape or
Size, or of a cheap deterministic operator whose inputs are all constants or
shape-determined. Its CPU step keeps its last inputs and result:

- Shape and Size compare the shape of their input with the last one;
- the others compare their inputs by identity with the last ones. Constants are the same
  objects on every run, and a remembered result is handed out as the same object again, so
  the chain downstream of an unchanged shape is recognised one `is` test per input.

The generated plan code (straight_line) reads the step's memory and tests the key itself,
calling the step only on a miss.

Kernels never write to their inputs or outputs, so a remembered array stays valid. Values
that leave the graph are not remembered: callers may write to what `run` returns; and an
output computed from a remembered value (a Reshape or Squeeze of one is a view of it, an If
may return it as is) is handed out as a copy (`outputs_sharing_memory`). A result
is remembered in the form env stores (a numpy scalar as a 0-d array): otherwise each run
would store a fresh array and the steps downstream would never see the same object.
"""
from __future__ import annotations

from typing import Callable

from ..ir.walk import subgraph_reads
from .kernel_context import same_objects
from .plan import Step

SHAPE_ROOTS = {"Shape", "Size"}
# deterministic, cheap on small tensors, no subgraphs or sequences
SHAPE_OPS = {"Abs", "Add", "And", "Cast", "Ceil", "Concat", "ConstantOfShape", "Div",
             "Equal", "Expand", "Floor", "Gather", "Greater", "GreaterOrEqual", "Identity",
             "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul", "Neg", "Not", "Or", "Range",
             "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSum", "Reshape", "Slice",
             "Squeeze", "Sub", "Tile", "Transpose", "Unsqueeze", "Where", "Xor"}
# results larger than this are recomputed rather than kept alive between runs
MAX_REMEMBERED_ELEMENTS = 1 << 16


def shape_determined_steps(steps: list, constants, graph_outputs) -> dict:
    """Index -> "shape" (a root, keyed by its input's shape) or "inputs" (keyed by the
    identity of its inputs) for every CPU step whose result can be remembered."""
    determined = set(constants)
    chosen: dict = {}
    for i, step in enumerate(steps):
        node = step.node
        if step.provider != "cpu" or node.domain not in ("", "ai.onnx") or \
                any(o in graph_outputs for o in step.outputs if o):
            continue
        if node.op_type in SHAPE_ROOTS and step.inputs and step.inputs[0]:
            chosen[i] = "shape"
        elif node.op_type in SHAPE_OPS and all(n in determined for n in step.inputs if n):
            chosen[i] = "inputs"
        else:
            continue
        determined.update(o for o in step.outputs if o)
    return chosen


def outputs_sharing_memory(steps: list, remembered: dict, output_keys: tuple) -> tuple:
    """Positions in `output_keys` of the graph outputs a step computes from a remembered
    value (read directly or by its subgraphs): they may be that value or a view of it."""
    kept = {name for i in remembered for name in steps[i].outputs if name}
    risky = {name for step in steps
             if any(n in kept for n in step.inputs) or kept & subgraph_reads(step.node)
             for name in step.outputs if name}
    return tuple(i for i, key in enumerate(output_keys) if key in risky)


def remembering(step: Step, kind: str, as_value: Callable):
    """The step's kernel, returning its last result while its key is unchanged. `as_value`:
    the form env stores a kernel's single result in."""
    fn = step.fn
    last = [None]               # (key, result), replaced whole: concurrent runs stay consistent

    def keep(key, result):
        if not isinstance(result, (tuple, list)):
            result = as_value(result)
        if _small(result):
            last[0] = (key, result)
        return result

    if kind == "shape":
        def by_shape(ctx, data, **attrs):
            entry = last[0]
            shape = data.shape
            if entry is not None and entry[0] == shape:
                return entry[1]
            return keep(shape, fn(ctx, data, **attrs))
        remembered = by_shape
    else:
        def by_inputs(ctx, *inputs, **attrs):
            entry = last[0]
            if entry is not None and same_objects(entry[0], inputs):
                return entry[1]
            return keep(inputs, fn(ctx, *inputs, **attrs))
        remembered = by_inputs
    # what generated plan code reads to test the key itself, without the call (straight_line)
    remembered.memory, remembered.keyed_by = last, kind  # type: ignore[attr-defined]
    return remembered


def _small(result) -> bool:
    values = result if isinstance(result, tuple) else (result,)
    return all(getattr(v, "size", MAX_REMEMBERED_ELEMENTS + 1) <= MAX_REMEMBERED_ELEMENTS
               for v in values)
