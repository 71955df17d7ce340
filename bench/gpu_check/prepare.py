"""Pack what a real-GPU check needs into .gpu_check/ (git-ignored), on this machine.

A session lent a GPU machine (the `device` tool: no network there, at most 64 MiB carried)
runs `bash bench/gpu_check/run.sh` there with `.gpu_check` carried. This gathers, from the
caches the tests and benchmark fill here:
- wheels: wgpu 0.32.0 (and cffi for each Python, pycparser, rendercanvas), wasmtime (the wasm
  provider the test files run beside the GPU), onnx pinned as the conformance cases are (the
  GPU machine's onnx may differ);
- Debian's Vulkan/GL loaders (the machine has NVIDIA's driver but may lack libvulkan.so.1);
- the benchmark's models, as wheels holding only the members its rows read (ppocr, magika,
  silero), onnx's light-model sources (fill_cache.py randomizes them there, as here), and
  MiniLM-L6's graph without its weights (fill_cache.py draws random ones: timings, not
  accuracy; the parity tests run the real ones here).

    python bench/gpu_check/prepare.py        # then, with the device tool:
    run(command="bash bench/gpu_check/run.sh", carry=[".gpu_check"], timeout_s=480)
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, ".gpu_check")
CACHE = os.environ.get("EDGERUN_CACHE", os.path.expanduser("~/.cache/edgerun"))
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
# wasmtime: the wasm provider, which the test files' page and fallback tests run beside the GPU
WHEELS = ["wgpu==0.32.0", "rendercanvas==2.7.2", "pycparser==3.12", "wasmtime==50.0.1"]
DEBS = ["libvulkan1", "libegl1", "libglvnd0", "libopengl0", "libgl1", "libglx0", "libgles2"]
# wheel stem -> the members the benchmark rows and parity tests read
MODEL_MEMBERS = {
    "rapidocr_onnxruntime-1.4.4": ["rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                                    "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
                                    "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx"],
    "magika-1.0.3": ["magika/models/standard_v3_3/model.onnx"],
    "silero_vad-6.2.3": ["silero_vad/data/*.onnx"],
}
LIGHT_MODELS = ["squeezenet", "shufflenet", "resnet50", "densenet121", "inception_v1"]


def pip_download(spec: str, target: str, python: str = "3.12") -> None:
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
                    *[a for p in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
                                  "manylinux_2_17_x86_64", "manylinux2014_x86_64")
                      for a in ("--platform", p)], "-d", target, spec], check=True)


def python_wheels(target: str) -> None:
    import onnx
    for spec in WHEELS + [f"onnx=={onnx.__version__}"]:
        pip_download(spec, target)
    for python in PYTHONS:
        pip_download("cffi==2.0.0", target, python)


def loaders(target: str) -> None:
    lists = "/tmp/gpu_check_apt_lists"
    os.makedirs(f"{lists}/partial", exist_ok=True)
    options = ["-oAPT::Architecture=amd64", "-oAPT::Architectures=amd64",
               f"-oDir::State::Lists={lists}"]
    subprocess.run(["apt-get", *options, "update"], check=True, capture_output=True)
    subprocess.run(["apt-get", *options, "download", *DEBS], check=True, cwd=target,
                   capture_output=True)


def model_wheels(target: str) -> None:
    import fnmatch
    for stem, patterns in MODEL_MEMBERS.items():
        (source,) = glob.glob(os.path.join(CACHE, "wheels", f"{stem}-*.whl"))
        with zipfile.ZipFile(source) as zin, \
                zipfile.ZipFile(os.path.join(target, os.path.basename(source)), "w",
                                zipfile.ZIP_DEFLATED) as zout:
            for name in zin.namelist():
                if any(fnmatch.fnmatch(name, p) for p in patterns):
                    zout.writestr(name, zin.read(name))


def light_sources(target: str) -> None:
    import onnx
    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    for name in LIGHT_MODELS:
        shutil.copy(os.path.join(light, f"light_{name}.onnx"), target)


def minilm_skeleton(target: str) -> None:
    import numpy as np
    import onnx
    sys.path.insert(0, ROOT)
    from bench.models import export_minilm as ex
    model = onnx.load(ex.ensure_minilm())
    shapes = {}
    for t in model.graph.initializer:
        if t.data_type == onnx.TensorProto.FLOAT and np.prod(t.dims) >= 64:
            shapes[t.name] = list(t.dims)
            t.ClearField("raw_data")
            t.ClearField("float_data")
    onnx.save(model, os.path.join(target, "skeleton.onnx"))
    with open(os.path.join(target, "shapes.json"), "w") as f:
        json.dump(shapes, f)
    for seq in ex.SEQ_LENGTHS:
        shutil.copy(ex.feeds_path(seq), target)


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    steps = [("python wheels", "wheels", python_wheels), ("Vulkan/GL loaders", "debs", loaders),
             ("model wheels", "models", model_wheels), ("light models", "light", light_sources),
             ("MiniLM graph", "minilm", minilm_skeleton)]
    for i, (what, folder, step) in enumerate(steps, 1):
        print(f"[{i}/{len(steps)}] {what} ...", flush=True)
        os.makedirs(os.path.join(OUT, folder))
        step(os.path.join(OUT, folder))
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(OUT) for f in fs)
    print(f"{OUT}: {size / 2**20:.1f} MiB (with the working tree, at most 64 MiB travel)")


if __name__ == "__main__":
    main()
