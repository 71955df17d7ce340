"""The WebAssembly provider (SIMD128 kernels under wasmtime) against the CPU provider and
onnxruntime.

- every ONNX conformance case whose operators the wasm provider fully claims gives the
  case's expected outputs (the case's own rtol/atol, compared as conformance.py does);
- the real models (tests/real_models.py) with providers ["wasm", "cpu"] match onnxruntime
  (rtol 1e-3, atol 1e-4), with every node placed on wasm (explain()) and no CPU fallback;
- every real model also runs with providers ["wasm"] alone and numpy blocked (the path
  Pyodide takes: unoptimized graphs, HostTensors in and out, through the web bridge) and
  matches the CPU provider (rtol 1e-3, atol 1e-4) on its second run, a replay of the
  program recorded by the first;
- graph capture: replays match node-by-node runs for new data of the same shapes and for
  new shapes; runs whose host decisions depend on data (an If on a computed condition) are
  refused and stay node by node; a replayed kernel error (Gather index) is the node's
  error; a session's programs give back their memory when it goes;
- the operators added for numpy-free graphs (Constant*, shape arithmetic on host values,
  comparisons, Where, If, Pad, Split, LSTM, LRN, ArgMax, ai.onnx.ml Scaler and
  ArrayFeatureExtractor) match onnxruntime on small graphs;
- the kernels' .wasm is the build of the current sources (a stale build fails loading).
"""
import json
import os
import shutil

import numpy as np
import pytest

import numpy_free
from conftest import ROOT, need
from edgerun.ir.op_types import op_types

wasmtime_ok = True
try:
    import wasmtime  # noqa: F401
except ImportError:
    wasmtime_ok = False


@pytest.fixture(scope="module")
def wasm():
    need(wasmtime_ok, "wasmtime", "pip install wasmtime==50.0.1")
    from edgerun.providers.wasm.provider import WasmProvider

    ok, why = WasmProvider.available()
    assert ok, why
    return WasmProvider()


# ---- the build ----------------------------------------------------------------------------

def test_committed_build_matches_the_sources():
    from edgerun.providers.wasm import build_info

    with open(build_info.STAMP_PATH) as f:
        stamp = json.load(f)
    assert stamp["sources_sha256"] == build_info.sources_hash(), \
        "wasm_kernels/ changed: run python wasm_kernels/build.py and commit the .wasm"
    build_info.load_module_bytes()       # the module matches its stamp too


def test_stale_or_missing_build_fails_naming_the_rebuild(tmp_path):
    from edgerun.providers.wasm import build_info

    sources = tmp_path / "wasm_kernels"
    shutil.copytree(os.path.join(ROOT, "wasm_kernels"), sources)
    build_info.load_module_bytes(sources_dir=str(sources))          # identical: fine
    with open(sources / "gemm.c", "a") as f:
        f.write("\n/* an edit */\n")
    with pytest.raises(build_info.StaleBuild, match="wasm_kernels/build.py"):
        build_info.load_module_bytes(sources_dir=str(sources))
    with pytest.raises(build_info.StaleBuild, match="not built"):
        build_info.load_module_bytes(wasm_path=str(tmp_path / "missing.wasm"))


def test_fresh_build_is_identical_to_the_committed_one():
    import importlib.util
    import subprocess
    import sys

    need(importlib.util.find_spec("ziglang") is not None, "ziglang",
         "pip install ziglang==0.17.1")
    result = subprocess.run([sys.executable, os.path.join(ROOT, "wasm_kernels", "build.py"),
                             "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_export_signatures_match_wasmtime(wasm):
    """Recorded programs store f32 arguments as bits: the parameter types read from the
    module's bytes must be the ones wasmtime sees."""
    import wasmtime

    from edgerun.providers.wasm import build_info
    from edgerun.providers.wasm.program import kernel_table
    from edgerun.providers.wasm.signatures import export_signatures

    data = build_info.load_module_bytes()
    ours = export_signatures(data)
    module = wasmtime.Module(wasmtime.Engine(), data)
    theirs = {e.name: (tuple(str(p) for p in e.type.params),
                       tuple(str(r) for r in e.type.results))
              for e in module.exports if isinstance(e.type, wasmtime.FuncType)}
    assert ours == theirs
    table = kernel_table(wasm.dev)           # what er_run_program can call, from the module
    assert {"er_unary", "er_sgemm", "er_conv2d", "er_lstm_cell"} <= set(table)
    assert table["er_unary"][1][4:] == ("f32", "f32")


# ---- kernels ------------------------------------------------------------------------------

@pytest.mark.parametrize("m,n,k,trans_a,trans_b", [(1, 1, 1, 0, 0), (5, 7, 3, 0, 0),
                                                   (37, 129, 300, 1, 0), (130, 9, 513, 0, 1),
                                                   (64, 1030, 17, 1, 1), (2, 70, 300, 0, 1),
                                                   (3, 33, 17, 0, 0), (1, 9, 5, 1, 1)])
def test_sgemm_matches_numpy(wasm, m, n, k, trans_a, trans_b):
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    dev = wasm.dev
    ta, tb, tc = wasm.to_device(a), wasm.to_device(b), wasm.to_device(c0)
    rsa, csa = (1, m) if trans_a else (k, 1)
    rsb, csb = (1, k) if trans_b else (n, 1)
    dev.call("er_sgemm", m, n, k, ta.ptr, rsa, csa, tb.ptr, rsb, csb, tc.ptr, n, 1)
    expected = (a.T if trans_a else a) @ (b.T if trans_b else b) + c0
    np.testing.assert_allclose(wasm.to_host(tc), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op,fn", [
    ("Exp", np.exp), ("Tanh", np.tanh), ("Sigmoid", lambda x: 1 / (1 + np.exp(-x))),
    ("Log", lambda x: np.log(np.abs(x) + 1e-3)), ("Softplus", lambda x: np.logaddexp(0, x))])
def test_transcendentals_are_accurate(wasm, op, fn):
    """Relative error <= 2e-6 (plus 1e-30 absolute) over [-20, 20] and near zero."""
    from edgerun.providers.wasm.ops.elementwise import UNARY

    x = np.concatenate([np.linspace(-20, 20, 4001), np.geomspace(1e-8, 1, 200),
                        -np.geomspace(1e-8, 1, 200)]).astype(np.float32)
    if op == "Log":
        x = np.abs(x) + np.float32(1e-3)
    t = wasm.to_device(x)
    y = wasm.dev.empty(x.shape)
    wasm.dev.call("er_unary", UNARY[op][0], t.ptr, y.ptr, x.size, 0.0, 0.0)
    expected = fn(x.astype(np.float64)) if op != "Log" else np.log(x.astype(np.float64))
    np.testing.assert_allclose(wasm.to_host(y), expected, rtol=2e-6, atol=1e-30)


def test_erf_is_accurate(wasm):
    import math

    from edgerun.providers.wasm.ops.elementwise import UNARY

    x = np.concatenate([np.linspace(-6, 6, 2001), np.geomspace(1e-8, 1, 100)]).astype(np.float32)
    t = wasm.to_device(x)
    y = wasm.dev.empty(x.shape)
    wasm.dev.call("er_unary", UNARY["Erf"][0], t.ptr, y.ptr, x.size, 0.0, 0.0)
    expected = np.array([math.erf(float(v)) for v in x])
    np.testing.assert_allclose(wasm.to_host(y), expected, rtol=1e-6, atol=2e-7)


def test_memory_is_reused_after_values_die(wasm):
    dev = wasm.dev
    before = dev.bytes_in_use()
    for _ in range(50):
        t = dev.empty((256, 256))
        del t
    assert dev.bytes_in_use() == before
    heap = dev.call("er_heap_top")
    for _ in range(50):
        dev.empty((256, 256))
    assert dev.call("er_heap_top") == heap      # the freed block came back each time


# ---- conformance ---------------------------------------------------------------------------

CLAIMED_FLOOR = 1050         # conformance cases whose every node the wasm provider claims
ON_WASM_FLOOR = 900         # ... of which run without any CPU fallback (element types)


def test_conformance_cases_the_wasm_provider_claims(wasm):
    import warnings

    import edgerun
    from edgerun.tools import conformance

    cases = numpy_free.claimed_cases(wasm)
    failures, pure = [], 0
    for case in cases:
        before = dict(wasm.dev.fallbacks)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sess = edgerun.InferenceSession(case["model"], providers=[wasm, "cpu"])
                names = [i.name for i in sess.get_inputs()]
                for inputs, expected in case["data_sets"]:
                    got = sess.run(None, dict(zip(names, inputs)))
                    # the conformance tool's wasm floor: kernels computing in double (DFT)
                    # miss float32 noise of ~2e-7 in expected values that should be 0
                    atol = max(case["atol"], conformance.PROVIDER_ATOL["wasm"])
                    problem = conformance.compare_outputs(expected, got, case["rtol"], atol,
                                                          conformance._shape_only(case))
                    if problem:
                        raise AssertionError(problem)
        except Exception as e:  # noqa: BLE001 - report every failing case at once
            failures.append(f"{case['name']}: {type(e).__name__}: {str(e)[:200]}")
            continue
        pure += wasm.dev.fallbacks == before
    assert not failures, "\n".join(failures)
    assert len(cases) >= CLAIMED_FLOOR, f"only {len(cases)} cases fully claimed"
    assert pure >= ON_WASM_FLOOR, f"only {pure} claimed cases ran without a CPU fallback"


# ---- real models ---------------------------------------------------------------------------

RTOL, ATOL = 1e-3, 1e-4


def _real_models():
    from real_models import REAL_MODELS
    return REAL_MODELS


def _variant_ids():
    from real_models import variant_ids
    return variant_ids()


@pytest.mark.slow
@pytest.mark.parametrize("name", _variant_ids())
def test_real_model_matches_onnxruntime(wasm, name):
    """Every variant: batch 1 and a larger batch, dynamic dimensions varied."""
    import onnxruntime
    from real_models import model_variant

    import edgerun

    path, feeds = model_variant(*name.split("/"))
    so = onnxruntime.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    expected = onnxruntime.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(
        None, feeds)
    before = dict(wasm.dev.fallbacks)
    sess = edgerun.InferenceSession(path, providers=[wasm, "cpu"])
    got = sess.run(None, feeds)
    assert len(got) == len(expected)
    for arg, g, e in zip(sess.get_outputs(), got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape, arg.name
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=f"{name}: {arg.name}")
    off_wasm = sorted({n["op_type"] for n in sess.explain()["nodes"] if n["provider"] != "wasm"})
    assert not off_wasm, f"{name}: {off_wasm} ran off wasm"              # every node on wasm
    assert wasm.dev.fallbacks == before, f"{name}: CPU kernels ran for {wasm.dev.fallbacks}"


def test_explain_names_wasm_placements_and_refusals(wasm):
    from onnx import TensorProto, helper

    import edgerun

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 3, 3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 2, 1, 1, 1, 1], [1.0, 0, 0, 1.0])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "w"], ["c"], name="conv4d",
                              kernel_shape=[1, 1, 1, 1]),
             helper.make_node("Exp", ["c"], ["y"], name="exp")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], initializer=[w]),
                              opset_imports=[helper.make_opsetid("", 17)])
    sess = edgerun.InferenceSession(model.SerializeToString(), providers=["wasm", "cpu"])
    info = {n["node"]: n for n in sess.explain()["nodes"]}
    assert info["relu"]["provider"] == "wasm" and info["exp"]["provider"] == "wasm"
    assert info["conv4d"]["provider"] == "cpu"
    assert info["conv4d"]["refused_by"] == [
        "wasm: Conv over 4 spatial dimensions (the wasm kernels do 1-D, 2-D and 3-D)"]
    xv = np.random.default_rng(0).standard_normal((1, 2, 3, 3, 3, 3)).astype(np.float32)
    (got,) = sess.run(None, {"x": xv})
    np.testing.assert_allclose(got, np.exp(np.maximum(xv, 0)), rtol=1e-6)
    assert sess.explain()["copies_per_run"] == 4     # x up, r down, c up, y down


def _string_transpose_model() -> bytes:
    """Transpose, which wasm claims, on a string tensor, which linear memory cannot hold."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.STRING, [2, 2])
    y = helper.make_tensor_value_info("y", TensorProto.STRING, None)
    graph = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], name="tr")], "g",
                              [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]) \
        .SerializeToString()


def test_a_node_refused_at_run_time_runs_on_the_next_provider(wasm):
    """The kernel refuses inputs it cannot hold (errors.KernelRefused); the executor runs the
    node on the next provider that claims it (runtime/refusals.py), counted in the refusing
    provider's stats, named by explain(); no provider calls another's kernels."""
    import edgerun

    sess = edgerun.InferenceSession(_string_transpose_model(), providers=[wasm, "cpu"])
    (node,) = sess.explain()["nodes"]
    assert (node["provider"], node["falls_back_to"]) == ("wasm", "cpu")
    x = np.array([["a", "b"], ["c", "d"]], dtype=object)
    before = wasm.dev.fallbacks.get("Transpose", 0)
    for _ in range(2):
        (y,) = sess.run(None, {"x": x})
        assert y.tolist() == [["a", "c"], ["b", "d"]]
    assert wasm.dev.fallbacks.get("Transpose", 0) == before + 2


def test_a_refusal_with_no_later_provider_names_the_node_and_the_types():
    """Without numpy (a page) no CPU provider follows wasm: the run fails naming the node."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['numpy'] = None\n"
            "import warnings; warnings.simplefilter('ignore')\n"
            "import edgerun\n"
            "from edgerun.ir.host_tensor import HostTensor\n"
            "s = edgerun.InferenceSession(sys.stdin.buffer.read(), providers=['wasm'])\n"
            "print(s.explain()['nodes'][0]['falls_back_to'])\n"
            "try:\n"
            "    s.run(None, {'x': HostTensor(8, (2, 2), ['a', 'b', 'c', 'd'])})\n"
            "except edgerun.NotImplementedOp as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], input=_string_transpose_model(),
                         capture_output=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr.decode()
    first, message = out.stdout.decode().splitlines()[:2]
    assert first == "None"
    assert "node 'tr' (Transpose)" in message and "no later provider" in message, message


