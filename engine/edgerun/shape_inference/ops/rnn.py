"""RNN, GRU, LSTM: [seq, directions, batch, hidden] outputs (batch first with layout=1)."""
from __future__ import annotations

from ..context import tensor
from ..registry import infer


@infer("RNN", "GRU", "LSTM")
def recurrent(ctx):
    x = ctx.shape(0)
    hidden = ctx.attr("hidden_size")
    if hidden is None and ctx.shape(2) is not None:
        hidden = ctx.shape(2)[-1]
    dirs = 2 if ctx.attr("direction", "forward") == "bidirectional" else 1
    layout = ctx.attr("layout", 0)
    seq, batch = (None, None) if x is None else ((x[1], x[0]) if layout else (x[0], x[1]))
    if layout:
        y, state = (batch, seq, dirs, hidden), (batch, dirs, hidden)
    else:
        y, state = (seq, dirs, batch, hidden), (dirs, batch, hidden)
    elem = ctx.elem(0)
    return [tensor(elem, y), tensor(elem, state), tensor(elem, state)]
