"""The CPU kernels' fast paths agree with the general code they bypass.

Each fast path (plain Cast, float reductions without errstate, HardSwish in place, If's
condition, Conv's padding and its choice of method for short outputs) is compared on several
shapes, edge cases included, with onnx's ReferenceEvaluator or a plain numpy formula.
"""
import contextlib

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from random_forests import random_tree_regressor

from edgerun.ir import Node
from edgerun.providers.cpu import registry
from edgerun.providers.cpu.ops import conv as conv_ops
from edgerun.runtime.kernel_context import KernelContext

rng = np.random.default_rng(7)


def _kernel(op_type, opset, domain=""):
    fn = registry.lookup(op_type, domain, opset)
    ctx = KernelContext(Node(op_type=op_type, inputs=[], outputs=["y"]), opset)
    return lambda *args, **attrs: fn(ctx, *args, **attrs)


def _reference(op_type, inputs: dict, opset, **attrs):
    """onnx's ReferenceEvaluator on one node; inputs name -> array, in order."""
    names = list(inputs)
    node = helper.make_node(op_type, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, inputs)[0]


# ---- Cast: same type returns the input, integer/bool sources go straight to astype -----------

CAST_CASES = [(np.float32, TensorProto.FLOAT), (np.int64, TensorProto.FLOAT),
              (np.int64, TensorProto.BOOL), (np.bool_, TensorProto.FLOAT),
              (np.int32, TensorProto.INT64), (np.int64, TensorProto.INT8),
              (np.uint8, TensorProto.DOUBLE), (np.int64, TensorProto.INT64),
              (np.int64, TensorProto.FLOAT16), (np.float32, TensorProto.INT32)]


@pytest.mark.parametrize("opset", [13, 19, 24])
@pytest.mark.parametrize("source,to", CAST_CASES)
def test_cast_fast_path_matches_reference(source, to, opset):
    for shape in [(), (0,), (5,), (2, 3, 4)]:
        x = np.asarray(rng.standard_normal(shape) * 300).astype(source)
        got = _kernel("Cast", opset)(x, to=to)
        want = _reference("Cast", {"x": x}, opset, to=to)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_cast_to_the_same_type_returns_the_input_unwritten():
    x = rng.standard_normal((3, 4)).astype(np.float32)
    before = x.copy()
    y = _kernel("Cast", 19)(x, to=TensorProto.FLOAT)
    assert y is x
    np.testing.assert_array_equal(x, before)


# ---- reductions -------------------------------------------------------------------------------

REDUCE_SHAPES = [((1, 1, 4), [1]), ((3, 5), [0, 1]), ((2, 3, 4), [-1]), ((2, 3, 4), [0, 2]),
                 ((7,), [0]), ((2, 0, 3), [2]), ((4, 1), [1])]


@pytest.mark.parametrize("op_type", ["ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_reductions_match_reference(op_type, dtype):
    for shape, axes in REDUCE_SHAPES:
        for keepdims in (0, 1):
            x = rng.standard_normal(shape).astype(dtype)
            got = _kernel(op_type, 18)(x, np.array(axes, np.int64), keepdims=keepdims)
            want = _reference(op_type, {"x": x, "axes": np.array(axes, np.int64)}, 18,
                              keepdims=keepdims)
            assert got.dtype == want.dtype and got.shape == want.shape, (shape, axes)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMean"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sums_over_trailing_axes_match_reference(op_type, dtype):
    for shape, axes in [((3, 40, 7), [1, 2]), ((5, 9), [-1]), ((2, 3, 4), [2, 1]),
                        ((0, 4), [1]), ((2, 0), [1])]:
        for keepdims in (0, 1):
            x = (rng.standard_normal(shape) * 10).astype(dtype)
            for view in (x, x[..., ::-1]):                      # contiguous or not
                got = _kernel(op_type, 18)(view, np.array(axes, np.int64), keepdims=keepdims)
                want = _reference(op_type, {"x": np.ascontiguousarray(view),
                                            "axes": np.array(axes, np.int64)}, 18,
                                  keepdims=keepdims)
                assert got.dtype == want.dtype and got.shape == want.shape, (shape, axes)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", [(2, 88, 3, 96), (1, 3, 7), (1, 2, 70, 70), (2, 3, 2, 2, 2)])
def test_global_average_pool_matches_reference(shape, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    got = _kernel("GlobalAveragePool", 1)(x)
    want = _reference("GlobalAveragePool", {"x": x}, 13)
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-3 if dtype == np.float16 else 1e-5,
                               atol=1e-6)


def test_reduce_mean_of_huge_values_overflows_quietly():
    x = np.full((4,), 3e38, np.float32)
    with np.errstate(all="raise"):
        assert np.isinf(_kernel("ReduceMean", 18)(x, np.array([0]), keepdims=0))


# ---- HardSwish ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", [(), (1,), (2, 3, 5), (1, 8, 7, 9)])
def test_hard_swish_matches_formula(dtype, shape):
    x = np.asarray(rng.standard_normal(shape) * 4).astype(dtype)
    x.reshape(-1)[:3] = np.array([-3.0, 3.0, 0.0])[:x.size]          # the kinks
    before = x.copy()
    wide = x.astype(np.float64)
    want = wide * np.clip(wide / 6 + 0.5, 0, 1)
    for fn in (_kernel("HardSwish", 14), _kernel("HardSwish", 1, "com.edgerun")):
        got = fn(x)
        assert got.dtype == x.dtype and got.shape == x.shape
        tol = 2e-3 if dtype == np.float16 else 1e-6
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
    np.testing.assert_array_equal(x, before)


# ---- If's condition -------------------------------------------------------------------------


def test_if_condition_forms():
    from edgerun.providers.cpu.ops.control_flow import _is_true
    assert _is_true(np.array(True)) and not _is_true(np.array(False))
    assert _is_true(np.array([True])) and not _is_true(np.array([[False]]))
    assert _is_true(np.array(1, np.int64)) and _is_true(True)
    with pytest.raises(ValueError, match="exactly one element"):
        _is_true(np.array([True, False]))
    with pytest.raises(ValueError, match="exactly one element"):
        _is_true(np.zeros((0,), bool))


# ---- Conv: padding and short outputs --------------------------------------------------------


@pytest.mark.parametrize("begin,end", [([1], [1]), ([0, 2], [3, 0]), ([0, 0], [0, 0]),
                                       ([-1, 1], [2, -1]), ([2, 1, 0], [0, 1, 2])])
def test_pad_spatial_matches_numpy(begin, end):
    x = rng.standard_normal((2, 3) + (5, 6, 4)[:len(begin)]).astype(np.float32)
    got = conv_ops.pad_spatial(x, begin, end, value=0.5)
    cropped = x[(slice(None), slice(None)) + tuple(
        slice(max(-b, 0), d - max(-e, 0)) for b, e, d in zip(begin, end, x.shape[2:]))]
    want = np.pad(cropped, [(0, 0), (0, 0)] + [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)],
                  constant_values=0.5)
    np.testing.assert_array_equal(got, want)


# (x shape, w shape, pads, strides, group): short outputs whose taps partly read padding
# (the window method), plain 1-D and 2-D cases, batch > 1 and groups for the general GEMM.
CONV_CASES = [((1, 129, 3), (128, 129, 3), [1, 1], [1], 1),
              ((1, 128, 3), (64, 128, 3), [1, 1], [2], 1),
              ((1, 64, 2), (64, 64, 3), [1, 1], [2], 1),
              ((1, 64, 1), (128, 64, 3), [1, 1], [1], 1),
              ((2, 8, 1), (16, 8, 5), [2, 2], [1], 1),
              ((1, 1, 576), (30, 1, 256), [0, 0], [128], 1),
              ((1, 6, 2, 2), (8, 6, 3, 3), [1, 1, 1, 1], [1, 1], 1),
              ((2, 6, 1, 3), (4, 3, 3, 3), [1, 1, 1, 1], [2, 1], 2),
              ((1, 4, 7, 7), (4, 1, 3, 3), [1, 1, 1, 1], [1, 1], 4),
              ((3, 5, 9), (7, 5, 3), [0, 2], [2], 1)]


@pytest.mark.parametrize("x_shape,w_shape,pads,strides,group", CONV_CASES)
def test_conv_matches_reference(x_shape, w_shape, pads, strides, group):
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    attrs = dict(pads=pads, strides=strides, group=group, kernel_shape=list(w_shape[2:]))
    got = _kernel("Conv", 11)(x, w, b, **attrs)
    want = _reference("Conv", {"x": x, "w": w, "b": b}, 11, **attrs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    relu = _kernel("FusedConv", 1, "com.edgerun")(x, w, b, activation="Relu", **attrs)
    np.testing.assert_allclose(relu, np.maximum(want, 0), rtol=1e-4, atol=1e-4)


# ---- Gelu (float32/float64 in one buffer) ---------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_matches_reference(dtype):
    for shape in [(1,), (3, 7), (1, 16, 96)]:
        x = np.asarray(rng.standard_normal(shape) * 3).astype(dtype)
        x.reshape(-1)[0] = 0.0
        before = x.copy()
        got = _kernel("Gelu", 20)(x)
        want = _reference("Gelu", {"x": x}, 20)
        assert got.dtype == x.dtype and got.shape == x.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(x, before)


# ---- Conv: gathered columns for short outputs --------------------------------------------------

# (x shape, w shape, pads, strides, dilations): short outputs the "gather" method takes
GATHER_CASES = [((1, 129, 3), (128, 129, 3), [1, 1], [1], [1]),
                ((1, 64, 1), (128, 64, 3), [1, 1], [1], [1]),
                ((1, 8, 2), (6, 8, 3), [1, 1], [2], [1]),     # one position: x in order
                ((1, 4, 6), (6, 4, 3), [1, 0], [1], [3]),     # one position, pad + take
                ((1, 3, 2, 2), (5, 3, 3, 3), [1, 1, 1, 1], [2, 2], [1, 1]),
                ((3, 8, 2), (6, 8, 3), [1, 1], [2], [1]),     # batch 3, one position
                ((2, 4, 6), (6, 4, 3), [1, 0], [1], [3]),
                ((4, 129, 4), (16, 129, 3), [1, 1], [1], [1]),  # silero's batched encoder
                ((1, 1, 576), (30, 1, 256), [0, 0], [128], [1]),
                ((3, 4, 5), (6, 4, 3), [2, 0], [2], [2]),
                ((2, 3, 4, 3), (5, 3, 3, 2), [1, 0, 1, 1], [2, 1], [1, 2]),
                ((3, 8, 1, 1), (5, 8, 1, 1), [0, 0, 0, 0], [1, 1], [1, 1]),  # squeeze-excite
                ((2, 6, 3, 3), (4, 6, 1, 1), [0, 0, 0, 0], [3, 3], [1, 1])]  # 1x1, one output


def _check_conv_method(method, x_shape, w_shape, pads, strides, dilations, atol,
                       bias=True, dtype=np.float32):
    """Conv of random data takes `method` and matches the reference, on a first call and on
    a second one that reuses what the node prepared (plan, weights)."""
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    inputs = {"x": x, "w": w}
    if bias:
        inputs["b"] = rng.standard_normal(w_shape[0]).astype(dtype)
    kernel = tuple(w_shape[2:])
    plan = conv_ops._conv_plan(x_shape, w_shape, 1, kernel, tuple(strides), tuple(dilations),
                               tuple(pads), "NOTSET")
    assert plan.method == method
    attrs = dict(pads=pads, strides=strides, dilations=dilations, kernel_shape=list(kernel))
    conv = _kernel("Conv", 11)
    want = _reference("Conv", inputs, 11, **attrs)
    for _ in range(2):
        got = conv(*inputs.values(), **attrs)
        assert got.shape == want.shape and got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol)


@pytest.mark.parametrize("bias,dtype", [(True, np.float32), (False, np.float32),
                                        (True, np.float64)])
@pytest.mark.parametrize("x_shape,w_shape,pads,strides,dilations", GATHER_CASES)
def test_conv_gather_method_matches_reference(x_shape, w_shape, pads, strides, dilations,
                                              bias, dtype):
    _check_conv_method("gather", x_shape, w_shape, pads, strides, dilations, atol=1e-4,
                       bias=bias, dtype=dtype)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape,strides", [((1, 6, 5, 4), [1, 1]), ((1, 6, 5, 4), [2, 1]),
                                             ((2, 6, 5, 4), [1, 1])])