def test_runs_without_numpy(wasm):
    """The wasm provider needs no numpy: HostTensors in and out (what Pyodide here has)."""
    import subprocess
    import sys

    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 4], [0.5] * 12)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Relu", ["m"], ["r"]),
             helper.make_node("Softmax", ["r"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], initializer=[w]),
                              opset_imports=[helper.make_opsetid("", 17)])
    code = ("import sys; sys.modules['numpy'] = None\n"
            "import struct, warnings; warnings.simplefilter('ignore')\n"
            "import edgerun\n"
            "from edgerun.ir.host_tensor import HostTensor\n"
            "s = edgerun.InferenceSession(sys.stdin.buffer.read(), providers=['wasm'])\n"
            "x = HostTensor(1, (2, 3), struct.pack('6f', 1, 2, 3, -4, -5, -6))\n"
            "(y,) = s.run(None, {'x': x})\n"
            "print(type(y).__name__, list(y.shape), struct.unpack('8f', y.data))\n")
    out = subprocess.run([sys.executable, "-c", code], input=model.SerializeToString(),
                         capture_output=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().split()[:3] == ["HostTensor", "[2,", "4]"]
    values = [float(v) for v in out.stdout.decode().split("(")[1].rstrip(")\n").split(",")]
    np.testing.assert_allclose(values, [0.25] * 8, rtol=1e-6)


CUSTOM_OP_WITHOUT_NUMPY = """
import sys; sys.modules['numpy'] = None
import struct, warnings; warnings.simplefilter('ignore')
import edgerun
from edgerun.custom_ops import PyCustomOpDef, get_library_path, onnx_op
from edgerun.ir.host_tensor import HostTensor

@onnx_op(op_type="AffineNoNumpy", inputs=[PyCustomOpDef.dt_float],
         outputs=[PyCustomOpDef.dt_float, PyCustomOpDef.dt_string], attrs={"alpha": PyCustomOpDef.dt_float})
def affine(x, alpha=1.0):
    assert isinstance(x, HostTensor), type(x)
    labels = ["neg" if v < 0 else "pos" for v in x.values()]
    return (HostTensor.from_values(1, x.shape, [alpha * v + 1 for v in x.values()]),
            HostTensor(8, x.shape, labels))

options = edgerun.SessionOptions()
options.register_custom_ops_library(get_library_path())
s = edgerun.InferenceSession(sys.stdin.buffer.read(), options, providers=['wasm'])
for run in range(2):                 # the second run would replay a recorded program
    x = HostTensor(1, (2, 2), struct.pack('4f', 1, -2, 3, -4 - run))
    y, label = s.run(None, {'x': x})
    print(list(y.shape), struct.unpack('4f', y.data), list(label.data))
"""


def test_python_custom_operators_run_on_wasm_without_numpy(wasm):
    """In a page the wasm provider runs registered Python custom operators: on HostTensors
    when numpy is absent, string results included, with wasm kernels around them."""
    import subprocess
    import sys

    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("AffineNoNumpy", ["x"], ["a", "label"], domain="ai.onnx.contrib",
                              alpha=2.0),
             helper.make_node("Add", ["a", "r"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2]),
                               helper.make_tensor_value_info("label", TensorProto.STRING, [2, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.contrib", 1)])
    out = subprocess.run([sys.executable, "-c", CUSTOM_OP_WITHOUT_NUMPY],
                         input=model.SerializeToString(), capture_output=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr.decode()
    lines = out.stdout.decode().strip().splitlines()
    assert lines == ["[2, 2] (4.0, -3.0, 10.0, -7.0) ['pos', 'neg', 'pos', 'neg']",
                     "[2, 2] (4.0, -3.0, 10.0, -9.0) ['pos', 'neg', 'pos', 'neg']"]


@pytest.mark.slow
def test_real_models_run_on_wasm_alone_without_numpy(wasm, tmp_path):
    """bench/web/run_cases.py blocks numpy, then runs every real model through the web
    bridge with providers ["wasm"]: every node must run there, and match the CPU provider."""
    import subprocess
    import sys

    from test_pyodide import assert_matches_cpu

    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from bench.web.cases import read_results, write_cases

    names = sorted(_real_models())
    cases = write_cases(names, str(tmp_path / "cases"))
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "web", "run_cases.py"),
                           cases, str(tmp_path / "out"), "--repeat", "2"], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = read_results(str(tmp_path / "out"))
    failures = []
    for name in names:
        try:
            assert_matches_cpu(name, results[name])     # the second run's outputs: a replay
            programs = results[name]["programs"]["wasm"]
            assert programs["recorded"] == 1 and programs["replayed"] == 1, (name, programs)
        except AssertionError as e:
            failures.append(str(e)[:500])
    assert not failures, "\n".join(failures)


# ---- operators for numpy-free graphs -------------------------------------------------------

def _run_both(nodes, inputs, outputs, feeds, opset=17, initializers=(), extra_opsets=()):
    """Run a small graph on wasm alone (optimizer off, as in Pyodide) and on onnxruntime."""
    import onnxruntime
    from onnx import helper

    import edgerun

    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    *extra_opsets])
    model.ir_version = 8
    data = model.SerializeToString()
    so = edgerun.SessionOptions()
    so.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = edgerun.InferenceSession(data, so, providers=["wasm"])
    assert {n["provider"] for n in sess.explain()["nodes"]} == {"wasm"}, sess.explain()
    got = sess.run(None, feeds)
    expected = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(
        None, feeds)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, g.shape, e.dtype, e.shape)
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    return got


def _vi(name, elem, shape):
    from onnx import helper
    return helper.make_tensor_value_info(name, elem, shape)


def test_shape_arithmetic_and_logic_on_host_values(wasm):
    from onnx import TensorProto as T
    from onnx import helper

    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["i"], value=helper.make_tensor("i", T.INT64, [1], [2])),
        helper.make_node("Gather", ["s", "i"], ["last"]),
        helper.make_node("Constant", [], ["two"], value_int=2),
        helper.make_node("Mul", ["last", "two"], ["twice"]),
        helper.make_node("Div", ["twice", "two"], ["back"]),
        helper.make_node("Equal", ["back", "last"], ["same"]),
        helper.make_node("Not", ["same"], ["differ"]),
        helper.make_node("Cast", ["same"], ["same_i"], to=T.INT32),
        helper.make_node("Size", ["x"], ["n"]),
        helper.make_node("Constant", [], ["zero"], value_int=0),
        helper.make_node("Constant", [], ["one"], value_int=1),
        helper.make_node("Range", ["zero", "n", "one"], ["r"]),
        helper.make_node("Less", ["r", "last"], ["lt"]),
        helper.make_node("Where", ["lt", "r", "n"], ["w"]),
        helper.make_node("ConstantOfShape", ["s"], ["ones"],
                         value=helper.make_tensor("v", T.FLOAT, [1], [1.5])),
        helper.make_node("Greater", ["x", "ones"], ["gt"]),
        helper.make_node("Where", ["gt", "x", "ones"], ["wx"]),
        helper.make_node("Xor", ["gt", "gt"], ["none"]),
    ]
    outs = [_vi("differ", T.BOOL, None), _vi("same_i", T.INT32, None), _vi("w", T.INT64, None),
            _vi("wx", T.FLOAT, None), _vi("none", T.BOOL, None), _vi("twice", T.INT64, None)]
    got = _run_both(nodes, [_vi("x", T.FLOAT, [2, 3, 4])], outs, {"x": x})
    assert got[2].tolist()[:5] == [0, 1, 2, 3, 24]


@pytest.mark.parametrize("mode,pads", [("constant", [0, 2, 1, 3]), ("reflect", [1, 3, 0, 2]),
                                       ("edge", [2, 1, 1, 2]), ("wrap", [1, 2, 1, 3]),
                                       ("constant", [-1, 1, 0, -2])])
def test_pad_modes(wasm, mode, pads):
    from onnx import TensorProto as T
    from onnx import helper

    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    init = [helper.make_tensor("p", T.INT64, [4], pads),
            helper.make_tensor("v", T.FLOAT, [], [7.0])]
    node = helper.make_node("Pad", ["x", "p", "v"], ["y"], mode=mode)
    _run_both([node], [_vi("x", T.FLOAT, [4, 5])], [_vi("y", T.FLOAT, None)], {"x": x},
              initializers=init)


def test_split_cast_dropout_argmax_lrn(wasm):
    from onnx import TensorProto as T
    from onnx import helper

    x = np.random.default_rng(0).standard_normal((2, 6, 3, 5)).astype(np.float32)
    nodes = [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3),
             helper.make_node("Split", ["x", "sizes"], ["p", "q"], axis=2),
             helper.make_node("Split", ["x"], ["u", "v"], axis=0, num_outputs=2),   # views
             helper.make_node("Dropout", ["x"], ["d", "mask"]),
             helper.make_node("ArgMax", ["x"], ["am"], axis=1, keepdims=0),
             helper.make_node("ArgMin", ["x"], ["an"], axis=3, select_last_index=1),
             helper.make_node("LRN", ["x"], ["l"], size=3, alpha=1e-2, beta=0.75, bias=2.0),
             helper.make_node("Cast", ["am"], ["amf"], to=T.DOUBLE),
             helper.make_node("Cast", ["x"], ["xi"], to=T.INT8)]
    outs = [_vi(n, t, None) for n, t in [("a", T.FLOAT), ("c", T.FLOAT), ("q", T.FLOAT), ("v", T.FLOAT),
                                         ("d", T.FLOAT), ("mask", T.BOOL), ("am", T.INT64),
                                         ("an", T.INT64), ("l", T.FLOAT), ("amf", T.DOUBLE),
                                         ("xi", T.INT8)]]
    _run_both(nodes, [_vi("x", T.FLOAT, [2, 6, 3, 5])], outs, {"x": x * 3}, opset=18,
              initializers=[helper.make_tensor("sizes", T.INT64, [2], [1, 2])])


@pytest.mark.parametrize("direction,peepholes", [("forward", False), ("reverse", True),
                                                 ("bidirectional", False)])
def test_lstm(wasm, direction, peepholes):
    from onnx import TensorProto as T
    from onnx import helper

    rng = np.random.default_rng(1)
    seq, batch, inp, hid = 5, 3, 7, 6
    dirs = 2 if direction == "bidirectional" else 1
    weights = {"W": (dirs, 4 * hid, inp), "R": (dirs, 4 * hid, hid), "B": (dirs, 8 * hid),
               "h0": (dirs, batch, hid), "c0": (dirs, batch, hid), "P": (dirs, 3 * hid)}
    init = [helper.make_tensor(k, T.FLOAT, s, (rng.standard_normal(s) * 0.4).reshape(-1))
            for k, s in weights.items()]
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0",
                                     "P" if peepholes else ""], ["y", "yh", "yc"],
                            hidden_size=hid, direction=direction, clip=3.0)
    x = rng.standard_normal((seq, batch, inp)).astype(np.float32)
    outs = [_vi(n, T.FLOAT, None) for n in ("y", "yh", "yc")]
    _run_both([node], [_vi("x", T.FLOAT, [seq, batch, inp])], outs, {"x": x},
              initializers=init)


def test_if_runs_the_chosen_branch_on_wasm(wasm):
    from onnx import TensorProto as T
    from onnx import helper

    def branch(name, op):
        return helper.make_graph([helper.make_node(op, ["x"], [f"{name}_y"])], name, [],
                                 [_vi(f"{name}_y", T.FLOAT, None)])

    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Constant", [], ["z"], value_float=0.0),
             helper.make_node("Greater", ["s", "z"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=branch("then", "Relu"),
                              else_branch=branch("else", "Neg"))]
    for sign in (1, -1):
        x = (np.arange(6, dtype=np.float32) - 1) * sign
        _run_both(nodes, [_vi("x", T.FLOAT, [6])], [_vi("y", T.FLOAT, None)], {"x": x})


def test_scaler_and_array_feature_extractor(wasm):
    from onnx import TensorProto as T
    from onnx import helper

    nodes = [helper.make_node("Scaler", ["x"], ["s"], domain="ai.onnx.ml",
                              offset=[1.0, 2.0, 3.0], scale=[0.5, 2.0, -1.0]),
             helper.make_node("ArgMax", ["s"], ["i"], axis=1),
             helper.make_node("ArrayFeatureExtractor", ["labels", "i"], ["l"],
                              domain="ai.onnx.ml")]
    init = [helper.make_tensor("labels", T.INT64, [3], [10, 20, 30])]
    x = np.random.default_rng(2).standard_normal((4, 3)).astype(np.float32)
    got = _run_both(nodes, [_vi("x", T.FLOAT, [4, 3])],
                    [_vi("s", T.FLOAT, None), _vi("l", T.INT64, None)], {"x": x},
                    initializers=init, extra_opsets=[helper.make_opsetid("ai.onnx.ml", 1)])
    assert got[1].shape == (1, 4)


# ---- graph capture: recorded programs (where numpy is absent) -----------------------------

def _model_bytes(nodes, inputs, outputs, initializers=(), opset=17):
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


# Runs in a Python with numpy blocked (the Pyodide path): one session on the wasm provider
# alone (options from argv), every feed set of stdin's JSON run in turn; prints the outputs
# (or the error) of each run and the provider's program counts, as JSON.
NUMPY_FREE_RUNS = """
import base64, gc, json, sys
sys.modules["numpy"] = None
import warnings; warnings.simplefilter("ignore")
import edgerun
from edgerun.ir.host_tensor import HostTensor
job = json.loads(sys.stdin.read())
sess = edgerun.InferenceSession(base64.b64decode(job["model"]),
                                providers=[("wasm", job["options"])])
provider = sess._providers[0]
before = provider.dev.bytes_in_use()
runs = []
for feeds in job["feeds"]:
    values = {k: HostTensor(t, shape, base64.b64decode(b)) for k, (t, shape, b) in feeds.items()}
    try:
        runs.append([[o.elem_type, list(o.shape), base64.b64encode(bytes(o.data)).decode()]
                     for o in sess.run(None, values)])
    except edgerun.Fail as e:
        runs.append(str(e))
held = provider.dev.bytes_in_use() - before
del sess
gc.collect()
print(json.dumps({"runs": runs, "programs": provider.stats["programs"], "held": held,
                  "after": provider.dev.bytes_in_use() - before}))
"""


def _numpy_free_runs(model: bytes, feed_sets: list, capture: bool = True) -> dict:
    import base64
    import subprocess
    import sys

    from edgerun.ir import dtypes

    def encode(x):
        x = np.array(x, order="C")          # ascontiguousarray would make scalars 1-D
        return [dtypes.BY_NUMPY[x.dtype.name].code, list(x.shape),
                base64.b64encode(x.tobytes()).decode()]

    job = {"model": base64.b64encode(model).decode(), "options": {"graph_capture": capture},
           "feeds": [{k: encode(v) for k, v in feeds.items()} for feeds in feed_sets]}
    out = subprocess.run([sys.executable, "-c", NUMPY_FREE_RUNS], input=json.dumps(job),
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.splitlines()[-1])
    for i, run in enumerate(result["runs"]):
        if isinstance(run, list):
            result["runs"][i] = [np.frombuffer(base64.b64decode(b), dtypes.numpy_dtype(t))
                                 .reshape(shape) for t, shape, b in run]
    return result


def _check_against_onnxruntime(model: bytes, feed_sets: list, runs: list) -> None:
    import onnxruntime

    ort = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    for i, (feeds, got) in enumerate(zip(feed_sets, runs)):
        for g, e in zip(got, ort.run(None, feeds)):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=f"run {i}")


