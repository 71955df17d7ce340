"""Where the kernels' .wasm lives and how a stale build is detected.

`edgerun_kernels.json` (written by wasm_kernels/build.py) records the hash of the C sources
and of the module. In a source checkout the sources are hashed again at load: if they moved
on, or the .wasm does not match its stamp, loading fails naming the rebuild command.
Installed packages carry no sources, so only the module's own hash is checked there.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
WASM_PATH = os.path.join(HERE, "edgerun_kernels.wasm")
STAMP_PATH = os.path.join(HERE, "edgerun_kernels.json")
SOURCES_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "wasm_kernels"))
REBUILD = "python wasm_kernels/build.py (needs pip install ziglang==0.17.1)"


class StaleBuild(RuntimeError):
    """The .wasm is missing or does not match the kernel sources."""


def sources_hash(folder: str = SOURCES_DIR) -> str:
    h = hashlib.sha256()
    names = sorted(glob.glob(os.path.join(folder, "*.c")) + glob.glob(os.path.join(folder, "*.h"))
                   + [os.path.join(folder, "build.py")])
    for path in names:
        with open(path, "rb") as f:
            h.update(os.path.basename(path).encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


def load_module_bytes(wasm_path: str = WASM_PATH, stamp_path: str = STAMP_PATH,
                      sources_dir: str = SOURCES_DIR) -> bytes:
    """The kernels' .wasm bytes, after checking they are the build of the current sources."""
    if not os.path.exists(wasm_path) or not os.path.exists(stamp_path):
        raise StaleBuild(f"the wasm kernels are not built ({wasm_path} or its stamp is "
                         f"missing): run {REBUILD}")
    with open(wasm_path, "rb") as f:
        data = f.read()
    with open(stamp_path) as f:
        stamp = json.load(f)
    if hashlib.sha256(data).hexdigest() != stamp.get("wasm_sha256"):
        raise StaleBuild(f"{os.path.basename(wasm_path)} does not match its stamp "
                         f"{os.path.basename(stamp_path)}: run {REBUILD}")
    if os.path.isdir(sources_dir) and os.path.exists(os.path.join(sources_dir, "build.py")):
        if sources_hash(sources_dir) != stamp.get("sources_sha256"):
            raise StaleBuild(f"the wasm kernels are stale: the sources in {sources_dir} changed "
                             f"since {os.path.basename(wasm_path)} was built: run {REBUILD}")
    return data
