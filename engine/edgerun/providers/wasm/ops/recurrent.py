"""LSTM (forward, reverse, bidirectional; peepholes; clip) on the packed SGEMM, and RNN and
GRU (every activation, layout 1, sequence_lens) on er_rnn_step.

Per direction: one GEMM computes X W^T for every step at once, on top of the summed biases;
then each step accumulates H_prev R^T into its rows in place and er_lstm_cell finishes the
step (gate activations, cell and hidden state), writing H straight into Y. Gate order is
ONNX's: i, o, f, c.
"""
from __future__ import annotations

from array import array

from ....ir import dtypes
from ....ir.unary_ops import RNN_ACTIVATIONS, rnn_activation
from . import operator
from .common import float_or_refused
from .conv import _text
from .elementwise import BINARY, binary
from .matmul import broadcast_into
from .tensor import copy_strided

DEFAULT_ACTIVATIONS = ["Sigmoid", "Tanh", "Tanh"]
F32 = 4


def check_lstm(node, opset) -> str:
    acts = [_text(a) for a in node.attr("activations") or []]
    if acts and any(a != d for a, d in zip(acts, DEFAULT_ACTIVATIONS * 2)):
        return f"LSTM activations {acts} (the wasm kernel does Sigmoid, Tanh, Tanh)"
    if int(node.attr("input_forget", 0)):
        return "LSTM input_forget=1"
    if int(node.attr("layout", 0)):
        return "LSTM layout=1 (batch first)"
    return ""


@operator("LSTM", check=check_lstm)
def bind_lstm(dev, node, opset):
    direction = _text(node.attr("direction", b"forward"))
    clip = float(node.attr("clip", 0.0) or 0.0)
    hidden_attr = node.attr("hidden_size")

    def run(ctx, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None,
            **_):
        seq, batch, input_size = x.shape
        dirs, hidden = w.shape[0], int(hidden_attr or r.shape[-1])
        if dirs != (2 if direction == "bidirectional" else 1):
            raise ValueError(f"LSTM direction={direction} with weights for {dirs} directions")
        if sequence_lens is not None and any(v != seq for v in dev.ints(sequence_lens)):
            return run_ragged(dev, direction, x, w, r, b, dev.ints(sequence_lens), initial_h,
                              initial_c, p, hidden, clip)
        y = dev.empty((seq, dirs, batch, hidden))
        y_h, y_c = dev.empty((dirs, batch, hidden)), dev.empty((dirs, batch, hidden))
        for d in range(dirs):
            reverse = direction == "reverse" or d == 1
            run_direction(dev, d, reverse, x, w, r, b, initial_h, initial_c, p, y, y_h, y_c,
                          (seq, batch, input_size, dirs, hidden), clip)
        return y, y_h, y_c
    return float_or_refused(dev, node, opset, run, float_inputs=[0, 1, 2, 3, 5, 6, 7])


def run_direction(dev, d, reverse, x, w, r, b, initial_h, initial_c, p, y, y_h, y_c, dims,
                  clip):
    seq, batch, input_size, dirs, hidden = dims
    g4 = 4 * hidden
    state = batch * hidden * F32                      # bytes of one [batch, hidden] state
    gates = dev.empty((seq * batch, g4))
    accumulate = 0
    if b is not None:                                 # Wb + Rb under every row, once
        bias = binary(dev, "er_binary", BINARY["Add"], b.part(d * 2 * g4 * F32, (g4,)),
                      b.part((d * 2 + 1) * g4 * F32, (g4,)), dtypes.FLOAT)
        broadcast_into(dev, bias, gates)
        accumulate = 1
    dev.call("er_sgemm", seq * batch, g4, input_size, x.ptr, input_size, 1,
             w.ptr + d * g4 * input_size * F32, 1, input_size, gates.ptr, g4, accumulate)
    c = y_c.part(d * state, (batch, hidden))
    if initial_c is not None:
        copy_bytes(dev, c.ptr, initial_c.ptr + d * state, state)
    else:
        dev.fill(c, bytes(F32))
    h_prev = initial_h.ptr + d * state if initial_h is not None else 0
    r_ptr = r.ptr + d * g4 * hidden * F32
    p_ptr = p.ptr + d * 3 * hidden * F32 if p is not None else 0
    for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
        rows = gates.ptr + t * batch * g4 * F32
        if h_prev:
            dev.call("er_sgemm", batch, g4, hidden, h_prev, hidden, 1, r_ptr, 1, hidden, rows,
                     g4, 1)
        h = y.ptr + (t * dirs + d) * state
        dev.call("er_lstm_cell", rows, g4, c.ptr, p_ptr, c.ptr, hidden, h, hidden, batch,
                 hidden, clip)
        h_prev = h
    copy_bytes(dev, y_h.ptr + d * state, h_prev, state)


