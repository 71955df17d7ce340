"""LSTM, GRU and RNN on rnn.wgsl: the input projection of every step is one matmul, then
one dispatch per time step (two for GRU's reset gate) computes the gates and the new state
of every direction and batch row. layout=1 (batch-major) runs as transposes around them."""
from __future__ import annotations

from .common import as_gpu, host_ints
from .elementwise import binary
from .matmul import matmul_core
from .movement import slice_view, transpose
from .registry import Unsupported, gpu_op

# op -> the default activations of one direction (the kernels compute these)
DEFAULT_ACTIVATIONS = {"LSTM": ["sigmoid", "tanh", "tanh"], "GRU": ["sigmoid", "tanh"],
                       "RNN": ["tanh"]}
RNN_ACTIVATIONS = {"tanh": "tanh(clamp(v, -20.0, 20.0))", "relu": "max(v, 0.0)",
                   "sigmoid": "1.0 / (1.0 + exp(-v))"}     # RNN's one activation


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def check_recurrent(node, opset) -> str:
    direction = _text(node.attr("direction", b"forward"))
    if direction not in ("forward", "reverse", "bidirectional"):
        return f"direction={direction}"
    names = [_text(a).lower() for a in node.attr("activations", None) or []]
    if node.op_type == "RNN":
        if any(n not in RNN_ACTIVATIONS for n in names) or len(set(names)) > 1:
            return f"activations {names} (the kernel has {sorted(RNN_ACTIVATIONS)}, one for all)"
    elif names and names not in (DEFAULT_ACTIVATIONS[node.op_type],
                                 DEFAULT_ACTIVATIONS[node.op_type] * 2):
        return f"activations {names} (the kernel has {DEFAULT_ACTIVATIONS[node.op_type]})"
    if node.attr("clip", None) is not None:
        return "clip"
    if node.attr("input_forget", 0):
        return "input_forget=1"
    if len(node.inputs) > 7 and node.inputs[7]:
        return "peepholes (input P)"
    return ""


def _begin(gpu, x, w, r, sequence_lens, initial_h, layout):
    """The operands in the time-major layout: x [T, B, I], and the initial state."""
    x, w, r = as_gpu(gpu, x), as_gpu(gpu, w), as_gpu(gpu, r)
    if layout:
        x = transpose(gpu, x, [1, 0, 2])
    steps = x.shape[0]
    if steps == 0:
        raise Unsupported("an empty sequence")
    if sequence_lens is not None and any(n != steps for n in host_ints(gpu, sequence_lens)):
        raise Unsupported("sequence_lens shorter than the sequence")
    return x, w, r, _state(gpu, initial_h, r.shape[0] * x.shape[1] * r.shape[-1], layout)


def _state(gpu, value, n, layout):
    if value is None:
        return gpu.zeros(n)
    value = as_gpu(gpu, value)
    return transpose(gpu, value, [1, 0, 2]) if layout else value


def _project(gpu, x, w, bias, gates):
    """xp[d, t, b] = x[t, b] · W[d]ᵀ + bias[d] ([D, T, B, gates]): W[d] is [gates, I]."""
    steps, batch, inputs = x.shape
    return matmul_core(gpu, x, w, steps * batch, gates, inputs, (inputs, 1), (1, inputs),
                       (w.shape[0],), [0], [gates * inputs], bias=bias,
                       bias_strides=(0, 1), bias_batch=[gates], beta=1.0)


def _summed_bias(gpu, b, gates):
    """Wb + Rb ([D, gates]), added once for every step, or None."""
    if b is None:
        return None
    b = as_gpu(gpu, b)
    return binary(gpu, slice_view(gpu, b, [0], [gates], [1], [1]),
                  slice_view(gpu, b, [gates], [2 * gates], [1], [1]), "x + y")


def _finish(gpu, y, states, layout):
    """Y [T, D, B, H] and the final states [D, B, H], batch-major again with layout 1."""
    if not layout:
        return (y,) + tuple(states)
    return (transpose(gpu, y, [2, 0, 1, 3]),) + tuple(
        transpose(gpu, s, [1, 0, 2]) for s in states)