def _captured_and_plain_runs(model: bytes, feed_sets: list) -> tuple:
    """(captured, plain) numpy-free runs of `model`, with and without graph capture: the
    captured runs equal the node-by-node ones exactly, and onnxruntime."""
    captured = _numpy_free_runs(model, feed_sets)
    plain = _numpy_free_runs(model, feed_sets, capture=False)
    for i, (got, expected) in enumerate(zip(captured["runs"], plain["runs"])):
        np.testing.assert_array_equal(got[0], expected[0], err_msg=f"run {i}")
    _check_against_onnxruntime(model, feed_sets, captured["runs"])
    return captured, plain


def test_replayed_programs_match_node_by_node_runs(wasm):
    """Conv, shape arithmetic into a Reshape, Gather, Softmax: later runs of a signature
    replay its program, and equal node-by-node runs (and onnxruntime) for new data, a new
    shape, and the first shape again."""
    from onnx import TensorProto as T
    from onnx import helper

    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Shape", ["c"], ["s"]),
             helper.make_node("Gather", ["s", "keep"], ["nc"]),
             helper.make_node("Concat", ["nc", "minus1"], ["flat"], axis=0),
             helper.make_node("Reshape", ["c", "flat"], ["r"]),
             helper.make_node("Gather", ["r", "idx"], ["g"], axis=2),
             helper.make_node("Softmax", ["g"], ["y"], axis=2)]
    init = [helper.make_tensor("w", T.FLOAT, [4, 3, 3, 3], rng.standard_normal(108).tolist()),
            helper.make_tensor("keep", T.INT64, [2], [0, 1]),
            helper.make_tensor("minus1", T.INT64, [1], [-1]),
            helper.make_tensor("idx", T.INT64, [3], [7, 0, 2])]
    model = _model_bytes(nodes, [_vi("x", T.FLOAT, [1, 3, "h", "w"])],
                         [_vi("y", T.FLOAT, None)], init)
    shapes = [(1, 3, 6, 5), (1, 3, 6, 5), (1, 3, 6, 5), (1, 3, 3, 4), (1, 3, 3, 4), (1, 3, 6, 5)]
    feed_sets = [{"x": rng.standard_normal(s).astype(np.float32)} for s in shapes]
    captured, plain = _captured_and_plain_runs(model, feed_sets)
    assert captured["programs"] == {"recorded": 2, "replayed": 4, "refused": {}}
    assert plain["programs"] == {"recorded": 0, "replayed": 0, "refused": {}}
    assert captured["held"] > 0 and captured["after"] <= 0     # programs give memory back


def test_every_program_kernel_has_a_case_in_the_program_runner():
    """A kernel listed in kernels.h's KERNELS but missing from er_run_program's switch makes
    every program calling it fail at replay (runs then fall back to node by node, silently
    slow): each one needs its case."""
    import re

    with open(os.path.join(ROOT, "wasm_kernels", "kernels.h")) as f:
        header = f.read()
    listed = re.findall(r"X\((er_\w+)\)", header[header.index("#define KERNELS"):
                                               header.index("void er_memcpy")])
    with open(os.path.join(ROOT, "wasm_kernels", "program.c")) as f:
        runner = f.read()
    missing = [name for name in listed if f"case OP_{name}" not in runner]
    assert listed and not missing, f"no case in er_run_program for {missing}"


def test_dynamic_quantized_products_replay_as_programs(wasm):
    """quantize_dynamic's per-product form (DynamicQuantizeLinear, MatMulInteger, Cast, Mul,
    Add; fused into MatMulIntegerToFloat) reads nothing back to the host, so its runs after
    the first replay one program, equal to node-by-node runs and to onnxruntime."""
    from onnx import TensorProto as T
    from onnx import helper

    rng = np.random.default_rng(8)
    weights = rng.integers(-127, 128, (24, 10)).astype(np.int8)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("MatMulInteger", ["xq", "w", "xz", "wz"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["accf"], to=T.FLOAT),
             helper.make_node("Mul", ["xs", "ws"], ["scale"]),
             helper.make_node("Mul", ["accf", "scale"], ["scaled"]),
             helper.make_node("Add", ["b", "scaled"], ["y"])]
    init = [helper.make_tensor("w", T.INT8, [24, 10], weights.reshape(-1).tolist()),
            helper.make_tensor("wz", T.INT8, [], [0]),
            helper.make_tensor("ws", T.FLOAT, [], [0.02]),
            helper.make_tensor("b", T.FLOAT, [10], rng.standard_normal(10).tolist())]
    model = _model_bytes(nodes, [_vi("x", T.FLOAT, [1, "n", 24])], [_vi("y", T.FLOAT, None)],
                         init, opset=13)
    feed_sets = [{"x": rng.standard_normal((1, n, 24)).astype(np.float32)}
                 for n in (5, 5, 5, 1, 1)]
    captured, _ = _captured_and_plain_runs(model, feed_sets)
    assert captured["programs"] == {"recorded": 2, "replayed": 3, "refused": {}}


def test_if_programs(wasm):
    """If branches hand their outputs back without a copy out and in, so an If on a
    shape-derived condition is replayed; an If on a condition computed from the data is
    refused, and each run takes the branch its own data picks."""
    from onnx import TensorProto as T
    from onnx import helper

    def branch(name, op):
        return helper.make_graph([helper.make_node(op, ["x"], [f"{name}_y"])], name, [],
                                 [_vi(f"{name}_y", T.FLOAT, None)])

    def model(condition_nodes):
        nodes = condition_nodes + [
            helper.make_node("If", ["c"], ["b"], then_branch=branch("then", "Relu"),
                             else_branch=branch("else", "Neg")),
            helper.make_node("Mul", ["b", "b"], ["y"])]
        return _model_bytes(nodes, [_vi("x", T.FLOAT, ["n"])], [_vi("y", T.FLOAT, None)],
                            [helper.make_tensor("z", T.FLOAT, [], [0.0]),
                             helper.make_tensor("four", T.INT64, [], [4])])

    by_shape = model([helper.make_node("Size", ["x"], ["n"]),
                      helper.make_node("Greater", ["n", "four"], ["c"])])
    by_data = model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                     helper.make_node("Greater", ["s", "z"], ["c"])])
    feed_sets = [{"x": (np.arange(n, dtype=np.float32) - 1) * sign}
                 for n, sign in [(6, 1), (6, -1), (6, 1), (3, -1), (3, 1), (6, -1)]]
    for model, programs in [
            (by_shape, {"recorded": 2, "replayed": 4, "refused": {}}),
            (by_data, {"recorded": 0, "replayed": 0,
                       "refused": {"the host read a value computed during the run": 2}})]:
        result = _numpy_free_runs(model, feed_sets)
        _check_against_onnxruntime(model, feed_sets, result["runs"])
        assert result["programs"] == programs


def test_replayed_kernel_error_names_the_node(wasm):
    """Gather indices too many to keep on the host (> 64) live only on the device: a bad
    index in a replay fails the program, and the node-by-node rerun raises its error."""
    from onnx import TensorProto as T
    from onnx import helper

    model = _model_bytes([helper.make_node("Gather", ["x", "i"], ["y"], name="pick")],
                         [_vi("x", T.FLOAT, [5]), _vi("i", T.INT64, [80])],
                         [_vi("y", T.FLOAT, None)])
    x = np.arange(5, dtype=np.float32)
    good = np.arange(80, dtype=np.int64) % 5
    bad = good.copy()
    bad[70] = 9
    result = _numpy_free_runs(model, [{"x": x, "i": good}, {"x": x, "i": good},
                                      {"x": x, "i": bad}, {"x": x, "i": good}])
    first, replayed, failed, again = result["runs"]
    for got in (first, replayed, again):
        np.testing.assert_array_equal(got[0], x[good])
    assert "pick" in failed and "(position 70) is out of range" in failed, failed
    assert result["programs"] == {"recorded": 1, "replayed": 2, "refused": {}}


REPLAYED_FLOOR = 1400        # passing conformance cases that replay a recorded program


def test_conformance_cases_replay_without_numpy(wasm):
    """Every conformance case the provider passes, run without numpy (tests/numpy_free.py)
    three times per input set (record, then replays) and once more with capture off, gives
    the expected outputs every time: strings, sequences and optionals included."""
    import subprocess
    import sys

    cases = numpy_free.passing_cases(wasm)
    for capture, repeat in ((True, 3), (False, 1)):
        job = numpy_free.job(cases, {"graph_capture": capture}, repeat)
        out = subprocess.run([sys.executable, "-c", numpy_free.SUBPROCESS_SCRIPT],
                             capture_output=True, input=json.dumps(job), text=True, cwd=ROOT,
                             timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        errors, problems, replayed = numpy_free.check(cases, json.loads(out.stdout.splitlines()[-1]))
        assert not errors, "\n".join(f"{k}: {v}" for k, v in sorted(errors.items()))
        assert not problems, "\n".join(problems)
        if capture:
            assert replayed >= REPLAYED_FLOOR, f"only {replayed} cases replayed"


# ---- typed elementwise kernels (map.c) -----------------------------------------------------

def test_typed_kernel_codes_match_the_c_enums():
    import re

    from edgerun.providers.wasm.ops.elementwise import MAP_BINARY, MAP_UNARY

    def enum_of(file):
        with open(os.path.join(ROOT, "wasm_kernels", file)) as f:
            return re.findall(r"enum \{([^}]*)\}", f.read())[0]

    def names(body, prefix):
        return [re.sub(r"\s*=.*", "", n).strip()[len(prefix):].replace("_", "").lower()
                for n in body.split(",") if n.strip()]
    assert names(enum_of("unary_ops.h"), "M_") == [n.lower() for n in MAP_UNARY]
    assert names(enum_of("map.c"), "B_") == [n.lower() for n in MAP_BINARY]


TYPED_UNARY = {      # op -> element types it is checked on (float32 too where no SIMD loop)
    "Sin": "float32 float64 float16", "Cos": "float32 float64", "Tan": "float32 float64",
    "Asin": "float32 float64", "Acos": "float32 float64", "Atan": "float32 float64",
    "Sinh": "float32 float64", "Cosh": "float32 float64", "Asinh": "float32 float64",
    "Acosh": "float32 float64", "Atanh": "float32 float64", "Sign": "float32 int32 int8 float64",
    "Round": "float32 float64", "Abs": "int32 int64 int8 float64 float16 uint8",
    "Neg": "int32 int64 float64 float16", "Exp": "float64 float16", "Log": "float64",
    "Sqrt": "float64", "Sigmoid": "float64 float16", "Tanh": "float64", "Erf": "float64",
    "Relu": "float64 int32 int8", "Mish": "float32 float64", "Selu": "float32 float64",
    "Celu": "float32", "ThresholdedRelu": "float32 float64", "Softplus": "float64",
    "Shrink": "float32 float64 int32", "IsInf": "float32 float64",
    "IsNaN": "float16 float64 float32",
    "BitwiseNot": "int32 uint8 int64 uint16", "Floor": "float64", "Ceil": "float16",
    "HardSwish": "float64", "LeakyRelu": "float64", "Softsign": "float64",
}
TYPED_BINARY = {
    "Add": "int32 int8 uint8 float64 float16 uint64", "Sub": "int16 float64 bfloat16",
    "Mul": "int32 uint32 float64 float16", "Div": "int32 int64 uint8 float64 float16",
    "Max": "int32 uint64 float64 float16", "Min": "int8 uint16 float64", "Pow": "int32 float64",
    "Mod": "int32 int64 int8 float32 float64", "BitShift": "uint8 uint32 uint64",
    "BitwiseAnd": "int32 uint8", "BitwiseOr": "int64 uint16", "BitwiseXor": "int8 uint64",
    "PRelu": "float64 int32",
}


def _typed_values(rng, dtype, shape, op, second=False):
    kind = np.dtype(dtype).kind if dtype != "bfloat16" else "f"
    if kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = (0, np.iinfo(dtype).bits) if op == "BitShift" and second else \
            (max(info.min, -50), min(info.max, 50)) if op in ("Pow", "Mul") else \
            (info.min, info.max)
        v = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64 if kind == "i"
                         else np.uint64).astype(dtype)
        if op == "Pow" and second:
            v = rng.integers(0, 4, size=shape).astype(dtype)
        if op in ("Div", "Mod") and second:
            v[v == 0] = 3
        return v
    ranges = {"Asin": (-1, 1), "Acos": (-1, 1), "Atanh": (-0.99, 0.99), "Acosh": (1, 20),
              "Log": (0.01, 50), "Sqrt": (0, 50), "Pow": (0.1, 3)}
    lo, hi = ranges.get(op, (-6, 6))
    v = rng.uniform(lo, hi, size=shape)
    if op == "IsInf" or op == "IsNaN":
        v.flat[::3] = np.inf
        v.flat[1::5] = -np.inf
        v.flat[2::7] = np.nan
    if op in ("Div", "Mod") and second:
        v[np.abs(v) < 0.1] = 0.5
    if dtype == "bfloat16":
        import ml_dtypes
        return v.astype(ml_dtypes.bfloat16)
    return v.astype(dtype)


def _single_node(op, dtypes_in, attrs, out_dtype):
    from onnx import TensorProto, helper
    from onnx.helper import np_dtype_to_tensor_dtype

    def tt(d):
        if d == "bfloat16":
            return TensorProto.BFLOAT16
        return np_dtype_to_tensor_dtype(np.dtype(d))
    names = [f"x{i}" for i in range(len(dtypes_in))]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, tt(d), None)
                                            for n, d in zip(names, dtypes_in)],
                              [helper.make_tensor_value_info("y", tt(out_dtype), None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22 if op not in (
        "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot") else 18)]).SerializeToString()


def _typed_cases():
    for op, types in TYPED_UNARY.items():
        for dtype in types.split():
            yield f"{op}-{dtype}"
    for op, types in TYPED_BINARY.items():
        for dtype in types.split():
            yield f"{op}-{dtype}"


