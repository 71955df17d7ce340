"""NNAPI's published constants: operation codes, operand types, feature levels.

Followed: the NDK header NeuralNetworks.h (Android 13, NNAPI feature level 8) and its
OperationCode / OperandCode documentation ("Available since NNAPI feature level N").
Feature levels map to Android API levels 27 (FL1), 28 (FL2), 29 (FL3), 30 (FL4), 31 (FL5)
and to the updatable-NNAPI constants 1000006..1000008 (FL6..FL8).
"""
from __future__ import annotations

# ANEURALNETWORKS_* OperandCode
OPERAND_TYPES = {
    "FLOAT32": 0, "INT32": 1, "UINT32": 2, "TENSOR_FLOAT32": 3, "TENSOR_INT32": 4,
    "TENSOR_QUANT8_ASYMM": 5, "BOOL": 6, "TENSOR_QUANT16_SYMM": 7, "TENSOR_FLOAT16": 8,
    "TENSOR_BOOL8": 9, "FLOAT16": 10, "TENSOR_QUANT8_SYMM_PER_CHANNEL": 11,
    "TENSOR_QUANT16_ASYMM": 12, "TENSOR_QUANT8_SYMM": 13, "TENSOR_QUANT8_ASYMM_SIGNED": 14,
}
OPERAND_TYPE_LEVEL = {"TENSOR_FLOAT16": 3, "TENSOR_BOOL8": 3, "BOOL": 3, "FLOAT16": 3}

# ANEURALNETWORKS_* OperationCode: name -> (code, feature level it appeared in)
OPERATIONS = {
    "ADD": (0, 1), "AVERAGE_POOL_2D": (1, 1), "CONCATENATION": (2, 1), "CONV_2D": (3, 1),
    "DEPTHWISE_CONV_2D": (4, 1), "DEPTH_TO_SPACE": (5, 1), "DEQUANTIZE": (6, 1),
    "FLOOR": (8, 1), "FULLY_CONNECTED": (9, 1), "L2_NORMALIZATION": (11, 1),
    "L2_POOL_2D": (12, 1), "LOCAL_RESPONSE_NORMALIZATION": (13, 1), "LOGISTIC": (14, 1),
    "MAX_POOL_2D": (17, 1), "MUL": (18, 1), "RELU": (19, 1), "RELU1": (20, 1),
    "RELU6": (21, 1), "RESHAPE": (22, 1), "RESIZE_BILINEAR": (23, 1), "SOFTMAX": (25, 1),
    "SPACE_TO_DEPTH": (26, 1), "TANH": (28, 1),
    "BATCH_TO_SPACE_ND": (29, 2), "DIV": (30, 2), "MEAN": (31, 2), "PAD": (32, 2),
    "SPACE_TO_BATCH_ND": (33, 2), "SQUEEZE": (34, 2), "STRIDED_SLICE": (35, 2),
    "SUB": (36, 2), "TRANSPOSE": (37, 2),
    "ABS": (38, 3), "ARGMAX": (39, 3), "ARGMIN": (40, 3), "CAST": (45, 3),
    "CHANNEL_SHUFFLE": (46, 3), "EQUAL": (48, 3), "EXP": (49, 3), "EXPAND_DIMS": (50, 3),
    "GATHER": (51, 3), "GREATER": (53, 3), "GREATER_EQUAL": (54, 3),
    "GROUPED_CONV_2D": (55, 3), "INSTANCE_NORMALIZATION": (57, 3), "LESS": (58, 3),
    "LESS_EQUAL": (59, 3), "LOG": (60, 3), "LOGICAL_AND": (61, 3), "LOGICAL_NOT": (62, 3),
    "LOGICAL_OR": (63, 3), "LOG_SOFTMAX": (64, 3), "MAXIMUM": (65, 3), "MINIMUM": (66, 3),
    "NEG": (67, 3), "NOT_EQUAL": (68, 3), "PAD_V2": (69, 3), "POW": (70, 3),
    "PRELU": (71, 3), "REDUCE_MAX": (77, 3), "REDUCE_MIN": (78, 3), "REDUCE_PROD": (79, 3),
    "REDUCE_SUM": (80, 3), "RSQRT": (83, 3), "SELECT": (84, 3), "SIN": (85, 3),
    "SLICE": (86, 3), "SPLIT": (87, 3), "SQRT": (88, 3), "TILE": (89, 3), "TOPK_V2": (90, 3),
    "TRANSPOSE_CONV_2D": (91, 3), "RESIZE_NEAREST_NEIGHBOR": (94, 3),
    "ELU": (98, 4), "HARD_SWISH": (99, 4), "FILL": (100, 4), "RANK": (101, 4),
    "BATCH_MATMUL": (102, 6), "PACK": (103, 6), "MIRROR_PAD": (104, 7), "REVERSE": (105, 7),
}
CODE_NAMES = {code: name for name, (code, _) in OPERATIONS.items()}

# FuseCode: the activation an ADD/MUL/SUB/DIV/CONV/POOL/FULLY_CONNECTED applies to its result
FUSE_NONE, FUSE_RELU, FUSE_RELU1, FUSE_RELU6 = 0, 1, 2, 3
FUSABLE = {"ADD", "MUL", "SUB", "DIV", "CONV_2D", "DEPTHWISE_CONV_2D", "GROUPED_CONV_2D",
           "FULLY_CONNECTED", "AVERAGE_POOL_2D", "MAX_POOL_2D"}

# OperandLifeTime, as the model form records where each operand's value comes from
LIFETIME = ("TEMPORARY_VARIABLE", "MODEL_INPUT", "MODEL_OUTPUT", "CONSTANT_COPY")

# Most operations: "Supported tensor rank: up to 4"
MAX_RANK = 4
DEFAULT_FEATURE_LEVEL = 4        # Android 11 (API 30), the oldest NNAPI Google still updates
FEATURE_LEVELS = range(1, 9)


def level_of(operation: str) -> int:
    return OPERATIONS[operation][1]


def code_of(operation: str) -> int:
    return OPERATIONS[operation][0]
