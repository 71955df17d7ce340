"""ai.onnx.ml operators the exported scikit-learn pipelines use: Scaler,
ArrayFeatureExtractor and LabelEncoder."""
from __future__ import annotations

import struct
from array import array

from ....ir import dtypes, text_rules
from ....ir.host_tensor import HostTensor, flat_values
from . import operator
from .common import floats_as, host_floats, host_values, product
from .elementwise import BINARY, binary
from .tensor import CAST_TYPES, cast
from .text import is_strings, string_tensor, strings_of
from ..device import INT_FORMATS, WasmTensor

FLOAT_TYPES = (dtypes.FLOAT, dtypes.DOUBLE, dtypes.FLOAT16, dtypes.BFLOAT16)

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


@operator("LabelEncoder", domains=ML)
@host_values                            # strings stay on the host
def bind_label_encoder(dev, node, opset):
    """A table lookup on the host: opset 1 maps strings to their index in classes_strings
    (or indices to strings); opsets 2 and 4 map keys_* to values_*, opset 4 adding the
    *_tensor forms and NaN keys that match NaN inputs."""
    def run(ctx, x, **attrs):
        shape, items, in_type = _label_input(dev, x)
        if opset < 2:
            classes = attrs.get("classes_strings") or []
            if in_type == dtypes.STRING:
                table, out_type = {c: i for i, c in enumerate(classes)}, dtypes.INT64
                default = attrs.get("default_int64", -1)
            else:
                table, out_type = dict(enumerate(classes)), dtypes.STRING
                default = attrs.get("default_string", "_Unused")
        else:
            table, out_type, default = _label_table(attrs, in_type)
        nan_value = default
        if opset >= 4:
            nan_value = next((v for k, v in table.items() if k != k), default)
        mapped = [nan_value if v != v else table.get(v, default) for v in items]
        return _label_output(dev, mapped, shape, out_type)
    return run


def _label_input(dev, x) -> tuple:
    """(shape, flat Python values, element type) of LabelEncoder's input."""
    if is_strings(x):
        shape, items = strings_of(x, "LabelEncoder")
        return shape, items, dtypes.STRING
    if not isinstance(x, WasmTensor):
        raise TypeError(f"LabelEncoder input of {type(x).__name__}")
    if x.elem_type in INT_FORMATS:
        return x.shape, list(dev.ints(x)), x.elem_type
    return x.shape, host_floats(dev, x), x.elem_type


_ROUNDING = {dtypes.FLOAT: "<f", dtypes.FLOAT16: "<e"}


def _label_table(attrs: dict, in_type: int) -> tuple:
    """(key -> value, output element type, default) from opset 2/4 attributes."""
    keys = _first_given(attrs, "keys_tensor", "keys_floats", "keys_int64s", "keys_strings")
    if keys is None:
        raise ValueError("LabelEncoder: one of keys_floats, keys_int64s, keys_strings, "
                         "keys_tensor is required")
    keys = flat_values(keys) if _is_tensor(keys) else list(keys)
    if attrs.get("values_tensor") is not None:
        out_type = _elem_type(attrs["values_tensor"])
        values = flat_values(attrs["values_tensor"])
        default = {dtypes.STRING: attrs.get("default_string", "_Unused")}.get(
            out_type, attrs.get("default_float", -0.0) if out_type in FLOAT_TYPES
            else attrs.get("default_int64", -1))
    else:
        for name, out_type, fallback in (("values_floats", dtypes.FLOAT, -0.0),
                                         ("values_int64s", dtypes.INT64, -1),
                                         ("values_strings", dtypes.STRING, "_Unused")):
            if attrs.get(name) is not None:
                values = list(attrs[name])
                default = attrs.get("default_" + name[7:-1], fallback)
                break
        else:
            raise ValueError("LabelEncoder: one of values_floats, values_int64s, "
                             "values_strings, values_tensor is required")
    given = attrs.get("default_tensor")
    if given is not None and flat_values(given):
        default = flat_values(given)[0]
    if len(keys) != len(values):
        raise ValueError(f"LabelEncoder: {len(keys)} keys but {len(values)} values")
    if in_type in _ROUNDING and keys and isinstance(keys[0], float):
        fmt = _ROUNDING[in_type]                 # compare at the input's precision
        keys = [struct.unpack(fmt, struct.pack(fmt, k))[0] for k in keys]
    return dict(zip(keys, values)), out_type, default


def _first_given(attrs: dict, *names):
    return next((attrs[n] for n in names if attrs.get(n) is not None), None)


def _is_tensor(value) -> bool:
    return isinstance(value, HostTensor) or hasattr(value, "dtype")


def _elem_type(value) -> int:
    if isinstance(value, HostTensor):
        return value.elem_type
    return dtypes.code_of_numpy(value.dtype)


def _label_output(dev, values: list, shape, out_type: int):
    if out_type == dtypes.STRING:
        return string_tensor(dev, shape, [text_rules.as_str(v) for v in values])
    if out_type in INT_FORMATS:
        return dev.from_ints(values, shape, out_type)
    return floats_as(dev, [float(v) for v in values], shape, out_type)
