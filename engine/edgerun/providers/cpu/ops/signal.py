"""Signal-processing kernels: DFT, STFT, the Hann/Hamming/Blackman windows, MelWeightMatrix.

Complex tensors are real tensors with a trailing axis of 2 (real, imaginary); a real signal
has a trailing axis of 1. Transforms run in numpy's FFT at the input's precision (complex64 for
float32 and narrower, complex128 for double), then are cast back to the input's element type.
"""
from __future__ import annotations

import numpy as np

from ....ir.dtypes import numpy_dtype
from ..registry import kernel


def _real_dtype(x: np.ndarray):
    return np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)


def _to_complex(x: np.ndarray) -> np.ndarray:
    """[..., 1] real or [..., 2] (real, imag) -> real or complex array without the last axis."""
    real = _real_dtype(x)
    if x.shape[-1] == 1:
        return x[..., 0].astype(real)
    if x.shape[-1] == 2:
        z = np.empty(x.shape[:-1], dtype=np.result_type(real, np.complex64))
        z.real, z.imag = x[..., 0], x[..., 1]
        return z
    raise ValueError(f"the last axis must be 1 (real) or 2 (complex), got shape {x.shape}")


def _from_complex(z: np.ndarray, dtype) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


def _scalar_int(x, what: str) -> int:
    x = np.asarray(x)
    if x.size != 1:
        raise ValueError(f"{what} must be a scalar, got shape {x.shape}")
    return int(x.reshape(()))


# ---------------------------------------------------------------------------------------------
# DFT: opset 17 takes the axis as an attribute, opset 20 as an optional input


