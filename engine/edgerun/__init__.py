"""edgerun: an ONNX inference engine whose core is portable Python.

The API mirrors onnxruntime's, so `import edgerun as ort` is the whole switch.
"""
from .errors import (EdgerunError, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf,
                     NotImplementedOp, RunTerminated)
from .providers.registry import get_all_providers, get_available_providers
from .session import (ExecutionMode, GraphOptimizationLevel, InferenceSession, IOBinding,
                      ModelMetadata, NodeArg, OrtValue, RunOptions, SessionOptions)

__version__ = "0.1.0"


def get_device() -> str:
    return "CPU"


__all__ = ["EdgerunError", "Fail", "InvalidArgument", "InvalidGraph", "InvalidProtobuf",
           "NotImplementedOp", "RunTerminated", "get_all_providers", "get_available_providers", "ExecutionMode",
           "GraphOptimizationLevel", "InferenceSession", "IOBinding", "ModelMetadata", "NodeArg",
           "OrtValue", "RunOptions", "SessionOptions", "get_device", "__version__"]