@pytest.mark.parametrize("case", list(_typed_cases()))
def test_typed_elementwise_matches_the_cpu_provider(wasm, case):
    """Each operator and type through er_map_unary/er_map_binary (broadcast operands, batch 1
    and a strided transposed input) against the CPU provider: float16/bfloat16 to 1 ulp
    (rtol 1e-2), other floats rtol 1e-6 (atol 1e-12), integers exactly."""
    import edgerun

    op, dtype = case.split("-")
    rng = np.random.default_rng(len(case))
    binary = op in TYPED_BINARY
    attrs = {}
    if op == "Mod" and dtype.startswith("float"):
        attrs["fmod"] = 1
    if op == "BitShift":
        attrs["direction"] = "RIGHT" if dtype == "uint32" else "LEFT"
    if op == "IsInf" and dtype == "float32":
        attrs["detect_negative"] = 0
    out = "bool" if op in ("IsInf", "IsNaN") else dtype
    model = _single_node(op, [dtype] * (2 if binary else 1), attrs, out)
    # (2, 19): past the 16-lane predicate loops of IsNaN / IsInf, with a tail
    for shapes in ([(1, 7)] * (2 if binary else 1), [(3, 1, 5), (4, 5)][:2 if binary else 1],
                   [(2, 19)] * (2 if binary else 1)):
        feeds = {"x0": _typed_values(rng, dtype, shapes[0], op)}
        if binary:
            feeds["x1"] = _typed_values(rng, dtype, shapes[1], op, second=True)
        before = dict(wasm.dev.fallbacks)
        got = edgerun.InferenceSession(model, providers=[wasm]).run(None, feeds)[0]
        assert wasm.dev.fallbacks == before, "ran through the numpy CPU kernel"
        want = edgerun.InferenceSession(model, providers=["cpu"]).run(None, feeds)[0]
        assert got.dtype == want.dtype and got.shape == want.shape
        if got.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want)
        else:
            rtol = 1e-2 if got.dtype.itemsize == 2 else 1e-6
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=rtol, atol=1e-12 if rtol < 1e-3 else 1e-3)


@pytest.mark.parametrize("src", ["int32", "uint8", "int8"])
def test_cast_of_integers_to_float32_rounds_as_numpy(wasm, src):
    """Cast int32 / uint8 / int8 -> float32 (the vector loops integer products and 8-bit
    tensors take): past a whole vector and a tail, int32 beyond 2**24 rounding to nearest
    even and the extremes; bit-exact against numpy."""
    import edgerun

    info = np.iinfo(src)
    x = np.random.default_rng(7).integers(info.min, info.max, 37, endpoint=True).astype(src)
    if src == "int32":
        x[:6] = [2**24 + 1, 2**24 + 3, -(2**24) - 1, info.min, info.max, 2**31 - 65]
    model = _single_node("Cast", [src], {"to": 1}, "float32")
    got = edgerun.InferenceSession(model, providers=[wasm]).run(None, {"x0": x})[0]
    np.testing.assert_array_equal(got.view(np.uint32), x.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("to", ["float16", "bfloat16"])
def test_cast_to_16_bit_floats_rounds_as_numpy(wasm, to):
    """Cast float32/float64 -> float16/bfloat16 and back: round to nearest even, subnormals,
    overflow to inf, NaN kept; bit-exact against numpy (ml_dtypes for bfloat16)."""
    import ml_dtypes
    from onnx import TensorProto

    import edgerun

    code = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}[to]
    target = np.float16 if to == "float16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(3)
    for src in ("float32", "float64"):
        x = np.concatenate([rng.standard_normal(500) * 10.0 ** rng.integers(-9, 6, 500),
                            [0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65520, 65519.99,
                             6e-8, 3e-8, 2.98e-8, 1e-45]]).astype(src)
        model = _single_node("Cast", [src], {"to": code}, to)
        got = edgerun.InferenceSession(model, providers=[wasm]).run(None, {"x0": x})[0]
        want = x.astype(target)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.view(np.uint16)[~np.isnan(want.astype(np.float32))],
                                      want.view(np.uint16)[~np.isnan(want.astype(np.float32))])
        assert np.isnan(got.astype(np.float32)[np.isnan(want.astype(np.float32))]).all()


def test_float16_float32_conversions_are_bit_exact_over_every_pattern(wasm):
    """er_cast's float16 <-> float32 loops (every widened float16 operator runs them): all
    65,536 float16 values widen exactly; float32 values of every exponent, the rounding
    boundaries (2^-14, 65504..65520, ties), random bit patterns and runs inside float16's
    range (the SIMD path, eight at a time) narrow as numpy does."""
    from onnx import TensorProto

    import edgerun

    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    widen = _single_node("Cast", ["float16"], {"to": TensorProto.FLOAT}, "float32")
    got = edgerun.InferenceSession(widen, providers=[wasm]).run(None, {"x0": halves})[0]
    want = halves.astype(np.float32)
    numbers = ~np.isnan(want)
    np.testing.assert_array_equal(got.view(np.uint32)[numbers], want.view(np.uint32)[numbers])
    assert np.isnan(got[~numbers]).all()

    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32)
    ties = (np.arange(1, 2048, dtype=np.uint32) << 13 | 0x1000) + (112 << 23)   # x.5 ulps
    edges = np.float32([2 ** -14, np.nextafter(np.float32(2 ** -14), 0), 65504, 65519.996,
                        65520, 65536, 1e-8, -0.0, 0.0, np.inf, -np.inf, np.nan])
    # runs of 8 inside float16's normal range take the SIMD path: every float16 value widened
    # (it must come back as itself), and magnitudes spread over that range
    inside = np.float32(np.exp(rng.uniform(np.log(6.2e-5), np.log(65000), 100_000)) *
                        rng.choice([-1, 1], 100_000))
    x = np.concatenate([bits.view(np.float32), ties.view(np.float32), edges,
                        halves.astype(np.float32), inside])
    narrow = _single_node("Cast", ["float32"], {"to": TensorProto.FLOAT16}, "float16")
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    got = edgerun.InferenceSession(narrow, providers=[wasm]).run(None, {"x0": x})[0]
    numbers = ~np.isnan(want)
    np.testing.assert_array_equal(got.view(np.uint16)[numbers], want.view(np.uint16)[numbers])
    assert np.isnan(got[~numbers]).all()


@pytest.mark.parametrize("op", ["Add", "Mul", "Div", "Erf", "Tanh", "Sigmoid"])
def test_float16_elementwise_runs_in_float32_and_matches_onnxruntime(wasm, op):
    """float16 operands take the float32 SIMD loops on widened copies (one rounding back to
    float16, as onnxruntime's CPU computes float16), broadcast included."""
    import onnxruntime as ort

    import edgerun

    rng = np.random.default_rng(11)
    binary = op in ("Add", "Mul", "Div")
    feeds = {"x0": (rng.standard_normal((3, 5, 64)) * 2).astype(np.float16)}
    if binary:
        feeds["x1"] = (rng.standard_normal(64) + 3).astype(np.float16)
    model = _single_node(op, ["float16"] * len(feeds), {}, "float16")
    session = edgerun.InferenceSession(model, providers=[wasm])
    assert {n["provider"] for n in session.explain()["nodes"]} == {"wasm"}
    got = session.run(None, feeds)[0]
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert got.dtype == np.float16 and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3,
                               atol=1e-3)


# ---- Attention ------------------------------------------------------------------------------

def _attention_model(rank, heads, kv_heads, attrs, mask, past, nonpad, outputs):
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info(n, f, None) for n in ("q", "k", "v")]
    names = ["q", "k", "v"]
    if mask or past or nonpad:
        names.append("mask" if mask else "")
        if mask:
            inputs.append(helper.make_tensor_value_info(
                "mask", TensorProto.BOOL if mask == "bool" else f, None))
    if past or nonpad:
        names += ["past_key", "past_value"] if past else ["", ""]
        if past:
            inputs += [helper.make_tensor_value_info(n, f, None) for n in ("past_key", "past_value")]
    if nonpad:
        names.append("nonpad")
        inputs.append(helper.make_tensor_value_info("nonpad", TensorProto.INT64, None))
    outs = ["y", "present_key", "present_value", "qk"][:outputs]
    if rank == 3:
        attrs = dict(attrs, q_num_heads=heads, kv_num_heads=kv_heads)
    node = helper.make_node("Attention", names, outs, **attrs)
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info(n, f, None) for n in outs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)]).SerializeToString()


ATTENTION_CASES = [   # (batch, rank, heads, kv heads, q len, kv len, attrs, mask, past, nonpad, outputs)
    (1, 4, 2, 2, 3, 5, {}, None, 0, 0, 1),
    (2, 4, 4, 2, 4, 4, {"is_causal": 1}, None, 0, 0, 1),
    (1, 3, 4, 1, 2, 6, {"scale": 0.3}, "bool", 0, 0, 1),
    (3, 3, 2, 2, 5, 5, {"softcap": 2.0, "qk_matmul_output_mode": 1}, "float", 0, 0, 4),
    (2, 4, 2, 1, 1, 3, {"is_causal": 1}, "float-short", 4, 0, 3),      # decode with a cache
    (1, 4, 4, 4, 2, 7, {"qk_matmul_output_mode": 3}, "bool", 0, 0, 4),
    (2, 4, 2, 2, 2, 6, {}, None, 0, 1, 1),                              # valid key counts
    (1, 4, 2, 2, 4, 4, {"qk_matmul_output_mode": 2, "is_causal": 1}, "float", 0, 0, 4),
    (2, 3, 3, 3, 4, 4, {"qk_matmul_output_mode": 0}, None, 2, 0, 4),
]


@pytest.mark.parametrize("case", range(len(ATTENTION_CASES)))
def test_attention_matches_the_cpu_provider(wasm, case):
    """Attention on wasm (er_attention) against the CPU provider (itself checked by the onnx
    conformance cases): 3-D and 4-D layouts, grouped heads, bool/float/short masks, causal,
    softcap, past key/value, valid key counts, every qk output mode; rtol 1e-5, atol 1e-6."""
    import edgerun

    batch, rank, hq, hkv, sq, skv, attrs, mask, past, nonpad, outputs = ATTENTION_CASES[case]
    rng = np.random.default_rng(case)
    d, dv = 10, 6                     # past whole 4-lane steps: the vector loops and tails

    def tensor(heads, seq, size):
        shape = (batch, heads, seq, size) if rank == 4 else (batch, seq, heads * size)
        return rng.standard_normal(shape).astype(np.float32)
    feeds = {"q": tensor(hq, sq, d), "k": tensor(hkv, skv, d), "v": tensor(hkv, skv, dv)}
    total = skv + past
    if mask:
        length = total - 2 if mask.endswith("short") else total
        if mask == "bool":
            feeds["mask"] = rng.random((sq, length)) > 0.3
        else:
            feeds["mask"] = np.where(rng.random((batch, 1, sq, length)) > 0.3, 0.0,
                                     -np.inf).astype(np.float32) + \
                rng.standard_normal((batch, 1, sq, length)).astype(np.float32)
    if past:
        feeds["past_key"] = rng.standard_normal((batch, hkv, past, d)).astype(np.float32)
        feeds["past_value"] = rng.standard_normal((batch, hkv, past, dv)).astype(np.float32)
    if nonpad:
        feeds["nonpad"] = rng.integers(sq, skv + 1, size=batch).astype(np.int64)
    model = _attention_model(rank, hq, hkv, attrs, mask, past, nonpad, outputs)
    before = dict(wasm.dev.fallbacks)
    sess = edgerun.InferenceSession(model, providers=[wasm])
    got = sess.run(None, feeds)
    assert wasm.dev.fallbacks == before
    assert [n["provider"] for n in sess.explain()["nodes"]] == ["wasm"]
    want = edgerun.InferenceSession(model, providers=["cpu"]).run(None, feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# ---- losses ---------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_losses_match_the_cpu_provider(wasm, op, reduction):
    """(N, C) and (N, C, d1, d2) scores, with and without weights and an ignore_index that
    some targets hit, int32 and int64 targets, the log-probability output; rtol 1e-5."""
    from onnx import TensorProto, helper

    import edgerun

    rng = np.random.default_rng(len(op) + len(reduction))
    for shape, weighted, ignore, t_type in (((1, 5), False, None, np.int64),
                                            ((4, 3, 2, 5), True, 1, np.int32),
                                            ((3, 6, 4), True, -1, np.int64)):
        x = rng.standard_normal(shape).astype(np.float32)
        target = rng.integers(0, shape[1], size=shape[:1] + shape[2:]).astype(t_type)
        if ignore is not None:
            target.flat[::3] = ignore
        names = ["x", "t"] + (["w"] if weighted else [])
        outs = ["loss"] + (["log_prob"] if op == "SoftmaxCrossEntropyLoss" else [])
        attrs = {"reduction": reduction}
        if ignore is not None:
            attrs["ignore_index"] = ignore
        tt = TensorProto.INT32 if t_type == np.int32 else TensorProto.INT64
        graph = helper.make_graph(
            [helper.make_node(op, names, outs, **attrs)], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
             helper.make_tensor_value_info("t", tt, None)] +
            ([helper.make_tensor_value_info("w", TensorProto.FLOAT, None)] if weighted else []),
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        feeds = {"x": x, "t": target}
        if weighted:
            feeds["w"] = rng.uniform(0.5, 2, size=shape[1]).astype(np.float32)
        before = dict(wasm.dev.fallbacks)
        got = edgerun.InferenceSession(model.SerializeToString(), providers=[wasm]).run(None, feeds)
        assert wasm.dev.fallbacks == before
        want = edgerun.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# ---- normalization --------------------------------------------------------------------------

@pytest.mark.parametrize("op,dtype,axis,scale_shape", [
    ("LayerNormalization", "float32", -1, "full"), ("LayerNormalization", "float16", 1, "last"),
    ("LayerNormalization", "float32", 0, "scalar"), ("RMSNormalization", "float32", -1, "full"),
    ("RMSNormalization", "float16", 2, "scalar"), ("LayerNormalization", "float64", -2, "full")])
def test_layer_and_rms_norm_match_the_cpu_provider(wasm, op, dtype, axis, scale_shape):
    """Y (and LayerNormalization's float32 Mean and InvStdDev) for batch 1 and 3, a scale and
    bias of the normalized shape, of its last axis or scalar; rtol 1e-5 (float16: 1e-2)."""
    from onnx import TensorProto, helper
    from onnx.helper import np_dtype_to_tensor_dtype

    import edgerun

    t = np_dtype_to_tensor_dtype(np.dtype(dtype))
    rng = np.random.default_rng(abs(axis) + len(op))
    layer = op == "LayerNormalization"
    outs = ["y", "mean", "inv"] if layer else ["y"]
    names = ["x", "scale"] + (["bias"] if layer else [])
    graph = helper.make_graph(
        [helper.make_node(op, names, outs, axis=axis, epsilon=1e-3)], "g",
        [helper.make_tensor_value_info(n, t, None) for n in names],
        [helper.make_tensor_value_info("y", t, None)] +
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs[1:]])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    for batch in (1, 3):
        x = (rng.standard_normal((batch, 4, 6)) * 3 + 1).astype(dtype)
        normalized = x.shape[axis:]
        pshape = {"full": normalized, "last": normalized[-1:], "scalar": (1,)}[scale_shape]
        feeds = {"x": x, "scale": rng.uniform(0.5, 2, pshape).astype(dtype)}
        if layer:
            feeds["bias"] = rng.standard_normal(pshape).astype(dtype)
        before = dict(wasm.dev.fallbacks)
        got = edgerun.InferenceSession(model.SerializeToString(), providers=[wasm]).run(None, feeds)
        assert wasm.dev.fallbacks == before
        want = edgerun.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            rtol = 1e-2 if g.dtype == np.float16 else 1e-5
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                       atol=rtol)


