"""Recurrent layers: RNN, GRU and LSTM (every opset; layout arrived in 14).

All three share one driver: the input projection X·Wᵀ + biases is computed for every time step
with a single matmul, then a per-step cell adds H·Rᵀ and applies the gates. `sequence_lens`
is honoured the way onnxruntime does: a reverse pass reads each batch row backwards from its
own last valid step, steps past a row's length leave its state unchanged and write zeros to Y.
float16/bfloat16 inputs are computed in float32 and cast back.
"""
from typing import Any

import numpy as np

from ....ir.unary_ops import rnn_activation
from ..native import products
from ..native import recurrent as native_recurrent
from ..registry import kernel
from .float_errors import ignored_float_errors
from .unary import formula


# --- activations ------------------------------------------------------------------------------

def _make_activation(name: str, alphas, betas):
    """One activation (ir/unary_ops.py's row) as a one-argument function; takes its
    alpha/beta from the iterators."""
    row, p0, p1 = rnn_activation(name, alphas, betas)
    fn = formula(row)

    def activation(x):
        with ignored_float_errors():
            return fn(x, p0, p1)
    return activation


def _activations_per_direction(names, alphas, betas, defaults: list, num_directions: int):
    """The activation functions of each direction (activation_alpha/beta consumed in order)."""
    names = list(names) if names else list(defaults) * num_directions
    alpha_iter, beta_iter = iter(alphas or []), iter(betas or [])
    funcs = [_make_activation(n, alpha_iter, beta_iter) for n in names]
    per_direction = len(defaults)
    if len(funcs) == per_direction and num_directions == 2:
        funcs = funcs * 2
    if len(funcs) != per_direction * num_directions:
        raise ValueError(f"expected {per_direction * num_directions} activations, "
                         f"got {len(names)}: {names}")
    return [funcs[d * per_direction:(d + 1) * per_direction] for d in range(num_directions)]


def _clipper(clip):
    if clip is None:
        return lambda x: x
    return lambda x: np.clip(x, -clip, clip)


# --- shared driver ----------------------------------------------------------------------------

def _compute_dtype(dtype):
    dtype = np.dtype(dtype)
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float32)


def _num_directions(direction: str) -> int:
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ValueError(f"direction must be forward, reverse or bidirectional, got {direction!r}")
    return 2 if direction == "bidirectional" else 1


def _reverse_within_lengths(x, lengths):
    """Reverse axis 0 of a [T, B, ...] array, each batch row only within its own length."""
    if lengths is None:
        return x[::-1]
    steps = np.arange(x.shape[0])[:, None]
    source = np.where(steps < lengths[None, :], lengths[None, :] - 1 - steps, steps)
    return x[source, np.arange(x.shape[1])[None, :]]


def _run_direction(projected, states: tuple, step, lengths, reverse: bool):
    """Run `step` over the time axis of `projected` ([T, B, gates]).

    Returns Y ([T, B, H]) in input time order and the final states.
    """
    if reverse:
        projected = _reverse_within_lengths(projected, lengths)
    num_steps = projected.shape[0]
    hidden = states[0]
    ys = np.empty((num_steps,) + hidden.shape, dtype=hidden.dtype)
    for t in range(num_steps):
        new_states = step(projected[t], states)
        if lengths is not None:
            valid = (t < lengths)[:, None]
            new_states = tuple(np.where(valid, new, old) for new, old in zip(new_states, states))
            ys[t] = np.where(valid, new_states[0], 0)
        else:
            ys[t] = new_states[0]
        states = new_states
    if reverse:
        ys = _reverse_within_lengths(ys, lengths)
    return ys, states


