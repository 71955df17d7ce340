"""Broken and hostile inputs get edgerun's errors, naming the problem, before anything large
is allocated: each case a fuzzer or a user found once (the file format's own cases are in
test_onnx_format.py, pack and serve in test_pack.py and test_cli.py, RunOptions.terminate in
test_session_api.py)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgerun
from edgerun import Fail


def _session(nodes, inputs=(), initializers=(), opset=17, options=None):
    graph = helper.make_graph(nodes, "g", list(inputs),
                              [onnx.ValueInfoProto(name=nodes[-1].output[0])],
                              list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return edgerun.InferenceSession(model.SerializeToString(), options)


def _int64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


X = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
HUGE = [10 ** 6, 10 ** 5, 1000]        # 364 TiB of float32


@pytest.mark.parametrize("nodes,inits,feeds", [
    ([helper.make_node("Expand", ["x", "s"], ["y"])], [_int64("s", HUGE)],
     {"x": np.ones(1, np.float32)}),
    ([helper.make_node("ConstantOfShape", ["s"], ["y"])], [_int64("s", HUGE)], {}),
    ([helper.make_node("Tile", ["x", "s"], ["y"])], [_int64("s", [10 ** 10])],
     {"x": np.ones(10, np.float32)}),
    ([helper.make_node("Range", ["a", "b", "c"], ["y"])],
     [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
      (("a", 0), ("b", 1e12), ("c", 1))], {}),
    ([helper.make_node("Pad", ["x", "p"], ["y"])], [_int64("p", [0, 10 ** 12])],
     {"x": np.ones(3, np.float32)}),
    ([helper.make_node("OneHot", ["x", "d", "v"], ["y"])],
     [_int64("d", 10 ** 12), numpy_helper.from_array(np.array([0, 1], np.float32), "v")],
     {"x": np.ones(3, np.float32)}),
], ids=["Expand", "ConstantOfShape", "Tile", "Range", "Pad", "OneHot"])
def test_huge_outputs_fail_before_allocating(nodes, inits, feeds):
    session = _session(nodes, [X] if feeds else [], inits)
    with pytest.raises(Fail, match=r"would take .* more than SessionOptions.max_tensor_bytes"):
        session.run(None, feeds)


def test_the_allocation_limit_is_a_session_option():
    options = edgerun.SessionOptions()
    options.max_tensor_bytes = 1000
    session = _session([helper.make_node("Expand", ["x", "s"], ["y"])], [X], [_int64("s", [300])],
                       options=options)
    with pytest.raises(Fail, match=r"1200 bytes, more than .*\(1000 bytes\)"):
        session.run(None, {"x": np.ones(1, np.float32)})
    options.max_tensor_bytes = 4000
    session = _session([helper.make_node("Expand", ["x", "s"], ["y"])], [X], [_int64("s", [300])],
                       options=options)
    assert session.run(None, {"x": np.ones(1, np.float32)})[0].shape == (300,)


def test_conv_with_zero_strides_names_them():
    w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    session = _session([helper.make_node("Conv", ["x", "w"], ["y"], strides=[0, 1])], [X], [w])
    with pytest.raises(Fail, match=r"strides \[0, 1\].* must be positive"):
        session.run(None, {"x": np.ones((1, 1, 5, 5), np.float32)})


def test_slice_with_a_huge_constant_axis_is_a_clear_error():
    """The inlined Slice built an index list of 10**15 entries first (MemoryError)."""
    session = _session([helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])], [X],
                       [_int64("s", [0]), _int64("e", [1]), _int64("a", [10 ** 15])])
    with pytest.raises(Fail, match="out of range"):
        session.run(None, {"x": np.ones(3, np.float32)})


@pytest.mark.parametrize("provider", ["cpu", "wasm"])
def test_an_image_of_width_zero_is_refused_not_nan(provider):
    """ppocr's classifier fed a width-0 image returned NaN logits (onnxruntime refuses)."""
    from real_models import REAL_MODELS

    path, _ = REAL_MODELS["ppocr_mobile_cls"]()
    session = edgerun.InferenceSession(path, providers=[provider])
    with pytest.raises(Fail, match="empty spatial axis"):
        session.run(None, {"x": np.zeros((1, 3, 48, 0), np.float32)})


