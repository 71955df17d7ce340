"""Build the web package's payload: the pure-Python edgerun wheel into web/dist/edgerun.whl,
the start-up snapshot beside it (scripts/make_snapshot.mjs, with node_modules/pyodide: run
`npm ci` first), and report what a browser downloads from edgerun itself (JS + wheel +
snapshot; Pyodide excluded).

`python scripts/build_web.py --check` exits 1 when web/dist was built from other engine
sources than the checkout's (`python -m bench.web` rebuilds then: a stale wheel measures old
kernels). The build fails if the wheel lacks what Pyodide needs at run time: the wasm provider's JS
host, the kernels' .wasm with its stamp, and the WGSL kernels (package data in
pyproject.toml). It builds from a copy of the sources in a temporary folder, so setuptools'
build/ folder in the checkout (where modules deleted from the sources would linger) is
neither read nor shared.
"""
import base64
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "engine"))
# the same list `edgerun pack --target web` checks
from edgerun.pack.web import WHEEL_REQUIRED as REQUIRED  # noqa: E402

KERNELS = "edgerun/providers/wasm/edgerun_kernels.wasm"
SOURCES_STAMP = "edgerun-sources.sha256"      # in web/dist: the engine sources it was built from


def engine_sources_hash(engine: str = os.path.join(ROOT, "engine", "edgerun")) -> str:
    """sha256 over every file of the engine package (relative path and bytes), caches and
    build leftovers aside: what the wheel is built from."""
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(engine)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.endswith(".egg-info"))
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, engine).replace(os.sep, "/").encode() + b"\0")
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


def is_current(dist: str = os.path.join(ROOT, "web", "dist")) -> bool:
    """Whether web/dist holds a wheel built from the checkout's engine sources."""
    try:
        with open(os.path.join(dist, SOURCES_STAMP)) as f:
            built_from = f.read().strip()
    except OSError:
        return False
    return os.path.exists(os.path.join(dist, "edgerun.whl")) and \
        built_from == engine_sources_hash()


def check_wheel(path: str) -> int:
    """Fail naming what the wheel lacks; returns the kernels' size in bytes."""
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        missing = [n for n in REQUIRED if n not in names]
        if missing:
            raise SystemExit(f"{path} lacks {missing}: check [tool.setuptools.package-data] "
                             f"in pyproject.toml")
        return z.getinfo(KERNELS).file_size


def make_snapshot(wheel: str, dist: str) -> list:
    """The start-up snapshots of `wheel`, made with the Pyodide the npm package pins, and
    edgerun-snapshot.json describing them: {pyodide, wheel_sha256, variants: {plain: {data,
    data_sha256, bytes}, jspi: {...}}}. "plain" is made in Node (make_snapshot.mjs), "jspi"
    in headless Chromium (make_snapshot.html): without Chromium and Playwright it is left out
    (an error in CI), and JSPI engines then start Python from scratch. Snapshot files of an
    earlier build that this one did not make are removed. Returns the data files' names."""
    if not os.path.isdir(os.path.join(ROOT, "node_modules", "pyodide")):
        raise SystemExit("node_modules/pyodide is missing: run `npm ci` first (the start-up "
                         "snapshot is made with the Pyodide the npm package pins)")
    made = subprocess.run(["node", os.path.join(ROOT, "scripts", "make_snapshot.mjs"), wheel,
                           dist], cwd=ROOT, capture_output=True, text=True)
    if made.returncode:
        raise SystemExit(f"making the plain start-up snapshot failed:\n{made.stderr}")
    sys.stderr.write(made.stderr)
    plain = json.loads(made.stdout)
    common = {key: plain.pop(key) for key in ("pyodide", "wheel_sha256")}
    variants = {"plain": plain}
    jspi = make_jspi_snapshot(wheel, dist, common["pyodide"])
    if jspi:
        variants["jspi"] = jspi
    with open(os.path.join(dist, "edgerun-snapshot.json"), "w") as f:
        json.dump({**common, "variants": variants}, f, indent=1)
        f.write("\n")
    files = [v["data"] for v in variants.values()]
    for stale in glob.glob(os.path.join(dist, "edgerun-snapshot-*.bin.gz")):
        if os.path.basename(stale) not in files:
            os.remove(stale)
    return files