# ---- Resize ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["uint8", "float16", "int32"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_of_other_types_matches_the_cpu_provider(wasm, dtype, mode):
    """Images as uint8 (and float16, int32) through every mode: nearest gathers in the type,
    linear and cubic compute in float32 and round/saturate back, as the CPU kernel does
    (exactly equal for integers, float16 to 1 ulp); batch 1 and 2, up- and downsampling."""
    from onnx import TensorProto, helper
    from onnx.helper import np_dtype_to_tensor_dtype

    import edgerun

    t = np_dtype_to_tensor_dtype(np.dtype(dtype))
    rng = np.random.default_rng(len(dtype) + len(mode))
    graph = helper.make_graph(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode)], "g",
        [helper.make_tensor_value_info("x", t, None)], [helper.make_tensor_value_info("y", t, None)],
        [helper.make_tensor("scales", TensorProto.FLOAT, [4], [1.0, 1.0, 1.7, 0.6])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    for batch in (1, 2):
        x = (rng.uniform(0, 255, (batch, 3, 5, 9))).astype(dtype)
        before = dict(wasm.dev.fallbacks)
        got = edgerun.InferenceSession(model.SerializeToString(), providers=[wasm]).run(None, {"x": x})[0]
        assert wasm.dev.fallbacks == before
        want = edgerun.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, {"x": x})[0]
        assert got.dtype == want.dtype and got.shape == want.shape
        if dtype == "float16":
            np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3)
        else:
            np.testing.assert_array_equal(got, want)


# ---- quantization ---------------------------------------------------------------------------

@pytest.mark.parametrize("qtype,scale_type,layout", [
    ("uint8", "float32", "tensor"), ("int8", "float32", "axis"), ("int4", "float32", "block"),
    ("uint16", "float16", "axis"), ("float8e4m3fn", "float32", "tensor"),
    ("int8", "float32", "block"), ("int8", "float32", "tensor"), ("int16", "float32", "tensor")])
def test_quantize_and_dequantize_match_the_cpu_provider(wasm, qtype, scale_type, layout):
    """QuantizeLinear then DequantizeLinear with per-tensor, per-axis and blocked scales and
    zero points (random shapes, batch 1 and 3, a partial last block): integers exactly,
    float results rtol 1e-6 (float16 1e-3). A second pair, whose 8-bit tensor nothing else
    reads, is fused into com.edgerun QuantizeDequantize, which wasm runs too."""
    from onnx import helper

    import edgerun
    from edgerun.ir import dtypes

    rng = np.random.default_rng(len(qtype) + len(layout))
    q = dtypes.BY_NAME[qtype.upper()].code
    s = {"float32": dtypes.FLOAT, "float16": dtypes.FLOAT16}[scale_type]
    for batch in (1, 3):
        shape = (batch, 5, 7)
        axis, block = (1, 0) if layout == "axis" else (2, 3) if layout == "block" else (1, 0)
        pshape = {"tensor": (), "axis": (shape[1],),
                  "block": (batch, 5, -(-7 // 3))}[layout]
        scale = rng.uniform(0.01, 0.2, pshape).astype(np.float16 if s == dtypes.FLOAT16
                                                       else np.float32)
        is_float8 = qtype.startswith("float8")
        zp_values = np.zeros(pshape) if is_float8 else rng.integers(0, 3, pshape)
        zp = helper.make_tensor("zp", q, list(pshape), zp_values.reshape(-1).tolist())
        nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q"], axis=axis,
                                  block_size=block),
                 helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["y"], axis=axis,
                                  block_size=block),
                 helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q2"], axis=axis,
                                  block_size=block),
                 helper.make_node("DequantizeLinear", ["q2", "scale", "zp"], ["y2"], axis=axis,
                                  block_size=block)]
        graph = helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("x", s, None)],
            [helper.make_tensor_value_info("q", q, None), helper.make_tensor_value_info("y", s, None),
             helper.make_tensor_value_info("y2", s, None)],
            [helper.make_tensor("scale", s, list(pshape), scale.reshape(-1).tolist()), zp])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
        x = (rng.standard_normal(shape) * 3).astype(scale.dtype)
        if not is_float8:
            x.flat[1] = np.nan                   # the lowest value, as onnxruntime's
        before = dict(wasm.dev.fallbacks)
        session = edgerun.InferenceSession(model.SerializeToString(), providers=[wasm])
        assert [n["provider"] for n in session.explain()["nodes"]
                if n["op_type"] == "QuantizeDequantize"] == ["wasm"]
        got = session.run(None, {"x": x})
        assert wasm.dev.fallbacks == before
        want = edgerun.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, {"x": x})
        assert got[0].dtype == want[0].dtype
        np.testing.assert_array_equal(got[0].astype(np.float64), want[0].astype(np.float64))
        for g, w in zip(got[1:], want[1:]):
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                       rtol=1e-3 if scale.dtype == np.float16 else 1e-6)


@pytest.mark.parametrize("a_shape,b_shape", [((1, 3, 5), (5, 4)), ((2, 1, 4, 6), (3, 6, 2)),
                                             ((7,), (7, 3)), ((4, 9), (9,))])
def test_integer_matmuls_match_the_cpu_provider(wasm, a_shape, b_shape):
    """MatMulInteger (per-row / per-column zero points) and QLinearMatMul (uint8 x int8,
    per-tensor scales) on broadcast batches and 1-D operands: exactly equal."""
    from onnx import TensorProto, helper

    import edgerun

    rng = np.random.default_rng(len(a_shape) * 10 + len(b_shape))
    a = rng.integers(0, 256, a_shape).astype(np.uint8)
    b = rng.integers(-128, 128, b_shape).astype(np.int8)
    m = a_shape[-2] if len(a_shape) > 1 else 1
    n = b_shape[-1] if len(b_shape) > 1 else 1
    inits = [helper.make_tensor("az", TensorProto.UINT8, [m] if m > 1 else [],
                                rng.integers(0, 256, m).tolist() if m > 1 else [7]),
             helper.make_tensor("bz", TensorProto.INT8, [n] if n > 1 else [],
                                rng.integers(-5, 5, n).tolist() if n > 1 else [3]),
             helper.make_tensor("as", TensorProto.FLOAT, [], [0.02]),
             helper.make_tensor("bs", TensorProto.FLOAT, [], [0.05]),
             helper.make_tensor("ys", TensorProto.FLOAT, [], [0.4]),
             helper.make_tensor("yz", TensorProto.UINT8, [], [120]),
             helper.make_tensor("az0", TensorProto.UINT8, [], [9]),
             helper.make_tensor("bz0", TensorProto.INT8, [], [-2])]
    nodes = [helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["i"]),
             helper.make_node("QLinearMatMul", ["a", "as", "az0", "b", "bs", "bz0", "ys", "yz"],
                              ["q"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("a", TensorProto.UINT8, None),
                     helper.make_tensor_value_info("b", TensorProto.INT8, None)],
        [helper.make_tensor_value_info("i", TensorProto.INT32, None),
         helper.make_tensor_value_info("q", TensorProto.UINT8, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    feeds = {"a": a, "b": b}
    before = dict(wasm.dev.fallbacks)
    got = edgerun.InferenceSession(model.SerializeToString(), providers=[wasm]).run(None, feeds)
    assert wasm.dev.fallbacks == before
    want = edgerun.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


# ---- detection ------------------------------------------------------------------------------

@pytest.mark.parametrize("batch,center", [(1, 0), (2, 1), (3, 0)])
def test_non_max_suppression_matches_the_cpu_provider(wasm, batch, center):
    """Random boxes (corners in either order, degenerate ones, ties in score) and classes,
    with and without a score threshold: the same selected triples in the same order."""
    from onnx import TensorProto, helper

    import edgerun

    rng = np.random.default_rng(batch * 2 + center)
    n, classes = 300, 3
    boxes = rng.uniform(0, 50, (batch, n, 4)).astype(np.float32)
    boxes[:, ::17, 2:] = boxes[:, ::17, :2]                       # zero-area boxes
    scores = np.round(rng.random((batch, classes, n)), 2).astype(np.float32)   # ties
    for with_threshold in (False, True):
        names = ["boxes", "scores", "max", "iou"] + (["score"] if with_threshold else [])
        inits = [helper.make_tensor("max", TensorProto.INT64, [1], [40]),
                 helper.make_tensor("iou", TensorProto.FLOAT, [1], [0.4]),
                 helper.make_tensor("score", TensorProto.FLOAT, [1], [0.3])]
        graph = helper.make_graph(
            [helper.make_node("NonMaxSuppression", names, ["selected"],
                              center_point_box=center)], "g",
            [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, None),
             helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)],
            [helper.make_tensor_value_info("selected", TensorProto.INT64, None)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
        feeds = {"boxes": boxes, "scores": scores}
        got = edgerun.InferenceSession(model.SerializeToString(), providers=[wasm]).run(None, feeds)
        want = edgerun.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[0].shape[0] > 0


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_matches_the_cpu_provider(wasm, mode, padding):
    """2-D and 3-D inputs (batch 1 and 2), grids reaching past [-1, 1], both align_corners;
    rtol 1e-5, atol 1e-5 (float32 in the CPU kernel's order of operations)."""
    from onnx import TensorProto, helper

    import edgerun

    rng = np.random.default_rng(len(mode) * 7 + len(padding))
    for spatial, batch in (((5, 7), 1), ((3, 4, 6), 2)):
        if mode == "cubic" and len(spatial) == 3:
            continue                     # cubic is 2-D only in the spec
        for align in (0, 1):
            x = rng.standard_normal((batch, 3) + spatial).astype(np.float32)
            grid = rng.uniform(-1.4, 1.4, (batch, 4, 5) + ((3,) if len(spatial) == 3 else (2,))
                               ).astype(np.float32)
            if len(spatial) == 3:
                grid = grid.reshape(batch, 4, 5, 1, 3)
            graph = helper.make_graph(
                [helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode,
                                  padding_mode=padding, align_corners=align)], "g",
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
                 helper.make_tensor_value_info("grid", TensorProto.FLOAT, None)],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
            feeds = {"x": x, "grid": grid}
            got = edgerun.InferenceSession(model.SerializeToString(), providers=[wasm]).run(None, feeds)
            want = edgerun.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)
            np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


# ---- Einsum ---------------------------------------------------------------------------------

EINSUM_CASES = [("bij,bjk->bik", [(1, 3, 4), (1, 4, 5)]), ("bij,bjk->bik", [(3, 3, 4), (1, 4, 5)]),
                ("ii->i", [(4, 4)]), ("ii", [(5, 5)]), ("ij->", [(3, 4)]), ("ij->ji", [(2, 7)]),
                ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]), ("i,i", [(6,), (6,)]),
                ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
                ("abc,cd", [(2, 3, 4), (4, 2)]), ("iij,jk->ik", [(3, 3, 4), (4, 2)])]


@pytest.mark.parametrize("case", range(len(EINSUM_CASES)))
def test_einsum_matches_the_cpu_provider(wasm, case):
    """Batched, broadcast ('...' and size-1 batch), diagonals, implicit outputs, traces and
    chains of three operands; rtol 1e-5."""
    from onnx import TensorProto, helper

    import edgerun

    equation, shapes = EINSUM_CASES[case]
    rng = np.random.default_rng(case)
    names = [f"x{i}" for i in range(len(shapes))]
    graph = helper.make_graph(
        [helper.make_node("Einsum", names, ["y"], equation=equation)], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in zip(names, shapes)}
    got = edgerun.InferenceSession(model.SerializeToString(), providers=[wasm]).run(None, feeds)[0]
    want = np.einsum(equation, *feeds.values())
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rank,interleaved,partial,positions", [
    (4, 0, 0, 1), (4, 1, 1, 1), (3, 0, 1, 1), (3, 1, 0, 0), (4, 0, 0, 0)])
def test_rotary_embedding_matches_the_cpu_provider(wasm, rank, interleaved, partial, positions):
    """3-D and 4-D inputs, halves or interleaved pairs, a partial rotary dimension, position
    ids or per-token caches, batch 1 and 2; rtol 1e-6."""
    from onnx import TensorProto, helper

    import edgerun

    rng = np.random.default_rng(rank * 8 + interleaved * 4 + partial * 2 + positions)
    heads, size = 3, 8
    rot = 4 if partial else size
    attrs = {"interleaved": interleaved}
    if partial:
        attrs["rotary_embedding_dim"] = rot
    if rank == 3:
        attrs["num_heads"] = heads
    names = ["x", "cos", "sin"] + (["pos"] if positions else [])
    graph = helper.make_graph(
        [helper.make_node("RotaryEmbedding", names, ["y"], **attrs)], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names[:3]] +
        ([helper.make_tensor_value_info("pos", TensorProto.INT64, None)] if positions else []),
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    for batch in (1, 2):
        seq = 5
        x = rng.standard_normal((batch, heads, seq, size) if rank == 4
                                else (batch, seq, heads * size)).astype(np.float32)
        rows = (10,) if positions else (batch, seq)
        angles = rng.uniform(0, 6, rows + (rot // 2,))
        feeds = {"x": x, "cos": np.cos(angles).astype(np.float32),
                 "sin": np.sin(angles).astype(np.float32)}
        if positions:
            feeds["pos"] = rng.integers(0, 10, (batch, seq)).astype(np.int64)
        got = edgerun.InferenceSession(model.SerializeToString(), providers=[wasm]).run(None, feeds)
        want = edgerun.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)


# ---- control flow ---------------------------------------------------------------------------

@pytest.mark.parametrize("reverse,axis", [(0, 0), (1, 1), (1, 0)])
def test_scan_matches_the_cpu_provider(wasm, reverse, axis):
    """Scan (a running sum state and a per-step product output) along axis 0 or 1, in either
    direction, with the output stacked along the same axis; batch 1 and 3."""
    from onnx import TensorProto, helper

    import edgerun

    f = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "x_t"], ["y_t"])], "body",
        [helper.make_tensor_value_info("s_in", f, None), helper.make_tensor_value_info("x_t", f, None)],
        [helper.make_tensor_value_info("s_out", f, None), helper.make_tensor_value_info("y_t", f, None)])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1,
                          scan_input_axes=[axis], scan_input_directions=[reverse],
                          scan_output_axes=[axis], scan_output_directions=[reverse])], "g",
        [helper.make_tensor_value_info("s0", f, None), helper.make_tensor_value_info("x", f, None)],
        [helper.make_tensor_value_info("s", f, None), helper.make_tensor_value_info("y", f, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]).SerializeToString()
    rng = np.random.default_rng(reverse * 2 + axis)
    for batch in (1, 3):
        x = rng.standard_normal((batch, 4) if axis == 1 else (4, batch)).astype(np.float32)
        feeds = {"s0": np.zeros(batch, np.float32), "x": x}
        got = edgerun.InferenceSession(model, providers=[wasm]).run(None, feeds)
        want = edgerun.InferenceSession(model, providers=["cpu"]).run(None, feeds)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("axis,keep_sorted,dtype", [(None, 1, "float32"), (None, 0, "int64"),
                                                    (0, 1, "int32"), (1, 0, "float32")])