def run_ragged(dev, direction, x, w, r, b, lengths, initial_h, initial_c, p, hidden, clip):
    """LSTM over sequences of different lengths: each batch entry runs alone over its own
    steps (a reverse direction starts at its last one); Y is zero past each length and Y_h,
    Y_c hold the state after the entry's last step."""
    seq, batch, input_size = x.shape
    dirs = w.shape[0]
    if any(not 1 <= n <= seq for n in lengths) or len(lengths) != batch:
        raise ValueError(f"LSTM sequence_lens {list(lengths)} must hold {batch} lengths in "
                         f"1..{seq}")
    y = dev.zeros((seq, dirs, batch, hidden))
    y_h, y_c = dev.empty((dirs, batch, hidden)), dev.empty((dirs, batch, hidden))
    state_strides = [batch * hidden, hidden, 1]            # (dirs, batch, hidden)
    for entry, length in enumerate(lengths):
        x_b = dev.empty((length, 1, input_size))
        copy_strided(dev, x_b.ptr, x.ptr + entry * input_size * F32, F32,
                     (length, input_size), [input_size, 1], [batch * input_size, 1])
        states = []
        for state in (initial_h, initial_c):
            if state is None:
                states.append(None)
                continue
            one = dev.empty((dirs, 1, hidden))
            copy_strided(dev, one.ptr, state.ptr + entry * hidden * F32, F32, (dirs, hidden),
                         [hidden, 1], state_strides[::2])
            states.append(one)
        y_b = dev.empty((length, dirs, 1, hidden))
        yh_b, yc_b = dev.empty((dirs, 1, hidden)), dev.empty((dirs, 1, hidden))
        for d in range(dirs):
            reverse = direction == "reverse" or d == 1
            run_direction(dev, d, reverse, x_b, w, r, b, states[0], states[1], p, y_b, yh_b,
                          yc_b, (length, 1, input_size, dirs, hidden), clip)
        copy_strided(dev, y.ptr + entry * hidden * F32, y_b.ptr, F32, (length, dirs, hidden),
                     [dirs * batch * hidden, batch * hidden, 1], [dirs * hidden, hidden, 1])
        for whole, part in ((y_h, yh_b), (y_c, yc_b)):
            copy_strided(dev, whole.ptr + entry * hidden * F32, part.ptr, F32, (dirs, hidden),
                         state_strides[::2], [hidden, 1])
    return y, y_h, y_c


def copy_bytes(dev, dst: int, src: int, nbytes: int) -> None:
    if nbytes:
        dev.set_args([nbytes, 1, 1])
        dev.call("er_copy_strided", dst, src, 1, 1)


# ---- RNN and GRU ----------------------------------------------------------------------------

RNN_DEFAULTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"]}


def activations_of(node, directions: int) -> list:
    """Per direction, the (code, alpha, beta) of each activation, activation_alpha/beta
    consumed in order by the activations that take them."""
    from .elementwise import MAP_UNARY

    defaults = RNN_DEFAULTS[node.op_type]
    names = [_text(a) for a in node.attr("activations") or []] or defaults * directions
    if len(names) == len(defaults) and directions == 2:
        names = names * 2
    if len(names) != len(defaults) * directions:
        raise ValueError(f"{node.op_type}: expected {len(defaults) * directions} activations, "
                         f"got {names}")
    alphas = iter(node.attr("activation_alpha") or [])
    betas = iter(node.attr("activation_beta") or [])
    out = []
    for name in names:
        op, p0, p1 = rnn_activation(name, alphas, betas)
        out.append((MAP_UNARY.index(op), p0, p1))
    per = len(defaults)
    return [out[d * per:(d + 1) * per] for d in range(directions)]


def check_rnn(node, opset) -> str:
    for name in node.attr("activations") or []:
        if _text(name).lower() not in RNN_ACTIVATIONS:
            return f"{node.op_type} activation {_text(name)!r}"
    return ""


@operator("RNN", "GRU", check=check_rnn)
def bind_rnn(dev, node, opset):
    """Per direction: X W^T + biases for every step in one GEMM, then er_rnn_step per step.
    layout=1 is transposed in and out; sequence_lens shorter than the sequence run each
    batch entry over its own steps (Y zero past them, Y_h the state after the last)."""
    gru = node.op_type == "GRU"
    gates_per = 3 if gru else 1
    direction = _text(node.attr("direction", b"forward"))
    clip = float(node.attr("clip", 0.0) or 0.0)
    layout = int(node.attr("layout", 0))
    lbr = int(node.attr("linear_before_reset", 0))
    dirs = 2 if direction == "bidirectional" else 1
    acts = activations_of(node, dirs)

    def run(ctx, x, w, r, b=None, sequence_lens=None, initial_h=None, **_):
        from .tensor import transpose

        if layout:
            x = transpose(dev, x, [1, 0, 2])
            initial_h = transpose(dev, initial_h, [1, 0, 2]) if initial_h is not None else None
        seq, batch, _ = x.shape
        hidden = r.shape[-1]
        if w.shape[0] != dirs:
            raise ValueError(f"{node.op_type} direction={direction} with weights for "
                             f"{w.shape[0]} directions")
        lengths = list(dev.ints(sequence_lens)) if sequence_lens is not None else [seq] * batch
        if len(lengths) != batch or any(not 0 <= n <= seq for n in lengths):
            raise ValueError(f"{node.op_type}: sequence_lens {lengths} must hold {batch} "
                             f"lengths in 0..{seq}")
        y = dev.zeros((seq, dirs, batch, hidden))
        y_h = dev.empty((dirs, batch, hidden))
        groups = [list(range(batch))] if all(n == seq for n in lengths) else \
            [[entry] for entry in range(batch)]
        for entries in groups:
            steps = lengths[entries[0]] if len(entries) == 1 else seq
            for d in range(dirs):
                _rnn_direction(dev, gru, gates_per, d, direction == "reverse" or d == 1, x, w,
                               r, b, initial_h, y, y_h, entries, steps, batch, hidden, lbr,
                               acts[d], clip)
        if layout:
            return transpose(dev, y, [2, 0, 1, 3]), transpose(dev, y_h, [1, 0, 2])
        return y, y_h
    return float_or_refused(dev, node, opset, run, float_inputs=[0, 1, 2, 3, 5])


