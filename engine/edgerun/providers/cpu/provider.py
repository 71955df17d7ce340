"""The CPU provider: numpy kernels from `ops/`, and the fallback for every other provider.

Threads: `SessionOptions.intra_op_num_threads = n` (0: every core), the counterpart of
onnxruntime's intra-op pool. The native kernels and the large matrix products split their
work over n threads (native/parallel.py: C workers, or Python threads for the parts numpy
runs). BLAS must not run threads of its own beside them (its idle threads spin after each
call, on the cores the parts run on): before the first native parts numpy's BLAS is set to
one thread, process-wide, and left there (through threadpoolctl); large products are split
on the pools from then on, and left to BLAS's threads before. With n = 1 each run sets BLAS to one thread and back after.
Oversubscribed threads are slow on a busy machine, so benchmarks and servers running many
sessions set it.
"""
from __future__ import annotations

from typing import Optional

import threading
import warnings

from ... import custom_ops
from ...ir.optional_numpy import have_numpy
from ...runtime.attributes import kernel_attributes
from ...runtime.kernel_context import KernelContext
from ..base import ExecutionProvider
from . import registry
from .native import parallel


class CPUProvider(ExecutionProvider):
    name = "cpu"
    ort_name = "CPUExecutionProvider"

    @classmethod
    def available(cls) -> tuple:
        if not have_numpy():
            return False, "numpy is not installed"
        return True, ""

    def __init__(self, options: Optional[dict] = None):
        super().__init__(options)
        self._blas = None
        self._pinned = None          # the BLAS libraries native parts set to one thread
        self._threads = 0
        self._pin_blas = None
        self._active = threading.local()
        self._custom_ops = False

    def configure(self, sess_options) -> None:
        self._custom_ops = custom_ops.enabled(sess_options)
        self._threads = int(getattr(sess_options, "intra_op_num_threads", 0) or 0)
        if self._threads == 1:
            self._blas = _blas_controller()
        else:
            self._pinned = _blas_controller(warn=self._threads > 1)
        # (without threadpoolctl nothing can pin BLAS: products then stay BLAS's whole)
        self._pin_blas = self._pin if self._pinned else None

    def begin_run(self) -> None:
        parallel.set_threads(self._threads, self._pin_blas)
        if self._blas is not None:
            self._active.restore = _limit_threads(self._blas, 1)

    def _pin(self) -> None:
        """Before the process's first native parts (parallel._before_parts): numpy's BLAS to one
        thread, and left there (process-wide, as BLAS's count is). Set back after each run,
        BLAS's woken threads spun through the next run on the cores its parts use (ResNet-50
        on 2 threads: 121 against 63 ms)."""
        if self._pinned:
            _limit_threads(self._pinned, 1)

    def end_run(self) -> None:
        restore = getattr(self._active, "restore", None)
        if restore:
            for library, threads in restore:
                library.set(threads)
            self._active.restore = None

    def capability(self, node, opset):
        if self.kernel(node, opset) is None:
            return False, (custom_ops.refusal(node) or
                           f"no CPU kernel for {node.domain or 'ai.onnx'}::{node.op_type}")
        return True, ""

    def kernel(self, node, opset):
        if self._custom_ops:
            op = custom_ops.lookup(node.op_type, node.domain)
            if op is not None:
                return op.kernel
        return registry.lookup(node.op_type, node.domain, opset)


_CONTROLLER = None


def _blas_controller(warn: bool = True):
    """The thread-count switches (`BlasThreads`) of numpy's BLAS libraries, found once per
    process (threadpoolctl scans the loaded libraries)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            if warn:
                warnings.warn("intra_op_num_threads needs threadpoolctl to limit BLAS "
                              "threads: pip install threadpoolctl", RuntimeWarning,
                              stacklevel=3)
            return None
        libraries = ThreadpoolController().select(user_api="blas").lib_controllers
        _CONTROLLER = [BlasThreads(library) for library in libraries]
    return _CONTROLLER


class BlasThreads:
    """One BLAS library's thread count, read at every run and set where it differs.
    threadpoolctl's methods look their C function up on each call (~2 us each: a tenth of
    a small model's run); for OpenBLAS's own thread pool the count is read straight from
    its function, looked up once. Setting stays threadpoolctl's: it lets one thread at a
    time change that process-wide pool, so runs on several threads cannot leave it at
    another's count. Other builds (OpenMP, MKL, BLIS) use threadpoolctl's methods for both."""
    __slots__ = ("get", "set")

    def __init__(self, library):
        self.get, self.set = library.get_num_threads, library.set_num_threads
        symbol = getattr(library, "_get_symbol", None)
        if getattr(library, "internal_api", "") == "openblas" and symbol is not None and \
                getattr(library, "threading_layer", "") != "openmp":
            self.get = symbol("openblas_get_num_threads") or self.get


def _limit_threads(libraries: list, threads: int) -> list:
    """Set each BLAS library's thread count to `threads`; (library, count before) of those
    it changed."""
    changed = []
    for library in libraries:
        before = library.get()
        if before != threads:
            library.set(threads)
            changed.append((library, before))
    return changed


class NodeEvaluator:
    """Runs one node on host values with its CPU kernel: constant folding's evaluator and
    the edge adapters' reference arithmetic (providers.registry.constant_evaluator)."""

    def __call__(self, node, opset: int, args: list):
        fn = registry.lookup(node.op_type, node.domain, opset)
        if fn is None:
            raise LookupError(f"no CPU kernel for {node.domain or 'ai.onnx'}::{node.op_type}")
        return fn(KernelContext(node, opset), *args, **kernel_attributes(node.attributes))

    @staticmethod
    def runs(node, opset: int) -> bool:
        """Whether a CPU kernel exists for `node` at `opset`."""
        return registry.lookup(node.op_type, node.domain, opset) is not None


evaluate_node = NodeEvaluator()
