"""The native kernels' shared library: which file serves this platform, whether it is the
build of the current sources, and its functions through ctypes.

cpu_kernels/build.py writes one library per platform and `edgerun_cpu.json`: the hash of the
sources it was built from and of each library. In a source checkout the sources are hashed
again at load, and a stale library is not loaded (a warning names the rebuild command);
installed packages carry no sources, so only the library's own hash is checked there. No
library for this platform (another OS or architecture, Pyodide, a py3-none-any wheel, which
carries none), EDGERUN_NATIVE=0, or a library that fails to load: `library()` is None, the
kernels keep their numpy paths, and `status()` says why.
"""
from __future__ import annotations

from typing import Optional

import contextlib
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
    "er_cpu_isa": (_INT, [_INT]),
    "er_cpu_gelu": (None, [_P, _P, _I64, _P, _P, ctypes.c_float]),
    "er_cpu_dynamic_quantize": (None, [_P, _I64, _P, _P, _P]),
    "er_cpu_layer_norm": (None, [_P, _I64, _I64, _P, _P, ctypes.c_float, _P]),
    "er_cpu_quantize": (None, [_P, _I64, ctypes.c_float, ctypes.c_int32, ctypes.c_int32,
                               ctypes.c_int32, _P]),
    "er_cpu_quantize_dequantize": (None, [_P, _I64, ctypes.c_float, ctypes.c_int32,
                                          ctypes.c_int32, ctypes.c_int32, _P]),
    "er_cpu_dequantize": (None, [_P, _I64, _INT, ctypes.c_int32, ctypes.c_float, _P]),
    "er_cpu_forest": (_INT, [_P, _I64, _I64, _P, _I64, _INT, ctypes.c_double, _P, _P, _P]),
    "er_cpu_forest_call": (_INT, [_P]),
    "er_cpu_svm_classify": (None, [_P, _P, _I64, _P, _P, _P, _P]),
    "er_cpu_lstm_f32": (None, [_P, _P, _P, _P, _P, _I64, _I64, _I64, _I64, _P]),
    "er_cpu_gru_f32": (None, [_P, _P, _P, _P, _INT, _P, _P, _I64, _I64, _I64, _I64, _P]),
    "er_cpu_depthwise_conv": (None, [_P, _P, _P, _P, _INT, _P, _P, _P, _P, _P]),
    "er_cpu_pool": (None, [_P, _P, _INT, _P, _P, _P, _P]),
    "er_cpu_max_pool_8bit": (None, [_P, _P, _INT, _P, _P, _P]),
    "er_cpu_direct_conv": (None, [_P, _P, _P, _P, _INT, _P, _P, _P, _P, _I64, _P]),
    "er_cpu_conv_tap_offsets": (None, [_P, _I64, _P]),
    "er_cpu_activation": (None, [_P, _P, _I64, _INT, _P]),
    "er_cpu_softmax_rows": (None, [_P, _P, _I64, _I64]),
    "er_cpu_channel_affine": (None, [_P, _P, _I64, _I64, _P, _P, _I64, _INT, _P]),
    "er_cpu_bias_activation": (None, [_P, _I64, _I64, _P, _I64, _INT, _P]),
    "er_cpu_binary_rows": (None, [_P, _P, _P, _I64, _I64, _I64, _I64, _INT]),
    "er_cpu_qgemm_packed_size": (_I64, [_I64, _I64]),
    "er_cpu_qgemm_pack_b": (_INT, [_P, _I64, _I64, _I64, _INT, _P, _P]),
    "er_cpu_qgemm": (_INT, [_P, _I64, _I64, _I64, _INT, _P, _I64, _P, _P, _I64, _INT, _P, _I64,
                            ctypes.c_float, _P, _I64, _P, _P, _I64]),
    "er_cpu_qgemm_pack_a": (None, [_P, _I64, _I64, _I64, _INT, _P, _P]),
    "er_cpu_qgemm_packed_a_size": (_I64, [_I64, _I64]),
    "er_cpu_qconv": (_INT, [_P, _P, _I64, _P, _I64, _INT, ctypes.c_int32, _P, _P, _I64, _I64,
                            _P]),
    "er_cpu_qconv_frames_size": (_I64, [_P, _I64, _I64]),
    "er_cpu_qconv_fill_frames": (None, [_P, _I64, _I64, _P, ctypes.c_int32, _P]),
    "er_cpu_qgemm_packed": (_INT, [_P, _P, _I64, _I64, _INT, _P, _I64, _P, _P, _I64, _INT, _P,
                                   _I64, ctypes.c_float, _P, _I64, _P, _P, _I64]),
    "er_cpu_qgemm_bound": (_INT, [_P, _P, _I64, _I64, _INT, ctypes.c_int32, ctypes.c_float, _P,
                                  _I64, _P]),
    "er_cpu_qgemm_dynamic": (_INT, [_P, _P, _I64, _P, _I64, _P]),
    "er_cpu_elementwise_program": (None, [_P, _I64, _P, _I64, _P]),
    "er_cpu_lookup_table": (None, [_P, _I64, _P, _P]),
    "er_cpu_ml_rows": (None, [_P, _I64, _I64, _INT, _P]),
    "er_cpu_linear_rows": (None, [_P, _I64, _I64, _P, _P, _I64, _INT, _P, _P]),
    "er_cpu_pool_run": (_INT, [_P, _P, _I64, _I64, _I64]),
    "er_cpu_pool_workers": (_INT, []),
}