def test_unique_matches_the_cpu_provider(wasm, axis, keep_sorted, dtype):
    """Repeated values and rows, sorted or by first appearance, flat or along an axis: all
    four outputs equal to the CPU provider's."""
    from onnx import helper
    from onnx.helper import np_dtype_to_tensor_dtype

    import edgerun

    t = np_dtype_to_tensor_dtype(np.dtype(dtype))
    rng = np.random.default_rng(7 if axis is None else axis)
    x = rng.integers(0, 4, (6, 3)).astype(dtype)
    x[3] = x[1]                                           # a repeated row
    attrs = {"sorted": keep_sorted} | ({"axis": axis} if axis is not None else {})
    graph = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["y", "i", "inv", "n"], **attrs)], "g",
        [helper.make_tensor_value_info("x", t, None)],
        [helper.make_tensor_value_info("y", t, None)] +
        [helper.make_tensor_value_info(n, 7, None) for n in ("i", "inv", "n")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]).SerializeToString()
    got = edgerun.InferenceSession(model, providers=[wasm]).run(None, {"x": x})
    want = edgerun.InferenceSession(model, providers=["cpu"]).run(None, {"x": x})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_max_pool_indices_of_padding_only_windows_match_onnxruntime(wasm):
    """A window that reads only padding gives the lowest float and the plane's offset - 1
    as its index (onnxruntime's and the CPU provider's answer); found by difftest seed 91."""
    import onnxruntime
    from onnx import TensorProto, helper

    import edgerun

    graph = helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2], pads=[1, 1],
                          dilations=[2])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)]).SerializeToString()
    for shape in ((1, 1, 1), (3, 9, 1), (2, 3, 4)):
        x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
        got = edgerun.InferenceSession(model, providers=[wasm]).run(None, {"x": x})
        want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
            None, {"x": x})
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


# ---- integer and bool reductions (er_reduce_int, er_argmax_int) ---------------------------

REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
# op -> the integer types it is checked on: those its opset-20 schema takes (a model giving
# it others is refused at load, as onnxruntime refuses it)
REDUCE_TYPES = {op: [t for t in ("int32", "int64", "uint8", "int8", "uint64", "int16", "bool")
                     if f"tensor({t})" in [v for v in op_types()[("", op)] if v[0] <= 20][-1][2]["T"]]
                for op in REDUCE_OPS}
# the float-valued reductions of integers (L2, log-sums) truncate a double; summation order
# may put it on the other side of an integer
FLOAT_VALUED = {"ReduceL2": 1, "ReduceLogSum": 1, "ReduceLogSumExp": 1}


def _integers(rng, dtype, shape, op):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dtype)
    small = op in ("ReduceProd", "ReduceSumSquare", "ReduceLogSumExp", "ReduceL2")
    lo, hi = (max(info.min, -4), min(info.max, 4)) if small else (info.min, info.max)
    if op in ("ReduceLogSum",):
        lo = 1
    return rng.integers(lo, hi, shape, endpoint=True,
                        dtype=np.uint64 if dtype == "uint64" else np.int64).astype(dtype)


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_integer_reductions_match_the_cpu_provider(wasm, op):
    """Every reduction of integer (and for Max/Min bool) tensors over adjacent, non-adjacent,
    all and empty sets of axes, keepdims on and off, equals the CPU provider's in the input's
    type: sums wrap, the mean truncates, empty max/min give the type's extreme."""
    from onnx import TensorProto, helper
    from onnx.helper import np_dtype_to_tensor_dtype

    import edgerun

    rng = np.random.default_rng(REDUCE_OPS.index(op))
    for dtype in REDUCE_TYPES[op]:
        t = np_dtype_to_tensor_dtype(np.dtype(dtype))
        for shape, axes, keepdims in (((1, 5), [1], 1), ((3, 4, 5), [0, 2], 0),
                                      ((2, 3, 4), None, 1), ((4, 0, 3), [1], 1),
                                      ((2, 7), [-1], 0), ((6,), [0], 0)):
            if op in FLOAT_VALUED and 0 in shape:
                continue                    # -inf as an integer: undefined, no answer to match
            inputs = ["x"] + (["axes"] if axes is not None else [])
            graph = helper.make_graph(
                [helper.make_node(op, inputs, ["y"], keepdims=keepdims)], "g",
                [helper.make_tensor_value_info("x", t, None)], [
                    helper.make_tensor_value_info("y", t, None)],
                [helper.make_tensor("axes", TensorProto.INT64, [len(axes)], axes)]
                if axes is not None else [])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
            x = _integers(rng, dtype, shape, op)
            got = edgerun.InferenceSession(model.SerializeToString(), providers=[wasm]).run(
                None, {"x": x})[0]
            want = edgerun.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(
                None, {"x": x})[0]
            assert got.dtype == want.dtype and got.shape == want.shape, (dtype, shape)
            if op in FLOAT_VALUED and dtype != "uint64":
                np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                           atol=FLOAT_VALUED[op], err_msg=f"{dtype} {shape}")
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{dtype} {shape} {axes}")


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dtype", ["int64", "uint8", "int32", "uint64"])    # ONNX's, not bool
def test_integer_arg_extremes_match_onnxruntime(wasm, op, dtype):
    """Ties (few distinct values) with select_last_index on and off, every axis."""
    import onnxruntime
    from onnx import helper
    from onnx.helper import np_dtype_to_tensor_dtype

    import edgerun

    t = np_dtype_to_tensor_dtype(np.dtype(dtype))
    x = np.random.default_rng(3).integers(0, 3, (3, 4, 5)).astype(dtype)
    if dtype == "uint64":
        x[x == 2] = np.uint64(2**63 + 5)                  # above int64's range: unsigned order
    for axis in (0, 1, 2, -1):
        for last in (0, 1):
            graph = helper.make_graph(
                [helper.make_node(op, ["x"], ["y"], axis=axis, select_last_index=last)], "g",
                [helper.make_tensor_value_info("x", t, None)],
                [helper.make_tensor_value_info("y", 7, None)])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
            got = edgerun.InferenceSession(model.SerializeToString(), providers=[wasm]).run(
                None, {"x": x})[0]
            if dtype == "uint64":                          # onnxruntime has no such kernel
                want = edgerun.InferenceSession(model.SerializeToString(),
                                                providers=["cpu"]).run(None, {"x": x})[0]
            else:
                want = onnxruntime.InferenceSession(model.SerializeToString(), providers=[
                    "CPUExecutionProvider"]).run(None, {"x": x})[0]
            np.testing.assert_array_equal(got, want, err_msg=f"axis {axis} last {last}")


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_max_pool_of_8_bit_integers_matches_onnxruntime(wasm, dtype):
    """MaxPool takes int8/uint8 (widened to float32 exactly and back), padded windows too."""
    import onnxruntime
    from onnx import helper
    from onnx.helper import np_dtype_to_tensor_dtype

    import edgerun

    t = np_dtype_to_tensor_dtype(np.dtype(dtype))
    info = np.iinfo(dtype)
    x = np.random.default_rng(5).integers(info.min, info.max, (2, 3, 7, 6),
                                          endpoint=True).astype(dtype)
    graph = helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], pads=[1, 0, 1, 1],
                          strides=[2, 1])], "g",
        [helper.make_tensor_value_info("x", t, None)], [helper.make_tensor_value_info("y", t, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)]).SerializeToString()
    sess = edgerun.InferenceSession(model, providers=[wasm])
    got = sess.run(None, {"x": x})[0]
    want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    assert not wasm.stats["host_fallbacks"].get("MaxPool"), wasm.stats


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int16"])
def test_range_matches_the_cpu_provider(wasm, dtype):
    """Range on the host: float16/bfloat16 accumulate in float32 as the CPU kernel does."""
    import ml_dtypes
    from onnx import TensorProto, helper

    import edgerun

    np_type = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    t = TensorProto.BFLOAT16 if dtype == "bfloat16" else \
        helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph(
        [helper.make_node("Range", ["s", "l", "d"], ["y"])], "g",
        [helper.make_tensor_value_info(n, t, []) for n in "sld"],
        [helper.make_tensor_value_info("y", t, None)])
    opset = 27 if "float16" in dtype else 11         # Range takes 16-bit floats from 27 on
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]) \
        .SerializeToString()
    for s, l, d in ((0.5, 37.1, 0.3), (10, -3, -1.25), (1, 1, 1), (-2, 300, 7)):
        if dtype == "int16":
            s, l, d = int(s), int(l), int(d) or 1
        feeds = {n: np.array(v, dtype=np_type) for n, v in zip("sld", (s, l, d))}
        got = edgerun.InferenceSession(model, providers=[wasm]).run(None, feeds)[0]
        want = edgerun.InferenceSession(model, providers=["cpu"]).run(None, feeds)[0]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


# ---- signal and detection kernels ----------------------------------------------------------

def _one_node_model(op_type, inputs, attrs=None, opset=17, out_type=None):
    """A one-node model: `inputs` is [(name, TensorProto type)], '' for a skipped input."""
    from onnx import TensorProto, helper

    node = helper.make_node(op_type, [name for name, _ in inputs], ["y"], **(attrs or {}))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(name, t, None) for name, t in inputs if name],
        [helper.make_tensor_value_info("y", out_type or inputs[0][1] or TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model.SerializeToString()


def _wasm_and_cpu(wasm, model, feeds):
    import edgerun

    got = edgerun.InferenceSession(model, providers=[wasm]).run(None, feeds)[0]
    want = edgerun.InferenceSession(model, providers=["cpu"]).run(None, feeds)[0]
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    return got, want


# (input shape, axis, dft_length or None, inverse, onesided): lengths 1, prime (7, 13),
# powers of two (8, 16), composites (12, 18); cut and padded; the axis first, middle, last
DFT_CASES = [((1, 8, 1), 1, None, 0, 0), ((3, 1, 2), 1, None, 0, 0), ((2, 7, 2), 1, None, 0, 0),
             ((1, 13, 1), -2, None, 0, 1), ((2, 12, 1), 1, 5, 0, 0), ((2, 12, 2), 1, 18, 0, 1),
             ((2, 16, 2), 1, None, 1, 0), ((1, 9, 2), 1, 7, 1, 0), ((2, 5, 3, 2), 1, None, 0, 0),
             ((4, 3, 6, 1), 1, 16, 0, 1), ((6, 2, 4, 2), 0, None, 1, 0), ((1, 7, 2), 1, None, 1, 1),
             ((2, 5, 3, 2), 1, 9, 1, 1), ((1, 9, 2), 1, 6, 1, 1), ((3, 4, 1), 1, 11, 1, 1)]


@pytest.mark.parametrize("case", range(len(DFT_CASES)))
@pytest.mark.parametrize("opset", [17, 20])
def test_dft_matches_the_cpu_provider(wasm, case, opset):
    """Forward, inverse, one-sided (rfft) and inverse one-sided (irfft, odd and even lengths,
    the half spectrum cut and padded), real and complex signals, batches of 1 and more;
    float32 at rtol/atol 1e-4 (the CPU kernel's FFT runs in float32, this one in double),
    float64 at 1e-10."""
    from onnx import TensorProto as T

    shape, axis, length, inverse, onesided = DFT_CASES[case]
    rng = np.random.default_rng(case)
    for t, dtype, tol in ((T.FLOAT, np.float32, 1e-4), (T.DOUBLE, np.float64, 1e-10)):
        inputs = [("x", t), ("n" if length else "", T.INT64)]
        attrs = {"inverse": inverse, "onesided": onesided}
        feeds = {"x": rng.standard_normal(shape).astype(dtype)}
        if opset >= 20:
            inputs.append(("axis", T.INT64))
            feeds["axis"] = np.array(axis, np.int64)
        else:
            attrs["axis"] = axis
        if length:
            feeds["n"] = np.array(length, np.int64)
        model = _one_node_model("DFT", inputs, attrs, opset)
        got, want = _wasm_and_cpu(wasm, model, feeds)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert not wasm.stats["host_fallbacks"].get("DFT"), wasm.stats


def test_dft_of_float16_and_long_prime_lengths(wasm):
    """float16 through the double kernel (within 1e-2 of the CPU provider's complex64 FFT,
    a float16 rounding), and a length-1009 (prime: Bluestein over 2048 points) float64
    transform within 1e-9 of numpy's."""
    from onnx import TensorProto as T

    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 10, 2)).astype(np.float16)
    got, want = _wasm_and_cpu(wasm, _one_node_model("DFT", [("x", T.FLOAT16)], {"axis": 1}),
                              {"x": x})
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-2,
                               atol=1e-2)
    x = rng.standard_normal((1, 1009, 1))
    got, want = _wasm_and_cpu(wasm, _one_node_model("DFT", [("x", T.DOUBLE)], {"axis": 1}),
                              {"x": x})
    np.testing.assert_allclose(got[0, :, 0] + 1j * got[0, :, 1], np.fft.fft(x[0, :, 0]),
                               rtol=1e-9, atol=1e-9)
    assert not wasm.stats["host_fallbacks"].get("DFT"), wasm.stats


# (signal shape, frame_step, window?, frame_length or None, onesided)
STFT_CASES = [((1, 64, 1), 8, True, None, 1), ((2, 50, 1), 7, False, 12, 1),
              ((2, 50, 2), 5, True, 10, 0), ((1, 40, 2), 3, False, 13, 1),
              ((3, 33, 1), 4, True, 9, 0), ((1, 20, 1), 1, False, None, 1)]


@pytest.mark.parametrize("case", range(len(STFT_CASES)))
def test_stft_matches_the_cpu_provider(wasm, case):
    """With and without a window (its length setting the frame, or frame_length given),
    one- and two-sided, real and complex signals, frame lengths a power of two, prime and
    composite; rtol/atol 1e-4 (float32)."""
    from onnx import TensorProto as T

    shape, step, window, frame_length, onesided = STFT_CASES[case]
    rng = np.random.default_rng(20 + case)
    size = frame_length or (16 if window else shape[1])
    inputs = [("s", T.FLOAT), ("step", T.INT64), ("w" if window else "", T.FLOAT),
              ("fl" if frame_length else "", T.INT64)]
    feeds = {"s": rng.standard_normal(shape).astype(np.float32),
             "step": np.array(step, np.int64)}
    if window:
        feeds["w"] = rng.uniform(0, 1, size).astype(np.float32)
    if frame_length:
        feeds["fl"] = np.array(frame_length, np.int64)
    got, want = _wasm_and_cpu(wasm, _one_node_model("STFT", inputs, {"onesided": onesided}),
                              feeds)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert not wasm.stats["host_fallbacks"].get("STFT"), wasm.stats


