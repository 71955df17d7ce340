"""DFT and STFT (er_dft, er_stft: wasm_kernels/fft.c, double-precision FFTs of any length)
and MelWeightMatrix (computed on the host, like the windows in signal.py).

Complex tensors are real tensors with a trailing axis of 2 (real, imaginary); a real signal
has a trailing axis of 1. The semantics are the CPU provider's (providers/cpu/ops/signal.py,
numpy's fft, rfft and irfft): a signal cut or zero-padded to dft_length, one-sided spectra
keeping length // 2 + 1 frequencies, an inverse one-sided transform giving a real signal.
"""
from __future__ import annotations

import math

from ....ir import dtypes
from . import operator
from .common import floats_as, host_floats, product
from .typed_floats import scalar_int, typed_or_refused


def fft_scratch_doubles(n: int) -> int:
    """Doubles of scratch er_dft and er_stft take for n points (fft.c's plan_fft layout):
    twiddles and the line, plus chirp, filter and work buffers where n is no power of two
    (Bluestein's transform over m >= 2n - 1 points)."""
    if n & (n - 1) == 0:
        return 3 * n
    m = 1 << (2 * n - 2).bit_length()
    return 5 * m + 4 * n


def _check_signal(op_type: str, x, what: str) -> None:
    if len(x.shape) < 2 or x.shape[-1] not in (1, 2):
        raise ValueError(f"{op_type}: {what} must end in an axis of 1 (real) or 2 (complex), "
                         f"got shape {list(x.shape)}")


# ---- DFT: opset 17 takes the axis as an attribute, opset 20 as an optional input ----------


@operator("DFT")
def bind_dft(dev, node, opset):
    inverse = int(node.attr("inverse", 0))
    onesided = int(node.attr("onesided", 0))
    axis_attr = int(node.attr("axis", 1))

    def run(ctx, x, dft_length_t=None, axis_t=None):
        _check_signal("DFT", x, "input")
        rank = len(x.shape)
        if opset >= 20:
            axis = -2 if axis_t is None else scalar_int(dev, axis_t, "DFT", "axis")
        else:
            axis = axis_attr
        # the axis indexes the full input, whose last axis (real/imaginary) is not a signal's
        if not (0 <= axis <= rank - 2 or -rank <= axis <= -2):
            raise ValueError(f"DFT: axis {axis} must be in [{-rank}, -2] or [0, {rank - 2}] "
                             f"for input of shape {list(x.shape)}")
        axis %= rank
        n_in = x.shape[axis]
        if dft_length_t is not None:
            length = scalar_int(dev, dft_length_t, "DFT", "dft_length")
        elif inverse and onesided:
            length = 2 * (n_in - 1)        # a one-sided spectrum of an even-length signal
        else:
            length = n_in
        if length < 1:
            raise ValueError(f"DFT: dft_length must be positive, got {length}")
        real_out = bool(inverse and onesided)
        out_n = length // 2 + 1 if onesided and not inverse else length
        shape = list(x.shape)
        shape[axis], shape[-1] = out_n, 1 if real_out else 2
        y = dev.empty(shape, x.elem_type)
        if y.size == 0:
            return y
        scratch = dev.scratch(8 * fft_scratch_doubles(length))
        dev.call("er_dft", x.ptr, y.ptr, scratch.ptr, x.elem_type, product(x.shape[:axis]),
                 n_in, product(x.shape[axis + 1:-1]), x.shape[-1], length, out_n,
                 (1 if inverse else 0) | (2 if real_out else 0))
        return y
    return typed_or_refused(dev, node, opset, run)


# ---- STFT ---------------------------------------------------------------------------------


