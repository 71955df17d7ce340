"""Captured graphs on the WebGPU provider (providers/webgpu/program.py): the first run of each
input signature is recorded, later runs replay it without running the graph's Python.

Each replay is checked against the CPU provider on new input values (rtol 1e-3, atol 1e-3, the
WebGPU tests' tolerance), across signatures (batch 1 included), with small host-kept inputs
that steer shape arithmetic, with outputs kept on the GPU across runs, and for the runs that
must not be replayed (the host read device data; random draws).
"""
import numpy as np
import pytest
from onnx import TensorProto, helper

import edgerun
from conftest import webgpu_session

RTOL, ATOL = 1e-3, 1e-3


def _model(nodes, inputs, outputs, initializers=(), opset=17) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]
                             ).SerializeToString()


def _mlp_with_reshape() -> bytes:
    """x [N, 12] -> MatMul, Add, Relu -> Reshape to `shape` (a small int64 input the provider
    keeps on the host: it steers the host's shape arithmetic) -> Softmax; also Shape(x)."""
    rng = np.random.default_rng(1)
    w = helper.make_tensor("w", TensorProto.FLOAT, [12, 8],
                           rng.standard_normal((12, 8)).astype(np.float32).ravel().tolist())
    b = helper.make_tensor("b", TensorProto.FLOAT, [8],
                           rng.standard_normal(8).astype(np.float32).tolist())
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Add", ["h", "b"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["rs"]),
             helper.make_node("Softmax", ["rs"], ["y"], axis=-1),
             helper.make_node("Shape", ["x"], ["s"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 12]),
              helper.make_tensor_value_info("shape", TensorProto.INT64, [2])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
               helper.make_tensor_value_info("s", TensorProto.INT64, None)]
    return _model(nodes, inputs, outputs, [w, b])


def _feeds(rng, n: int, shape) -> dict:
    return {"x": rng.standard_normal((n, 12)).astype(np.float32),
            "shape": np.array(shape, np.int64)}


def _close(got, want, what):
    assert len(got) == len(want), what
    for g, e in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(e).dtype, what
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=what)


def _program_node(sess) -> bool:
    return sess.explain()["graph_capture"] == "webgpu"


def test_replays_are_right_on_new_values_and_new_signatures(gpu):
    model = _mlp_with_reshape()
    sess = webgpu_session(model)
    cpu = edgerun.InferenceSession(model, providers=["cpu"])
    assert _program_node(sess)
    rng = np.random.default_rng(0)
    programs, replays = gpu.stats["programs"], gpu.stats["replays"]
    # (batch, reshape target): batch 1 included; the same batch with another target is
    # another signature (the host's shape arithmetic differs)
    signatures = [(1, [1, 8]), (5, [5, 8]), (5, [10, 4]), (1, [2, 4])]
    for n, shape in signatures:
        for attempt in range(3):                 # record, then two replays on new values
            feeds = _feeds(rng, n, shape)
            _close(sess.run(None, feeds), cpu.run(None, feeds), f"{n}x12 -> {shape} #{attempt}")
    assert gpu.stats["programs"] - programs == len(signatures)
    assert gpu.stats["replays"] - replays == 2 * len(signatures)


def test_a_replay_is_one_submit_and_reads_back_only_the_outputs(gpu):
    sess = webgpu_session(_mlp_with_reshape())
    rng = np.random.default_rng(2)
    sess.run(None, _feeds(rng, 3, [3, 8]))
    before = dict(gpu.stats)
    sess.run(None, _feeds(rng, 3, [3, 8]))
    assert gpu.stats["replays"] == before["replays"] + 1
    assert gpu.stats["flushes"] == before["flushes"] + 1          # one command encoder
    assert gpu.stats["downloads"] == before["downloads"] + 1      # y (s is on the host)
    assert gpu.stats["pipelines"] == before["pipelines"]


