"""`edgerun pack MODEL --target android|ios|web --out DIR`: a ready-to-build app folder, or
for web a static site that runs the model in the page (see web.py).

Steps (each printed as it runs):
1. load the model and optimize it (edgerun.optimizer), saved in edgerun's own ONNX spelling;
2. run it once with the CPU provider on sample inputs (the pack must work before it ships);
3. copy the app template from mobile/<target>/ and the shared Python entry point from
   mobile/common/, filling the {{...}} placeholders;
4. write the edgerun wheel (pure Python, requires numpy only) where the app installs it;
5. iOS: pre-lower the model's CoreML partitions to ML Program .mlpackages (coremltools);
6. write edgerun-pack.json (model, inputs with fixed shapes, providers, artifacts).

The web target: steps 1-2, then where the wasm provider places the nodes, the page and
edgerun's JavaScript API, the wheel, Pyodide's files, and edgerun-pack.json at the top.

Symbolic input dimensions become 1 unless `input_shapes` (--input-shape name=1,3,224,224)
fixes them: phone runtimes want static shapes.
"""
from __future__ import annotations

from typing import Optional

import html
import json
import os
import re
import shutil
import sys
import tempfile

from ..errors import EdgerunError

TARGETS = {
    # target -> (folder of the app's Python sources, folder of the wheel, providers)
    "android": ("app/src/main/python", "app/wheels", ["nnapi", "cpu"]),
    "ios": ("src", "wheels", ["coreml", "cpu"]),
}
TEXT_SUFFIXES = (".kts", ".gradle", ".properties", ".xml", ".kt", ".java", ".md", ".toml",
                 ".py", ".swift", ".txt", ".json", ".html", ".js")
MODEL_FILE = "model.onnx"
MANIFEST = "edgerun-pack.json"


class PackError(EdgerunError):
    """`edgerun pack` cannot make the folder asked for (the message says why)."""


