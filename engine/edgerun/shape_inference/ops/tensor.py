"""Shape-changing tensor operators. Where an operand that sets the output shape (Reshape's
shape, Expand's shape, Range's limits...) is a known constant, the output shape is exact;
values of small int tensors (shape arithmetic) flow through."""
from __future__ import annotations

from ...ir import dtypes
from ...ir.shape_rules import split_lengths
from .. import symbolic, values as V
from ..context import tensor
from ..registry import infer
from ._common import int64, same_as_input, unknown_dims, with_dim

# ---- shape queries -----------------------------------------------------------------------


@infer("Shape")
def shape(ctx):
    s = ctx.shape(0)
    if s is None:
        return [int64((None,))]
    rank = len(s)
    start = _clamp(ctx.attr("start", 0), rank)
    end = _clamp(ctx.attr("end", rank), rank)
    dims = list(s[start:end])
    ctx.set_value(0, dims)
    return [int64((len(dims),))]


def _clamp(i: int, rank: int) -> int:
    if i < 0:
        i += rank
    return min(max(i, 0), rank)


@infer("Size")
def size(ctx):
    s = ctx.shape(0)
    if s is not None:
        ctx.set_value(0, [symbolic.product(s)])
    return [int64(())]


# ---- reshaping ---------------------------------------------------------------------------


@infer("Reshape")
def reshape(ctx):
    if ctx.has_attr("shape"):                 # opset 1-4
        target = list(ctx.attr("shape"))
    else:
        target = ctx.dims(1)
    if target is None:
        s1 = ctx.shape(1)
        rank = s1[0] if s1 is not None and len(s1) == 1 and symbolic.is_int(s1[0]) else None
        return [tensor(ctx.elem(0), unknown_dims(rank))]
    out = _reshaped(ctx, ctx.shape(0), target, bool(ctx.attr("allowzero", 0)))
    _pass_value(ctx)
    return [tensor(ctx.elem(0), out)]


def _reshaped(ctx, src, target, allowzero: bool):
    out = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            d = src[i] if src is not None and i < len(src) else None
        out.append(d)
    if -1 in out:
        k = out.index(-1)
        out[k] = None
        known = [d for j, d in enumerate(out) if j != k]
        if src is not None and None not in src and None not in known:
            out[k] = _divide_exact(symbolic.product(src), symbolic.product(known))
    return tuple(out)