def test_outputs_kept_on_the_gpu_survive_later_replays(gpu):
    """Each replay copies its outputs into buffers of their own: an output bound on the GPU
    and kept by the caller is not the program's buffer, which the next replay rewrites."""
    model = _mlp_with_reshape()
    sess = webgpu_session(model)
    cpu = edgerun.InferenceSession(model, providers=["cpu"])
    rng = np.random.default_rng(3)
    kept = []
    for _ in range(4):
        feeds = _feeds(rng, 2, [2, 8])
        binding = sess.io_binding()
        for name, value in feeds.items():
            binding.bind_cpu_input(name, value)
        binding.bind_output("y", "webgpu")
        binding.bind_output("s")
        sess.run_with_iobinding(binding)
        kept.append((binding.get_outputs()[0], cpu.run(["y"], feeds)[0]))
    assert gpu.stats["replays"] >= 3
    for value, want in kept:
        assert value.device_name() == "webgpu"
        np.testing.assert_allclose(value.numpy(), want, rtol=RTOL, atol=ATOL)


def test_least_recently_used_programs_are_dropped_and_their_buffers_return(gpu):
    from edgerun.providers.webgpu.program import MAX_PROGRAMS

    model = _mlp_with_reshape()
    sess = webgpu_session(model)
    cpu = edgerun.InferenceSession(model, providers=["cpu"])
    rng = np.random.default_rng(4)
    import gc
    gc.collect()                                        # earlier tests' sessions
    pinned_before = len(gpu.pool.pinned)
    for n in range(1, MAX_PROGRAMS + 3):                # more signatures than are kept
        feeds = _feeds(rng, n, [n, 8])
        _close(sess.run(None, feeds), cpu.run(None, feeds), f"batch {n}")
    feeds = _feeds(rng, 1, [1, 8])                      # dropped: recorded again, still right
    programs = gpu.stats["programs"]
    _close(sess.run(None, feeds), cpu.run(None, feeds), "batch 1 again")
    assert gpu.stats["programs"] == programs + 1
    assert len(gpu.pool.pinned) > pinned_before
    del sess
    gc.collect()
    assert len(gpu.pool.pinned) == pinned_before        # every pin undone with the session


