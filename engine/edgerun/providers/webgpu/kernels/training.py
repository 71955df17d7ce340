"""The preview training optimizers (ai.onnx.preview.training Adagrad, Adam, Momentum) as
chains of elementwise kernels: R and T are host scalars, folded into the kernels' alpha/beta;
every X, G and state tensor stays on the GPU."""
from __future__ import annotations

import math

from .common import as_gpu, host_floats_or_ints
from .elementwise import binary
from .registry import gpu_op

TRAINING = "ai.onnx.preview.training"
REGULARIZED = "alpha * x + y"            # norm_coefficient * X + G


def _groups(gpu, tensors, count, op):
    if not tensors or len(tensors) % count:
        raise ValueError(f"{op}: {len(tensors)} tensors do not split into {count} groups")
    n = len(tensors) // count
    values = [as_gpu(gpu, t) for t in tensors]
    return [values[i * n:(i + 1) * n] for i in range(count)]


def _scalar(gpu, value) -> float:
    return float(host_floats_or_ints(gpu, value)[0])


@gpu_op("Adagrad", domain=TRAINING)
def adagrad(gpu, ctx, r, t, *tensors, decay_factor=0.0, epsilon=1e-6, norm_coefficient=0.0):
    xs, gs, hs = _groups(gpu, tensors, 3, "Adagrad")
    rate = _scalar(gpu, r) / (1.0 + _scalar(gpu, t) * decay_factor)
    new_xs, new_hs = [], []
    for x, g, h in zip(xs, gs, hs):
        grad = binary(gpu, x, g, REGULARIZED, alpha=norm_coefficient)
        h_new = binary(gpu, h, grad, "x + y * y")
        step = binary(gpu, grad, h_new, "alpha * x / (sqrt(y) + beta)", alpha=rate,
                      beta=epsilon)
        new_xs.append(binary(gpu, x, step, "x - y"))
        new_hs.append(h_new)
    return tuple(new_xs + new_hs)


@gpu_op("Adam", domain=TRAINING)
def adam(gpu, ctx, r, t, *tensors, alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.0,
         norm_coefficient_post=0.0):
    xs, gs, vs, hs = _groups(gpu, tensors, 4, "Adam")
    step_count, rate = _scalar(gpu, t), _scalar(gpu, r)
    if step_count > 0:
        rate = rate * math.sqrt(1 - beta ** step_count) / (1 - alpha ** step_count)
    new_xs, new_vs, new_hs = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        grad = binary(gpu, x, g, REGULARIZED, alpha=norm_coefficient)
        v_new = binary(gpu, v, grad, "alpha * x + (1.0 - alpha) * y", alpha=alpha)
        h_new = binary(gpu, h, grad, "alpha * x + (1.0 - alpha) * y * y", alpha=beta)
        step = binary(gpu, v_new, h_new, "alpha * x / (sqrt(y) + beta)", alpha=rate,
                      beta=epsilon)
        new_xs.append(binary(gpu, x, step, "(x - y) * alpha", alpha=1 - norm_coefficient_post))
        new_vs.append(v_new)
        new_hs.append(h_new)
    return tuple(new_xs + new_vs + new_hs)


def check_momentum(node, opset) -> str:
    mode = node.attr("mode", b"standard")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    return "" if mode in ("standard", "nesterov") else f"mode={mode!r}"


@gpu_op("Momentum", domain=TRAINING, check=check_momentum)
def momentum(gpu, ctx, r, t, *tensors, alpha=None, beta=None, mode=None, norm_coefficient=None):
    xs, gs, vs = _groups(gpu, tensors, 3, "Momentum")
    rate = _scalar(gpu, r)
    grad_coefficient = beta if _scalar(gpu, t) > 0 else 1.0   # the first step: the full gradient
    mode = mode.decode() if isinstance(mode, bytes) else mode
    new_xs, new_vs = [], []
    for x, g, v in zip(xs, gs, vs):
        grad = binary(gpu, x, g, REGULARIZED, alpha=norm_coefficient)
        v_new = binary(gpu, v, grad, "alpha * x + beta * y", alpha=alpha, beta=grad_coefficient)
        if mode == "nesterov":           # X - R * (G + alpha * V_new)
            v_step = binary(gpu, grad, v_new, "x + alpha * y", alpha=alpha)
        else:
            v_step = v_new
        new_xs.append(binary(gpu, x, v_step, "x - alpha * y", alpha=rate))
        new_vs.append(v_new)
    return tuple(new_xs + new_vs)