def test_fuzzed_models_give_only_edgerun_errors():
    """A fixed-seed sample of the mutation fuzzer (python -m edgerun.tools.fuzz): every
    mutated model loads and runs, or is refused with one of edgerun's errors; none escapes
    as another exception or hangs."""
    from edgerun.tools import fuzz

    seeds = fuzz.seed_models()
    findings, outcomes = [], set()
    for index in range(3000):
        name, data, how, rng = fuzz.make_case(seeds, 20261126, index)
        outcome, detail = fuzz.run_case(data, rng)
        outcomes.add(outcome)
        if outcome in (fuzz.ESCAPED, fuzz.HANG):
            findings.append(f"i{index} [{name}: {how}] {outcome}: {detail}")
    assert not findings, "\n".join(findings)
    assert outcomes == {fuzz.OK, fuzz.REFUSED}       # both kinds of mutation were made


def test_eight_threads_share_one_session():
    """A soak: 8 threads run one session 40 times each with their own inputs; every result
    is the one a single thread gets."""
    import threading

    from real_models import REAL_MODELS

    path, _ = REAL_MODELS["ppocr_mobile_cls"]()
    session = edgerun.InferenceSession(path)
    rng = np.random.default_rng(0)
    inputs = [rng.random((1, 3, 48, 96 + 16 * i)).astype(np.float32) for i in range(8)]
    expected = [session.run(None, {"x": x})[0] for x in inputs]
    errors = []

    def worker(i):
        try:
            for _ in range(40):
                got = session.run(None, {"x": inputs[i]})[0]
                np.testing.assert_array_equal(got, expected[i])
        except Exception as e:   # noqa: BLE001 - reported below
            errors.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# ---- the decoder and the graph check: each case the fuzzer found once ----------------------


def _load(data: bytes):
    return edgerun.InferenceSession(data)


def test_a_field_of_the_wrong_wire_type_is_invalid_protobuf():
    """b"\\x38\\x01" is field 7 (ModelProto.graph) sent as a varint: "object of type 'int' has
    no len()" once; onnxruntime says no graph was found."""
    with pytest.raises(edgerun.InvalidProtobuf, match="ModelProto field 7 has wire type 0"):
        _load(b"\x38\x01")


def test_tensor_data_that_does_not_fit_its_dims_is_refused_at_load():
    tensor = numpy_helper.from_array(np.ones(4, np.float32), "w")
    tensor.dims[:] = [10 ** 12]                 # 4 values for a 10**12-element tensor
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                              [onnx.ValueInfoProto(name="y")], [tensor])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(edgerun.InvalidProtobuf, match=r"'w' holds 16 bytes .* need 4000000000000"):
        _load(data.SerializeToString())


def test_values_of_an_unknown_element_type_are_refused():
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", 99, [1])],
                              [onnx.ValueInfoProto(name="y")])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(edgerun.InvalidProtobuf, match="unknown element type 99"):
        _load(data.SerializeToString())


def _if_model(then_branch) -> bytes:
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_branch,
                            else_branch=helper.make_graph(
                                [helper.make_node("Constant", [], ["e"], value_float=1.0)],
                                "else", [], [onnx.ValueInfoProto(name="e")]))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("c", TensorProto.BOOL,
                                                                          [])],
                              [onnx.ValueInfoProto(name="y")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_an_if_branch_that_is_not_a_graph_is_an_invalid_graph():
    """A KeyError with a raw object id once."""
    data = _if_model(helper.make_graph([helper.make_node("Constant", [], ["t"], value_float=2.0)],
                                       "then", [], [onnx.ValueInfoProto(name="t")]))
    model = onnx.load_from_string(data)
    branch = next(a for a in model.graph.node[0].attribute if a.name == "then_branch")
    branch.CopyFrom(helper.make_attribute(branch.name, 3))      # an int where a graph goes
    with pytest.raises(edgerun.InvalidGraph, match="attribute 'then_branch' must be (a graph|GRAPH), got INT"):
        _load(model.SerializeToString())


def test_subgraphs_nested_past_the_limit_are_refused_not_a_recursion_error():
    """Deeply nested subgraphs (2,000) were a RecursionError; 150 here, past the limit (built
    with edgerun's own writer: onnx's protobuf refuses to)."""
    from edgerun import ir
    from edgerun.onnx.writer import model_to_bytes

    def constant(name):
        return ir.Node(op_type="Constant", inputs=[], outputs=[name], attributes={
            "value_float": ir.Attribute("value_float", ir.AttrType.FLOAT, 2.0)})

    leaf = ir.Graph(nodes=[constant("t")], outputs=[ir.ValueInfo("t")], name="leaf")
    inner = leaf
    for level in range(150):
        node = ir.Node(op_type="If", inputs=["c"], outputs=[f"o{level}"], attributes={
            "then_branch": ir.Attribute("then_branch", ir.AttrType.GRAPH, inner),
            "else_branch": ir.Attribute("else_branch", ir.AttrType.GRAPH, leaf)})
        inner = ir.Graph(nodes=[node], outputs=[ir.ValueInfo(f"o{level}")], name=f"g{level}")
    model = ir.Model(graph=inner, ir_version=8, opset_imports={"": 17})
    with pytest.raises(edgerun.InvalidProtobuf, match="nested more than 100 levels"):
        _load(model_to_bytes(model))


def test_a_value_produced_twice_is_an_invalid_graph():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]),
                               helper.make_node("Neg", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [onnx.ValueInfoProto(name="y")])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(edgerun.InvalidGraph, match="produces 'y', which is already"):
        _load(data.SerializeToString())