def _steps(gpu, kernel, y, operands, states, shape, params, n, subs=None):
    """One dispatch per time step; each reads the previous states and writes new ones
    (ping-pong buffers of `shape`: every work item reads all of the old state)."""
    spare = [[gpu.empty(shape) for _ in states] for _ in range(2)]
    for t in range(params[2]):
        params[3] = t
        out = spare[t % 2]
        gpu.dispatch("rnn", kernel, y, operands + states + out, params, n, subs)
        states = out
    return states


@gpu_op("LSTM", check=check_recurrent)
def lstm(gpu, ctx, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None,
         p=None, direction="forward", hidden_size=None, layout=0, **_):
    x, w, r, h = _begin(gpu, x, w, r, sequence_lens, initial_h, layout)
    steps, batch, _ = x.shape
    dirs, hidden = r.shape[0], r.shape[-1]
    gates = 4 * hidden
    xp = _project(gpu, x, w, _summed_bias(gpu, b, gates), gates)
    state = (dirs, batch, hidden)
    n = dirs * batch * hidden
    c = _state(gpu, initial_c, n, layout)
    y = gpu.empty((steps, dirs, batch, hidden))
    params = [hidden, batch, steps, 0, dirs, int(_text(direction) == "reverse")]
    h, c = _steps(gpu, "lstm_step", y, [xp, r], [h, c], state, params, n)
    return _finish(gpu, y, [h, c], layout)


@gpu_op("GRU", check=check_recurrent)
def gru(gpu, ctx, x, w, r, b=None, sequence_lens=None, initial_h=None, direction="forward",
        hidden_size=None, layout=0, linear_before_reset=0, **_):
    x, w, r, h = _begin(gpu, x, w, r, sequence_lens, initial_h, layout)
    steps, batch, _ = x.shape
    dirs, hidden = r.shape[0], r.shape[-1]
    gates = 3 * hidden
    if b is None:
        wb, rb = None, gpu.zeros(dirs * gates)
    else:                                # Wb goes into the projection, Rb to the steps
        b = as_gpu(gpu, b)
        wb = slice_view(gpu, b, [0], [gates], [1], [1])
        rb = slice_view(gpu, b, [gates], [2 * gates], [1], [1])
    xp = _project(gpu, x, w, wb, gates)
    state = (dirs, batch, hidden)
    n = dirs * batch * hidden
    y = gpu.empty((steps, dirs, batch, hidden))
    params = [hidden, batch, steps, 0, dirs, int(_text(direction) == "reverse")]
    lbr = int(bool(linear_before_reset))
    rh = gpu.empty(state)
    spare = [gpu.empty(state), gpu.empty(state)]
    for t in range(steps):
        params[3] = t
        if not lbr:
            gpu.dispatch("rnn", "gru_reset", rh, [xp, r, rb, h], params, n)
        gpu.dispatch("rnn", "gru_step", y, [xp, r, rb, h, rh, spare[t % 2]], params, n,
                     {"LBR": lbr})
        h = spare[t % 2]
    return _finish(gpu, y, [h], layout)


@gpu_op("RNN", check=check_recurrent)
def rnn(gpu, ctx, x, w, r, b=None, sequence_lens=None, initial_h=None, direction="forward",
        hidden_size=None, layout=0, activations=None, **_):
    x, w, r, h = _begin(gpu, x, w, r, sequence_lens, initial_h, layout)
    steps, batch, _ = x.shape
    dirs, hidden = r.shape[0], r.shape[-1]
    xp = _project(gpu, x, w, _summed_bias(gpu, b, hidden), hidden)
    state = (dirs, batch, hidden)
    n = dirs * batch * hidden
    y = gpu.empty((steps, dirs, batch, hidden))
    params = [hidden, batch, steps, 0, dirs, int(_text(direction) == "reverse")]
    act = _text((activations or ["tanh"])[0]).lower()
    (h,) = _steps(gpu, "rnn_step", y, [xp, r], [h], state, params, n,
                  {"ACT": RNN_ACTIVATIONS[act]})
    return _finish(gpu, y, [h], layout)