def test_mel_weight_matrix_matches_the_cpu_provider(wasm):
    """Host arithmetic in double, as the CPU kernel's numpy: equal to the last bit, for
    float32 and float64 outputs and bins that collapse (more mel bins than DFT bins)."""
    from onnx import TensorProto as T

    names = ["bins", "n", "rate", "lo", "hi"]
    for out_type, dtype in ((T.FLOAT, np.float32), (T.DOUBLE, np.float64)):
        model = _one_node_model("MelWeightMatrix", [(n, T.INT64) for n in names[:3]] +
                                [("lo", T.FLOAT), ("hi", T.FLOAT)],
                                {"output_datatype": out_type}, out_type=out_type)
        for bins, n, rate, lo, hi in ((8, 16, 8192, 0.0, 4096.0), (40, 512, 16000, 20.0, 7600.0),
                                      (80, 400, 16000, 0.0, 8000.0), (30, 32, 22050, 125.5, 3800.0),
                                      (3, 7, 1000, 10.0, 490.0)):
            feeds = dict(zip(names, [np.array(bins), np.array(n), np.array(rate),
                                     np.array(lo, np.float32), np.array(hi, np.float32)]))
            got, want = _wasm_and_cpu(wasm, model, feeds)
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, want)
    assert not wasm.stats["host_fallbacks"].get("MelWeightMatrix"), wasm.stats


ROI_BOXES = [[0, 0, 12, 10], [2.3, 1.1, 7.9, 9.4], [-3, -2, 4, 3], [5, 5, 5.4, 5.2],
             [10, 8, 16, 14], [1, 2, 30, 25], [6, 4, 2, 1]]


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel", "opset10"])
def test_roi_align_matches_onnxruntime_and_the_cpu_provider(wasm, mode, transform):
    """Regions inside, across and past the map's edges, tiny, inverted and larger than the
    map; sampling_ratio 0 (grid from the region's size) and 2; spatial_scale 1 and 0.5;
    batches of 2 with 3 channels. Against onnxruntime (opset 10 and 16: it has no RoiAlign-22)
    and the CPU provider, rtol/atol 1e-5 (float32)."""
    import onnxruntime
    from onnx import TensorProto as T

    rng = np.random.default_rng(len(mode) + len(transform))
    x = rng.standard_normal((2, 3, 11, 13)).astype(np.float32)
    rois = np.array(ROI_BOXES, np.float32)
    feeds = {"x": x, "rois": rois, "b": np.array([0, 1, 1, 0, 1, 0, 1], np.int64)}
    for sampling_ratio, scale in ((0, 1.0), (2, 0.5), (0, 0.5), (2, 1.0)):
        attrs = {"mode": mode, "output_height": 3, "output_width": 4,
                 "sampling_ratio": sampling_ratio, "spatial_scale": scale}
        if transform != "opset10":
            attrs["coordinate_transformation_mode"] = transform
        model = _one_node_model("RoiAlign", [("x", T.FLOAT), ("rois", T.FLOAT), ("b", T.INT64)],
                                attrs, 10 if transform == "opset10" else 16)
        got, want = _wasm_and_cpu(wasm, model, feeds)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        ort = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(got, ort.run(None, feeds)[0], rtol=1e-5, atol=1e-5)
    assert not wasm.stats["host_fallbacks"].get("RoiAlign"), wasm.stats


def test_roi_align_names_a_bad_batch_index(wasm):
    from onnx import TensorProto as T

    import edgerun

    model = _one_node_model("RoiAlign", [("x", T.FLOAT), ("rois", T.FLOAT), ("b", T.INT64)],
                            {"output_height": 2, "output_width": 2}, 16)
    feeds = {"x": np.zeros((2, 1, 4, 4), np.float32), "rois": np.zeros((2, 4), np.float32),
             "b": np.array([1, 2], np.int64)}
    with pytest.raises(Exception, match=r"batch_indices\[1\] is outside \[0, 2\)"):
        edgerun.InferenceSession(model, providers=[wasm]).run(None, feeds)


# (input shape, kernel, strides, pads, output_shape or None)
UNPOOL_CASES = [((1, 2, 6, 8), [2, 2], [2, 2], [0, 0, 0, 0], None),
                ((2, 3, 7, 5), [3, 2], [2, 1], [1, 0, 1, 1], None),
                ((1, 2, 6, 8), [2, 2], [2, 2], [0, 0, 0, 0], [1, 2, 8, 9]),
                ((1, 2, 6, 8), [2, 2], [2, 2], [0, 0, 0, 0], [1, 2, 5, 10]),
                ((1, 1, 9), [3], [2], [1, 1], None),
                ((1, 1, 4, 4, 6), [2, 2, 2], [2, 2, 2], [0] * 6, [1, 1, 5, 5, 7])]


@pytest.mark.parametrize("case", range(len(UNPOOL_CASES)))
def test_max_unpool_matches_the_cpu_provider(wasm, case):
    """MaxPool's values and indices put back: 1-, 2- and 3-D, strides, pads, an
    output_shape larger (and, along one axis, smaller) than the inferred one; exact."""
    from onnx import TensorProto as T
    from onnx import helper

    import edgerun

    shape, kernel, strides, pads, out_shape = UNPOOL_CASES[case]
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads}
    nodes = [helper.make_node("MaxPool", ["x"], ["v", "i"], **attrs),
             helper.make_node("MaxUnpool", ["v", "i"] + (["os"] if out_shape else []), ["y"],
                              **attrs)]
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, None)]
    feeds = {"x": np.random.default_rng(case).standard_normal(shape).astype(np.float32)}
    if out_shape:
        inputs.append(helper.make_tensor_value_info("os", T.INT64, [len(out_shape)]))
        feeds["os"] = np.array(out_shape, np.int64)
    model = helper.make_model(
        helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", T.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 22)]).SerializeToString()
    got = edgerun.InferenceSession(model, providers=[wasm]).run(None, feeds)[0]
    want = edgerun.InferenceSession(model, providers=["cpu"]).run(None, feeds)[0]
    np.testing.assert_array_equal(got, want)
    assert not wasm.stats["host_fallbacks"].get("MaxUnpool"), wasm.stats


def test_det_matches_the_cpu_provider(wasm):
    """1x1 to 6x6 matrices, batches of several dimensions, empty batches and 0x0 matrices
    (determinant 1), a singular matrix and one needing row swaps; float32 at rtol 1e-4 (LU in
    double here, in float32 in numpy's LAPACK), float64 at 1e-10."""
    from onnx import TensorProto as T

    rng = np.random.default_rng(11)
    singular = np.array([[1, 2, 3], [2, 4, 6], [1, 0, 1]], np.float32)
    swaps = np.array([[0, 1, 2], [1, 0, 3], [4, -3, 8]], np.float32)
    samples = [rng.standard_normal(s) for s in ((1, 1), (2, 2), (4, 4), (3, 5, 5), (2, 3, 6, 6),
                                                (0, 3, 3), (2, 0, 0))] + [singular, swaps]
    for t, dtype, tol in ((T.FLOAT, np.float32, 1e-4), (T.DOUBLE, np.float64, 1e-10)):
        model = _one_node_model("Det", [("x", t)], opset=22)
        for x in samples:
            got, want = _wasm_and_cpu(wasm, model, {"x": x.astype(dtype)})
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert not wasm.stats["host_fallbacks"].get("Det"), wasm.stats


@pytest.mark.parametrize("b_constant", [False, True], ids=["b_fed", "b_weight"])
@pytest.mark.parametrize("a_shape,b_shape", [((1, 517), (517, 9)), ((130, 33), (33, 1030)),
                                             ((2, 5, 257), (257, 6)), ((3, 2, 4), (1, 4, 3)),
                                             ((7, 20), (20, 11)), ((4, 3), (3, 1)),
                                             ((5, 40), (40, 12))])
def test_integer_gemm_blocks_match_onnxruntime(wasm, a_shape, b_shape, b_constant):
    """er_igemm's int16-pair panels: K past one panel (256) and odd, M past MC (128) and not a
    multiple of 4, N past NC (1024) and below one tile, batch 1 and broadcast batches; values
    spanning both ends of the centered 8-bit range; 2-D cases with a zero point per column
    of B; int8 and uint8 A and B. With B an initializer (a weight) the panels are packed once per
    session (er_ipack_b, er_igemm_packed): the same products."""
    import onnxruntime
    from onnx import TensorProto, helper

    import edgerun

    rng = np.random.default_rng(sum(a_shape) + sum(b_shape))
    b_type, b_proto = (np.uint8, TensorProto.UINT8) if b_shape[-1] % 2 else \
        (np.int8, TensorProto.INT8)
    a_type, a_proto = (np.int8, TensorProto.INT8) if b_type == np.int8 and a_shape[0] % 2 else \
        (np.uint8, TensorProto.UINT8)
    low, high = int(np.iinfo(b_type).min), int(np.iinfo(b_type).max) + 1
    a_low, a_high = int(np.iinfo(a_type).min), int(np.iinfo(a_type).max)
    a = rng.integers(a_low, a_high + 1, a_shape).astype(a_type)
    b = rng.integers(low, high, b_shape).astype(b_type)
    a[..., 0] = a_high
    b[0, ...] = low
    zero_points = [helper.make_tensor("az", a_proto, [], [3]),
                   helper.make_tensor("bz", b_proto, [], [low])] if len(a_shape) != 2 else \
        [helper.make_tensor("az", a_proto, [], [a_low + 200]),
         helper.make_tensor("bz", b_proto, [b_shape[1]], rng.integers(low, high,
                                                                      b_shape[1]).tolist())]
    weights = [helper.make_tensor("b", b_proto, b_shape, b.tobytes(), raw=True)] \
        if b_constant else []
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])], "g",
        [helper.make_tensor_value_info("a", a_proto, None)] +
        ([] if b_constant else [helper.make_tensor_value_info("b", b_proto, None)]),
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)], zero_points + weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    feeds = {"a": a} if b_constant else {"a": a, "b": b}
    session = edgerun.InferenceSession(model, providers=[wasm])
    want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]
    for _ in range(2):                   # the second run reuses the packed weight
        np.testing.assert_array_equal(session.run(None, feeds)[0], want)


def test_integer_gemm_with_a_zero_point_per_row(wasm):
    """MatMulInteger's A zero point of one value per row (onnxruntime's CPU kernel takes only
    one): (a - az[:, None]) @ (b - bz) computed exactly in numpy."""
    from onnx import TensorProto, helper

    import edgerun

    rng = np.random.default_rng(11)
    a = rng.integers(-128, 128, (9, 300), dtype=np.int8)
    b = rng.integers(-128, 128, (300, 13), dtype=np.int8)
    az = rng.integers(-128, 128, 9, dtype=np.int8)
    bz = rng.integers(-128, 128, 13, dtype=np.int8)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])], "g",
        [helper.make_tensor_value_info(n, TensorProto.INT8, None) for n in ("a", "b", "az", "bz")],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    got = edgerun.InferenceSession(model, providers=[wasm]).run(
        None, {"a": a, "b": b, "az": az, "bz": bz})[0]
    want = (a.astype(np.int64) - az[:, None]) @ (b.astype(np.int64) - bz[None, :])
    np.testing.assert_array_equal(got, want.astype(np.int32))


@pytest.mark.parametrize("qtype", ["uint8", "int8", "int16", "uint16"])
@pytest.mark.parametrize("x_type,scale_type", [("float32", "float32"), ("float16", "float16"),
                                               ("float16", "float32"), ("float32", "float16")])
def test_per_tensor_quantize_matches_the_cpu_provider(wasm, qtype, x_type, scale_type):
    """er_quantize_linear (one scale, one zero point): ties at exact half steps round to
    even, values far outside the range saturate, the division in the scale's precision;
    DynamicQuantizeLinear takes the same kernel."""
    from onnx import helper
    from onnx.helper import np_dtype_to_tensor_dtype as tt

    import edgerun

    rng = np.random.default_rng(len(qtype) + len(x_type))
    scale = np.array(0.37, scale_type)
    steps = rng.integers(-400, 400, 300).astype(np.float64) + rng.choice([0.0, 0.5, 0.49], 300)
    x = np.concatenate([steps * float(scale), [1e9, -1e9, 0.0]]).astype(x_type)
    zero = np.array(7 if qtype.startswith("u") else -3, qtype)
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], "g",
        [helper.make_tensor_value_info("x", tt(np.dtype(x_type)), None)],
        [helper.make_tensor_value_info("y", tt(np.dtype(qtype)), None)],
        [helper.make_tensor("s", tt(np.dtype(scale_type)), [], [float(scale)]),
         helper.make_tensor("z", tt(np.dtype(qtype)), [], [int(zero)])])
    # opset 25: the scale's type apart from x's (T2); float64 is neither's
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)]).SerializeToString()
    got = edgerun.InferenceSession(model, providers=[wasm]).run(None, {"x": x})[0]
    want = edgerun.InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    if qtype == "uint8" and x_type == "float32":
        dyn = helper.make_model(helper.make_graph(
            [helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])], "g",
            [helper.make_tensor_value_info("x", 1, None)],
            [helper.make_tensor_value_info(n, t, None) for n, t in (("y", 2), ("s", 1), ("z", 2))]),
            opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
        x = x[:-3]
        for g, w in zip(edgerun.InferenceSession(dyn, providers=[wasm]).run(None, {"x": x}),
                        edgerun.InferenceSession(dyn, providers=["cpu"]).run(None, {"x": x})):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("kernel,strides,pads,dilations", [
    ([3, 3], [1, 1], [1, 1, 1, 1], [1, 1]), ([3, 3], [2, 2], [0, 0, 1, 1], [1, 1]),
    ([2, 5], [1, 3], [1, 2, 0, 2], [1, 1]), ([3, 2], [2, 1], [2, 1, 2, 1], [2, 3]),
    ([1, 1], [2, 2], [0, 0, 0, 0], [1, 1])])
def test_max_pool_rows_match_onnxruntime(wasm, kernel, strides, pads, dilations):
    """er_maxpool2d's row-vector loops (strides 1 and 2 by vectors, others by elements):
    widths under one vector and over several, windows of padding only at the edges, batch 1;
    against onnxruntime, and with NaN inputs against the CPU provider (a NaN in the window
    wins; onnxruntime's answer then depends on where in the window it sits)."""
    import onnxruntime
    from onnx import TensorProto, helper

    import edgerun

    graph = helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=kernel, strides=strides,
                          pads=pads, dilations=dilations)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)]).SerializeToString()
    rng = np.random.default_rng(sum(kernel) + sum(strides))
    for shape in ((1, 1, 3, 2), (1, 3, 9, 21), (2, 2, 17, 38)):
        x = rng.standard_normal(shape).astype(np.float32)
        got = edgerun.InferenceSession(model, providers=[wasm]).run(None, {"x": x})[0]
        want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
            None, {"x": x})[0]
        np.testing.assert_array_equal(got, want, err_msg=str(shape))
        x.flat[::37] = np.nan
        got = edgerun.InferenceSession(model, providers=[wasm]).run(None, {"x": x})[0]
        want = edgerun.InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
        np.testing.assert_array_equal(got, want, err_msg=f"{shape} with NaN")


