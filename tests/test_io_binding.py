"""IO binding and OrtValue (onnxruntime's API): inputs and outputs on chosen devices.

CPU bindings work everywhere. On webgpu (wgpu-py on Mesa lavapipe here): an output bound
to "webgpu" stays on the GPU and feeds a second session with no host round trip, checked
both by the executor's planned copies (explain(binding)) and by the GPU device's own
upload/download counters; results match the CPU provider (rtol 1e-3, atol 1e-3).
"""

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgerun
from conftest import webgpu_session

RTOL, ATOL = 1e-3, 1e-3
RNG = np.random.default_rng(5)
W = RNG.standard_normal((8, 16)).astype(np.float32)
B = RNG.standard_normal((16,)).astype(np.float32)


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _dense():
    """y = Relu(x @ W + b): x [N, 8] float -> y [N, 16]."""
    return _model([helper.make_node("MatMul", ["x", "W"], ["xw"]),
                   helper.make_node("Add", ["xw", "B"], ["xwb"]),
                   helper.make_node("Relu", ["xwb"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])],
                  [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")])


def _head(op="Sigmoid"):
    """z = op(y * 2), and s = its shape: y [N, 16] float -> z [N, 16], s int64 [2]."""
    return _model([helper.make_node("Mul", ["y", "two"], ["y2"]),
                   helper.make_node(op, ["y2"], ["z"]),
                   helper.make_node("Shape", ["z"], ["s"])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])],
                  [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 16]),
                   helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                  [numpy_helper.from_array(np.array(2.0, np.float32), "two")])


def _x(n=3):
    return RNG.standard_normal((n, 8)).astype(np.float32)


def _reference(x, op="Sigmoid"):
    y = edgerun.InferenceSession(_dense(), providers=["cpu"]).run(None, {"x": x})[0]
    return y, edgerun.InferenceSession(_head(op), providers=["cpu"]).run(None, {"y": y})


# ---- CPU: works without a GPU ---------------------------------------------------------------

def test_cpu_binding_round_trip():
    sess = edgerun.InferenceSession(_dense(), providers=["cpu"])
    x = _x()
    binding = sess.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_output("y")
    sess.run_with_iobinding(binding)
    (out,) = binding.get_outputs()
    assert isinstance(out, edgerun.OrtValue)
    assert out.device_name() == "cpu" and out.shape() == [3, 16]
    assert out.data_type() == "tensor(float)" and out.element_type() == TensorProto.FLOAT
    expected = sess.run(None, {"x": x})[0]
    np.testing.assert_array_equal(out.numpy(), expected)
    np.testing.assert_array_equal(binding.copy_outputs_to_cpu()[0], expected)
    assert sess.explain(binding)["copies_per_run"] == 0

    # rebinding replaces; clearing empties
    x2 = _x(5)
    binding.bind_cpu_input("x", x2)
    sess.run_with_iobinding(binding)
    assert binding.get_outputs()[0].shape() == [5, 16]
    binding.clear_binding_outputs()
    assert binding.get_outputs() == []
    sess.run_with_iobinding(binding)                    # nothing bound: every output, on cpu
    np.testing.assert_array_equal(binding.copy_outputs_to_cpu()[0], sess.run(None, {"x": x2})[0])
    binding.clear_binding_inputs()
    with pytest.raises(edgerun.InvalidArgument, match="missing input 'x'"):
        sess.run_with_iobinding(binding)


def test_cpu_raw_pointers_and_preallocated_outputs():
    sess = edgerun.InferenceSession(_dense(), providers=["cpu"])
    x = _x(2)
    out = np.full((2, 16), -1, np.float32)
    binding = sess.io_binding()
    binding.bind_input("x", "cpu", 0, np.float32, list(x.shape), x.ctypes.data)
    binding.bind_output("y", "cpu", 0, np.float32, list(out.shape), out.ctypes.data)
    sess.run_with_iobinding(binding)
    expected = sess.run(None, {"x": x})[0]
    np.testing.assert_array_equal(out, expected)        # written into the caller's memory

    target = edgerun.OrtValue.ortvalue_from_shape_and_type([2, 16], np.float32)
    binding.bind_ortvalue_output("y", target)
    sess.run_with_iobinding(binding)
    assert binding.get_outputs()[0] is target
    np.testing.assert_array_equal(target.numpy(), expected)

    wrong = edgerun.OrtValue.ortvalue_from_shape_and_type([3, 16], np.float32)
    binding.bind_ortvalue_output("y", wrong)
    with pytest.raises(edgerun.InvalidArgument, match=r"\[3, 16\].*\[2, 16\]"):
        sess.run_with_iobinding(binding)


