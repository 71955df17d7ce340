"""Einsum as strided copies, reductions and batched matmuls (float32; float16, bfloat16 and
float64 through float_or_refused).

Each operand first takes its diagonals (a letter repeated within it: one strided copy) and
sums the letters no one else needs; then operands contract left to right, each pair as one
broadcasting batched matmul (shared letters still needed later are the batch, shared letters
no longer needed the contraction); the result is transposed to the output's letters.
"""
from __future__ import annotations

from . import operator
from .common import contiguous_strides, float_or_refused, product
from .matmul import matmul
from .reduce import REDUCE, reduce_axes
from .tensor import copy_strided, transpose


def parse(equation: str, ranks) -> tuple:
    """(letters of each operand, output letters): '...' becomes uppercase letters aligned
    from the right; an implicit output is the letters used once, sorted, after '...'."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"Einsum: equation {equation!r} has {len(terms)} operands, got "
                         f"{len(ranks)} inputs")
    spans = [rank - len(t.replace("...", "")) if "..." in t else 0 for t, rank in zip(terms, ranks)]
    width = max(spans, default=0)
    fill = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[26 - width:] if width else ""
    operands = []
    for term, span, rank in zip(terms, spans, ranks):
        letters = term.replace("...", fill[width - span:]) if "..." in term else term
        if len(letters) != rank:
            raise ValueError(f"Einsum: term {term!r} does not match an input of rank {rank}")
        operands.append(letters)
    if arrow:
        out = rhs.replace("...", fill)
    else:
        counts: dict = {}
        for letters in operands:
            for c in letters:
                counts[c] = counts.get(c, 0) + 1
        out = fill + "".join(sorted(c for c, n in counts.items() if n == 1 and c.islower()))
    return operands, out


def diagonal(dev, x, letters: str) -> tuple:
    """x with each repeated letter taken once (its diagonal), and the remaining letters."""
    if len(set(letters)) == len(letters):
        return x, letters
    strides = contiguous_strides(x.shape)
    keep, shape, steps = "", [], []   # type: tuple[str, list, list]
    for i, c in enumerate(letters):
        if c in keep:
            steps[keep.index(c)] += strides[i]
            if x.shape[i] != shape[keep.index(c)]:
                raise ValueError(f"Einsum: letter {c!r} has sizes {shape[keep.index(c)]} and "
                                 f"{x.shape[i]}")
        else:
            keep += c
            shape.append(x.shape[i])
            steps.append(strides[i])
    y = dev.empty(shape)
    copy_strided(dev, y.ptr, x.ptr, 4, shape, contiguous_strides(shape), steps)
    return y, keep


def sum_letters(dev, x, letters: str, drop: set) -> tuple:
    axes = [i for i, c in enumerate(letters) if c in drop]
    if not axes:
        return x, letters
    y = reduce_axes(dev, x, REDUCE["ReduceSum"], axes, False)
    return y, "".join(c for c in letters if c not in drop)


def contract(dev, a, la: str, b, lb: str, needed: set) -> tuple:
    """a (letters la) with b (lb): shared letters in `needed` stay as batch, the other
    shared ones are summed; the result's letters are batch, a's own, b's own."""
    shared = [c for c in la if c in lb]
    batch = [c for c in shared if c in needed]
    summed = [c for c in shared if c not in needed]
    own_a = [c for c in la if c not in lb]
    own_b = [c for c in lb if c not in la]
    size: dict = {}
    for letters, t in ((la, a), (lb, b)):
        for c, d in zip(letters, t.shape):
            size[c] = max(size.get(c, 1), d)
    at = transpose(dev, a, [la.index(c) for c in batch + own_a + summed])
    bt = transpose(dev, b, [lb.index(c) for c in batch + summed + own_b])
    a_shape = [at.shape[i] for i in range(len(batch))] + \
        [product(size[c] for c in own_a), product(size[c] for c in summed)]
    b_shape = [bt.shape[i] for i in range(len(batch))] + \
        [product(size[c] for c in summed), product(size[c] for c in own_b)]
    y = matmul(dev, at.view(a_shape), bt.view(b_shape))
    out = batch + own_a + own_b
    return y.view([size[c] for c in out]), "".join(out)


@operator("Einsum")
def bind_einsum(dev, node, opset):
    equation = node.attr("equation")
    equation = equation.decode() if isinstance(equation, bytes) else equation

    def run(ctx, *xs, **_):
        operands, out = parse(equation, [len(x.shape) for x in xs])
        items = [diagonal(dev, x, letters) for x, letters in zip(xs, operands)]
        for i, (x, letters) in enumerate(items):        # letters no one else uses
            others = set(out).union(*(set(l) for j, (_, l) in enumerate(items) if j != i))
            items[i] = sum_letters(dev, x, letters, set(letters) - others)
        y, ly = items[0]
        for k in range(1, len(items)):
            needed = set(out).union(*(set(l) for _, l in items[k + 1:]))
            y, ly = contract(dev, y, ly, items[k][0], items[k][1], needed)
            y, ly = sum_letters(dev, y, ly, set(ly) - needed)
        y, ly = sum_letters(dev, y, ly, set(ly) - set(out))
        if sorted(ly) != sorted(out):
            raise ValueError(f"Einsum {equation!r}: output letters {out!r} not in the inputs")
        return transpose(dev, y, [ly.index(c) for c in out]) if ly != out else y
    return float_or_refused(dev, node, opset, run)
