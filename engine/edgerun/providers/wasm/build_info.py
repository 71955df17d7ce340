"""Where the kernels' .wasm lives and how a stale build is detected.

`edgerun_kernels.json` (written by wasm_kernels/build.py) records the hash of the C sources
and of the module. In a source checkout the sources are hashed again at load: if they moved
on, or the .wasm does not match its stamp, loading fails naming the rebuild command.
Installed packages carry no sources, so only the module's own hash is checked there. The
files are read as package data, so the engine also runs from its wheel as a zip on sys.path
(how a page's Pyodide imports it).
"""
from __future__ import annotations

from typing import Optional

import functools
import hashlib
import importlib.resources
import json
import os

from .. import kernel_sources

HERE = os.path.dirname(os.path.abspath(__file__))
WASM_PATH = os.path.join(HERE, "edgerun_kernels.wasm")
STAMP_PATH = os.path.join(HERE, "edgerun_kernels.json")
SOURCES_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "wasm_kernels"))
REBUILD = "python wasm_kernels/build.py (needs pip install ziglang==0.17.1)"


class StaleBuild(RuntimeError):
    """The .wasm is missing or does not match the kernel sources."""


def sources_hash(folder: str = SOURCES_DIR) -> str:
    return kernel_sources.sources_hash(folder)


def load_module_bytes(wasm_path: Optional[str] = None, stamp_path: Optional[str] = None,
                      sources_dir: str = SOURCES_DIR) -> bytes:
    """The kernels' .wasm bytes, after checking they are the build of the current sources.
    Without paths, the package's own files (from a folder or a zipped wheel)."""
    if (wasm_path, stamp_path, sources_dir) != (None, None, SOURCES_DIR):
        return _checked_module_bytes(wasm_path or WASM_PATH, stamp_path or STAMP_PATH,
                                     sources_dir)
    return _packaged_module_bytes()


@functools.cache
def _packaged_module_bytes() -> bytes:
    """The package's own module, read and checked once per process."""
    return _checked_module_bytes(WASM_PATH, STAMP_PATH, SOURCES_DIR)


def _checked_module_bytes(wasm_path: str, stamp_path: str, sources_dir: str) -> bytes:
    data, stamp = _read(wasm_path, stamp_path)
    stamp = json.loads(stamp)
    if hashlib.sha256(data).hexdigest() != stamp.get("wasm_sha256"):
        raise StaleBuild(f"{os.path.basename(wasm_path)} does not match its stamp "
                         f"{os.path.basename(stamp_path)}: run {REBUILD}")
    if os.path.isdir(sources_dir) and os.path.exists(os.path.join(sources_dir, "build.py")):
        if sources_hash(sources_dir) != stamp.get("sources_sha256"):
            raise StaleBuild(f"the wasm kernels are stale: the sources in {sources_dir} changed "
                             f"since {os.path.basename(wasm_path)} was built: run {REBUILD}")
    return data


def _read(wasm_path: str, stamp_path: str) -> tuple:
    """The bytes of the module and of its stamp: package data when they are the package's
    own (a zip on sys.path has no files to open), else the files named."""
    package = importlib.resources.files(__package__)
    try:
        if (wasm_path, stamp_path) == (WASM_PATH, STAMP_PATH):
            return ((package / os.path.basename(WASM_PATH)).read_bytes(),
                    (package / os.path.basename(STAMP_PATH)).read_bytes())
        with open(wasm_path, "rb") as f, open(stamp_path, "rb") as g:
            return f.read(), g.read()
    except OSError as e:
        raise StaleBuild(f"the wasm kernels are not built ({wasm_path} or its stamp is "
                         f"missing: {e}): run {REBUILD}") from e
