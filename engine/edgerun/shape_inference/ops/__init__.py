"""Inference rules, one module per operator family (mirroring providers/cpu/ops/).
Importing the package registers every rule."""
from . import (activations, attention, cast, control_flow, conv, cumulative,  # noqa: F401
               detection, elementwise, fused, image, indexing, loss, matmul, ml, normalization,
               pool, quantization, random, reduction, resize, rnn, sequence, signal, softmax,
               tensor, text, training)
