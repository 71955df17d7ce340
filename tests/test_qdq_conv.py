"""QDQ convolutions as integer kernels and QDQ activation chains as tables (CPU provider):

- QLinearConv's native path (im2col + the 8-bit products, requantized in the product's
  epilogue) gives the numpy path's bytes, and onnxruntime's within one output step;
- optimizer/fuse_qdq_conv.py turns QuantizeLinear(Conv(DequantizeLinear ...)) into
  QLinearConv, within one output step of onnxruntime with and without its optimizations;
- optimizer/fuse_quantized_table.py turns DequantizeLinear -> elementwise chain ->
  QuantizeLinear into a com.edgerun LookupTable, equal to the unfused chain bit for bit,
  saved as Cast + Gather that onnxruntime runs to the same bytes;
- optimizer/fuse_qdq_data_movement.py runs MaxPool, Reshape, Resize and Concat between a
  DequantizeLinear and a QuantizeLinear on the codes, bit for bit the unfused graph;
- real models through onnxruntime's quantizers run wholly on cpu, wasm and webgpu.
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgerun
from edgerun.providers.cpu.native import library, qconv

ort.set_default_logger_severity(3)
RANGES = {np.uint8: (0, 255), np.int8: (-128, 127)}
ONNX_TYPES = {np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8}


def _isas() -> list:
    return {"avx512_vnni": ["avx2", "avx512_vnni"], "avx2": ["avx2"]}.get(library.isa(), [])


def _random_8bit(rng, dtype, shape):
    low, high = RANGES[dtype]
    return rng.integers(low, high + 1, shape).astype(dtype)


def _near_middle(rng, dtype, shape) -> np.ndarray:
    """Zero points within 10 of the middle of the type's range."""
    low, high = RANGES[dtype]
    return np.asarray((low + high + 1) // 2 + rng.integers(-10, 11, shape)).astype(dtype)


def _conv_case(rng, index: int) -> dict:
    """A random QLinearConv: batch 1-2, 1-D or 2-D windows, 1-3 groups (not depthwise),
    outputs crossing the 8-row blocks, kernels 1-3, strides and dilations up to 2, every
    8-bit type for x, w and y, weight scales per tensor or per output channel, a bias or
    none, x a strided view in some cases, multipliers that saturate some outputs."""
    rank = int(rng.choice([1, 2, 2]))
    group = int(rng.choice([1, 1, 2, 3]))
    per_group = int(rng.integers(2, 13))
    outputs = group * int(rng.integers(1, 14))
    kernel = [1] * rank if index % 5 == 0 else [int(rng.integers(1, 4)) for _ in range(rank)]
    strides = [int(rng.integers(1, 3)) for _ in range(rank)]
    dilations = [int(rng.integers(1, 3)) for _ in range(rank)]
    spatial = [int(rng.integers((k - 1) * d + 1, (k - 1) * d + 30))
               for k, d in zip(kernel, dilations)]
    x_type, w_type, y_type = (rng.choice([np.uint8, np.int8]) for _ in range(3))
    shape = (1 if index % 2 else 2, group * per_group, *spatial)
    x = _random_8bit(rng, x_type, shape[:-1] + (2 * shape[-1],))
    x = x[..., ::2] if index % 3 == 0 else np.ascontiguousarray(x[..., :shape[-1]])
    w = _random_8bit(rng, w_type, (outputs, per_group, *kernel))
    per_channel = index % 2 == 0
    depth = per_group * int(np.prod(kernel))
    w_scale = rng.uniform(0.002, 0.02, outputs if per_channel else ()).astype(np.float32)
    y_scale = np.float32(rng.uniform(0.3, 1.5) * 0.02 * 0.01 * 128 * np.sqrt(depth))
    return {"x": x, "x_scale": np.float32(0.02), "x_zero": _near_middle(rng, x_type, ()),
            "w": w, "w_scale": w_scale, "w_zero": _near_middle(rng, w_type, w_scale.shape),
            "y_scale": y_scale, "y_zero": _near_middle(rng, y_type, ()),
            "bias": rng.integers(-3000, 3000, outputs).astype(np.int32) if index % 4 else None,
            "attrs": {"group": group, "kernel_shape": kernel, "strides": strides,
                      "dilations": dilations,
                      "pads": [int(p) for p in rng.integers(0, 3, 2 * rank)]}}


def _qlinear_conv_model(case: dict) -> bytes:
    names = ["x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero"] + \
        (["bias"] if case["bias"] is not None else [])
    inits = [numpy_helper.from_array(np.asarray(case[n]), n) for n in names[1:]]
    graph = helper.make_graph(
        [helper.make_node("QLinearConv", names, ["y"], **case["attrs"])], "g",
        [helper.make_tensor_value_info("x", ONNX_TYPES[case["x"].dtype], list(case["x"].shape))],
        [helper.make_tensor_value_info("y", ONNX_TYPES[case["y_zero"].dtype], None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             ir_version=9).SerializeToString()


@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
def test_native_qlinear_conv_is_the_numpy_path_and_matches_onnxruntime(isa, monkeypatch):
    """QLinearConv on the native products with the requantizing epilogue gives the numpy
    path's bytes (float64 sums times the float32 multiplier, rounded half to even) on 30
    random cases, and onnxruntime's within one step where it implements the form."""
    if isa not in _isas():
        pytest.skip(f"this CPU's native products are {library.isa()}")
    calls = []
    real = qconv.BoundConv.__call__
    monkeypatch.setattr(qconv.BoundConv, "__call__", lambda self, x, z: calls.append(
        self.requantization is not None) or real(self, x, z))
    rng = np.random.default_rng(7)
    compared = 0
    for index in range(30):
        case = _conv_case(rng, index)
        model, feeds = _qlinear_conv_model(case), {"x": case["x"]}
        detail = f"case {index}: x {case['x'].dtype}{list(case['x'].shape)} " \
                 f"w {case['w'].dtype}{list(case['w'].shape)} {case['attrs']}"
        with library.forced(isa):
            got = edgerun.InferenceSession(model, providers=["cpu"]).run(None, feeds)[0]
        with monkeypatch.context() as numpy_only:
            numpy_only.setattr(qconv, "applicable", lambda *a: False)
            want = edgerun.InferenceSession(model, providers=["cpu"]).run(None, feeds)[0]
        assert got.dtype == case["y_zero"].dtype, detail
        np.testing.assert_array_equal(got, want, err_msg=detail)
        saturated = np.isin(got, RANGES[got.dtype.type]).mean()
        assert saturated < 0.5, f"{detail}: {saturated:.0%} of outputs saturate"
        x_type, w_type = case["x"].dtype, case["w"].dtype
        # onnxruntime's QLinearConv: y of x's type, uint8 x or int8 x and w
        if got.dtype == x_type and (x_type == np.uint8 or w_type == np.int8):
            theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
                None, {"x": np.ascontiguousarray(case["x"])})[0]
            assert np.abs(got.astype(int) - theirs.astype(int)).max() <= 1, detail
            compared += 1
    assert compared >= 8 and sum(calls) >= 25, (compared, calls)


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_qlinear_conv_parts_on_threads_give_the_same_bytes(threads, monkeypatch):
    """intra_op_num_threads splits a large QLinearConv's chunks (every image's and group's)
    over threads, for each way its columns are read (the image's own rows, the padded frame,
    im2col); each output is computed as on one thread, so the bytes are the same."""
    from edgerun.providers.cpu.native import parallel

    if not _isas():
        pytest.skip(f"this CPU's native products are {library.isa()}")
    splits = []
    real = parallel.run_split
    monkeypatch.setattr(parallel, "run_split", lambda kernel, words, parts: splits.append(
        parts) or real(kernel, words, parts))
    monkeypatch.setattr(parallel, "MIN_RECORD_MACS", 1 << 10)
    rng = np.random.default_rng(11)
    for index, (kernel, stride, group) in enumerate([(1, 1, 1), (3, 1, 2), (3, 2, 1)]):
        case = _conv_case(rng, 4 + index)
        channels = 8 * group
        case["x"] = _random_8bit(rng, case["x_zero"].dtype.type, (2, channels, 37, 29))
        case["w"] = _random_8bit(rng, case["w"].dtype.type, (6 * group, 8, kernel, kernel))
        case["w_scale"] = np.full(6 * group, 0.01, np.float32)
        case["w_zero"] = np.zeros(6 * group, case["w"].dtype)
        case["bias"] = None
        case["attrs"] = {"group": group, "kernel_shape": [kernel] * 2, "strides": [stride] * 2,
                         "pads": [kernel // 2] * 4}
        results = []
        for count in (1, threads):
            options = edgerun.SessionOptions()
            options.intra_op_num_threads = count
            splits.clear()
            results.append(edgerun.InferenceSession(_qlinear_conv_model(case), options,
                                                    providers=["cpu"]).run(
                None, {"x": case["x"]})[0])
            assert max(splits, default=1) == count, (case["attrs"], count, splits)
        np.testing.assert_array_equal(results[0], results[1], err_msg=str(case["attrs"]))


@pytest.mark.parametrize("channels,stride", [(3300, 2), (1700, 2), (1700, 1)])
def test_chunks_starting_inside_a_row_and_its_padding(channels, stride):
    """A deep window (k = channels x 5) makes the columns' chunks 32 positions, so chunks start
    inside output rows, some where the window's last taps fall in the right padding (im2col
    once wrote there before its chunk); every sum is the exact convolution's."""
    if not _isas():
        pytest.skip(f"this CPU's native products are {library.isa()}")
    rng = np.random.default_rng(channels)
    x = rng.integers(0, 256, (1, channels, 3, 33)).astype(np.uint8)
    w = rng.integers(-20, 20, (8, channels, 1, 5)).astype(np.int8)
    got = qconv.ConvWeights(w, None, 1).convolve(x, (1, 5), (stride, 1), (0, 2, 0, 2), None,
                                                 "NOTSET", 7)
    padded = np.pad(x.astype(np.int64) - 7, ((0, 0), (0, 0), (0, 0), (2, 2)))
    rows = range(0, 3, stride)
    want = np.stack([np.stack([np.einsum("mck,ck->m", w[:, :, 0].astype(np.int64),
                                         padded[0, :, row, col:col + 5])
                               for col in range(33)], -1) for row in rows], -2)[None]
    np.testing.assert_array_equal(got, want)


def _onnxruntime_both_ways(path: str, feeds: dict) -> list:
    """onnxruntime's outputs with its optimizations (its QDQ fusions) and without."""
    runs = []
    for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
                  ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        runs.append(ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(
            None, feeds))
    return runs


def _qdq_conv_model(case: dict, depthwise: bool = False) -> onnx.ModelProto:
    """x (float) -> QuantizeLinear -> DequantizeLinear, weights and bias DequantizeLinear,
    Conv, QuantizeLinear -> DequantizeLinear: quantize_static's QDQ form."""
    x_type, w_type, y_type = case["x_zero"].dtype, case["w"].dtype, case["y_zero"].dtype
    inits = {"x_scale": np.asarray(case["x_scale"]), "x_zero": case["x_zero"], "w": case["w"],
             "w_scale": case["w_scale"], "w_zero": case["w_zero"],
             "y_scale": np.asarray(case["y_scale"]), "y_zero": case["y_zero"]}
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zero"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "w_scale", "w_zero"], ["wd"], axis=0)]
    conv_inputs = ["xd", "wd"]
    if case["bias"] is not None:
        inits["bias"] = case["bias"]
        inits["bias_scale"] = (np.float32(case["x_scale"]) * case["w_scale"]).astype(np.float32)
        nodes.append(helper.make_node("DequantizeLinear", ["bias", "bias_scale"], ["bd"], axis=0))
        conv_inputs.append("bd")
    nodes += [helper.make_node("Conv", conv_inputs, ["c"], **case["attrs"]),
              helper.make_node("QuantizeLinear", ["c", "y_scale", "y_zero"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "y_scale", "y_zero"], ["y"])]
    shape = list(case["x"].shape)
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    del x_type, w_type, y_type
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)


def _float_input(rng, case) -> np.ndarray:
    return rng.uniform(-2.4, 2.4, case["x"].shape).astype(np.float32)


def test_qdq_convs_become_qlinear_convs_and_match_onnxruntime(tmp_path):
    """quantize_static's Conv (DequantizeLinear of x, weights and int32 bias, QuantizeLinear
    after) runs as QLinearConv and agrees with onnxruntime, with and without its own QDQ
    fusions, within one step of the output's grid, on 16 random cases (batch 1 and 2, per
    tensor and per channel, groups, strides, no bias)."""
    rng = np.random.default_rng(3)
    for index in range(16):
        case = _conv_case(rng, index)
        path = str(tmp_path / f"qdq_conv_{index}.onnx")
        onnx.save(_qdq_conv_model(case), path)
        feeds = {"x": _float_input(rng, case)}
        options = edgerun.SessionOptions()
        options.optimized_model_filepath = str(tmp_path / f"optimized_{index}.onnx")
        got = edgerun.InferenceSession(path, options, providers=["cpu"]).run(None, feeds)[0]
        ops = [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]
        detail = f"case {index}: {case['attrs']} ops {ops}"
        assert "QLinearConv" in ops and "Conv" not in ops, detail
        step = float(case["y_scale"])
        for want in _onnxruntime_both_ways(path, feeds):
            assert np.abs(got - want[0]).max() <= step * 1.001, detail


def test_convs_of_quantize_static_chains_all_become_qlinear_convs(tmp_path):
    """quantize_static's file of a small float net (Conv -> Relu -> two Convs reading it ->
    Concat -> Conv): every Conv becomes a QLinearConv, those reading another's codes too
    (whose producer is then the fused node, of a type no inference recorded), and the
    outputs agree with onnxruntime's within its spread."""
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    rng = np.random.default_rng(13)

    def weight(name, shape):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32), name)
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1"], ["c1"]),
             helper.make_node("Conv", ["r0", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Conv", ["c1", "w3"], ["c3"], strides=[2, 2]),
             helper.make_node("Concat", ["c2", "c3"], ["cat"], axis=1),
             helper.make_node("Conv", ["cat", "w4"], ["y"], group=2)]
    inits = [weight("w0", (8, 3, 3, 3)), numpy_helper.from_array(np.zeros(8, np.float32), "b0"),
             weight("w1", (6, 8, 1, 1)), weight("w2", (6, 8, 3, 3)), weight("w3", (6, 6, 1, 1)),
             weight("w4", (4, 6, 1, 1))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, 16, 16])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    source, path = str(tmp_path / "float.onnx"), str(tmp_path / "qdq.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), source)
    batches = iter([{"x": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)}
                    for _ in range(4)])

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(batches, None)
    quantize_static(source, path, Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    options = edgerun.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    feeds = {"x": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)}
    got = edgerun.InferenceSession(path, options, providers=["cpu"]).run(None, feeds)[0]
    ops = [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]
    assert ops.count("QLinearConv") == 5 and "Conv" not in ops, ops
    runs = [outputs[0] for outputs in _onnxruntime_both_ways(path, feeds)]
    step = float(np.abs(np.diff(np.unique(runs[1]))).min())   # the output's grid
    for want in runs:
        assert np.abs(got - want).max() <= 2 * step * 1.001


def test_qdq_convs_stay_float_where_the_cpu_does_not_run_them(tmp_path):
    """The fusion pays on the CPU's integer kernels only: a wasm session (whose QLinearConv
    measured 2.5-5x slower than its float conv between the pairs) keeps the Conv."""
    from conftest import usable_provider

    rng = np.random.default_rng(17)
    case = _conv_case(rng, 1)
    path = str(tmp_path / "qdq_conv.onnx")
    onnx.save(_qdq_conv_model(case), path)
    for provider, fused in (("cpu", True), ("wasm", False)):
        session = edgerun.InferenceSession(path, providers=[usable_provider(provider)])
        ops = {n.op_type for n in session._model.graph.nodes}
        assert ("QLinearConv" in ops) == fused and ("Conv" in ops) != fused, (provider, ops)


def test_depthwise_and_float_weight_convs_stay_float(tmp_path):
    """A depthwise QDQ conv keeps the float path (its pair becomes the conv's epilogue), and
    so does a Conv whose weights are not a DequantizeLinear of 8-bit constants."""
    rng = np.random.default_rng(5)
    case = _conv_case(rng, 2)
    channels = case["x"].shape[1]
    case["attrs"]["group"] = channels
    case["w"] = case["w"][:1].repeat(channels, 0)[:, :1]
    case["w_scale"] = np.full(channels, 0.01, np.float32)
    case["w_zero"] = np.zeros(channels, case["w"].dtype)
    case["bias"] = None
    path = str(tmp_path / "depthwise.onnx")
    onnx.save(_qdq_conv_model(case), path)
    options = edgerun.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    edgerun.InferenceSession(path, options, providers=["cpu"])
    ops = [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]
    assert "QLinearConv" not in ops and "Conv" in ops, ops


# ---- QDQ activation chains as tables ------------------------------------------------------

def _chain_model(code_type, chain: str) -> onnx.ModelProto:
    """8-bit codes (a graph input: no QuantizeLinear makes them) -> DequantizeLinear ->
    `chain` -> QuantizeLinear -> DequantizeLinear (the float output)."""
    zero = np.array(3 if code_type == np.uint8 else -5, code_type)
    inits = {"s": np.float32(0.043), "z": zero, "s2": np.float32(0.021), "z2": zero,
             "s3": np.float32(0.017), "z3": np.array(0, code_type),
             "three": np.float32(3.0), "half": np.array([0.5], np.float32),
             "quarter": np.full((1, 1, 1, 1), 0.25, np.float32)}
    dq = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["x"])
    pair = [helper.make_node("QuantizeLinear", ["m", "s2", "z2"], ["mq"]),
            helper.make_node("DequantizeLinear", ["mq", "s2", "z2"], ["md"])]
    bodies = {
        "silu": [helper.make_node("Sigmoid", ["x"], ["m"])] + pair +
                [helper.make_node("Mul", ["x", "md"], ["t"])],
        "tanh_add_pair": [helper.make_node("Add", ["x", "three"], ["a"]),
                          helper.make_node("Tanh", ["a"], ["m"])] + pair +
                         [helper.make_node("Mul", ["md", "half"], ["t"])],
        "hard_sigmoid": [helper.make_node("HardSigmoid", ["x"], ["t"])],
        # a one-value constant of the input's rank: evaluated on the codes it broadcasts them
        # to [1, 1, 1, 256], which the table must not keep
        "rank4_scale_sigmoid": [helper.make_node("Mul", ["x", "quarter"], ["m4"]),
                                helper.make_node("Sigmoid", ["m4"], ["t"])],
        "requantize": [helper.make_node("Identity", ["x"], ["t"])],
    }
    nodes = [dq] + bodies[chain] + [
        helper.make_node("QuantizeLinear", ["t", "s3", "z3"], ["tq"]),
        helper.make_node("DequantizeLinear", ["tq", "s3", "z3"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("q", ONNX_TYPES[np.dtype(code_type)],
                                                   [2, 3, 17, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)


@pytest.mark.parametrize("code_type", [np.uint8, np.int8], ids=["uint8", "int8"])
@pytest.mark.parametrize("chain", ["silu", "tanh_add_pair", "hard_sigmoid", "requantize",
                                   "rank4_scale_sigmoid"])
def test_quantized_chains_become_tables_equal_to_the_chain(chain, code_type, tmp_path):
    """The chain becomes one LookupTable whose outputs are the unfused chain's bit for bit
    (every code, a strided batch as well), and the saved model (Cast + Gather) gives
    onnxruntime the same bytes."""
    path = str(tmp_path / "chain.onnx")
    onnx.save(_chain_model(code_type, chain), path)
    low, high = RANGES[code_type]
    codes = np.arange(low, high + 1).astype(code_type)
    q = np.resize(codes, (2, 3, 17, 10))[..., ::2]          # every code, a strided view
    options = edgerun.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    session = edgerun.InferenceSession(path, options, providers=["cpu"])
    got = session.run(None, {"q": q})[0]
    assert "LookupTable" in {n.op_type for n in session._model.graph.nodes}
    unfused = edgerun.SessionOptions()
    unfused.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = edgerun.InferenceSession(path, unfused, providers=["cpu"]).run(None, {"q": q})[0]
    np.testing.assert_array_equal(got, want)
    saved = ort.InferenceSession(options.optimized_model_filepath,
                                 providers=["CPUExecutionProvider"]).run(
        None, {"q": np.ascontiguousarray(q)})[0]
    np.testing.assert_array_equal(saved, got)
    ops = [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]
    assert "Gather" in ops and "Sigmoid" not in ops and "Tanh" not in ops, ops


def test_a_chain_value_read_outside_keeps_its_nodes(tmp_path):
    """A chain whose middle value is also a graph output is cut there: the value stays
    computed, and the outputs still equal the unfused graph's."""
    model = _chain_model(np.uint8, "silu")
    model.graph.output.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, None))
    path = str(tmp_path / "chain.onnx")
    onnx.save(model, path)
    q = np.arange(256, dtype=np.uint8).reshape(1, 1, 1, 256).repeat(510, 0)[:510].reshape(
        2, 3, 17, 5 * 256)[..., :5]
    session = edgerun.InferenceSession(path, providers=["cpu"])
    assert "Sigmoid" in {n.op_type for n in session._model.graph.nodes}
    unfused = edgerun.SessionOptions()
    unfused.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = edgerun.InferenceSession(path, unfused, providers=["cpu"]).run(None, {"q": q})
    for a, b in zip(session.run(None, {"q": q}), want):
        np.testing.assert_array_equal(a, b)


def test_cheap_chains_after_a_float_producer_keep_their_float_fusions(tmp_path):
    """A HardSigmoid between a float value's QuantizeLinear and DequantizeLinear is cheaper
    in float than as a table with its quantization around it: no LookupTable there; a
    Sigmoid is not, and becomes one."""
    for chain, tabled in (("hard_sigmoid", False), ("silu", True)):
        model = _chain_model(np.uint8, chain)
        graph = model.graph
        graph.input[0].CopyFrom(helper.make_tensor_value_info("f", TensorProto.FLOAT,
                                                              [2, 3, 17, 5]))
        graph.node.insert(0, helper.make_node("QuantizeLinear", ["f", "s", "z"], ["q"]))
        path = str(tmp_path / f"{chain}.onnx")
        onnx.save(model, path)
        session = edgerun.InferenceSession(path, providers=["cpu"])
        ops = {n.op_type for n in session._model.graph.nodes}
        assert ("LookupTable" in ops) == tabled, (chain, ops)


# ---- data movement on codes ---------------------------------------------------------------

def _movement_model(op: str, code_type, same_grid: bool) -> onnx.ModelProto:
    """codes a, b (inputs) -> DequantizeLinear -> op -> QuantizeLinear -> DequantizeLinear."""
    zero = np.array(3 if code_type == np.uint8 else -5, code_type)
    other = zero if same_grid else np.array(7 if code_type == np.uint8 else 2, code_type)
    inits = {"s": np.float32(0.05), "z": zero, "s_out": np.float32(0.05 if same_grid else 0.07),
             "z_out": other, "shape": np.array([2, 3, -1], np.int64),
             "scales": np.array([1, 1, 2, 2], np.float32), "roi": np.zeros(0, np.float32)}
    bodies = {
        "MaxPool": [helper.make_node("MaxPool", ["a_real"], ["m"], kernel_shape=[3, 3],
                                     strides=[2, 2], pads=[1, 1, 1, 1])],
        "Reshape": [helper.make_node("Reshape", ["a_real", "shape"], ["m"])],
        "Resize": [helper.make_node("Resize", ["a_real", "roi", "scales"], ["m"])],
        "Concat": [helper.make_node("DequantizeLinear", ["b", "s_out", "z_out"], ["b_real"]),
                   helper.make_node("Concat", ["a_real", "b_real"], ["m"], axis=1)],
    }
    nodes = [helper.make_node("DequantizeLinear", ["a", "s", "z"], ["a_real"])] + bodies[op] + [
        helper.make_node("QuantizeLinear", ["m", "s_out", "z_out"], ["mq"]),
        helper.make_node("DequantizeLinear", ["mq", "s_out", "z_out"], ["y"])]
    onnx_type = ONNX_TYPES[np.dtype(code_type)]
    inputs = [helper.make_tensor_value_info("a", onnx_type, [2, 3, 9, 11])] + \
        ([helper.make_tensor_value_info("b", onnx_type, [2, 4, 9, 11])] if op == "Concat" else [])
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)


@pytest.mark.parametrize("code_type", [np.uint8, np.int8], ids=["uint8", "int8"])
@pytest.mark.parametrize("op,same_grid,moved", [
    ("MaxPool", True, True), ("Reshape", True, True), ("Resize", True, True),
    ("MaxPool", False, False), ("Concat", True, True), ("Concat", False, True)])
def test_qdq_data_movement_runs_on_codes(op, same_grid, moved, code_type, tmp_path):
    """DequantizeLinear -> MaxPool / Reshape / Resize (nearest) -> QuantizeLinear on one grid
    runs the op on the codes, and a Concat on codes requantized by tables where grids
    differ; the outputs are the unfused graph's bit for bit (every code), and onnxruntime
    gives the same bytes for the saved file. A mover between two grids stays."""
    path = str(tmp_path / "movement.onnx")
    onnx.save(_movement_model(op, code_type, same_grid), path)
    low, high = RANGES[code_type]
    feeds = {"a": np.resize(np.arange(low, high + 1), (2, 3, 9, 11)).astype(code_type)}
    if op == "Concat":
        feeds["b"] = np.resize(np.arange(high, low - 1, -1), (2, 4, 9, 11)).astype(code_type)
    options = edgerun.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    session = edgerun.InferenceSession(path, options, providers=["cpu"])
    nodes = session._model.graph.nodes
    dequantized = {o for n in nodes if n.op_type == "DequantizeLinear" for o in n.outputs}
    on_codes = [n.inputs[0] not in dequantized for n in nodes if n.op_type == op]
    assert on_codes == [moved], [n.op_type for n in nodes]
    got = session.run(None, feeds)[0]
    unfused = edgerun.SessionOptions()
    unfused.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    np.testing.assert_array_equal(
        got, edgerun.InferenceSession(path, unfused, providers=["cpu"]).run(None, feeds)[0])
    saved = ort.InferenceSession(options.optimized_model_filepath,
                                 providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_array_equal(saved, got)


# (shape, kernel, stride, pads, ceil_mode): strides 1-3, pads even and not, a 1-D window,
# ceil mode's partial windows, windows past the image, batch and planes
MAX_POOLS = [((1, 64, 111, 111), 3, 2, 0, 1), ((2, 5, 13, 17), 3, 1, 1, 0),
             ((1, 3, 9, 12), 2, 2, (0, 1, 1, 0), 0), ((1, 4, 7, 7), 5, 3, 2, 1),
             ((1, 2, 10), 3, 2, 1, 0)]


@pytest.mark.parametrize("code_type", [np.uint8, np.int8], ids=["uint8", "int8"])
@pytest.mark.parametrize("case", MAX_POOLS, ids=lambda c: "x".join(map(str, c[0])))
def test_8bit_max_pool_matches_onnxruntime(case, code_type):
    """MaxPool of 8-bit codes (what fuse_qdq_data_movement gives a QDQ model):
    onnxruntime's bytes exactly, every code value present."""
    shape, kernel, stride, pads, ceil = case
    rank = len(shape) - 2
    pads = list(pads) if isinstance(pads, tuple) else [pads] * (2 * rank)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[kernel] * rank,
                            strides=[stride] * rank, pads=pads, ceil_mode=ceil)
    onnx_type = ONNX_TYPES[np.dtype(code_type)]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx_type,
                                                                          list(shape))],
                              [helper.make_tensor_value_info("y", onnx_type, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              ir_version=9).SerializeToString()
    x = _random_8bit(np.random.default_rng(sum(shape)), code_type, shape)
    got = edgerun.InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_qdq_data_movement_leaves_what_codes_would_change(tmp_path):
    """No move where the codes would give other values: MaxPool over a negative scale (it
    would take the minimum), Resize's tf_crop_and_resize (its extrapolation value is no
    code), a DequantizeLinear whose zero point is an empty name. The outputs stay the
    unfused graph's."""
    low, high = RANGES[np.uint8]
    feeds = {"a": np.resize(np.arange(low, high + 1), (2, 3, 9, 11)).astype(np.uint8)}
    for variant in ("negative_scale", "crop_and_resize", "empty_zero_point"):
        model = _movement_model("Resize" if variant == "crop_and_resize" else "MaxPool",
                                np.uint8, True)
        graph = model.graph
        if variant == "negative_scale":
            for t in graph.initializer:
                if t.name in ("s", "s_out"):
                    t.CopyFrom(numpy_helper.from_array(np.float32(-0.05), t.name))
        elif variant == "crop_and_resize":
            resize = next(n for n in graph.node if n.op_type == "Resize")
            resize.attribute.append(helper.make_attribute("coordinate_transformation_mode",
                                                          "tf_crop_and_resize"))
            for t in graph.initializer:
                if t.name == "roi":
                    t.CopyFrom(numpy_helper.from_array(
                        np.array([0, 0, 0.2, 0.2, 1, 1, 1.3, 1.3], np.float32), "roi"))
        else:
            first = graph.node[0]
            first.input[2] = ""
        path = str(tmp_path / f"{variant}.onnx")
        onnx.save(model, path)
        session = edgerun.InferenceSession(path, providers=["cpu"])
        nodes = session._model.graph.nodes
        dequantized = {o for n in nodes if n.op_type == "DequantizeLinear" for o in n.outputs}
        moved = [n for n in nodes if n.op_type in ("MaxPool", "Resize")
                 and n.inputs[0] not in dequantized]
        assert not moved, variant
        unfused = edgerun.SessionOptions()
        unfused.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
        np.testing.assert_array_equal(
            session.run(None, feeds)[0],
            edgerun.InferenceSession(path, unfused, providers=["cpu"]).run(None, feeds)[0],
            err_msg=variant)


# ---- real quantized models on every provider ---------------------------------------------

# (model, quantize_static's QDQ or quantize_dynamic): ppocr cls, ddddocr's YOLOX detector
# (issue #21's QDQ detector) and two of onnx's light CNNs (squeezenet; shufflenet's grouped
# convs and channel shuffle)
QUANTIZED = [("ppocr_mobile_cls", "qdq"), ("ppocr_mobile_cls", "dynamic"),
             ("ddddocr_det_batch1", "qdq"), ("light_squeezenet", "qdq"),
             ("light_squeezenet", "dynamic"), ("light_shufflenet", "qdq")]


@pytest.mark.parametrize("provider", ["cpu", "wasm", "webgpu"])
@pytest.mark.parametrize("model,kind", QUANTIZED, ids=lambda v: str(v))
def test_quantized_real_models_run_wholly_on_each_provider(model, kind, provider):
    """Real models through onnxruntime's quantize_static (QDQ) or quantize_dynamic run with
    every node on the provider asked for. QDQ files agree with onnxruntime within its own
    spread between its optimized and unoptimized runs, of either run (1e-5 where the two
    agree). A dynamic file quantizes each activation from its own range at run time, so a
    float rounding anywhere before it can move a code by one step (onnxruntime's two runs
    share their kernels and agree exactly): there the bound is the error the quantization
    itself makes (onnxruntime's quantized against its float model)."""
    from conftest import usable_provider
    from real_models import REAL_MODELS

    from bench.models.quantized_variants import quantized

    path, feeds = quantized(model, kind)
    float_path = REAL_MODELS[model]()[0] if kind == "dynamic" else None
    runs = _onnxruntime_both_ways(path, feeds)
    session = edgerun.InferenceSession(path, providers=[usable_provider(provider)])
    assert {n["provider"] for n in session.explain()["nodes"]} == {provider}
    floats = ort.InferenceSession(float_path, providers=["CPUExecutionProvider"]).run(
        None, feeds) if float_path else runs[0]
    for name, got, optimized, plain, unquantized in zip(
            [o.name for o in session.get_outputs()], session.run(None, feeds), *runs, floats):
        assert np.ptp(optimized) > 1e-3, f"{name} is constant: parity would prove nothing"
        bound = float(np.abs(optimized - (unquantized if float_path else plain)).max())
        for want in (optimized, plain):
            assert np.abs(got - want).max() <= bound * 1.01 + 1e-5, name


@pytest.mark.parametrize("model,kind", QUANTIZED, ids=lambda v: str(v))
def test_quantized_real_models_prepare_nothing_on_a_second_run(model, kind, monkeypatch):
    """Packed weights, requantizations and bound convolution calls are built in the first
    run and reused, also where a zero point is computed at run time (quantize_dynamic's
    DynamicQuantizeLinear gives a fresh one every run)."""
    from conftest import record_prepared_builds

    from bench.models.quantized_variants import quantized

    path, feeds = quantized(model, kind)
    session = edgerun.InferenceSession(path, providers=["cpu"])
    session.run(None, feeds)
    builds = record_prepared_builds(monkeypatch)
    session.run(None, feeds)
    assert not builds, f"rebuilt on the second run: {builds[:5]}"
