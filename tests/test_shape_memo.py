"""Shape computations remembered between runs (runtime/shape_memo.py) give the results a
fresh computation gives, whatever the order of input shapes, and never hand out a value the
caller could change under the next run."""
import numpy as np
from onnx import TensorProto, helper

import edgerun
from edgerun.runtime.shape_memo import shape_determined_steps


def _reshape_by_shape_model():
    """y = Reshape(x, Concat(Shape(x)[0], -1)) + 1; s = Shape(x) (a graph output)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["first"], axis=0),
        helper.make_node("Unsqueeze", ["first", "axes"], ["first1"]),
        helper.make_node("Concat", ["first1", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("Add", ["flat", "one"], ["y"]),
        helper.make_node("Shape", ["x"], ["s"]),
    ]
    inits = [helper.make_tensor("zero", TensorProto.INT64, [], [0]),
             helper.make_tensor("axes", TensorProto.INT64, [1], [0]),
             helper.make_tensor("minus_one", TensorProto.INT64, [1], [-1]),
             helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("s", TensorProto.INT64, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def test_remembered_shapes_follow_every_change_of_input_shape():
    so = edgerun.SessionOptions()
    so.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = edgerun.InferenceSession(_reshape_by_shape_model(), so)
    rng = np.random.default_rng(0)
    for shape in [(2, 3, 4), (2, 3, 4), (5, 2), (2, 3, 4), (1, 7, 1, 2), (5, 2)]:
        x = rng.standard_normal(shape).astype(np.float32)
        y, s = sess.run(None, {"x": x})
        np.testing.assert_array_equal(y, x.reshape(shape[0], -1) + 1)
        np.testing.assert_array_equal(s, shape)
        s[0] = 99                      # a graph output is the caller's own array
    y, s = sess.run(None, {"x": np.zeros((5, 2), np.float32)})
    np.testing.assert_array_equal(s, [5, 2])


def test_shape_chains_are_chosen_and_data_is_not():
    so = edgerun.SessionOptions()
    so.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = edgerun.InferenceSession(_reshape_by_shape_model(), so)
    plan = sess._executor.plan
    chosen = shape_determined_steps(plan.steps, sess._executor.constants,
                                    set(plan.output_keys))
    picked = {plan.steps[i].node.op_type: kind for i, kind in chosen.items()}
    assert picked == {"Shape": "shape", "Gather": "inputs", "Unsqueeze": "inputs",
                      "Concat": "inputs"}     # not Reshape or Add (they read x), not `s`


def test_a_shape_value_computed_as_a_numpy_scalar_is_remembered_downstream(monkeypatch):
    """Not over a 0-d bool gives a numpy scalar, which env stores as a 0-d array: the
    remembered result must be that array, or each run stores a fresh one and the Cast that
    reads it misses its memory every time (silero VAD's LSTM wrapper: three such Casts)."""
    from edgerun.providers.cpu import registry

    calls = []
    (since, cast), = [e for e in registry._KERNELS[("", "Cast")] if e[0] <= 17][-1:]

    def counted_cast(ctx, *args, **attrs):
        calls.append(1)
        return cast(ctx, *args, **attrs)

    monkeypatch.setitem(registry._KERNELS, ("", "Cast"), [(since, counted_cast)])
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Size", ["shape"], ["rank"]),
             helper.make_node("Equal", ["rank", "two"], ["is_matrix"]),
             helper.make_node("Not", ["is_matrix"], ["not_matrix"]),
             helper.make_node("Cast", ["not_matrix"], ["flag"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "flag"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("two", TensorProto.INT64, [], [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    so = edgerun.SessionOptions()
    so.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = edgerun.InferenceSession(model.SerializeToString(), so)
    x = np.ones((2, 3), np.float32)
    for _ in range(4):
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x)
    assert len(calls) == 1
    np.testing.assert_array_equal(sess.run(None, {"x": np.ones(3, np.float32)})[0],
                                  np.full(3, 2, np.float32))
    assert len(calls) == 2


def test_an_output_computed_from_a_remembered_value_is_the_callers_own_copy():
    """Squeeze/Reshape of a remembered shape value is a view of it: the output must still be
    a copy, or a caller writing to it changes what the next run returns."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["width"], axis=0),
             helper.make_node("Reshape", ["width", "flat"], ["y"]),
             helper.make_node("Unsqueeze", ["width", "axes"], ["z"])]
    inits = [helper.make_tensor("one", TensorProto.INT64, [], [1]),
             helper.make_tensor("flat", TensorProto.INT64, [1], [-1]),
             helper.make_tensor("axes", TensorProto.INT64, [1], [0])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info(n, TensorProto.INT64, None) for n in ("y", "z")], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = edgerun.InferenceSession(model.SerializeToString())
    x = np.zeros((2, 3), np.float32)
    for _ in range(3):
        y, z = sess.run(None, {"x": x})
        np.testing.assert_array_equal(y, [3])
        np.testing.assert_array_equal(z, [3])
        y[...] = 99
        z[...] = 98


def test_generated_code_tests_remembered_keys_without_calling_the_step(monkeypatch):
    """On a hit the plan's generated code takes the remembered result itself (no call of the
    step's wrapper); a new input shape calls it again."""
    from edgerun.runtime import executor, shape_memo

    calls = []

    def counted_remembering(step, kind, as_value):
        remembered = shape_memo.remembering(step, kind, as_value)

        def counted(*args, **attrs):
            calls.append(step.node.op_type)
            return remembered(*args, **attrs)

        counted.memory, counted.keyed_by = remembered.memory, remembered.keyed_by
        return counted

    monkeypatch.setattr(executor, "remembering", counted_remembering)
    so = edgerun.SessionOptions()
    so.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = edgerun.InferenceSession(_reshape_by_shape_model(), so)
    x = np.ones((2, 3, 4), np.float32)
    sess.run(None, {"x": x})
    first = len(calls)
    assert first == 4                   # Shape, Gather, Unsqueeze, Concat
    for _ in range(3):
        y, _ = sess.run(None, {"x": x})
        np.testing.assert_array_equal(y, np.full((2, 12), 2, np.float32))
    assert len(calls) == first
    y, _ = sess.run(None, {"x": np.ones((3, 2), np.float32)})
    np.testing.assert_array_equal(y, np.full((3, 2), 2, np.float32))
    assert len(calls) == 2 * first
