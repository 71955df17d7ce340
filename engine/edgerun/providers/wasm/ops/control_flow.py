"""If, Loop and Scan. If: the condition is read on the host (a small bool with its value attached) and the
chosen branch runs as a subgraph through `ctx.run_graph`, whose nodes were partitioned like
any others (so they run on wasm too). Branch outputs come back as host values and are
uploaded, so the If's consumers find wasm tensors as usual. Loop and Scan run their body the
same way once per iteration, handing it host copies of the carried values and step slices."""
from __future__ import annotations

from ....ir import dtypes
from . import operator
from .common import host_values, normalize_axis
from .tensor import split_parts, transpose
from ..device import WasmTensor


@operator("If")
def bind_if(dev, node, opset):
    then_branch, else_branch = node.attr("then_branch"), node.attr("else_branch")

    def run(ctx, cond, **_):
        values = dev.ints(cond)
        if len(values) != 1:
            raise ValueError(f"If condition must hold exactly one element, got shape "
                             f"{list(cond.shape)}")
        outputs = ctx.run_graph(then_branch if values[0] else else_branch, [])
        return tuple(dev.upload(v) for v in outputs)
    return run


def _host(dev, value):
    """A value as the subgraph run takes it: tensors downloaded, sequences element-wise."""
    if isinstance(value, list):
        return [_host(dev, v) for v in value]
    return dev.download(value) if isinstance(value, WasmTensor) else value


def _truth(dev, t) -> bool:
    values = dev.ints(dev.upload(t))
    if len(values) != 1:
        raise ValueError(f"condition must hold exactly one element, got {len(values)}")
    return bool(values[0])


def stack(dev, values: list, value_info) -> WasmTensor:
    """Per-iteration tensors stacked on a new leading axis; with none, an empty tensor of the
    subgraph output's declared type (and trailing shape, where fully known)."""
    if not values:
        info = value_info.type if value_info is not None else None
        elem_type, trailing = dtypes.FLOAT, ()
        if info is not None and info.kind == "tensor":
            elem_type = info.elem_type or elem_type
            if info.shape is not None and all(isinstance(d, int) for d in info.shape):
                trailing = tuple(info.shape)
        return dev.empty((0,) + trailing, elem_type)
    first = values[0]
    for v in values:
        if v.shape != first.shape or v.elem_type != first.elem_type:
            raise ValueError(f"scan outputs differ between iterations: {list(first.shape)} and "
                             f"{list(v.shape)}")
    y = dev.empty((len(values),) + first.shape, first.elem_type)
    for i, v in enumerate(values):
        if v.nbytes:
            dev.call("er_memcpy", y.ptr + i * v.nbytes, v.ptr, v.nbytes)
    return y


@operator("Loop")
@host_values
def bind_loop(dev, node, opset):
    """The body runs while its condition holds and fewer than max_trip_count iterations have
    run; body inputs (iteration, cond, carried...), outputs (cond, carried..., scans...)."""
    body = node.attr("body")

    def run(ctx, max_trip=None, cond=None, *carried, **_):
        num_carried = len(body.inputs) - 2
        if len(carried) != num_carried:
            raise ValueError(f"Loop body takes {num_carried} loop-carried values, the node "
                             f"passes {len(carried)}")
        limit = int(dev.ints(dev.upload(max_trip))[0]) if max_trip is not None else None
        keep_going = True if cond is None else _truth(dev, cond)
        state = list(carried)
        scans = [[] for _ in range(len(body.outputs) - 1 - num_carried)]
        iteration = 0
        while keep_going and (limit is None or iteration < limit):
            outputs = ctx.run_graph(body, [
                _host(dev, dev.from_ints([iteration], (), dtypes.INT64)),
                _host(dev, dev.from_ints([int(keep_going)], (), dtypes.BOOL)),
                *(_host(dev, v) for v in state)])
            outputs = [dev.upload(v) for v in outputs]
            keep_going = _truth(dev, outputs[0])
            state = outputs[1:1 + num_carried]
            for values, value in zip(scans, outputs[1 + num_carried:]):
                values.append(value)
            iteration += 1
        infos = body.outputs[1 + num_carried:]
        return tuple(state + [stack(dev, values, info) for values, info in zip(scans, infos)])
    return run


def check_scan(node, opset) -> str:
    return "Scan-8 (batch axis and sequence_lens)" if opset < 9 else ""


@operator("Scan", check=check_scan)
@host_values
def bind_scan(dev, node, opset):
    """Opset 9+: states, then scan inputs sliced along their scan axes (either direction);
    per-step scan outputs stacked along their output axes."""
    body = node.attr("body")
    num_scan_inputs = int(node.attr("num_scan_inputs"))
    flags = {key: list(node.attr(key) or []) for key in (
        "scan_input_axes", "scan_input_directions", "scan_output_axes",
        "scan_output_directions")}

    def flag(key, i):
        values = flags[key]
        return int(values[i]) if i < len(values) else 0

    def run(ctx, *inputs, **_):
        num_states = len(inputs) - num_scan_inputs
        states = [dev.upload(v) for v in inputs[:num_states]]
        steps = []
        for i, x in enumerate(inputs[num_states:]):
            x = dev.upload(x)
            axis = normalize_axis(flag("scan_input_axes", i), len(x.shape))
            moved = transpose(dev, x, [axis] + [a for a in range(len(x.shape)) if a != axis]) \
                if axis else x
            steps.append(split_parts(dev, moved, 0, [1] * moved.shape[0]))
        lengths = {len(s) for s in steps}
        if len(lengths) > 1:
            raise ValueError(f"scan inputs disagree on the sequence length: {sorted(lengths)}")
        length = lengths.pop() if lengths else 0
        num_scans = len(body.outputs) - num_states
        collected = [[] for _ in range(num_scans)]
        for t in range(length):
            step_inputs = []
            for i, parts in enumerate(steps):
                part = parts[length - 1 - t if flag("scan_input_directions", i) else t]
                step_inputs.append(part.view(part.shape[1:]))
            outputs = ctx.run_graph(body, [_host(dev, v) for v in states + step_inputs])
            outputs = [dev.upload(v) for v in outputs]
            states = outputs[:num_states]
            for values, value in zip(collected, outputs[num_states:]):
                values.append(value)
        results = list(states)
        for i, values in enumerate(collected):
            if flag("scan_output_directions", i):
                values.reverse()
            stacked = stack(dev, values, body.outputs[num_states + i])
            axis = flag("scan_output_axes", i)
            axis = axis + len(stacked.shape) if axis < 0 else axis
            if axis:
                order = list(range(1, len(stacked.shape)))
                order.insert(axis, 0)
                stacked = transpose(dev, stacked, order)
            results.append(stacked)
        return tuple(results)
    return run