def _recurrent_layer(x, initial_states: list, sequence_lens, layout: int, direction: str,
                     make_direction):
    """Shape handling common to RNN, GRU and LSTM.

    `make_direction(d, x, states)` runs direction d over time-major x ([T, B, I], compute dtype)
    with initial states ([B, H] each) and returns (Y [T, B, H], final states).
    Returns (Y, final state 0, final state 1, ...) in the node's layout and input dtype.
    """
    out_dtype = x.dtype
    work = _compute_dtype(out_dtype)
    x = np.asarray(x, dtype=work)
    if layout:
        x = np.swapaxes(x, 0, 1)
        initial_states = [None if s is None else np.swapaxes(s, 0, 1) for s in initial_states]
    num_steps, batch = x.shape[0], x.shape[1]
    num_directions = _num_directions(direction)

    lengths = None
    if sequence_lens is not None:
        lengths = np.asarray(sequence_lens, dtype=np.int64).reshape(-1)
        if lengths.shape[0] != batch:
            raise ValueError(f"sequence_lens has {lengths.shape[0]} entries, batch is {batch}")
        if np.any(lengths > num_steps) or np.any(lengths < 0):
            raise ValueError(f"sequence_lens {lengths.tolist()} must lie in [0, {num_steps}]")
        if np.all(lengths == num_steps):
            lengths = None

    ys, finals = [], []
    for d in range(num_directions):
        states = tuple(np.asarray(s[d], dtype=work) for s in initial_states)
        reverse = direction == "reverse" or d == 1
        y, final = make_direction(d, x, states, lengths, reverse)
        ys.append(y)
        finals.append(final)

    if num_directions == 1:
        y = ys[0][:, None]                                           # [T, 1, B, H]
        final_states = [s[None] for s in finals[0]]                  # [1, B, H]
    else:
        y = np.stack(ys, axis=1)                                     # [T, D, B, H]
        final_states = [np.stack([f[i] for f in finals]) for i in range(len(finals[0]))]
    if layout:
        y = y.transpose(2, 0, 1, 3)
        final_states = [s.transpose(1, 0, 2) for s in final_states]
    return tuple(v.astype(out_dtype, copy=False) for v in [y] + final_states)


def _step_operand(matrix, xs):
    """A transposed weight as the right operand of every step's matmul: copied contiguous
    once, unless there is a single step of batch 1 (OpenBLAS multiplies a few rows by a
    transposed view much slower than by a contiguous matrix, a copy costs about one step)."""
    if xs.shape[0] * xs.shape[1] == 1:
        return matrix
    return np.ascontiguousarray(matrix)


def _zeros_if_none(value, shape, dtype):
    return np.zeros(shape, dtype=dtype) if value is None else value


def _project(x, w, bias):
    """X·Wᵀ + bias for every time step at once: [T, B, I] -> [T, B, gates]."""
    num_steps, batch = x.shape[0], x.shape[1]
    projected = products.matmul(x.reshape(num_steps * batch, -1), w.T) + bias
    return projected.reshape(num_steps, batch, -1)


def _state_shape(x, layout: int, num_directions: int, hidden: int) -> tuple:
    batch = x.shape[0] if layout else x.shape[1]
    return (batch, num_directions, hidden) if layout else (num_directions, batch, hidden)


# --- RNN --------------------------------------------------------------------------------------

@kernel("RNN")
def rnn(ctx, x, w, r, b=None, sequence_lens=None, initial_h=None, activation_alpha=None,
        activation_beta=None, activations=None, clip=None, direction="forward",
        hidden_size=None, layout=0, output_sequence=0):
    num_directions = _num_directions(direction)
    hidden = r.shape[-1]
    work = _compute_dtype(x.dtype)
    b = _zeros_if_none(b, (num_directions, 2 * hidden), work)
    initial_h = _zeros_if_none(initial_h, _state_shape(x, layout, num_directions, hidden), work)
    funcs = _activations_per_direction(activations, activation_alpha, activation_beta,
                                       ["Tanh"], num_directions)
    clipped = _clipper(clip)

    def run(d, xs, states, lengths, reverse):
        (f,) = funcs[d]
        r_t = _step_operand(np.asarray(r[d], dtype=work).T, xs)
        bias = np.asarray(b[d][:hidden], dtype=work) + np.asarray(b[d][hidden:], dtype=work)
        projected = _project(xs, np.asarray(w[d], dtype=work), bias)

        def step(xw, states):
            return (f(clipped(xw + states[0] @ r_t)),)

        return _run_direction(projected, states, step, lengths, reverse)

    return _recurrent_layer(x, [initial_h], sequence_lens, layout, direction, run)


