"""ONNX element types: the one table every other module reads.

The table is numpy-free so the core runs in Pyodide without numpy; `numpy_dtype`
imports numpy (and ml_dtypes for the exotic float/int formats) only when asked.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class ElemType:
    code: int          # TensorProto.DataType
    name: str          # onnx name, e.g. "FLOAT"
    type_str: str      # onnxruntime NodeArg spelling inside "tensor(...)"
    numpy_name: str    # numpy or ml_dtypes name
    bits: int          # storage bits per element (0 for strings)


_TABLE = [
    ElemType(1, "FLOAT", "float", "float32", 32),
    ElemType(2, "UINT8", "uint8", "uint8", 8),
    ElemType(3, "INT8", "int8", "int8", 8),
    ElemType(4, "UINT16", "uint16", "uint16", 16),
    ElemType(5, "INT16", "int16", "int16", 16),
    ElemType(6, "INT32", "int32", "int32", 32),
    ElemType(7, "INT64", "int64", "int64", 64),
    ElemType(8, "STRING", "string", "object", 0),
    ElemType(9, "BOOL", "bool", "bool", 8),
    ElemType(10, "FLOAT16", "float16", "float16", 16),
    ElemType(11, "DOUBLE", "double", "float64", 64),
    ElemType(12, "UINT32", "uint32", "uint32", 32),
    ElemType(13, "UINT64", "uint64", "uint64", 64),
    ElemType(14, "COMPLEX64", "complex64", "complex64", 64),
    ElemType(15, "COMPLEX128", "complex128", "complex128", 128),
    ElemType(16, "BFLOAT16", "bfloat16", "bfloat16", 16),
    ElemType(17, "FLOAT8E4M3FN", "float8e4m3fn", "float8_e4m3fn", 8),
    ElemType(18, "FLOAT8E4M3FNUZ", "float8e4m3fnuz", "float8_e4m3fnuz", 8),
    ElemType(19, "FLOAT8E5M2", "float8e5m2", "float8_e5m2", 8),
    ElemType(20, "FLOAT8E5M2FNUZ", "float8e5m2fnuz", "float8_e5m2fnuz", 8),
    ElemType(21, "UINT4", "uint4", "uint4", 4),
    ElemType(22, "INT4", "int4", "int4", 4),
    ElemType(23, "FLOAT4E2M1", "float4e2m1", "float4_e2m1fn", 4),
    ElemType(24, "FLOAT8E8M0", "float8e8m0", "float8_e8m0fnu", 8),
    ElemType(25, "UINT2", "uint2", "uint2", 2),
    ElemType(26, "INT2", "int2", "int2", 2),
    ElemType(27, "FLOAT6E2M3", "float6e2m3", "float6_e2m3fn", 6),
    ElemType(28, "FLOAT6E3M2", "float6e3m2", "float6_e3m2fn", 6),
]

BY_CODE = {t.code: t for t in _TABLE}
BY_NAME = {t.name: t for t in _TABLE}
BY_NUMPY = {t.numpy_name: t for t in _TABLE}

FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, STRING, BOOL, FLOAT16, DOUBLE = range(1, 12)
UINT32, UINT64, COMPLEX64, COMPLEX128, BFLOAT16 = range(12, 17)
FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ, UINT4, INT4, FLOAT4E2M1 = range(17, 24)
FLOAT8E8M0, UINT2, INT2, FLOAT6E2M3, FLOAT6E3M2 = range(24, 29)

# Types whose numpy form needs the ml_dtypes package (onnx depends on it too).
ML_DTYPES_CODES = {16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28}
SUB_BYTE_CODES = {21, 22, 23, 25, 26, 27, 28}


def elem_type(code: int) -> ElemType:
    try:
        return BY_CODE[code]
    except KeyError:
        raise ValueError(f"unknown ONNX element type code {code}") from None


def type_string(code: int) -> str:
    """onnxruntime's spelling, e.g. 'tensor(float)' ('tensor(undefined)' for code 0, a type
    a file left unset)."""
    if not code:
        return "tensor(undefined)"
    return f"tensor({elem_type(code).type_str})"


def numpy_dtype(code: int):
    import numpy as np

    t = elem_type(code)
    if code in ML_DTYPES_CODES:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, t.numpy_name))
    return np.dtype(t.numpy_name)


_CODE_OF_DTYPE: dict = {}      # numpy dtype -> code, once per dtype (dtype.name costs ~2 us)


def code_of_numpy(dtype) -> int:
    code = _CODE_OF_DTYPE.get(dtype)
    if code is None:
        code = _CODE_OF_DTYPE[dtype] = _code_of_numpy(dtype)
    return code


def _code_of_numpy(dtype) -> int:
    import numpy as np

    dtype = np.dtype(dtype)
    t = BY_NUMPY.get(dtype.name)
    if t is None:
        if dtype.kind in ("U", "S", "O"):
            return STRING
        raise ValueError(f"numpy dtype {dtype} has no ONNX element type")
    return t.code


def as_float32(value: float) -> float:
    """A Python float rounded to the nearest float32 (host arithmetic done in float32)."""
    return struct.unpack("<f", struct.pack("<f", value))[0]
