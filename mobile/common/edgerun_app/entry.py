"""Python entry point of a packed edgerun app (Android via Chaquopy, iOS via Briefcase).

Reads model/edgerun-pack.json next to this file, loads the packed model with edgerun using
the target's providers in priority order (unavailable ones are skipped; the CPU provider
runs the rest), runs it on deterministic sample inputs and returns a printable summary.

    python -m edgerun_app.entry      # prints the same summary (works under desktop CPython)
"""
from __future__ import annotations

import json
import os
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_DIR = os.path.join(HERE, "model")


def load_manifest() -> dict:
    with open(os.path.join(MODEL_DIR, "edgerun-pack.json"), encoding="utf-8") as f:
        return json.load(f)


def sample_inputs(manifest: dict) -> dict:
    """Deterministic values for every model input, from the shapes recorded at pack time."""
    import numpy as np

    rng = np.random.default_rng(0)
    feeds = {}
    for spec in manifest["inputs"]:
        dtype = np.dtype(spec["dtype"])
        shape = spec["shape"]
        if dtype.kind == "f":
            feeds[spec["name"]] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[spec["name"]] = rng.random(shape) < 0.5
        else:
            feeds[spec["name"]] = rng.integers(0, 10, shape).astype(dtype)
    return feeds


def describe(name: str, value) -> str:
    import numpy as np

    value = np.asarray(value)
    text = f"{name}: {value.dtype} {list(value.shape)}"
    if value.size and value.dtype.kind in "biuf":
        flat = value.reshape(-1)
        text += f" first {[round(float(v), 5) for v in flat[:5]]}"
    return text


def run_packed_model() -> str:
    """Load and run the packed model once; a summary the native side shows."""
    import edgerun

    manifest = load_manifest()
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)    # providers absent on this device
        sess = edgerun.InferenceSession(os.path.join(MODEL_DIR, manifest["model"]),
                                        providers=manifest["providers"])
    load_ms = (time.perf_counter() - started) * 1e3
    feeds = sample_inputs(manifest)
    started = time.perf_counter()
    outputs = sess.run(None, feeds)
    run_ms = (time.perf_counter() - started) * 1e3
    lines = [f"edgerun {edgerun.__version__}: {manifest['model']} ({manifest['target']})",
             f"providers: {', '.join(sess.get_providers())}",
             f"load {load_ms:.1f} ms, run {run_ms:.1f} ms"]
    lines += [describe(arg.name, value) for arg, value in zip(sess.get_outputs(), outputs)]
    return "\n".join(lines)


def main() -> None:
    print(run_packed_model())


if __name__ == "__main__":
    main()
