"""ai.onnx.ml operators that are plain tensor math: Scaler (shift, then scale, per feature)
and ArrayFeatureExtractor (a gather on the last axis), so classical-ML pipelines such as a
scikit-learn MLP's preprocessing and label lookup stay on the GPU."""
from __future__ import annotations

from ....ir import dtypes
from .. import host_values
from ..memory import GpuTensor
from .common import as_gpu, as_gpu_any, count
from .elementwise import binary
from .movement import gather
from .registry import gpu_op

ML = "ai.onnx.ml"


def _feature_vector(gpu, values, default: float) -> GpuTensor:
    """Scaler's offset or scale as a float32 GPU vector, uploaded once per distinct value."""
    values = [float(v) for v in values] if values else [default]
    return gpu.constant(("scaler", tuple(values)),
                        lambda: host_values.make(dtypes.FLOAT, (len(values),), values))


@gpu_op("Scaler", domain=ML)
def scaler(gpu, ctx, x, offset=None, scale=None):
    x = as_gpu(gpu, x, cast=True)
    features = x.shape[-1] if x.ndim else 1
    for name, values in (("offset", offset), ("scale", scale)):
        if values and len(values) not in (1, features):
            raise ValueError(f"Scaler: {name} has {len(values)} values; expected 1 or "
                             f"{features}")
    shifted = binary(gpu, x, _feature_vector(gpu, offset, 0.0), "x - y")
    return binary(gpu, shifted, _feature_vector(gpu, scale, 1.0), "x * y")


@gpu_op("ArrayFeatureExtractor", domain=ML)
def array_feature_extractor(gpu, ctx, x, y):
    """Entries of the last axis of x at the indices y; a vector x gives a [1, K] result."""
    x = as_gpu_any(gpu, x)
    if x.ndim == 0:
        raise ValueError("ArrayFeatureExtractor: X must have rank >= 1")
    k = count(y.shape)
    if k == 0:
        raise ValueError("ArrayFeatureExtractor: Y holds no index")
    flat = y.view((k,)) if isinstance(y, GpuTensor) else host_values.reshaped(y, (k,))
    out = gather(gpu, x, flat, x.ndim - 1)
    return out.view((1, k)) if x.ndim == 1 else out