def test_binding_errors_name_the_problem():
    sess = edgerun.InferenceSession(_dense(), providers=["cpu"])
    binding = sess.io_binding()
    with pytest.raises(edgerun.InvalidArgument, match="unknown input 'nope'.*'x'"):
        binding.bind_cpu_input("nope", _x())
    with pytest.raises(edgerun.InvalidArgument, match=r"input 'x': expected tensor\(float\), "
                                                      r"got tensor\(double\)"):
        binding.bind_cpu_input("x", _x().astype(np.float64))
    with pytest.raises(edgerun.InvalidArgument, match="input 'x': dimension 1 must be 8"):
        binding.bind_cpu_input("x", np.zeros((3, 7), np.float32))
    with pytest.raises(edgerun.InvalidArgument, match="input 'x': expected rank 2"):
        binding.bind_ortvalue_input("x", edgerun.OrtValue.ortvalue_from_numpy(np.zeros(8, "f4")))
    with pytest.raises(edgerun.InvalidArgument, match="unknown output 'nope'.*'y'"):
        binding.bind_output("nope")
    for device in ("cuda", "gpu", "dml"):
        with pytest.raises(edgerun.InvalidArgument, match=f"unknown device '{device}'.*'cpu'"):
            binding.bind_output("y", device)
        with pytest.raises(edgerun.InvalidArgument, match="available here: cpu"):
            edgerun.OrtValue.ortvalue_from_numpy(_x(), device)
    with pytest.raises(edgerun.InvalidArgument, match="device_id 0"):
        binding.bind_output("y", "cpu", 1)
    with pytest.raises(edgerun.InvalidArgument, match="expected an OrtValue"):
        binding.bind_ortvalue_input("x", _x())
    other = edgerun.InferenceSession(_dense(), providers=["cpu"])
    with pytest.raises(edgerun.InvalidArgument, match="this session's io_binding"):
        other.run_with_iobinding(binding)


def test_ortvalue_api_on_cpu():
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    v = edgerun.OrtValue.ortvalue_from_numpy(a)
    assert v.device_name() == "cpu" and v.shape() == [2, 3] and v.is_tensor() and v.has_value()
    assert v.data_type() == "tensor(int64)" and v.element_type() == TensorProto.INT64
    assert v.numpy() is a and v.data_ptr() == a.ctypes.data       # no copy on the host
    v.update_inplace(a + 1)
    np.testing.assert_array_equal(a, np.arange(1, 7).reshape(2, 3))
    for element_type in (np.int32, "tensor(int32)", TensorProto.INT32, "int32"):
        z = edgerun.OrtValue.ortvalue_from_shape_and_type((4,), element_type, "cpu")
        assert z.data_type() == "tensor(int32)" and z.numpy().tolist() == [0, 0, 0, 0]
    with pytest.raises(edgerun.InvalidArgument, match="unknown element type"):
        edgerun.OrtValue.ortvalue_from_shape_and_type((4,), "tensor(nope)")
    assert "OrtValue(tensor(int64), [2, 3], device='cpu')" == repr(v)


# ---- webgpu ---------------------------------------------------------------------------------



def _transfers(gpu):
    return gpu.stats["uploads"], gpu.stats["downloads"]