# --- GRU --------------------------------------------------------------------------------------

def _gru_weights(w, r, b, hidden: int, linear_before_reset: int):
    """Wᵀ [D, I, 3H]; Rᵀ [D, H, 3H] whole (linear_before_reset: one product per step) or as
    its update/reset and hidden parts (the hidden part multiplies the reset state), each
    contiguous; the projection's bias [D, 3H] (W's bias and R's, except R's hidden-gate bias
    under linear_before_reset, where the reset gate multiplies it) and that bias alone
    [D, 1, H]: once per session for initializers."""
    dirs, h2 = w.shape[0], 2 * hidden
    w_t = np.array(np.swapaxes(w, 1, 2), order="C")
    r_t = np.swapaxes(r, 1, 2)
    r_parts = (np.array(r_t, order="C"),) if linear_before_reset else \
        (np.array(r_t[..., :h2], order="C"), np.ascontiguousarray(r_t[..., h2:]))
    if b is None:
        b = np.zeros((dirs, 6 * hidden), w_t.dtype)
    w_bias, r_bias = b[:, :3 * hidden], b[:, 3 * hidden:]
    bias = (w_bias + r_bias).astype(w_t.dtype)
    if linear_before_reset:
        bias = np.concatenate([bias[:, :h2], w_bias[:, h2:]], axis=1)
    for part in (w_t, r_parts[0], bias):    # z and r halved (exact): the step's sigmoids are
        part[..., :h2] *= 0.5               # tanh of half their pre-activations
    return w_t, r_parts, bias, r_bias[:, None, h2:].astype(w_t.dtype, copy=False)


def _plain_gru(ctx, x, w, r, b, initial_h, direction: str, linear_before_reset: int):
    """The common GRU (sigmoid/tanh, no clip or sequence_lens, float32/float64, any
    direction), as _plain_lstm: one input projection for every step and direction, both
    directions of a bidirectional GRU in one batched step, preallocated buffers, the z and r
    sigmoids as tanh of halved pre-activations (_gru_weights halves their weights)."""
    hidden, dirs = r.shape[-1], w.shape[0]
    w_t, r_parts, bias, r_bias_h = ctx.prepared(
        "gru", (w, r, b), lambda: _gru_weights(w, r, b, hidden, linear_before_reset))
    steps, batch = x.shape[0], x.shape[1]
    h = np.zeros((dirs, batch, hidden), x.dtype) if initial_h is None else initial_h
    h2 = 2 * hidden
    projected = products.matmul(x.reshape(steps * batch, -1), w_t)
    projected += bias[:, None, :]
    projected = projected.reshape(dirs, steps, batch, 3 * hidden)
    if dirs == 2:                   # [T, 2, B, 3H], the backward direction in reverse
        projected = np.stack([projected[0], projected[1, ::-1]], axis=1)
    else:
        projected = projected[0, ::-1, None] if direction == "reverse" else projected[0, :, None]
    if x.dtype == np.float32 and native_recurrent.worth_it(batch, hidden, gates=3):
        # steps in C, on R's z/r columns and its hidden columns
        r_zr, r_h = (r_parts[0][..., :h2], r_parts[0][..., h2:]) if linear_before_reset \
            else r_parts
        ys, h = native_recurrent.gru_f32(projected, r_zr, r_h, r_bias_h.reshape(dirs, hidden),
                                         linear_before_reset, h.reshape(dirs, batch, hidden))
        return _reordered(ys, direction), h
    ys = np.empty((steps, dirs, batch, hidden), x.dtype)
    hr = np.empty(projected.shape[1:], x.dtype)       # [D, B, 3H]: h @ R (its zr part)
    zr, diff = hr[..., :h2], np.empty(ys.shape[1:], x.dtype)
    z, reset, hidden_part = hr[..., :hidden], hr[..., hidden:h2], hr[..., h2:]
    rh: Any = None if linear_before_reset else np.empty(ys.shape[1:], x.dtype)
    for t in range(steps):                  # no allocation per step
        xw = projected[t]
        if linear_before_reset:
            np.matmul(h, r_parts[0], out=hr)
            hidden_part += r_bias_h
        else:
            np.matmul(h, r_parts[0], out=zr)
        zr += xw[..., :h2]
        np.tanh(zr, out=zr)
        zr *= 0.5
        zr += 0.5                           # sigmoid(v) = (tanh(v / 2) + 1) / 2
        if linear_before_reset:
            hidden_part *= reset
        else:
            np.multiply(reset, h, out=rh)
            np.matmul(rh, r_parts[1], out=hidden_part)
        hidden_part += xw[..., h2:]
        candidate = np.tanh(hidden_part, out=hidden_part)
        np.subtract(h, candidate, out=diff)
        diff *= z
        h = ys[t]
        np.add(candidate, diff, out=h)      # (1 - z) * candidate + z * h
    h = h.copy()                            # ys is reordered below
    return _reordered(ys, direction), h


