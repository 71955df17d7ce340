"""CPU kernels, one module per operator family. Importing this package registers them all.

A module that fails to import is recorded in IMPORT_ERRORS (and reported by a test) instead
of taking every other family down with it.
"""
import importlib
import pkgutil
import warnings

IMPORT_ERRORS: dict = {}

for _info in pkgutil.iter_modules(__path__):
    try:
        importlib.import_module(f"{__name__}.{_info.name}")
    except Exception as _e:  # noqa: BLE001
        IMPORT_ERRORS[_info.name] = f"{type(_e).__name__}: {_e}"
        warnings.warn(f"CPU kernels in ops/{_info.name}.py failed to import: {_e}")
