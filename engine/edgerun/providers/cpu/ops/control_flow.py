"""Control flow: If, Loop, Scan and SequenceMap.

Each runs GRAPH attributes through `ctx.run_graph(graph, inputs)`, which binds `inputs`
positionally to the subgraph's inputs and returns the list of its outputs. Per-iteration scan
values are gathered in lists and stacked once at the end.
"""
import numpy as np

from ....ir import dtypes
from ..registry import kernel


def _is_true(cond) -> bool:
    """The truth of a single-element boolean tensor."""
    values = cond if type(cond) is np.ndarray else np.asarray(cond)
    if values.size != 1:
        raise ValueError(f"condition must hold exactly one element, got shape {np.shape(cond)}")
    return bool(values.reshape(-1)[0]) if values.ndim else bool(values)


def _empty_scan_output(value_info):
    """An empty tensor for a scan output that no iteration produced.

    Its dtype (and trailing shape, where fully known) come from the subgraph's declared output
    type; without a declared type it is a float32 array of shape (0,).
    """
    info = value_info.type if value_info is not None else None
    dtype = np.float32
    trailing = ()
    if info is not None and info.kind == "tensor":
        if info.elem_type:
            dtype = dtypes.numpy_dtype(info.elem_type)
        if info.shape is not None and all(isinstance(d, int) for d in info.shape):
            trailing = tuple(info.shape)
    return np.zeros((0,) + trailing, dtype=dtype)


def _stack_or_empty(values: list, value_info):
    return np.stack(values) if values else _empty_scan_output(value_info)


# --- If ---------------------------------------------------------------------------------------

@kernel("If")
def if_(ctx, cond, then_branch, else_branch):
    branch = then_branch if _is_true(cond) else else_branch
    return tuple(ctx.run_graph(branch, []))


# --- Loop -------------------------------------------------------------------------------------

@kernel("Loop")
def loop(ctx, max_trip_count=None, cond=None, *carried, body):
    """Run `body` while `cond` holds and fewer than `max_trip_count` iterations have run.

    Body inputs: (iteration_num, cond, carried...); body outputs: (cond, carried..., scans...).
    """
    num_carried = len(body.inputs) - 2
    if len(carried) != num_carried:
        raise ValueError(f"Loop body takes {num_carried} loop-carried values, "
                         f"the node passes {len(carried)}")
    num_scans = len(body.outputs) - 1 - num_carried
    trip_limit = None if max_trip_count is None else int(np.asarray(max_trip_count).reshape(-1)[0])
    keep_going = True if cond is None else _is_true(cond)

    state = list(carried)
    scans = [[] for _ in range(num_scans)]
    iteration = 0
    while keep_going and (trip_limit is None or iteration < trip_limit):
        outputs = ctx.run_graph(body, [np.array(iteration, dtype=np.int64),
                                       np.array(keep_going), *state])
        keep_going = _is_true(outputs[0])
        state = list(outputs[1:1 + num_carried])
        for values, value in zip(scans, outputs[1 + num_carried:]):
            values.append(value)
        iteration += 1

    scan_infos = body.outputs[1 + num_carried:]
    stacked = [_stack_or_empty(values, info) for values, info in zip(scans, scan_infos)]
    return tuple(state + stacked)


# --- Scan -------------------------------------------------------------------------------------

def _flag(flags, i: int) -> int:
    return int(flags[i]) if flags is not None and i < len(flags) else 0


def _scan_steps(ctx, body, states: list, inputs: list, input_reversed: list,
                output_reversed: list):
    """The Scan recurrence over inputs whose scan axis is already axis 0.

    Returns the final states and, per scan output, the list of per-step values in output
    order (reversed for a reverse-direction output).
    """
    lengths = {x.shape[0] for x in inputs}
    if len(lengths) > 1:
        raise ValueError(f"scan inputs disagree on the sequence length: {sorted(lengths)}")
    length = lengths.pop() if lengths else 0
    num_states = len(states)
    num_scans = len(body.outputs) - num_states
    collected: list = [[] for _ in range(num_scans)]
    for t in range(length):
        step_inputs = [x[length - 1 - t] if rev else x[t]
                       for x, rev in zip(inputs, input_reversed)]
        outputs = ctx.run_graph(body, states + step_inputs)
        states = list(outputs[:num_states])
        for values, value in zip(collected, outputs[num_states:]):
            values.append(value)
    for i, values in enumerate(collected):
        if output_reversed[i]:
            values.reverse()
    return states, collected


