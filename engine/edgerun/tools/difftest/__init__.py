"""Differential testing: random small graphs run on edgerun's providers and onnxruntime.

    python -m edgerun.tools.difftest --providers cpu,wasm,webgpu --cases N --seed S

Every operator family the providers claim has a generator (families.py) that draws random
attributes, shapes (batch 1 and more, size-1 and empty axes, channel counts past the
kernels' method thresholds) and values; graph inputs sometimes reach the node through a
Transpose, Slice or Expand so kernels see strided, reversed and broadcast views, and
feeds are sometimes read-only (builder.py). Each case runs on every provider that claims
all its nodes and is compared with onnxruntime; the onnx ReferenceEvaluator decides where
onnxruntime cannot run a case or departs from the spec (oracle.py). Mismatches and
crashes are written out (model.onnx, inputs.npz, case.json) for `--replay`.
Needs the test dependencies (onnx, onnxruntime): pip install -e ".[test]".
"""
from .builder import Case, GraphBuilder, Tolerance
from .families import FAMILIES
from .runner import Outcome, Report, generate, load_case, run_case, run_parallel, save_case

__all__ = ["Case", "GraphBuilder", "Tolerance", "FAMILIES", "Outcome", "Report", "generate",
           "load_case", "run_case", "run_parallel", "save_case"]