def address(array):
    """The address of a numpy array's first element for a ctypes call, None for None: through
    the buffer protocol where the array is writable and contiguous (a third of
    `.ctypes.data`'s ~1 us, which counts in calls of a few microseconds)."""
    if array is None:
        return None
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array.data))
    except (TypeError, ValueError, BufferError):
        return array.ctypes.data


def platform_tag() -> Optional[str]:
    """'x86_64-linux' and the like, for the platforms a library is built for; None elsewhere."""
    arch = {"x86_64": "x86_64", "amd64": "x86_64"}.get(platform.machine().lower())
    system = "linux" if sys.platform.startswith("linux") else None
    return f"{arch}-{system}" if arch and system else None


def library_name(tag: str) -> str:
    return f"libedgerun_cpu-{tag}.so"


def sources_hash(folder: str = SOURCES_DIR) -> str:
    return kernel_sources.sources_hash(folder)


ISAS = ("none", "avx2", "avx512_vnni")     # er_cpu_isa's codes, in order (cpu_kernels/isa.h)
_isa: list = []                            # the code in use, once asked


def library():
    """The loaded library (ctypes.CDLL, signatures set), or None (see status())."""
    return _load()[0]


def isa() -> str:
    """The instruction set the native kernels run on ('none': no native kernels here)."""
    return ISAS[isa_code()]


def isa_code() -> int:
    if not _isa:
        lib = library()
        _isa.append(lib.er_cpu_isa(-1) if lib is not None else 0)
    return _isa[0]


def available() -> bool:
    """Whether the native kernels run here (a library loaded, on a supported instruction
    set)."""
    return isa_code() > 0


@contextlib.contextmanager
def forced(name: str):
    """Run the native kernels on `name` (at most what the CPU has) inside the block (tests)."""
    lib = library()
    if lib is None or name not in ISAS:
        raise ValueError(f"cannot force {name!r}: the native kernels run on {isa()}; "
                         f"one of {ISAS}")
    previous = isa_code()
    _isa[0] = lib.er_cpu_isa(ISAS.index(name))
    try:
        yield
    finally:
        _isa[0] = lib.er_cpu_isa(previous)


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
    if not os.path.exists(path):         # a pure-Python install (py3-none-any wheel)
        return None, f"this installation has no {library_name(tag)}"
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
