"""Random kernels: Dropout, Bernoulli, RandomNormal, RandomUniform, their *Like forms, Multinomial.

Draws come from a numpy RandomState seeded with the `seed` attribute when the node has one (the
same node then gives the same values on every run), from fresh entropy otherwise. RandomState,
drawn the way onnx's reference implementation draws, makes a seeded node reproduce the
reference's values exactly. Values are drawn in float64 and cast to the requested type.
"""
from __future__ import annotations

import numpy as np

from ....ir.dtypes import numpy_dtype
from ..registry import kernel


def _generator(seed) -> np.random.RandomState:
    if seed is None or (isinstance(seed, float) and np.isnan(seed)):
        return np.random.RandomState()
    return np.random.RandomState(int(seed))


def _out_dtype(dtype_code, like=None):
    """The `dtype` attribute's numpy type; without one, the type of `like`."""
    if dtype_code:
        return numpy_dtype(dtype_code)
    if like is None:
        raise ValueError("a dtype attribute is required")
    return like.dtype


# ---------------------------------------------------------------------------------------------
# Dropout: an identity at inference; opset 12 made ratio and training_mode inputs


def _identity_with_mask(ctx, x, mask_dtype):
    if ctx.num_outputs > 1:
        return x, np.ones(x.shape, dtype=mask_dtype)
    return x


@kernel("Dropout", since=1)
def dropout_1(ctx, x, ratio=0.5, is_test=0, consumed_inputs=None):
    # Opsets 1 and 6 drop values when is_test=0; edgerun runs models for inference, where
    # dropout is the identity (opset 7 removed is_test for exactly this reason).
    return _identity_with_mask(ctx, x, x.dtype)


@kernel("Dropout", since=7)
def dropout_7(ctx, x, ratio=0.5):
    return _identity_with_mask(ctx, x, x.dtype)


@kernel("Dropout", since=10)
def dropout_10(ctx, x, ratio=0.5):
    return _identity_with_mask(ctx, x, np.bool_)


@kernel("Dropout", since=12)
def dropout_12(ctx, x, ratio=None, training_mode=None, seed=None):
    drop = 0.5 if ratio is None else float(ratio)
    training = training_mode is not None and bool(training_mode)
    if not training or drop == 0:
        return _identity_with_mask(ctx, x, np.bool_)
    if not 0 <= drop <= 1:
        raise ValueError(f"Dropout ratio must be in [0, 1], got {drop}")
    keep = _generator(seed).uniform(0.0, 1.0, x.shape) >= drop
    if drop == 1:
        y = np.zeros_like(x)
    else:
        y = np.where(keep, x * np.asarray(1.0 / (1.0 - drop), dtype=x.dtype), 0).astype(x.dtype)
    return (y, keep) if ctx.num_outputs > 1 else y


# ---------------------------------------------------------------------------------------------
# Bernoulli, RandomNormal, RandomUniform and the *Like forms


@kernel("Bernoulli", since=15)
def bernoulli(ctx, x, dtype=None, seed=None):
    draws = _generator(seed).binomial(1, x.astype(np.float64))
    return np.asarray(draws).astype(_out_dtype(dtype, x))


def _normal(shape, dtype, mean, scale, seed):
    standard = _generator(seed).standard_normal(shape)
    return (standard * scale + mean).astype(dtype)


def _uniform(shape, dtype, low, high, seed):
    unit = _generator(seed).random_sample(shape)
    return (unit * (high - low) + low).astype(dtype)


@kernel("RandomNormal", since=1)
def random_normal(ctx, shape=None, dtype=1, mean=0.0, scale=1.0, seed=None):
    if shape is None:
        raise ValueError("RandomNormal needs the shape attribute")
    return _normal(tuple(shape), _out_dtype(dtype), mean, scale, seed)


@kernel("RandomUniform", since=1)
def random_uniform(ctx, shape=None, dtype=1, low=0.0, high=1.0, seed=None):
    if shape is None:
        raise ValueError("RandomUniform needs the shape attribute")
    return _uniform(tuple(shape), _out_dtype(dtype), low, high, seed)


@kernel("RandomNormalLike", since=1)
def random_normal_like(ctx, x, dtype=None, mean=0.0, scale=1.0, seed=None):
    return _normal(x.shape, _out_dtype(dtype, x), mean, scale, seed)


@kernel("RandomUniformLike", since=1)
def random_uniform_like(ctx, x, dtype=None, low=0.0, high=1.0, seed=None):
    return _uniform(x.shape, _out_dtype(dtype, x), low, high, seed)


# ---------------------------------------------------------------------------------------------
# Multinomial


@kernel("Multinomial", since=7)
def multinomial(ctx, x, dtype=6, sample_size=1, seed=None):
    """x: (batch, classes) unnormalised log-probabilities -> (batch, sample_size) class indices."""
    if x.ndim != 2:
        raise ValueError(f"Multinomial input must be (batch, classes), got shape {x.shape}")
    logits = x.astype(np.float64)
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    cdf = np.cumsum(probs, axis=1)
    cdf /= cdf[:, -1:]
    draws = _generator(seed).random_sample((x.shape[0], sample_size))
    classes = np.empty(draws.shape, dtype=np.int64)
    for row in range(x.shape[0]):
        classes[row] = np.searchsorted(cdf[row], draws[row], side="right")
    np.minimum(classes, x.shape[1] - 1, out=classes)
    return classes.astype(numpy_dtype(dtype))