def _rnn_direction(dev, gru, gates_per, d, reverse, x, w, r, b, initial_h, y, y_h, entries,
                   steps, batch, hidden, lbr, acts, clip):
    """One direction over the batch entries `entries` (all of them, or one ragged entry)."""
    seq, _, input_size = x.shape
    width = gates_per * hidden
    rows = len(entries)
    first = entries[0]
    state_strides = [batch * hidden, hidden, 1]
    h0 = None
    if initial_h is not None:
        h0 = dev.empty((rows, hidden))
        copy_strided(dev, h0.ptr, initial_h.ptr + (d * batch + first) * hidden * F32, F32,
                     (rows, hidden), [hidden, 1], state_strides[1:])
    if steps == 0:                                   # nothing to run: the initial state
        if h0 is not None:
            copy_strided(dev, y_h.ptr + (d * batch + first) * hidden * F32, h0.ptr, F32,
                         (rows, hidden), state_strides[1:], [hidden, 1])
        else:
            dev.fill(y_h.part((d * batch + first) * hidden * F32, (rows, hidden)), bytes(F32))
        return
    xs = dev.empty((steps, rows, input_size))       # this group's steps of x
    copy_strided(dev, xs.ptr, x.ptr + first * input_size * F32, F32, (steps, rows, input_size),
                 [rows * input_size, input_size, 1], [batch * input_size, input_size, 1])
    gates = dev.empty((steps * rows, width))
    rbh = None
    accumulate = 0
    if b is not None:
        wb = b.part(d * 2 * width * F32, (width,))
        rb = b.part((d * 2 + 1) * width * F32, (width,))
        if gru:          # the h gate's Rb joins inside the reset (er_rnn_step adds it)
            bias = dev.empty((width,))
            copy_strided(dev, bias.ptr, wb.ptr, F32, (width,), [1], [1])
            summed = binary(dev, "er_binary", BINARY["Add"], wb.part(0, (2 * hidden,)),
                            rb.part(0, (2 * hidden,)), dtypes.FLOAT)
            copy_strided(dev, bias.ptr, summed.ptr, F32, (2 * hidden,), [1], [1])
            rbh = rb.part(2 * hidden * F32, (hidden,))
        else:
            bias = binary(dev, "er_binary", BINARY["Add"], wb, rb, dtypes.FLOAT)
        broadcast_into(dev, bias, gates)
        accumulate = 1
    dev.call("er_sgemm", steps * rows, width, input_size, xs.ptr, input_size, 1,
             w.ptr + d * width * input_size * F32, 1, input_size, gates.ptr, width, accumulate)
    params = dev.empty((4,))
    (f, fa, fb), (g, ga, gb) = acts[0], acts[-1]
    dev.write(params.ptr, array("f", [fa, fb, ga, gb]))
    scratch = dev.scratch(hidden * F32)
    r_ptr = r.ptr + d * width * hidden * F32
    h_prev = h0.ptr if h0 is not None else 0
    step_state = rows * hidden * F32
    out = dev.empty((steps, rows, hidden))
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        h = out.ptr + t * step_state
        dev.call("er_rnn_step", int(gru), gates.ptr + t * rows * width * F32, h_prev, r_ptr,
                 rbh.ptr if rbh is not None else 0, h, rows, hidden, lbr, f, g, params.ptr,
                 clip, scratch.ptr)
        h_prev = h
    # Y[t, d, first:first + rows] and Y_h[d, first:first + rows]
    copy_strided(dev, y.ptr + (d * batch + first) * hidden * F32, out.ptr, F32,
                 (steps, rows, hidden), [y.shape[1] * batch * hidden, hidden, 1],
                 [rows * hidden, hidden, 1])
    copy_strided(dev, y_h.ptr + (d * batch + first) * hidden * F32, h_prev, F32,
                 (rows, hidden), state_strides[1:], [hidden, 1])
