"""What a case's outputs should be, and whether a provider's outputs are close enough.

onnxruntime is the oracle. Where it cannot run a case (an operator version or type it
lacks) or where it disagrees with edgerun, onnx's ReferenceEvaluator (the spec's own
executable form) decides: a case edgerun gets right by the reference but onnxruntime gets
differently is reported as onnxruntime departing from the spec, not hidden.
"""
from __future__ import annotations

import warnings
from typing import Optional

import numpy as np

from .builder import Case, Tolerance

# Providers whose arithmetic differs more from onnxruntime's (GPU transcendental functions,
# fused multiply-adds, other summation orders) get their tolerances widened by this much.
PROVIDER_TOLERANCE = {"cpu": 1.0, "cpu-plain": 1.0, "wasm": 1.0, "webgpu": 10.0}


def onnxruntime_outputs(case: Case):
    """(outputs, None), or (None, why) when onnxruntime refuses or fails the case."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = onnxruntime.InferenceSession(case.oracle_model or case.model, options,
                                               providers=["CPUExecutionProvider"])
        return session.run(None, case.feeds), None
    except Exception as e:   # noqa: BLE001 - any refusal means: ask the reference
        return None, f"{type(e).__name__}: {str(e)[:300]}"


def reference_outputs(case: Case):
    """(outputs, None) from onnx's ReferenceEvaluator, or (None, why)."""
    from onnx.reference import ReferenceEvaluator

    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            evaluator = ReferenceEvaluator(case.oracle_model or case.model)
            return list(evaluator.run(None, case.feeds)), None
    except Exception as e:   # noqa: BLE001
        return None, f"{type(e).__name__}: {str(e)[:300]}"


def mismatch(got: list, want: list, tolerance: Tolerance, unordered=()) -> Optional[str]:
    """None when `got` matches `want`, else what differs (first differing output)."""
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        why = _array_mismatch(np.asarray(g), np.asarray(w), tolerance, i in unordered)
        if why:
            return f"output {i}: {why}"
    return None


def _array_mismatch(g, w, tolerance: Tolerance, unordered: bool) -> Optional[str]:
    if g.dtype != w.dtype:
        return f"dtype {g.dtype}, expected {w.dtype}"
    if g.shape != w.shape:
        return f"shape {g.shape}, expected {w.shape}"
    if g.size == 0:
        return None
    if unordered:
        g, w = np.sort(g, axis=None), np.sort(w, axis=None)
    if w.dtype.kind not in "fc":
        if w.dtype.kind == "O" or w.dtype.kind in "SU":
            same = [a == b for a, b in zip(g.reshape(-1), w.reshape(-1))]
            return None if all(same) else "strings differ"
        bad = g != w
        if bad.any():
            where = np.argwhere(bad)[0]
            return (f"{int(bad.sum())} of {w.size} values differ; at {tuple(where)}: "
                    f"{g[tuple(where)]!r}, expected {w[tuple(where)]!r}")
        return None
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    nan_g, nan_w = np.isnan(g64), np.isnan(w64)
    if (nan_g != nan_w).any():
        return f"NaN at {tuple(np.argwhere(nan_g != nan_w)[0])} differs"
    inf_w = np.isinf(w64)
    if (g64[inf_w] != w64[inf_w]).any() or (np.isinf(g64) & ~inf_w).any():
        return "infinities differ"
    finite = ~nan_w & ~inf_w
    if not finite.any():
        return None
    error = np.abs(g64 - w64)[finite]
    scale = float(np.max(np.abs(w64[finite])))
    bound = tolerance.atol + tolerance.rtol * np.abs(w64[finite]) + tolerance.scaled * scale
    if (error > bound).any():
        worst = int(np.argmax(error - bound))
        return (f"max abs error {float(error.max()):.3g} (largest |expected| {scale:.3g}); "
                f"{int((error > bound).sum())} of {error.size} values outside "
                f"atol {tolerance.atol:g} + rtol {tolerance.rtol:g} + "
                f"{tolerance.scaled:g} x scale; worst got {g64[finite][worst]:.6g}, "
                f"expected {w64[finite][worst]:.6g}")
    return None
