"""Random graph generators, one per operator family.

Each generator takes a numpy Generator and returns a Case: one node under test (sometimes
a short chain), random attributes within the operator's spec, random shapes (batch 1 and
more, size-1 axes, empty tensors where the operator allows them, channel counts large
enough to cross the kernels' method thresholds) and random values. Graph inputs may reach
the node through a Transpose, Slice or Expand (builder.py) so kernels see strided,
reversed and broadcast views. Adding a family is one decorated function here.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .builder import Case, GraphBuilder, Tolerance

FAMILIES: dict = {}

FLOAT_TOL = Tolerance()


def family(name: str, weight: float = 1.0):
    """Registers a generator under `name`; `weight` is its share of the random cases."""
    def register(fn):
        FAMILIES[name] = (fn, weight)
        return fn
    return register


# ---------------------------------------------------------------- small helpers


def pick(rng, options, p=None) -> Any:
    """One of `options` (any objects), optionally with probabilities."""
    return options[int(rng.choice(len(options), p=p))]


def chance(rng, probability: float) -> bool:
    return bool(rng.random() < probability)


def ints(rng, low: int, high: int, size=None):
    """Integers in [low, high] inclusive (a Python int when size is None)."""
    if size is None:
        return int(rng.integers(low, high + 1))
    return [int(v) for v in rng.integers(low, high + 1, size)]


def log_int(rng, low: int, high: int) -> int:
    """An integer in [low, high], log-uniform (small sizes common, large ones reached)."""
    value = math.exp(rng.uniform(math.log(low + 1), math.log(high + 2))) - 1
    return int(min(high, max(low, math.floor(value))))


def values(rng, shape, dtype=np.float32, low=None, high=None):
    """Random values of `dtype`: normal floats (or uniform in [low, high]), integers in a
    small range, booleans half true."""
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else (-20 if low is None else low)
        hi = 20 if high is None else high
        lo = max(lo, int(np.iinfo(dtype).min))
        hi = min(hi, int(np.iinfo(dtype).max))
        return rng.integers(lo, hi + 1, shape).astype(dtype)
    if low is not None or high is not None:
        low = -abs(high) if low is None else low
        return rng.uniform(low, abs(low) if high is None else high, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def random_shape(rng, rank: int, low: int = 1, high: int = 6, empty_chance: float = 0.0):
    shape = [log_int(rng, low, high) for _ in range(rank)]
    if shape and chance(rng, empty_chance):
        shape[ints(rng, 0, rank - 1)] = 0
    return shape


def broadcast_shapes(rng, count: int, max_rank: int = 4):
    """`count` shapes that broadcast together (numpy rules): suffixes of one full shape
    with some axes set to 1."""
    rank = ints(rng, 0, max_rank)
    full = random_shape(rng, rank, 1, 6, empty_chance=0.03)
    shapes = []
    for _ in range(count):
        own = ints(rng, 0, rank) if chance(rng, 0.4) else rank
        shape = full[rank - own:]
        shape = [1 if chance(rng, 0.25) else d for d in shape]
        shapes.append(shape)
    return shapes


def he(rng, shape, fan_in: int, dtype=np.float32):
    """Weights scaled by 1/sqrt(fan_in), so outputs stay near unit size."""
    return (rng.standard_normal(shape) / math.sqrt(max(fan_in, 1))).astype(dtype)


def describe(op: str, shapes, **attrs) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in attrs.items() if v is not None)
    operands = " ".join("none" if s is None else str(list(s)) for s in shapes)
    return f"{op} {operands} {shown}".strip()


def finish(b: GraphBuilder, family_name: str, summary: str, outputs,
           tolerance: Tolerance = FLOAT_TOL, unordered=()) -> Case:
    b.output(*outputs)
    return b.build(family_name, summary, tolerance, unordered)


# ---------------------------------------------------------------- window geometry


def window_attrs(rng, rank: int, kernel: list, allow_dilation=True, pad_below_kernel=False,
                 max_stride=3):
    """(strides, dilations, pads or None, auto_pad or None) for a sliding window."""
    strides = [pick(rng, [1, 1, 1, 2, 2, 3][:2 + 2 * max_stride]) for _ in range(rank)]
    strides = [min(s, max_stride) for s in strides]
    dilations = ([pick(rng, [1, 1, 1, 2, 3]) for _ in range(rank)] if allow_dilation
                 else [1] * rank)
    if chance(rng, 0.15):
        return strides, dilations, None, pick(rng, ["SAME_UPPER", "SAME_LOWER", "VALID"])
    pads = []
    for k, d in zip(kernel * 2, dilations * 2):
        limit = k - 1 if pad_below_kernel else (k - 1) * d
        pads.append(ints(rng, 0, limit) if limit > 0 and chance(rng, 0.6) else 0)
    return strides, dilations, pads, None


def input_extent(rng, kernel, strides, dilations, pads, auto_pad, low, high):
    """Spatial input sizes with at least one output position per axis."""
    sizes = []
    for i, (k, s, d) in enumerate(zip(kernel, strides, dilations)):
        span = (k - 1) * d + 1
        size = log_int(rng, low, high)
        if auto_pad in (None, "NOTSET", "VALID"):
            padding = 0 if pads is None else pads[i] + pads[i + len(kernel)]
            size = max(size, span - padding)
        sizes.append(max(size, 1))
    return sizes


# ---------------------------------------------------------------- conv


CONV_REGIMES = (("general", 0.42), ("depthwise", 0.15), ("pointwise", 0.1),
                ("few_positions", 0.13), ("taps", 0.08), ("chunked", 0.04),
                ("winograd", 0.04), ("grouped", 0.04))


@family("conv", weight=3.0)
def conv(rng) -> Case:
    """Conv over 1-3 spatial axes; regimes aim at each method the CPU provider picks."""
    regime = pick(rng, *zip(*CONV_REGIMES))
    opset = pick(rng, [11, 11, 22])
    b = GraphBuilder(rng, opset)
    rank = pick(rng, [1, 2, 3], [0.2, 0.65, 0.15])
    batch = pick(rng, [1, 1, 2, 3, 4])
    group, cin, cout = 1, log_int(rng, 1, 16), log_int(rng, 1, 16)
    kernel = [pick(rng, [1, 2, 3, 3, 5]) for _ in range(rank)]
    low, high = 1, (24 if rank < 3 else 8)
    strides: Any = None
    dilations: Any = None
    pads: Any = None
    auto_pad: Any = None
    if regime == "winograd":
        rank, batch, group = 2, pick(rng, [1, 1, 2]), 1
        cin, cout, kernel = ints(rng, 96, 112), ints(rng, 128, 136), [3, 3]
        side = 2 * ints(rng, 7, 10)
        strides, dilations, pads = [1, 1], [1, 1], [1, 1, 1, 1]
        low = high = side
    elif regime == "chunked":
        rank, batch, cin, cout = 2, 1, ints(rng, 32, 36), ints(rng, 2, 6)
        kernel = [pick(rng, [1, 3]), 3]
        low, high = 92, 100
    elif regime == "taps":
        rank, batch, cin = 2, 1, ints(rng, 32, 64)
        cout = pick(rng, [ints(rng, 4, 32), ints(rng, 33, 96), ints(rng, 97, 128)])
        kernel = [pick(rng, [1, 3]), 3]
        low, high = 22, 50
    elif regime == "few_positions":
        cin = log_int(rng, 1, 256)
        cout = log_int(rng, 1, 128)
        low, high = 1, 4
        batch = pick(rng, [1, 1, 2, 8])
    elif regime == "pointwise":
        kernel = [1] * rank
        cin, cout = log_int(rng, 1, 64), log_int(rng, 1, 64)
        pads = [0] * (2 * rank)
        dilations = [1] * rank
        strides = [pick(rng, [1, 1, 2]) for _ in range(rank)]
    elif regime == "depthwise":
        cin = log_int(rng, 1, 48)
        group, cout = cin, cin * pick(rng, [1, 1, 1, 2])
        if rank == 2 and chance(rng, 0.5):
            low, high = 8, 64
    elif regime == "grouped":
        group = pick(rng, [2, 3, 4])
        cin, cout = group * ints(rng, 1, 6), group * ints(rng, 1, 6)
    if strides is None:
        strides, dilations, pads, auto_pad = window_attrs(rng, rank, kernel)
    spatial = input_extent(rng, kernel, strides, dilations, pads, auto_pad, low, high)
    out = [max(1, (x + (pads[i] + pads[i + rank] if pads else k) - ((k - 1) * d + 1)) // s + 1)
           for i, (x, k, d, s) in enumerate(zip(spatial, kernel, dilations, strides))]
    while batch * cout * (cin // group) * math.prod(kernel) * math.prod(out) > 4e7 and \
            max(spatial) > 1 and regime != "winograd":
        spatial = [max(1, x // 2) for x in spatial]
        out = [max(1, o // 2) for o in out]
    x = values(rng, [batch, cin] + spatial)
    w = he(rng, [cout, cin // group] + kernel, cin // group * math.prod(kernel))
    inputs = [b.operand(x), b.operand(w, const_chance=0.8)]
    if chance(rng, 0.5):
        inputs.append(b.operand(values(rng, [cout]) * 0.1, const_chance=0.8))
    y = b.node("Conv", inputs, kernel_shape=kernel if chance(rng, 0.5) else None,
               strides=strides, dilations=dilations, pads=pads, auto_pad=auto_pad,
               group=group if group > 1 or chance(rng, 0.3) else None)
    y, activation = _conv_activation(rng, b, opset, y)
    summary = describe(f"Conv[{regime}]", [x.shape, w.shape], strides=strides,
                       dilations=dilations, pads=pads, auto_pad=auto_pad, group=group,
                       activation=activation)
    return finish(b, "conv", summary, y)


def _conv_activation(rng, b: GraphBuilder, opset: int, y) -> tuple:
    """Half the time an activation after the Conv, which the optimizer fuses into FusedConv
    (the CPU provider applies some in its native conv passes): (output, activation or None)."""
    kinds = ["Relu", "LeakyRelu", "HardSigmoid", "Clip", "Sigmoid"] + \
        (["HardSwish"] if opset >= 14 else [])
    if not chance(rng, 0.5):
        return y, None
    kind = pick(rng, kinds)
    if kind == "LeakyRelu":
        return b.node(kind, y, alpha=float(pick(rng, [0.01, 0.2, 1.5]))), kind
    if kind == "HardSigmoid":
        return b.node(kind, y, alpha=float(pick(rng, [0.2, 1 / 6])), beta=0.5), kind
    if kind == "Clip":
        low, high = pick(rng, [(0.0, 6.0), (-0.5, 0.5), (-1.0, 1.0)])
        return b.node(kind, y + [b.const(np.float32(low)), b.const(np.float32(high))]), kind
    return b.node(kind, y), kind


@family("conv_transpose")
def conv_transpose(rng) -> Case:
    b = GraphBuilder(rng, pick(rng, [11, 22]))
    rank = pick(rng, [1, 2, 3], [0.25, 0.6, 0.15])
    group = pick(rng, [1, 1, 1, 2, 3])
    cin, per_group = group * log_int(rng, 1, 8), log_int(rng, 1, 8)
    batch = pick(rng, [1, 1, 2, 3])
    kernel = [pick(rng, [1, 2, 3, 4, 5]) for _ in range(rank)]
    strides = [pick(rng, [1, 1, 2, 3]) for _ in range(rank)]
    dilations = [pick(rng, [1, 1, 2]) for _ in range(rank)]
    spatial = [log_int(rng, 1, 12 if rank < 3 else 5) for _ in range(rank)]
    style = pick(rng, ["pads", "output_shape", "auto_pad"], [0.7, 0.15, 0.15])
    if style == "auto_pad":
        # SAME asks for input * stride outputs; where the kernel spans less than a stride
        # that needs negative padding, which onnxruntime clamps to 0 (fewer outputs) and the
        # spec does not: only spans of a stride or more have an oracle
        strides = [min(s, (k - 1) * d + 1) for s, k, d in zip(strides, kernel, dilations)]
    attrs = {"strides": strides, "dilations": dilations}
    if style == "pads":
        attrs["pads"] = [ints(rng, 0, (k - 1) * d) if chance(rng, 0.5) else 0
                         for k, d in zip(kernel * 2, dilations * 2)]
        attrs["output_padding"] = [ints(rng, 0, s - 1) if chance(rng, 0.3) else 0
                                   for s in strides]   # onnxruntime: below the stride
        natural = [s * (x - 1) + op + (k - 1) * d + 1 - attrs["pads"][i] - attrs["pads"][i + rank]
                   for i, (s, x, op, k, d) in enumerate(zip(strides, spatial,
                                                            attrs["output_padding"], kernel,
                                                            dilations))]
        if min(natural) < 1:
            attrs["pads"] = [0] * (2 * rank)
    elif style == "output_shape":
        attrs["output_shape"] = [s * (x - 1) + (k - 1) * d + 1 + ints(rng, 0, s - 1)
                                 for s, x, k, d in zip(strides, spatial, kernel, dilations)]
    else:
        attrs["auto_pad"] = pick(rng, ["SAME_UPPER", "SAME_LOWER", "VALID"])
    x = values(rng, [batch, cin] + spatial)
    w = he(rng, [cin, per_group] + kernel, cin // group * math.prod(kernel))
    inputs = [b.operand(x), b.operand(w, const_chance=0.8)]
    if chance(rng, 0.5):
        inputs.append(b.operand(values(rng, [per_group * group]) * 0.1, const_chance=0.8))
    y = b.node("ConvTranspose", inputs, group=group if group > 1 else None, **attrs)
    return finish(b, "conv_transpose", describe("ConvTranspose", [x.shape, w.shape],
                                                group=group, **attrs), y)


# ---------------------------------------------------------------- pools


@family("pool", weight=2.0)
def pool(rng) -> Case:
    op = pick(rng, ["MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool",
                    "GlobalLpPool"], [0.38, 0.32, 0.06, 0.1, 0.09, 0.05])
    rank = pick(rng, [1, 2, 3], [0.2, 0.65, 0.15])
    batch, channels = pick(rng, [1, 1, 2, 3]), log_int(rng, 1, 16)
    dtype = np.float32
    if op.startswith("Global"):
        opset = pick(rng, [11, 18] if op == "GlobalLpPool" else [11, 22])
        b = GraphBuilder(rng, opset)
        x = values(rng, [batch, channels] + [log_int(rng, 1, 24) for _ in range(rank)])
        attrs = {"p": pick(rng, [1, 2, 3])} if op == "GlobalLpPool" else {}
        y = b.node(op, [b.operand(x)], **attrs)
        return finish(b, "pool", describe(op, [x.shape], **attrs), y)
    opset = {"MaxPool": pick(rng, [8, 11, 12, 22]), "AveragePool": pick(rng, [11, 19, 22]),
             "LpPool": pick(rng, [11, 18, 22])}[op]
    b = GraphBuilder(rng, opset)
    kernel = [pick(rng, [1, 2, 2, 3, 3, 4, 5]) for _ in range(rank)]
    dilation_ok = (op == "MaxPool" and opset >= 10) or opset >= 19 or \
        (op == "LpPool" and opset >= 18)
    strides, dilations, pads, auto_pad = window_attrs(rng, rank, kernel, dilation_ok,
                                                      pad_below_kernel=True)
    if auto_pad is not None:
        # auto_pad with dilations (SAME, VALID), or SAME with strides past the kernel, has no
        # oracle: onnxruntime sizes the output without the dilation and refuses the negative
        # padding, the reference splits the padding otherwise (edgerun follows the spec)
        dilations = [1] * rank
        strides = [min(s, k) for s, k in zip(strides, kernel)] if auto_pad != "VALID" \
            else strides
    spatial = input_extent(rng, kernel, strides, dilations, pads, auto_pad, 1,
                           40 if rank < 3 else 10)
    ceil_ok = op != "LpPool" or opset >= 18
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads, "auto_pad": auto_pad,
             "dilations": dilations if dilation_ok and chance(rng, 0.6) else None,
             "ceil_mode": ints(rng, 0, 1) if ceil_ok and opset >= 10 and chance(rng, 0.4)
             else None}
    outputs = 1
    if op == "MaxPool":
        if opset >= 12 and chance(rng, 0.15):
            dtype = pick(rng, [np.float64, np.float16, np.int8, np.uint8])
        if chance(rng, 0.25) and np.dtype(dtype).kind == "f":
            outputs = 2
            attrs["storage_order"] = pick(rng, [0, 1]) if rank == 2 else None
    elif op == "AveragePool":
        attrs["count_include_pad"] = pick(rng, [0, 1])
        if chance(rng, 0.1):
            dtype = pick(rng, [np.float64, np.float16])
    else:
        attrs["p"] = pick(rng, [1, 2, 3])
    x = values(rng, [batch, channels] + spatial, dtype, low=-100 if dtype != np.float32 else None,
               high=100 if dtype != np.float32 else None)
    y = b.node(op, [b.operand(x)], outputs, **attrs)
    tolerance = FLOAT_TOL.widened(30) if dtype == np.float16 else FLOAT_TOL
    return finish(b, "pool", describe(op, [x.shape], **attrs), y, tolerance)


# ---------------------------------------------------------------- resize


RESIZE_COORDINATES = ["half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners",
                      "tf_crop_and_resize", "half_pixel_symmetric"]


@family("resize", weight=1.5)
def resize(rng) -> Case:
    opset = pick(rng, [11, 13, 18, 19])
    b = GraphBuilder(rng, opset)
    rank = pick(rng, [4, 4, 4, 3, 5, 2])
    mode = pick(rng, ["nearest", "linear", "cubic"])
    coordinates = pick(rng, RESIZE_COORDINATES[:5] + (RESIZE_COORDINATES[5:] if opset >= 19
                                                     else []))
    shape = [pick(rng, [1, 1, 2]), log_int(rng, 1, 4)] + [log_int(rng, 1, 12)
                                                          for _ in range(rank - 2)]
    if rank == 2:
        shape = [log_int(rng, 1, 12), log_int(rng, 1, 12)]
    spatial = list(range(rank - 2 if rank > 2 else 0, rank))
    if mode != "nearest":
        # onnxruntime's linear and cubic resample the last 2 axes of 2-D and 4-D inputs
        # (linear also the last 3 of 5-D); other forms have only the reference, which gets
        # some of them wrong (N-D cubic with exclude_outside)
        rank = pick(rng, [4, 4, 2] + ([5] if mode == "linear" else []))
        shape = shape[:2] + [log_int(rng, 1, 12) for _ in range(rank - 2)] if rank > 2 \
            else [log_int(rng, 1, 12), log_int(rng, 1, 12)]
        spatial = list(range(rank - (3 if rank == 5 else 2), rank))
    attrs = {"mode": mode, "coordinate_transformation_mode": coordinates}
    if mode == "nearest":
        attrs["nearest_mode"] = pick(rng, ["round_prefer_floor", "round_prefer_ceil", "floor",
                                           "ceil"])
    if mode == "cubic":
        attrs["cubic_coeff_a"] = pick(rng, [-0.75, -0.5])
        attrs["exclude_outside"] = pick(rng, [0, 0, 1])
    if opset >= 18 and mode != "nearest" and chance(rng, 0.25):
        attrs["antialias"] = 1
    axes = None
    if opset >= 18 and chance(rng, 0.3):
        axes = spatial
        attrs["axes"] = axes
    by_sizes = chance(rng, 0.4)
    crop = coordinates == "tf_crop_and_resize"
    targets = axes if axes else list(range(rank))
    if by_sizes:
        sizes = [shape[a] if a not in spatial else log_int(rng, 1, 24) for a in targets]
        if opset >= 18 and not crop and chance(rng, 0.3) and axes:
            # (over the spatial axes only: without `axes` it scales batch and channels too,
            # which onnxruntime refuses and the reference resizes otherwise than the spec)
            attrs["keep_aspect_ratio_policy"] = pick(rng, ["not_larger", "not_smaller"])
        out = sizes
    else:
        scales = [1.0 if a not in spatial else
                  pick(rng, [0.5, 0.6, 0.75, 1.0, 4 / 3, 1.5, 2.0, 2.5, 3.0]) for a in targets]
        out = [int(math.floor(shape[a] * float(np.float32(sc)))) for a, sc in zip(targets, scales)]
    x = values(rng, shape)
    inputs = [b.operand(x)]
    if crop:
        # onnxruntime leaves an axis whose size stays alone; the spec crops it to the roi:
        # such axes get the whole range
        n = len(targets)
        starts = rng.uniform(-0.2, 0.5, n)
        ends = starts + rng.uniform(0.3, 1.2, n)
        for i, a in enumerate(targets):
            if a not in spatial or out[i] == shape[a]:
                starts[i], ends[i] = 0.0, 1.0
        inputs.append(b.const(np.concatenate([starts, ends]).astype(np.float32)))
        attrs["extrapolation_value"] = float(pick(rng, [0.0, -1.5]))
    else:
        inputs.append(b.const(np.zeros(0, np.float32)) if opset < 13 else "")
    if by_sizes:
        inputs.append(b.const(np.zeros(0, np.float32)) if opset < 13 else "")
        inputs.append(b.const(np.array(sizes, np.int64)))
    else:
        inputs.append(b.const(np.array(scales, np.float32)))
    y = b.node("Resize", inputs, **attrs)
    tolerance = FLOAT_TOL.widened(10)
    return finish(b, "resize", describe("Resize", [x.shape], inputs=inputs[1:], **attrs), y,
                  tolerance)


# ---------------------------------------------------------------- matmul / gemm


@family("matmul", weight=2.0)
def matmul(rng) -> Case:
    if chance(rng, 0.35):
        return _gemm(rng)
    b = GraphBuilder(rng, pick(rng, [13, 13, 21]))
    m, k, n = log_int(rng, 1, 200), log_int(rng, 1, 300), log_int(rng, 1, 200)
    batch = broadcast_shapes(rng, 2, 2) if chance(rng, 0.5) else [[], []]
    while math.prod([max(a, c) for a, c in zip(batch[0][::-1], batch[1][::-1])] or [1]) * \
            m * k * n > 2e7:
        m, n = max(1, m // 2), max(1, n // 2)
    a_shape = batch[0] + [m, k] if chance(rng, 0.9) else [k]
    b_shape = batch[1] + [k, n] if chance(rng, 0.9) else [k]
    a = values(rng, a_shape)
    w = he(rng, b_shape, k)
    y = b.node("MatMul", [b.operand(a), b.operand(w, const_chance=0.6)])
    return finish(b, "matmul", describe("MatMul", [a.shape, w.shape]), y)


def _gemm(rng) -> Case:
    b = GraphBuilder(rng, pick(rng, [11, 13]))
    m, k, n = log_int(rng, 1, 200), log_int(rng, 1, 300), log_int(rng, 1, 200)
    trans_a, trans_b = pick(rng, [0, 0, 1]), pick(rng, [0, 1])
    a = values(rng, [k, m] if trans_a else [m, k])
    w = he(rng, [n, k] if trans_b else [k, n], k)
    attrs = {"transA": trans_a or None, "transB": trans_b or None,
             "alpha": float(pick(rng, [1.0, 1.0, 0.5, -2.0])),
             "beta": float(pick(rng, [1.0, 1.0, 0.0, 3.0]))}
    inputs = [b.operand(a), b.operand(w, const_chance=0.7)]
    c_shape = pick(rng, [None, [], [n], [1, n], [m, 1], [m, n]])
    if c_shape is not None:
        inputs.append(b.operand(values(rng, c_shape), const_chance=0.7))
    y = b.node("Gemm", inputs, **attrs)
    return finish(b, "matmul", describe("Gemm", [a.shape, w.shape, c_shape], **attrs), y)


# ---------------------------------------------------------------- elementwise


ARITHMETIC_TYPES = [np.float32] * 6 + [np.float64, np.float16, np.int32, np.int64, np.int8,
                                       np.uint8]

# op -> (input count or "variadic", dtypes, first opset)
BINARY_OPS: dict[str, Any] = {
    "Add": (2, ARITHMETIC_TYPES, 7), "Sub": (2, ARITHMETIC_TYPES, 7),
    "Mul": (2, ARITHMETIC_TYPES, 7), "Div": (2, ARITHMETIC_TYPES, 7),
    "Pow": (2, [np.float32, np.float32, np.float64, np.int32, np.int64], 12),
    "Max": ("variadic", ARITHMETIC_TYPES, 12), "Min": ("variadic", ARITHMETIC_TYPES, 12),
    "Mean": ("variadic", [np.float32], 8), "Sum": ("variadic", [np.float32, np.float64], 8),
    "Equal": (2, ARITHMETIC_TYPES + [np.bool_], 13), "Less": (2, ARITHMETIC_TYPES, 9),
    "Greater": (2, ARITHMETIC_TYPES, 9), "LessOrEqual": (2, ARITHMETIC_TYPES, 12),
    "GreaterOrEqual": (2, ARITHMETIC_TYPES, 12),
    "And": (2, [np.bool_], 7), "Or": (2, [np.bool_], 7), "Xor": (2, [np.bool_], 7),
    "Mod": (2, [np.float32, np.int32, np.int64, np.int8], 13),
    "BitShift": (2, [np.uint8, np.uint32, np.uint64], 11),
    "BitwiseAnd": (2, [np.int32, np.int64, np.uint8], 18),
    "BitwiseOr": (2, [np.int32, np.int64, np.uint8], 18),
    "BitwiseXor": (2, [np.int32, np.int64, np.uint8], 18),
    "PRelu": (2, [np.float32, np.float64], 16), "Where": (3, [np.float32, np.int64], 16),
}


@family("binary", weight=2.5)
def binary(rng) -> Case:
    op = pick(rng, list(BINARY_OPS))
    arity, dtypes, first = BINARY_OPS[op]
    dtype = np.dtype(pick(rng, dtypes))
    b = GraphBuilder(rng, max(first, pick(rng, [13, 14, 18, 21])))
    count = ints(rng, 1, 4) if arity == "variadic" else arity
    shapes = broadcast_shapes(rng, count)
    attrs = {}
    if op == "PRelu":                            # the slope broadcasts to X (one way)
        full = shapes[0] = list(np.broadcast_shapes(*[tuple(s) for s in shapes]))
        shapes[1] = [1 if chance(rng, 0.5) else d for d in full[len(full) - len(shapes[1]):]]
    operands = []
    for i, shape in enumerate(shapes):
        if op == "Where" and i == 0:
            operands.append(values(rng, shape, np.bool_))
        elif op == "Div" and i == 1 or op == "Mod" and i == 1:
            v = values(rng, shape, dtype, low=1 if dtype.kind == "f" else None)
            if dtype.kind in "iu":
                v[v == 0] = 3
            elif chance(rng, 0.5):
                v = (v * np.where(rng.random(v.shape) < 0.5, -1, 1)).astype(dtype)
            operands.append(v)
        elif op == "Pow" and i == 0 and dtype.kind == "f":
            operands.append(values(rng, shape, dtype, low=0.1, high=3.0))
        elif op == "Pow" and i == 1:
            operands.append(values(rng, shape, dtype, low=-2, high=3) if dtype.kind == "f"
                            else values(rng, shape, dtype, low=0, high=4))
        elif op == "BitShift" and i == 1:
            operands.append(values(rng, shape, dtype, low=0, high=7))
        else:
            operands.append(values(rng, shape, dtype))
    if op == "Mod":
        attrs["fmod"] = 1 if dtype.kind == "f" else pick(rng, [0, 1])
    if op == "BitShift":
        attrs["direction"] = pick(rng, ["LEFT", "RIGHT"])
    names = [b.operand(v, const_chance=0.2) for v in operands]
    y = b.node(op, names, **attrs)
    tolerance = FLOAT_TOL.widened(20) if dtype == np.float16 else FLOAT_TOL
    return finish(b, "binary", describe(op, [v.shape for v in operands], dtype=dtype.name,
                                        **attrs), y, tolerance)


def _interval(low, high):
    return {"low": low, "high": high}


# op -> (first opset, value range or None for normal values, attributes maker, dtypes)
UNARY_OPS: dict[str, Any] = {
    "Relu": (14, None, None, "fis"), "Sigmoid": (13, None, None, "f"),
    "Tanh": (13, None, None, "f"), "Exp": (13, None, None, "f"),
    "Log": (13, _interval(0.05, 5), None, "f"), "Sqrt": (13, _interval(0, 5), None, "f"),
    "Reciprocal": (13, _interval(0.2, 4), None, "f"), "Abs": (13, None, None, "fis"),
    "Neg": (13, None, None, "fs"), "Floor": (13, None, None, "f"),
    "Ceil": (13, None, None, "f"), "Round": (11, None, None, "f"),
    "Sign": (13, None, None, "fis"), "Erf": (13, None, None, "f"),
    "Sin": (7, None, None, "f"), "Cos": (7, None, None, "f"), "Tan": (7, _interval(-1.2, 1.2),
                                                                     None, "f"),
    "Asin": (7, _interval(-0.99, 0.99), None, "f"), "Acos": (7, _interval(-0.99, 0.99), None, "f"),
    "Atan": (7, None, None, "f"), "Sinh": (9, None, None, "f"), "Cosh": (9, None, None, "f"),
    "Asinh": (9, None, None, "f"), "Acosh": (9, _interval(1.01, 5), None, "f"),
    "Atanh": (9, _interval(-0.95, 0.95), None, "f"),
    "Softplus": (7, None, None, "f"), "Softsign": (7, None, None, "f"),
    "LeakyRelu": (16, None, lambda r: {"alpha": float(pick(r, [0.01, 0.2, 1.5]))}, "f"),
    "Elu": (6, None, lambda r: {"alpha": float(pick(r, [1.0, 0.5]))}, "f"),
    "Selu": (6, None, lambda r: {"alpha": float(pick(r, [1.67, 2.0])),
                                 "gamma": float(pick(r, [1.05, 0.5]))}, "f"),
    "Celu": (12, None, lambda r: {"alpha": float(pick(r, [1.0, 0.7]))}, "f"),
    "ThresholdedRelu": (10, None, lambda r: {"alpha": float(pick(r, [1.0, 0.3]))}, "f"),
    "HardSigmoid": (6, None, lambda r: {"alpha": float(pick(r, [0.2, 1 / 6])),
                                        "beta": float(pick(r, [0.5, 0.4]))}, "f"),
    "HardSwish": (14, _interval(-5, 5), None, "f"), "Mish": (18, None, None, "f"),
    "Gelu": (20, None, lambda r: {"approximate": pick(r, ["none", "tanh"])}, "f"),
    "Shrink": (9, None, lambda r: {"bias": float(pick(r, [0.0, 0.5])),
                                   "lambd": float(pick(r, [0.5, 1.0]))}, "f"),
    "Not": (1, None, None, "b"), "IsNaN": (13, None, None, "F"), "IsInf": (10, None, None, "F"),
    "BitwiseNot": (18, None, None, "i"), "Identity": (16, None, None, "fib"),
    "Clip": (13, None, None, "fi"),
}

KIND_TYPES: dict[str, list] = {"f": [np.float32] * 5 + [np.float64, np.float16], "F": [np.float32],
              "i": [np.int32, np.int64, np.int8], "s": [np.int32, np.int64],
              "b": [np.bool_]}


@family("unary", weight=2.5)
def unary(rng) -> Case:
    op = pick(rng, list(UNARY_OPS))
    first, interval, make_attrs, kinds = UNARY_OPS[op]
    dtype = np.dtype(pick(rng, [t for k in kinds for t in KIND_TYPES[k]]))
    b = GraphBuilder(rng, max(first, pick(rng, [13, 18, 21])))
    shape = random_shape(rng, ints(rng, 0, 4), 1, 8, empty_chance=0.03)
    x = values(rng, shape, dtype, **(interval or {}))
    if dtype.kind == "f" and not interval:
        x = (x * 3).astype(dtype)
    if op in ("IsNaN", "IsInf") and x.size:
        x.reshape(-1)[rng.random(x.size) < 0.2] = pick(rng, [np.nan, np.inf, -np.inf])
    attrs = make_attrs(rng) if make_attrs else {}
    inputs = [b.operand(x)]
    if op == "IsInf":
        attrs = {"detect_positive": pick(rng, [0, 1]), "detect_negative": pick(rng, [0, 1])}
    if op == "Clip":
        low = np.array(-0.5 if dtype.kind == "f" else -3).astype(dtype)
        high = np.array(0.75 if dtype.kind == "f" else 4).astype(dtype)
        inputs += [b.const(low) if chance(rng, 0.7) else "",
                   b.const(high) if chance(rng, 0.7) else ""]
        while inputs and inputs[-1] == "":
            inputs.pop()
    y = b.node(op, inputs, **attrs)
    tolerance = FLOAT_TOL.widened(30) if dtype == np.float16 else FLOAT_TOL.widened(3)
    return finish(b, "unary", describe(op, [x.shape], dtype=dtype.name, **attrs), y, tolerance)


# ---------------------------------------------------------------- reductions


REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


@family("reduce", weight=2.0)
def reduce(rng) -> Case:
    if chance(rng, 0.2):
        return _arg_reduce(rng)
    op = pick(rng, REDUCE_OPS)
    opset = pick(rng, [13, 18, 18])
    b = GraphBuilder(rng, opset)
    rank = ints(rng, 1, 4)
    shape = random_shape(rng, rank, 1, 9, empty_chance=0.03)
    dtype = np.dtype(pick(rng, [np.float32] * 4 + [np.float64, np.float16] +
                          ([np.int32, np.int64] if op in ("ReduceSum", "ReduceMax",
                                                          "ReduceMin", "ReduceProd") else [])))
    if op == "ReduceProd":
        x = values(rng, shape, dtype, low=0.7, high=1.3) if dtype.kind == "f" else \
            values(rng, shape, dtype, low=-2, high=2)
    elif op == "ReduceLogSum":
        x = values(rng, shape, dtype, low=0.1, high=2.0)
    else:
        x = values(rng, shape, dtype)
    axes = sorted(set(ints(rng, -rank, rank - 1, ints(rng, 0, rank))))
    axes = [a for i, a in enumerate(axes) if (a % rank) not in [c % rank for c in axes[:i]]]
    attrs = {"keepdims": pick(rng, [0, 1, None])}
    inputs = [b.operand(x)]
    axes_as_input = op == "ReduceSum" or opset >= 18
    if axes or chance(rng, 0.3):
        if axes_as_input:
            inputs.append(b.const(np.array(axes, np.int64)))
            if not axes:
                attrs["noop_with_empty_axes"] = pick(rng, [0, 1])
        elif axes:
            attrs["axes"] = axes
    if op in ("ReduceMax", "ReduceMin") and x.size == 0:
        x = values(rng, [max(d, 1) for d in shape], dtype)
        inputs[0] = b.operand(x)
    y = b.node(op, inputs, **attrs)
    tolerance = FLOAT_TOL.widened(30) if dtype == np.float16 else FLOAT_TOL.widened(3)
    shown_axes = axes if axes_as_input and len(inputs) > 1 else None
    return finish(b, "reduce", describe(op, [x.shape], dtype=dtype.name, axes_input=shown_axes,
                                        **attrs),
                  y, tolerance)


def _arg_reduce(rng) -> Case:
    op = pick(rng, ["ArgMax", "ArgMin"])
    b = GraphBuilder(rng, pick(rng, [11, 13]))
    rank = ints(rng, 1, 4)
    shape = random_shape(rng, rank, 1, 9)
    dtype = pick(rng, [np.float32, np.float32, np.int32, np.int64])
    x = values(rng, shape, dtype, low=-1000, high=1000)
    attrs = {"axis": ints(rng, -rank, rank - 1), "keepdims": pick(rng, [0, 1, None])}
    if b.opset >= 12 and chance(rng, 0.3):
        attrs["select_last_index"] = 1
    y = b.node(op, [b.operand(x)], **attrs)
    return finish(b, "reduce", describe(op, [x.shape], **attrs), y)


# ---------------------------------------------------------------- softmax and norms


@family("softmax")
def softmax(rng) -> Case:
    op = pick(rng, ["Softmax", "Softmax", "LogSoftmax", "Hardmax"])
    b = GraphBuilder(rng, pick(rng, [11, 13, 13]))
    rank = ints(rng, 1, 4)
    x = (values(rng, random_shape(rng, rank, 1, 12)) * 3).astype(np.float32)
    axis = ints(rng, -rank, rank - 1) if chance(rng, 0.8) else None
    y = b.node(op, [b.operand(x)], axis=axis)
    return finish(b, "softmax", describe(op, [x.shape], axis=axis, opset=b.opset), y)


@family("norm", weight=1.5)
def norm(rng) -> Case:
    op = pick(rng, ["LayerNormalization", "BatchNormalization", "InstanceNormalization",
                    "GroupNormalization", "LpNormalization", "MeanVarianceNormalization"],
              [0.3, 0.25, 0.15, 0.1, 0.1, 0.1])
    rank = ints(rng, 2, 4) if op != "MeanVarianceNormalization" else 4
    shape = [pick(rng, [1, 1, 2, 3])] + [log_int(rng, 1, 12) for _ in range(rank - 1)]
    if op == "LpNormalization":
        rank = ints(rng, 1, 4)
        shape = random_shape(rng, rank, 1, 8)
    x = (values(rng, shape) * 2 + 0.5).astype(np.float32)
    attrs, opset = {}, 17
    if op == "LayerNormalization":
        axis = ints(rng, -rank, rank - 1)
        attrs = {"axis": axis, "epsilon": float(pick(rng, [1e-5, 1e-3]))}
        norm_shape = shape[axis % rank:]
        b = GraphBuilder(rng, 17)
        inputs = [b.operand(x, broadcast=False), b.operand(values(rng, norm_shape) + 1, const_chance=0.8)]
        if chance(rng, 0.6):
            inputs.append(b.operand(values(rng, norm_shape), const_chance=0.8))
        y = b.node(op, inputs, **attrs)
    elif op == "BatchNormalization":
        channels = shape[1]
        opset = pick(rng, [9, 14, 15])
        b = GraphBuilder(rng, opset)
        params = [values(rng, [channels]) + 1, values(rng, [channels]),
                  values(rng, [channels]), values(rng, [channels], low=0.3, high=2.0)]
        attrs = {"epsilon": float(pick(rng, [1e-5, 1e-3]))}
        inputs = [b.operand(x, broadcast=False)] + [b.operand(p.astype(np.float32), const_chance=0.8)
                                   for p in params]
        y = b.node(op, inputs, **attrs)
    elif op == "InstanceNormalization":
        if rank < 3:
            shape.append(log_int(rng, 2, 8))
            x = values(rng, shape)
        b = GraphBuilder(rng, pick(rng, [6, 22]))
        attrs = {"epsilon": float(pick(rng, [1e-5, 1e-3]))}
        y = b.node(op, [b.operand(x, broadcast=False), b.operand(values(rng, [shape[1]]) + 1, const_chance=0.8),
                        b.operand(values(rng, [shape[1]]), const_chance=0.8)], **attrs)
    elif op == "GroupNormalization":
        groups = pick(rng, [1, 2, 3])
        shape[1] = groups * log_int(rng, 1, 4)
        if rank < 3:
            shape.append(log_int(rng, 2, 8))
        x = values(rng, shape)
        b = GraphBuilder(rng, 21)
        attrs = {"num_groups": groups, "epsilon": float(pick(rng, [1e-5, 1e-3]))}
        y = b.node(op, [b.operand(x, broadcast=False), b.operand(values(rng, [shape[1]]) + 1, const_chance=0.8),
                        b.operand(values(rng, [shape[1]]), const_chance=0.8)], **attrs)
    elif op == "LpNormalization":
        b = GraphBuilder(rng, 13)
        attrs = {"axis": ints(rng, -rank, rank - 1), "p": pick(rng, [1, 2])}
        y = b.node(op, [b.operand(x, broadcast=False)], **attrs)
    else:
        b = GraphBuilder(rng, 13)
        attrs = {"axes": pick(rng, [None, [0, 2, 3], [2, 3], [1]])}
        y = b.node(op, [b.operand(x, broadcast=False)], **attrs)
    return finish(b, "norm", describe(op, [x.shape], **attrs), y, FLOAT_TOL.widened(10))


# ---------------------------------------------------------------- recurrent


@family("rnn", weight=1.5)
def rnn(rng) -> Case:
    op = pick(rng, ["LSTM", "GRU", "RNN"])
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    opset = pick(rng, [7, 14, 22]) if op != "LSTM" else pick(rng, [7, 14, 22])
    b = GraphBuilder(rng, opset)
    seq, batch = ints(rng, 1, 7), pick(rng, [1, 1, 2, 3])
    size, hidden = log_int(rng, 1, 16), log_int(rng, 1, 16)
    direction = pick(rng, ["forward", "reverse", "bidirectional"])
    dirs = 2 if direction == "bidirectional" else 1
    layout = pick(rng, [0, 0, 1]) if opset >= 14 else 0
    x = values(rng, [batch, seq, size] if layout else [seq, batch, size])
    w = he(rng, [dirs, gates * hidden, size], size)
    r = he(rng, [dirs, gates * hidden, hidden], hidden)
    inputs = [b.operand(x), b.operand(w, const_chance=0.8), b.operand(r, const_chance=0.8)]
    optional = []
    optional.append(b.operand(values(rng, [dirs, 2 * gates * hidden]) * 0.3, const_chance=0.8)
                    if chance(rng, 0.7) else "")
    # (onnxruntime runs layout 1 only for LSTM; the reference, which decides without it,
    # ignores sequence_lens)
    lengths_ok = layout == 0 or op == "LSTM"
    optional.append(b.operand(np.array(ints(rng, 1, seq, batch), np.int32))
                    if lengths_ok and chance(rng, 0.3) else "")
    state_shape = [batch, dirs, hidden] if layout else [dirs, batch, hidden]
    optional.append(b.operand(values(rng, state_shape) * 0.5) if chance(rng, 0.5) else "")
    if op == "LSTM":
        optional.append(b.operand(values(rng, state_shape) * 0.5) if chance(rng, 0.5) else "")
        optional.append(b.operand(values(rng, [dirs, 3 * hidden]) * 0.3, const_chance=0.8)
                        if chance(rng, 0.3) else "")
    while optional and optional[-1] == "":
        optional.pop()
    attrs = {"hidden_size": hidden, "direction": direction,
             "layout": layout if layout else None}
    if op == "GRU":
        attrs["linear_before_reset"] = pick(rng, [0, 1])
    if chance(rng, 0.15):
        attrs["clip"] = float(pick(rng, [0.5, 2.0]))
    if op == "RNN" and chance(rng, 0.3):
        attrs["activations"] = [pick(rng, ["Tanh", "Relu", "Sigmoid"])] * dirs
    outputs = 3 if op == "LSTM" else 2
    y = b.node(op, inputs + optional, outputs, **attrs)
    oracle = _rnn_in_layout_0(b, op, inputs + optional, y, attrs) if layout else None
    b.output(*y)
    return b.build("rnn", describe(op, [x.shape, w.shape], inputs=len(inputs + optional),
                                   **attrs), FLOAT_TOL.widened(10), oracle_nodes=oracle)


def _rnn_in_layout_0(b: GraphBuilder, op: str, inputs: list, outputs: list, attrs: dict):
    """A recurrent node in layout 1 (batch first) as Transposes around the layout-0 node:
    onnxruntime runs only layout 0, and the reference mishandles initial states in layout
    1, so this is what the oracles run."""
    from onnx import helper

    nodes, moved = [], list(inputs)
    states = (0, 5, 6)                  # X, initial_h, initial_c: batch and the next swap
    for i in states:
        if i < len(moved) and moved[i]:
            nodes.append(helper.make_node("Transpose", [moved[i]], [f"{moved[i]}_l0"],
                                          perm=[1, 0, 2]))
            moved[i] = f"{moved[i]}_l0"
    plain = {k: v for k, v in attrs.items() if k != "layout" and v is not None}
    inner = [f"{o}_l0" for o in outputs]
    nodes.append(helper.make_node(op, moved, inner, **plain))
    nodes.append(helper.make_node("Transpose", [inner[0]], [outputs[0]], perm=[2, 0, 1, 3]))
    for state, name in zip(inner[1:], outputs[1:]):
        nodes.append(helper.make_node("Transpose", [state], [name], perm=[1, 0, 2]))
    return nodes


# ---------------------------------------------------------------- gather / scatter


def _indices(rng, shape, dim, dtype=np.int64):
    """Indices into an axis of length `dim`, negative ones included."""
    idx = rng.integers(-dim, dim, shape) if dim else np.zeros(shape, np.int64)
    return idx.astype(dtype)


@family("gather_scatter", weight=2.0)
def gather_scatter(rng) -> Case:
    op = pick(rng, ["Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND"],
              [0.35, 0.2, 0.15, 0.15, 0.15])
    rank = ints(rng, 1, 4)
    shape = random_shape(rng, rank, 1, 7)
    dtype = pick(rng, [np.float32, np.float32, np.int64, np.float16])
    data = values(rng, shape, dtype)
    index_type = pick(rng, [np.int64, np.int64, np.int32])
    attrs, opset = {}, pick(rng, [13, 18])
    b = GraphBuilder(rng, opset)
    if op == "Gather":
        axis = ints(rng, -rank, rank - 1)
        idx = _indices(rng, random_shape(rng, ints(rng, 0, 3), 1, 5, 0.05),
                       shape[axis % rank], dtype=index_type)
        attrs["axis"] = axis
        y = b.node(op, [b.operand(data), b.operand(idx, const_chance=0.5, wrap=False)], **attrs)
    elif op == "GatherElements":
        axis = ints(rng, -rank, rank - 1)
        idx_shape = [ints(rng, 1, d) for d in shape]
        idx_shape[axis % rank] = ints(rng, 1, 6)
        idx = _indices(rng, idx_shape, shape[axis % rank], dtype=index_type)
        attrs["axis"] = axis
        y = b.node(op, [b.operand(data), b.operand(idx, wrap=False)], **attrs)
    elif op == "GatherND":
        batch_dims = ints(rng, 0, rank - 1)
        depth = ints(rng, 1, rank - batch_dims)
        lead = [ints(rng, 1, 4) for _ in range(ints(rng, 0, 2))]
        idx = np.stack([_indices(rng, shape[:batch_dims] + lead, shape[batch_dims + i])
                        for i in range(depth)], axis=-1).astype(np.int64)
        attrs["batch_dims"] = batch_dims or None
        y = b.node(op, [b.operand(data), b.operand(idx, wrap=False)], **attrs)
    elif op == "ScatterElements":
        axis = ints(rng, -rank, rank - 1)
        reduction = pick(rng, ["none", "none", "add", "mul", "max", "min"])
        b.opset = 18 if reduction in ("max", "min") else max(opset, 16) \
            if reduction != "none" else opset
        dim = shape[axis % rank]
        idx_shape = [ints(rng, 1, d) for d in shape]
        count = ints(rng, 1, dim) if reduction == "none" else ints(rng, 1, 6)
        idx_shape[axis % rank] = count
        if reduction == "none":                  # distinct positions along the axis
            idx = np.argsort(rng.random(idx_shape[:axis % rank] + [dim] +
                                        idx_shape[axis % rank + 1:]), axis=axis % rank)
            idx = np.take(idx, np.arange(count), axis=axis % rank)
            idx = np.where(rng.random(idx.shape) < 0.3, idx - dim, idx)
        else:
            idx = _indices(rng, idx_shape, dim)
        upd = values(rng, idx_shape, dtype)
        attrs = {"axis": axis, "reduction": reduction if reduction != "none" else None}
        y = b.node(op, [b.operand(data), b.operand(idx.astype(index_type), wrap=False),
                        b.operand(upd)], **attrs)
    else:
        depth = ints(rng, 1, rank)
        reduction = pick(rng, ["none", "none", "add", "mul", "max", "min"])
        b.opset = 18 if reduction in ("max", "min") else max(opset, 16) \
            if reduction != "none" else opset
        positions = math.prod(shape[:depth])
        count = ints(rng, 1, positions) if reduction == "none" else ints(rng, 1, 6)
        flat = rng.permutation(positions)[:count] if reduction == "none" else \
            rng.integers(0, positions, count)
        idx = np.stack(np.unravel_index(flat, shape[:depth]), axis=-1).astype(np.int64)
        lead = [count]
        if count % 2 == 0 and chance(rng, 0.3):
            lead = [2, count // 2]
        idx = idx.reshape(lead + [depth])
        upd = values(rng, lead + shape[depth:], dtype)
        attrs = {"reduction": reduction if reduction != "none" else None}
        y = b.node(op, [b.operand(data), b.operand(idx, wrap=False), b.operand(upd)], **attrs)
    tolerance = FLOAT_TOL.widened(30) if dtype == np.float16 else FLOAT_TOL
    return finish(b, "gather_scatter", describe(op, [data.shape], dtype=np.dtype(dtype).name,
                                                **attrs), y, tolerance)


# ---------------------------------------------------------------- data movement


@family("movement", weight=3.0)
def movement(rng) -> Case:
    op = pick(rng, ["Slice", "Concat", "Split", "Transpose", "Reshape", "Flatten", "Squeeze",
                    "Unsqueeze", "Expand", "Tile", "DepthToSpace", "SpaceToDepth", "Trilu"])
    rank = ints(rng, 1, 4)
    shape = random_shape(rng, rank, 1, 6, empty_chance=0.03)
    dtype = pick(rng, [np.float32, np.float32, np.float32, np.int64, np.bool_, np.float16,
                       np.uint8])
    x = values(rng, shape, dtype)
    b = GraphBuilder(rng, pick(rng, [13, 18]))
    attrs: dict = {}
    inputs = [b.operand(x)]
    outputs = 1
    if op == "Slice":
        axes = [int(a) for a in rng.permutation(rank)[:ints(rng, 1, rank)]]
        starts, ends, steps = [], [], []
        for a in axes:
            d = shape[a]
            step = pick(rng, [1, 1, 2, 3, -1, -2])
            starts.append(ints(rng, -d - 2, d + 2))
            ends.append(pick(rng, [ints(rng, -d - 2, d + 2), 2 ** 62, -(2 ** 62)]))
            steps.append(step)
        signed_axes = [a - rank if chance(rng, 0.3) else a for a in axes]
        inputs += [b.const(np.array(starts, np.int64)), b.const(np.array(ends, np.int64)),
                   b.const(np.array(signed_axes, np.int64)), b.const(np.array(steps, np.int64))]
        attrs = {"starts": starts, "ends": ends, "axes": signed_axes, "steps": steps}
        y = b.node(op, inputs)
    elif op == "Concat":
        axis = ints(rng, -rank, rank - 1)
        parts = [x]
        for _ in range(ints(rng, 1, 3)):
            other = list(shape)
            other[axis % rank] = ints(rng, 0, 4)
            parts.append(values(rng, other, dtype))
        inputs = [b.operand(p, const_chance=0.2) for p in parts]
        attrs = {"axis": axis}
        y = b.node(op, inputs, **attrs)
    elif op == "Split":
        axis = ints(rng, -rank, rank - 1)
        d = shape[axis % rank]
        if b.opset >= 18 and chance(rng, 0.5) and d:
            outputs = ints(rng, 1, min(d, 4))
            attrs = {"axis": axis, "num_outputs": outputs}
        else:
            cuts = sorted(ints(rng, 0, d, ints(rng, 0, 3)))
            sizes = [c - p for p, c in zip([0] + cuts, cuts + [d])]
            outputs = len(sizes)
            inputs.append(b.const(np.array(sizes, np.int64)))
            attrs = {"axis": axis, "split": sizes}
        y = b.node(op, inputs, outputs, axis=axis, num_outputs=attrs.get("num_outputs"))
    elif op == "Transpose":
        perm = [int(p) for p in rng.permutation(rank)] if chance(rng, 0.8) else None
        attrs = {"perm": perm}
        y = b.node(op, inputs, **attrs)
    elif op == "Reshape":
        total = math.prod(shape)
        target = _factor_shape(rng, total)
        if target and chance(rng, 0.4) and total:
            target[ints(rng, 0, len(target) - 1)] = -1
        allow_zero = None
        if total == 0:                           # a 0 in the shape is a size, not a copy
            allow_zero = 1
            b.opset = max(b.opset, 14)
        for i in range(min(len(target), rank)):
            if total and chance(rng, 0.15) and target[i] == shape[i] and -1 not in target[:i]:
                target[i] = 0
        inputs.append(b.const(np.array(target, np.int64)))
        attrs = {"shape": target, "allowzero": allow_zero}
        y = b.node(op, inputs, allowzero=allow_zero)
    elif op == "Flatten":
        attrs = {"axis": ints(rng, -rank, rank)}
        y = b.node(op, inputs, **attrs)
    elif op == "Squeeze":
        ones = [i for i, d in enumerate(shape) if d == 1]
        axes = [a - rank if chance(rng, 0.3) else a for a in ones if chance(rng, 0.7)]
        if axes or chance(rng, 0.5):
            inputs.append(b.const(np.array(axes, np.int64)) if axes else "")
        attrs = {"axes": axes}
        y = b.node(op, [i for i in inputs if i != ""] if not axes else inputs)
    elif op == "Unsqueeze":
        count = ints(rng, 1, 2)
        out_rank = rank + count
        axes = [int(a) for a in rng.permutation(out_rank)[:count]]
        axes = [a - out_rank if chance(rng, 0.3) else a for a in axes]
        inputs.append(b.const(np.array(axes, np.int64)))
        attrs = {"axes": axes}
        y = b.node(op, inputs)
    elif op == "Expand":
        target = [d if d != 1 else pick(rng, [1, 2, 3]) for d in shape]
        if chance(rng, 0.3):
            target = [ints(rng, 1, 3)] + target
        target = [1 if chance(rng, 0.15) else d for d in target]
        inputs.append(b.const(np.array(target, np.int64)))
        attrs = {"shape": target}
        y = b.node(op, inputs)
    elif op == "Tile":
        repeats = ints(rng, 0, 3, rank) if chance(rng, 0.1) else ints(rng, 1, 3, rank)
        inputs.append(b.const(np.array(repeats, np.int64)))
        attrs = {"repeats": repeats}
        y = b.node(op, inputs)
    elif op in ("DepthToSpace", "SpaceToDepth"):
        block = pick(rng, [1, 2, 3])
        n, c, h, w = pick(rng, [1, 2]), ints(rng, 1, 4), ints(rng, 1, 5), ints(rng, 1, 5)
        if op == "DepthToSpace":
            x = values(rng, [n, c * block * block, h, w], dtype)
            attrs = {"blocksize": block, "mode": pick(rng, ["DCR", "CRD"])}
        else:
            x = values(rng, [n, c, h * block, w * block], dtype)
            attrs = {"blocksize": block}
        inputs = [b.operand(x)]
        y = b.node(op, inputs, **attrs)
    else:   # Trilu
        if rank < 2:
            x = values(rng, random_shape(rng, 2, 1, 6), dtype)
            inputs = [b.operand(x)]
        k = ints(rng, -4, 4) if chance(rng, 0.7) else None
        if k is not None:
            inputs.append(b.const(np.array(k, np.int64)))
        attrs = {"upper": pick(rng, [0, 1]), "k": k}
        y = b.node(op, inputs, upper=attrs["upper"])
    return finish(b, "movement", describe(op, [x.shape], dtype=np.dtype(dtype).name, **attrs),
                  y)


def _factor_shape(rng, total: int) -> list:
    """A random shape with `total` elements (rank 0-4)."""
    if total == 0:
        return [0, ints(rng, 1, 3)]
    dims, rest = [], total
    for _ in range(ints(rng, 0, 3)):
        divisors = [d for d in range(1, rest + 1) if rest % d == 0]
        d = pick(rng, divisors)
        dims.append(d)
        rest //= d
    return dims + [rest] if rest != 1 or not dims or chance(rng, 0.5) else dims


# ---------------------------------------------------------------- pad and cast


@family("pad")
def pad(rng) -> Case:
    opset = pick(rng, [11, 13, 18, 19])
    b = GraphBuilder(rng, opset)
    mode = pick(rng, ["constant", "constant", "reflect", "edge"] + (["wrap"] if opset >= 19
                                                                     else []))
    rank = ints(rng, 1, 4)
    shape = random_shape(rng, rank, 1, 6)
    dtype = pick(rng, [np.float32, np.float32, np.int64, np.float16])
    x = values(rng, shape, dtype)
    axes = list(range(rank))
    if opset >= 18 and chance(rng, 0.4):
        axes = sorted(int(a) for a in rng.permutation(rank)[:ints(rng, 1, rank)])
    pads = []
    for side in range(2):
        for a in axes:
            d = shape[a]
            if mode == "reflect":
                pads.append(ints(rng, 0, d - 1))
            elif mode == "constant":
                pads.append(ints(rng, -min(d - 1, 2), 4) if chance(rng, 0.6) else 0)
            elif mode == "wrap":
                pads.append(ints(rng, 0, d))
            else:
                pads.append(ints(rng, 0, 4))
    inputs = [b.operand(x), b.const(np.array(pads, np.int64))]
    if mode == "constant" and chance(rng, 0.6):
        inputs.append(b.const(np.array(3, dtype)))
    if axes != list(range(rank)):
        inputs += [""] * (3 - len(inputs)) + [b.const(np.array(axes, np.int64))]
    y = b.node("Pad", inputs, mode=mode)
    return finish(b, "pad", describe("Pad", [x.shape], mode=mode, pads=pads, axes=axes), y)


CAST_TYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.int32,
              np.int64, np.bool_]


@family("cast")
def cast(rng) -> Case:
    from onnx import helper

    source, target = np.dtype(pick(rng, CAST_TYPES)), np.dtype(pick(rng, CAST_TYPES))
    b = GraphBuilder(rng, pick(rng, [13, 19, 21]))
    shape = random_shape(rng, ints(rng, 0, 3), 1, 7, empty_chance=0.03)
    if source.kind == "f":
        low, high = (0, 250) if target.kind in "ub" else (-100, 100)
        x = values(rng, shape, source, low=low, high=high)
        if target.kind in "iu" and chance(rng, 0.5):
            x = np.round(x).astype(source)
    else:
        x = values(rng, shape, source, low=-100 if source.kind == "i" else None, high=100)
    x = b.operand(x)
    if chance(rng, 0.2):
        like = b.const(np.zeros(0, target))
        y = b.node("CastLike", [x, like])
        b.opset = max(b.opset, 15)
    else:
        y = b.node("Cast", [x], to=helper.np_dtype_to_tensor_dtype(target))
    return finish(b, "cast", f"Cast {shape} {source.name} -> {target.name}", y,
                  FLOAT_TOL.widened(30))


# ---------------------------------------------------------------- misc


EINSUM_EQUATIONS = [("ij,jk->ik", [[3, 4], [4, 5]]), ("bij,bjk->bik", [[2, 3, 4], [2, 4, 5]]),
                    ("ii->i", [[4, 4]]), ("ij->ji", [[3, 5]]), ("i,i->", [[6], [6]]),
                    ("bhqd,bhkd->bhqk", [[1, 2, 3, 4], [1, 2, 5, 4]]), ("ij->", [[3, 4]]),
                    ("abc,c->ab", [[2, 3, 4], [4]]), ("i,j->ij", [[3], [4]]),
                    ("...ij,...jk->...ik", [[2, 3, 4], [2, 4, 2]]), ("ijk->kji", [[2, 3, 4]])]


@family("misc", weight=2.0)
def misc(rng) -> Case:
    op = pick(rng, ["CumSum", "TopK", "Einsum", "OneHot", "Range", "NonZero", "Compress",
                    "ReverseSequence", "Shape", "ConstantOfShape"])
    b = GraphBuilder(rng, pick(rng, [13, 14, 18, 21]))
    attrs = {}
    if op == "CumSum":
        rank = ints(rng, 1, 4)
        dtype = pick(rng, [np.float32, np.float32, np.int32, np.int64, np.float64])
        x = values(rng, random_shape(rng, rank, 1, 8), dtype)
        axis = ints(rng, -rank, rank - 1)
        attrs = {"exclusive": pick(rng, [0, 1]), "reverse": pick(rng, [0, 1])}
        y = b.node(op, [b.operand(x), b.const(np.array(axis, pick(rng, [np.int64, np.int32])))],
                   **attrs)
        shapes = [x.shape]
    elif op == "TopK":
        rank = ints(rng, 1, 4)
        shape = random_shape(rng, rank, 1, 12)
        x = rng.permutation(np.arange(math.prod(shape))).reshape(shape).astype(
            pick(rng, [np.float32, np.int64, np.int32])) * 1.0
        x = x.astype(pick(rng, [np.float32, np.float32, np.int64]))
        axis = ints(rng, -rank, rank - 1)
        k = ints(rng, 0 if chance(rng, 0.05) else 1, shape[axis % rank])
        attrs = {"axis": axis, "largest": pick(rng, [0, 1, None]), "k": k}
        y = b.node(op, [b.operand(x), b.const(np.array([k], np.int64))], 2,
                   axis=axis, largest=attrs["largest"])
        shapes = [x.shape]
    elif op == "Einsum":
        equation, shapes = EINSUM_EQUATIONS[ints(rng, 0, len(EINSUM_EQUATIONS) - 1)]
        operands = [values(rng, s) for s in shapes]
        attrs = {"equation": equation}
        y = b.node(op, [b.operand(v) for v in operands], equation=equation)
    elif op == "OneHot":
        rank = ints(rng, 0, 3)
        depth = ints(rng, 1, 6)
        idx = rng.integers(-depth, depth, random_shape(rng, rank, 1, 5)).astype(
            pick(rng, [np.int64, np.int32, np.float32]))
        axis = ints(rng, -rank - 1, rank)
        attrs = {"axis": axis}
        vals = np.array([pick(rng, [0, -1]), pick(rng, [1, 5])],
                        pick(rng, [np.float32, np.int64]))
        y = b.node(op, [b.operand(idx, wrap=False), b.const(np.array(depth, np.int64)),
                        b.const(vals)], axis=axis)
        shapes = [idx.shape]
    elif op == "Range":
        dtype = pick(rng, [np.float32, np.int64, np.int32])
        start = pick(rng, [0, -3, 2])
        delta = pick(rng, [1, 2, -1, 3])
        limit = start + delta * ints(rng, 0, 12) + (0 if dtype != np.float32 else 0.5)
        scalars = [np.array(v, dtype) for v in (start, limit, delta)]
        y = b.node(op, [b.operand(s, const_chance=0.5) for s in scalars])
        attrs, shapes = {"start": start, "limit": limit, "delta": delta}, []
    elif op == "NonZero":
        x = values(rng, random_shape(rng, ints(rng, 1, 3), 1, 6, 0.05),
                   pick(rng, [np.float32, np.int64, np.bool_]))
        if x.dtype.kind != "b":
            x = np.where(rng.random(x.shape) < 0.5, 0, x).astype(x.dtype)
        y = b.node(op, [b.operand(x)])
        shapes = [x.shape]
    elif op == "Compress":
        rank = ints(rng, 1, 3)
        x = values(rng, random_shape(rng, rank, 1, 6))
        axis = ints(rng, -rank, rank - 1) if chance(rng, 0.8) else None
        length = x.shape[axis % rank] if axis is not None else x.size
        cond = rng.random(ints(rng, 0, length)) < 0.5
        attrs = {"axis": axis}
        y = b.node(op, [b.operand(x), b.operand(cond, wrap=False)], axis=axis)
        shapes = [x.shape]
    elif op == "ReverseSequence":
        seq, batch = ints(rng, 1, 6), ints(rng, 1, 4)
        batch_axis = pick(rng, [0, 1])
        shape = [batch, seq] if batch_axis == 0 else [seq, batch]
        x = values(rng, shape + [ints(rng, 1, 3)])
        lens = np.array(ints(rng, 1, seq, batch), np.int64)
        attrs = {"batch_axis": batch_axis, "time_axis": 1 - batch_axis}
        y = b.node(op, [b.operand(x), b.operand(lens, wrap=False)], **attrs)
        shapes = [x.shape]
    elif op == "Shape":
        rank = ints(rng, 0, 4)
        x = values(rng, random_shape(rng, rank, 1, 6))
        b.opset = max(b.opset, 15)
        attrs = {"start": ints(rng, -rank - 1, rank + 1) if chance(rng, 0.5) else None,
                 "end": ints(rng, -rank - 1, rank + 1) if chance(rng, 0.5) else None}
        y = b.node(op, [b.operand(x)], **attrs)
        shapes = [x.shape]
    else:   # ConstantOfShape
        shape = np.array(random_shape(rng, ints(rng, 0, 3), 0, 5), np.int64)
        from onnx import numpy_helper

        value = np.array([pick(rng, [0.0, 1.5, -2.0])], pick(rng, [np.float32, np.int64]))
        y = b.node(op, [b.operand(shape, const_chance=0.5, wrap=False)],
                   value=numpy_helper.from_array(value))
        shapes = [shape]
    return finish(b, "misc", describe(op, shapes, **attrs), y, FLOAT_TOL.widened(3))