def test_a_run_that_reads_device_data_is_not_replayed(gpu):
    """A 3-D Conv has no WGSL layout: the kernel refuses it at run time and the CPU runs it,
    from values read back. Such a run is not recorded; later runs stay right."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 2, 1, 2, 2],
                           np.linspace(-1, 1, 24).tolist())
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Conv", ["r", "w"], ["c"], name="conv3d"),
             helper.make_node("Sigmoid", ["c"], ["y"])]
    model = _model(nodes, [x], [y], [w])
    sess = webgpu_session(model)
    cpu = edgerun.InferenceSession(model, providers=["cpu"])
    assert _program_node(sess)
    rng = np.random.default_rng(5)
    replays = gpu.stats["replays"]
    for _ in range(3):
        feeds = {"x": rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)}
        _close(sess.run(None, feeds), cpu.run(None, feeds), "Conv3D")
    assert gpu.stats["replays"] == replays
    assert any("conv3d" in why for why in gpu.programs_refused)


@pytest.mark.parametrize("op", ["RandomNormalLike", "RandomUniformLike"])
def test_graphs_that_draw_random_numbers_are_not_captured(gpu, op):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node(op, ["r"], ["n"]),
             helper.make_node("Add", ["r", "n"], ["y"])]
    sess = edgerun.InferenceSession(_model(nodes, [x], [y]), providers=["webgpu", "cpu"])
    assert not _program_node(sess)


def test_graph_capture_can_be_turned_off(gpu):
    model = _mlp_with_reshape()
    sess = edgerun.InferenceSession(
        model, providers=[("WebGpuExecutionProvider", {"graph_capture": False}), "cpu"])
    assert not _program_node(sess)
    feeds = _feeds(np.random.default_rng(6), 2, [2, 8])
    _close(sess.run(None, feeds), edgerun.InferenceSession(model).run(None, feeds), "off")


def test_pinned_buffers_are_never_handed_out(gpu):
    """The pool gives a pinned buffer to no one, even once its tensor is released."""
    t = gpu.empty((1000,))
    buffer = t.buffer
    gpu.pool.pin([buffer])
    del t
    for _ in range(3):
        assert gpu.empty((1000,)).buffer is not buffer
    gpu.pool.unpin([buffer])
    assert gpu.empty((1000,)).buffer is buffer          # back on the free shelf


def test_inputs_whose_host_mirror_a_kernel_read_must_match_for_a_replay(gpu):
    """Clip's bounds fed as inputs: scalars on the GPU whose host mirrors the kernel reads.
    A replay needs the same bounds; other bounds run node by node, and are right."""
    names = ["x", "lo", "hi"]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
              helper.make_tensor_value_info("lo", TensorProto.FLOAT, []),
              helper.make_tensor_value_info("hi", TensorProto.FLOAT, [])]
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Clip", ["e", "lo", "hi"], ["y"])]
    model = _model(nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    sess = webgpu_session(model)
    cpu = edgerun.InferenceSession(model, providers=["cpu"])
    rng = np.random.default_rng(7)
    replays = gpu.stats["replays"]
    for lo, hi in [(0.5, 2.0), (0.5, 2.0), (0.1, 1.0), (0.5, 2.0)]:
        values = [rng.standard_normal((4, 6)).astype(np.float32), np.float32(lo), np.float32(hi)]
        feeds = {n: np.asarray(v) for n, v in zip(names, values)}
        _close(sess.run(None, feeds), cpu.run(None, feeds), f"Clip({lo}, {hi})")
    assert gpu.stats["replays"] - replays == 2        # the runs with the recorded bounds


def test_releasing_the_session_frees_its_gpu_memory_at_once(gpu):
    """A page's InferenceSession.release() (web/bridge.py: WebSession.release) unpins the
    captured graph's buffers and gives the session's buffers back to the GPU without waiting
    for the garbage collector (a page going from model to model holds one model's memory);
    the next session on the shared device records, replays and runs right."""
    from edgerun.web.bridge import WebSession

    import gc
    gc.collect()
    gpu.pool.trim()
    pinned_before, owned_before = len(gpu.pool.pinned), len(gpu.pool._owned)
    model = _mlp_with_reshape()
    web = WebSession(model, ["webgpu", "cpu"])
    rng = np.random.default_rng(8)
    feeds = _feeds(rng, 2, [2, 8])
    for _ in range(2):
        web.session.run(None, feeds)
    assert len(gpu.pool.pinned) > pinned_before
    assert len(gpu.pool._owned) > owned_before
    web.release()
    assert len(gpu.pool.pinned) == pinned_before
    assert not any(gpu.pool.free.values())               # destroyed, not kept on the shelves
    assert len(gpu.pool._owned) == owned_before
    again = WebSession(model, ["webgpu", "cpu"])
    replays = gpu.stats["replays"]
    for _ in range(3):
        _close(again.session.run(None, feeds), edgerun.InferenceSession(model).run(None, feeds),
               "a session after the release")
    assert gpu.stats["replays"] > replays
    again.release()


def test_a_mirror_read_through_a_view_still_replays_with_the_same_values(gpu):
    """Clip's bound reaches the kernel through a Reshape of the input: the mirror read is
    keyed as the input's (shape [1]), so runs with the same bound replay."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
              helper.make_tensor_value_info("lo", TensorProto.FLOAT, [1])]
    scalar = helper.make_tensor("scalar", TensorProto.INT64, [0], [])
    nodes = [helper.make_node("Reshape", ["lo", "scalar"], ["lo0"]),
             helper.make_node("Clip", ["x", "lo0"], ["y"])]
    model = _model(nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   [scalar])
    sess = webgpu_session(model)
    cpu = edgerun.InferenceSession(model, providers=["cpu"])
    rng = np.random.default_rng(9)
    replays = gpu.stats["replays"]
    for lo in (0.25, 0.25, 0.25, -0.5):
        feeds = {"x": rng.standard_normal((3, 4)).astype(np.float32),
                 "lo": np.array([lo], np.float32)}
        _close(sess.run(None, feeds), cpu.run(None, feeds), f"Clip({lo})")
    assert gpu.stats["replays"] - replays == 2
