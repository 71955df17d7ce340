"""MatMul (numpy semantics), Gemm, Einsum, Det."""
from __future__ import annotations

from .. import symbolic
from ..context import tensor
from ..registry import infer


def matmul_shape(ctx, a, b):
    if a is None or b is None:
        return None
    if not a or not b:
        ctx.fail(f"MatMul of a scalar (shapes {list(a)} and {list(b)})")
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    k1, k2 = a2[-1], b2[-2]
    if symbolic.is_int(k1) and symbolic.is_int(k2) and k1 != k2:
        ctx.fail(f"inner dimensions differ: {list(a)} x {list(b)}")
    batch = symbolic.broadcast_shapes([a2[:-2], b2[:-2]], ctx.where)
    out = list(batch) + [a2[-2], b2[-1]]
    if len(a) == 1:
        del out[-2]
    if len(b) == 1:
        del out[-1]
    return tuple(out)


@infer("MatMul")
def matmul(ctx):
    return [tensor(ctx.elem(0), matmul_shape(ctx, ctx.shape(0), ctx.shape(1)))]


def gemm_shape(ctx):
    a, b = ctx.shape(0), ctx.shape(1)
    if a is None or b is None:
        return (None, None)
    m = a[1] if ctx.attr("transA", 0) else a[0]
    n = b[0] if ctx.attr("transB", 0) else b[1]
    return (m, n)


@infer("Gemm")
def gemm(ctx):
    return [tensor(ctx.elem(0), gemm_shape(ctx))]


@infer("Det")
def det(ctx):
    s = ctx.shape(0)
    return [tensor(ctx.elem(0), None if s is None else tuple(s[:-2]))]


@infer("Einsum")
def einsum(ctx):
    equation = ctx.attr("equation").replace(" ", "")
    elem = ctx.elem(0)
    lhs, _, rhs = equation.partition("->")
    terms = lhs.split(",")
    shapes = [ctx.shape(i) for i in range(ctx.num_inputs)]
    if any(s is None for s in shapes) or len(terms) != len(shapes):
        return [tensor(elem, None)]
    sizes, ellipsis, counts = {}, [], {}
    for term, s in zip(terms, shapes):
        labels = list(term.replace("...", "."))
        if "." in labels:
            k = labels.index(".")
            n_ell = len(s) - (len(labels) - 1)
            ellipsis.append(tuple(s[k:k + n_ell]))
            dims = list(s[:k]) + list(s[k + n_ell:])
            labels.remove(".")
        else:
            dims = list(s)
        for label, d in zip(labels, dims):
            counts[label] = counts.get(label, 0) + 1
            prev = sizes.get(label)
            sizes[label] = d if prev is None or prev == 1 else (prev if d == 1 or d is None
                                                                  else d)
    ell = symbolic.broadcast_shapes(ellipsis, ctx.where) if ellipsis else ()
    if "->" not in equation:
        rhs = ("..." if ellipsis else "") + "".join(sorted(l for l, c in counts.items() if c == 1))
    out = []
    for part in rhs.replace("...", "."):
        if part == ".":
            out.extend(ell)
        else:
            out.append(sizes.get(part))
    return [tensor(elem, tuple(out))]
