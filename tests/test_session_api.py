"""The onnxruntime-style API: metadata, providers, and clear errors for bad input."""
import threading
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import edgerun
from edgerun import InvalidArgument, InvalidGraph, NotImplementedOp


def _model(nodes, inputs, outputs, initializers=(), opset=21, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset), *extra_opsets]
    m = helper.make_model(graph, opset_imports=opsets, producer_name="tests")
    m.ir_version = 10
    return m.SerializeToString()


def _add_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    b = helper.make_tensor("b", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    return _model([helper.make_node("Add", ["x", "b"], ["y"], name="add0")], [x], [y], [b])


def test_inputs_outputs_and_metadata():
    sess = edgerun.InferenceSession(_add_model())
    (inp,) = sess.get_inputs()
    assert (inp.name, inp.type, inp.shape) == ("x", "tensor(float)", ["batch", 3])
    (out,) = sess.get_outputs()
    assert (out.name, out.type) == ("y", "tensor(float)")
    meta = sess.get_modelmeta()
    assert meta.producer_name == "tests" and meta.graph_name == "g"
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_run_matches_numpy_and_output_selection():
    sess = edgerun.InferenceSession(_add_model())
    x = np.ones((2, 3), np.float32)
    (y,) = sess.run(["y"], {"x": x})
    np.testing.assert_array_equal(y, x + np.array([1, 2, 3], np.float32))
    with pytest.raises(InvalidArgument, match="unknown output 'z'"):
        sess.run(["z"], {"x": x})


@pytest.mark.parametrize("name", ["cpu", "CPUExecutionProvider", "cpuexecutionprovider"])
def test_provider_spellings(name):
    assert edgerun.InferenceSession(_add_model(), providers=[name]).get_providers() == \
        ["CPUExecutionProvider"]


def test_unknown_provider_name_is_an_error():
    with pytest.raises(InvalidArgument, match="unknown execution provider 'tpu'"):
        edgerun.InferenceSession(_add_model(), providers=["tpu"])


def test_unavailable_provider_is_skipped_with_a_warning():
    with pytest.warns(RuntimeWarning, match="not available"):
        sess = edgerun.InferenceSession(_add_model(), providers=["qnn", "cpu"])
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_available_providers_lists_cpu():
    assert "CPUExecutionProvider" in edgerun.get_available_providers()


def test_optimization_levels_have_onnxruntime_names():
    opts = edgerun.SessionOptions()
    opts.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert edgerun.InferenceSession(_add_model(), sess_options=opts).get_session_options() is opts


@pytest.mark.parametrize("feed, message", [
    ({"x": np.ones((2, 3), np.float64)}, r"input 'x': expected tensor\(float\), got tensor\(double\)"),
    ({"x": np.ones((2, 3), np.int64)}, r"expected tensor\(float\), got tensor\(int64\)"),
    ({"x": np.ones((3,), np.float32)}, r"input 'x': expected rank 2 \[batch, 3\], got rank 1 \[3\]"),
    ({"x": np.ones((2, 4), np.float32)}, r"input 'x': dimension 1 must be 3 .* got 4"),
    ({}, r"missing input 'x' \(tensor\(float\) \[batch, 3\]\)"),
    ({"x": np.ones((2, 3), np.float32), "bogus": np.ones(1)}, r"unknown input 'bogus'"),
    ({"x": None}, r"input 'x': expected tensor\(float\)"),
])
def test_bad_feeds_are_named(feed, message):
    sess = edgerun.InferenceSession(_add_model())
    with pytest.raises(InvalidArgument, match=message):
        sess.run(None, feed)


def test_feed_must_be_a_dict():
    with pytest.raises(InvalidArgument, match="must be a dict"):
        edgerun.InferenceSession(_add_model()).run(None, [np.ones((1, 3), np.float32)])


def test_unknown_operator_is_named_at_load_time():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    model = _model([helper.make_node("FrobnicateNot", ["x"], ["x2"], name="n1")], [x],
                   [helper.make_tensor_value_info("x2", TensorProto.FLOAT, [1])])
    with pytest.raises(NotImplementedOp, match=r"node 'n1' uses operator ai.onnx::FrobnicateNot"):
        edgerun.InferenceSession(model)


def test_unknown_domain_is_named_at_load_time():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    node = helper.make_node("Thing", ["x"], ["y"], name="n1", domain="com.example")
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    with pytest.raises(InvalidGraph, match="domain 'com.example'"):
        edgerun.InferenceSession(_model([node], [x], [y]))
    model = _model([node], [x], [y], extra_opsets=[helper.make_opsetid("com.example", 1)])
    with pytest.raises(NotImplementedOp, match="com.example::Thing"):
        edgerun.InferenceSession(model)


def test_too_new_opset_is_refused():
    with pytest.raises(NotImplementedOp, match="opset 99"):
        edgerun.InferenceSession(_model([], [], [], opset=99))


def test_dangling_input_is_an_invalid_graph():
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    model = _model([helper.make_node("Relu", ["nowhere"], ["y"], name="r")], [], [y])
    with pytest.raises(InvalidGraph, match="node 'r' \\(Relu\\) reads 'nowhere'"):
        edgerun.InferenceSession(model)


def test_kernel_failure_names_the_node():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    s = helper.make_tensor_value_info("s", TensorProto.INT64, None)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = _model([helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape_me")], [x, s], [y])
    sess = edgerun.InferenceSession(model)
    with pytest.raises(edgerun.Fail, match="node 'reshape_me' \\(Reshape\\) failed"):
        sess.run(None, {"x": np.ones(6, np.float32), "s": np.array([4, 4], np.int64)})


def test_unsorted_nodes_are_sorted():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Neg", ["y"], ["z"]), helper.make_node("Relu", ["x"], ["y"])]
    sess = edgerun.InferenceSession(_model(nodes, [x], [z]))
    (out,) = sess.run(None, {"x": np.array([-1, 2], np.float32)})
    np.testing.assert_array_equal(out, [0, -2])


def test_run_from_many_threads_at_once():
    sess = edgerun.InferenceSession(_add_model())
    errors, results = [], {}

    def work(i):
        try:
            x = np.full((4, 3), i, np.float32)
            for _ in range(50):
                (y,) = sess.run(None, {"x": x})
                assert np.array_equal(y, x + np.array([1, 2, 3], np.float32))
            results[i] = True
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 8


def test_profiling_writes_a_chrome_trace(tmp_path):
    import json

    opts = edgerun.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = str(tmp_path / "prof")
    sess = edgerun.InferenceSession(_add_model(), sess_options=opts)
    for _ in range(3):
        sess.run(None, {"x": np.ones((2, 3), np.float32)})
    path = sess.end_profiling()
    events = json.load(open(path))
    runs = [e for e in events if e["name"] == "model_run"]
    nodes = [e for e in events if e["cat"] == "Node"]
    assert len(runs) == 3 and len(nodes) == 3
    assert nodes[0]["name"] == "add0" and nodes[0]["args"]["op_name"] == "Add"
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
    assert "Add" in open(path[:-5] + ".html").read()
    assert edgerun.InferenceSession(_add_model()).end_profiling() == ""


def test_core_imports_without_numpy_and_says_what_is_missing():
    """Pyodide here has no numpy: the core must import, and sessions name the problem."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['numpy'] = None\n"
            "import warnings; warnings.simplefilter('ignore')\n"
            "import edgerun\n"
            "from edgerun.onnx import load_model\n"
            "m = load_model('examples/digits/digits_mlp.onnx')\n"
            "print(len(m.graph.nodes), edgerun.get_available_providers())\n"
            "try:\n"
            "    edgerun.InferenceSession('examples/digits/digits_mlp.onnx')\n"
            "except edgerun.NotImplementedOp as e:\n"
            "    print('error:', e)\n")
    from conftest import ROOT
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    nodes, providers = out.stdout.splitlines()[0].split(" ", 1)
    assert nodes == "16" and "CPUExecutionProvider" not in providers
    assert "no execution provider can run here (cpu: numpy is not installed)" in out.stdout


def test_optimized_model_filepath_writes_a_model_onnxruntime_runs(tmp_path):
    import onnxruntime

    from real_models import REAL_MODELS

    path, feeds = REAL_MODELS["light_squeezenet"]()
    opts = edgerun.SessionOptions()
    opts.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    sess = edgerun.InferenceSession(path, sess_options=opts)
    got = sess.run(None, feeds)
    saved = onnx.load(opts.optimized_model_filepath)
    assert len(saved.graph.node) < len(onnx.load(path).graph.node)
    so = onnxruntime.SessionOptions()
    so.log_severity_level = 3
    expected = onnxruntime.InferenceSession(opts.optimized_model_filepath, so).run(None, feeds)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-3, atol=1e-4)
    plain = edgerun.SessionOptions()
    plain.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    reloaded = edgerun.InferenceSession(opts.optimized_model_filepath, sess_options=plain)
    np.testing.assert_allclose(reloaded.run(None, feeds)[0], got[0], rtol=1e-5, atol=1e-6)


def _chain(ops, bad_at=None):
    """x -> op0 -> op1 -> ... -> y on float tensors; node `bad_at` reshapes to an impossible
    shape (a kernel failure at run time)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes, inits, current = [], [], "x"
    for i, op in enumerate(ops):
        out = "y" if i == len(ops) - 1 else f"v{i}"
        if i == bad_at:
            inits.append(helper.make_tensor(f"s{i}", TensorProto.INT64, [2], [5, 5]))
            nodes.append(helper.make_node("Reshape", [current, f"s{i}"], [out], name=f"n{i}"))
        else:
            nodes.append(helper.make_node(op, [current], [out], name=f"n{i}"))
        current = out
    graph = helper.make_graph(nodes, "chain", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def test_a_failing_step_deep_in_the_plan_is_named():
    sess = edgerun.InferenceSession(_chain(["Neg", "Relu", "Neg", "Abs", "Neg"], bad_at=3))
    assert sess._executor.plan.runner is not None          # the generated straight line
    with pytest.raises(edgerun.Fail, match="node 'n3' \\(Reshape\\) failed"):
        sess.run(None, {"x": np.ones(6, np.float32)})


def test_the_generated_plan_is_readable_and_tracebacks_show_its_lines():
    import traceback
    sess = edgerun.InferenceSession(_chain(["Neg", "Relu", "Neg", "Abs", "Neg"], bad_at=3))
    source = sess.plan_source()
    assert source.startswith("def run_program(env):")
    assert "# Reshape 'n3' on cpu" in source
    assert [entry.step.node.name for entry in sess._executor.plan.program] == \
        [f"n{i}" for i in range(5)]
    with pytest.raises(edgerun.Fail) as failure:
        sess.run(None, {"x": np.ones(6, np.float32)})
    frames = [frame for frame in traceback.extract_tb(failure.value.__cause__.__traceback__)
              if frame.filename.startswith("<edgerun plan")]
    assert frames and frames[0].line, "linecache should serve the generated source"
    failing = frames[0].line
    assert failing in source and "reshape" in failing.lower(), failing


def test_long_plans_run_through_the_loop_with_the_same_results(monkeypatch):
    from edgerun.runtime import straight_line
    ops = ["Neg", "Relu", "Sigmoid", "Neg", "Abs", "Tanh"] * 5
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    short = edgerun.InferenceSession(_chain(ops))
    monkeypatch.setattr(straight_line, "MAX_STEPS", 10)
    long = edgerun.InferenceSession(_chain(ops))
    assert short._executor.plan.runner is not None and long._executor.plan.runner is None
    np.testing.assert_array_equal(short.run(None, {"x": x})[0], long.run(None, {"x": x})[0])
    with pytest.raises(edgerun.Fail, match="node 'n7' \\(Reshape\\) failed"):
        edgerun.InferenceSession(_chain(ops, bad_at=7)).run(None, {"x": x})


def _if_model(then_nodes, then_outputs, else_nodes, else_outputs, after=(), then_inits=(),
              else_inits=()):
    """x (float [3]), c (bool) -> If(c) -> y, z, then the `after` nodes; outer initializer k."""
    def branch(name, nodes, outputs, inits):
        return helper.make_graph(nodes, name, [], [
            helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
    node = helper.make_node("If", ["c"], ["y", "z"], name="outer_if",
                            then_branch=branch("then", then_nodes, then_outputs, then_inits),
                            else_branch=branch("else", else_nodes, else_outputs, else_inits))
    k = helper.make_tensor("k", TensorProto.FLOAT, [3], [1, 2, 3])
    outputs = ["y", "z"] + [n.output[0] for n in after]
    return _model([node, *after],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
                   helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                  [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                  initializers=[k])


def _inlined_ifs(sess) -> list:
    from edgerun.runtime.straight_line import InlineIf
    return [entry.step.node.name for entry in sess._executor.plan.program
            if isinstance(entry.fn, InlineIf)]


def test_if_branches_written_inline_match_the_reference():
    from onnx.reference import ReferenceEvaluator
    inner = helper.make_node(
        "If", ["c"], ["t2"], name="inner_if",
        then_branch=helper.make_graph([helper.make_node("Neg", ["t1"], ["t3"])], "inner_then",
                                      [], [helper.make_tensor_value_info("t3", 1, None)]),
        else_branch=helper.make_graph([], "inner_else", [],
                                      [helper.make_tensor_value_info("kc", 1, None)],
                                      [helper.make_tensor("kc", 1, [3], [7, 8, 9])]))
    model = _if_model(
        [helper.make_node("Add", ["x", "k"], ["t1"]), inner], ["t2", "k"],
        [helper.make_node("Mul", ["x", "k2"], ["e1"]), helper.make_node("Neg", ["x"], ["unread"])],
        ["e1", "x"], else_inits=[helper.make_tensor("k2", 1, [3], [10, 20, 30])],
        after=[helper.make_node("Add", ["y", "z"], ["w"])])
    sess = edgerun.InferenceSession(model)
    assert _inlined_ifs(sess) == ["outer_if"]
    reference = ReferenceEvaluator(onnx.load_from_string(model))
    x = np.array([0.5, -1.0, 2.0], np.float32)
    for c in (True, False):
        feeds = {"x": x, "c": np.array(c)}
        for got, want in zip(sess.run(None, feeds), reference.run(None, feeds)):
            np.testing.assert_array_equal(got, want)


def test_if_branches_storing_a_name_the_graph_uses_are_called_not_inlined():
    model = _if_model([helper.make_node("Neg", ["x"], ["w"])], ["w", "x"],
                      [helper.make_node("Abs", ["x"], ["a"])], ["a", "k"],
                      after=[helper.make_node("Sigmoid", ["y"], ["w"])])   # "w" again
    sess = edgerun.InferenceSession(model)
    assert _inlined_ifs(sess) == []
    x = np.array([0.5, -1.0, 2.0], np.float32)
    y, z, w = sess.run(None, {"x": x, "c": np.array(True)})
    np.testing.assert_array_equal(y, -x)
    np.testing.assert_allclose(w, 1 / (1 + np.exp(x)), rtol=1e-6)


def test_a_failing_step_in_an_inlined_branch_is_named():
    bad = [helper.make_node("Reshape", ["x", "s"], ["r"], name="bad_reshape")]
    model = _if_model(bad, ["r", "x"], [helper.make_node("Abs", ["x"], ["a"])], ["a", "k"],
                      then_inits=[helper.make_tensor("s", TensorProto.INT64, [2], [5, 5])])
    sess = edgerun.InferenceSession(model)
    assert _inlined_ifs(sess) == ["outer_if"]
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x, "c": np.array(False)})[0], x)
    with pytest.raises(edgerun.Fail, match="node 'bad_reshape' \\(Reshape\\) failed"):
        sess.run(None, {"x": x, "c": np.array(True)})


def test_generated_code_keeps_values_in_locals_but_what_subgraphs_and_callers_read():
    """The straight line holds single-array results in Python locals. What must be in env
    is: values a Loop body reads, the graph outputs, and the values an inlined If's branches
    read once its kernel runs them against env (a condition that is not a one-element
    array); a kernel's numpy scalar result (Not of a 0-d bool) is kept as env would keep it."""
    loop_body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "b"], ["acc_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, None)])
    then_branch = helper.make_graph([helper.make_node("Mul", ["a", "a"], ["sq"])], "then", [],
                                    [helper.make_tensor_value_info("sq", 1, None)])
    else_branch = helper.make_graph([helper.make_node("Neg", ["a"], ["ng"])], "else", [],
                                    [helper.make_tensor_value_info("ng", 1, None)])
    nodes = [helper.make_node("Neg", ["x"], ["a"]),
             helper.make_node("ReduceSum", ["a"], ["s"], keepdims=0),
             helper.make_node("Add", ["a", "s"], ["b"]),
             helper.make_node("If", ["c"], ["f"], name="branchy", then_branch=then_branch,
                              else_branch=else_branch),
             helper.make_node("Loop", ["trips", "", "f"], ["acc"], body=loop_body),
             helper.make_node("Not", ["c"], ["not_c"]),       # a numpy bool, not an array
             helper.make_node("Cast", ["not_c"], ["flag"], to=TensorProto.FLOAT),
             helper.make_node("Sub", ["acc", "b"], ["d"]),
             helper.make_node("Add", ["d", "flag"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
                           helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                    helper.make_tensor_value_info("s", TensorProto.FLOAT, None)],
                   initializers=[helper.make_tensor("trips", TensorProto.INT64, [], [3])])
    sess = edgerun.InferenceSession(model)
    assert _inlined_ifs(sess) == ["branchy"]
    executor = sess._executor
    assert any(name.startswith("v") for name in executor.plan.runner.__code__.co_varnames)
    x = np.array([0.5, -1.0, 2.0], np.float32)
    a, s = -x, np.float32(-x.sum())
    b = a + s
    for c in (True, False):
        f = a * a if c else -a
        y, got_s = sess.run(None, {"x": x, "c": np.array(c)})
        np.testing.assert_allclose(y, f + 3 * b - b + (not c), rtol=1e-6)
        assert isinstance(got_s, np.ndarray) and got_s.shape == () and got_s == s
        # a numpy bool (not an array) takes the If kernel's path, which reads `a` from env
        env = {**executor._initial_env, "x": x, "c": np.bool_(c)}
        executor.plan.runner(env)
        np.testing.assert_allclose(env["y"], f + 2 * b + (not c), rtol=1e-6)


# ---- RunOptions.terminate -----------------------------------------------------------------


def _endless_loop_model() -> bytes:
    from onnx import TensorProto, helper

    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["v_in", "one"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1])],
        [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "c", "v"], ["vo"], body=body)], "g",
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("vo", TensorProto.FLOAT, [1])],
        [helper.make_tensor("n", TensorProto.INT64, [], [10 ** 12]),
         helper.make_tensor("c", TensorProto.BOOL, [], [True])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _long_chain_model(length: int) -> bytes:
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Mul", [f"x{i}", "k"], [f"x{i + 1}"]) for i in range(length)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x0", TensorProto.FLOAT, [256, 256])],
        [helper.make_tensor_value_info(f"x{length}", TensorProto.FLOAT, None)],
        [helper.make_tensor("k", TensorProto.FLOAT, [], [1.0001])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _stop_latency(session, feeds, after_s: float) -> float:
    """Sets terminate from another thread `after_s` into a run; the seconds the run took to
    stop after that (RunTerminated required)."""
    import threading
    import time

    options = edgerun.RunOptions()
    set_at = []

    def stop():
        time.sleep(after_s)
        options.terminate = True
        set_at.append(time.perf_counter())

    threading.Thread(target=stop).start()
    with pytest.raises(edgerun.RunTerminated, match="RunOptions.terminate"):
        session.run(None, feeds, options)
    return time.perf_counter() - set_at[0]


def test_terminate_stops_an_endless_loop():
    """A Loop of 10**12 iterations stops between iterations (it used to run until killed)."""
    session = edgerun.InferenceSession(_endless_loop_model())
    assert _stop_latency(session, {"v": np.zeros(1, np.float32)}, 0.3) < 0.1


@pytest.mark.parametrize("provider", ["cpu", "wasm", "webgpu"])
def test_terminate_stops_a_long_run_on_every_provider(provider, request):
    """Checked before every node (and, on webgpu, between small submitted batches: work on
    the GPU cannot be recalled). A run without run_options keeps the unchecked fast path."""
    import time

    if provider == "webgpu":
        request.getfixturevalue("gpu")
    options = edgerun.SessionOptions()
    options.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = edgerun.InferenceSession(_long_chain_model(600 if provider != "webgpu" else 200),
                                       options, providers=[provider])
    feeds = {"x0": np.ones((256, 256), np.float32)}
    session.run(None, feeds)
    started = time.perf_counter()
    want = session.run(None, feeds)
    whole = time.perf_counter() - started
    assert _stop_latency(session, feeds, whole / 3) < 0.1
    np.testing.assert_array_equal(session.run(None, feeds, edgerun.RunOptions())[0], want[0])


def test_terminate_already_set_fails_at_once():
    session = edgerun.InferenceSession(_long_chain_model(3))
    options = edgerun.RunOptions()
    options.terminate = True
    with pytest.raises(edgerun.RunTerminated):
        session.run(None, {"x0": np.ones((256, 256), np.float32)}, options)
    binding = session.io_binding()
    binding.bind_cpu_input("x0", np.ones((256, 256), np.float32))
    binding.bind_output("x3")
    with pytest.raises(edgerun.RunTerminated):
        session.run_with_iobinding(binding, options)


# ---- onnxruntime names: set_providers, fallback, run_with_ort_values, run_async -------------


def _digits():
    import os

    from conftest import ROOT
    return os.path.join(ROOT, "examples", "digits", "digits_mlp.onnx")


def test_get_all_providers_lists_every_known_provider():
    names = edgerun.get_all_providers()
    assert names[0] == "CPUExecutionProvider"
    assert {"WasmExecutionProvider", "WebGpuExecutionProvider", "CoreMLExecutionProvider",
            "NnapiExecutionProvider", "QNNExecutionProvider"} <= set(names)
    assert set(edgerun.get_available_providers()) <= set(names)


def test_set_providers_rebuilds_the_session_and_disable_fallback_refuses():
    x = np.random.default_rng(0).random((3, 64)).astype(np.float32)
    session = edgerun.InferenceSession(_digits())
    want = session.run(None, {"input": x})
    session.set_providers(["WasmExecutionProvider"])
    assert session.get_providers() == ["WasmExecutionProvider", "CPUExecutionProvider"]
    assert {n["provider"] for n in session.explain()["nodes"]} == {"wasm"}
    np.testing.assert_allclose(session.run(None, {"input": x})[1], want[1], rtol=1e-5,
                               atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        session.set_providers(["NnapiExecutionProvider"])       # not on this machine: skipped
    assert session.get_providers() == ["CPUExecutionProvider"]
    session.disable_fallback()
    with pytest.raises(InvalidArgument, match="not available here .* fallback is disabled"):
        session.set_providers(["NnapiExecutionProvider"])
    session.enable_fallback()
    session.set_providers()
    np.testing.assert_array_equal(session.run(None, {"input": x})[0], want[0])


def test_run_with_ort_values_gives_ort_values():
    x = np.random.default_rng(1).random((2, 64)).astype(np.float32)
    session = edgerun.InferenceSession(_digits())
    outputs = session.run_with_ort_values(["probabilities"],
                                          {"input": edgerun.OrtValue.ortvalue_from_numpy(x)})
    assert len(outputs) == 1 and isinstance(outputs[0], edgerun.OrtValue)
    np.testing.assert_array_equal(outputs[0].numpy(),
                                  session.run(["probabilities"], {"input": x})[0])
    with pytest.raises(InvalidArgument, match="takes OrtValues"):
        session.run_with_ort_values(None, {"input": x})


def test_run_async_calls_back_with_outputs_or_the_error():
    x = np.random.default_rng(2).random((2, 64)).astype(np.float32)
    session = edgerun.InferenceSession(_digits())
    done, results = threading.Event(), []

    def callback(outputs, user_data, error):
        results.append((outputs, user_data, error))
        done.set()

    session.run_async(None, {"input": x}, callback, "mine")
    assert done.wait(30)
    outputs, user_data, error = results.pop()
    assert error == "" and user_data == "mine"
    np.testing.assert_array_equal(outputs[0], session.run(None, {"input": x})[0])
    done.clear()
    session.run_async(None, {"input": x[:, :3]}, callback, 7)
    assert done.wait(30)
    outputs, user_data, error = results.pop()
    assert outputs is None and user_data == 7 and "InvalidArgument" in error


def test_python_custom_operators_in_onnxruntime_extensions_style():
    from edgerun.custom_ops import PyCustomOpDef, get_library_path, onnx_op

    @onnx_op(op_type="ScaleShiftTest", inputs=[PyCustomOpDef.dt_float, PyCustomOpDef.dt_float],
             outputs=[PyCustomOpDef.dt_float, PyCustomOpDef.dt_int64],
             attrs={"alpha": PyCustomOpDef.dt_float})
    def scale_shift(x, shift, alpha=1.0):
        return (x * alpha + shift).astype(np.float32), np.array(x.shape, np.int64)

    graph = helper.make_graph(
        [helper.make_node("ScaleShiftTest", ["x", "s"], ["y", "shape"], domain="ai.onnx.contrib",
                          alpha=3.0, unused=1),
         helper.make_node("Relu", ["y"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 2]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.contrib", 1)])
    data = model.SerializeToString()
    with pytest.raises(NotImplementedOp, match="register_custom_ops_library"):
        edgerun.InferenceSession(data)
    options = edgerun.SessionOptions()
    with pytest.raises(InvalidArgument, match="written in Python"):
        options.register_custom_ops_library("/usr/lib/libortextensions.so")
    options.register_custom_ops_library(get_library_path())
    x = np.array([[1, -2], [3, -4]], np.float32)
    for providers in (["cpu"], ["wasm"]):         # wasm: a page, where no CPU provider exists
        session = edgerun.InferenceSession(data, options, providers=providers)
        assert {n["provider"] for n in session.explain()["nodes"]} == {providers[0]}
        z, shape = session.run(None, {"x": x, "s": np.ones(2, np.float32)})
        np.testing.assert_array_equal(z, np.maximum(x * 3 + 1, 0))
        np.testing.assert_array_equal(shape, [2, 2])
    with pytest.raises(NotImplementedOp, match="register_custom_ops_library"):
        edgerun.InferenceSession(data, providers=["wasm"])


def test_the_web_bridge_stops_a_run_when_its_abort_signal_fires():
    """The JavaScript API's run(feeds, fetches, {signal}) reaches Python as RunOptions whose
    terminate reads the AbortSignal at each check."""
    from edgerun.web.bridge import WebSession

    class Signal:                          # an AbortSignal that aborts at its 5th reading
        reads = 0

        @property
        def aborted(self):
            Signal.reads += 1
            return Signal.reads >= 5

    session = WebSession(_long_chain_model(50), ["cpu"])
    feed = [("x0", "float32", [256, 256], np.ones((256, 256), np.float32).tobytes())]
    assert len(session.run(feed)) == 1
    with pytest.raises(edgerun.RunTerminated):
        session.run(feed, None, Signal())
    assert 5 <= Signal.reads <= 6      # read before each node, stopped at once


def test_intra_op_num_threads_limits_blas_for_the_run_and_restores_it():
    """intra_op_num_threads = 1 holds numpy's BLAS to one thread while a run lasts (the
    provider's begin_run) and gives the process its own count back after (end_run), as the
    onnxruntime pool leaves the rest of the process alone."""
    from threadpoolctl import threadpool_info, threadpool_limits

    import edgerun
    from edgerun.providers.cpu.provider import CPUProvider

    def blas_threads():
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    with threadpool_limits(limits=2, user_api="blas"):
        options = edgerun.SessionOptions()
        options.intra_op_num_threads = 1
        provider = CPUProvider()
        provider.configure(options)
        provider.begin_run()
        assert blas_threads() == {1}
        provider.end_run()
        assert blas_threads() == {2}
