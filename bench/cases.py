"""The benchmark's model set: tests/real_models.py's REAL_MODELS (the parity-tested models with
their fixed feeds), MiniLM-L6 at sequence lengths 16 and 128 (and at 16 as onnxruntime's tools
make it float16 and int8: bench/models/minilm_variants.py), ppocr cls as onnxruntime's
quantizers make it (QDQ and dynamic: bench/models/quantized_variants.py), and
bench/models/wheel_models.py's
WHEEL_MODELS (more real models from public PyPI wheels and scikit-learn models, at batch 1 and
at the batch their package runs).

A case is `name -> () -> (model path, feeds)`; it raises `Skip` (with what to install) when it
cannot be prepared here.
"""
from __future__ import annotations

import fnmatch
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS_DIR = os.path.join(ROOT, "tests")


class Skip(Exception):
    """The case cannot run here; the message says why and what to install."""


def _real_models() -> dict:
    if TESTS_DIR not in sys.path:
        sys.path.insert(0, TESTS_DIR)
    from real_models import REAL_MODELS
    return REAL_MODELS


def _minilm(seq: int):
    def load():
        import numpy as np

        from bench.models import export_minilm as ex
        if not ex.is_cached():
            missing = ex.missing_tools()
            if missing:
                raise Skip(f"{', '.join(missing)} not installed; to export MiniLM: {ex.INSTALL}")
            # a subprocess keeps torch out of the runner's memory
            done = subprocess.run([sys.executable, "-m", "bench.models.export_minilm"], cwd=ROOT,
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError("exporting MiniLM failed: " + done.stderr.strip()[-800:])
        with np.load(ex.feeds_path(seq)) as data:
            feeds = {k: data[k] for k in data.files}
        return ex.MODEL_PATH, feeds
    return load


def _minilm_variant(kind: str, seq: int):
    """MiniLM-L6 through onnxruntime's float16 converter or dynamic quantizer."""
    def load():
        from bench.models.minilm_variants import variant_path

        _, feeds = _minilm(seq)()                  # exports the float32 model if needed
        return variant_path(kind), feeds
    return load


def _quantized(model: str, kind: str):
    """A real model through onnxruntime's quantize_static (QDQ) or quantize_dynamic."""
    def load():
        _real_models()                             # tests/ on sys.path
        from bench.models.quantized_variants import quantized
        return quantized(model, kind)
    return load


QUANTIZED = {**{f"{model}_{kind}": _quantized(model, kind)
                for model in ("ppocr_mobile_cls", "light_squeezenet", "light_resnet50")
                for kind in ("qdq", "dynamic")},
             "ddddocr_det_qdq_batch1": _quantized("ddddocr_det_batch1", "qdq")}   # YOLOX


def _wheel_models() -> dict:
    _real_models()                                 # tests/ on sys.path
    from bench.models.wheel_models import WHEEL_MODELS
    return WHEEL_MODELS


def all_cases() -> dict:
    return {**_real_models(), "minilm_l6_seq16": _minilm(16), "minilm_l6_seq128": _minilm(128),
            "minilm_l6_fp16_seq16": _minilm_variant("fp16", 16),
            "minilm_l6_int8_seq16": _minilm_variant("int8", 16),
            "minilm_l6_int8_ortopt_seq16": _minilm_variant("int8_ort_optimized", 16), **QUANTIZED, **_wheel_models()}


def select(patterns: str | None) -> dict:
    """Cases whose names match any of the comma-separated fnmatch patterns (all when None)."""
    cases = all_cases()
    if not patterns:
        return cases
    wanted = [p.strip() for p in patterns.split(",") if p.strip()]
    for p in wanted:
        if not any(fnmatch.fnmatchcase(name, p) for name in cases):
            raise SystemExit(f"bench: no model matches '{p}'; models: {', '.join(cases)}")
    return {name: load for name, load in cases.items()
            if any(fnmatch.fnmatchcase(name, p) for p in wanted)}
