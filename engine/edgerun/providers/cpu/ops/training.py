"""Optimizer kernels of the ai.onnx.preview.training domain: Adagrad, Adam, Momentum.

Each takes the learning rate R and step count T, then several tensors to optimise at once as
variadic groups: all X's, then all G's (gradients), then each state group (H, V, ...).
Outputs are grouped the same way: all new X's, then each new state group.
The arithmetic runs in float64 and every output keeps its input's dtype.
"""
from __future__ import annotations

import numpy as np

from ..registry import kernel

TRAINING = "ai.onnx.preview.training"


def _groups(tensors: tuple, count: int, op: str) -> list:
    """Split the variadic inputs into `count` equally long groups."""
    if not tensors or len(tensors) % count:
        raise ValueError(f"{op} expects {count} groups of tensors after R and T, "
                         f"got {len(tensors)} tensors")
    n = len(tensors) // count
    return [tensors[i * n:(i + 1) * n] for i in range(count)]


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


@kernel("Adagrad", domain=TRAINING)
def adagrad(ctx, r, t, *tensors, decay_factor=0.0, epsilon=1e-6, norm_coefficient=0.0):
    xs, gs, hs = _groups(tensors, 3, "Adagrad")
    rate = float(r) / (1.0 + float(t) * decay_factor)
    new_xs, new_hs = [], []
    for x, g, h in zip(xs, gs, hs):
        grad = norm_coefficient * _f64(x) + _f64(g)
        h_new = _f64(h) + grad * grad
        x_new = _f64(x) - rate * grad / (np.sqrt(h_new) + epsilon)
        new_xs.append(x_new.astype(x.dtype))
        new_hs.append(h_new.astype(h.dtype))
    return tuple(new_xs + new_hs)


@kernel("Adam", domain=TRAINING)
def adam(ctx, r, t, *tensors, alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.0,
         norm_coefficient_post=0.0):
    xs, gs, vs, hs = _groups(tensors, 4, "Adam")
    step = float(t)
    rate = float(r)
    if step > 0:   # bias correction of both moments
        rate = rate * np.sqrt(1 - beta ** step) / (1 - alpha ** step)
    new_xs, new_vs, new_hs = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        grad = norm_coefficient * _f64(x) + _f64(g)
        v_new = alpha * _f64(v) + (1 - alpha) * grad
        h_new = beta * _f64(h) + (1 - beta) * grad * grad
        x_new = _f64(x) - rate * v_new / (np.sqrt(h_new) + epsilon)
        x_new = (1 - norm_coefficient_post) * x_new
        new_xs.append(x_new.astype(x.dtype))
        new_vs.append(v_new.astype(v.dtype))
        new_hs.append(h_new.astype(h.dtype))
    return tuple(new_xs + new_vs + new_hs)


@kernel("Momentum", domain=TRAINING)
def momentum(ctx, r, t, *tensors, alpha=None, beta=None, mode=None, norm_coefficient=None):
    for name, value in (("alpha", alpha), ("beta", beta), ("mode", mode),
                        ("norm_coefficient", norm_coefficient)):
        if value is None:
            raise ValueError(f"Momentum needs the {name} attribute")
    if mode not in ("standard", "nesterov"):
        raise ValueError(f"Momentum mode must be 'standard' or 'nesterov', got {mode!r}")
    xs, gs, vs = _groups(tensors, 3, "Momentum")
    rate = float(r)
    grad_coefficient = beta if float(t) > 0 else 1.0   # the first step takes the full gradient
    new_xs, new_vs = [], []
    for x, g, v in zip(xs, gs, vs):
        grad = norm_coefficient * _f64(x) + _f64(g)
        v_new = alpha * _f64(v) + grad_coefficient * grad
        if mode == "standard":
            x_new = _f64(x) - rate * v_new
        else:
            x_new = _f64(x) - rate * (grad + alpha * v_new)
        new_xs.append(x_new.astype(x.dtype))
        new_vs.append(v_new.astype(v.dtype))
    return tuple(new_xs + new_vs)