@kernel("GRU")
def gru(ctx, x, w, r, b=None, sequence_lens=None, initial_h=None, activation_alpha=None,
        activation_beta=None, activations=None, clip=None, direction="forward",
        hidden_size=None, layout=0, linear_before_reset=0, output_sequence=0):
    """Gates z (update), r (reset), h (hidden), in that order in W, R and B."""
    if _is_plain_rnn(x, w, r, b, sequence_lens, [initial_h], activations, clip, direction,
                     layout, ["Sigmoid", "Tanh"]):
        return _plain_gru(ctx, x, w, r, b, initial_h, direction, int(linear_before_reset))
    num_directions = _num_directions(direction)
    hidden = r.shape[-1]
    work = _compute_dtype(x.dtype)
    b = _zeros_if_none(b, (num_directions, 6 * hidden), work)
    initial_h = _zeros_if_none(initial_h, _state_shape(x, layout, num_directions, hidden), work)
    funcs = _activations_per_direction(activations, activation_alpha, activation_beta,
                                       ["Sigmoid", "Tanh"], num_directions)
    clipped = _clipper(clip)
    h2 = 2 * hidden

    def run(d, xs, states, lengths, reverse):
        f, g = funcs[d]
        r_t = np.asarray(r[d], dtype=work).T                           # [H, 3H]
        w_bias = np.asarray(b[d][:3 * hidden], dtype=work)
        r_bias = np.asarray(b[d][3 * hidden:], dtype=work)
        r_bias_h = r_bias[h2:]
        # The reset gate multiplies R_h's bias when linear_before_reset, so only then it
        # stays out of the projection.
        bias = w_bias + (np.concatenate([r_bias[:h2], np.zeros_like(r_bias_h)])
                         if linear_before_reset else r_bias)
        projected = _project(xs, np.asarray(w[d], dtype=work), bias)
        if linear_before_reset:
            r_t = _step_operand(r_t, xs)
        else:
            r_t_zr, r_t_h = _step_operand(r_t[:, :h2], xs), _step_operand(r_t[:, h2:], xs)

        def step_linear_before_reset(xw, states):
            (h,) = states
            hr = h @ r_t
            zr = f(clipped(xw[:, :h2] + hr[:, :h2]))
            z, reset = zr[:, :hidden], zr[:, hidden:]
            candidate = g(clipped(xw[:, h2:] + reset * (hr[:, h2:] + r_bias_h)))
            return ((1 - z) * candidate + z * h,)

        def step_default(xw, states):
            (h,) = states
            zr = f(clipped(xw[:, :h2] + h @ r_t_zr))
            z, reset = zr[:, :hidden], zr[:, hidden:]
            candidate = g(clipped(xw[:, h2:] + (reset * h) @ r_t_h))
            return ((1 - z) * candidate + z * h,)

        step = step_linear_before_reset if linear_before_reset else step_default
        return _run_direction(projected, states, step, lengths, reverse)

    return _recurrent_layer(x, [initial_h], sequence_lens, layout, direction, run)


