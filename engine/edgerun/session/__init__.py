"""The onnxruntime-style session API."""
from .inference_session import InferenceSession
from .metadata import ModelMetadata, NodeArg
from .options import ExecutionMode, GraphOptimizationLevel, RunOptions, SessionOptions

__all__ = ["InferenceSession", "ModelMetadata", "NodeArg", "ExecutionMode",
           "GraphOptimizationLevel", "RunOptions", "SessionOptions"]
