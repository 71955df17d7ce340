"""ai.onnx.ml operators the exported scikit-learn pipelines use: Scaler and
ArrayFeatureExtractor."""
from __future__ import annotations

from array import array

from ....ir import dtypes
from ....runtime.host_tensor import HostTensor
from . import operator
from .common import product
from .elementwise import BINARY, binary
from .tensor import CAST_TYPES, cast

ML = ("ai.onnx.ml",)


@operator("Scaler", domains=ML)
def bind_scaler(dev, node, opset):
    """(x - offset) * scale per feature (last axis), as float32."""
    offset = [float(v) for v in node.attr("offset") or []]
    scale = [float(v) for v in node.attr("scale") or []]
    uploaded = [dev.upload(HostTensor(dtypes.FLOAT, (len(v),), array("f", v).tobytes()))
                if v else None for v in (offset, scale)]

    def run(ctx, x, **_):
        if x.elem_type not in CAST_TYPES:
            raise TypeError(f"Scaler input of {dtypes.type_string(x.elem_type)}")
        y = cast(dev, x, dtypes.FLOAT)
        features = x.shape[-1] if x.shape else 1
        for name, values, t, code in (("offset", offset, uploaded[0], BINARY["Sub"]),
                                      ("scale", scale, uploaded[1], BINARY["Mul"])):
            if t is None:
                continue
            if len(values) not in (1, features):
                raise ValueError(f"Scaler: {name} has {len(values)} values; expected 1 or "
                                 f"{features}")
            y = binary(dev, "er_binary", code, y, t, dtypes.FLOAT)
        return y
    return run


@operator("ArrayFeatureExtractor", domains=ML)
def bind_array_feature_extractor(dev, node, opset):
    """Entries of the last axis picked by int64 indices; a vector input gives [1, K]."""
    def run(ctx, x, indices, **_):
        if not x.shape:
            raise ValueError("ArrayFeatureExtractor: X must have rank >= 1")
        if indices.elem_type not in (dtypes.INT64, dtypes.INT32) or indices.size == 0:
            raise ValueError(f"ArrayFeatureExtractor: Y must hold int64 indices, got "
                             f"{dtypes.type_string(indices.elem_type)} {list(indices.shape)}")
        size = x.shape[-1]
        shape = list(x.shape[:-1]) + list(indices.shape)
        y = dev.empty(shape if len(x.shape) > 1 else (1, indices.size), x.elem_type)
        bad = dev.call("er_gather", y.ptr, x.ptr, indices.ptr,
                       int(indices.elem_type == dtypes.INT64), indices.size,
                       product(x.shape[:-1]), size, x.itemsize)
        if bad:
            raise ValueError(f"ArrayFeatureExtractor: index at position {-1 - bad} is out of "
                             f"range for a last axis of size {size}")
        return y
    return run