def _dft(x: np.ndarray, dft_length, axis: int, inverse: int, onesided: int) -> np.ndarray:
    # The axis indexes the full input, whose last axis (real/imaginary) cannot be transformed.
    rank = x.ndim
    if not (0 <= axis <= rank - 2 or -rank <= axis <= -2):
        raise ValueError(f"DFT axis {axis} must be in [{-rank}, -2] or [0, {rank - 2}] "
                         f"for input of shape {x.shape}")
    axis %= rank
    signal = _to_complex(x)
    if dft_length is not None:
        length = _scalar_int(dft_length, "dft_length")
    elif inverse and onesided:
        length = 2 * (x.shape[axis] - 1)      # a one-sided spectrum of an even-length signal
    else:
        length = x.shape[axis]
    if length < 1:
        raise ValueError(f"dft_length must be positive, got {length}")
    if inverse and onesided:
        real = np.fft.irfft(signal, n=length, axis=axis)
        return real[..., None].astype(x.dtype)
    if inverse:
        spectrum = np.fft.ifft(signal, n=length, axis=axis)
    elif onesided and x.shape[-1] == 1:
        spectrum = np.fft.rfft(signal, n=length, axis=axis)
    else:
        spectrum = np.fft.fft(signal, n=length, axis=axis)
        if onesided:
            spectrum = np.take(spectrum, np.arange(length // 2 + 1), axis=axis)
    return _from_complex(spectrum, x.dtype)


@kernel("DFT", since=17)
def dft_17(ctx, x, dft_length=None, axis=1, inverse=0, onesided=0):
    return _dft(x, dft_length, axis, inverse, onesided)


@kernel("DFT", since=20)
def dft_20(ctx, x, dft_length=None, axis=None, inverse=0, onesided=0):
    axis_value = -2 if axis is None else _scalar_int(axis, "axis")
    return _dft(x, dft_length, axis_value, inverse, onesided)


# ---------------------------------------------------------------------------------------------
# STFT


@kernel("STFT", since=17)
def stft(ctx, signal, frame_step, window=None, frame_length=None, onesided=1):
    """signal [batch, length, 1 or 2] -> [batch, frames, bins, 2]."""
    if signal.ndim != 3:
        raise ValueError(f"STFT signal must be [batch, length, 1 or 2], got shape {signal.shape}")
    step = _scalar_int(frame_step, "frame_step")
    if frame_length is not None:
        size = _scalar_int(frame_length, "frame_length")
    elif window is not None:
        size = window.shape[0]
    else:
        size = signal.shape[1]
    if window is not None and window.shape != (size,):
        raise ValueError(f"window shape {window.shape} must be ({size},), the frame length")
    if step < 1 or not 1 <= size <= signal.shape[1]:
        raise ValueError(f"need frame_step >= 1 and 1 <= frame_length ({size}) <= signal "
                         f"length ({signal.shape[1]})")

    frames = 1 + (signal.shape[1] - size) // step
    starts = np.arange(frames) * step
    samples = _to_complex(signal)[:, starts[:, None] + np.arange(size)]   # [batch, frames, size]
    if window is not None:
        samples = samples * window.astype(_real_dtype(signal))
    if onesided and signal.shape[-1] == 1:
        spectrum = np.fft.rfft(samples.real, axis=-1)
    else:
        spectrum = np.fft.fft(samples, axis=-1)
        if onesided:
            spectrum = spectrum[..., :size // 2 + 1]
    return _from_complex(spectrum, signal.dtype)


# ---------------------------------------------------------------------------------------------
# Windows: w[n] for n in [0, size), with N = size (periodic) or size - 1 (symmetric)


def _window_phase(size, periodic: int) -> np.ndarray:
    """2*pi*n/N for each sample n."""
    count = _scalar_int(size, "size")
    if count < 0:
        raise ValueError(f"window size must be non-negative, got {count}")
    period = count if periodic else count - 1
    n = np.arange(count, dtype=np.float64)
    if period <= 0:          # a single-sample symmetric window: phase 0, the window is 1
        return np.zeros(count)
    return 2 * np.pi * n / period


@kernel("HannWindow", since=17)
def hann_window(ctx, size, output_datatype=1, periodic=1):
    phase = _window_phase(size, periodic)
    return (0.5 - 0.5 * np.cos(phase)).astype(numpy_dtype(output_datatype))


@kernel("HammingWindow", since=17)
def hamming_window(ctx, size, output_datatype=1, periodic=1):
    alpha = 25.0 / 46.0
    phase = _window_phase(size, periodic)
    return (alpha - (1 - alpha) * np.cos(phase)).astype(numpy_dtype(output_datatype))


@kernel("BlackmanWindow", since=17)
def blackman_window(ctx, size, output_datatype=1, periodic=1):
    phase = _window_phase(size, periodic)
    window = 0.42 - 0.5 * np.cos(phase) + 0.08 * np.cos(2 * phase)
    return window.astype(numpy_dtype(output_datatype))


# ---------------------------------------------------------------------------------------------
# MelWeightMatrix


def _hz_to_mel(hz):
    return 2595.0 * np.log10(1.0 + hz / 700.0)


def _mel_to_hz(mel):
    return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


@kernel("MelWeightMatrix", since=17)
def mel_weight_matrix(ctx, num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
                      upper_edge_hertz, output_datatype=1):
    """[dft_length // 2 + 1, num_mel_bins] triangular filters with peak 1, evenly spaced
    on the mel scale between the two edge frequencies."""
    mel_bins = _scalar_int(num_mel_bins, "num_mel_bins")
    length = _scalar_int(dft_length, "dft_length")
    rate = _scalar_int(sample_rate, "sample_rate")
    low = float(np.asarray(lower_edge_hertz).reshape(()))
    high = float(np.asarray(upper_edge_hertz).reshape(()))
    spectrum_bins = length // 2 + 1

    # mel_bins + 2 edges; the mel step divides the range into mel_bins + 2 parts, as onnx's
    # reference does, and each edge is floored onto a DFT bin.
    edges = np.arange(mel_bins + 2)
    low_mel, high_mel = _hz_to_mel(low), _hz_to_mel(high)
    edge_hz = _mel_to_hz(low_mel + edges * (high_mel - low_mel) / (mel_bins + 2))
    edge_bin = np.floor((length + 1) * edge_hz / rate).astype(np.int64)

    left, center, right = edge_bin[:-2], edge_bin[1:-1], edge_bin[2:]
    j = np.arange(spectrum_bins)[:, None]
    rise = np.where(center > left, (j - left) / np.maximum(center - left, 1), 1.0)
    fall = (right - j) / np.maximum(right - center, 1)
    in_rise = (j >= left) & (j <= center)
    in_fall = (j >= center) & (j < right)
    weights = np.where(in_fall, fall, np.where(in_rise, rise, 0.0))
    return weights.astype(numpy_dtype(output_datatype))
