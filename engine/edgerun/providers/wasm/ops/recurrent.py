"""LSTM (forward, reverse, bidirectional; peepholes; clip) on the packed SGEMM.

Per direction: one GEMM computes X W^T for every step at once, on top of the summed biases;
then each step accumulates H_prev R^T into its rows in place and er_lstm_cell finishes the
step (gate activations, cell and hidden state), writing H straight into Y. Gate order is
ONNX's: i, o, f, c.
"""
from __future__ import annotations

from ....ir import dtypes
from . import operator
from .common import float_or_fallback
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
    return float_or_fallback(dev, node, opset, run, float_inputs=[0, 1, 2, 3, 5, 6, 7])


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