def templates_dir() -> str:
    """mobile/ of the edgerun checkout this package runs from."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.normpath(os.path.join(here, "..", "..", "..", "mobile"))
    if not os.path.isdir(os.path.join(path, "common")):
        raise PackError(f"the app templates (mobile/) are not next to this edgerun "
                        f"(looked in {path}); run edgerun pack from a source checkout")
    return path


def pack(model_path: str, target: str, out: str, force: bool = False,
         input_shapes: Optional[dict] = None, log=None) -> dict:
    """Write the app folder `out` for `target`; returns the manifest written.

    Everything is written into a fresh folder beside `out` and moved there at the end, so a
    failure leaves nothing behind and nothing else is touched; `force` replaces only an
    earlier pack (a folder holding edgerun-pack.json), never the model's own folder or the
    current one."""
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    _check_target(target)
    if target == "web":
        from . import web
        web.check_sources(PackError)
    staging = _staging_folder(out, force, model_path)
    try:
        if target == "web":
            manifest = _pack_web(model_path, staging, input_shapes or {}, log)
        else:
            manifest = _pack_app(model_path, target, staging, input_shapes or {}, log)
        _publish(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)      # never leave half a pack behind
        raise
    if target == "web":
        log(f"packed {model_path} for web into {out}; serve it with "
            f"`python -m edgerun.web.serve {out}` and open http://127.0.0.1:8000/")
    else:
        log(f"packed {model_path} for {target} into {out}")
    return manifest


def _pack_app(model_path: str, target: str, out: str, input_shapes: dict, log) -> dict:
    python_dir, wheel_dir, providers = TARGETS[target]
    steps = 6 if target == "ios" else 5
    step = _Progress(log, steps)
    step(f"loading and optimizing {model_path}")
    model, optimized = _load_optimized(model_path)
    step("checking the model runs with edgerun (CPU provider, sample inputs)")
    inputs, outputs = _check_runs(model, input_shapes)
    step(f"copying the {target} app template")
    _copy_template(target, out, python_dir, os.path.basename(model_path))
    model_dir = os.path.join(out, python_dir, "edgerun_app", "model")
    os.makedirs(model_dir, exist_ok=True)
    _save_model(model, os.path.join(model_dir, MODEL_FILE))
    step("writing the edgerun wheel")
    wheel = _write_wheel(os.path.join(out, wheel_dir))
    _fill_placeholders(out, {"EDGERUN_WHEEL": os.path.basename(wheel)})
    coreml = []
    if target == "ios":
        step("pre-lowering CoreML partitions to ML Programs")
        coreml = _prelower_coreml(model, inputs, os.path.join(model_dir, "coreml"), log)
    step("writing edgerun-pack.json")
    manifest = {"target": target, "model": MODEL_FILE, "source_model":
                os.path.basename(model_path), "optimized": optimized,
                "providers": providers, "inputs": inputs, "outputs": outputs,
                "edgerun_wheel": os.path.relpath(wheel, out), "coreml": coreml,
                "edgerun_version": _version()}
    with open(os.path.join(model_dir, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
    return manifest


def _pack_web(model_path: str, out: str, input_shapes: dict, log) -> dict:
    from . import web
    from ..onnx.writer import model_to_bytes

    step = _Progress(log, 7)
    step(f"loading and optimizing {model_path}")
    model, optimized = _load_optimized(model_path)
    step("checking the model runs with edgerun (CPU provider, sample inputs)")
    inputs, outputs = _check_runs(model, input_shapes)
    step("checking where the wasm provider places the nodes (the page has no numpy)")
    placement = web.browser_placement(model_to_bytes(model), log)
    step("writing the page, the model and edgerun's JavaScript API")
    web.copy_page(out, lambda folder: _fill_placeholders(folder, {
        "APP_NAME": _app_name(model_path), "MODEL_NAME": os.path.basename(model_path),
        "EDGERUN_VERSION": _version()}))
    _save_model(model, os.path.join(out, MODEL_FILE))
    step("writing the edgerun wheel")
    wheel = web.write_wheel(out, PackError)
    step("copying Pyodide (from the pyodide npm package)")
    size = web.copy_pyodide(out)
    log(f"      {size / 2**20:.1f} MiB of Pyodide, {os.path.getsize(wheel) / 1024:.0f} KiB "
        f"of edgerun")
    step("writing edgerun-pack.json")
    manifest = {"target": "web", "model": MODEL_FILE,
                "source_model": os.path.basename(model_path), "optimized": optimized,
                "providers": web.PROVIDERS, "inputs": inputs, "outputs": outputs,
                "placement": placement, "edgerun_wheel": web.WHEEL,
                "pyodide": web.PYODIDE_DIR, "edgerun_version": _version()}
    with open(os.path.join(out, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
    return manifest


class _Progress:
    def __init__(self, log, total: int):
        self.log, self.total, self.done = log, total, 0

    def __call__(self, text: str) -> None:
        self.done += 1
        self.log(f"[{self.done}/{self.total}] {text}")


def _check_target(target: str) -> None:
    if target not in TARGETS and target != "web":
        raise PackError(f"unknown target '{target}'; expected android, ios or web")


def _staging_folder(out: str, force: bool, model_path: str) -> str:
    """A fresh folder beside `out` to write the pack into, after checking that `out` may
    be (re)placed: never a folder holding the model or the current folder, and with
    `force` only an earlier pack."""
    target = os.path.realpath(out)
    model = os.path.realpath(model_path)
    here = os.path.realpath(os.getcwd())
    if _inside(model, target):
        raise PackError(f"--out '{out}' holds the model {model_path}: choose a new folder "
                        f"for the pack")
    if _inside(here, target):
        raise PackError(f"--out '{out}' is the current folder or holds it: choose a new "
                        f"folder for the pack")
    if os.path.lexists(out) and (not os.path.isdir(out) or os.listdir(out)):
        if not force:
            raise PackError(f"output folder '{out}' already exists and is not empty; "
                            f"pass --force to replace it")
        if not _is_pack(out):
            raise PackError(f"--force replaces only a folder edgerun pack wrote (one holding "
                            f"{MANIFEST}); '{out}' is not one, so it is left as it is")
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    return tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.partial-", dir=parent)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _is_pack(folder: str) -> bool:
    """Whether `folder` is a pack edgerun wrote (its manifest is in it)."""
    if not os.path.isdir(folder) or os.path.islink(folder):
        return False
    return any(MANIFEST in names for _, _, names in os.walk(folder))


def _publish(staging: str, out: str) -> None:
    """Move the finished pack to `out`, replacing what _staging_folder allowed."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(staging, 0o777 & ~mask)        # mkdtemp's folder is private to its owner
    if os.path.isdir(out) and not os.path.islink(out):
        shutil.rmtree(out)
    elif os.path.lexists(out):
        os.remove(out)
    os.replace(staging, out)


