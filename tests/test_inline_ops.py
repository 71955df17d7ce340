"""Simple operators written into the generated plan code as numpy expressions
(runtime/inline_ops.py) give the kernels' results, call no kernel, and fail naming the node."""
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import edgerun
from edgerun.providers.cpu import registry

INT64_MAX = 2 ** 63 - 1


def _model(op, opset, x_shape, inits=(), attrs=None, extra_inputs=()):
    """One `op` node reading x (float32) and constant inputs `inits` [(name, values)]."""
    initializers = [helper.make_tensor(name, TensorProto.INT64, [len(v)] if isinstance(v, list)
                                       else [], v if isinstance(v, list) else [v])
                    for name, v in inits]
    node = helper.make_node(op, ["x"] + list(extra_inputs or [n for n, _ in inits]), ["y"],
                            name="the_node", **(attrs or {}))
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


# (op, opset, x shape, constant inputs, attributes, written inline)
CASES = [
    ("Unsqueeze", 13, (3, 4), [("axes", [0])], None, True),
    ("Unsqueeze", 13, (3, 4), [("axes", [3, 1])], None, True),
    ("Unsqueeze", 13, (), [("axes", [0])], None, True),
    ("Unsqueeze", 11, (3, 4), [], {"axes": [0, 3]}, True),
    ("Unsqueeze", 13, (3, 4), [("axes", [-1])], None, False),
    ("Squeeze", 13, (3, 1, 4, 1), [("axes", [1])], None, True),
    ("Squeeze", 13, (3, 1, 4, 1), [], None, True),
    ("Squeeze", 11, (1, 4, 1), [], {"axes": [0, 2]}, True),
    ("Squeeze", 13, (3, 1), [("axes", [-1])], None, False),
    ("Slice", 13, (5, 7), [("s", [1]), ("e", [-1]), ("a", [1]), ("t", [2])], None, True),
    ("Slice", 13, (5, 7), [("s", [-100, 2]), ("e", [100, INT64_MAX])], None, True),
    ("Slice", 13, (5, 7), [("s", [4]), ("e", [1]), ("a", [0])], None, True),   # empty
    ("Slice", 13, (5, 7), [("s", [4]), ("e", [0]), ("a", [0]), ("t", [-1])], None, False),
    ("Slice", 13, (5, 7), [("s", [1]), ("e", [3]), ("a", [-1])], None, False),
    ("Slice", 1, (5, 7), [], {"starts": [1, 0], "ends": [3, -2], "axes": [1, 0]}, True),
    ("Gather", 13, (4, 3), [("i", -1)], None, True),
    ("Gather", 13, (4, 3), [("i", 2)], {"axis": 1}, True),
    ("Gather", 13, (4, 3), [("i", [0, 2])], None, False),
    ("Reshape", 14, (4, 3), [("shape", [-1, 2])], None, True),
    ("Reshape", 14, (4, 3), [("shape", [0, 3])], None, False),
    ("Identity", 13, (2, 2), [], None, True),
    ("Pow", 13, (2, 3), [("two", 2)], None, True),
    ("Pow", 13, (2, 3), [("three", 3)], None, False),
    ("Pow", 13, (2, 3), [("two", [2])], None, False),
]


def _counting(monkeypatch, op):
    calls = []
    registry.supported_ops()                    # the kernels load on first use
    entries = registry._KERNELS[("", op)]

    def counted(fn):
        def kernel(ctx, *args, **attrs):
            calls.append(1)
            return fn(ctx, *args, **attrs)
        return kernel

    monkeypatch.setitem(registry._KERNELS, ("", op), [(since, counted(fn))
                                                      for since, fn in entries])
    return calls


@pytest.mark.parametrize("op,opset,x_shape,inits,attrs,inline", CASES)
def test_inline_forms_match_the_reference_and_call_no_kernel(op, opset, x_shape, inits, attrs,
                                                             inline, monkeypatch):
    calls = _counting(monkeypatch, op)
    model = _model(op, opset, x_shape, inits, attrs)
    so = edgerun.SessionOptions()
    so.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = edgerun.InferenceSession(model.SerializeToString(), so)
    x = np.arange(int(np.prod(x_shape)), dtype=np.float32).reshape(x_shape)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    for _ in range(2):
        got = sess.run(None, {"x": x})[0]
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert (len(calls) == 0) == inline


@pytest.mark.parametrize("op,opset,inits,attrs,x_shape,message", [
    ("Gather", 13, [("i", 4)], None, (4, 3), "index 4 is out of bounds"),
    ("Squeeze", 13, [("axes", [0])], None, (3, 1), "size not equal to one"),
    ("Unsqueeze", 13, [("axes", [5])], None, (3, 4), "too many indices"),
    ("Reshape", 14, [("shape", [5, -1])], None, (4, 3), "cannot reshape"),
    ("Slice", 13, [("s", [0]), ("e", [1]), ("a", [2])], None, (4, 3), "too many indices"),
])
def test_inline_forms_fail_naming_the_node(op, opset, inits, attrs, x_shape, message):
    sess = edgerun.InferenceSession(_model(op, opset, x_shape, inits, attrs).SerializeToString())
    with pytest.raises(edgerun.Fail, match=rf"node 'the_node' \({op}\) failed: .*{message}"):
        sess.run(None, {"x": np.ones(x_shape, np.float32)})


def test_an_initializer_a_feed_may_replace_is_not_written_in():
    """An initializer that is also a graph input is a default: its value is read at run time."""
    model = _model("Unsqueeze", 13, (3,), [("axes", [0])])
    model.graph.input.append(helper.make_tensor_value_info("axes", TensorProto.INT64, [1]))
    sess = edgerun.InferenceSession(model.SerializeToString())
    x = np.ones(3, np.float32)
    assert sess.run(None, {"x": x})[0].shape == (1, 3)
    assert sess.run(None, {"x": x, "axes": np.array([1], np.int64)})[0].shape == (3, 1)