def test_conv_pointwise_method_matches_reference(x_shape, strides, bias):
    _check_conv_method("pointwise", x_shape, (7, 6, 1, 1), [0, 0, 0, 0], strides, [1, 1],
                       atol=1e-4, bias=bias)


@pytest.mark.parametrize("dtype,atol", [(np.float32, 2e-3), (np.float64, 1e-9)])
@pytest.mark.parametrize("x_shape,w_shape,pads", [
    ((1, 96, 14, 14), (128, 96, 3, 3), [1, 1, 1, 1]),
    ((2, 96, 16, 15), (128, 96, 3, 3), [0, 1, 0, 0]),       # batch 2, asymmetric pads
    ((1, 128, 14, 18), (160, 128, 3, 3), [2, 1, 0, 1])])
def test_conv_winograd_method_matches_reference(x_shape, w_shape, pads, dtype, atol):
    """Outputs of about 30 (96 x 9 products of unit normals): 2e-3 is ~7e-5 relative."""
    _check_conv_method("winograd", x_shape, w_shape, pads, [1, 1], [1, 1], atol=atol,
                       dtype=dtype)


def test_conv_gather_index_marks_padding():
    from edgerun.providers.cpu.ops.conv_gather import gather_index
    index, reads_padding = gather_index((3,), (3,), (1,), (1,), (1,), (3,))
    np.testing.assert_array_equal(index, [[-1, 0, 1], [0, 1, 2], [1, 2, -1]])
    assert reads_padding
    index, reads_padding = gather_index((2, 2), (2, 2), (1, 1), (1, 1), (0, 0), (1, 1))
    np.testing.assert_array_equal(index.reshape(-1), [0, 1, 2, 3])
    assert not reads_padding


# ---- erf and Gelu in float32 (blockwise rational in float64) ---------------------------------


def _erf_exact(x):
    import math
    return np.array([math.erf(float(v)) for v in np.asarray(x, np.float64).reshape(-1)])


def test_erf_float32_is_within_two_ulps():
    x = np.concatenate([np.linspace(-7, 7, 200001), np.geomspace(1e-30, 1, 2001),
                        [0.0, 4.0, -4.0, 1e30]]).astype(np.float32)
    got = _kernel("Erf", 13)(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    want = _erf_exact(x)
    error = np.abs(got.astype(np.float64) - want)
    assert error.max() <= 1e-7
    assert (error / np.spacing(np.abs(want).astype(np.float32))).max() <= 2
    special = _kernel("Erf", 13)(np.array([np.inf, -np.inf, np.nan], np.float32))
    np.testing.assert_array_equal(special[:2], [1.0, -1.0])
    assert np.isnan(special[2])


@pytest.mark.parametrize("size", [1, 1000, 32768 * 2 + 7])     # one block, several blocks
def test_gelu_float32_blockwise_matches_float64_formula(size):
    x = (rng.standard_normal(size) * 4).astype(np.float32)
    got = _kernel("Gelu", 20)(x.reshape(1, -1))
    wide = x.astype(np.float64)
    want = 0.5 * wide * (1 + _erf_exact(wide / np.sqrt(2)))
    assert got.dtype == np.float32 and got.shape == (1, size)
    # 1 + erf cancels for negative x: erf's 1e-7 becomes 0.5 * |x| * 1e-7 (as in any float32 GELU)
    np.testing.assert_allclose(got.reshape(-1), want, rtol=1e-6, atol=2.5e-7)


# ---- Sigmoid, Tanh, Split ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_fast_path_matches_formula(dtype):
    x = np.concatenate([rng.standard_normal(50) * 20,
                        [0.0, -80.0, -88.5, -100.0, -800.0, 1e4, -np.inf, np.inf]]).astype(dtype)
    wide = x.astype(np.float64)
    with np.errstate(over="ignore"):
        want = 1 / (1 + np.exp(-wide))
    with np.errstate(over="raise", invalid="raise", divide="raise"):   # no warning either
        for got in (_kernel("Sigmoid", 13)(x),
                    _kernel("FusedConv", 1, "com.edgerun")(
                        x.reshape(1, 1, -1), np.ones((1, 1, 1), dtype), activation="Sigmoid")
                    .reshape(-1)):
            assert got.dtype == x.dtype
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-37)


def test_tanh_fast_path_matches_numpy():
    x = (rng.standard_normal((3, 5)) * 10).astype(np.float32)
    np.testing.assert_array_equal(_kernel("Tanh", 13)(x), np.tanh(x))


@pytest.mark.parametrize("shape,axis,split", [((1, 512), 1, None), ((6, 4), 0, [1, 2, 3]),
                                              ((2, 7, 3), -2, [7, 0]), ((4,), 0, None)])
