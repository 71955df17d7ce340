"""Lowered partitions as Core ML models: convert to an ML Program, save as .mlpackage, and
validate what was saved (works on Linux; only prediction needs Apple's Core ML framework).

Validation reloads the saved package's spec with `skip_model_load=True`, checks it is an ML
Program of the expected specification version with the partition's inputs and outputs, and
parses its MIL back into a Program with coremltools' milproto frontend, which re-runs MIL's
type and shape inference on every serialized op.
"""
from __future__ import annotations

import os
import sys

from .lowering import LoweringError, MilPartition

# minimum deployment target -> Core ML specification version it writes
SPEC_VERSIONS = {"iOS15": 6, "iOS16": 7, "iOS17": 8, "iOS18": 9}
PRECISIONS = ("fp32", "fp16")


def on_apple() -> bool:
    return sys.platform == "darwin" or sys.platform == "ios"


def convert(partition: MilPartition, precision: str = "fp32", compute_units: str = "ALL"):
    """The partition's program as a coremltools MLModel (an ML Program). Consumes the program:
    coremltools rewrites it in place while converting."""
    import coremltools as ct

    if precision not in PRECISIONS:
        raise LoweringError(f"unknown CoreML precision '{precision}'; expected one of "
                            f"{', '.join(PRECISIONS)}")
    return ct.convert(
        partition.program, convert_to="mlprogram",
        minimum_deployment_target=getattr(ct.target, partition.target),
        compute_precision=ct.precision.FLOAT32 if precision == "fp32" else ct.precision.FLOAT16,
        compute_units=getattr(ct.ComputeUnit, compute_units), skip_model_load=not on_apple())


def save(model, path: str) -> str:
    if not path.endswith(".mlpackage"):
        path += ".mlpackage"
    model.save(path)
    return path


def validate(path: str, partition: MilPartition) -> dict:
    """Check the saved .mlpackage at `path`; returns a summary (spec version, op counts)."""
    import coremltools as ct
    from coremltools.converters.mil.frontend.milproto import load as milproto

    model = ct.models.MLModel(path, skip_model_load=True)
    spec = model.get_spec()
    kind = spec.WhichOneof("Type")
    if kind != "mlProgram":
        raise LoweringError(f"{path}: saved model is a '{kind}', expected an ML Program")
    expected_version = SPEC_VERSIONS[partition.target]
    if spec.specificationVersion < expected_version:
        raise LoweringError(f"{path}: specification version {spec.specificationVersion}, "
                            f"expected >= {expected_version} for {partition.target}")
    names_in = {i.name for i in spec.description.input}
    names_out = {o.name for o in spec.description.output}
    if names_in != set(partition.input_names.values()):
        raise LoweringError(f"{path}: inputs {sorted(names_in)}, expected "
                            f"{sorted(partition.input_names.values())}")
    if names_out != set(partition.output_names.values()):
        raise LoweringError(f"{path}: outputs {sorted(names_out)}, expected "
                            f"{sorted(partition.output_names.values())}")
    weights = os.path.join(path, "Data", "com.apple.CoreML", "weights")
    program = milproto.load(spec, spec.specificationVersion, weights)
    counts: dict = {}
    for op in program.functions["main"].operations:
        counts[op.op_type] = counts.get(op.op_type, 0) + 1
    return {"path": path, "specification_version": spec.specificationVersion,
            "inputs": sorted(names_in), "outputs": sorted(names_out), "ops": counts,
            "program": program}
