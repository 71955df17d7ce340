"""Quantization with onnxruntime.quantization's API, in pure Python (a page can quantize a
model it downloaded; numpy is used when present, with the same results).

    from edgerun.quantization import quantize_dynamic, quantize_static, QuantType, QuantFormat
    quantize_dynamic("model.onnx", "model.int8.onnx", weight_type=QuantType.QInt8)
    quantize_static("model.onnx", "model.qdq.onnx", reader, quant_format=QuantFormat.QDQ)

The files load in onnxruntime; weights quantize to the integers onnxruntime's quantizer writes
(its scale and zero-point arithmetic is reproduced step by step, see arith.py).
"""
from .calibrate import CalibrationDataReader, MinMaxCalibrater, TensorData, TensorsData
from .dynamic import quantize_dynamic
from .quant_types import CalibrationMethod, QuantFormat, QuantizationMode, QuantType
from .static import quantize_static

__all__ = [
           "CalibrationDataReader",
           "CalibrationMethod",
           "MinMaxCalibrater",
           "QuantFormat",
           "QuantType",
           "QuantizationMode",
           "TensorData",
           "TensorsData",
           "quantize_dynamic",
           "quantize_static",
]
