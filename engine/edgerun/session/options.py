"""SessionOptions, RunOptions and GraphOptimizationLevel with onnxruntime's names."""
from __future__ import annotations

import enum

from ..errors import InvalidArgument
from ..runtime.limits import DEFAULT_MAX_TENSOR_BYTES


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """Options for one InferenceSession (the subset of onnxruntime's that edgerun acts on,
    plus the common knobs scripts set so they keep working unchanged)."""

    def __init__(self):
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.optimized_model_filepath = ""
        self.enable_profiling = False
        self.profile_file_prefix = "edgerun_profile"
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_mem_pattern = True
        self.enable_cpu_mem_arena = True
        self.use_deterministic_compute = False
        # edgerun's: the most bytes one node may create (checked before allocating)
        self.max_tensor_bytes = DEFAULT_MAX_TENSOR_BYTES
        # ... the largest model file, and external data in all, a session reads
        self.max_model_bytes = 4 << 30
        self.max_external_data_bytes = 256 << 30
        self._config = {}
        self.custom_op_libraries = []

    def register_custom_ops_library(self, library_path: str) -> None:
        """Enable the Python custom operators of edgerun.custom_ops (pass its
        get_library_path()). A native library (.so, .dll, .dylib) cannot be loaded: its
        operators are C++ for onnxruntime's ABI."""
        from ..custom_ops import LIBRARY_PATH

        if library_path != LIBRARY_PATH:
            raise InvalidArgument(
                f"cannot load custom-op library '{library_path}': edgerun runs custom operators "
                f"written in Python; register them with edgerun.custom_ops.onnx_op and pass "
                f"edgerun.custom_ops.get_library_path()")
        if library_path not in self.custom_op_libraries:
            self.custom_op_libraries.append(library_path)

    def add_session_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        return self._config[key]


class RunOptions:
    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False
