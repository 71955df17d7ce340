"""Stopping a run when its RunOptions.terminate is set, as onnxruntime does.

`session.run(..., run_options)` watches the options for the length of the run (a thread-local:
runs in other threads are not affected, and the flag may be set from any thread). The
executor then takes its checking path: `terminate` is read before every node and every
subgraph run (each Loop or Scan iteration), so a run stops within one node's time. Runs
without run_options keep the generated code, which checks nothing.
"""
from __future__ import annotations

import contextlib
import threading

from ..errors import RunTerminated

_local = threading.local()


@contextlib.contextmanager
def watching(run_options):
    """Within the block, this thread's runs stop when `run_options.terminate` is set."""
    previous = getattr(_local, "options", None)
    _local.options = run_options
    try:
        check(run_options)
        yield
    finally:
        _local.options = previous


def watched():
    """The RunOptions this thread's run watches, or None."""
    return getattr(_local, "options", None)


def check(run_options) -> None:
    if run_options is not None and run_options.terminate:
        raise RunTerminated("the run was terminated: RunOptions.terminate was set")
