"""optimizer/fuse_elementwise_program.py and com.edgerun ElementwiseProgram: chains of float32
Add/Sub/Mul/Div (by chain values or scalars) and QDQ pairs over one tensor run as one pass.

Random chains (seeded; batch 1 and more, strided inputs, NaN, infinities, zeros and values on
the grid's rounding ties) equal the unfused graph bit for bit, natively and through the
numpy interpreter, and onnxruntime's unoptimized run within one step of the grids they pass
through; the optimized file onnxruntime loads gives the same values."""
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgerun
from edgerun.providers.cpu.native import library

ARITHMETIC = ("Add", "Sub", "Mul", "Div")


def _chain(rng, length: int, rank: int):
    """A random chain over x: each step an arithmetic node of a chain value and a scalar (either
    side) or of two chain values, or a QDQ pair; returns (nodes, initializers, the grid scales
    the output passed through)."""
    nodes, inits, values, scales = [], [], ["x"], []
    for i in range(length):
        a, out = values[int(rng.integers(len(values)))], f"v{i}"
        if rng.random() < 0.35:
            scale, point = float(rng.choice([0.05, 0.125, 0.3])), int(rng.integers(0, 256))
            dtype = rng.choice([np.uint8, np.int8])
            point = point if dtype == np.uint8 else point - 128
            inits += [numpy_helper.from_array(np.array(scale, np.float32), f"s{i}"),
                      numpy_helper.from_array(np.array(point, dtype), f"z{i}")]
            nodes += [helper.make_node("QuantizeLinear", [a, f"s{i}", f"z{i}"], [f"q{i}"]),
                      helper.make_node("DequantizeLinear", [f"q{i}", f"s{i}", f"z{i}"], [out])]
            scales.append(scale)
        else:
            op = str(rng.choice(ARITHMETIC))
            if rng.random() < 0.3 and len(values) > 1:
                b = values[int(rng.integers(len(values)))]
            else:
                b = f"c{i}"
                shape = [] if rng.random() < 0.6 else [1] * int(rng.integers(1, rank + 1))
                value = float(rng.choice([3.0, 6.0, -0.5, 0.1, 1e-3]))
                inits.append(numpy_helper.from_array(np.full(shape, value, np.float32), b))
            nodes.append(helper.make_node(op, [b, a] if rng.random() < 0.3 else [a, b], [out]))
        values.append(out)
    nodes.append(helper.make_node("Identity", [values[-1]], ["y"]))
    return nodes, inits, scales


def _model(nodes, inits, shape, transpose: bool):
    """x (transposed in the graph when `transpose`: the chain reads a strided view)."""
    given = list(reversed(shape)) if transpose else shape
    if transpose:
        nodes = [helper.make_node("Transpose", ["given"], ["x"])] + nodes
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info(
        "given" if transpose else "x", TensorProto.FLOAT, given)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             ir_version=8).SerializeToString()


def _feed(rng, shape, transpose: bool):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    flat = x.reshape(-1)
    flat[:3] = [np.nan, np.inf, -np.inf][:flat.size]
    flat[3:8] = [0.0, -0.0, 0.025, 0.0625, -0.15][:max(0, flat.size - 3)]    # ties of the grids
    return np.ascontiguousarray(x.transpose()) if transpose else x


def _session(model, level, **kw):
    options = edgerun.SessionOptions()
    options.graph_optimization_level = level
    for k, v in kw.items():
        setattr(options, k, v)
    return edgerun.InferenceSession(model, options, providers=["cpu"])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # NaN and infinities in the feeds