# --- LSTM -------------------------------------------------------------------------------------

def _are_default(names, defaults: list, num_directions: int) -> bool:
    """Whether `activations` names the operator's default functions (or is absent)."""
    if not names:
        return True
    names = [n.lower() for n in names]
    wanted = [n.lower() for n in defaults]
    return names == wanted * num_directions or (num_directions == 2 and names == wanted)


def _sigmoid_in_place(v):
    """1 / (1 + exp(-v)) over v, overwriting it (exp overflow gives the right 0)."""
    np.negative(v, out=v)
    np.exp(v, out=v)
    v += 1
    return np.reciprocal(v, out=v)


def _default_lstm_step(r_t, h3: int):
    """The LSTM cell with sigmoid/tanh/tanh, no clip or peepholes: gates are activated in
    place, i, o and f in one sigmoid pass."""

    def step(xw, states):
        h, c = states
        gates = h @ r_t
        gates += xw
        with ignored_float_errors():
            _sigmoid_in_place(gates[:, :h3])
        cell = np.tanh(gates[:, h3:], out=gates[:, h3:])
        hidden = h3 // 3
        c_new = gates[:, 2 * hidden:h3] * c
        cell *= gates[:, :hidden]
        c_new += cell
        h_new = np.tanh(c_new)
        h_new *= gates[:, hidden:2 * hidden]
        return h_new, c_new

    return step


_PLAIN_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _lstm_weights(w, r, b, hidden: int):
    """Wᵀ [D, I, 4H] and Rᵀ [D, H, 4H] contiguous (the right operands of every matmul) and
    the two biases summed [D, 4H], the i, o and f gates' columns halved: what an LSTM derives
    from its weights, once per session for initializers."""
    w_t = np.array(np.swapaxes(w, 1, 2), order="C")
    r_t = np.array(np.swapaxes(r, 1, 2), order="C")
    if b is None:
        bias = np.zeros((w.shape[0], 4 * hidden), w_t.dtype)
    else:
        bias = (b[:, :4 * hidden] + b[:, 4 * hidden:]).astype(w_t.dtype)
    for part in (w_t, r_t, bias):           # i, o, f halved (exact): the cell's sigmoids are
        part[..., :3 * hidden] *= 0.5       # tanh of half their pre-activations
    return w_t, r_t, bias