def test_split_returns_the_numpy_parts(shape, axis, split):
    x = rng.standard_normal(shape).astype(np.float32)
    count = 4 if split is None else len(split)
    fn = registry.lookup("Split", "", 18)
    ctx = KernelContext(Node(op_type="Split", inputs=[], outputs=[f"y{i}" for i in range(count)]),
                        18)
    got = fn(ctx, x, None if split is None else np.array(split, np.int64), axis=axis)
    bounds = np.cumsum(split)[:-1] if split else \
        np.cumsum([-(-x.shape[axis] // count)] * (count - 1))
    for g, w in zip(got, np.split(x, bounds, axis=axis)):
        np.testing.assert_array_equal(g, w)


# ---- LSTM: the plain forward direction with weights prepared once per node -------------------


def _recurrent_reference(op_type: str, inputs: dict, outputs: list, **attrs):
    """onnxruntime's LSTM/GRU (optimizations off) on `inputs` (name -> array or None, in the
    operator's input order); onnx's ReferenceEvaluator for float64, which onnxruntime's
    recurrent kernels do not take."""
    import onnxruntime

    names = [n if v is not None else "" for n, v in inputs.items()]
    given = {n: v for n, v in inputs.items() if v is not None}
    x = given["x"]
    node = helper.make_node(op_type, names, outputs, **attrs)
    dtype = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, dtype, v.shape) for n, v in given.items()],
        [helper.make_tensor_value_info(n, dtype, None) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    if x.dtype == np.float64:
        return ReferenceEvaluator(model).run(None, given)
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(model.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"]).run(None, given)


def _lstm_reference(x, w, r, b, h0, c0, direction="forward"):
    return _recurrent_reference("LSTM", {"x": x, "w": w, "r": r, "b": b, "lens": None,
                                         "h0": h0, "c0": c0}, ["y", "yh", "yc"],
                                hidden_size=r.shape[-1], direction=direction)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("steps,batch,with_bias,with_states",
                         [(1, 1, True, True), (1, 2, False, False), (5, 3, True, False),
                          (4, 2, False, True), (16, 1, True, True)])
def test_plain_lstm_fast_path_matches_onnxruntime(dtype, steps, batch, with_bias, with_states,
                                                  direction):
    """Every direction, one step (streaming) and many, batch 1, with weights prepared once
    per node; a strided x too."""
    hidden, size = 6, 4
    dirs = 2 if direction == "bidirectional" else 1
    x = rng.standard_normal((steps, batch, 2 * size)).astype(dtype)[..., ::2]
    w = rng.standard_normal((dirs, 4 * hidden, size)).astype(dtype)
    r = rng.standard_normal((dirs, 4 * hidden, hidden)).astype(dtype)
    b = rng.standard_normal((dirs, 8 * hidden)).astype(dtype) if with_bias else None
    h0 = rng.standard_normal((dirs, batch, hidden)).astype(dtype) if with_states else None
    c0 = rng.standard_normal((dirs, batch, hidden)).astype(dtype) if with_states else None
    fn = registry.lookup("LSTM", "", 14)
    ctx = KernelContext(Node(op_type="LSTM", inputs=[], outputs=["y", "yh", "yc"]), 14)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    want = _lstm_reference(np.ascontiguousarray(x), w, r, b, h0, c0, direction)
    for _ in range(2):                       # the second run uses the prepared weights
        got = fn(ctx, x, w, r, b, None, h0, c0, hidden_size=hidden, direction=direction)
        for g, expected in zip(got, want):
            assert g.dtype == dtype and g.shape == expected.shape
            np.testing.assert_allclose(g, expected, rtol=tol, atol=tol)
    w2 = w * 0.5                             # new weights: prepared again, not reused
    got = fn(ctx, x, w2, r, b, None, h0, c0, hidden_size=hidden, direction=direction)
    np.testing.assert_allclose(got[0], _lstm_reference(np.ascontiguousarray(x), w2, r, b, h0,
                                                       c0, direction)[0], rtol=tol, atol=tol)


def test_prepared_values_follow_their_sources():
    ctx = KernelContext(Node(op_type="X", inputs=[], outputs=["y"]), 1)
    a, b = np.ones(3), np.zeros(3)
    built = []

    def build(v):
        built.append(v)
        return len(built)

    assert ctx.prepared("k", (a, None), lambda: build(1)) == 1
    assert ctx.prepared("k", (a, None), lambda: build(2)) == 1       # same objects: kept
    assert ctx.prepared("k", (a.copy(), None), lambda: build(3)) == 2  # an equal copy is new
    assert ctx.prepared("k", (b, None), lambda: build(4)) == 3
    assert ctx.prepared("other", (b, None), lambda: build(5)) == 4


# ---- Slice, Squeeze, Unsqueeze and Pow: small-tensor shortcuts ---------------------------------


def test_slice_index_is_kept_per_input_shape():
    fn = _kernel("Slice", 13)
    starts, ends = np.array([1], np.int64), np.array([-1], np.int64)
    axes, steps = np.array([-1], np.int64), np.array([2], np.int64)
    for shape in [(2, 9), (3, 4), (2, 9), (1, 1)]:
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(fn(x, starts, ends, axes, steps), x[..., 1:-1:2])


@pytest.mark.parametrize("shape,axis", [((1, 5), 0), ((4, 1), -1), ((2, 1, 3), 1), ((1,), 0)])
def test_squeeze_and_unsqueeze_of_one_axis_match_reference(shape, axis):
    x = rng.standard_normal(shape).astype(np.float32)
    axes = np.array([axis], np.int64)
    np.testing.assert_array_equal(_kernel("Squeeze", 13)(x, axes),
                                  _reference("Squeeze", {"x": x, "axes": axes}, 13))
    np.testing.assert_array_equal(_kernel("Unsqueeze", 13)(x, axes),
                                  _reference("Unsqueeze", {"x": x, "axes": axes}, 13))
    with pytest.raises(ValueError, match="size"):
        _kernel("Squeeze", 13)(np.zeros((2, 3), np.float32), np.array([axis], np.int64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pow_of_two_is_the_exact_square(dtype):
    x = np.concatenate([rng.standard_normal(20) * 1e3, [0.0, -0.0, np.inf, -np.inf]])
    x = x.astype(dtype)
    for exponent in (np.array(2.0, np.float32), np.array([2], np.int64), np.array(2.0)):
        got = _kernel("Pow", 15)(x, exponent)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, np.power(x, exponent.astype(dtype)))


# ---- Softmax and LayerNorm sums (BLAS row sums, one shift when the span is small) -------------


@pytest.mark.parametrize("scale", [1.0, 3.0, 1e3])       # spans below and above the one shift
@pytest.mark.parametrize("shape,axis", [((360, 10), -1), ((2, 3, 16, 16), -1), ((4, 7, 5), 1)])
def test_softmax_matches_float64_formula(shape, axis, scale):
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    wide = x.astype(np.float64)
    e = np.exp(wide - wide.max(axis=axis, keepdims=True))
    want = e / e.sum(axis=axis, keepdims=True)
    got = _kernel("Softmax", 13)(x, axis=axis)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30)


def test_trailing_sum_matches_numpy():
    from edgerun.providers.cpu.ops.reduction import trailing_sum
    for shape, first in [((5, 3, 4), 1), ((2, 6000), 1), ((3, 4), 0), ((0, 4), 1), ((2, 0), 1)]:
        for dtype in (np.float32, np.float64, np.int64):
            x = (rng.standard_normal(shape) * 10).astype(dtype)
            for view in (x, x[..., ::-1]):                      # contiguous or not
                got = trailing_sum(view, first)
                want = np.sum(view, axis=tuple(range(first, x.ndim)), keepdims=True)
                assert got.shape == want.shape
                np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("op_type", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceProd"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reducing_single_elements_returns_them(op_type, keepdims):
    x = rng.standard_normal((3, 1, 4, 1)).astype(np.float32)
    axes = np.array([1, -1], np.int64)
    got = _kernel(op_type, 18)(x, axes, keepdims=keepdims)
    want = _reference(op_type, {"x": x, "axes": axes}, 18, keepdims=keepdims)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


# ---- Conv: one GEMM per kernel position (few output channels, wide outputs) -------------------

TAPS_CASES = [((1, 32, 24, 24), (16, 32, 3, 3), [1, 1, 1, 1], [1, 1], [1, 1]),
              ((1, 40, 47, 45), (24, 40, 3, 3), [1, 1, 1, 1], [2, 2], [1, 1]),
              ((1, 32, 30, 30), (8, 32, 5, 5), [4, 4, 4, 4], [1, 1], [2, 2]),
              ((1, 32, 46, 46), (100, 32, 3, 3), [0, 1, 2, 0], [1, 1], [1, 1])]


@pytest.mark.parametrize("x_shape,w_shape,pads,strides,dilations", TAPS_CASES)
def test_conv_tap_gemms_match_reference(x_shape, w_shape, pads, strides, dilations):
    _check_conv_method("taps", x_shape, w_shape, pads, strides, dilations, atol=1e-3)


# ---- Pooling: over flattened planes, or one axis at a time ---------------------------------------

# (x shape, kernel, strides, pads, dilations, ceil_mode): separable pooling's cases, with
# stride-1 last axes (flattened rows, whose scratch columns are dropped) and strided ones
POOL_CASES = [((1, 5, 28, 28), [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 0),
              ((2, 3, 17, 9), [3, 2], [1, 1], [0, 1, 2, 0], [1, 2], 0),
              ((1, 4, 111, 111), [3, 3], [2, 2], [0, 0, 0, 0], [1, 1], 1),
              ((1, 2, 16, 16), [2, 2], [2, 2], [0, 0, 1, 1], [1, 1], 0),
              ((1, 3, 20), [5], [1], [0, 0], [2], 0),
              ((1, 2, 6, 7, 8), [3, 2, 3], [1, 2, 1], [1, 0, 1, 1, 1, 1], [1, 1, 1], 0),
              # 2-D, stride 1 or no padding: over the flattened planes
              ((2, 4, 15, 17), [3, 3], [2, 2], [0, 0, 0, 0], [1, 1], 0),
              ((1, 3, 12, 10), [2, 3], [1, 1], [1, 0, 0, 2], [2, 1], 0),
              ((1, 2, 9, 9), [3, 3], [3, 2], [0, 0, 0, 0], [1, 1], 1),     # ceil fits
              # strided axes combine only the taps inside the input, never padding
              ((1, 6, 27, 28), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 0),
              ((1, 3, 13, 13), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 1),
              ((1, 2, 10, 11), [4, 3], [3, 2], [2, 1, 2, 0], [2, 1], 0),
              # one window over the whole input: a reduction over the trailing axes
              ((2, 4, 7, 7), [7, 7], [1, 1], [0, 0, 0, 0], [1, 1], 0)]


@pytest.mark.parametrize("x_shape,kernel,strides,pads,dilations,ceil_mode", POOL_CASES)
def test_pools_match_reference(x_shape, kernel, strides, pads, dilations, ceil_mode):
    x = rng.standard_normal(x_shape).astype(np.float32)
    x.reshape(-1)[::7] = -np.inf                  # MaxPool's padding never beats the input
    attrs = dict(kernel_shape=kernel, strides=strides, pads=pads, ceil_mode=ceil_mode)
    got = _kernel("MaxPool", 12)(x, dilations=dilations, **attrs)
    want = _reference("MaxPool", {"x": x}, 12, dilations=dilations, **attrs)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    x = np.nan_to_num(x, neginf=-3.0)
    for include in (0, 1):
        got = _kernel("AveragePool", 19)(x, count_include_pad=include, dilations=dilations,
                                         **attrs)
        want = _reference("AveragePool", {"x": x}, 19, count_include_pad=include,
                          dilations=dilations, **attrs)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,opset", [("MaxPool", 12), ("AveragePool", 19), ("LpPool", 18)])
def test_pools_refuse_pads_as_large_as_the_kernel(op, opset):
    """onnxruntime refuses them too: a window would hold only padding, nothing to pool."""
    x = np.ones((1, 1, 4, 4), np.float32)
    with pytest.raises(ValueError, match=r"pads \[0, 2, 0, 0\] must be smaller than "
                                         r"kernel_shape \[2, 2\].*axis 1"):
        _kernel(op, opset)(x, kernel_shape=[2, 2], pads=[0, 2, 0, 0])


# ---- np.maximum / np.minimum / np.clip against scalars through numpy's clip ufunc -----------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("size", [5, 2048, 200000])
def test_scalar_clamps_match_numpy(size, dtype):
    from edgerun.providers.cpu.ops.clamp import clip_to, maximum_of, minimum_of
    x = rng.standard_normal(size).astype(dtype)
    x[::11] = np.nan
    x[1::13] = np.inf
    x[2::13] = -np.inf
    np.testing.assert_array_equal(maximum_of(x, 0), np.maximum(x, dtype(0)))
    np.testing.assert_array_equal(minimum_of(x, 0.5), np.minimum(x, dtype(0.5)))
    y = x.copy()
    assert clip_to(y, -1, 1, out=y) is y
    np.testing.assert_array_equal(y, np.minimum(np.maximum(x, dtype(-1)), dtype(1)))
    np.testing.assert_array_equal(clip_to(x, 2, 1), np.clip(x, dtype(2), dtype(1)))
    strided = x[::2]
    np.testing.assert_array_equal(maximum_of(strided, 0), np.maximum(strided, dtype(0)))
    assert maximum_of(x, 0).dtype == dtype and clip_to(x, 0, 1).dtype == dtype


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64, np.bool_])
def test_scalar_clamps_of_integers_and_bools_match_numpy(dtype):
    from edgerun.providers.cpu.ops.clamp import clip_to, maximum_of, minimum_of
    info = np.iinfo(dtype) if dtype is not np.bool_ else None
    x = (rng.integers(-100, 100, 300) if info is None or info.min < 0 else
         rng.integers(0, 200, 300)).astype(dtype)
    if info is not None:
        x[:2] = info.min, info.max
    low, high = (False, True) if dtype is np.bool_ else (3, 50)
    np.testing.assert_array_equal(maximum_of(x, low), np.maximum(x, dtype(low)))
    np.testing.assert_array_equal(minimum_of(x, high), np.minimum(x, dtype(high)))
    np.testing.assert_array_equal(clip_to(x, low, high),
                                  np.minimum(np.maximum(x, dtype(low)), dtype(high)))
    assert clip_to(x, low, high).dtype == dtype


# ---- Pad: reflect/edge/wrap of small tensors through one prepared index ------------------------


@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap"])
def test_pad_gather_matches_reference(mode):
    pad = _kernel("Pad", 19)
    cases = [((1, 512), [0, 64, 0, 64], None), ((3, 4, 5), [1, 0, 2, 2, 1, 0], None),
             ((2, 6), [1, 3], [1]), ((4,), [3, 2], None)]
    for shape, pads, axes in cases:
        x = rng.standard_normal(shape).astype(np.float32)
        pads_array = np.array(pads, np.int64)
        inputs = {"x": x, "pads": pads_array}
        args = [x, pads_array, None]
        if axes is not None:
            inputs["value"] = np.array(0, np.float32)
            inputs["axes"] = np.array(axes, np.int64)
            args = [x, pads_array, inputs["value"], inputs["axes"]]
        want = _reference("Pad", inputs, 19, mode=mode)
        for _ in range(2):                      # the second call reuses the prepared index
            got = pad(*args, mode=mode)
            assert got.shape == want.shape
            np.testing.assert_array_equal(got, want)


# ---- Conv: im2col chunk by chunk on wide grids --------------------------------------------------

# grids of at least 8192 positions, as many output channels as input ones or more (fewer
# take taps): padded, strided, a non-square kernel, a short last chunk; and columns past
# COLUMNS_SPILL_BYTES on few channels
CHUNKED_CASES = [((1, 32, 90, 90), (40, 32, 3, 3), [1, 1, 1, 1], [1, 1], [1, 1]),
                 ((1, 32, 190, 190), (32, 32, 3, 3), [0, 0, 1, 1], [2, 2], [1, 1]),
                 ((1, 33, 92, 91), (33, 33, 3, 2), [2, 0, 0, 0], [1, 1], [1, 1]),
                 ((1, 8, 224, 224), (8, 8, 5, 5), [2, 2, 2, 2], [1, 1], [1, 1])]


@pytest.mark.parametrize("x_shape,w_shape,pads,strides,dilations", CHUNKED_CASES)
def test_conv_chunked_im2col_matches_reference(x_shape, w_shape, pads, strides, dilations):
    _check_conv_method("chunked", x_shape, w_shape, pads, strides, dilations, atol=1e-3)


# ---- Softmax: many short rows take their maxima column by column -------------------------------


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape", [(300, 10), (40, 3, 5), (200, 12)])
def test_softmax_short_rows_match_reference(shape, op_type):
    x = (rng.standard_normal(shape) * 30).astype(np.float32)     # spans past one shared shift
    x.reshape(-1, shape[-1])[3] = -np.inf                         # a row of -inf: NaN, as ORT
    x.reshape(-1, shape[-1])[5, 2] = np.nan
    wide = x.astype(np.float64)
    with np.errstate(all="ignore"):      # the reference's log(softmax) underflows to -inf
        shifted = wide - wide.max(axis=-1, keepdims=True)
        total = np.exp(shifted).sum(axis=-1, keepdims=True)
    want = np.exp(shifted) / total if op_type == "Softmax" else shifted - np.log(total)
    for opset, axis in ((13, -1), (11, x.ndim - 1)):
        got = _kernel(op_type, opset)(x, axis=axis)
        assert got.shape == x.shape and got.flags.c_contiguous and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        assert np.isnan(got.reshape(-1, shape[-1])[5]).all()


# ---- MatMul: a constant right operand as contiguous column panels -------------------------------


@pytest.mark.parametrize("a_shape,b_shape", [((16, 384), (384, 1536)), ((1, 5, 64), (64, 256)),
                                             ((1, 16, 1536), (1536, 384)),
                                             ((2, 3, 100), (100, 384))])
def test_matmul_panels_match_the_plain_product(a_shape, b_shape):
    fn = registry.lookup("MatMul", "", 13)
    ctx = KernelContext(Node(op_type="MatMul", inputs=[], outputs=["y"]), 13)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    want = (a.astype(np.float64) @ b).astype(np.float32)
    for _ in range(3):                      # the panels are built from the second call on
        got = fn(ctx, a, b)
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert "panels" in ctx._prepared
    fresh = KernelContext(Node(op_type="MatMul", inputs=[], outputs=["y"]), 13)
    for _ in range(3):                      # a new B on every call (an activation): no panels
        b2 = b.copy()
        np.testing.assert_allclose(fn(fresh, a, b2), want, rtol=1e-5, atol=1e-4)
    assert "panels" not in fresh._prepared


# ---- ArrayFeatureExtractor: range checked by two reductions ----------------------------------


def test_array_feature_extractor_takes_in_range_indices_and_names_a_bad_one():
    afe = _kernel("ArrayFeatureExtractor", 1, "ai.onnx.ml")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(afe(x, np.array([3, 0, 3], np.int64)), x[:, [3, 0, 3]])
    np.testing.assert_array_equal(afe(np.arange(4.0), np.array([2])), [[2.0]])
    for bad, index in (([0, 4, 1], 4), ([1, -1], -1)):
        with pytest.raises(ValueError, match=f"index {index} is out of range for a last axis "
                                             "of size 4"):
            afe(x, np.array(bad, np.int64))


@pytest.mark.parametrize("x_shape,w_shape", [((0, 4, 3), (5, 4, 3)),
                                             ((0, 96, 16, 16), (128, 96, 3, 3))])
def test_conv_of_an_empty_batch_is_an_empty_output(x_shape, w_shape):
    """Batch 0 takes no GEMM method (the gather and Winograd ones would reshape nothing)."""
    conv = _kernel("Conv", 11)
    y = conv(np.ones(x_shape, np.float32), np.ones(w_shape, np.float32),
             np.ones(w_shape[0], np.float32), pads=[1] * (2 * (len(x_shape) - 2)))
    assert y.shape == (0, w_shape[0]) + x_shape[2:] and y.dtype == np.float32


# ---- Conv: depthwise 2-D by row mixing -----------------------------------------------------


def _depthwise_float64(x, w, b, strides, dilations, pads):
    """Depthwise 2-D conv in float64, one shifted window view per kernel position."""
    n, channels, height, width = x.shape
    out_channels, _, kh, kw = w.shape
    top, left, bottom, right = pads
    xp = np.zeros((n, channels, height + top + bottom, width + left + right))
    xp[:, :, top:top + height, left:left + width] = x
    rows = (xp.shape[2] - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    cols = (xp.shape[3] - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    source = np.repeat(xp, out_channels // channels, axis=1)
    y = np.zeros((n, out_channels, rows, cols)) + (0 if b is None else b[:, None, None])
    for t in range(kh):
        for k in range(kw):
            r0, c0 = t * dilations[0], k * dilations[1]
            window = source[:, :, r0:r0 + (rows - 1) * strides[0] + 1:strides[0],
                            c0:c0 + (cols - 1) * strides[1] + 1:strides[1]]
            y += w[None, :, 0, t, k, None, None] * window
    return y


# (x shape, kernel, strides, dilations, pads, channel multiplier): ppocr's short maps (one
# band reading only input rows, kernels taller than the input), several bands with and
# without a cropped last one, strides and dilations on either axis, all-padding rows.
ROW_MIX_CASES = [((2, 6, 2, 9), (5, 5), (1, 1), (1, 1), (2, 2, 2, 2), 1),
                 ((2, 5, 3, 11), (5, 5), (2, 1), (1, 1), (2, 2, 2, 2), 1),
                 ((1, 3, 1, 7), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1),
                 ((1, 4, 14, 14), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1),
                 ((1, 4, 13, 9), (3, 3), (2, 2), (1, 1), (1, 0, 1, 2), 1),
                 ((3, 2, 11, 10), (3, 2), (1, 3), (2, 1), (0, 1, 3, 0), 2),
                 ((1, 3, 6, 5), (2, 3), (1, 1), (1, 2), (4, 0, 0, 4), 1),
                 ((1, 2, 3, 4), (3, 3), (1, 1), (1, 1), (5, 1, 0, 1), 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape,kernel,strides,dilations,pads,multiplier", ROW_MIX_CASES)
def test_conv_depthwise_row_mix_matches_reference(x_shape, kernel, strides, dilations, pads,
                                                  multiplier, dtype):
    """Through the Conv kernel (its cost model's band), then with every band height: one
    band, several, a last one cropped."""
    from edgerun.providers.cpu.ops import conv_depthwise
    channels = x_shape[1]
    w_shape = (channels * multiplier, 1) + kernel
    plan = conv_ops._conv_plan(x_shape, w_shape, channels, kernel, strides, dilations, pads,
                               "NOTSET")
    assert plan.method == "row_mix"
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype)
    attrs = dict(pads=list(pads), strides=list(strides), dilations=list(dilations),
                 group=channels, kernel_shape=list(kernel))
    want = _reference("Conv", {"x": x, "w": w, "b": b}, 11, **attrs)
    conv = _kernel("Conv", 11)
    for _ in range(2):          # the second call reuses the prepared weights and layout
        got = conv(x, w, b, **attrs)
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    out_shape = tuple(plan.geometry.out_shape)
    column_taps = conv_ops.tap_ranges(x_shape[3], out_shape[1], kernel[1], strides[1],
                                      dilations[1], pads[1])
    for band in range(1, out_shape[0] + 1):
        shape = (x_shape, kernel, strides, dilations, pads[:2], out_shape)
        layout = conv_depthwise.row_mix_layout(*shape, band)
        assert layout.bands == -(-out_shape[0] // band)
        mix = conv_depthwise.row_mix_weights(w, layout, strides, dilations)
        for bias in (b, None):
            fn = conv_depthwise.row_mix_conv(mix, bias, layout, x_shape, strides[0], pads[0],
                                             column_taps, out_shape)
            expected = want if bias is not None else want - b[:, None, None]
            np.testing.assert_allclose(fn(x), expected, rtol=1e-5, atol=1e-5,
                                       err_msg=f"band {band}")


def test_conv_depthwise_row_mix_matches_float64_on_random_geometries():
    """Random sizes, kernels, strides, dilations, pads (up to 4 per side), multipliers and
    batches, with and without bias; float32 within 1e-4 of float64 (sums of at most 25
    products of unit normals)."""
    conv = _kernel("Conv", 11)
    checked = 0
    while checked < 150:
        n, channels, multiplier = rng.integers(1, 4), rng.integers(2, 6), rng.choice([1, 1, 2])
        height, width = rng.integers(1, 18, size=2)
        kernel = tuple(int(k) for k in rng.integers(1, 6, size=2))
        strides = tuple(int(s) for s in rng.integers(1, 4, size=2))
        dilations = tuple(int(d) for d in rng.integers(1, 3, size=2))
        pads = tuple(int(p) for p in rng.integers(0, 5, size=4))
        if height + pads[0] + pads[2] < (kernel[0] - 1) * dilations[0] + 1 or \
                width + pads[1] + pads[3] < (kernel[1] - 1) * dilations[1] + 1:
            continue
        x = rng.standard_normal((n, channels, height, width)).astype(np.float32)
        w = rng.standard_normal((channels * multiplier, 1) + kernel).astype(np.float32)
        b = rng.standard_normal(w.shape[0]).astype(np.float32) if checked % 3 else None
        got = conv(x, w, b, pads=list(pads), strides=list(strides), dilations=list(dilations),
                   group=int(channels))
        want = _depthwise_float64(x, w, b, strides, dilations, pads)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{x.shape} {kernel} {strides} {dilations} {pads}")
        checked += 1


def test_conv_depthwise_band_height_follows_the_map():
    """One band over ppocr's 3-row maps (its zeros cost less than more GEMM calls); bands of
    a few rows over a 56x56 map (one band would multiply 19x the zeros)."""
    from edgerun.providers.cpu.ops.conv_depthwise import band_rows
    assert band_rows((2, 88, 3, 96), (5, 5), (1, 1), (1, 1), (2, 2), (3, 96)) == 3
    assert 2 <= band_rows((1, 144, 56, 56), (3, 3), (1, 1), (1, 1), (1, 1), (56, 56)) <= 8


def test_ignored_float_errors_silence_the_block_and_restore_the_callers_state():
    import warnings
    from edgerun.providers.cpu.ops.float_errors import ignored_float_errors
    x = np.array([-1.0, 0.0, 1e300])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(invalid="raise", divide="warn"):
            with ignored_float_errors():
                np.sqrt(x)
                np.log(x)
                with ignored_float_errors():        # nested
                    _ = x * 1e300
                np.divide(1.0, x)
            with pytest.raises(FloatingPointError):
                np.sqrt(x)
            with pytest.raises(RuntimeWarning):
                np.log(x)
    assert np.geterr()["invalid"] == "warn"


# ---- integer products: float32 BLAS where exact, float64 past 2**24 -------------------------

def _onnxruntime_node(op_type, inputs: dict, opset=13, out_type=TensorProto.INT32, **attrs):
    import onnxruntime

    names = list(inputs)
    node = helper.make_node(op_type, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in inputs.items()],
        [helper.make_tensor_value_info("y", out_type, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(model.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"]).run(None, inputs)[0]


# (A shape, K, A values: "small" keeps K*|a|*|b| under 2**24 (float32), "full" crosses it,
# "extreme" (every value at the end of its range) sums far past it)
INTEGER_PRODUCT_CASES = [((1, 4), 8, "small"), ((1, 1, 16), 384, "full"), ((3, 7), 64, "full"),
                         ((2, 5, 33), 1536, "full"), ((1, 2), 2048, "small"), ((16,), 384, "full"),
                         ((2, 3), 1536, "extreme")]


@pytest.mark.parametrize("a_shape,k,values", INTEGER_PRODUCT_CASES)
@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.int8), (np.int8, np.int8),
                                           (np.uint8, np.uint8)])
def test_matmul_integer_is_exact_on_both_sides_of_the_float32_bound(a_shape, k, values, a_type,
                                                                    b_type):
    """MatMulInteger (and QLinearMatMul's product) against onnxruntime: exact int32, with
    the weights reused across runs (prepared once), batch 1 and a strided B included."""
    shape = a_shape[:-1] + (k,) if len(a_shape) > 1 else (k,)
    info_a, info_b = np.iinfo(a_type), np.iinfo(b_type)
    span = 3 if values == "small" else None
    a = (rng.integers(0, 2 * span + 1, shape) + (128 - span if a_type == np.uint8 else -span)
         if span else rng.integers(info_a.min, info_a.max + 1, shape)).astype(a_type)
    wide = rng.integers(info_b.min, info_b.max + 1, (k + 3, 24)).astype(b_type)
    if values == "extreme":              # sums far past 2**24: float32 alone would round
        a[...] = info_a.min if a_type == np.int8 else info_a.max
        wide[...] = info_b.min if b_type == np.int8 else info_b.max
    b = wide[:k, ::2]                                    # a strided view: [k, 12]
    if span:
        b = np.clip(b, -span, span).astype(b_type) if b_type == np.int8 else \
            np.clip(b, 0, 2 * span).astype(b_type)
    a_zero = np.array(128 if a_type == np.uint8 and values != "extreme" else 0, a_type)
    b_zero = np.array(0 if b_type == np.int8 else 1, b_type)
    kernel = _kernel("MatMulInteger", 13)
    want = _onnxruntime_node("MatMulInteger", {"a": a, "b": np.ascontiguousarray(b),
                                               "za": a_zero, "zb": b_zero})
    for _ in range(2):                                   # the second run uses the prepared B
        got = kernel(a, b, a_zero, b_zero)
        assert got.dtype == np.int32 and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("zero_point", [None, 3])
@pytest.mark.parametrize("shape", [(1,), (1, 7), (3, 4, 5)])
def test_dequantize_of_8_bits_per_tensor_matches_onnxruntime(dtype, zero_point, shape):
    """DequantizeLinear's float32 fast path (one scale, 8-bit input) against onnxruntime,
    exactly; a strided view as input too."""
    info = np.iinfo(dtype)
    wide = rng.integers(info.min, info.max + 1, shape[:-1] + (2 * shape[-1],)).astype(dtype)
    x = wide[..., ::2]
    inputs = {"x": np.ascontiguousarray(x), "s": np.array(0.037, np.float32)}
    if zero_point is not None:
        inputs["z"] = np.array(zero_point, dtype)
    want = _onnxruntime_node("DequantizeLinear", inputs, out_type=TensorProto.FLOAT)
    got = _kernel("DequantizeLinear", 13)(x, *list(inputs.values())[1:])
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


# (input shape, kernel = strides, ceil_mode): the tiled path (windows tiling the input),
# a trailing part no window covers included
TILED_POOLS = [((1, 3, 10, 9), [2, 2], 0), ((2, 4, 8, 12), [1, 4], 0), ((1, 2, 6, 7, 6), [2, 2, 3], 0),
               ((1, 5, 12, 12), [3, 3], 1), ((1, 1, 7), [2], 0)]


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("shape,kernel,ceil_mode", TILED_POOLS)
def test_tiled_pools_match_onnxruntime(op_type, shape, kernel, ceil_mode):
    """Pools whose windows tile the input take the tiled path: equal to onnxruntime, on a
    strided view too."""
    wide = rng.standard_normal(shape[:-1] + (2 * shape[-1],)).astype(np.float32)
    x = wide[..., ::2]
    attrs = {"kernel_shape": kernel, "strides": kernel, "ceil_mode": ceil_mode}
    want = _onnxruntime_node(op_type, {"x": np.ascontiguousarray(x)}, opset=19,
                             out_type=TensorProto.FLOAT, **attrs)
    from edgerun.providers.cpu.ops import pool as pool_ops
    with pool_ops.forced_path("tiles"):       # (the native window loops run them otherwise)
        assert pool_ops._reduce_path(x, pool_ops._geometry(
            x, kernel, kernel, None, None, "NOTSET", ceil_mode)) == "tiles"
        got = _kernel(op_type, 19)(x, **attrs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _gru_reference(x, w, r, b, h0, direction, linear_before_reset):
    return _recurrent_reference("GRU", {"x": x, "w": w, "r": r, "b": b, "lens": None,
                                        "h0": h0}, ["y", "yh"], hidden_size=r.shape[-1],
                                direction=direction, linear_before_reset=linear_before_reset)


@pytest.mark.parametrize("linear_before_reset", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("steps,batch,with_bias,with_state",
                         [(1, 1, True, True), (5, 3, False, False), (9, 1, True, False)])
def test_plain_gru_fast_path_matches_onnxruntime(dtype, steps, batch, with_bias, with_state,
                                                 direction, linear_before_reset):
    hidden, size = 5, 3
    dirs = 2 if direction == "bidirectional" else 1
    x = rng.standard_normal((steps, batch, 2 * size)).astype(dtype)[..., ::2]
    w = rng.standard_normal((dirs, 3 * hidden, size)).astype(dtype)
    r = rng.standard_normal((dirs, 3 * hidden, hidden)).astype(dtype)
    b = rng.standard_normal((dirs, 6 * hidden)).astype(dtype) if with_bias else None
    h0 = rng.standard_normal((dirs, batch, hidden)).astype(dtype) if with_state else None
    fn = registry.lookup("GRU", "", 14)
    ctx = KernelContext(Node(op_type="GRU", inputs=[], outputs=["y", "yh"]), 14)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    want = _gru_reference(np.ascontiguousarray(x), w, r, b, h0, direction, linear_before_reset)
    for _ in range(2):                       # the second run uses the prepared weights
        got = fn(ctx, x, w, r, b, None, h0, hidden_size=hidden, direction=direction,
                 linear_before_reset=linear_before_reset)
        for g, expected in zip(got, want):
            assert g.dtype == dtype and g.shape == expected.shape
            np.testing.assert_allclose(g, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("rows", [1, 2, 7, 300])
@pytest.mark.parametrize("trees,depth", [(1, 1), (20, 4), (6, 9)])
def test_tree_methods_match_onnxruntime(rows, trees, depth):
    """Each way of finding the leaves (forced: level by level, path matrices, every node's
    decision) and the one measured fastest agree with onnxruntime: every comparison mode,
    NaN on either side, values on thresholds, a strided feed, batch 1."""
    import onnxruntime

    import edgerun
    from edgerun.providers.cpu.ops import ml

    model = random_tree_regressor(trees, depth, 5, rows + trees).SerializeToString()
    x = np.round(rng.standard_normal((rows, 10)), 1).astype(np.float32)[:, ::2]
    x[rng.random(x.shape) < 0.1] = np.nan
    want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"x": np.ascontiguousarray(x)})[0]
    measured = edgerun.InferenceSession(model, providers=["cpu"])
    for _ in range(2):                         # the first run times the methods
        np.testing.assert_allclose(measured.run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-5)
    for method in ml.TREE_METHODS:
        with ml.forced_tree_method(method):
            got = edgerun.InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_every_tree_method_applies_to_small_forests():
    """The forced methods above are really taken: a small forest offers all three."""
    from edgerun.providers.cpu.ops import ml

    forest = ml._forest_from_ids([0, 0, 0], [0, 1, 2], [0, 0, 0], ["BRANCH_LEQ", "LEAF", "LEAF"],
                                 [1, 0, 0], [2, 0, 0], None, [0.5, 0, 0], [0, 0], [1, 2], [0, 0],
                                 [1.0, 2.0], np.float32)
    assert set(forest._candidates(1)) == set(ml.TREE_METHODS)
    assert forest.depth == 1
    x = np.array([[0.0], [1.0], [np.nan]], np.float32)
    for method in forest._candidates(3).values():
        np.testing.assert_array_equal(method(x), [[1], [2], [2]])


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("zero_point", [None, 5])
@pytest.mark.parametrize("shape", [(1,), (1, 9), (3, 4, 5)])
def test_quantize_of_float32_per_tensor_matches_onnxruntime(dtype, zero_point, shape):
    """QuantizeLinear's float32 fast path (one scale, 8-bit result) against onnxruntime,
    exactly: ties at half steps, saturation both ways, a strided view as input."""
    scale = np.float32(0.25)
    steps = rng.integers(-700, 700, shape[:-1] + (2 * shape[-1],)).astype(np.float32) / 2
    x = (steps * scale)[..., ::2]                   # many exact ties (k + 0.5 steps)
    inputs = {"x": np.ascontiguousarray(x), "s": np.array(scale, np.float32)}
    if zero_point is not None:
        inputs["z"] = np.array(zero_point, dtype)
    out_type = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    attrs = {} if zero_point is not None else {"output_dtype": int(out_type)}
    want = _onnxruntime_node("QuantizeLinear", inputs, opset=21, out_type=out_type, **attrs)
    got = _kernel("QuantizeLinear", 21)(x, *list(inputs.values())[1:], **attrs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


# the cost model's choices by copy costs: fewer output than input channels on a wide grid
# take taps; a short GEMM inner size (C * taps below 2 * M: first layers) takes windows,
# strided and padded too
@pytest.mark.parametrize("method,x_shape,w_shape,pads,strides", [
    ("taps", (1, 64, 96, 96), (8, 64, 3, 3), [1, 1, 1, 1], [1, 1]),
    ("windows", (1, 3, 112, 112), (64, 3, 3, 3), [0, 0, 0, 0], [2, 2]),
    ("windows", (1, 1, 100, 61), (32, 1, 3, 3), [2, 1, 2, 1], [1, 1])])
def test_conv_cost_model_choices_match_reference(method, x_shape, w_shape, pads, strides):
    _check_conv_method(method, x_shape, w_shape, pads, strides, [1, 1], atol=1e-3)


# ---- weights prepared once: float16 products, MatMul panels, Conv --------------------------


def _session_pair(nodes, inputs, initializers, out_type, opset=17):
    """(edgerun CPU session, onnxruntime session with one thread) over one graph."""
    import onnxruntime as ort

    import edgerun
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", out_type, None)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    data = model.SerializeToString()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return (edgerun.InferenceSession(data, providers=["cpu"]),
            ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]))


@pytest.mark.parametrize("op", ["MatMul", "Gemm", "GemmTransB"])
@pytest.mark.parametrize("rows", [1, 5, 40])
def test_float16_products_with_constant_weights_match_onnxruntime(op, rows):
    """float16 weights are converted to float32 once per session (the product runs in
    float32, as onnxruntime's CPU provider runs it); runs after the first use the kept
    conversion. A strided (non-contiguous) feed too."""
    k, n = 96, 40
    w = (rng.standard_normal((n, k) if op == "GemmTransB" else (k, n)) / 8).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "c")]
    if op == "MatMul":
        node = helper.make_node("MatMul", ["a", "w"], ["y"])
    else:
        node = helper.make_node("Gemm", ["a", "w", "c"], ["y"], alpha=0.5, beta=2.0,
                                transB=int(op == "GemmTransB"))
    a_info = helper.make_tensor_value_info("a", TensorProto.FLOAT16, [rows, k])
    mine, theirs = _session_pair([node], [a_info], inits, TensorProto.FLOAT16)
    for run in range(3):
        wide = rng.standard_normal((rows, 2 * k)).astype(np.float16)
        a = wide[:, ::2] if run == 2 else np.ascontiguousarray(wide[:, :k])
        got = mine.run(None, {"a": a})[0]
        want = theirs.run(None, {"a": np.ascontiguousarray(a)})[0]
        assert got.dtype == np.float16 and got.shape == want.shape
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                                   rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("case", ["matmul_panels", "matmul_float16", "conv", "lstm"])
def test_a_weight_fed_as_an_input_and_refilled_in_place_is_read_again(case):
    """Kernels keep what they derive from a weight (float32 copies, panels, conv plans,
    LSTM gates) while the same array comes back. A feed is not such a weight even when the
    caller passes the same array object every time, rewriting its values in place."""
    if case.startswith("matmul"):
        dtype = np.float16 if case == "matmul_float16" else np.float32
        kind = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        nodes = [helper.make_node("MatMul", ["a", "w"], ["y"])]
        feeds = {"a": rng.standard_normal((8, 384)).astype(dtype),
                 "w": rng.standard_normal((384, 256)).astype(dtype)}
    elif case == "conv":
        kind = TensorProto.FLOAT
        nodes = [helper.make_node("Conv", ["a", "w"], ["y"], pads=[1, 1, 1, 1])]
        feeds = {"a": rng.standard_normal((1, 4, 9, 9)).astype(np.float32),
                 "w": rng.standard_normal((6, 4, 3, 3)).astype(np.float32)}
    else:
        kind = TensorProto.FLOAT
        nodes = [helper.make_node("LSTM", ["a", "w", "r"], ["", "y"], hidden_size=5)]
        feeds = {"a": rng.standard_normal((3, 1, 4)).astype(np.float32),
                 "w": rng.standard_normal((1, 20, 4)).astype(np.float32),
                 "r": rng.standard_normal((1, 20, 5)).astype(np.float32)}
    inputs = [helper.make_tensor_value_info(n, kind, v.shape) for n, v in feeds.items()]
    mine, theirs = _session_pair(nodes, inputs, [], kind)
    for _ in range(3):
        mine.run(None, feeds)
    feeds["w"] *= -0.5                              # the same array, other values
    got = mine.run(None, feeds)[0]
    want = theirs.run(None, feeds)[0]
    tol = 4e-3 if feeds["w"].dtype == np.float16 else 1e-4
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol,
                               atol=tol)


@pytest.mark.parametrize("code", [TensorProto.UINT8, TensorProto.INT8, TensorProto.INT16])
@pytest.mark.parametrize("shape", [(), (1,), (2, 3)])
def test_quantize_linear_of_scalars_and_nan_matches_onnxruntime(code, shape):
    """QuantizeLinear's float32 8-bit fast path and its general path (int16) on a 0-d input
    (a quantize_static QDQ model quantizes scalar constants; numpy hands 0-d arithmetic back
    as scalars) and on NaN (onnxruntime: the lowest value): exactly onnxruntime's."""
    x = np.full(shape, 1.23, np.float32)
    if x.size > 1:
        x.flat[1] = np.nan
    dtype = helper.tensor_dtype_to_np_dtype(code)
    inputs = {"x": x, "s": np.array(0.1, np.float32), "z": np.array(3, dtype)}
    want = _onnxruntime_node("QuantizeLinear", inputs, opset=21, out_type=code)
    got = _kernel("QuantizeLinear", 21)(x, inputs["s"], inputs["z"])
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


# (x shape, w shape, attributes): groups, depthwise, strides, dilations, pads, 1-D and 3-D,
# and a depth (C/group x kernel = 64 x 9) past float32's exact bound for 8-bit operands
CONV_INTEGER_CASES = [((1, 4, 9, 8), (6, 4, 3, 3), {"pads": [1, 1, 1, 1]}),
                      ((2, 6, 7, 7), (6, 1, 3, 3), {"group": 6, "strides": [2, 2]}),
                      ((1, 4, 8, 8), (4, 2, 2, 3), {"group": 2, "dilations": [2, 1]}),
                      ((1, 3, 11), (2, 3, 4), {"pads": [2, 1]}),
                      ((1, 2, 4, 5, 4), (3, 2, 2, 2, 2), {}),
                      ((1, 64, 6, 6), (5, 64, 3, 3), {"pads": [1, 1, 1, 1]})]


@pytest.mark.parametrize("method", [None] + [m for m in conv_ops.CONV_METHODS if m != "winograd"])
@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_INTEGER_CASES)
def test_conv_integer_is_exact_against_onnxruntime(x_shape, w_shape, attrs, method,
                                                  monkeypatch):
    """ConvInteger (uint8 x int8, zero points on both) on the native integer products (no
    method forced, where they run), and on Conv's float32 methods below the exact bound
    (each forced where it applies, the native path off as where no library ships; never
    Winograd, whose transforms round) and by im2col in float64 past it: exact int32."""
    from edgerun.providers.cpu.ops import quantization

    if method:
        monkeypatch.setattr(quantization, "_native_integer_conv", lambda *args: None)
    x = rng.integers(0, 256, x_shape).astype(np.uint8)
    w = rng.integers(-128, 128, w_shape).astype(np.int8)
    inputs = {"x": x, "w": w, "xz": np.array(131, np.uint8), "wz": np.array(-3, np.int8)}
    want = _onnxruntime_node("ConvInteger", inputs, opset=13, **attrs)
    with conv_ops.forced_method(method) if method else contextlib.nullcontext():
        got = _kernel("ConvInteger", 13)(x, w, inputs["xz"], inputs["wz"], **attrs)
    assert got.dtype == np.int32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


# ---- QuantizeLinear -> DequantizeLinear pairs fused on the CPU (QuantizeDequantize) -----------

def _qdq_model(x_shape, code, scale, zero_point, readers=1, axis=None):
    """x -> QuantizeLinear -> `readers` DequantizeLinear nodes (same scale and zero point)
    -> y0, y1, ... (as quantize_static's QDQ format writes every activation)."""
    zp_dtype = helper.tensor_dtype_to_np_dtype(code)
    inits = [numpy_helper.from_array(np.asarray(scale, np.float32), "s")]
    params = ["s"]
    if zero_point is not None:
        inits.append(numpy_helper.from_array(np.asarray(zero_point, zp_dtype), "z"))
        params.append("z")
    attrs = {} if axis is None else {"axis": axis}
    q_attrs = dict(attrs) if zero_point is not None else {**attrs, "output_dtype": code}
    nodes = [helper.make_node("QuantizeLinear", ["x"] + params, ["q"], **q_attrs)]
    nodes += [helper.make_node("DequantizeLinear", ["q"] + params, [f"y{i}"], **attrs)
              for i in range(readers)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None)
         for i in range(readers)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model.SerializeToString()


def _qdq_feed(shape, scale: float):
    """Values that cross every edge of the fake quantization: saturation both ways, exact
    ties (the scale is a power of two), x / s in (-0.5, 0) (a -0.0 before the zero point),
    infinities and NaN; batch 1 where the shape says so."""
    x = np.asarray(rng.standard_normal(shape) * 120 * scale, np.float32)
    special = np.array([np.nan, np.inf, -np.inf, -0.3 * scale, 0.5 * scale, 2.5 * scale,
                        -1.5 * scale, 1e6, -1e6, -0.0], np.float32)
    flat = x.reshape(-1)
    flat[:min(flat.size, special.size)] = special[:flat.size]
    return x


# (x shape, element type, zero point, per-axis scale): the float32 8-bit fast path, without
# a zero point (output_dtype), and the general path (16-bit, per axis)
QDQ_PAIR_CASES = [((1, 3, 5, 7), TensorProto.UINT8, 128, False),
                  ((1, 40), TensorProto.INT8, -3, False),
                  ((2, 33), TensorProto.INT8, None, False),
                  ((), TensorProto.UINT8, 17, False),
                  ((4, 6), TensorProto.INT16, 1000, False),
                  ((1, 3, 4, 4), TensorProto.UINT8, 120, True)]


@pytest.mark.parametrize("readers", [1, 2])
@pytest.mark.parametrize("x_shape,code,zero_point,per_axis", QDQ_PAIR_CASES)
def test_quantize_dequantize_pairs_fuse_on_cpu_and_match_onnxruntime(x_shape, code, zero_point,
                                                                      per_axis, readers):
    """Each DequantizeLinear of a QuantizeLinear becomes one com.edgerun QuantizeDequantize
    on the CPU provider, and gives onnxruntime's values bit for bit (unoptimized: its own
    QuantizeLinear then DequantizeLinear), the sign of zero included; a strided feed too."""
    import onnxruntime as ort

    import edgerun
    scale = np.array([0.25, 0.5, 0.0625], np.float32) if per_axis else np.float32(0.5)
    zp = None if zero_point is None else \
        (np.array([zero_point, 3, 250], np.int64) if per_axis else zero_point)
    model = _qdq_model(x_shape, code, scale, zp, readers, axis=1 if per_axis else None)
    mine = edgerun.InferenceSession(model, providers=["cpu"])
    ops = [n["op_type"] for n in mine.explain()["nodes"]]
    assert ops == ["QuantizeDequantize"] * readers
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    theirs = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    x = _qdq_feed(x_shape, 0.5)
    feeds = [x, np.repeat(x, 2, axis=-1)[..., ::2]] if x.ndim else [x]
    for feed in feeds:
        got, want = mine.run(None, {"x": feed}), theirs.run(None, {"x": feed})
        for g, w in zip(got, want):
            assert g.dtype == w.dtype == np.float32 and g.shape == w.shape
            np.testing.assert_array_equal(g, w)
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


def test_quantize_dequantize_pairs_fuse_only_for_providers_that_run_them(tmp_path):
    """With the wasm provider first the fused node runs on wasm (which has it too); without
    providers (optimize() alone) nothing fuses. An optimized model written by a CPU session
    spells the pair out again, and onnxruntime agrees."""
    import onnxruntime as ort

    import edgerun
    from edgerun.optimizer import optimize
    from edgerun.onnx import load_model
    model = _qdq_model((1, 8), TensorProto.UINT8, np.float32(0.5), 128)
    wasm = edgerun.InferenceSession(model, providers=["wasm", "cpu"])
    assert [(n["op_type"], n["provider"]) for n in wasm.explain()["nodes"]] == \
        [("QuantizeDequantize", "wasm")]
    alone = optimize(load_model(model))
    assert [n.op_type for n in alone.graph.nodes] == ["QuantizeLinear", "DequantizeLinear"]
    so = edgerun.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    mine = edgerun.InferenceSession(model, so, providers=["cpu"])
    theirs = ort.InferenceSession(so.optimized_model_filepath,
                                  providers=["CPUExecutionProvider"])
    x = _qdq_feed((1, 8), 0.5)
    np.testing.assert_array_equal(mine.run(None, {"x": x})[0], theirs.run(None, {"x": x})[0])


# (x shape, w shape, attributes, bias): batch 1 and 3, 1-D and 2-D, pointwise, grouped and
# depthwise, strided and padded; outputs large enough for the native epilogue and small ones
CONV_QDQ_CASES = [((1, 3, 12, 20), (8, 3, 3, 3), {"pads": [1, 1, 1, 1]}, True),
                  ((3, 8, 9, 7), (8, 8, 1, 1), {}, False),
                  ((1, 16, 24, 40), (16, 1, 3, 3), {"group": 16, "pads": [1, 1, 1, 1],
                                                    "strides": [2, 2]}, True),
                  ((2, 6, 10, 10), (4, 3, 3, 3), {"group": 2, "dilations": [2, 1]}, True),
                  ((1, 4, 33), (5, 4, 3), {"pads": [1, 1]}, False),
                  ((1, 32, 40, 48), (24, 32, 1, 1), {}, True)]
# (element type, zero point): uint8 at 128 and 3, int8 at -3, int8 through output_dtype alone
GRID_CASES = [(TensorProto.UINT8, 128), (TensorProto.UINT8, 3), (TensorProto.INT8, -3),
              (TensorProto.INT8, None)]


def _x_to_y_model(nodes, inits) -> bytes:
    """An opset-21, IR-10 model of float x -> `nodes` -> float y."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model.SerializeToString()


def _conv_qdq_model(x_shape, w_shape, attrs, bias, code, zero_point, scale):
    """Conv -> QuantizeLinear -> DequantizeLinear, as quantize_static writes after a Conv."""
    weights = (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(np.float32)
    inits = [numpy_helper.from_array(weights, "w"),
             numpy_helper.from_array(np.asarray(scale, np.float32), "s")]
    conv_inputs = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(w_shape[0]).astype(np.float32),
                                             "b"))
        conv_inputs.append("b")
    params = ["s"]
    q_attrs = {"output_dtype": code}
    if zero_point is not None:
        inits.append(numpy_helper.from_array(
            np.asarray(zero_point, helper.tensor_dtype_to_np_dtype(code)), "z"))
        params.append("z")
        q_attrs = {}
    nodes = [helper.make_node("Conv", conv_inputs, ["c"], **attrs),
             helper.make_node("QuantizeLinear", ["c"] + params, ["q"], **q_attrs),
             helper.make_node("DequantizeLinear", ["q"] + params, ["y"])]
    return _x_to_y_model(nodes, inits)


@pytest.mark.parametrize("code,zero_point", GRID_CASES)
@pytest.mark.parametrize("x_shape,w_shape,attrs,bias", CONV_QDQ_CASES)
def test_conv_then_quantize_dequantize_fuses_into_the_convolution(x_shape, w_shape, attrs, bias,
                                                                  code, zero_point, tmp_path,
                                                                  monkeypatch):
    """A Conv whose result a QDQ pair rounds becomes one FusedConv with the pair as its
    activation (the rounding in the conv's epilogue): the values of the unfused graph bit for
    bit (the same sums, then the pair's kernel), with every Conv method that takes the shapes
    forced, without the native library, on a strided feed, and with NaN and infinities in x.
    Against onnxruntime's Conv then Q and DQ: within one step (its sums round differently, so
    a value near a tie may round the other way). Saved as an optimized model, the pair is
    spelled out again and onnxruntime reads it."""

    import edgerun
    from edgerun.providers.cpu.native import conv as native_conv

    scale = 0.0625
    model = _conv_qdq_model(x_shape, w_shape, attrs, bias, code, zero_point, scale)
    fused, saved_path, basic = _fused_alone(model, "FusedConv", tmp_path)
    apart = edgerun.InferenceSession(model, basic, providers=["cpu"])
    x = (rng.standard_normal(x_shape) * 3).astype(np.float32)
    x.flat[:3] = [np.nan, np.inf, -np.inf]
    strided = np.repeat(x, 2, axis=-1)[..., ::2]
    for method in [None] + [m for m in conv_ops.CONV_METHODS if m != "winograd"]:
        with conv_ops.forced_method(method) if method else contextlib.nullcontext():
            for feed in (x, strided):
                got, want = fused.run(None, {"x": feed})[0], apart.run(None, {"x": feed})[0]
                np.testing.assert_array_equal(got, want, err_msg=f"method {method}")
                np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    with monkeypatch.context() as m:
        m.setattr(native_conv, "available", lambda: False)
        off = edgerun.InferenceSession(model, providers=["cpu"])
        apart_off = edgerun.InferenceSession(model, basic, providers=["cpu"])
        np.testing.assert_array_equal(off.run(None, {"x": x})[0],
                                      apart_off.run(None, {"x": x})[0])
    _within_a_step_of_onnxruntime(model, fused, saved_path, x_shape, scale)


def _fused_alone(model, op_type, tmp_path) -> tuple:
    """(a CPU session whose graph is one `op_type` node, the optimized model it saved, options
    of the basic level, where nothing fuses)."""
    import edgerun

    so = edgerun.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    fused = edgerun.InferenceSession(model, so, providers=["cpu"])
    assert [(n["op_type"], n["provider"]) for n in fused.explain()["nodes"]] == [(op_type, "cpu")]
    basic = edgerun.SessionOptions()
    basic.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return fused, so.optimized_model_filepath, basic


def _within_a_step_of_onnxruntime(model, fused, saved_path, x_shape, scale) -> None:
    """A fused session's values within one quantization step of onnxruntime's (its float sums
    round differently, so a value near a tie may take the other step), and the optimized
    model it saved, where the pair is spelled out again, onnxruntime's exactly."""
    import onnxruntime as ort

    theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    clean = (rng.standard_normal(x_shape) * 3).astype(np.float32)
    want = theirs.run(None, {"x": clean})[0]
    np.testing.assert_allclose(fused.run(None, {"x": clean})[0], want, rtol=0,
                               atol=scale * 1.001)
    saved = ort.InferenceSession(saved_path, providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(saved.run(None, {"x": clean})[0], want)


def _batch_norm_qdq_model(channels, code, zero_point, scale):
    """BatchNormalization -> QuantizeLinear -> DequantizeLinear (quantize_static's form)."""
    params = [rng.uniform(0.5, 2, channels), rng.standard_normal(channels),
              rng.standard_normal(channels), rng.uniform(0.1, 3, channels)]
    inits = [numpy_helper.from_array(p.astype(np.float32), name)
             for p, name in zip(params, ("gamma", "beta", "mean", "var"))]
    inits.append(numpy_helper.from_array(np.asarray(scale, np.float32), "s"))
    inits.append(numpy_helper.from_array(
        np.asarray(zero_point, helper.tensor_dtype_to_np_dtype(code)), "z"))
    nodes = [helper.make_node("BatchNormalization", ["x", "gamma", "beta", "mean", "var"], ["b"],
                              epsilon=1e-3),
             helper.make_node("QuantizeLinear", ["b", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    return _x_to_y_model(nodes, inits)


@pytest.mark.parametrize("code,zero_point", [(TensorProto.UINT8, 128), (TensorProto.INT8, -3)])
@pytest.mark.parametrize("x_shape", [(1, 8, 5, 7), (3, 16, 40, 48), (1, 4, 33)])
def test_batch_norm_then_quantize_dequantize_fuses_into_its_pass(x_shape, code, zero_point,
                                                                tmp_path, monkeypatch):
    """BatchNormalization -> QDQ pair becomes one FusedBatchNormalization with the pair as its
    activation, rounded in the native affine pass (small tensors too, where BN alone keeps
    numpy's passes): the unfused graph's values bit for bit, on a strided feed, with NaN and
    infinities, and without the native library; within one step of onnxruntime; saved, the
    BatchNormalization and the pair are spelled out again and onnxruntime reads them."""

    import edgerun
    from edgerun.providers.cpu.native import conv as native_conv

    scale = 0.03125
    model = _batch_norm_qdq_model(x_shape[1], code, zero_point, scale)
    fused, saved_path, basic = _fused_alone(model, "FusedBatchNormalization", tmp_path)
    x = (rng.standard_normal(x_shape) * 3).astype(np.float32)
    x.flat[:3] = [np.nan, np.inf, -np.inf]
    for native in (True, False):
        with monkeypatch.context() as m:
            if not native:
                m.setattr(native_conv, "available", lambda: False)
            mine = fused if native else edgerun.InferenceSession(model, providers=["cpu"])
            apart = edgerun.InferenceSession(model, basic, providers=["cpu"])
            for feed in (x, np.repeat(x, 2, axis=-1)[..., ::2]):
                got, want = mine.run(None, {"x": feed})[0], apart.run(None, {"x": feed})[0]
                np.testing.assert_array_equal(got, want, err_msg=f"native {native}")
                np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    _within_a_step_of_onnxruntime(model, fused, saved_path, x_shape, scale)


# ---- LeakyRelu as max(x, alpha * x): alone and as a fused Conv/Gemm epilogue -----------------

@pytest.mark.parametrize("alpha", [0.01, 0.1, 1.0, 1.5, 0.0, -0.2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_leaky_relu_matches_onnxruntime_bit_for_bit(alpha, dtype):
    """LeakyRelu by max (alpha <= 1) or min (alpha > 1) of x and alpha * x, and the general
    formula for alpha <= 0: onnxruntime's values and signs of zero, with NaN, infinities and
    -0.0, on a strided view and at batch 1; and the same activation fused after a Gemm."""
    x = (rng.standard_normal((3, 34)) * 4).astype(dtype)
    x[0, :6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, -1e-30]
    code = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    for feed in (x, x[:, ::2], x[:1]):
        want = _onnxruntime_node("LeakyRelu", {"x": np.ascontiguousarray(feed)}, opset=16,
                                 out_type=code, alpha=alpha)
        got = _kernel("LeakyRelu", 16)(feed, alpha=float(np.float32(alpha)))   # as stored
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        if not (alpha == 0 and dtype == np.float64):   # onnxruntime's double kernel adds
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))   # 0 * x: +0.0
    w = np.eye(34, dtype=np.float32)               # the product keeps x's values exactly
    nodes = [helper.make_node("Gemm", ["a", "w"], ["g"]),
             helper.make_node("LeakyRelu", ["g"], ["y"], alpha=alpha)]
    mine, theirs = _session_pair(nodes, [helper.make_tensor_value_info(
        "a", TensorProto.FLOAT, [None, 34])], [numpy_helper.from_array(w, "w")],
        TensorProto.FLOAT)
    if 0 < alpha:
        assert [n["op_type"] for n in mine.explain()["nodes"]] == ["FusedGemm"]
    a = np.nan_to_num(x.astype(np.float32), nan=1.0, posinf=3.0, neginf=-3.0)
    got, want = mine.run(None, {"a": a})[0], theirs.run(None, {"a": a})[0]
    np.testing.assert_array_equal(got, want)


def test_two_class_svm_coupling_on_scalars_equals_the_vectorised_code():
    """A few rows of a two-class SVC's probability coupling run on float32 scalars: the
    same bits as the vectorised iteration, over the whole range and near 0 and 1 (the
    Platt-scaled probabilities are clipped to [1e-7, 1 - 1e-7])."""
    from edgerun.providers.cpu.ops import ml

    values = np.concatenate([rng.random(3000), rng.random(300) * 1e-6,
                             1 - rng.random(300) * 1e-6, [0.5]]).astype(np.float32)
    values = np.clip(values, np.float32(1e-7), np.float32(1 - 1e-7))
    p = values.reshape(-1, 1)                                   # P(class 0 over class 1)
    vectorised = ml._couple_probabilities(p, 2)                 # more rows than the limit
    assert p.shape[0] > ml._SCALAR_COUPLING_ROWS
    for start in range(0, values.size, ml._SCALAR_COUPLING_ROWS):
        rows = p[start:start + ml._SCALAR_COUPLING_ROWS]
        np.testing.assert_array_equal(ml._couple_probabilities(rows, 2),
                                      vectorised[start:start + ml._SCALAR_COUPLING_ROWS])


def _binary_tree_classifier(weighted_classes, base_values, weight_sign, transform, seed):
    """A two-class TreeEnsembleClassifier of depth-2 trees over 4 features whose leaves
    carry weights for `weighted_classes` (onnxruntime's two-class cases differ by which
    classes carry weights, how many base values there are and the weights' signs)."""
    r = np.random.default_rng(seed)
    attrs: dict = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids",
                                   "nodes_modes", "nodes_values", "nodes_truenodeids",
                                   "nodes_falsenodeids", "class_treeids", "class_nodeids",
                                   "class_ids", "class_weights")}
    for tree in range(3):
        for node, (mode, true, false) in enumerate([("BRANCH_LEQ", 1, 2), ("BRANCH_LT", 3, 4),
                                                     ("BRANCH_LEQ", 5, 6)] + [("LEAF", 0, 0)] * 4):
            attrs["nodes_treeids"].append(tree)
            attrs["nodes_nodeids"].append(node)
            attrs["nodes_featureids"].append(int(r.integers(4)))
            attrs["nodes_modes"].append(mode)
            attrs["nodes_values"].append(float(r.standard_normal()) if mode != "LEAF" else 0.0)
            attrs["nodes_truenodeids"].append(true)
            attrs["nodes_falsenodeids"].append(false)
            if mode == "LEAF":
                for c in weighted_classes:
                    magnitude = float(r.random()) / 3
                    attrs["class_treeids"].append(tree)
                    attrs["class_nodeids"].append(node)
                    attrs["class_ids"].append(c)
                    attrs["class_weights"].append(
                        magnitude * (weight_sign if weight_sign else r.choice([-1, 1])))
    if base_values:
        attrs["base_values"] = base_values
    node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "y"], domain="ai.onnx.ml",
                            classlabels_int64s=[0, 1], post_transform=transform, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [None, 4])], [
        helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
        helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 9
    return model.SerializeToString()


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("weighted_classes,base_values,weight_sign", [
    ([1], [], 1), ([1], [], 0), ([0], [], 1), ([0, 1], [], 0), ([1], [0.3], 1),
    ([0], [-0.2], 0), ([0, 1], [0.1], 1), ([1], [0.2, -0.1], 1), ([0], [0.2, -0.1], 0),
    ([0, 1], [0.25, 0.5], 0)])
def test_two_class_tree_ensembles_row_by_row_and_vectorised_match_onnxruntime(
        weighted_classes, base_values, weight_sign, transform):
    """A two-class tree ensemble's scores are read row by row on Python floats up to
    ml._ROWS_ONE_BY_ONE rows and vectorised past it: both match onnxruntime (labels exactly,
    scores to 1e-5), over every case of weighted classes, base values and weight signs,
    at batch 1, at the limit and past it, and on a strided feed."""
    import onnxruntime as ort

    import edgerun
    from edgerun.providers.cpu.ops import ml

    data = _binary_tree_classifier(weighted_classes, base_values, weight_sign, transform,
                                   seed=len(weighted_classes) * 7 + len(base_values))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    theirs = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    mine = edgerun.InferenceSession(data, providers=["cpu"])
    x = rng.standard_normal((2 * ml._ROWS_ONE_BY_ONE + 3, 8)).astype(np.float32)
    # one score per row under PROBIT: onnxruntime writes its probit and leaves the second
    # column unwritten (whatever the buffer held); edgerun writes 0 there
    columns = 1 if transform == "PROBIT" and weighted_classes == [0] and len(base_values) < 2 \
        else 2
    feeds = [x[:1, :4], x[:ml._ROWS_ONE_BY_ONE, :4], x[:, :4], x[:, ::2]]
    for feed in feeds:
        want = theirs.run(None, {"x": np.ascontiguousarray(feed)})
        got = mine.run(None, {"x": feed})
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1][:, :columns], want[1][:, :columns], rtol=1e-5,
                                   atol=1e-6)
    vectorised = mine.run(None, {"x": x[:, :4]})
    for start in range(0, x.shape[0], ml._ROWS_ONE_BY_ONE):     # the same bits either way
        rows = mine.run(None, {"x": x[start:start + ml._ROWS_ONE_BY_ONE, :4]})
        np.testing.assert_array_equal(rows[0], vectorised[0][start:start + ml._ROWS_ONE_BY_ONE])
        np.testing.assert_array_equal(rows[1], vectorised[1][start:start + ml._ROWS_ONE_BY_ONE])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_reductions_column_by_column_equal_numpys(dtype):
    """ml._row_reduce folds fewer than 8 columns one by one (numpy's reduce over a short last
    axis runs row by row): the same sums and maxima as numpy's own reduce, on both sides of
    that limit, with NaN and infinities in the rows."""
    from edgerun.providers.cpu.ops import ml

    for columns in range(1, 11):
        s = (rng.standard_normal((50, columns)) * 10).astype(dtype)
        s[0, 0], s[1, -1], s[2, 0] = np.nan, np.inf, -np.inf
        for ufunc in (np.add, np.maximum):
            np.testing.assert_array_equal(ml._row_reduce(ufunc, s),
                                          ufunc.reduce(s, axis=1, keepdims=True))


def test_bound_unary_kernels_equal_the_kernels_called_with_attributes():
    """Plans call a kernel's `bind` result (registry.py: attributes read once per node):
    every unary row's bound kernel gives the very values of the kernel called with keyword
    attributes, on float32 and float64 (the bound fast case), float16 and integers (through
    in_dtype), including NaN, infinities and values past exp's range; and a session's plan
    holds the bound kernel with no attributes left to pass."""
    from edgerun import InferenceSession
    from edgerun.ir.unary_ops import UNARY_OPS
    from edgerun.providers.cpu.ops.unary import HAND_WRITTEN

    rng = np.random.default_rng(3)
    base = np.concatenate([rng.standard_normal(40) * 3, [0.0, -0.0, np.nan, np.inf, -np.inf,
                                                          100.0, -100.0, 0.5, -0.5]])
    for row in UNARY_OPS.values():
        if row.name in HAND_WRITTEN:
            continue
        fn = registry.lookup(row.name, "", 18)
        assert hasattr(fn, "bind"), row.name
        attrs = {name: float(rng.uniform(0.1, 2.0)) for name, _ in row.params}
        ctx = KernelContext(Node(row.name, ["x"], ["y"], attributes={}), 18)
        bound = fn.bind(ctx, attrs)
        dtypes = [np.float32, np.float64, np.float16] + ([np.int32] if row.integers else [])
        for dtype in dtypes:
            x = base.astype(dtype) if dtype != np.int32 else np.round(base[:40]).astype(dtype)
            with np.errstate(all="ignore"):
                want = fn(ctx, x, **attrs)
                got = bound(ctx, x)
            assert got.dtype == want.dtype, (row.name, dtype)
            np.testing.assert_array_equal(got, want, err_msg=f"{row.name} {dtype.__name__}")
    node = helper.make_node("Elu", ["x"], ["y"], alpha=0.3)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                           [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session = InferenceSession(model.SerializeToString(), providers=["cpu"])
    step = session._executor.plan.steps[0]
    assert step.attrs == {} and step.fn is not registry.lookup("Elu", "", 17)
    np.testing.assert_allclose(session.run(None, {"x": np.array([-1, 2], np.float32)})[0],
                               [0.3 * (np.exp(-1) - 1), 2], rtol=1e-6)


def test_bound_gemm_and_fused_gemm_equal_their_kernels():
    """The bound Gemm (float32, A not transposed, alpha = beta = 1: one product and an
    in-place add) and FusedGemm (then the activation in place) give the values of the
    kernels called with keyword attributes, on the fast case and around it: transA/transB,
    alpha and beta, C of every broadcast form or none, float64, float16 and int32 operands,
    batch 1 and more rows, every in-place activation."""
    from edgerun.providers.cpu.ops.fused import IN_PLACE

    rng = np.random.default_rng(12)
    gemm = registry.lookup("Gemm", "", 13)
    fused = registry.lookup("FusedGemm", "com.edgerun", 1)
    assert hasattr(gemm, "bind") and hasattr(fused, "bind")
    for m, k, n in [(1, 7, 5), (3, 16, 9), (40, 33, 20)]:
        for dtype in (np.float32, np.float64, np.float16, np.int32):
            for attrs in ({}, {"transB": 1}, {"transA": 1}, {"alpha": 0.5},
                          {"beta": 2.0, "transB": 1}):
                a = rng.standard_normal((k, m) if attrs.get("transA") else (m, k)) * 3
                b = rng.standard_normal((n, k) if attrs.get("transB") else (k, n)) * 3
                for c in (None, rng.standard_normal(n), rng.standard_normal((m, n)),
                          rng.standard_normal((1, n)), np.array(1.5)):
                    args = [v.astype(dtype) for v in (a, b)] + \
                        ([None] if c is None else [c.astype(dtype)])
                    ctx = KernelContext(Node("Gemm", ["a", "b", "c"], ["y"], attributes={}), 13)
                    case = f"{m}x{k}x{n} {dtype.__name__} {attrs} c={None if c is None else c.shape}"
                    try:
                        want = gemm(ctx, *args, **attrs)
                    except Exception as e:      # (an int32 Gemm with a fractional alpha)
                        with pytest.raises(type(e)):
                            gemm.bind(ctx, attrs)(ctx, *args)
                        continue
                    got = gemm.bind(ctx, attrs)(ctx, *args)
                    assert got.dtype == want.dtype, case
                    np.testing.assert_array_equal(got, want, err_msg=case)
                    if dtype == np.int32:
                        continue
                    for activation in IN_PLACE:
                        if activation == "QuantizeDequantize":
                            continue
                        fused_attrs = dict(attrs, activation=activation, activation_params=[])
                        want = fused(ctx, *args, **fused_attrs)
                        got = fused.bind(ctx, fused_attrs)(ctx, *args)
                        np.testing.assert_array_equal(got, want, err_msg=f"{case} {activation}")
