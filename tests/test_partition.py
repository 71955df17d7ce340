"""The provider contract: device values, copies at boundaries, compiled partitions, explain."""
import numpy as np
from onnx import TensorProto, helper

import edgerun
from edgerun.providers.base import ExecutionProvider
from edgerun.providers.cpu.provider import CPUProvider
from edgerun.runtime.executor import GraphExecutor
from edgerun.runtime.partition import Partitioner


class Boxed:
    """A value living on the fake device."""

    def __init__(self, array):
        self.array = array


class FakeDevice(ExecutionProvider):
    """Runs Relu and Add on a 'fake' device whose tensors are Boxed."""
    name, ort_name, device = "fake", "FakeExecutionProvider", "fake"

    def __init__(self):
        super().__init__()
        self.uploads, self.downloads, self.runs = 0, 0, 0

    def capability(self, node, opset):
        return (node.op_type in ("Relu", "Add"), "only Relu and Add")

    def kernel(self, node, opset):
        def run(ctx, *inputs):
            assert all(isinstance(v, Boxed) for v in inputs), "device kernel got host values"
            arrays = [v.array for v in inputs]
            out = np.maximum(arrays[0], 0) if node.op_type == "Relu" else arrays[0] + arrays[1]
            return Boxed(out)
        return run

    def to_device(self, value):
        self.uploads += 1
        return Boxed(value)

    def to_host(self, value):
        self.downloads += 1
        return value.array

    def begin_run(self):
        self.runs += 1


class FakeCompiler(ExecutionProvider):
    """Claims Mul and Add and compiles each contiguous run into one function."""
    name, ort_name, compiles = "fakec", "FakeCompilerExecutionProvider", True

    def __init__(self):
        super().__init__()
        self.compiled = []

    def capability(self, node, opset):
        return (node.op_type in ("Mul", "Add"), "only Mul and Add")

    def compile(self, graph, opsets):
        self.compiled.append([n.op_type for n in graph.nodes])
        inner = GraphExecutor(graph, opsets, Partitioner([CPUProvider()]))
        return lambda *inputs: inner.run(dict(zip(inner.input_names, inputs)))


def _chain_model():
    """x -> Relu -> Add(w) -> Neg -> Add(w) -> Relu -> Mul(w) -> y"""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    w = helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, -2.0, 3.0])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu1"),
             helper.make_node("Add", ["a", "w"], ["b"], name="add1"),
             helper.make_node("Neg", ["b"], ["c"], name="neg"),
             helper.make_node("Add", ["c", "w"], ["d"], name="add2"),
             helper.make_node("Relu", ["d"], ["e"], name="relu2"),
             helper.make_node("Mul", ["e", "w"], ["y"], name="mul")]
    graph = helper.make_graph(nodes, "chain", [x], [y], initializer=[w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]).SerializeToString()


def _reference(x):
    w = np.array([1, -2, 3], np.float32)
    return np.maximum(-(np.maximum(x, 0) + w) + w, 0) * w


X = np.array([[-1, 2, 3], [4, -5, 6]], np.float32)


def test_device_provider_runs_its_nodes_with_copies_only_at_boundaries():
    fake = FakeDevice()
    sess = edgerun.InferenceSession(_chain_model(), providers=[fake, "cpu"])
    (y,) = sess.run(None, {"x": X})
    np.testing.assert_allclose(y, _reference(X))
    placed = {n["node"]: n["provider"] for n in sess.explain()["nodes"]}
    assert placed == {"relu1": "fake", "add1": "fake", "neg": "cpu", "add2": "fake",
                      "relu2": "fake", "mul": "cpu"}
    # x up, b down (to Neg), c up (to add2), e down (to Mul): 4 copies per run
    assert sess.explain()["copies_per_run"] == 4
    assert fake.runs == 1
    refused = {n["node"]: n["refused_by"] for n in sess.explain()["nodes"]}
    assert refused["neg"] == ["fake: only Relu and Add"]


def test_initializers_are_uploaded_once_at_load():
    fake = FakeDevice()
    sess = edgerun.InferenceSession(_chain_model(), providers=[fake, "cpu"])
    after_load = fake.uploads
    assert after_load == 1                      # w, used by two device Adds, uploaded once
    sess.run(None, {"x": X})
    sess.run(None, {"x": X})
    assert fake.uploads - after_load == 2 * 2   # per run: x and c


def test_compiling_provider_gets_largest_contiguous_partitions():
    comp = FakeCompiler()
    sess = edgerun.InferenceSession(_chain_model(), providers=[comp, "cpu"])
    (y,) = sess.run(None, {"x": X})
    np.testing.assert_allclose(y, _reference(X))
    assert comp.compiled == [["Add"], ["Add"], ["Mul"]]
    placed = [n["provider"] for n in sess.explain()["nodes"]]
    assert placed == ["cpu", "fakec", "cpu", "fakec", "cpu", "fakec"]


def test_if_branches_read_device_values_on_the_host():
    fake = FakeDevice()
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    then_g = helper.make_graph([helper.make_node("Neg", ["r"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph([helper.make_node("Identity", ["r"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    model = helper.make_model(helper.make_graph(nodes, "g", [x, c], [y]),
                              opset_imports=[helper.make_opsetid("", 21)]).SerializeToString()
    sess = edgerun.InferenceSession(model, providers=[fake, "cpu"])
    xv = np.array([-1, 2], np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": xv, "c": np.array(True)})[0], [0, -2])
    np.testing.assert_array_equal(sess.run(None, {"x": xv, "c": np.array(False)})[0], [0, 2])


def test_compiled_partitions_carry_inferred_types():
    comp = FakeCompiler()
    seen = []
    original = comp.compile

    def compile_and_record(graph, opsets):
        seen.append([(v.name, v.type.shape if v.type else None) for v in graph.inputs])
        return original(graph, opsets)

    comp.compile = compile_and_record
    edgerun.InferenceSession(_chain_model(), providers=[comp, "cpu"])
    assert seen[0] == [("a", (2, 3))]