def test_webgpu_output_feeds_a_second_session_without_host_copies(gpu):
    first, second = webgpu_session(_dense()), webgpu_session(_head())
    assert {n["provider"] for n in first.explain()["nodes"]} == {"webgpu"}
    x = _x()
    y_ref, (z_ref, s_ref) = _reference(x)

    b1 = first.io_binding()
    b1.bind_cpu_input("x", x)
    b1.bind_output("y", "webgpu")
    b2 = second.io_binding()
    b2.bind_output("z", "webgpu")
    b2.bind_output("s")                                  # shape on the host
    assert first.explain()["copies_per_run"] == 2        # plain run: x up, y down
    assert first.explain(b1)["copies"] == ["copy x cpu->webgpu"]
    assert second.explain(b2)["copies"][0] == "copy y cpu->webgpu"   # y not bound yet

    for attempt in range(2):                             # the second run reuses both plans
        first.run_with_iobinding(b1)
        (y,) = b1.get_outputs()
        assert y.device_name() == "webgpu" and y.shape() == [3, 16]
        assert y.data_type() == "tensor(float)"
        before = _transfers(gpu)
        b2.bind_ortvalue_input("y", y)
        # only s comes back to the host: Shape's result, which webgpu keeps on the host
        assert second.explain(b2)["copies"] == ["copy s webgpu->cpu"]
        second.run_with_iobinding(b2)
        z, s = b2.get_outputs()
        assert _transfers(gpu) == before, "a host copy between the sessions"
        assert z.device_name() == "webgpu" and s.device_name() == "cpu"
    np.testing.assert_array_equal(s.numpy(), s_ref)
    before = _transfers(gpu)
    np.testing.assert_allclose(z.numpy(), z_ref, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(y.numpy(), y_ref, rtol=RTOL, atol=ATOL)
    assert _transfers(gpu) == (before[0], before[1] + 2)       # numpy() is the read back
    got = b2.copy_outputs_to_cpu()
    np.testing.assert_allclose(got[0], z_ref, rtol=RTOL, atol=ATOL)


def _cpu_only_head():
    """_head with a Python custom operator in the middle: a node only the CPU provider runs,
    whatever kernels WebGPU gains. Returns (model, session options that enable it)."""
    from edgerun.custom_ops import PyCustomOpDef, get_library_path, onnx_op

    @onnx_op(op_type="CubeOnCpuTest", inputs=[PyCustomOpDef.dt_float],
             outputs=[PyCustomOpDef.dt_float])
    def cube(v):
        return (v * v * v).astype(np.float32)

    graph = helper.make_graph(
        [helper.make_node("Mul", ["y", "two"], ["y2"]),
         helper.make_node("CubeOnCpuTest", ["y2"], ["z"], domain="ai.onnx.contrib"),
         helper.make_node("Shape", ["z"], ["s"])], "g",
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 16]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        initializer=[numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.contrib", 1)])
    options = edgerun.SessionOptions()
    options.register_custom_ops_library(get_library_path())
    return model.SerializeToString(), options


def test_webgpu_input_read_on_the_cpu_is_copied_down_and_counted(gpu):
    x = _x()
    y = edgerun.OrtValue.ortvalue_from_numpy(_reference(x)[0], "webgpu")
    expected = (_reference(x)[0] * 2) ** 3
    model, options = _cpu_only_head()

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        sess = edgerun.InferenceSession(model, options, providers=["webgpu", "cpu"])
    assert [n["provider"] for n in sess.explain()["nodes"]
            if n["op_type"] == "CubeOnCpuTest"] == ["cpu"]
    binding = sess.io_binding()
    binding.bind_ortvalue_input("y", y)
    binding.bind_output("z")
    copies = sess.explain(binding)["copies"]            # (Shape reads z on webgpu: z goes up)
    assert "copy y2 webgpu->cpu" in copies and "copy y cpu->webgpu" not in copies
    assert "copy y cpu->webgpu" in sess.explain()["copies"]
    sess.run_with_iobinding(binding)
    np.testing.assert_allclose(binding.copy_outputs_to_cpu()[0], expected, rtol=RTOL, atol=ATOL)

    cpu_only = edgerun.InferenceSession(model, options, providers=["cpu"])
    binding = cpu_only.io_binding()
    binding.bind_ortvalue_input("y", y)                  # read back before the run (counted)
    binding.bind_output("z", "webgpu")                   # uploaded after it
    before = _transfers(gpu)
    cpu_only.run_with_iobinding(binding)
    assert _transfers(gpu) == (before[0] + 1, before[1] + 1)
    (z,) = binding.get_outputs()
    assert z.device_name() == "webgpu"
    np.testing.assert_allclose(z.numpy(), expected, rtol=RTOL, atol=ATOL)


def test_webgpu_ortvalue_api(gpu):
    a = RNG.standard_normal((2, 5)).astype(np.float32)
    before = _transfers(gpu)
    v = edgerun.OrtValue.ortvalue_from_numpy(a, "webgpu")
    assert _transfers(gpu) == (before[0] + 1, before[1])
    assert v.device_name() == "webgpu" and v.shape() == [2, 5] and v.has_value()
    assert v.data_type() == "tensor(float)" and v.element_type() == TensorProto.FLOAT
    np.testing.assert_array_equal(v.numpy(), a)
    v.update_inplace(a * 2)
    np.testing.assert_array_equal(v.numpy(), a * 2)
    with pytest.raises(edgerun.InvalidArgument, match="no host address"):
        v.data_ptr()
    z = edgerun.OrtValue.ortvalue_from_shape_and_type([3, 4], np.float32, "webgpu")
    assert z.device_name() == "webgpu"
    np.testing.assert_array_equal(z.numpy(), np.zeros((3, 4), np.float32))

    sess = webgpu_session(_dense())
    binding = sess.io_binding()
    with pytest.raises(edgerun.InvalidArgument, match="raw buffer pointers are not supported "
                                                      "on device 'webgpu'"):
        binding.bind_input("x", "webgpu", 0, np.float32, [3, 8], 12345)
    with pytest.raises(edgerun.InvalidArgument, match="input 'x': dimension 1 must be 8"):
        binding.bind_ortvalue_input("x", v)

    # outputs bound into a webgpu OrtValue adopt the result; inputs may come from webgpu too
    x = _x()
    binding.bind_ortvalue_input("x", edgerun.OrtValue.ortvalue_from_numpy(x, "webgpu"))
    target = edgerun.OrtValue.ortvalue_from_shape_and_type([3, 16], np.float32, "webgpu")
    binding.bind_ortvalue_output("y", target)
    assert sess.explain(binding)["copies_per_run"] == 0
    before = _transfers(gpu)
    sess.run_with_iobinding(binding)
    binding.synchronize_outputs()
    assert _transfers(gpu) == before
    assert binding.get_outputs()[0] is target
    np.testing.assert_allclose(target.numpy(), _reference(x)[0], rtol=RTOL, atol=ATOL)


def test_web_bridge_keeps_gpu_buffer_outputs_on_the_gpu_and_reads_gpu_buffer_feeds(gpu):
    """What onnxruntime-web's preferredOutputLocation "gpu-buffer" and Tensor.fromGpuBuffer
    reach in Python (web/bridge.py), natively on wgpu buffers: a float32 output is copied on
    the GPU into a buffer the caller owns and feeds the next session in place; an int64
    output (int32 words on the GPU) comes in ONNX's 8-byte layout."""
    from edgerun.web.bridge import WebSession

    first = WebSession(_dense(), ["webgpu"], gpu_outputs=["y"])
    second = WebSession(_head(), ["webgpu"], gpu_outputs=["z", "s"])
    x = _x()
    y_ref, (z_ref, s_ref) = _reference(x)
    ((name, type_name, dims, y_buffer, location),) = first.run(
        [("x", "float32", [3, 8], x.tobytes())])
    assert (name, type_name, dims, location) == ("y", "float32", [3, 16], "gpu-buffer")
    assert y_buffer.size % 16 == 0 and y_buffer.size >= 3 * 16 * 4
    y = np.frombuffer(gpu.device.read_buffer(y_buffer, 3 * 16 * 4), np.float32).reshape(3, 16)
    np.testing.assert_allclose(y, y_ref, rtol=RTOL, atol=ATOL)

    before = _transfers(gpu)
    (z_item, s_item) = second.run([("y", "float32", [3, 16], y_buffer, "gpu-buffer")])
    assert _transfers(gpu)[1] == before[1], "the feed was read back to the host"
    assert z_item[1:3] == ("float32", [3, 16]) and s_item[1:3] == ("int64", [2])
    z = np.frombuffer(gpu.device.read_buffer(z_item[3], 3 * 16 * 4), np.float32).reshape(3, 16)
    np.testing.assert_allclose(z, z_ref, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(np.frombuffer(gpu.device.read_buffer(s_item[3], 16), np.int64),
                                  s_ref)
    # the page owns the buffers: later runs do not reuse them
    first.run([("x", "float32", [3, 8], (x * 0).tobytes())])
    again = np.frombuffer(gpu.device.read_buffer(y_buffer, 3 * 16 * 4), np.float32)
    np.testing.assert_array_equal(again.reshape(3, 16), y)

    with pytest.raises(TypeError, match=r"input 'y': the GPU buffer holds 192 bytes.*needs 256"):
        second.run([("y", "float32", [4, 16], y_buffer, "gpu-buffer")])
    with pytest.raises(ValueError, match="needs the webgpu execution provider"):
        WebSession(_dense(), ["cpu"], gpu_outputs=["y"])
    with pytest.raises(ValueError, match=r"names \['nope'\], which are not outputs"):
        WebSession(_dense(), ["webgpu"], gpu_outputs=["nope"])
