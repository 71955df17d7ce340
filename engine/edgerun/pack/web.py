"""`edgerun pack MODEL --target web --out DIR`: a static site that runs the model in the page.

DIR holds the page (mobile/web/: index.html, app.js, README.md), the model, edgerun's
JavaScript API (web/*.js of the checkout) with the engine's wheel at edgerun/dist/edgerun.whl
where the API looks for it (with the checkout's start-up snapshots when its web/dist holds that
very engine: `npm run build`), and Pyodide's core files copied from the `pyodide` npm package
(node_modules/pyodide of the checkout, or EDGERUN_PYODIDE_DIR), so it works offline.

Pyodide offline has no numpy, hence no CPU provider: the page asks for wasm, and the pack
says which nodes (if any) the wasm provider would leave to the CPU.
"""
from __future__ import annotations

import json
import os
import shutil
import zipfile

PROVIDERS = ["wasm"]
JS_DIR = "edgerun"
WHEEL = "edgerun/dist/edgerun.whl"
SNAPSHOT = "edgerun-snapshot.json"     # beside the wheel, where web/runtime.js looks for it
PYODIDE_DIR = "pyodide"
# what loadPyodide() reads from its indexURL (the rest of the npm package is docs and maps)
PYODIDE_FILES = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
                 "pyodide-lock.json"]
# what the wheel must hold for Pyodide (scripts/build_web.py checks the same)
WHEEL_REQUIRED = ["edgerun/web/bridge.py", "edgerun/providers/wasm/host_js.py",
                  "edgerun/providers/wasm/edgerun_kernels.wasm",
                  "edgerun/providers/wasm/edgerun_kernels.json",
                  "edgerun/providers/webgpu/wgsl/snippets.wgsl"]


def checkout_dir(name: str) -> str:
    """A folder of the edgerun checkout this package runs from (web/, node_modules/...)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "..", name))


def pyodide_dir() -> str:
    return os.environ.get("EDGERUN_PYODIDE_DIR") or checkout_dir(os.path.join("node_modules",
                                                                              "pyodide"))


def check_sources(error) -> None:
    """Fail before writing anything when the page's parts are not at hand."""
    web = checkout_dir("web")
    if not os.path.isfile(os.path.join(web, "index.js")):
        raise error(f"edgerun's JavaScript API (web/index.js) is not next to this edgerun "
                    f"(looked in {web}); run edgerun pack from a source checkout")
    folder = pyodide_dir()
    missing = [f for f in PYODIDE_FILES if not os.path.isfile(os.path.join(folder, f))]
    if missing:
        raise error(f"Pyodide's files {missing} are not in {folder}: run `npm ci` in the "
                    f"edgerun checkout, or set EDGERUN_PYODIDE_DIR to a folder holding them")


def browser_placement(model_bytes: bytes, log) -> dict:
    """Where the wasm provider puts each node, run natively (the same kernels as in the
    page); nodes it leaves to the CPU provider cannot run in a numpy-less Pyodide."""
    import warnings

    from .. import InferenceSession, get_available_providers

    if "WasmExecutionProvider" not in get_available_providers():
        log("      the wasm provider is not available here (pip install wasmtime): "
            "placement not checked")
        return {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nodes = InferenceSession(model_bytes, providers=["wasm", "cpu"]).explain()["nodes"]
    counts: dict = {}
    for n in nodes:
        counts[n["provider"]] = counts.get(n["provider"], 0) + 1
    left = [f"{n['node']} ({n['op_type']}: {'; '.join(n['refused_by'])})" for n in nodes
            if n["provider"] != "wasm"]
    if left:
        log(f"      warning: {len(left)} nodes need the CPU provider, which a page without "
            f"numpy lacks: {', '.join(left[:5])}{' ...' if len(left) > 5 else ''}")
    return counts


def copy_page(out: str, fill) -> None:
    """The page template, then edgerun's JavaScript API into out/edgerun/."""
    shutil.copytree(checkout_dir(os.path.join("mobile", "web")), out, dirs_exist_ok=True)
    fill(out)
    web = checkout_dir("web")
    os.makedirs(os.path.join(out, JS_DIR), exist_ok=True)
    for name in sorted(os.listdir(web)):
        if name.endswith((".js", ".d.ts")):
            shutil.copy(os.path.join(web, name), os.path.join(out, JS_DIR, name))


def write_wheel(out: str, error) -> str:
    """The engine's wheel at out/WHEEL (write_engine); returns its path."""
    return write_engine(os.path.join(out, os.path.dirname(WHEEL)), error)


def write_engine(dist: str, error) -> str:
    """The engine's wheel at dist/edgerun.whl, where web/*.js look for it, with the start-up
    snapshots beside it when the checkout's web/dist has them for the same engine
    (ship_snapshots); returns the wheel's path. `error`: the exception type to raise."""
    from .. import __version__
    from .wheel import build_wheel

    os.makedirs(dist, exist_ok=True)
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    built = build_wheel(package_dir, dist, "edgerun", __version__)
    path = os.path.join(dist, os.path.basename(WHEEL))
    os.replace(built, path)
    with zipfile.ZipFile(path) as z:
        missing = [n for n in WHEEL_REQUIRED if n not in z.namelist()]
    if missing:
        raise error(f"the edgerun wheel lacks {missing}, which the page needs (is the wasm "
                    f"module built? python wasm_kernels/build.py)")
    ship_snapshots(path)
    return path


def ship_snapshots(wheel: str) -> None:
    """Put the start-up snapshots (scripts/make_snapshot.mjs) beside `wheel` when the
    checkout's web/dist has them for a wheel holding exactly what `wheel` holds, taking that
    wheel's bytes too (a snapshot is tied to them). Otherwise write a description with no
    snapshot, so the page starts Python from scratch without asking for a missing file."""
    folder = os.path.dirname(wheel)
    built = checkout_dir(os.path.join("web", "dist"))
    description = os.path.join(built, SNAPSHOT)
    if os.path.isfile(description) and _same_contents(wheel, os.path.join(built, "edgerun.whl")):
        with open(description) as f:
            variants = json.load(f)["variants"]
        for name in ["edgerun.whl", SNAPSHOT] + [v["data"] for v in variants.values()]:
            shutil.copyfile(os.path.join(built, name), os.path.join(folder, name))
        return
    with open(os.path.join(folder, SNAPSHOT), "w") as f:
        json.dump({"variants": {}, "why": "no start-up snapshot was built for this engine "
                   "(npm run build in the checkout makes one)"}, f)


def _same_contents(wheel: str, other: str) -> bool:
    """Whether two wheels hold the same engine: the same files with the same bytes (their
    metadata, timestamps and READMEs, which pip and pack.wheel package differently, aside)."""
    if not os.path.isfile(other):
        return False
    def files(z):
        return {i.filename for i in z.infolist() if ".dist-info/" not in i.filename
                and not i.is_dir() and not i.filename.endswith(".md")}

    with zipfile.ZipFile(wheel) as a, zipfile.ZipFile(other) as b:
        names = files(a)
        return names == files(b) and all(a.read(n) == b.read(n) for n in names)


def copy_pyodide(out: str) -> int:
    """Pyodide's core files into out/pyodide/; returns their size in bytes."""
    folder = pyodide_dir()
    target = os.path.join(out, PYODIDE_DIR)
    os.makedirs(target, exist_ok=True)
    for name in PYODIDE_FILES:
        shutil.copy(os.path.join(folder, name), os.path.join(target, name))
    return sum(os.path.getsize(os.path.join(target, n)) for n in PYODIDE_FILES)
