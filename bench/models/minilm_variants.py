"""MiniLM-L6 as users get it from onnxruntime's own tools: float16 weights
(`transformers.float16.convert_float_to_float16`, float32 inputs and outputs kept) and int8
dynamic quantization (`quantization.quantize_dynamic`: DynamicQuantizeLinear + MatMulInteger,
the form transformers.js ships as model_quantized.onnx). Made once from the float32 export
(bench/models/export_minilm.py) and cached beside it.

    path = variant_path("fp16")        # or "int8"
"""
from __future__ import annotations

import os
import warnings

from bench.models import export_minilm as ex

VARIANTS = ("fp16", "int8")


def variant_path(kind: str) -> str:
    if kind not in VARIANTS:
        raise ValueError(f"MiniLM variant {kind!r}: one of {', '.join(VARIANTS)}")
    path = os.path.join(ex.TARGET, f"model_{kind}.onnx")
    if os.path.exists(path):
        return path
    source = ex.ensure_minilm()
    tmp = path + ".part"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "fp16":
            import onnx
            from onnxruntime.transformers.float16 import convert_float_to_float16

            onnx.save(convert_float_to_float16(onnx.load(source), keep_io_types=True), tmp)
        else:
            from onnxruntime.quantization import quantize_dynamic

            quantize_dynamic(source, tmp)
    os.replace(tmp, path)
    return path
