"""The engines compared, as a table: name -> how to import it, open a model and run it.

`prepare()` imports the engine's modules (done before the memory baseline); `open(path)`
creates the session (timed as session creation) and returns `run(feeds) -> list of outputs`.
`env` is set in the engine's subprocess before anything is imported.

numpy's BLAS (OpenBLAS here) starts one busy-waiting thread per core; on a shared machine
whose cores are already busy that makes edgerun 10-20x slower and its timings meaningless
(light_squeezenet: 35 ms with one BLAS thread, 260-700 ms with two, measured under load).
So the numpy engines run with one BLAS thread by default, the fair match for onnxruntime with
one thread; `edgerun_threads` (not in the default set) keeps numpy's default.

`edgerun_webgpu` (not in the default set: it needs `pip install wgpu==0.32.0` and a Vulkan,
Metal or D3D12 adapter) runs edgerun's WebGPU provider natively (wgpu-native), the CPU
provider taking the nodes it refuses. Opening the adapter and device (once per process) is
done in prepare(), so session creation times the model, not the driver; a session on which
WebGPU is not available fails instead of timing the CPU fallback. Where the nodes ran (from
explain()) and the runtime fallbacks are printed to the worker's stderr and, when
EDGERUN_BENCH_PLACEMENT names a file, appended to it as one JSON line per session.
`edgerun_webgpu_uncaptured` is the same with the provider option graph_capture=False: every
run goes node by node through Python instead of replaying the recorded command stream
(providers/webgpu/program.py), the A/B of that choice.
"""
from __future__ import annotations

import atexit
import json
import os
import sys
from dataclasses import dataclass
from typing import Callable

BASELINE = "ort_1thread"


@dataclass(frozen=True)
class Engine:
    name: str
    label: str
    prepare: Callable[[], None]
    open: Callable[[str], Callable]
    runs_once: bool = False     # slow: a first run capped in time, a few more if they fit
    env: tuple = ()             # (name, value) pairs for the subprocess's environment


def _import_edgerun():
    import edgerun  # noqa: F401


def _edgerun_opener(threads: int):
    def open_edgerun(path):
        import edgerun
        so = edgerun.SessionOptions()
        so.intra_op_num_threads = threads    # 0: BLAS's default, every core for native kernels
        sess = edgerun.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        return lambda feeds: sess.run(None, feeds)
    return open_edgerun


WEBGPU = "WebGpuExecutionProvider"    # engine/edgerun/providers/registry.py


def _prepare_webgpu():
    """Import edgerun and open the process-wide adapter and device (raises where none)."""
    from edgerun.providers.webgpu.provider import WebGpuProvider, shared_context
    ok, why = WebGpuProvider.available()
    if not ok:
        raise RuntimeError(f"WebGPU is not available here: {why}")
    shared_context()


def _webgpu_opener(graph_capture: bool):
    def open_webgpu(path):
        return _open_edgerun_webgpu(path, graph_capture)
    return open_webgpu


def _open_edgerun_webgpu(path, graph_capture: bool = True):
    import edgerun
    sess = edgerun.InferenceSession(path, providers=[(WEBGPU, {"graph_capture": graph_capture}),
                                                     "CPUExecutionProvider"])
    if WEBGPU not in sess.get_providers():
        raise RuntimeError(f"the session fell back to {sess.get_providers()}")
    _report_placement(path, sess)
    return lambda feeds: sess.run(None, feeds)


def _report_placement(path, sess):
    """How many nodes edgerun placed off WebGPU (at exit, with the GPU's counters and the
    nodes its kernels handed to the CPU at run time)."""
    try:
        nodes = sess.explain()["nodes"]
    except Exception as e:   # noqa: BLE001 - optional information
        print(f"edgerun_webgpu: explain() failed: {e}", file=sys.stderr)
        return
    off = [n for n in nodes if n["provider"] != "webgpu"]
    off_ops: dict = {}
    for n in off:
        off_ops[n["op_type"]] = off_ops.get(n["op_type"], 0) + 1
    from edgerun.providers.webgpu.provider import shared_context
    gpu = shared_context()       # the process-wide GPU context the session runs on

    def report():
        info = {"model": os.path.abspath(path), "nodes": len(nodes), "off_webgpu": len(off),
                "off_webgpu_ops": off_ops,
                "refused": sorted({r for n in off for r in n["refused_by"]})[:20]}
        info["adapter"] = getattr(gpu.device, "description", "")
        info["gpu_stats"] = dict(gpu.stats)
        info["runtime_fallbacks"] = list(gpu.fallback_log)[-10:]
        print("edgerun_webgpu placement: " + json.dumps(info), file=sys.stderr)
        target = os.environ.get("EDGERUN_BENCH_PLACEMENT")
        if target:
            with open(target, "a") as f:
                f.write(json.dumps(info) + "\n")
    atexit.register(report)


def _import_onnxruntime():
    import onnxruntime  # noqa: F401


def _ort_opener(threads: int):
    def open_ort(path):
        import onnxruntime
        so = onnxruntime.SessionOptions()
        so.log_severity_level = 3
        so.intra_op_num_threads = threads     # 0: onnxruntime's default (physical cores)
        sess = onnxruntime.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        return lambda feeds: sess.run(None, feeds)
    return open_ort


def _import_reference():
    import onnx.reference  # noqa: F401


def _open_reference(path):
    from onnx.reference import ReferenceEvaluator
    ref = ReferenceEvaluator(path)
    return lambda feeds: ref.run(None, feeds)


ONE_BLAS_THREAD = tuple((name, "1") for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                   "MKL_NUM_THREADS"))

ENGINES = {e.name: e for e in [
    Engine("edgerun", "edgerun CPU (1 thread)", _import_edgerun, _edgerun_opener(1),
           env=ONE_BLAS_THREAD),
    Engine("ort_1thread", "onnxruntime 1 thread", _import_onnxruntime, _ort_opener(1)),
    Engine("ort_default", "onnxruntime default threads", _import_onnxruntime, _ort_opener(0)),
    Engine("reference", "onnx ReferenceEvaluator (1 BLAS thread)", _import_reference,
           _open_reference, runs_once=True, env=ONE_BLAS_THREAD),
    Engine("edgerun_threads", "edgerun CPU (default threads)", _import_edgerun,
           _edgerun_opener(0)),
    Engine("edgerun_webgpu", "edgerun WebGPU (wgpu-native; CPU fallback 1 BLAS thread)",
           _prepare_webgpu, _webgpu_opener(True), env=ONE_BLAS_THREAD),
    Engine("edgerun_webgpu_uncaptured", "edgerun WebGPU, graph capture off", _prepare_webgpu,
           _webgpu_opener(False), env=ONE_BLAS_THREAD),
]}
DEFAULT_ENGINES = ["edgerun", "ort_1thread", "ort_default", "reference"]
