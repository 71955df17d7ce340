"""onnxruntime.quantization's enums, with its names and values.

Only the 8-bit integer types quantize here; the others exist so code written for onnxruntime
imports, and are refused by name when used.
"""
from __future__ import annotations

from enum import Enum

from ..ir import dtypes


class _Named(Enum):
    """str() gives the member's name and from_string(name) the member, as onnxruntime's
    enums do (its command-line tools parse them)."""

    def __str__(self):
        return self.name

    @classmethod
    def from_string(cls, name):
        try:
            return cls[name]
        except KeyError:
            raise ValueError(f"unknown {cls.__name__} {name!r}") from None


class QuantizationMode(_Named):
    IntegerOps = 0
    QLinearOps = 1


class QuantType(_Named):
    QInt8 = 0
    QUInt8 = 1
    QFLOAT8E4M3FN = 2
    QInt16 = 3
    QUInt16 = 4
    QInt4 = 5
    QUInt4 = 6

    @property
    def tensor_type(self) -> int:
        return _TENSOR_TYPES[self]


_TENSOR_TYPES = {QuantType.QInt8: dtypes.INT8, QuantType.QUInt8: dtypes.UINT8,
                 QuantType.QFLOAT8E4M3FN: dtypes.FLOAT8E4M3FN, QuantType.QInt16: dtypes.INT16,
                 QuantType.QUInt16: dtypes.UINT16, QuantType.QInt4: dtypes.INT4,
                 QuantType.QUInt4: dtypes.UINT4}


class QuantFormat(_Named):
    QOperator = 0
    QDQ = 1


class CalibrationMethod(Enum):
    MinMax = 0
    Entropy = 1
    Percentile = 2
    Distribution = 3


SUPPORTED = (dtypes.INT8, dtypes.UINT8)


def element_type(qtype, what: str) -> int:
    """The ONNX element type of a QuantType (or an element type code), 8-bit integers only."""
    code = qtype.tensor_type if isinstance(qtype, QuantType) else int(qtype)
    if code not in SUPPORTED:
        name = qtype.name if isinstance(qtype, QuantType) else dtypes.elem_type(code).name
        raise NotImplementedError(f"{what}={name}: edgerun.quantization quantizes to QInt8 and "
                                  f"QUInt8 only")
    return code