@operator("STFT")
def bind_stft(dev, node, opset):
    onesided = int(node.attr("onesided", 1))

    def run(ctx, signal, step_t, window=None, frame_length_t=None):
        if len(signal.shape) != 3 or signal.shape[-1] not in (1, 2):
            raise ValueError(f"STFT: signal must be [batch, length, 1 or 2], got shape "
                             f"{list(signal.shape)}")
        batch, n, channels = signal.shape
        step = scalar_int(dev, step_t, "STFT", "frame_step")
        if frame_length_t is not None:
            size = scalar_int(dev, frame_length_t, "STFT", "frame_length")
        elif window is not None:
            size = window.shape[0] if window.shape else 0
        else:
            size = n
        if window is not None and tuple(window.shape) != (size,):
            raise ValueError(f"STFT: window shape {list(window.shape)} must be [{size}], the "
                             f"frame length")
        if step < 1 or not 1 <= size <= n:
            raise ValueError(f"STFT: need frame_step >= 1 (got {step}) and 1 <= frame_length "
                             f"({size}) <= signal length ({n})")
        frames = 1 + (n - size) // step
        bins = size // 2 + 1 if onesided else size
        y = dev.empty((batch, frames, bins, 2), signal.elem_type)
        if y.size == 0:
            return y
        scratch = dev.scratch(8 * fft_scratch_doubles(size))
        dev.call("er_stft", signal.ptr, window.ptr if window is not None else 0, y.ptr,
                 scratch.ptr, signal.elem_type,
                 window.elem_type if window is not None else 0, batch, n, channels, frames,
                 step, size, bins)
        return y
    return typed_or_refused(dev, node, opset, run, float_inputs=(0, 2))


# ---- MelWeightMatrix ------------------------------------------------------------------------


def _hz_to_mel(hz: float) -> float:
    return 2595.0 * math.log10(1.0 + hz / 700.0)


def _mel_to_hz(mel: float) -> float:
    return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


def mel_weights(mel_bins: int, length: int, rate: int, low: float, high: float) -> list:
    """[length // 2 + 1, mel_bins] row-major: triangular filters with peak 1, evenly spaced
    on the mel scale between the edge frequencies; mel_bins + 2 edges dividing the range
    into mel_bins + 2 parts (onnx's reference), each floored onto a DFT bin."""
    low_mel, high_mel = _hz_to_mel(low), _hz_to_mel(high)
    edge_bin = [math.floor((length + 1) *
                           _mel_to_hz(low_mel + i * (high_mel - low_mel) / (mel_bins + 2)) / rate)
                for i in range(mel_bins + 2)]
    values = []
    for j in range(length // 2 + 1):
        for m in range(mel_bins):
            left, center, right = edge_bin[m], edge_bin[m + 1], edge_bin[m + 2]
            if center <= j < right:
                values.append((right - j) / max(right - center, 1))
            elif left <= j <= center:
                values.append((j - left) / max(center - left, 1) if center > left else 1.0)
            else:
                values.append(0.0)
    return values


@operator("MelWeightMatrix")
def bind_mel_weight_matrix(dev, node, opset):
    elem_type = int(node.attr("output_datatype", dtypes.FLOAT))

    def run(ctx, mel_bins_t, length_t, rate_t, low_t, high_t, **_):
        mel_bins = scalar_int(dev, mel_bins_t, "MelWeightMatrix", "num_mel_bins")
        length = scalar_int(dev, length_t, "MelWeightMatrix", "dft_length")
        rate = scalar_int(dev, rate_t, "MelWeightMatrix", "sample_rate")
        edges = []
        for what, t in (("lower_edge_hertz", low_t), ("upper_edge_hertz", high_t)):
            values = host_floats(dev, t)
            if len(values) != 1:
                raise ValueError(f"MelWeightMatrix: {what} must be a scalar, got shape "
                                 f"{list(t.shape)}")
            edges.append(values[0])
        if mel_bins < 0 or length < 0 or rate <= 0:
            raise ValueError(f"MelWeightMatrix: need num_mel_bins >= 0 (got {mel_bins}), "
                             f"dft_length >= 0 (got {length}) and sample_rate > 0 (got {rate})")
        shape = (length // 2 + 1, mel_bins)
        return floats_as(dev, mel_weights(mel_bins, length, rate, *edges), shape, elem_type)
    return run