def _version() -> str:
    from .. import __version__
    return __version__


# ---- the model ----------------------------------------------------------------------------

def _load_optimized(model_path: str):
    from ..onnx import load_model

    if not os.path.isfile(model_path):
        raise PackError(f"model '{model_path}' does not exist")
    model = load_model(model_path)
    try:
        from ..optimizer import optimize
    except ImportError:
        return model, False
    from ..ir.inline_functions import inline_functions
    from ..providers.registry import constant_evaluator
    inline_functions(model)
    optimize(model, evaluate=constant_evaluator())
    return model, True


def _save_model(model, path: str) -> None:
    """edgerun's own spelling: fused com.edgerun operators stay as they are (the app runs
    edgerun, so it needs no onnxruntime rewrite)."""
    from ..onnx.writer import save_model
    save_model(model, path)


def _input_specs(model, input_shapes: dict) -> list:
    from ..ir import dtypes

    init = set(model.graph.initializers)
    declared = [v for v in model.graph.inputs if v.name not in init]
    unknown = set(input_shapes) - {v.name for v in declared}
    if unknown:
        raise PackError(f"--input-shape names {sorted(unknown)}, which are not model inputs "
                        f"({[v.name for v in declared]})")
    specs = []
    for v in declared:
        t = v.type
        if t is None or t.kind != "tensor" or not t.elem_type:
            raise PackError(f"input '{v.name}' is not a typed tensor; packs take tensor inputs")
        shape = input_shapes.get(v.name)
        if shape is None:
            shape = [d if isinstance(d, int) and d > 0 else 1 for d in (t.shape or ())]
        if t.shape is not None and len(shape) != len(t.shape):
            raise PackError(f"--input-shape {v.name} has rank {len(shape)}, the model "
                            f"declares rank {len(t.shape)}")
        specs.append({"name": v.name, "dtype": str(dtypes.numpy_dtype(t.elem_type)),
                      "shape": [int(d) for d in shape]})
    return specs


def _check_runs(model, input_shapes: dict):
    from .. import InferenceSession
    from ..onnx.writer import model_to_bytes

    inputs = _input_specs(model, input_shapes)
    feeds = _sample_feeds(inputs)
    sess = InferenceSession(model_to_bytes(model), providers=["cpu"])
    values = sess.run(None, feeds)
    outputs = [{"name": arg.name, "dtype": str(v.dtype), "shape": list(v.shape)}
               for arg, v in zip(sess.get_outputs(), values)]
    return inputs, outputs


def _sample_feeds(inputs: list) -> dict:
    import numpy as np

    rng = np.random.default_rng(0)
    feeds = {}
    for spec in inputs:
        dtype = np.dtype(spec["dtype"])
        if dtype.kind == "f":
            feeds[spec["name"]] = rng.standard_normal(spec["shape"]).astype(dtype)
        elif dtype.kind == "b":
            feeds[spec["name"]] = rng.random(spec["shape"]) < 0.5
        else:
            feeds[spec["name"]] = rng.integers(0, 10, spec["shape"]).astype(dtype)
    return feeds


# ---- template, wheel, CoreML ----------------------------------------------------------------

