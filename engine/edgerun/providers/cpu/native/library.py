"""The native kernels' shared library: which file serves this platform, whether it is the
build of the current sources, and its functions through ctypes.

cpu_kernels/build.py writes one library per platform and `edgerun_cpu.json`: the hash of the
sources it was built from and of each library. In a source checkout the sources are hashed
again at load, and a stale library is not loaded (a warning names the rebuild command);
installed packages carry no sources, so only the library's own hash is checked there. No
library for this platform (another OS or architecture, Pyodide), EDGERUN_NATIVE=0, or a
library that fails to load: `library()` is None, the kernels keep their numpy paths, and
`status()` says why.
"""
from __future__ import annotations

from typing import Optional

import ctypes
import functools
import hashlib
import json
import os
import platform
import sys
import warnings

from ... import kernel_sources

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY_DIR = HERE
STAMP_PATH = os.path.join(HERE, "edgerun_cpu.json")
SOURCES_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "..", "cpu_kernels"))
REBUILD = "python cpu_kernels/build.py (needs pip install ziglang==0.17.1)"

_P, _I64, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
# exported function -> (result type, argument types)
SIGNATURES = {
    "er_cpu_qgemm_isa": (_INT, [_INT]),
    "er_cpu_qgemm_packed_size": (_I64, [_I64, _I64]),
    "er_cpu_qgemm_pack_b": (None, [_P, _I64, _I64, _I64, _INT, _P, _P]),
    "er_cpu_qgemm": (_INT, [_P, _I64, _I64, _I64, _INT, _P, _I64, _P, _P, _I64, _INT, _P, _I64,
                            ctypes.c_float, _P, _I64, _P, _P, _I64]),
}


def platform_tag() -> Optional[str]:
    """'x86_64-linux' and the like, for the platforms a library is built for; None elsewhere."""
    arch = {"x86_64": "x86_64", "amd64": "x86_64"}.get(platform.machine().lower())
    system = "linux" if sys.platform.startswith("linux") else None
    return f"{arch}-{system}" if arch and system else None


def library_name(tag: str) -> str:
    return f"libedgerun_cpu-{tag}.so"


def sources_hash(folder: str = SOURCES_DIR) -> str:
    return kernel_sources.sources_hash(folder)


def library():
    """The loaded library (ctypes.CDLL, signatures set), or None (see status())."""
    return _load()[0]


def status() -> str:
    """'loaded: <file>' or why the numpy paths are used."""
    return _load()[1]


@functools.cache
def _load() -> tuple:
    if os.environ.get("EDGERUN_NATIVE", "1") == "0":
        return None, "off (EDGERUN_NATIVE=0)"
    tag = platform_tag()
    if tag is None:
        return None, f"no native kernels are built for {platform.machine()} {sys.platform}"
    path = os.path.join(LIBRARY_DIR, library_name(tag))
    problem = _stale(path, tag)
    if problem:
        warnings.warn(f"edgerun's native CPU kernels are not used: {problem}: run {REBUILD}",
                      RuntimeWarning, stacklevel=3)
        return None, problem
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        return None, f"{library_name(tag)} did not load ({e})"
    for name, (result, arguments) in SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = result, arguments
    return lib, f"loaded: {library_name(tag)}"


def _stale(path: str, tag: str) -> str:
    """Why the library at `path` is not the build of the current sources ('' when it is)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        with open(STAMP_PATH) as f:
            stamp = json.load(f)
    except OSError as e:
        return f"{library_name(tag)} or its stamp is missing ({e})"
    if hashlib.sha256(data).hexdigest() != stamp.get("libraries", {}).get(tag, {}).get("sha256"):
        return f"{library_name(tag)} does not match its stamp {os.path.basename(STAMP_PATH)}"
    if os.path.exists(os.path.join(SOURCES_DIR, "build.py")) and \
            sources_hash(SOURCES_DIR) != stamp.get("sources_sha256"):
        return f"the sources in {SOURCES_DIR} changed since {library_name(tag)} was built"
    return ""
