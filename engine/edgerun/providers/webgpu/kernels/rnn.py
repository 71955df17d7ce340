"""LSTM on rnn.wgsl: the input projection of every step is one matmul, then one dispatch
per time step computes the gates and the new state of every direction and batch row."""
from __future__ import annotations

from .common import as_gpu, host_ints
from .elementwise import binary
from .matmul import matmul_core
from .movement import slice_view
from .registry import Unsupported, gpu_op

DEFAULT_ACTIVATIONS = ["sigmoid", "tanh", "tanh"]


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def check_lstm(node, opset) -> str:
    direction = _text(node.attr("direction", b"forward"))
    if direction not in ("forward", "reverse", "bidirectional"):
        return f"direction={direction}"
    names = [_text(a).lower() for a in node.attr("activations", None) or []]
    if names and names not in (DEFAULT_ACTIVATIONS, DEFAULT_ACTIVATIONS * 2):
        return f"activations {names} (the kernel has sigmoid, tanh, tanh)"
    if node.attr("clip", None) is not None:
        return "clip"
    if node.attr("input_forget", 0):
        return "input_forget=1"
    if node.attr("layout", 0):
        return "layout=1"
    if len(node.inputs) > 7 and node.inputs[7]:
        return "peepholes (input P)"
    return ""


@gpu_op("LSTM", check=check_lstm)
def lstm(gpu, ctx, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None,
         p=None, direction="forward", hidden_size=None, **_):
    x, w, r = as_gpu(gpu, x), as_gpu(gpu, w), as_gpu(gpu, r)
    steps, batch, inputs = x.shape
    dirs, hidden = r.shape[0], r.shape[-1]
    if steps == 0:
        raise Unsupported("an empty sequence")
    if sequence_lens is not None and any(n != steps for n in host_ints(gpu, sequence_lens)):
        raise Unsupported("sequence_lens shorter than the sequence")
    gates = 4 * hidden
    bias = None
    if b is not None:                    # Wb + Rb, once for every step: [D, 4H]
        b = as_gpu(gpu, b)
        bias = binary(gpu, slice_view(gpu, b, [0], [gates], [1], [1]),
                      slice_view(gpu, b, [gates], [2 * gates], [1], [1]), "x + y")
    # xp[d, t, b] = x[t, b] · W[d]ᵀ + bias[d]: W[d] is [4H, I], read transposed
    xp = matmul_core(gpu, x, w, steps * batch, gates, inputs, (inputs, 1), (1, inputs), (dirs,),
                     [0], [gates * inputs], bias=bias, bias_strides=(0, 1),
                     bias_batch=[gates], beta=1.0)
    state = (dirs, batch, hidden)
    n = dirs * batch * hidden
    h = gpu.zeros(n) if initial_h is None else as_gpu(gpu, initial_h)
    c = gpu.zeros(n) if initial_c is None else as_gpu(gpu, initial_c)
    y = gpu.empty((steps, dirs, batch, hidden))
    spare = [(gpu.empty(state), gpu.empty(state)), (gpu.empty(state), gpu.empty(state))]
    params = [hidden, batch, steps, 0, dirs, int(_text(direction) == "reverse")]
    for t in range(steps):
        h_out, c_out = spare[t % 2]
        params[3] = t
        gpu.dispatch("rnn", "lstm_step", y, [xp, r, h, c, h_out, c_out], params, n)
        h, c = h_out, c_out
    return y, h.view(state), c.view(state)