@pytest.mark.parametrize("isa", ["none", "native"])
def test_random_chains_equal_the_unfused_nodes_and_onnxruntime(isa):
    if isa == "native" and not library.available():
        pytest.skip(f"no native kernels here: {library.status()}")
    rng = np.random.default_rng(2026)
    fused_chains = 0
    with library.forced("none") if isa == "none" and library.library() else _nothing():
        for case in range(40):
            shape = [int(d) for d in rng.choice([1, 2, 3, 5, 17], size=int(rng.integers(1, 5)))]
            shape[0] = 1 if case % 3 == 0 else shape[0]             # batch 1 included
            nodes, inits, scales = _chain(rng, int(rng.integers(2, 12)), len(shape))
            transpose = case % 4 == 1
            model, x = _model(nodes, inits, shape, transpose), _feed(rng, shape, transpose)
            name = "given" if transpose else "x"
            fused = _session(model, edgerun.GraphOptimizationLevel.ORT_ENABLE_ALL)
            fused_chains += sum(n["op_type"] == "ElementwiseProgram"
                                for n in fused.explain()["nodes"])
            got = fused.run(None, {name: x})[0]
            plain = _session(model, edgerun.GraphOptimizationLevel.ORT_ENABLE_BASIC)
            want = plain.run(None, {name: x})[0]
            np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32),
                                          err_msg=f"case {case}")
            options = onnxruntime.SessionOptions()
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
            theirs = onnxruntime.InferenceSession(model, options, providers=[
                "CPUExecutionProvider"]).run(None, {name: x})[0]
            step = max(scales[-1:] or [0.0])
            finite = np.isfinite(theirs) & np.isfinite(got)
            assert np.array_equal(np.isnan(got), np.isnan(theirs)), case
            np.testing.assert_allclose(got[finite], theirs[finite], rtol=1e-5,
                                       atol=step + 1e-5, err_msg=f"case {case}")
    assert fused_chains >= 20, fused_chains


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _hard_swish_qdq(extra_reader: bool = False):
    """ppocr's QDQ HardSwish: Add(x, 3) -> pair -> Mul(x, .) -> pair -> Div(., 6) -> pair."""
    def pair(x, i, out):
        return [helper.make_node("QuantizeLinear", [x, f"s{i}", "z"], [f"q{i}"]),
                helper.make_node("DequantizeLinear", [f"q{i}", f"s{i}", "z"], [out])]
    nodes = [helper.make_node("Add", ["x", "three"], ["a"])] + pair("a", 0, "aq") + \
        [helper.make_node("Mul", ["x", "aq"], ["m"])] + pair("m", 1, "mq") + \
        [helper.make_node("Div", ["mq", "six"], ["d"])] + pair("d", 2, "y")
    outputs = ["y", "mq"] if extra_reader else ["y"]
    inits = [numpy_helper.from_array(np.array(3, np.float32), "three"),
             numpy_helper.from_array(np.array(6, np.float32), "six"),
             numpy_helper.from_array(np.array(128, np.uint8), "z")] + \
        [numpy_helper.from_array(np.array(s, np.float32), f"s{i}")
         for i, s in enumerate((0.05, 0.2, 0.03))]
    graph = helper.make_graph(nodes, "hs", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 8, 5, 7])], [helper.make_tensor_value_info(
            o, TensorProto.FLOAT, None) for o in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             ir_version=8).SerializeToString()


def test_a_qdq_hard_swish_is_one_program_and_saves_as_its_nodes(tmp_path):
    model = _hard_swish_qdq()
    x = _feed(np.random.default_rng(3), [1, 8, 5, 7], False)
    saved = str(tmp_path / "optimized.onnx")
    sess = _session(model, edgerun.GraphOptimizationLevel.ORT_ENABLE_ALL,
                    optimized_model_filepath=saved)
    assert [n["op_type"] for n in sess.explain()["nodes"]] == ["ElementwiseProgram"]
    got = sess.run(None, {"x": x})[0]
    theirs = onnxruntime.InferenceSession(saved, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    mine = _session(saved, edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, {"x": x})[0]
    np.testing.assert_array_equal(mine.view(np.int32), got.view(np.int32))
    finite = np.isfinite(got)
    np.testing.assert_allclose(got[finite], theirs[finite], atol=0.03 + 1e-6)


def test_a_value_read_outside_ends_the_chain_there():
    """The Mul's pair is a graph output too: the first program ends at it, and the Div and
    its pair make a second one from there (values unchanged)."""
    model = _hard_swish_qdq(extra_reader=True)
    x = _feed(np.random.default_rng(4), [1, 8, 5, 7], False)
    sess = _session(model, edgerun.GraphOptimizationLevel.ORT_ENABLE_ALL)
    ops = [n["op_type"] for n in sess.explain()["nodes"]]
    assert ops == ["ElementwiseProgram", "ElementwiseProgram"], ops
    plain = _session(model, edgerun.GraphOptimizationLevel.ORT_ENABLE_BASIC)
    for got, want in zip(sess.run(None, {"x": x}), plain.run(None, {"x": x})):
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


def test_a_scalar_of_higher_rank_than_x_is_not_taken():
    """Add(x [3], c [1, 1]) broadcasts x to [1, 3]: the program keeps x's shape, so the node
    stays out of it."""
    nodes = [helper.make_node("Add", ["x", "c"], ["a"]),
             helper.make_node("Mul", ["a", "d"], ["y"])]
    inits = [numpy_helper.from_array(np.ones((1, 1), np.float32), "c"),
             numpy_helper.from_array(np.array(2, np.float32), "d")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              ir_version=8).SerializeToString()
    sess = _session(model, edgerun.GraphOptimizationLevel.ORT_ENABLE_ALL)
    assert "ElementwiseProgram" not in {n["op_type"] for n in sess.explain()["nodes"]}
    assert sess.run(None, {"x": np.arange(3, dtype=np.float32)})[0].shape == (1, 3)