def _copy_template(target: str, out: str, python_dir: str, model_name: str) -> None:
    source = templates_dir()
    shutil.copytree(os.path.join(source, target), out, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(os.path.join(source, "common", "edgerun_app"),
                    os.path.join(out, python_dir, "edgerun_app"), dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    _fill_placeholders(out, {"APP_NAME": _app_name(model_name),
                             "MODEL_NAME": model_name, "EDGERUN_VERSION": _version()})


def _app_name(model_path: str) -> str:
    name = "".join(c for c in os.path.splitext(os.path.basename(model_path))[0].title()
                   if c.isalnum())
    return f"{name or 'Model'}Edgerun"


def _fill_placeholders(out: str, values: dict) -> None:
    """Replace {{KEY}} in every text file, in one pass (a value holding "{{...}}" stays as it
    is), each value escaped for the kind of file it lands in (a model named
    `<img src=x onerror=alert(1)>.onnx` is text in the page, not markup)."""
    pattern = re.compile(r"\{\{(" + "|".join(map(re.escape, values)) + r")\}\}")
    for folder, _, names in os.walk(out):
        for name in names:
            if not name.endswith(TEXT_SUFFIXES):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            escape = _escaper(name)
            filled = pattern.sub(lambda m: escape(str(values[m.group(1)])), text)
            if filled != text:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(filled)


def _escaper(file_name: str):
    """How a value is written into a file of this kind: markup escaped in HTML, XML and
    Markdown; elsewhere it lands inside a double-quoted string literal (Kotlin, Swift,
    Python, TOML, JSON, JS), so backslashes, quotes and line breaks are escaped, and `$`
    in Kotlin (its string templates)."""
    if file_name.endswith((".html", ".xml", ".md")):
        return lambda v: html.escape(v, quote=True).replace("`", "&#96;")
    if file_name.endswith((".json", ".js")):
        return lambda v: json.dumps(v)[1:-1]
    kotlin = file_name.endswith((".kt", ".kts", ".java", ".gradle"))
    return lambda v: _quoted(v).replace("$", "\\$") if kotlin else _quoted(v)


def _quoted(value: str) -> str:
    return (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
            .replace("\r", "\\r"))


def _write_wheel(wheel_dir: str) -> str:
    from .wheel import build_wheel

    os.makedirs(wheel_dir, exist_ok=True)
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return build_wheel(package_dir, wheel_dir, "edgerun", _version())


def _prelower_coreml(model, inputs: list, folder: str, log) -> list:
    """Lower, convert, save and validate each CoreML partition for the packed input shapes.
    Without coremltools the pack still works (CPU on device) and says what is missing."""
    try:
        import coremltools  # noqa: F401
    except ImportError:
        log("      coremltools is not installed: no .mlpackage written "
            "(pip install coremltools==9.0)")
        return []
    import warnings

    from .. import InferenceSession
    from ..onnx.writer import model_to_bytes
    from ..providers.coreml.provider import CoreMLProvider

    with tempfile.TemporaryDirectory() as staging:
        provider = CoreMLProvider({"runner": "export", "cache_dir": staging})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            sess = InferenceSession(model_to_bytes(model), providers=[provider, "cpu"])
            sess.run(None, _sample_feeds(inputs))
        for w in caught:
            log(f"      {w.message}")
        os.makedirs(folder, exist_ok=True)
        artifacts = []
        for record in provider.partitions:
            if "mlpackage" not in record:
                continue
            name = os.path.basename(record["mlpackage"])
            shutil.copytree(record["mlpackage"], os.path.join(folder, name))
            artifacts.append({"partition": record["partition"], "mlpackage": f"coreml/{name}",
                              "nodes": record["nodes"],
                              "inputs": {k: {"shape": list(s), "dtype": str(d)}
                                         for k, (s, d) in record["inputs"].items()},
                              "specification_version": record["specification_version"]})
            log(f"      {name}: {record['nodes']} nodes")
    return artifacts