def test_a_huge_declared_dim_is_a_feed_error_not_an_overflow():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [10 ** 12])],
                              [onnx.ValueInfoProto(name="y")])
    session = _load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                    .SerializeToString())
    with pytest.raises(edgerun.InvalidArgument, match="dimension 0 must be 1000000000000"):
        session.run(None, {"x": np.ones(3, np.float32)})


def test_attributes_of_the_wrong_type_or_missing_are_refused_before_any_pass():
    """Passes read attributes as the schema types them (IndexError, TypeError, ValueError in
    optimizer passes once): a wrong type, or a required attribute missing, is an InvalidGraph."""
    w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    conv = helper.make_node("Conv", ["x", "w"], ["y"])
    conv.attribute.append(helper.make_attribute("pads", 1))          # INTS expected
    session_model = helper.make_model(helper.make_graph(
        [conv], "g", [X], [onnx.ValueInfoProto(name="y")], [w]),
        opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(edgerun.InvalidGraph, match="attribute 'pads' must be INTS, got INT"):
        _load(session_model.SerializeToString())
    cast = helper.make_node("Cast", ["x"], ["y"])                     # 'to' is required
    model = helper.make_model(helper.make_graph([cast], "g", [X], [onnx.ValueInfoProto(name="y")]),
                              opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(edgerun.InvalidGraph, match="lacks its required attribute 'to'"):
        _load(model.SerializeToString())


def _typed_model(nodes, inputs, opset=17) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, [onnx.ValueInfoProto(name=nodes[-1].output[0])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]) \
        .SerializeToString()


IF_WITH_AN_INT_EXP = helper.make_node(
    "If", ["c"], ["y"], name="branch",
    then_branch=helper.make_graph([helper.make_node("Exp", ["i"], ["e"], name="inner_exp")],
                                  "then", [], [onnx.ValueInfoProto(name="e")]),
    else_branch=helper.make_graph([helper.make_node("Identity", ["i"], ["e2"])], "else", [],
                                  [onnx.ValueInfoProto(name="e2")]))


@pytest.mark.parametrize("nodes,inputs,named", [
    # Exp takes floats: numpy's exp of int32 would silently be float64
    ([helper.make_node("Exp", ["i"], ["y"], name="exp")],
     [helper.make_tensor_value_info("i", TensorProto.INT32, [2])],
     ["node 'exp' (Exp-13)", "input 0 'i' is tensor(int32)", "T takes tensor(bfloat16)"]),
    # one type variable bound to two types
    ([helper.make_node("Add", ["x", "d"], ["y"], name="add")],
     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
      helper.make_tensor_value_info("d", TensorProto.DOUBLE, [2])],
     ["node 'add' (Add-14)", "'x' (tensor(float)) and 'd' (tensor(double)) must have one type"]),
    # a fixed type: Reshape's shape is int64
    ([helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")],
     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
      helper.make_tensor_value_info("s", TensorProto.INT32, [1])],
     ["node 'reshape' (Reshape-14)", "input 1 's' is tensor(int32), tensor(int64) takes "
      "tensor(int64)"]),
    # inside a subgraph, reading an enclosing value
    ([IF_WITH_AN_INT_EXP],
     [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
      helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
     ["node 'inner_exp' (Exp-13)", "input 0 'i' is tensor(int64)"]),
])
@pytest.mark.parametrize("level", [edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL,
                                   edgerun.GraphOptimizationLevel.ORT_ENABLE_ALL])
def test_operands_of_types_the_operator_does_not_take_are_refused_at_load(nodes, inputs,
                                                                           named, level):
    """As onnxruntime refuses them (checked here too), naming node, input and types
    (shape_inference/type_check.py), at every optimization level."""
    import onnxruntime

    model = _typed_model(nodes, inputs)
    with pytest.raises(Exception, match="Type"):
        onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    options = edgerun.SessionOptions()
    options.graph_optimization_level = level
    with pytest.raises(edgerun.InvalidGraph) as caught:
        edgerun.InferenceSession(model, options)
    for part in named:
        assert part in str(caught.value), str(caught.value)
