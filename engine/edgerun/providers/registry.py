"""Every execution provider edgerun knows, by short name and by onnxruntime spelling.

One table: adding a provider is one row. Providers load lazily so a missing optional
dependency (wgpu, wasmtime, a phone SDK) only matters to whoever asks for that provider.
"""
from __future__ import annotations

from typing import Optional

import importlib
import warnings

from ..errors import InvalidArgument, NotImplementedOp
from ..ir.optional_numpy import have_numpy
from .base import ExecutionProvider

# short name -> (onnxruntime name, "module:Class")
PROVIDERS = {
    "cpu": ("CPUExecutionProvider", "edgerun.providers.cpu.provider:CPUProvider"),
    "wasm": ("WasmExecutionProvider", "edgerun.providers.wasm.provider:WasmProvider"),
    "webgpu": ("WebGpuExecutionProvider", "edgerun.providers.webgpu.provider:WebGpuProvider"),
    "coreml": ("CoreMLExecutionProvider", "edgerun.providers.coreml.provider:CoreMLProvider"),
    "nnapi": ("NnapiExecutionProvider", "edgerun.providers.nnapi.provider:NnapiProvider"),
    "qnn": ("QNNExecutionProvider", "edgerun.providers.qnn.provider:QNNProvider"),
}
_BY_ANY_NAME = {**{k.lower(): k for k in PROVIDERS},
                **{ort.lower(): k for k, (ort, _) in PROVIDERS.items()}}


def short_name(name: str) -> str:
    key = _BY_ANY_NAME.get(str(name).lower())
    if key is None:
        known = ", ".join(f"{k} ({ort})" for k, (ort, _) in PROVIDERS.items())
        raise InvalidArgument(f"unknown execution provider '{name}'; known: {known}")
    return key


_LOAD_ERRORS: dict = {}


def provider_class(short: str):
    """The provider's class, or None when its module cannot be imported (the reason is kept
    for availability(): a missing optional dependency, or a bug worth seeing)."""
    module, cls = PROVIDERS[short][1].split(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except ImportError as e:
        _LOAD_ERRORS[short] = f"{type(e).__name__}: {e}"
        return None


def constant_evaluator():
    """The function the optimizer folds constants with: the CPU provider's kernels where numpy
    is, the wasm provider's where it is not (a page), or None where neither runs."""
    for short in ("cpu", "wasm"):
        if availability(short)[0]:
            return importlib.import_module(provider_class(short).__module__).evaluate_node
    return None


def availability(short: str, options: Optional[dict] = None) -> tuple:
    if short == "cpu" and not have_numpy():
        # asked before importing the provider: a page (Pyodide, no numpy) would otherwise
        # import it, and compile what it imports, at each session's start
        return False, "numpy is not installed"
    cls = provider_class(short)
    if cls is None:
        return False, f"the {short} provider cannot be loaded ({_LOAD_ERRORS[short]})"
    return cls.available_with(options) if options else cls.available()


def get_available_providers() -> list:
    """onnxruntime spellings of the providers that can run here, in default priority order."""
    return [PROVIDERS[k][0] for k in PROVIDERS if availability(k)[0]]


def get_all_providers() -> list:
    """onnxruntime spellings of every provider edgerun knows, available here or not."""
    return [ort for ort, _ in PROVIDERS.values()]


def create_providers(requested, provider_options=None, skip_unavailable: bool = True) -> list:
    """Provider instances for a session, in priority order, CPU always last as the fallback.

    `requested` holds names or (name, options) pairs, as onnxruntime accepts, or provider
    objects (ExecutionProvider instances); unavailable providers are skipped with a warning,
    as onnxruntime does, or, with `skip_unavailable` False (a session's disable_fallback),
    refused.
    """
    requested = list(requested) if requested else ["cpu"]
    options = list(provider_options or [])
    chosen, seen, skipped = [], set(), []
    for i, item in enumerate(requested):
        if isinstance(item, ExecutionProvider):      # a provider object, e.g. a custom one
            seen.add(item.name)
            chosen.append(item)
            continue
        name, opts = (item if isinstance(item, (tuple, list)) else (item, None))
        if opts is None and i < len(options):
            opts = options[i]
        short = short_name(name)
        if short in seen:
            continue
        seen.add(short)
        ok, why = availability(short, opts)
        if not ok and not skip_unavailable:
            raise InvalidArgument(f"execution provider '{name}' is not available here ({why}) "
                                  f"and fallback is disabled")
        if not ok:
            skipped.append(f"{short}: {why}")
            warnings.warn(f"execution provider '{name}' is not available here ({why}); "
                          f"skipping it", RuntimeWarning, stacklevel=3)
            continue
        chosen.append(provider_class(short)(opts))
    if "cpu" not in seen:
        seen.add("cpu")
        ok, why = availability("cpu")
        if ok:
            chosen.append(provider_class("cpu")(None))
        else:
            skipped.append(f"cpu: {why}")
    if not chosen:
        raise NotImplementedOp(f"no execution provider can run here ({'; '.join(skipped)})")
    return chosen


def recommended_providers() -> list:
    """What the CLI runs on when no providers are named: a hardware GPU first, then the numpy
    CPU provider, and the wasm provider where numpy is absent. Software GPU adapters
    (lavapipe, SwiftShader) are slower than numpy, so they are not chosen by default."""
    chosen = []
    webgpu = provider_class("webgpu")
    if webgpu is not None and webgpu.is_hardware():
        chosen.append("webgpu")
    chosen.append("cpu" if availability("cpu")[0] else "wasm")
    return [PROVIDERS[k][0] for k in chosen]
