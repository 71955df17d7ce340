"""The device binding: finding and opening a QNN backend library with ctypes.

A QNN backend (libQnnCpu.so, libQnnGpu.so, libQnnHtp.so) exports one entry point,
QnnInterface_getProviders, returning the backend's function table (backendCreate,
contextCreate, graphCreate, tensorCreateGraphTensor, graphAddNode, graphFinalize,
graphExecute). Opening the library and reading the provider list is done here; driving the
function table is not written yet (docs/edge_adapters.md): on a device today, export the
QnnGraph JSON and build it with the SDK's tools.
"""
from __future__ import annotations

import ctypes

from ..edge_common import find_library
from . import spec


def library_path(backend: str) -> str:
    return find_library([spec.BACKENDS[backend]["library"]])


def provider_count(path: str) -> int:
    """How many interface providers the backend library offers (QnnInterface_getProviders)."""
    lib = ctypes.CDLL(path)
    providers = ctypes.POINTER(ctypes.c_void_p)()
    count = ctypes.c_uint32()
    status = lib.QnnInterface_getProviders(ctypes.byref(providers), ctypes.byref(count))
    if status != 0:
        raise RuntimeError(f"QnnInterface_getProviders failed with {status} in {path}")
    return count.value
