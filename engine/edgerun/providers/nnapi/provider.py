"""The NNAPI provider: claims what Android's Neural Networks API can run at the chosen
feature level, lowers each partition to an NNAPI model (lowering.py, model.py) and runs it
on the device (binding.py) or with the reference interpreter (interpreter.py).

Provider options:
- "feature_level": 1..8 (default 4, Android 11): operations newer than it are refused with
  the level they need.
- "execute": "device" (default; needs libneuralnetworks.so, i.e. Android) or "reference".
- "relax_fp32_to_fp16": bool, recorded in the model (ANeuralNetworksModel_relaxComputation...).
"""
from __future__ import annotations

from typing import Optional

from ...ir import dtypes
from ..edge_common import EdgeProvider
from . import binding, interpreter, spec
from .lowering import RULES, Builder

_SUPPORTED = {dtypes.FLOAT: 1, dtypes.INT32: 1, dtypes.BOOL: 3, dtypes.FLOAT16: 3}


class NnapiProvider(EdgeProvider):
    name = "nnapi"
    ort_name = "NnapiExecutionProvider"
    platform = "NNAPI"
    RULES = RULES
    tensor_label = "NNAPI"
    element_types = frozenset(_SUPPORTED)
    max_rank = spec.MAX_RANK

    @classmethod
    def available(cls) -> tuple:
        if binding.library_path():
            return True, ""
        return False, f"{binding.LIBRARY} not found: NNAPI runs only on Android"

    def __init__(self, options: Optional[dict] = None):
        super().__init__(options)
        level = int(self.options.get("feature_level", spec.DEFAULT_FEATURE_LEVEL))
        if level not in spec.FEATURE_LEVELS:
            raise ValueError(f"nnapi provider option 'feature_level' must be 1..8, got {level}")
        self.feature_level = level
        self._device_programs: dict = {}

    def element_type_problem(self, elem_type: int, name: str) -> str:
        if _SUPPORTED[elem_type] > self.feature_level:
            kind = dtypes.BY_CODE[elem_type].name.lower()
            return (f"'{name}' is {kind}: needs NNAPI feature level {_SUPPORTED[elem_type]}, "
                    f"target is {self.feature_level}")
        return ""

    def builder(self, graph, types: dict):
        return Builder(graph, types, self.constant_or_none, self.feature_level,
                       relax=bool(self.options.get("relax_fp32_to_fp16", False)))

    def interpret(self, program, inputs: list) -> list:
        return interpreter.run(program, [inputs[i] for i in self._model_inputs(program)])

    def run_on_device(self, program, inputs: list) -> list:
        compiled = self._device_programs.get(id(program))
        if compiled is None:
            compiled = self._device_programs[id(program)] = binding.DeviceProgram(program)
        return compiled.run([inputs[i] for i in self._model_inputs(program)])

    @staticmethod
    def _model_inputs(program) -> list:
        """Positions among the partition's inputs of those the model takes (constants
        computed outside are baked into the model instead)."""
        return program.input_positions
