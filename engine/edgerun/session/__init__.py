"""The onnxruntime-style session API."""
from .inference_session import InferenceSession
from .io_binding import IOBinding
from .metadata import ModelMetadata, NodeArg
from .options import ExecutionMode, GraphOptimizationLevel, RunOptions, SessionOptions
from .ort_value import OrtValue

__all__ = ["InferenceSession", "IOBinding", "OrtValue", "ModelMetadata", "NodeArg",
           "ExecutionMode", "GraphOptimizationLevel", "RunOptions", "SessionOptions"]
