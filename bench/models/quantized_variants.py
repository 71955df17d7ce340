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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if kind == "qdq":
                _quantize_static(source, tmp, feeds)
            else:
                from onnxruntime.quantization import quantize_dynamic
                quantize_dynamic(source, tmp)
        os.replace(tmp, path)
    return path, feeds


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
