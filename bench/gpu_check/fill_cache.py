"""On the GPU machine: the cache layout tests/real_models.py and the benchmark read, made
from what prepare.py packed (stub model wheels, light-model sources, MiniLM's graph)."""
from __future__ import annotations

import json
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKED = os.path.join(ROOT, ".gpu_check")


def main() -> None:
    cache = os.environ["EDGERUN_CACHE"]
    os.makedirs(os.path.join(cache, "wheels"), exist_ok=True)
    for name in os.listdir(os.path.join(PACKED, "models")):
        shutil.copy(os.path.join(PACKED, "models", name), os.path.join(cache, "wheels", name))
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import real_models
    real_models.LIGHT_DIR = os.path.join(PACKED, "light")
    for name in sorted(os.listdir(real_models.LIGHT_DIR)):
        print("light model:", real_models.randomized_light_model(name[6:-5]), flush=True)
    target = os.path.join(cache, "models", "minilm_l6")
    os.makedirs(target, exist_ok=True)
    model = onnx.load(os.path.join(PACKED, "minilm", "skeleton.onnx"))
    with open(os.path.join(PACKED, "minilm", "shapes.json")) as f:
        shapes = json.load(f)
    rng = np.random.default_rng(0)
    for t in model.graph.initializer:
        if t.name in shapes:
            weight = (rng.standard_normal(shapes[t.name]) * 0.05).astype(np.float32)
            t.CopyFrom(numpy_helper.from_array(weight, t.name))
    onnx.save(model, os.path.join(target, "model.onnx"))
    for name in os.listdir(os.path.join(PACKED, "minilm")):
        if name.startswith("feeds_"):
            shutil.copy(os.path.join(PACKED, "minilm", name), target)
    print("MiniLM-L6 (its graph, random weights):", os.path.join(target, "model.onnx"))


if __name__ == "__main__":
    main()