def _divide_exact(total, part):
    if symbolic.is_int(total) and symbolic.is_int(part):
        return total // part if part and total % part == 0 else None
    if total == part:
        return 1
    if isinstance(total, str) and symbolic.is_int(part) and total.endswith(f"*{part}"):
        return symbolic.floordiv(total, part)
    # cancel common factors of two products of symbols and ints
    num, den = _factors(total), _factors(part)
    if num is None or den is None:
        return None
    for f in list(den):
        if f in num:
            num.remove(f)
            den.remove(f)
    n_int = symbolic.product([f for f in num if symbolic.is_int(f)])
    d_int = symbolic.product([f for f in den if symbolic.is_int(f)])
    if any(not symbolic.is_int(f) for f in den) or d_int == 0 or n_int % d_int:
        return None
    return symbolic.product([n_int // d_int] + [f for f in num if not symbolic.is_int(f)])


def _factors(d):
    """A product of symbols and ints as its factors, or None for any other expression."""
    if symbolic.is_int(d):
        return [d]
    if not isinstance(d, str) or any(c in d for c in "+-/()"):
        return None
    return [int(f) if f.isdigit() else f for f in d.split("*")]


def _pass_value(ctx):
    """Reshape-like operators keep the row-major elements."""
    if ctx.value(0) is not None:
        ctx.set_value(0, ctx.value(0))


@infer("Flatten")
def flatten(ctx):
    s = ctx.shape(0)
    _pass_value(ctx)
    if s is None:
        return [tensor(ctx.elem(0), (None, None))]
    axis = ctx.attr("axis", 1)
    axis = axis + len(s) if axis < 0 else axis
    return [tensor(ctx.elem(0), (symbolic.product(s[:axis]), symbolic.product(s[axis:])))]


@infer("Squeeze")
def squeeze(ctx):
    s = ctx.shape(0)
    axes = ctx.ints_or_attr(1, "axes")
    _pass_value(ctx)
    if s is None or (axes is None and ctx.has(1)):
        return [tensor(ctx.elem(0), None)]
    if not axes:
        if any(not symbolic.is_int(d) for d in s):
            return [tensor(ctx.elem(0), None)]
        return [tensor(ctx.elem(0), tuple(d for d in s if d != 1))]
    drop = {ctx.axis(a, len(s)) for a in axes}
    for a in drop:
        if symbolic.is_int(s[a]) and s[a] != 1:
            ctx.fail(f"cannot squeeze axis {a} of size {s[a]} (shape {list(s)})")
    return [tensor(ctx.elem(0), tuple(d for i, d in enumerate(s) if i not in drop))]


@infer("Unsqueeze")
def unsqueeze(ctx):
    s = ctx.shape(0)
    axes = ctx.ints_or_attr(1, "axes")
    _pass_value(ctx)
    if s is None or axes is None:
        rank = None
        if s is not None and ctx.shape(1) is not None and symbolic.is_known(ctx.shape(1)):
            rank = len(s) + symbolic.product(ctx.shape(1))
        return [tensor(ctx.elem(0), unknown_dims(rank))]
    rank = len(s) + len(axes)
    inserted = {ctx.axis(a, rank) for a in axes}
    rest = iter(s)
    return [tensor(ctx.elem(0), tuple(1 if i in inserted else next(rest) for i in range(rank)))]


@infer("Transpose")
def transpose(ctx):
    s = ctx.shape(0)
    if s is None:
        perm = ctx.attr("perm")
        return [tensor(ctx.elem(0), unknown_dims(len(perm) if perm else None))]
    perm = ctx.attr("perm") or list(range(len(s)))[::-1]
    if ctx.value(0) is not None and symbolic.is_known(s):
        ctx.set_value(0, V.transpose(ctx.value(0), s, perm))
    return [tensor(ctx.elem(0), tuple(s[p] for p in perm))]


@infer("DepthToSpace")
def depth_to_space(ctx):
    s, b = ctx.shape(0), ctx.attr("blocksize")
    if s is None:
        return [tensor(ctx.elem(0), unknown_dims(4))]
    n, c, h, w = s
    return [tensor(ctx.elem(0), (n, symbolic.floordiv(c, b * b), symbolic.mul(h, b),
                                 symbolic.mul(w, b)))]


@infer("SpaceToDepth")
def space_to_depth(ctx):
    s, b = ctx.shape(0), ctx.attr("blocksize")
    if s is None:
        return [tensor(ctx.elem(0), unknown_dims(4))]
    n, c, h, w = s
    return [tensor(ctx.elem(0), (n, symbolic.mul(c, b * b), symbolic.floordiv(h, b),
                                 symbolic.floordiv(w, b)))]


# ---- joining and splitting ---------------------------------------------------------------


@infer("Concat")
def concat(ctx):
    indices = [i for i in range(ctx.num_inputs) if ctx.has(i)]
    shapes = [ctx.shape(i) for i in indices]
    elem = next((ctx.elem(i) for i in indices if ctx.elem(i)), 0)
    known = [s for s in shapes if s is not None]
    if not known:
        return [tensor(elem, None)]
    rank = len(known[0])
    axis = ctx.axis(ctx.attr("axis", 0), rank)
    out = []
    for k in range(rank):
        if k == axis:
            out.append(symbolic.total([s[k] for s in shapes]) if len(known) == len(shapes)
                       else None)
        else:
            dims = [s[k] for s in known]
            out.append(next((d for d in dims if symbolic.is_int(d)),
                            next((d for d in dims if d is not None), None)))
    if rank == 1 and all(ctx.value(i) is not None for i in indices):
        ctx.set_value(0, [x for i in indices for x in ctx.value(i)])
    return [tensor(elem, tuple(out))]


@infer("Split")
def split(ctx):
    s = ctx.shape(0)
    n = ctx.num_outputs
    elem = ctx.elem(0)
    if s is None:
        return [tensor(elem, None)] * n
    axis = ctx.axis(ctx.attr("axis", 0), len(s))
    sizes = ctx.ints_or_attr(1, "split")
    dim = s[axis]
    if sizes is None and ctx.has(1):
        sizes = [None] * n
    elif not sizes:
        if symbolic.is_int(dim):
            sizes = split_lengths(dim, n)   # opset 18 num_outputs: the last may be smaller
        else:
            sizes = [symbolic.floordiv(dim, n)] * n
    if len(s) == 1 and ctx.value(0) is not None and all(symbolic.is_int(x) for x in sizes):
        start = 0
        for i, size in enumerate(sizes):
            ctx.set_value(i, ctx.value(0)[start:start + size])
            start += size
    return [tensor(elem, with_dim(s, axis, d)) for d in sizes]


# ---- broadcasting and padding -----------------------------------------------------------


@infer("Expand")
def expand(ctx):
    s, target = ctx.shape(0), ctx.dims(1)
    if target is None:
        s1 = ctx.shape(1)
        if s is None or s1 is None or not symbolic.is_int(s1[0]):
            return [tensor(ctx.elem(0), None)]
        target = [None] * s1[0]
    if s is None:
        return [tensor(ctx.elem(0), tuple(d if d != 1 else None for d in target))]
    out = symbolic.broadcast_shapes([s, tuple(target)], ctx.where)
    if symbolic.is_known(out) and ctx.value(0) is not None and symbolic.is_known(s) \
            and symbolic.product(out) <= V.MAX_ELEMENTS:
        ctx.set_value(0, V.broadcast_map(lambda a: a, [(ctx.value(0), s)], out))
    return [tensor(ctx.elem(0), out)]


@infer("Tile")
def tile(ctx):
    s, repeats = ctx.shape(0), ctx.ints(1)
    if s is None:
        return [tensor(ctx.elem(0), None)]
    if repeats is None:
        return [tensor(ctx.elem(0), unknown_dims(len(s)))]
    return [tensor(ctx.elem(0), tuple(symbolic.mul(d, r) for d, r in zip(s, repeats)))]


@infer("Pad")
def pad(ctx):
    s = ctx.shape(0)
    if s is None:
        return [tensor(ctx.elem(0), None)]
    rank = len(s)
    pads = ctx.ints_or_attr(1, "pads")
    if pads is None:
        return [tensor(ctx.elem(0), unknown_dims(rank))]
    axes = ctx.ints(3) if ctx.has(3) else list(range(rank))
    if axes is None:
        return [tensor(ctx.elem(0), unknown_dims(rank))]
    out = list(s)
    for k, a in enumerate(axes):
        a = ctx.axis(a, rank)
        out[a] = symbolic.add(symbolic.add(out[a], pads[k]), pads[k + len(axes)])
    return [tensor(ctx.elem(0), tuple(out))]


@infer("CenterCropPad")
def center_crop_pad(ctx):
    s, target = ctx.shape(0), ctx.dims(1)
    if s is None:
        return [tensor(ctx.elem(0), None)]
    if target is None:
        return [tensor(ctx.elem(0), unknown_dims(len(s)))]
    axes = ctx.attr("axes") or list(range(len(s)))
    out = list(s)
    for a, d in zip(axes, target):
        out[ctx.axis(a, len(s))] = d
    return [tensor(ctx.elem(0), tuple(out))]


# ---- creating tensors --------------------------------------------------------------------


@infer("Constant")
def constant(ctx):
    for name in ("value", "sparse_value"):
        if ctx.has_attr(name):
            t = ctx.node.attr(name)
            if name == "sparse_value":
                return [tensor(t.values.elem_type, tuple(t.dims))]
            ctx.set_value(0, V.decode(t))
            return [tensor(t.elem_type, tuple(t.dims))]
    scalars = {"value_int": (dtypes.INT64, ()), "value_float": (dtypes.FLOAT, ()),
               "value_string": (dtypes.STRING, ())}
    for name, (elem, shape) in scalars.items():
        if ctx.has_attr(name):
            if name != "value_string":
                ctx.set_value(0, [ctx.attr(name)])
            return [tensor(elem, shape)]
    lists = {"value_ints": dtypes.INT64, "value_floats": dtypes.FLOAT,
             "value_strings": dtypes.STRING}
    for name, elem in lists.items():
        if ctx.has_attr(name):
            items = list(ctx.attr(name))
            if name != "value_strings":
                ctx.set_value(0, items)
            return [tensor(elem, (len(items),))]
    ctx.fail("Constant has none of the value attributes")


@infer("ConstantOfShape")
def constant_of_shape(ctx):
    value = ctx.node.attr("value")
    elem = value.elem_type if value is not None else dtypes.FLOAT
    dims = ctx.dims(0)
    if dims is None:
        s0 = ctx.shape(0)
        rank = s0[0] if s0 is not None and len(s0) == 1 and symbolic.is_int(s0[0]) else None
        return [tensor(elem, unknown_dims(rank))]
    fill = V.decode(value) if value is not None else [0.0]
    if symbolic.is_known(dims) and fill and symbolic.product(dims) <= V.MAX_ELEMENTS:
        ctx.set_value(0, fill[:1] * symbolic.product(dims))
    return [tensor(elem, tuple(dims))]


@infer("Range")
def range_(ctx):
    start, limit, delta = ctx.scalar(0), ctx.scalar(1), ctx.scalar(2)
    elem = ctx.elem(0) or ctx.elem(1)
    numbers = (int, float)
    if all(isinstance(v, numbers) and not isinstance(v, bool) for v in (start, limit, delta)) \
            and delta != 0:
        count = max(int(-(-(limit - start) // delta)), 0)
        if all(isinstance(v, int) for v in (start, limit, delta)):
            if count <= V.MAX_ELEMENTS:
                ctx.set_value(0, list(range(start, limit, delta)))
        return [tensor(elem, (count,))]
    if start == 0 and delta == 1 and isinstance(limit, str):
        return [tensor(elem, (limit,))]      # arange(seq): exporters' favourite
    return [tensor(elem, (ctx.fresh(),))]


@infer("EyeLike")
def eye_like(ctx):
    return [same_as_input(ctx, elem_type=ctx.attr("dtype") or None)]


@infer("Trilu")
def trilu(ctx):
    return [same_as_input(ctx)]


@infer("OneHot")
def one_hot(ctx):
    s, depth = ctx.shape(0), ctx.scalar(1)
    elem = ctx.elem(2)
    if s is None:
        return [tensor(elem, None)]
    if isinstance(depth, float):
        depth = int(depth)
    if not (symbolic.is_int(depth) or isinstance(depth, str)):
        depth = None
    rank = len(s) + 1
    axis = ctx.axis(ctx.attr("axis", -1), rank)
    out = list(s)
    out.insert(axis, depth)
    return [tensor(elem, tuple(out))]


@infer("Col2Im")
def col2im(ctx):
    s, image = ctx.shape(0), ctx.dims(1)
    block = ctx.ints(2)
    if image is None:
        n = ctx.shape(1)[0] if ctx.shape(1) is not None else None
        return [tensor(ctx.elem(0), None if not symbolic.is_int(n) else (None,) * (n + 2))]
    batch = s[0] if s is not None else None
    channels = None
    if s is not None and block is not None:
        channels = symbolic.floordiv(s[1], symbolic.product(block))
    return [tensor(ctx.elem(0), (batch, channels) + tuple(image))]