def _plain_lstm(ctx, x, w, r, b, initial_h, initial_c, direction: str):
    """The common LSTM: sequence-major, default activations, no clip, peepholes or
    sequence_lens, float32/float64 throughout, any direction. The input projection of every
    step and direction is one product; both directions of a bidirectional LSTM step together
    (one batched product and one cell over [2, B, 4H]: half the numpy calls per step), the
    backward one over its projections stored in reverse. Prepared weights are kept per node
    (ctx.prepared). A step is ten numpy calls into preallocated buffers: the sigmoid gates
    are tanh of half their pre-activations (halved weights, exact), so one tanh covers all
    four gates and nothing overflows."""
    hidden, dirs = r.shape[-1], w.shape[0]
    w_t, r_t, bias = ctx.prepared("lstm", (w, r, b), lambda: _lstm_weights(w, r, b, hidden))
    steps, batch = x.shape[0], x.shape[1]
    h = np.zeros((dirs, batch, hidden), x.dtype) if initial_h is None else initial_h
    c = np.zeros((dirs, batch, hidden), x.dtype) if initial_c is None else initial_c
    if dirs == 1:                   # 2-D operands: cheaper than batched products of one
        w_t, r_t, bias, h, c = w_t[0], r_t[0], bias[0], h[0], c[0]
    if steps == 1 and dirs == 1:    # streaming models: x and h through one product
        stacked = ctx.prepared("lstm1", (w, r), lambda: np.concatenate([w_t, r_t]))
        gates = np.concatenate([x[0], h], axis=1) @ stacked
        gates += bias
        c, h = _lstm_cell(gates, c, hidden)
        return h[None, None].copy(), h[None], c[None]     # Y and Y_h: separate buffers
    projected = products.matmul(x.reshape(steps * batch, -1), w_t)
    projected += bias[..., None, :] if dirs == 2 else bias
    if dirs == 2:                   # [2, T, B, 4H] -> [T, 2, B, 4H], backward in reverse
        projected = projected.reshape(2, steps, batch, 4 * hidden)
        projected = np.stack([projected[0], projected[1, ::-1]], axis=1)
    else:
        projected = projected.reshape(steps, batch, 4 * hidden)
        if direction == "reverse":
            projected = projected[::-1]
    if x.dtype == np.float32 and native_recurrent.worth_it(batch, hidden):   # steps in C
        ys, h, c = native_recurrent.lstm_f32(projected.reshape(steps, dirs, batch, -1),
                                             r_t.reshape(dirs, hidden, -1),
                                             h.reshape(dirs, batch, hidden),
                                             c.reshape(dirs, batch, hidden))
        return _reordered(ys, direction), h, c
    ys = np.empty((steps, dirs, batch, hidden), x.dtype)
    gates = np.empty(projected.shape[1:], x.dtype)           # [B, 4H] or [2, B, 4H]
    ifo, cell = gates[..., :3 * hidden], gates[..., 3 * hidden:]
    i_gate, o_gate = gates[..., :hidden], gates[..., hidden:2 * hidden]
    f_gate = gates[..., 2 * hidden:3 * hidden]
    c = c.copy()                                             # updated in place
    for t in range(steps):                  # ten numpy calls, no allocation, per step
        np.matmul(h, r_t, out=gates)
        gates += projected[t]
        np.tanh(gates, out=gates)
        ifo *= 0.5
        ifo += 0.5                          # sigmoid(v) = (tanh(v / 2) + 1) / 2
        c *= f_gate
        i_gate *= cell
        c += i_gate
        h = ys[t] if dirs == 2 else ys[t, 0]
        np.tanh(c, out=h)
        h *= o_gate
    h = h.copy()                            # ys is reordered below
    if dirs == 1:
        h, c = h[None], c[None]
    return _reordered(ys, direction), h, c


def _reordered(ys: np.ndarray, direction: str) -> np.ndarray:
    """ys in time order: reverse passes were computed over their steps reversed."""
    if direction == "bidirectional":
        ys[:, 1] = ys[::-1, 1].copy()
    elif direction == "reverse":
        ys = ys[::-1].copy()
    return ys


def _lstm_cell(gates, c, hidden: int):
    """(c, h) after one step from the gates' pre-activations (i, o, f, c order, last axis;
    i, o and f halved by _lstm_weights: sigmoid(v) = (tanh(v / 2) + 1) / 2)."""
    t = np.tanh(gates)
    ifo = t[..., :3 * hidden]
    ifo *= 0.5
    ifo += 0.5
    c = t[..., 2 * hidden:3 * hidden] * c + t[..., :hidden] * t[..., 3 * hidden:]
    return c, t[..., hidden:2 * hidden] * np.tanh(c)


