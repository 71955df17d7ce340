"""A pure-Python wheel of the installed edgerun package, written directly (a wheel is a zip
with a .dist-info folder), so packing needs neither pip nor a build backend.

The wheel requires only numpy: the phone apps never need ml_dtypes (imported lazily for
exotic float formats) nor anything else the desktop extras bring.
"""
from __future__ import annotations

import base64
import hashlib
import os
import zipfile

SKIP_DIRS = {"__pycache__"}
# native libraries (the CPU provider's, providers/cpu/native) are per platform: a
# py3-none-any wheel carries none, and the CPU provider keeps its numpy paths
SKIP_SUFFIXES = (".pyc", ".pyo", ".so")


def package_files(package_dir: str) -> list:
    """(path on disk, path in the wheel) for every file of the package, sorted."""
    root = os.path.dirname(package_dir)
    files = []
    for folder, dirs, names in os.walk(package_dir, followlinks=True):   # wgsl/ is a link
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            if name.endswith(SKIP_SUFFIXES):
                continue
            path = os.path.join(folder, name)
            files.append((path, os.path.relpath(path, root).replace(os.sep, "/")))
    return files


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def build_wheel(package_dir: str, out_dir: str, name: str, version: str,
                requires: tuple = ("numpy>=1.24",)) -> str:
    """Write `{name}-{version}-py3-none-any.whl` into out_dir; returns its path."""
    dist_info = f"{name}-{version}.dist-info"
    metadata = "\n".join(["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                          "Requires-Python: >=3.10"] +
                         [f"Requires-Dist: {r}" for r in requires]) + "\n"
    wheel_meta = ("Wheel-Version: 1.0\nGenerator: edgerun-pack\nRoot-Is-Purelib: true\n"
                  "Tag: py3-none-any\n")
    path = os.path.join(out_dir, f"{name}-{version}-py3-none-any.whl")
    records = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for disk_path, arcname in package_files(package_dir):
            with open(disk_path, "rb") as f:
                data = f.read()
            z.writestr(arcname, data)
            records.append(f"{arcname},{_record_hash(data)},{len(data)}")
        for arcname, text in ((f"{dist_info}/METADATA", metadata),
                              (f"{dist_info}/WHEEL", wheel_meta)):
            data = text.encode()
            z.writestr(arcname, data)
            records.append(f"{arcname},{_record_hash(data)},{len(data)}")
        records.append(f"{dist_info}/RECORD,,")
        z.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
    return path
