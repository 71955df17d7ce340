"""ONNX conformance cases run where numpy is absent: a CPython subprocess with numpy blocked
(tests/test_wasm_provider.py) or Pyodide under Node (tests/test_pyodide.py), both on the wasm
provider alone.

Values cross as JSON: a tensor as [element type, shape, base64 of its ONNX bytes] (strings:
a list of str), a sequence as {"seq": [...]}, an empty optional as null. RUNNER is the
numpy-free side; `jobs` and `check` are this side, where the expected outputs are.
"""
import base64

import numpy as np

from edgerun.ir import dtypes

# The numpy-free side: run_job(job) -> {case name: {"runs": [[outputs] per repeat] per input
# set, "programs": provider stats} | {"error": "Type: message"}}. Sessions use the wasm
# provider alone with job["options"]; each input set runs job["repeat"] times (the first run
# records a program, later ones replay it).
RUNNER = r'''
import base64, json, warnings
import edgerun
from edgerun.ir.host_tensor import HostTensor


def _value_in(v):
    if v is None:
        return None
    if isinstance(v, dict):
        return [_value_in(x) for x in v["seq"]]
    t, shape, data = v
    return HostTensor(t, shape, data if t == 8 else base64.b64decode(data))


def _value_out(v):
    if v is None:
        return None
    if isinstance(v, list):
        return {"seq": [_value_out(x) for x in v]}
    data = list(v.data) if v.elem_type == 8 else base64.b64encode(bytes(v.data)).decode()
    return [v.elem_type, list(v.shape), data]


def run_job(job):
    out = {}
    for case in job["cases"]:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sess = edgerun.InferenceSession(base64.b64decode(case["model"]),
                                                providers=[("wasm", job["options"])])
                names = [i.name for i in sess.get_inputs()]
                runs = []
                for values in case["sets"]:
                    feeds = {n: _value_in(v) for n, v in zip(names, values)}
                    runs.append([[_value_out(o) for o in sess.run(None, feeds)]
                                 for _ in range(job["repeat"])])
            out[case["name"]] = {"runs": runs, "programs": sess._providers[0].stats["programs"]}
        except Exception as e:  # noqa: BLE001 - every case reports
            out[case["name"]] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    return out
'''

# RUNNER as a script: numpy blocked, the job on stdin, the result as the last stdout line
SUBPROCESS_SCRIPT = ("import sys\nsys.modules['numpy'] = None\n" + RUNNER +
                     "\nprint(json.dumps(run_job(json.loads(sys.stdin.read()))))\n")


def encode(value):
    """A conformance value (numpy array, list, None) as JSON."""
    from edgerun.providers.wasm.device import pack_narrow

    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return {"seq": [encode(v) for v in value]}
    x = np.array(value, order="C")          # ascontiguousarray would make scalars 1-D
    if x.dtype.kind in "OUS":
        return [dtypes.STRING, list(x.shape), [str(v) for v in x.reshape(-1).tolist()]]
    t = dtypes.BY_NUMPY[x.dtype.name]
    data = pack_narrow(x.tobytes(), t.bits) if t.bits < 8 else x.tobytes()
    return [t.code, list(x.shape), base64.b64encode(data).decode()]


def decode(value):
    """What encode() and RUNNER's _value_out write, back as numpy arrays and lists."""
    from edgerun.providers.wasm.device import unpack_narrow

    if value is None:
        return None
    if isinstance(value, dict):
        return [decode(v) for v in value["seq"]]
    t, shape, data = value
    if t == dtypes.STRING:
        out = np.empty(len(data), dtype=object)
        out[:] = data
        return out.reshape(shape)
    raw = base64.b64decode(data)
    bits = dtypes.elem_type(t).bits
    if bits < 8:
        raw = unpack_narrow(raw, bits, int(np.prod(shape)))
    return np.frombuffer(raw, dtypes.numpy_dtype(t)).reshape(shape)


def claimed_cases(provider) -> list:
    """The conformance cases whose every node `provider` claims (not counting the cases no
    provider here computes)."""
    from edgerun.onnx import load_model
    from edgerun.tools import conformance

    out = []
    cpu_fails = conformance.expected_failures()
    for case in conformance.load_cases():
        if case["name"] in cpu_fails:
            continue
        model = load_model(case["model"])
        opsets = model.opset_imports
        if all(provider.capability(n, opsets.get(n.domain or "", 1))[0]
               for n in model.graph.nodes):
            out.append(case)
    return out


def passing_cases(provider) -> list:
    """The claimed cases the wasm provider passes natively (not in its expected failures)."""
    from edgerun.tools import conformance

    known = conformance.expected_failures("wasm")
    return [c for c in claimed_cases(provider) if c["name"] not in known]


def job(cases: list, options: dict, repeat: int) -> dict:
    return {"options": options, "repeat": repeat, "cases": [
        {"name": c["name"], "model": base64.b64encode(c["model"]).decode(),
         "sets": [[encode(v) for v in inputs] for inputs, _ in c["data_sets"]]}
        for c in cases]}


def check(cases: list, results: dict) -> tuple:
    """(errors {name: message}, mismatches [text], cases that replayed a program)."""
    from edgerun.tools import conformance

    errors, problems, replayed = {}, [], 0
    for case in cases:
        result = results.get(case["name"], {"error": "did not run"})
        if "error" in result:
            errors[case["name"]] = result["error"]
            continue
        replayed += result["programs"]["replayed"] > 0
        for (_, expected), runs in zip(case["data_sets"], result["runs"]):
            for i, run in enumerate(runs):
                # the floor conformance.py allows wasm: float32 references carry rounding
                # noise where exact answers are 0, the kernels compute in double
                atol = max(case["atol"], conformance.PROVIDER_ATOL["wasm"])
                problem = conformance.compare_outputs(
                    expected, [decode(v) for v in run], case["rtol"], atol,
                    conformance._shape_only(case))
                if problem:
                    problems.append(f"{case['name']} run {i}: {problem[:200]}")
    return errors, problems, replayed
