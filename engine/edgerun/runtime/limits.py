"""What one node may allocate: `SessionOptions.max_tensor_bytes` (default 16 GiB).

Kernels whose output size comes from input values (Expand, ConstantOfShape, Tile, Range,
Resize, Pad, OneHot) call `check_allocation` with the shape they are about to create, so a
model asking for 100 GB fails naming the node and the size before anything is allocated.
The limit is the running session's (a thread-local set for the length of each run).
"""
from __future__ import annotations

import contextlib
import math
import threading

DEFAULT_MAX_TENSOR_BYTES = 16 << 30
_local = threading.local()


class AllocationTooLarge(ValueError):
    """A node would create a tensor larger than the session allows (the executor names the
    node when it reports it)."""


@contextlib.contextmanager
def limited(max_tensor_bytes: int):
    previous = getattr(_local, "max_bytes", None)
    _local.max_bytes = max_tensor_bytes
    try:
        yield
    finally:
        _local.max_bytes = previous


def check_allocation(shape, itemsize: int) -> None:
    """Raise AllocationTooLarge when a tensor of `shape` (any ints) and `itemsize` bytes per
    element exceeds the limit; negative dims are left to the kernel to name."""
    limit = getattr(_local, "max_bytes", None) or DEFAULT_MAX_TENSOR_BYTES
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        return
    nbytes = math.prod(dims) * int(itemsize)
    if nbytes > limit:
        raise AllocationTooLarge(
            f"the output of shape {dims} would take {_size(nbytes)}, more than "
            f"SessionOptions.max_tensor_bytes ({_size(limit)})")


def _size(nbytes: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"
