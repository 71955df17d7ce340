"""Random operators on the host's generator (Python's `random`, seeded by the node's `seed`
when it has one): RandomUniform(Like), RandomNormal(Like), Bernoulli, and Dropout in training
mode. ONNX fixes the distributions, not the generator: draws differ from the CPU provider's
numpy ones, as they do between runtimes."""
from __future__ import annotations

import random

from ....ir import dtypes
from . import operator
from .common import converted, floats_as, host_floats
from .elementwise import MAP_BINARY, map_binary
from .tensor import CAST_TYPES


def _generator(node) -> random.Random:
    seed = node.attr("seed")
    return random.Random(seed if seed is not None and seed == seed else None)


def _draw(node, count: int) -> list:
    rng = _generator(node)
    if node.op_type.startswith("RandomNormal"):
        mean, scale = float(node.attr("mean", 0.0)), float(node.attr("scale", 1.0))
        return [rng.gauss(mean, scale) for _ in range(count)]
    low, high = float(node.attr("low", 0.0)), float(node.attr("high", 1.0))
    return [rng.uniform(low, high) for _ in range(count)]


@operator("RandomUniform", "RandomNormal")
def bind_random(dev, node, opset):
    shape = [int(d) for d in node.attr("shape")]
    elem_type = int(node.attr("dtype", dtypes.FLOAT))

    def run(ctx, **_):
        count = 1
        for d in shape:
            count *= d
        return floats_as(dev, _draw(node, count), shape, elem_type)
    return run


@operator("RandomUniformLike", "RandomNormalLike")
def bind_random_like(dev, node, opset):
    dtype = node.attr("dtype")

    def run(ctx, x, **_):
        elem_type = int(dtype) if dtype is not None else x.elem_type
        if elem_type not in CAST_TYPES:
            raise TypeError(f"{node.op_type} to {dtypes.type_string(elem_type)}")
        return floats_as(dev, _draw(node, x.size), x.shape, elem_type)
    return run


@operator("Bernoulli")
def bind_bernoulli(dev, node, opset):
    """1 with probability x per element."""
    dtype = node.attr("dtype")

    def run(ctx, x, **_):
        probabilities = host_floats(dev, x)
        rng = _generator(node)
        draws = [1.0 if rng.random() < q else 0.0 for q in probabilities]
        return floats_as(dev, draws, x.shape, int(dtype) if dtype is not None else x.elem_type)
    return run


def dropout_training(dev, node, x, ratio: float, want_mask: bool):
    """Each element kept with probability 1 - ratio and scaled by 1 / (1 - ratio)."""
    if not 0 <= ratio < 1:
        raise ValueError(f"Dropout ratio must lie in [0, 1), got {ratio}")
    rng = _generator(node)
    keep = [rng.random() >= ratio for _ in range(x.size)]
    mask = dev.from_ints([int(k) for k in keep], x.shape, dtypes.BOOL) if x.size <= 64 else \
        floats_as(dev, [float(k) for k in keep], x.shape, dtypes.BOOL)
    scale = floats_as(dev, [1.0 / (1.0 - ratio)], (), x.elem_type)
    kept = map_binary(dev, MAP_BINARY.index("Mul"), x, converted(dev, mask, x.elem_type),
                      x.elem_type)
    y = map_binary(dev, MAP_BINARY.index("Mul"), kept, scale, x.elem_type)
    return (y, mask) if want_mask else y
