"""QNN's published constants: op package, op types, data types, tensor types, backends.

Followed: QnnOpDef.h of the QNN SDK (op package "qti.aisw", opset version 1.27: op type and
parameter names), QnnTypes.h (Qnn_DataType_t, Qnn_TensorType_t) and the backend op support
tables of the QNN SDK documentation (HTP, CPU, GPU).
"""
from __future__ import annotations

PACKAGE = "qti.aisw"
OPSET_VERSION = "1.27.0"

# Qnn_DataType_t
DATA_TYPES = {
    "QNN_DATATYPE_INT_8": 0x0008, "QNN_DATATYPE_INT_16": 0x0016, "QNN_DATATYPE_INT_32": 0x0032,
    "QNN_DATATYPE_INT_64": 0x0064, "QNN_DATATYPE_UINT_8": 0x0108,
    "QNN_DATATYPE_UINT_16": 0x0116, "QNN_DATATYPE_UINT_32": 0x0132,
    "QNN_DATATYPE_UINT_64": 0x0164, "QNN_DATATYPE_FLOAT_16": 0x0216,
    "QNN_DATATYPE_FLOAT_32": 0x0232, "QNN_DATATYPE_SFIXED_POINT_8": 0x0308,
    "QNN_DATATYPE_SFIXED_POINT_16": 0x0316, "QNN_DATATYPE_UFIXED_POINT_8": 0x0408,
    "QNN_DATATYPE_UFIXED_POINT_16": 0x0416, "QNN_DATATYPE_BOOL_8": 0x0508,
}

# Qnn_TensorType_t
TENSOR_TYPES = {"QNN_TENSOR_TYPE_APP_WRITE": 0, "QNN_TENSOR_TYPE_APP_READ": 1,
                "QNN_TENSOR_TYPE_APP_READWRITE": 2, "QNN_TENSOR_TYPE_NATIVE": 3,
                "QNN_TENSOR_TYPE_STATIC": 4, "QNN_TENSOR_TYPE_NULL": 5}

# The op types this adapter emits (QnnOpDef.h names)
OPS = {
    "Conv2d", "DepthWiseConv2d", "PoolMax2d", "PoolAvg2d", "Lrn", "ElementWiseAdd",
    "ElementWiseSubtract", "ElementWiseMultiply", "ElementWiseDivide", "ElementWiseMaximum",
    "ElementWiseMinimum", "ElementWisePower", "ElementWiseExp", "ElementWiseLog",
    "ElementWiseSquareRoot", "ElementWiseAbs", "ElementWiseNeg", "ElementWiseFloor",
    "ElementWiseNeuron", "HardSwish", "Relu", "ReluMinMax", "Sigmoid", "Tanh", "Batchnorm",
    "FullyConnected", "MatMul", "Softmax", "Reshape", "Concat", "Transpose", "ReduceMean",
    "ReduceSum", "ReduceMax", "ReduceMin", "Pad", "StridedSlice",
}
NEURON_HARD_SIGMOID = 2          # QNN_OP_ELEMENT_WISE_NEURON_OPERATION_HARD_SIGMOID
# "HardSwish" is QNN_OP_HARD_SWISH (no params; y = x * clamp(x/6 + 1/2, 0, 1)), the op
# onnxruntime's QNN EP maps ONNX HardSwish to on the CPU and HTP backends
POOL_ROUNDING_FLOOR, POOL_ROUNDING_CEIL = 0, 1
PAD_SCHEME_CONSTANT, PAD_SCHEME_MIRROR_REFLECT, PAD_SCHEME_EDGE = 0, 2, 3
LRN_ACROSS_CHANNEL = 0

# Backend: library, ONNX element types (codes) it computes in float graphs, max rank.
# HTP computes float graphs in FP16 ("htp_fp16_precision", onnxruntime's
# enable_htp_fp16_precision); without it HTP takes quantized graphs only, which edgerun does
# not produce. Rank limits are edgerun's conservative reading of the backend tables.
BACKENDS: dict = {
    "cpu": {"library": "libQnnCpu.so", "dtypes": {1: "QNN_DATATYPE_FLOAT_32",
                                                  6: "QNN_DATATYPE_INT_32",
                                                  9: "QNN_DATATYPE_BOOL_8"}, "max_rank": 5},
    "gpu": {"library": "libQnnGpu.so", "dtypes": {1: "QNN_DATATYPE_FLOAT_32",
                                                  10: "QNN_DATATYPE_FLOAT_16",
                                                  6: "QNN_DATATYPE_INT_32"}, "max_rank": 4},
    "htp": {"library": "libQnnHtp.so", "dtypes": {1: "QNN_DATATYPE_FLOAT_32",
                                                  10: "QNN_DATATYPE_FLOAT_16",
                                                  6: "QNN_DATATYPE_INT_32",
                                                  9: "QNN_DATATYPE_BOOL_8"}, "max_rank": 5},
}
# Op types edgerun does not claim on a backend: a conservative list, still to be checked
# against each SDK release's backend support pages on a device
BACKEND_LACKS = {"gpu": {"Lrn", "ElementWisePower", "ElementWiseNeuron", "HardSwish"},
                 "htp": {"Lrn"}, "cpu": set()}
