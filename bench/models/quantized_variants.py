"""Real models as users quantize them with onnxruntime's own tools: `quantize_static` in the QDQ
format (QuantizeLinear/DequantizeLinear around each operator, uint8 activations, int8
weights, calibrated with MinMax) and `quantize_dynamic` (DynamicQuantizeLinear + ConvInteger /
MatMulInteger). Made once from tests/real_models.py's model and cached beside it.

    path, feeds = quantized("ppocr_mobile_cls", "qdq")      # or "dynamic"
    path, feeds = quantized("ddddocr_det_batch1", "qdq")    # YOLOX, as issue #21 found it
"""
from __future__ import annotations

import os
import warnings

import numpy as np

KINDS = ("qdq", "dynamic")
CALIBRATION_BATCHES = 4


def quantized(model: str, kind: str) -> tuple:
    """(path, feeds) of `model` (a REAL_MODELS or bench WHEEL_MODELS name) quantized the
    `kind` way."""
    from real_models import REAL_MODELS

    from bench.models.wheel_models import WHEEL_MODELS

    if kind not in KINDS:
        raise ValueError(f"quantization {kind!r}: one of {', '.join(KINDS)}")
    source, feeds = {**REAL_MODELS, **WHEEL_MODELS}[model]()
    path = os.path.join(os.path.dirname(source), f"{model}_{kind}.onnx")
    if not os.path.exists(path):
        tmp = path + ".part"
        source = _quantizable(source, model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if kind == "qdq":
                _quantize_static(source, tmp, feeds)
            else:
                from onnxruntime.quantization import quantize_dynamic
                quantize_dynamic(source, tmp)
        os.replace(tmp, path)
    return path, feeds


def _quantizable(source: str, model: str) -> str:
    """`source`, or for a model older than onnxruntime's quantizer takes (onnx's light models:
    IR 3, opset 9, whose version conversion fails on initializers not listed as inputs) a
    copy upgraded to IR 7 and opset 13 beside it, its initializers no longer graph inputs
    (onnxruntime's remove_initializer_from_input), as a user would convert it first."""
    import onnx
    from onnx import version_converter

    head = onnx.load(source, load_external_data=False)
    opset = next((o.version for o in head.opset_import if o.domain in ("", "ai.onnx")), 0)
    if head.ir_version >= 4 and opset >= 11:
        return source
    target = os.path.join(os.path.dirname(source), f"{model}_opset13.onnx")
    if not os.path.exists(target):
        full = onnx.load(source)
        full.ir_version = max(full.ir_version, 7)
        weights = {t.name for t in full.graph.initializer}
        inputs = [v for v in full.graph.input if v.name not in weights]
        del full.graph.input[:]
        full.graph.input.extend(inputs)
        onnx.save(version_converter.convert_version(full, 13), target + ".part")
        os.replace(target + ".part", target)
    return target


def _quantize_static(source: str, target: str, feeds: dict) -> None:
    """QDQ calibrated on the model's own feeds plus seeded noise (deterministic)."""
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    batches = [{name: (value + np.random.default_rng(i).standard_normal(value.shape)
                       .astype(value.dtype) * 0.1) if value.dtype == np.float32 else value
                for name, value in feeds.items()} for i in range(CALIBRATION_BATCHES)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter(batches)

        def get_next(self):
            return next(self.items, None)

    quantize_static(source, target, Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
