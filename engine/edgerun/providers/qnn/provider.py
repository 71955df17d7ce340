"""The QNN provider: claims what Qualcomm's AI Engine Direct (QNN) runs on the chosen
backend, lowers each partition to a QNN graph of qti.aisw ops (lowering.py, graph.py) and
runs it with the reference interpreter (interpreter.py); see binding.py for the device side.

Provider options:
- "backend_type": "htp" (default, the NPU), "cpu" or "gpu" (onnxruntime's option name).
- "htp_fp16_precision": bool (default True): HTP runs float32 graphs in FP16; without it
  HTP takes quantized graphs only and float nodes are refused. The reference interpreter
  rounds every HTP op result to float16 when it is on.
- "execute": "device" (default; needs the backend library) or "reference".
"""
from __future__ import annotations

from typing import Optional

from ...ir import dtypes
from ..edge_common import EdgeProvider
from . import binding, interpreter, spec
from .lowering import RULES, Builder


class QNNProvider(EdgeProvider):
    name = "qnn"
    ort_name = "QNNExecutionProvider"
    platform = "QNN"
    RULES = RULES

    @classmethod
    def available(cls, backend: str = "htp") -> tuple:
        if binding.library_path(backend):
            return True, ""
        return False, (f"{spec.BACKENDS[backend]['library']} not found: QNN runs where the "
                       f"Qualcomm AI Engine Direct SDK libraries are installed (Snapdragon "
                       f"devices, Windows on Snapdragon)")

    def __init__(self, options: Optional[dict] = None):
        options = dict(options or {})
        backend = options.get("backend_type", "htp")
        if backend not in spec.BACKENDS:
            raise ValueError(f"qnn provider option 'backend_type' must be one of "
                             f"{sorted(spec.BACKENDS)}, got {backend!r}")
        self.backend = backend
        self.tensor_label = f"QNN {backend.upper()}"
        self.element_types = frozenset(spec.BACKENDS[backend]["dtypes"])
        self.max_rank = spec.BACKENDS[backend]["max_rank"]
        self.fp16 = backend == "htp" and bool(options.get("htp_fp16_precision", True))
        super().__init__(options)

    def device_available(self) -> tuple:
        return self.available(self.backend)

    def element_type_problem(self, elem_type: int, name: str) -> str:
        if self.backend == "htp" and elem_type == dtypes.FLOAT and not self.fp16:
            return (f"'{name}' is float32: the HTP backend computes float graphs only with "
                    f"htp_fp16_precision (else quantized uint8/uint16 graphs)")
        return ""

    def builder(self, graph, types: dict):
        return Builder(graph, types, self.constant_or_none, self.backend, fp16=self.fp16)

    def interpret(self, program, inputs: list) -> list:
        return interpreter.run(program, [inputs[i] for i in program.input_positions],
                               fp16=self.fp16)

    def run_on_device(self, program, inputs: list) -> list:
        raise NotImplementedError(
            "executing a QnnGraph through the QNN function table is not written yet; use "
            "provider option {'execute': 'reference'}, or export program.to_json() for the "
            "QNN SDK tools")
