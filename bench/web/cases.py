"""Real-model cases on disk for runners that take no numpy (Pyodide, the numpy-free native
path, onnxruntime-web): each model's path and its feeds as raw little-endian bytes.

    cases = write_cases(["digits_mlp", "silero_vad"], folder)   # -> folder/cases.json
    array = read_output(entry)                                   # a runner's output, as numpy

The feeds are tests/real_models.py's fixed inputs; a case's JSON is
{name, model, feeds: [{name, type, dims, file}]} with onnxruntime-web's type names.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# numpy dtype name <-> onnxruntime-web Tensor type name
WEB_TYPES = {"float32": "float32", "float64": "float64", "int8": "int8", "uint8": "uint8",
             "int16": "int16", "uint16": "uint16", "int32": "int32", "uint32": "uint32",
             "int64": "int64", "uint64": "uint64", "bool": "bool", "float16": "float16"}
NUMPY_TYPES = {web: np.dtype(name) for name, web in WEB_TYPES.items()}


def real_models() -> dict:
    tests = os.path.join(ROOT, "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from real_models import REAL_MODELS
    return REAL_MODELS


def write_cases(names, folder: str, models: dict = None) -> str:
    """Write the named models' feeds under `folder` (from `models`, name -> () -> (path,
    feeds), by default the real-model set); returns the cases.json path."""
    os.makedirs(folder, exist_ok=True)
    models = models or real_models()
    cases = []
    for name in names:
        path, feeds = models[name]()
        items = []
        for i, (feed_name, value) in enumerate(feeds.items()):
            value = np.asarray(value)
            file = os.path.join(folder, f"{name}.{i}.feed")
            with open(file, "wb") as f:
                f.write(np.ascontiguousarray(value).tobytes())
            items.append({"name": feed_name, "type": WEB_TYPES[value.dtype.name],
                          "dims": list(value.shape), "file": file})
        cases.append({"name": name, "model": path, "feeds": items})
    target = os.path.join(folder, "cases.json")
    with open(target, "w") as f:
        json.dump(cases, f, indent=1)
    return target


def read_feeds(case: dict) -> dict:
    return {f["name"]: read_output(f) for f in case["feeds"]}


def read_output(entry: dict) -> np.ndarray:
    """A runner's output entry {type, dims, file} as a numpy array."""
    with open(entry["file"], "rb") as f:
        data = f.read()
    return np.frombuffer(data, NUMPY_TYPES[entry["type"]]).reshape(entry["dims"])


def read_results(folder: str) -> dict:
    """name -> result entry of a runner's folder/results.json."""
    with open(os.path.join(folder, "results.json")) as f:
        return {r["name"]: r for r in json.load(f)}