def _is_plain_rnn(x, w, r, b, sequence_lens, states, activations, clip, direction, layout,
                  defaults) -> bool:
    """The common form the fast paths take: sequence-major, any direction, the default
    activations, no clip, every sequence whole, float32/float64 throughout."""
    dtype = x.dtype
    dirs = 2 if direction == "bidirectional" else 1
    if direction not in ("forward", "reverse", "bidirectional") or layout or clip is not None:
        return False
    if dtype not in _PLAIN_DTYPES or w.dtype != dtype or r.dtype != dtype or \
            (b is not None and b.dtype != dtype) or x.ndim != 3 or w.shape[0] != dirs:
        return False
    for state in states:
        if state is not None and (state.dtype != dtype or state.shape[0] != dirs):
            return False
    if sequence_lens is not None and not np.all(np.asarray(sequence_lens) == x.shape[0]):
        return False
    return _are_default(activations, defaults, dirs)


@kernel("LSTM")
def lstm(ctx, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None,
         activation_alpha=None, activation_beta=None, activations=None, clip=None,
         direction="forward", hidden_size=None, input_forget=0, layout=0, output_sequence=0):
    """Gates i (input), o (output), f (forget), c (cell), in that order in W, R and B;
    peepholes P in the order i, o, f."""
    if p is None and not input_forget and _is_plain_rnn(
            x, w, r, b, sequence_lens, [initial_h, initial_c], activations, clip, direction,
            layout, ["Sigmoid", "Tanh", "Tanh"]):
        return _plain_lstm(ctx, x, w, r, b, initial_h, initial_c, direction)
    num_directions = _num_directions(direction)
    hidden = r.shape[-1]
    work = _compute_dtype(x.dtype)
    b = _zeros_if_none(b, (num_directions, 8 * hidden), work)
    state_shape = _state_shape(x, layout, num_directions, hidden)
    initial_h = _zeros_if_none(initial_h, state_shape, work)
    initial_c = _zeros_if_none(initial_c, state_shape, work)
    funcs = _activations_per_direction(activations, activation_alpha, activation_beta,
                                       ["Sigmoid", "Tanh", "Tanh"], num_directions)
    clipped = _clipper(clip)
    h1, h2, h3 = hidden, 2 * hidden, 3 * hidden
    default_cell = (clip is None and not input_forget
                    and _are_default(activations, ["Sigmoid", "Tanh", "Tanh"], num_directions))

    def run(d, xs, states, lengths, reverse):
        f, g, h_act = funcs[d]
        r_t = _step_operand(np.asarray(r[d], dtype=work).T, xs)        # [H, 4H]
        bias = np.asarray(b[d][:4 * hidden], dtype=work) + np.asarray(b[d][4 * hidden:],
                                                                       dtype=work)
        projected = _project(xs, np.asarray(w[d], dtype=work), bias)
        peep = None if p is None else np.asarray(p[d], dtype=work)

        if default_cell and peep is None:
            return _run_direction(projected, states, _default_lstm_step(r_t, h3), lengths,
                                  reverse)

        def step(xw, states):
            h, c = states
            gates = xw + h @ r_t
            i_pre, o_pre, f_pre = gates[:, :h1], gates[:, h1:h2], gates[:, h2:h3]
            if peep is not None:
                i_pre = i_pre + peep[:h1] * c
                f_pre = f_pre + peep[h2:h3] * c
            i = f(clipped(i_pre))
            forget = 1 - i if input_forget else f(clipped(f_pre))
            c_new = forget * c + i * g(clipped(gates[:, h3:]))
            if peep is not None:
                o_pre = o_pre + peep[h1:h2] * c_new
            h_new = f(clipped(o_pre)) * h_act(c_new)
            return h_new, c_new

        return _run_direction(projected, states, step, lengths, reverse)

    return _recurrent_layer(x, [initial_h, initial_c], sequence_lens, layout, direction, run)