def make_jspi_snapshot(wheel: str, dist: str, pyodide_version: str):
    """The jspi variant, made in headless Chromium; its description, or None (with a
    warning) where Chromium or Playwright is missing."""
    chromium = os.environ.get("EDGERUN_CHROMIUM", "/usr/bin/chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if sync_playwright is None or not os.path.exists(chromium):
        why = ("the jspi start-up snapshot needs Chromium and Playwright (apt-get install -y "
               "chromium; pip install playwright)")
        if os.environ.get("CI"):
            raise SystemExit(why)
        print(f"  warning: {why}: without it, JSPI engines (Chromium) start Python from "
              "scratch", file=sys.stderr)
        return None
    from edgerun.web.serve import serve

    server, url = serve(ROOT)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True,
                                        args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(f"{url}/scripts/make_snapshot.html?wheel=/"
                      f"{os.path.relpath(wheel, ROOT).replace(os.sep, '/')}")
            page.wait_for_function("window.result !== undefined", timeout=300_000)
            result = page.evaluate("window.result")
            browser.close()
    finally:
        server.shutdown()
    if "error" in result:
        raise SystemExit(f"making the jspi start-up snapshot in Chromium failed:\n{result['error']}")
    if result["pyodide"] != pyodide_version:
        raise SystemExit(f"Chromium loaded Pyodide {result['pyodide']}, Node {pyodide_version}")
    packed = base64.b64decode(result["packed"])
    data = "edgerun-snapshot-jspi.bin.gz"
    partial = os.path.join(dist, f".{data}.{os.getpid()}")
    with open(partial, "wb") as f:
        f.write(packed)
    os.replace(partial, os.path.join(dist, data))
    print(f"  start-up snapshot (jspi, in Chromium): {result['bytes'] / 1e6:.1f} MB of memory, "
          f"{len(packed) / 1e6:.1f} MB gzipped", file=sys.stderr)
    return {"data": data, "data_sha256": hashlib.sha256(packed).hexdigest(),
            "bytes": result["bytes"]}


def main():
    dist = os.path.join(ROOT, "web", "dist")
    if sys.argv[1:] == ["--check"]:
        current = is_current(dist)
        print("web/dist is current" if current else
              "web/dist was built from other engine sources: python scripts/build_web.py")
        raise SystemExit(0 if current else 1)
    os.makedirs(dist, exist_ok=True)
    sources = engine_sources_hash()
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        # native libraries are per platform; a page loads none (Pyodide would try to)
        shutil.copytree(os.path.join(ROOT, "engine"), os.path.join(src, "engine"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.so"))
        for name in ("pyproject.toml", "README.md"):
            shutil.copy(os.path.join(ROOT, name), src)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                        "--disable-pip-version-check", "-w", tmp, src], check=True)
        (wheel,) = glob.glob(os.path.join(tmp, "edgerun-*.whl"))
        partial = os.path.join(dist, f".edgerun.whl.{os.getpid()}")
        shutil.copy(wheel, partial)
        check_wheel(partial)
        os.replace(partial, os.path.join(dist, "edgerun.whl"))   # atomic: readers never see half
    kernels = check_wheel(os.path.join(dist, "edgerun.whl"))
    snapshots = make_snapshot(os.path.join(dist, "edgerun.whl"), dist)
    payload = ([os.path.join(dist, n) for n in ["edgerun.whl", "edgerun-snapshot.json"] + snapshots]
               + glob.glob(os.path.join(ROOT, "web", "*.js")))
    total = sum(os.path.getsize(p) for p in payload)
    for p in payload:
        print(f"  {os.path.relpath(p, ROOT):32s} {os.path.getsize(p) / 1024:8.1f} KiB")
    print(f"  (in the wheel: the wasm kernels, {kernels / 1024:.1f} KiB)")
    print(f"edgerun web payload (excluding Pyodide): {total / 1024:.1f} KiB")
    with open(os.path.join(dist, SOURCES_STAMP), "w") as f:
        f.write(sources + "\n")


if __name__ == "__main__":
    main()
