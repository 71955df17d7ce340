"""The device binding: an NnapiModel handed to Android's libneuralnetworks.so with ctypes.

Only loaded on Android (the library exists nowhere else); not exercised by edgerun's test
suite, which runs the same NnapiModel with the reference interpreter (docs/edge_adapters.md).
Calls follow NeuralNetworks.h: Model_create / addOperand / setOperandValue / addOperation /
identifyInputsAndOutputs / finish, Compilation_create / finish, Execution_create /
setInput / setOutput / compute (feature level 3; startCompute + Event_wait before).
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..edge_common import find_library
from . import spec

LIBRARY = "libneuralnetworks.so"
PREFER_SUSTAINED_SPEED = 2


class _OperandType(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int32), ("dimensionCount", ctypes.c_uint32),
                ("dimensions", ctypes.POINTER(ctypes.c_uint32)), ("scale", ctypes.c_float),
                ("zeroPoint", ctypes.c_int32)]


def library_path() -> str:
    return find_library([LIBRARY])


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"NNAPI {what} failed with result code {status}")


def _scalar_bytes(type_name: str, value) -> bytes:
    fmt = {"INT32": np.int32, "UINT32": np.uint32, "FLOAT32": np.float32, "BOOL": np.uint8,
           "FLOAT16": np.float16}[type_name]
    return np.array(value, fmt).tobytes()


class DeviceProgram:
    """A compiled NNAPI model ready to execute (one per partition and shape signature)."""

    def __init__(self, model):
        self.lib = ctypes.CDLL(library_path())
        self.model = model
        self._keep = []                     # buffers NNAPI reads after setOperandValue
        self.handle = self._build()
        self.compilation = ctypes.c_void_p()
        _check(self.lib.ANeuralNetworksCompilation_create(self.handle,
                                                          ctypes.byref(self.compilation)),
               "Compilation_create")
        _check(self.lib.ANeuralNetworksCompilation_setPreference(self.compilation,
                                                                 PREFER_SUSTAINED_SPEED),
               "Compilation_setPreference")
        _check(self.lib.ANeuralNetworksCompilation_finish(self.compilation),
               "Compilation_finish")

    def _build(self):
        lib, model = self.lib, ctypes.c_void_p()
        _check(lib.ANeuralNetworksModel_create(ctypes.byref(model)), "Model_create")
        for index, operand in enumerate(self.model.operands):
            dims = (ctypes.c_uint32 * max(len(operand.dims), 1))(*operand.dims)
            t = _OperandType(spec.OPERAND_TYPES[operand.type], len(operand.dims),
                             dims if operand.dims else None, 0.0, 0)
            _check(lib.ANeuralNetworksModel_addOperand(model, ctypes.byref(t)),
                   f"addOperand {index}")
            if operand.lifetime == "CONSTANT_COPY":
                data = (np.ascontiguousarray(operand.value).tobytes() if operand.dims
                        else _scalar_bytes(operand.type, operand.value))
                buf = ctypes.create_string_buffer(data, len(data))
                self._keep.append(buf)
                _check(lib.ANeuralNetworksModel_setOperandValue(model, index, buf, len(data)),
                       f"setOperandValue {index}")
        for op in self.model.operations:
            ins = (ctypes.c_uint32 * len(op.inputs))(*op.inputs)
            outs = (ctypes.c_uint32 * len(op.outputs))(*op.outputs)
            _check(lib.ANeuralNetworksModel_addOperation(model, spec.code_of(op.type),
                                                         len(op.inputs), ins,
                                                         len(op.outputs), outs),
                   f"addOperation {op.type}")
        ins = (ctypes.c_uint32 * len(self.model.inputs))(*self.model.inputs)
        outs = (ctypes.c_uint32 * len(self.model.outputs))(*self.model.outputs)
        _check(lib.ANeuralNetworksModel_identifyInputsAndOutputs(
            model, len(self.model.inputs), ins, len(self.model.outputs), outs),
            "identifyInputsAndOutputs")
        _check(lib.ANeuralNetworksModel_finish(model), "Model_finish")
        return model

    def run(self, inputs: list) -> list:
        lib, execution = self.lib, ctypes.c_void_p()
        _check(lib.ANeuralNetworksExecution_create(self.compilation, ctypes.byref(execution)),
               "Execution_create")
        arrays = [np.ascontiguousarray(a) for a in inputs]
        for i, a in enumerate(arrays):
            _check(lib.ANeuralNetworksExecution_setInput(execution, i, None,
                                                         a.ctypes.data_as(ctypes.c_void_p),
                                                         a.nbytes), f"setInput {i}")
        outputs = []
        for i, index in enumerate(self.model.outputs):
            operand = self.model.operands[index]
            dtype = {"TENSOR_FLOAT32": np.float32, "TENSOR_INT32": np.int32,
                     "TENSOR_BOOL8": np.bool_, "TENSOR_FLOAT16": np.float16}[operand.type]
            out = np.empty(operand.dims, dtype)
            outputs.append(out)
            _check(lib.ANeuralNetworksExecution_setOutput(execution, i, None,
                                                          out.ctypes.data_as(ctypes.c_void_p),
                                                          out.nbytes), f"setOutput {i}")
        try:
            _check(lib.ANeuralNetworksExecution_compute(execution), "Execution_compute")
        finally:
            lib.ANeuralNetworksExecution_free(execution)
        return outputs
