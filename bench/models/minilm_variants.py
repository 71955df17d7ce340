"""MiniLM-L6 as users get it from onnxruntime's own tools: float16 weights
(`transformers.float16.convert_float_to_float16`, float32 inputs and outputs kept) and int8
dynamic quantization (`quantization.quantize_dynamic`: DynamicQuantizeLinear + MatMulInteger,
the form transformers.js ships as model_quantized.onnx), and that int8 model as onnxruntime's
graph optimizer saves it (`optimized_model_filepath`, extended level: com.microsoft
DynamicQuantizeMatMul, MatMulIntegerToFloat, SkipLayerNormalization, FusedMatMul, Gelu). Made
once from the float32 export (bench/models/export_minilm.py) and cached beside it.

    path = variant_path("fp16")        # or "int8", "int8_ort_optimized"
"""
from __future__ import annotations

import os
import warnings

from bench.models import export_minilm as ex

VARIANTS = ("fp16", "int8", "int8_ort_optimized")


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
        elif kind == "int8":
            from onnxruntime.quantization import quantize_dynamic

            quantize_dynamic(source, tmp)
        else:
            save_optimized_by_onnxruntime(variant_path("int8"), tmp)
    os.replace(tmp, path)
    return path


def save_optimized_by_onnxruntime(source: str, target: str) -> None:
    """`source` as an onnxruntime CPU session at the extended optimization level writes it
    (the portable level: no layout-specific nodes)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = target
    ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