def test_float16_weights_are_widened_once_per_session(wasm):
    """A float16 model's weights feed float32 kernels through a conversion made at the first
    run and kept with the weight: later runs convert only the input and the result. (From
    the extended optimization level on, float16_as_float32 converts the weights at load:
    every run converts only the input and the result.)"""
    from onnx import TensorProto, helper, numpy_helper

    import edgerun

    w = np.random.default_rng(2).standard_normal((64, 32)).astype(np.float16)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [3, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [3, 32])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    x = np.random.default_rng(3).standard_normal((3, 64)).astype(np.float16)
    casts = []
    call = wasm.dev.call

    def counting(name, *args):
        casts.append(name == "er_cast")
        return call(name, *args)
    for level, first in ((edgerun.GraphOptimizationLevel.ORT_ENABLE_BASIC, 3),
                         (edgerun.GraphOptimizationLevel.ORT_ENABLE_ALL, 2)):
        opts = edgerun.SessionOptions()
        opts.graph_optimization_level = level
        sess = edgerun.InferenceSession(model, sess_options=opts, providers=[wasm])
        wasm.dev.call = wasm.dev.host.call = counting   # (weights convert through the host's)
        try:
            for run in range(3):
                casts.clear()
                got = sess.run(None, {"x": x})[0]
                assert sum(casts) == (first if run == 0 else 2), (level, run, sum(casts))
        finally:
            wasm.dev.call = call
            del wasm.dev.host.call
    want = edgerun.InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2,
                               atol=1e-2)


@pytest.mark.parametrize("m,n,k", [(4, 1, 7), (9, 3, 33), (258, 4, 256), (64, 7, 1025),
                                   (5, 2, 16)])
def test_gemm_with_fewer_columns_than_a_tile_matches_onnxruntime(wasm, m, n, k):
    """er_sgemm's path for N < 8 (dot products of A rows with B's columns): MatMul, Gemm with
    transB and a bias (accumulating into C), and a strided 1-D convolution over a handful of
    output positions (silero's STFT-like first layer); K with and without a tail of 16."""
    import onnxruntime
    from onnx import TensorProto, helper

    import edgerun

    rng = np.random.default_rng(m * n + k)
    f = TensorProto.FLOAT
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = rng.standard_normal((n,)).astype(np.float32)
    x = rng.standard_normal((1, 1, 128 * (n - 1) + k)).astype(np.float32)
    w = rng.standard_normal((m, 1, k)).astype(np.float32)
    cases = [
        (helper.make_node("MatMul", ["a", "b"], ["y"]), {"a": a, "b": b}),
        (helper.make_node("Gemm", ["a", "bt", "c"], ["y"], transB=1),
         {"a": a, "bt": np.ascontiguousarray(b.T), "c": c}),
        (helper.make_node("Conv", ["x", "w"], ["y"], strides=[128]), {"x": x, "w": w}),
    ]
    for node, feeds in cases:
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(name, f, None)
                                                for name in feeds],
                                  [helper.make_tensor_value_info("y", f, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
        got = edgerun.InferenceSession(model, providers=[wasm]).run(None, feeds)[0]
        want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
            None, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=node.op_type)


# (x shape, w shape, attrs): pointwise (no im2col), padded and strided 3x3, dilated, grouped
# and depthwise (its direct kernel: rows past one 8-lane step, strided and dilated), 1-D,
# batch 1 and 3, K past one igemm panel (C*KH*KW = 288 > 256)
INTEGER_CONV_CASES = [
    ((1, 16, 5, 7), (8, 16, 1, 1), {}),
    ((1, 3, 9, 11), (6, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((3, 32, 6, 6), (5, 32, 3, 3), {"pads": [0, 2, 1, 0]}),
    ((1, 4, 10, 10), (4, 2, 3, 3), {"group": 2, "dilations": [2, 1], "pads": [2, 1, 2, 1]}),
    ((2, 6, 7, 7), (6, 1, 3, 3), {"group": 6, "auto_pad": "SAME_UPPER"}),
    ((1, 4, 6, 21), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    ((1, 3, 9, 19), (3, 1, 3, 5), {"group": 3, "strides": [2, 2], "dilations": [1, 2]}),
    ((1, 5, 17), (7, 5, 3), {"strides": [2], "pads": [1, 1]}),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", INTEGER_CONV_CASES)
@pytest.mark.parametrize("per_channel", [False, True], ids=["tensor_zp", "channel_zp"])
def test_integer_conv_matches_onnxruntime(wasm, x_shape, w_shape, attrs, per_channel):
    """er_conv2d_int8 (im2col of bytes padded with the zero point, then er_igemm; depthwise
    directly) for ConvInteger and QLinearConv, against onnxruntime: exact int32, and the
    requantized uint8 within one step (onnxruntime's requantization may round the other
    way)."""
    import onnxruntime
    from onnx import TensorProto, helper

    import edgerun

    rng = np.random.default_rng(sum(x_shape) + sum(w_shape) + per_channel)
    x = rng.integers(0, 256, x_shape, dtype=np.uint8)
    w = rng.integers(-127, 128, w_shape, dtype=np.int8)
    x[..., 0] = 255
    m = w_shape[0]
    w_zp = rng.integers(-3, 4, m).astype(np.int8) if per_channel else np.array(0, np.int8)
    w_scale = (rng.random(m) * 0.02 + 0.001).astype(np.float32) if per_channel else \
        np.array(0.01, np.float32)
    consts = [helper.make_tensor("xz", TensorProto.UINT8, [], [119]),
              helper.make_tensor("wz", TensorProto.INT8, list(w_zp.shape), w_zp.ravel().tolist()),
              helper.make_tensor("w", TensorProto.INT8, w_shape, w.ravel().tolist())]
    x_info = helper.make_tensor_value_info("x", TensorProto.UINT8, None)
    integer = helper.make_model(helper.make_graph(
        [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)], "g", [x_info],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)], consts),
        opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    bias = rng.integers(-3000, 3000, m).astype(np.int32)
    qconsts = consts + [helper.make_tensor("xs", TensorProto.FLOAT, [], [0.02]),
                        helper.make_tensor("ws", TensorProto.FLOAT, list(w_scale.shape),
                                           w_scale.ravel().tolist()),
                        helper.make_tensor("ys", TensorProto.FLOAT, [], [0.05]),
                        helper.make_tensor("yz", TensorProto.UINT8, [], [128]),
                        helper.make_tensor("b", TensorProto.INT32, [m], bias.tolist())]
    qlinear = helper.make_model(helper.make_graph(
        [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                          ["y"], **attrs)], "g", [x_info],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], qconsts),
        opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    for model, exact in ((integer, True), (qlinear, False)):
        session = edgerun.InferenceSession(model, providers=[wasm])
        assert {n["provider"] for n in session.explain()["nodes"]} == {"wasm"}
        got = session.run(None, {"x": x})[0]
        if per_channel and exact:         # onnxruntime's ConvInteger takes one w zero point
            want = edgerun.InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
        else:
            want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
                None, {"x": x})[0]
        assert got.dtype == want.dtype and got.shape == want.shape
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
    assert not wasm.stats["host_fallbacks"].get("ConvInteger"), wasm.stats
    assert not wasm.stats["host_fallbacks"].get("QLinearConv"), wasm.stats


@pytest.mark.parametrize("seed", range(4))
def test_average_and_max_pools_match_onnxruntime_on_random_geometry(wasm, seed):
    """er_avgpool2d and er_maxpool2d add or compare whole output rows with vectors (strides 1
    and 2) and handle the edges apart. Random 1-D and 2-D geometry crossing those paths:
    kernels 1-5, strides 1-3, dilations 1-2, pads below the kernel, ceil_mode,
    count_include_pad, rows narrower and wider than a vector, batch 1 included, a strided
    feed. Against onnxruntime (opset 19), rtol/atol 1e-5."""
    import onnxruntime
    from onnx import TensorProto as T

    rng = np.random.default_rng(100 + seed)
    for trial in range(12):
        spatial = 1 if trial % 4 == 3 else 2
        kernel = [int(k) for k in rng.integers(1, 6, spatial)]
        dilations = [int(d) for d in rng.integers(1, 3, spatial)]
        span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
        pads = [int(rng.integers(0, k)) for k in kernel * 2]
        size = [int(rng.integers(max(s - p, 1), s + 14))
                for s, p in zip(span, pads[:spatial])]
        attrs = {"kernel_shape": kernel, "strides": [int(s) for s in rng.integers(1, 4, spatial)],
                 "pads": pads, "dilations": dilations, "ceil_mode": int(rng.integers(0, 2))}
        op = "AveragePool" if trial % 2 == 0 else "MaxPool"
        if op == "AveragePool":
            attrs["count_include_pad"] = int(rng.integers(0, 2))
        batch = 1 if trial % 3 == 0 else 2
        x = rng.standard_normal([batch, 3] + [2 * d for d in size]).astype(np.float32)
        x = x[(slice(None), slice(None)) + tuple(slice(None, None, 2) for _ in size)]  # strided
        model = _one_node_model(op, [("x", T.FLOAT)], attrs, 19)
        try:
            want = onnxruntime.InferenceSession(
                model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        except Exception:   # noqa: BLE001 - a geometry onnxruntime refuses (an empty output)
            continue
        got, _ = _wasm_and_cpu(wasm, model, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{op} {attrs}")


@pytest.mark.parametrize("op", ["MatMul", "MatMulInteger"])
def test_both_gemm_broadcasts_give_the_same_products(op):
    """The GEMM micro-kernels broadcast A by splat loads (what pages get: V8 compiles them
    better) or by shuffles (wasmtime); er_set_splat_loads picks one per module instance. Both
    must give the same bits, and the CPU provider's values, over shapes crossing the 4x8 tile's
    edges, the small-M and small-N paths and a K beyond one 256-deep block."""
    from onnx import TensorProto as T

    from edgerun.providers.wasm.provider import WasmProvider

    need(wasmtime_ok, "wasmtime", "pip install wasmtime==50.0.1")
    rng = np.random.default_rng(7)
    kind = T.FLOAT if op == "MatMul" else T.UINT8
    model = _one_node_model(op, [("a", kind), ("b", kind)], None, 13,
                            out_type=T.FLOAT if op == "MatMul" else T.INT32)
    for m, n, k in [(1, 5, 3), (3, 17, 9), (4, 8, 300), (9, 7, 33), (13, 23, 260), (6, 3, 5)]:
        if op == "MatMul":
            feeds = {"a": rng.standard_normal((m, k)).astype(np.float32),
                     "b": rng.standard_normal((k, n)).astype(np.float32)}
        else:
            feeds = {"a": rng.integers(0, 256, (m, k)).astype(np.uint8),
                     "b": rng.integers(0, 256, (k, n)).astype(np.uint8)}
        results = []
        for splat in (0, 1):
            provider = WasmProvider()
            provider.dev.call("er_set_splat_loads", splat)
            got, want = _wasm_and_cpu(provider, model, feeds)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4, err_msg=f"{m}x{n}x{k}")
            results.append(got)
        assert results[0].tobytes() == results[1].tobytes(), (m, n, k)


def test_a_weight_converted_while_recording_stays_out_of_the_program(wasm):
    """A float16 weight widened for a float32 kernel is converted once per session: the
    conversion made during a recording must not become part of the program (which would
    redo it on every replay) but be held by it."""
    from edgerun.ir.host_tensor import HostTensor
    from edgerun.providers.wasm.ops.common import converted
    from edgerun.providers.wasm.program import Recorder

    w = np.arange(12, dtype=np.float16).reshape(3, 4)
    weight = wasm.constant_to_device(HostTensor(10, w.shape, w.tobytes()))
    recorder = Recorder(wasm.dev)
    try:
        wide = converted(wasm.dev, weight, 1)
        x = wasm.dev.empty((3, 4), 10)
        converted(wasm.dev, x, 1)                   # an activation: converted in the program
    finally:
        recorder.stop()
        recorder.pool.close()
    casts = [args for name, args in recorder.log if name == "er_cast"]
    assert [a[0] for a in casts] == [x.ptr], casts
    assert wide in recorder.held
    got = wasm.dev.download(wide)
    np.testing.assert_array_equal(np.asarray(got), w.astype(np.float32))
    assert converted(wasm.dev, weight, 1) is wide                # made once


def test_small_integer_feeds_key_programs_by_their_values_from_any_bytes(wasm):
    """A captured graph keys its programs on the values of small integer feeds (a Reshape
    target): read from a HostTensor's bytes whatever buffer holds them (bytes, bytearray,
    a memoryview), the same values the device keeps on its uploads."""
    from edgerun.ir.host_tensor import HostTensor
    from edgerun.providers.wasm.capture import signature
    from edgerun.providers.wasm.program import Recorder

    raw = np.array([3, -1], np.int64).tobytes()
    for data in (raw, bytearray(raw), memoryview(raw)):
        t = HostTensor(7, [2], data)
        assert signature([t]) == ((7, (2,), (3, -1)),), type(data)
        assert wasm.dev.upload(t).ints == (3, -1)
        recorder = Recorder(wasm.dev)
        try:
            assert recorder.own_inputs([t])[0].ints == (3, -1)
        finally:
            recorder.stop()
            recorder.pool.close()


def test_initializers_sharing_one_bytes_object_keep_their_own_types(wasm):
    """CPython keeps one object per one-byte bytes value, so a uint8 and an int8 zero point of
    0 decode to the same raw bytes object. The provider's cache of uploaded initializers
    told them apart by that object alone and handed a QLinearConv the uint8 zero point for
    its int8 weights (quantize_static's YOLOX failed in a page); it is keyed by type and
    shape too."""
    from edgerun import ir
    from edgerun.ir.host_tensor import HostTensor

    raw = bytes([0])
    assert raw is bytes([0])          # the sharing this guards against
    graph = ir.Graph(name="g")
    for name, elem_type in (("x_zero", 2), ("w_zero", 3)):
        graph.initializers[name] = ir.Tensor(name=name, elem_type=elem_type, dims=(), raw=raw)
    wasm.prepare_model(ir.Model(graph=graph))
    for elem_type in (2, 3, 2):
        uploaded = wasm.to_device(HostTensor(elem_type, (), raw))
        assert uploaded.elem_type == elem_type
