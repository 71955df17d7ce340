"""DFT, STFT, window functions and MelWeightMatrix."""
from __future__ import annotations

from ...ir import dtypes
from .. import symbolic
from ..context import tensor
from ..registry import infer


@infer("DFT")
def dft(ctx):
    s = ctx.shape(0)
    if s is None:
        return [tensor(ctx.elem(0), None)]
    rank = len(s)
    if ctx.opset >= 20:
        axis = ctx.scalar(2) if ctx.has(2) else -2
    else:
        axis = ctx.attr("axis", 1)
    inverse, onesided = ctx.attr("inverse", 0), ctx.attr("onesided", 0)
    last = 1 if inverse and onesided else 2      # irfft gives a real signal
    if not symbolic.is_int(axis):
        return [tensor(ctx.elem(0), (None,) * (rank - 1) + (last,))]
    axis %= rank
    if ctx.has(1):
        length = ctx.scalar(1)
        length = length if symbolic.is_int(length) else None
    elif inverse and onesided:
        length = symbolic.mul(2, symbolic.sub(s[axis], 1))
    else:
        length = s[axis]
    if onesided and not inverse:
        length = symbolic.add(symbolic.floordiv(length, 2), 1)
    out = list(s)
    out[axis] = length
    out[-1] = last
    return [tensor(ctx.elem(0), tuple(out))]


@infer("STFT")
def stft(ctx):
    s = ctx.shape(0)
    step = ctx.scalar(1)
    if ctx.has(3):
        size = ctx.scalar(3)
    elif ctx.has(2):
        size = ctx.shape(2)[0] if ctx.shape(2) is not None else None
    else:
        size = s[1] if s is not None else None
    if s is None:
        return [tensor(ctx.elem(0), (None, None, None, 2))]
    ok = symbolic.is_int(step) and symbolic.is_int(size)
    frames = symbolic.add(symbolic.floordiv(symbolic.sub(s[1], size), step), 1) if ok else None
    bins = (size // 2 + 1 if ctx.attr("onesided", 1) else size) if symbolic.is_int(size) else None
    return [tensor(ctx.elem(0), (s[0], frames, bins, 2))]


@infer("HannWindow", "HammingWindow", "BlackmanWindow")
def window(ctx):
    size = ctx.scalar(0)
    return [tensor(ctx.attr("output_datatype", dtypes.FLOAT),
                   (size if symbolic.is_int(size) or isinstance(size, str) else None,))]


@infer("MelWeightMatrix")
def mel_weight_matrix(ctx):
    bins, length = ctx.scalar(0), ctx.scalar(1)
    rows = length // 2 + 1 if symbolic.is_int(length) else None
    return [tensor(ctx.attr("output_datatype", dtypes.FLOAT),
                   (rows, bins if symbolic.is_int(bins) else None))]
