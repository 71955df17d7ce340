"""The CoreML execution provider: claims the nodes MIL can express, lowers each contiguous
partition to an ML Program and runs it with Core ML (onnxruntime's CoreMLExecutionProvider
with ModelFormat=MLProgram).

A partition is lowered when its first inputs arrive, for their shapes and dtypes (ML
Programs want static shapes), and kept per input signature. Lowering that fails for those
inputs (a dtype or rank an ML Program cannot hold) runs the partition on the CPU provider
and warns once, saying why.

Options (provider_options):
- minimum_deployment_target: "iOS15" (default), "iOS16", "iOS17", "iOS18"
- precision: "fp32" (default) or "fp16" (compute precision of the converted program)
- compute_units: "ALL" (default), "CPU_ONLY", "CPU_AND_GPU", "CPU_AND_NE"
- cache_dir: a folder to keep each converted partition as a .mlpackage
- runner: "coreml" (default) predicts with Core ML (Apple only); "reference" runs the
  lowered MIL program with edgerun's numpy interpreter after converting, saving and
  validating the .mlpackage, which works anywhere coremltools installs (tests, debugging);
  "export" converts, saves and validates the same way but computes with the CPU provider
  (what `edgerun pack` uses to pre-lower partitions).
"""
from __future__ import annotations

from typing import Optional

import os
import platform
import sys
import tempfile
import threading
import warnings

from ..base import ExecutionProvider
from . import capability
from .lowering import LoweringError, lower_partition
from .mlpackage import on_apple

COREMLTOOLS_PIN = "coremltools==9.0"
INT32_RANGE = (-2 ** 31, 2 ** 31 - 1)


def _have_coremltools() -> bool:
    try:
        import coremltools  # noqa: F401
    except ImportError:
        return False
    return True


class CoreMLProvider(ExecutionProvider):
    name = "coreml"
    ort_name = "CoreMLExecutionProvider"
    compiles = True

    @classmethod
    def available(cls) -> tuple:
        if not on_apple():
            return False, (f"Core ML runs only on Apple platforms (macOS, iOS); this is "
                           f"{platform.system() or sys.platform} ({sys.platform})")
        if not _have_coremltools():
            return False, f"coremltools is not installed (pip install {COREMLTOOLS_PIN})"
        return True, ""

    @classmethod
    def available_with(cls, options: dict) -> tuple:
        """Runner "reference" or "export" needs neither Apple nor coremltools' runtime."""
        if (options or {}).get("runner") in ("reference", "export"):
            return True, ""
        return cls.available()

    def __init__(self, options: Optional[dict] = None):
        super().__init__(options)
        self.target = self.options.get("minimum_deployment_target", "iOS15")
        self.precision = self.options.get("precision", "fp32")
        self.runner = self.options.get("runner", "coreml")
        if self.runner not in ("coreml", "reference", "export"):
            raise ValueError(f"CoreML provider option runner='{self.runner}'; expected "
                             f"'coreml', 'reference' or 'export'")
        self.partitions: list = []     # one record per lowered (partition, input signature)

    def capability(self, node, opset):
        return capability.check(node, opset)

    def compile(self, graph, opsets):
        return CompiledPartition(graph, opsets, self)

    # ---- running a lowered partition -----------------------------------------------------

    def build_runner(self, graph, opsets, specs: dict):
        """fn(feeds by MIL input name) -> outputs by MIL output name, and the lowering."""
        partition = lower_partition(graph, opsets, specs, self.target)
        record = {"partition": graph.name, "nodes": len(graph.nodes),
                  "mil_ops": dict(partition.mil_op_counts), "inputs": dict(specs)}
        self.partitions.append(record)
        if self.runner in ("reference", "export"):
            return self._offline_runner(graph, opsets, specs, partition, record), partition
        from .mlpackage import convert, save

        model = convert(partition, self.precision, self.options.get("compute_units", "ALL"))
        if self.options.get("cache_dir"):
            record["mlpackage"] = save(model, os.path.join(self.options["cache_dir"],
                                                           graph.name))
        return model.predict, partition

    def _offline_runner(self, graph, opsets, specs, partition, record):
        from .mlpackage import convert, save, validate
        from .reference import run_program

        to_convert = lower_partition(graph, opsets, specs, self.target)  # convert consumes it
        folder = self.options.get("cache_dir") or tempfile.mkdtemp(prefix="edgerun-coreml-")
        path = save(convert(to_convert, self.precision),
                    os.path.join(folder, f"{graph.name}_{len(self.partitions)}"))
        summary = validate(path, partition)
        record.update(mlpackage=path, saved_ops=summary["ops"],
                      specification_version=summary["specification_version"])
        if self.runner == "reference":
            return lambda feeds: run_program(partition.program, feeds)
        return _cpu_runner_by_mil_names(graph, opsets, partition)


