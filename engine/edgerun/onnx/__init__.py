"""ONNX protobuf decoding and encoding, pure Python (no `onnx` package at run time)."""
from .reader import load_model

__all__ = ["load_model"]
