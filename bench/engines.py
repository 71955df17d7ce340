"""The engines compared, as a table: name -> how to import it, open a model and run it.

`prepare()` imports the engine's modules (done before the memory baseline); `open(path)`
creates the session (timed as session creation) and returns `run(feeds) -> list of outputs`.
`env` is set in the engine's subprocess before anything is imported.

numpy's BLAS (OpenBLAS here) starts one busy-waiting thread per core; on a shared machine
whose cores are already busy that makes edgerun 10-20x slower and its timings meaningless
(light_squeezenet: 35 ms with one BLAS thread, 260-700 ms with two, measured under load).
So the numpy engines run with one BLAS thread by default, the fair match for onnxruntime with
one thread; `edgerun_threads` (not in the default set) keeps numpy's default.
"""
from __future__ import annotations

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


def _open_edgerun(path):
    import edgerun
    sess = edgerun.InferenceSession(path, providers=["CPUExecutionProvider"])
    return lambda feeds: sess.run(None, feeds)


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
    Engine("edgerun", "edgerun CPU (1 BLAS thread)", _import_edgerun, _open_edgerun,
           env=ONE_BLAS_THREAD),
    Engine("ort_1thread", "onnxruntime 1 thread", _import_onnxruntime, _ort_opener(1)),
    Engine("ort_default", "onnxruntime default threads", _import_onnxruntime, _ort_opener(0)),
    Engine("reference", "onnx ReferenceEvaluator (1 BLAS thread)", _import_reference,
           _open_reference, runs_once=True, env=ONE_BLAS_THREAD),
    Engine("edgerun_threads", "edgerun CPU (default BLAS threads)", _import_edgerun,
           _open_edgerun),
]}
DEFAULT_ENGINES = ["edgerun", "ort_1thread", "ort_default", "reference"]