class CompiledPartition:
    """What `compile` returns: fn(*host inputs) -> tuple of host outputs."""

    def __init__(self, graph, opsets, provider: CoreMLProvider):
        self.graph = graph
        self.opsets = opsets
        self.provider = provider
        self.input_names = [v.name for v in graph.inputs]
        self.output_names = [v.name for v in graph.outputs]
        self._bound: dict = {}          # input signature -> fn(inputs) -> tuple
        self._lock = threading.Lock()
        self.fallback_reason = ""

    def __call__(self, *inputs):
        import numpy as np

        arrays = [np.asarray(v) for v in inputs]
        signature = tuple((a.shape, a.dtype.str) for a in arrays)
        fn = self._bound.get(signature)
        if fn is None:
            with self._lock:
                fn = self._bound.get(signature) or self._bind(arrays)
                self._bound[signature] = fn
        return fn(arrays)

    def _bind(self, arrays):
        specs = {name: (a.shape, a.dtype) for name, a in zip(self.input_names, arrays)}
        try:
            runner, partition = self.provider.build_runner(self.graph, self.opsets, specs)
        except LoweringError as e:
            self.fallback_reason = str(e)
            warnings.warn(f"CoreML: partition '{self.graph.name}' runs on the CPU provider for "
                          f"inputs {_describe(specs)}: {e}", RuntimeWarning, stacklevel=4)
            return self._cpu_runner()
        return lambda values: self._run(runner, partition, values)

    def _run(self, runner, partition, arrays) -> tuple:
        import numpy as np

        feeds = {}
        for name, a in zip(self.input_names, arrays):
            dtype = partition.input_dtypes[name]
            if a.dtype == np.int64 and a.size and (a.min() < INT32_RANGE[0] or
                                                   a.max() > INT32_RANGE[1]):
                raise ValueError(f"input '{name}' holds int64 values outside int32's range; "
                                 f"Core ML carries int64 as int32")
            feeds[partition.input_names[name]] = a.astype(dtype, copy=False)
        results = runner(feeds)
        return tuple(np.asarray(results[partition.output_names[name]]).astype(
            partition.output_dtypes[name], copy=False) for name in self.output_names)

    def _cpu_runner(self):
        inner = _cpu_executor(self.graph, self.opsets)
        return lambda arrays: tuple(inner.run(dict(zip(inner.input_names, arrays))))


def _cpu_executor(graph, opsets):
    """An executor running `graph` with the CPU provider (found through the provider registry,
    as a session finds it): Core ML's stand-in where its runtime cannot predict."""
    from ...runtime.executor import GraphExecutor
    from ...runtime.partition import Partitioner
    from ..registry import provider_class

    return GraphExecutor(graph, opsets, Partitioner([provider_class("cpu")()]))


def _cpu_runner_by_mil_names(graph, opsets, partition):
    """A runner with the MIL calling convention that computes with the CPU provider."""
    inner = _cpu_executor(graph, opsets)
    by_mil = {mil: onnx for onnx, mil in partition.input_names.items()}

    def run(feeds):
        outputs = inner.run({by_mil[k]: v for k, v in feeds.items()})
        return {partition.output_names[n]: v for n, v in zip(inner.output_names, outputs)}
    return run


def _describe(specs: dict) -> str:
    return ", ".join(f"{n}: {d} {list(s)}" for n, (s, d) in specs.items())
