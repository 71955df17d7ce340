"""Build the web package's payload: the pure-Python edgerun wheel into web/dist/edgerun.whl,
and report what a browser downloads from edgerun itself (JS + wheel; Pyodide excluded).

The build fails if the wheel lacks what Pyodide needs at run time: the wasm provider's JS
host, the kernels' .wasm with its stamp, and the WGSL kernels (package data in
pyproject.toml). It builds from a copy of the sources in a temporary folder, so setuptools'
build/ folder in the checkout (where modules deleted from the sources would linger) is
neither read nor shared.
"""
import glob
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


def check_wheel(path: str) -> int:
    """Fail naming what the wheel lacks; returns the kernels' size in bytes."""
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        missing = [n for n in REQUIRED if n not in names]
        if missing:
            raise SystemExit(f"{path} lacks {missing}: check [tool.setuptools.package-data] "
                             f"in pyproject.toml")
        return z.getinfo(KERNELS).file_size


def main():
    dist = os.path.join(ROOT, "web", "dist")
    os.makedirs(dist, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        shutil.copytree(os.path.join(ROOT, "engine"), os.path.join(src, "engine"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
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
    payload = [os.path.join(dist, "edgerun.whl")] + glob.glob(os.path.join(ROOT, "web", "*.js"))
    total = sum(os.path.getsize(p) for p in payload)
    for p in payload:
        print(f"  {os.path.relpath(p, ROOT):32s} {os.path.getsize(p) / 1024:8.1f} KiB")
    print(f"  (in the wheel: the wasm kernels, {kernels / 1024:.1f} KiB)")
    print(f"edgerun web payload (excluding Pyodide): {total / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