@kernel("Scan", since=9)
def scan_9(ctx, *inputs, body, num_scan_inputs, scan_input_axes=None,
           scan_input_directions=None, scan_output_axes=None, scan_output_directions=None):
    num_states = len(inputs) - num_scan_inputs
    states = list(inputs[:num_states])
    scan_inputs = []
    for i, x in enumerate(inputs[num_states:]):
        scan_inputs.append(np.moveaxis(x, _flag(scan_input_axes, i), 0))
    num_scans = len(body.outputs) - num_states
    states, collected = _scan_steps(
        ctx, body, states, scan_inputs,
        [_flag(scan_input_directions, i) for i in range(num_scan_inputs)],
        [_flag(scan_output_directions, i) for i in range(num_scans)])

    outputs = list(states)
    for i, values in enumerate(collected):
        stacked = _stack_or_empty(values, body.outputs[num_states + i])
        axis = _flag(scan_output_axes, i)
        if axis < 0:
            axis += stacked.ndim
        outputs.append(np.moveaxis(stacked, 0, axis) if axis else stacked)
    return tuple(outputs)


def _zero_padded_batch(rows: list, max_length: int, value_info):
    """Per-batch-row lists of step values as one [batch, max_length, ...] tensor; the steps
    past a row's sequence length are zeros."""
    sample = next((row[0] for row in rows if row), None)
    if sample is None:
        empty = _empty_scan_output(value_info)
        return np.zeros((len(rows), max_length) + empty.shape[1:], dtype=empty.dtype)
    out = np.zeros((len(rows), max_length) + sample.shape, dtype=sample.dtype)
    for b, row in enumerate(rows):
        if row:
            out[b, :len(row)] = np.stack(row)
    return out


@kernel("Scan", since=8)
def scan_8(ctx, sequence_lens=None, *inputs, body, num_scan_inputs, directions=None):
    """Opset 8: axis 0 is a batch axis, axis 1 the sequence; each batch row runs on its own."""
    num_states = len(inputs) - num_scan_inputs
    states, scan_inputs = inputs[:num_states], inputs[num_states:]
    batch = (states[0] if states else scan_inputs[0]).shape[0]
    max_length = scan_inputs[0].shape[1]
    lengths = ([max_length] * batch if sequence_lens is None
               else [int(n) for n in np.asarray(sequence_lens).reshape(-1)])
    num_scans = len(body.outputs) - num_states
    input_reversed = [_flag(directions, i) for i in range(num_scan_inputs)]

    final_states = [[] for _ in range(num_states)]
    scan_rows = [[] for _ in range(num_scans)]
    for b in range(batch):
        row_states, collected = _scan_steps(
            ctx, body, [s[b] for s in states], [x[b, :lengths[b]] for x in scan_inputs],
            input_reversed, [0] * num_scans)
        for values, value in zip(final_states, row_states):
            values.append(value)
        for rows, values in zip(scan_rows, collected):
            rows.append(values)
    outputs = [np.stack(values) for values in final_states]
    outputs += [_zero_padded_batch(rows, max_length, body.outputs[num_states + i])
                for i, rows in enumerate(scan_rows)]
    return tuple(outputs)


# --- SequenceMap ------------------------------------------------------------------------------

@kernel("SequenceMap", since=17)
def sequence_map(ctx, input_sequence, *additional_inputs, body):
    """Run `body` once per element; sequence inputs are indexed, tensor inputs broadcast."""
    count = len(input_sequence)
    for extra in additional_inputs:
        if isinstance(extra, list) and len(extra) != count:
            raise ValueError(f"SequenceMap input sequences differ in length: "
                             f"{count} and {len(extra)}")
    results = [[] for _ in body.outputs]
    for i in range(count):
        args = [input_sequence[i]]
        args += [extra[i] if isinstance(extra, list) else extra for extra in additional_inputs]
        for values, value in zip(results, ctx.run_graph(body, args)):
            values.append(value)
    return tuple(results)
