"""The hash of a folder of kernel sources (its *.c, *.h and build.py), which the wasm and the
native CPU kernels' stamps record so a build older than its sources is named, not run."""
from __future__ import annotations

import glob
import hashlib
import os


def sources_hash(folder: str) -> str:
    h = hashlib.sha256()
    names = sorted(glob.glob(os.path.join(folder, "*.c")) + glob.glob(os.path.join(folder, "*.h"))
                   + [os.path.join(folder, "build.py")])
    for path in names:
        with open(path, "rb") as f:
            h.update(os.path.basename(path).encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()
