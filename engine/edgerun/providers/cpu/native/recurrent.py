"""The common LSTM's and GRU's recurrences in one native call each (cpu_kernels/recurrent.c),
where numpy spends ten or more calls a step: float32, the caller's prepared operands (see
rnn.py's _plain_lstm and _plain_gru)."""
from __future__ import annotations

import numpy as np

from .library import address, available, library


# Products h R per step (batch x 4H x H multiply-adds) up to which the plain C loop beats ten
# numpy calls a step (~15 us of overhead); past it BLAS's product is worth its calls (measured:
# 16 steps of H=64 at batch 1, 436 -> 277 us; H=512 at batch 1 and H=128 at batch 937 slower
# in C than through BLAS).
MAX_STEP_MACS = 1 << 16


def worth_it(batch: int, hidden: int, gates: int = 4) -> bool:
    """Whether the C recurrence beats numpy's for this step size (see MAX_STEP_MACS)."""
    return batch * gates * hidden * hidden <= MAX_STEP_MACS and available()


def lstm_f32(projected: np.ndarray, r_t: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple:
    """ys [T, D, B, H] from projected [T, D, B, 4H] (input projection plus biases, i/o/f
    halved) and r_t [D, H, 4H] (halved likewise), from states h, c [D, B, H]; returns
    (ys, last h, last c), new arrays."""
    steps, dirs, batch, width = projected.shape
    hidden = width // 4
    projected = np.ascontiguousarray(projected, np.float32)
    r_t = np.ascontiguousarray(r_t, np.float32)
    h = np.array(h, np.float32, order="C")          # updated in place: copies
    c = np.array(c, np.float32, order="C")
    ys = np.empty((steps, dirs, batch, hidden), np.float32)
    gates = np.empty(width, np.float32)
    library().er_cpu_lstm_f32(address(projected), address(r_t), address(h), address(c),
                              address(ys), steps, dirs, batch, hidden, address(gates))
    return ys, h, c


def gru_f32(projected: np.ndarray, r_zr: np.ndarray, r_h: np.ndarray, rb_h: np.ndarray,
            linear_before_reset: int, h: np.ndarray) -> tuple:
    """ys [T, D, B, H] from projected [T, D, B, 3H] (z and r halved), r_zr [D, H, 2H]
    (halved likewise), r_h [D, H, H], rb_h [D, H] (read under linear_before_reset) and h
    [D, B, H]; returns (ys, last h), new arrays."""
    steps, dirs, batch, width = projected.shape
    hidden = width // 3
    args = [np.ascontiguousarray(a, np.float32) for a in (projected, r_zr, r_h, rb_h)]
    h = np.array(h, np.float32, order="C")
    ys = np.empty((steps, dirs, batch, hidden), np.float32)
    scratch = np.empty(4 * hidden, np.float32)
    library().er_cpu_gru_f32(*[address(a) for a in args], int(linear_before_reset),
                             address(h), address(ys), steps, dirs, batch, hidden,
                             address(scratch))
    return ys, h
