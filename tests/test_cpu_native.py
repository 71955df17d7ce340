"""The CPU provider's native kernels (cpu_kernels/*.c, providers/cpu/native): the committed
library is the build of the sources and loads here, a stale one is refused by name, and every
native path matches onnxruntime on random shapes that cross the kernels' block sizes (8 rows,
32 columns, K in groups of 4; batch 1, strided and batched operands, every 8-bit type pair and
zero-point form), on each instruction set this CPU has."""
import functools
import importlib.util
import math
import os
import platform
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import ROOT, need
from random_forests import random_tree_regressor
from edgerun import GraphOptimizationLevel, InferenceSession, SessionOptions
from edgerun.providers.cpu.native import library, qgemm

ON_X86_LINUX = library.platform_tag() == "x86_64-linux"


def test_native_library_loads_where_one_is_built():
    if not ON_X86_LINUX:
        pytest.skip(f"no native kernels are built for {platform.machine()} {sys.platform}")
    assert library.library() is not None, library.status()
    assert library.isa() != "none", "this x86_64 CPU has neither AVX2 nor AVX-512 VNNI"


def test_fresh_build_is_identical_to_the_committed_one():
    need(importlib.util.find_spec("ziglang") is not None, "ziglang", "pip install ziglang==0.17.1")
    result = subprocess.run([sys.executable, os.path.join(ROOT, "cpu_kernels", "build.py"),
                             "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_stale_library_is_not_loaded_and_the_warning_names_the_rebuild(tmp_path, monkeypatch):
    if not ON_X86_LINUX:
        pytest.skip("needs the x86_64 Linux library")
    stamp = tmp_path / "edgerun_cpu.json"
    stamp.write_text('{"sources_sha256": "0", "libraries": {"x86_64-linux": {"sha256": "0"}}}')
    monkeypatch.setattr(library, "STAMP_PATH", str(stamp))
    with pytest.warns(RuntimeWarning, match="does not match its stamp.*cpu_kernels/build.py"):
        lib, why = library._load.__wrapped__()
    assert lib is None and "does not match its stamp" in why
    monkeypatch.setenv("EDGERUN_NATIVE", "0")
    assert library._load.__wrapped__() == (None, "off (EDGERUN_NATIVE=0)")


# ---- differential: native products against onnxruntime ----------------------------------

def _isas() -> list:
    if library.isa() == "none":
        return []
    return list(library.ISAS[1:library.ISAS.index(library.isa()) + 1])


RANGES = {np.uint8: (0, 255), np.int8: (-128, 127)}
CODES = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def _case(rng, index: int) -> dict:
    """A random product crossing the block sizes; the first cases pin the edges."""
    edges = [(1, 1, 1), (1, 384, 1536), (3, 5, 7), (8, 32, 32), (9, 33, 65), (17, 1030, 31)]
    m, k, n = edges[index] if index < len(edges) else (
        int(rng.choice([1, 2, 7, 8, 9, 16, 23, 64, 70])), int(rng.choice([1, 3, 4, 5, 63, 516, 777])),
        int(rng.choice([1, 15, 16, 17, 32, 33, 47, 100])))
    a_type, b_type = rng.choice([np.uint8, np.int8]), rng.choice([np.uint8, np.int8])
    batch = [] if rng.random() < 0.6 else [int(rng.integers(1, 3)), int(rng.integers(1, 4))]
    a = rng.integers(*RANGES[a_type], size=batch + [m, k], endpoint=True).astype(a_type)
    b = rng.integers(*RANGES[b_type], size=(k, n), endpoint=True).astype(b_type)
    if rng.random() < 0.3:            # a strided view: every other row of a taller A
        a = np.repeat(a, 2, axis=-2)[..., ::2, :]
    if rng.random() < 0.2:            # columns of a wider B
        b = np.repeat(b, 2, axis=-1)[:, ::2]
    forms = {"none": lambda count, t: None,
             "tensor": lambda count, t: rng.integers(*RANGES[t], endpoint=True, dtype=np.int64).astype(t),
             "vector": lambda count, t: rng.integers(*RANGES[t], size=count, endpoint=True).astype(t)}
    za = forms[rng.choice(["none", "tensor", "vector"])](m, a_type)
    zb = forms[rng.choice(["none", "tensor", "vector"])](n, b_type)
    return {"a": a, "b": b, "za": za, "zb": zb, "b_const": bool(rng.random() < 0.7)}


def _model(case: dict, to_float: bool):
    """MatMulInteger over the case; with `to_float`, followed by Cast, Mul by a per-column
    scale and Add of a bias: quantize_dynamic's form, which the optimizer fuses into
    com.microsoft MatMulIntegerToFloat (B constant)."""
    a, b = case["a"], case["b"]
    inputs = [helper.make_tensor_value_info("a", CODES[a.dtype.type], a.shape)]
    inits, names = [], ["a", "b"]
    if case["b_const"]:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(b), "b"))
    else:
        inputs.append(helper.make_tensor_value_info("b", CODES[b.dtype.type], b.shape))
    for name in ("za", "zb"):
        if case[name] is None:
            names.append("")
        else:
            inits.append(numpy_helper.from_array(np.asarray(case[name]), name))
            names.append(name)
    while names[-1] == "":
        names.pop()
    nodes = [helper.make_node("MatMulInteger", names, ["product"])]
    out_type = TensorProto.INT32
    if to_float:
        scale, bias = _scale_and_bias(b.shape[1])
        inits += [numpy_helper.from_array(scale, "scale"), numpy_helper.from_array(bias, "bias")]
        nodes += [helper.make_node("Cast", ["product"], ["wide"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", ["wide", "scale"], ["scaled"]),
                  helper.make_node("Add", ["scaled", "bias"], ["y"])]
        out_type = TensorProto.FLOAT
    else:
        nodes.append(helper.make_node("Identity", ["product"], ["y"]))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", out_type, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             ir_version=8).SerializeToString()


def _scale_and_bias(n: int) -> tuple:
    return (np.linspace(1e-4, 3e-3, n, dtype=np.float32),
            np.linspace(-1, 1, n, dtype=np.float32))


# onnxruntime's CPU kernels take no per-row zero point of A, nor every type pair
ONNXRUNTIME_LACKS = ("NOT_IMPLEMENTED", "Could not find an implementation",
                     "zero point must be a scalar or 1D tensor of size 1",
                     "Non per-tensor quantization is not supported")


def _exact(case: dict) -> np.ndarray:
    """(A - za) @ (B - zb) in int64, wrapped to int32."""
    a = case["a"].astype(np.int64)
    if case["za"] is not None:
        za = np.asarray(case["za"], np.int64)
        a = a - (za.reshape(-1, 1) if za.ndim else za)
    b = case["b"].astype(np.int64)
    if case["zb"] is not None:
        b = b - np.asarray(case["zb"], np.int64)
    return np.matmul(a, b).astype(np.int32)


def _counting(monkeypatch) -> list:
    """Calls of the native products: qgemm.product, or MatMulIntegerToFloat's bound B."""
    calls = []
    for owner, name in ((qgemm, "product"), (qgemm.ScaledB, "times")):
        original = getattr(owner, name)

        def counted(*args, original=original, **kwargs):
            calls.append(1)
            return original(*args, **kwargs)
        monkeypatch.setattr(owner, name, functools.wraps(original)(counted))
    return calls


def _dynamic_model(m: int, k: int, n: int, b, zb, per_column: bool, bias: bool,
                   strided: bool):
    """quantize_dynamic's form of a float MatMul: DynamicQuantizeLinear(A) -> MatMulInteger
    by constant 8-bit B -> Cast -> Mul(A's scale x B's) [-> Add bias]; with `strided`, A is
    the Transpose (a strided view) of the input."""
    inits = [numpy_helper.from_array(np.ascontiguousarray(b), "b")]
    names = ["q", "b", "qz"]
    if zb is not None:
        inits.append(numpy_helper.from_array(np.asarray(zb), "zb"))
        names.append("zb")
    scale = np.linspace(1e-3, 4e-3, n, dtype=np.float32) if per_column else \
        np.array(2.5e-3, np.float32)
    inits.append(numpy_helper.from_array(scale, "w_scale"))
    nodes = [helper.make_node("Transpose", ["x"], ["a"], perm=[1, 0])] if strided else []
    nodes += [helper.make_node("DynamicQuantizeLinear", ["a" if strided else "x"],
                               ["q", "qs", "qz"]),
              helper.make_node("MatMulInteger", names, ["product"]),
              helper.make_node("Cast", ["product"], ["wide"], to=TensorProto.FLOAT),
              helper.make_node("Mul", ["qs", "w_scale"], ["scale"]),
              helper.make_node("Mul", ["wide", "scale"], ["scaled" if bias else "y"])]
    if bias:
        inits.append(numpy_helper.from_array(np.linspace(-1, 1, n, dtype=np.float32), "bias"))
        nodes.append(helper.make_node("Add", ["scaled", "bias"], ["y"]))
    shape = [k, m] if strided else [m, k]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             ir_version=8).SerializeToString()


@pytest.mark.parametrize("isa", ["none", "avx2", "avx512_vnni"])
def test_dynamic_quantize_matmul_equals_the_unfused_pair_and_onnxruntime(isa, monkeypatch):
    """The optimizer fuses quantize_dynamic's DynamicQuantizeLinear -> MatMulIntegerToFloat
    into com.microsoft DynamicQuantizeMatMul (one native call). On random shapes crossing the
    blocks (batch 1, strided A, K not a multiple of 4, N of 32, per-column scales, 8-bit B of
    either type) it equals the unfused graph (optimizer off) bit for bit, and onnxruntime
    within rtol 1e-5 (its kernels may fuse the scale's multiply-add)."""
    import onnxruntime as ort

    if isa != "none" and isa not in _isas():
        pytest.skip(f"this CPU's native products are {library.isa()}")
    rng = np.random.default_rng(7)
    calls = []
    original = qgemm.ScaledB.times_float
    monkeypatch.setattr(qgemm.ScaledB, "times_float",
                        lambda *args: calls.append(1) or original(*args))
    plain = SessionOptions()
    plain.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    with library.forced(isa):
        for index, (m, k, n) in enumerate([(1, 384, 1536), (1, 3, 1), (9, 33, 65), (16, 384, 384),
                                           (23, 517, 31), (8, 64, 33)]):
            b_type = (np.int8, np.uint8)[index % 2]
            b = rng.integers(*RANGES[b_type], size=(k, n), endpoint=True).astype(b_type)
            zb = [None, np.asarray(3, b_type),
                  rng.integers(0, 9, size=n).astype(b_type)][index % 3]
            model = _dynamic_model(m, k, n, b, zb, per_column=index % 2 == 0, bias=index != 1,
                                   strided=index % 3 == 2)
            x = (rng.standard_normal((k, m) if index % 3 == 2 else (m, k)) * 3).astype(np.float32)
            if index == 3:
                x[0, :5] = 0.0                              # a row with ties at the zero point
            fused = InferenceSession(model, providers=["cpu"])
            assert "DynamicQuantizeMatMul" in {n["op_type"] for n in fused.explain()["nodes"]}
            got = fused.run(None, {"x": x})[0]
            unfused = InferenceSession(model, plain, providers=["cpu"]).run(None, {"x": x})[0]
            np.testing.assert_array_equal(got, unfused, err_msg=f"case {index}")
            want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
                None, {"x": x})[0]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"case {index}")
    assert (len(calls) == 6) if isa != "none" else not calls, calls


@pytest.mark.parametrize("to_float", [False, True], ids=["MatMulInteger", "ToFloat"])
@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
def test_native_integer_products_match_onnxruntime(isa, to_float, monkeypatch):
    """Every case equals the exact product (float outputs: float32 of it times the scale,
    plus the bias, bit for bit); where onnxruntime implements the case, it agrees: exactly
    for int32, rtol 1e-6 for float32 (it may fuse the multiply-add)."""
    import onnxruntime as ort

    if isa not in _isas():
        pytest.skip(f"this CPU's native products are {library.isa()}")
    calls = _counting(monkeypatch)
    rng = np.random.default_rng(2026 + to_float)
    checked = 0
    with library.forced(isa):
        for index in range(40):
            case = _case(rng, index)
            case["b_const"] |= to_float            # the fusion takes a constant B
            model = _model(case, to_float)
            feeds = {"a": case["a"]} if case["b_const"] else {"a": case["a"], "b": case["b"]}
            got = InferenceSession(model, providers=["cpu"]).run(None, feeds)[0]
            exact = _exact(case)
            if to_float:            # float32(product) * scale, then + bias, as the chain
                scale, bias = _scale_and_bias(case["b"].shape[1])
                exact = exact.astype(np.float32) * scale + bias
            np.testing.assert_array_equal(got, exact, err_msg=f"case {index}")
            try:
                want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
                    None, {k: np.ascontiguousarray(v) for k, v in feeds.items()})[0]
            except Exception as e:       # noqa: BLE001 - a form onnxruntime lacks
                if any(known in str(e) for known in ONNXRUNTIME_LACKS):
                    continue
                raise
            assert got.dtype == want.dtype and got.shape == want.shape, (index, case["a"].shape)
            detail = (f"case {index}: A {case['a'].dtype}{list(case['a'].shape)} B "
                      f"{case['b'].dtype}{list(case['b'].shape)} za {case['za']} zb {case['zb']}")
            if to_float:
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=detail)
            else:
                np.testing.assert_array_equal(got, want, err_msg=detail)
            checked += 1
    assert checked >= 20, checked
    assert len(calls) >= checked, "the native product was not taken"


# ---- elementwise kernels: equal to the numpy paths bit for bit, and to onnxruntime ---------

SIZES = [1, 7, 8, 15, 16, 17, 33, 100, 1000, 4099, 6000]


def _floats(rng, size: int, specials: bool) -> np.ndarray:
    x = (rng.standard_normal(size) * rng.choice([0.5, 3.0, 40.0])).astype(np.float32)
    if specials and size > 8:
        spots = rng.choice(size, 8, replace=False)
        x[spots] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 5.656854, -5.656855, 3e38]
    return x


def _one_node(op: str, x: np.ndarray, outputs, opset: int, **attrs) -> bytes:
    node = helper.make_node(op, ["x"], [name for name, _ in outputs], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info(n, t, None) for n, t in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=10).SerializeToString()


@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
def test_native_gelu_is_the_numpy_path_bit_for_bit_and_matches_onnxruntime(isa, monkeypatch):
    """Against the numpy blocks it replaces: equal bits (NaN, infinities, signed zeros and the
    fit's limits included, strided input too). Against onnxruntime's Gelu: abs 1e-6 (its own
    erf approximation)."""
    import onnxruntime as ort

    from edgerun.providers.cpu.native import elementwise
    from edgerun.providers.cpu.ops import erf

    if isa not in _isas():
        pytest.skip(f"this CPU's native kernels are {library.isa()}")
    rng = np.random.default_rng(5)
    with library.forced(isa):
        for size in SIZES:
            x = _floats(rng, size * 2, specials=True)[::2]       # a strided view
            got = erf.gelu_erf(x)
            with monkeypatch.context() as m:
                m.setattr(elementwise, "available", lambda: False)
                want = erf.gelu_erf(x)
            np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32),
                                          err_msg=f"size {size}")
            clean = _floats(rng, size, specials=False).reshape(1, -1)
            model = _one_node("Gelu", clean, [("y", TensorProto.FLOAT)], 20)
            ours = InferenceSession(model, providers=["cpu"]).run(None, {"x": clean})[0]
            theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
                None, {"x": clean})[0]
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6, err_msg=f"size {size}")


@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
def test_native_dynamic_quantize_linear_is_the_numpy_path_and_matches_onnxruntime(isa, monkeypatch):
    """y, scale and zero point: equal to the numpy path (NaN and infinities included) and to
    onnxruntime exactly (finite inputs, all-positive, all-negative and all-zero ones too)."""
    import onnxruntime as ort

    from edgerun.providers.cpu.native import elementwise
    from edgerun.providers.cpu.ops import quantization

    if isa not in _isas():
        pytest.skip(f"this CPU's native kernels are {library.isa()}")
    rng = np.random.default_rng(6)
    outputs = [("y", TensorProto.UINT8), ("scale", TensorProto.FLOAT), ("zero", TensorProto.UINT8)]
    with library.forced(isa):
        for size in SIZES:
            for x in (_floats(rng, size, specials=True), np.abs(_floats(rng, size, False)),
                      -np.abs(_floats(rng, size, False)), np.zeros(size, np.float32)):
                got = quantization.dynamic_quantize_linear(None, x)
                with monkeypatch.context() as m:
                    m.setattr(elementwise, "available", lambda: False)
                    want = quantization.dynamic_quantize_linear(None, x)
                for g, w in zip(got, want):
                    np.testing.assert_array_equal(g, w, err_msg=f"size {size}")
                    assert g.dtype == w.dtype
                if not np.isfinite(x).all():
                    continue
                model = _one_node("DynamicQuantizeLinear", x, outputs, 11)
                ours = InferenceSession(model, providers=["cpu"]).run(None, {"x": x})
                theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
                    None, {"x": x})
                for o, t, (name, _) in zip(ours, theirs, outputs):
                    np.testing.assert_array_equal(o, t, err_msg=f"{name}, size {size}")


@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_native_quantize_kernels_are_the_numpy_paths_and_match_onnxruntime(isa, dtype, monkeypatch):
    """QuantizeLinear, DequantizeLinear and the fused pair with one float32 scale and zero
    point: equal to the numpy paths bit for bit (NaN, infinities, signed zeros, ties and
    saturation included), and QuantizeLinear / DequantizeLinear to onnxruntime exactly."""
    import onnxruntime as ort

    from edgerun.providers.cpu.native import elementwise
    from edgerun.providers.cpu.ops import quantization as qops

    if isa not in _isas():
        pytest.skip(f"this CPU's native kernels are {library.isa()}")
    rng = np.random.default_rng(8)
    low, high = RANGES[dtype]
    code = CODES[dtype]
    with library.forced(isa), np.errstate(over="ignore"):
        for size in SIZES:
            scale = np.array(rng.choice([0.0125, 0.37, 3.0]), np.float32)
            z = None if size % 3 == 0 else np.array(rng.integers(low, high, endpoint=True), dtype)
            x = _floats(rng, size, specials=True)
            x[: size // 2] = np.round(x[: size // 2] / scale * 2) / 2 * scale    # ties
            q8 = rng.integers(low, high, size, endpoint=True).astype(dtype)
            calls = {"quantize": lambda: qops.quantize_linear(None, x, scale, z),
                     "dequantize": lambda: qops.dequantize_linear(None, q8, scale, z),
                     "pair": lambda: qops.quantize_dequantize(None, x, scale, z)}
            for name, call in calls.items():
                got = call()
                with monkeypatch.context() as m:
                    m.setattr(elementwise, "available", lambda: False)
                    want = call()
                assert got.dtype == want.dtype, name
                np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8),
                                              err_msg=f"{name}, size {size}")
            finite = np.nan_to_num(x, nan=0.0, posinf=1e6, neginf=-1e6)
            point = z if z is not None else np.array(0, dtype)       # the output's type
            inits = [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(point, "z")]
            names = ["s", "z"]
            for op, feed, in_type, out_type in [("QuantizeLinear", finite, TensorProto.FLOAT, code),
                                                ("DequantizeLinear", q8, code, TensorProto.FLOAT)]:
                node = helper.make_node(op, ["x"] + names, ["y"])
                graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", in_type, [size])],
                                          [helper.make_tensor_value_info("y", out_type, None)], inits)
                model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                                          ir_version=8).SerializeToString()
                ours = InferenceSession(model, providers=["cpu"]).run(None, {"x": feed})[0]
                theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
                    None, {"x": feed})[0]
                np.testing.assert_array_equal(ours, theirs, err_msg=f"{op}, size {size}")


@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
def test_native_layer_norm_matches_onnxruntime_and_the_numpy_path(isa, monkeypatch):
    """float32 LayerNormalization over trailing axes of sizes crossing the vector widths, with
    and without bias, strided input: within 2e-6 (+ 2e-6 relative) of onnxruntime and of the
    numpy path (the native statistics are summed in double, the numpy ones in float32)."""
    import onnxruntime as ort

    from edgerun.providers.cpu.native import elementwise

    if isa not in _isas():
        pytest.skip(f"this CPU's native kernels are {library.isa()}")
    rng = np.random.default_rng(11)
    calls = []
    original = elementwise.layer_norm
    monkeypatch.setattr(elementwise, "layer_norm", lambda *a: calls.append(1) or original(*a))
    with library.forced(isa):
        for index, depth in enumerate([1, 7, 16, 17, 64, 384, 1000]):
            rows = int(rng.integers(1, 40))
            axis = -1 if index % 3 else -2
            shape = [rows, depth] if axis == -1 else [rows, 3, depth]
            x = (rng.standard_normal([s * (2 if i == 0 else 1) for i, s in enumerate(shape)]) * 4 + 1
                 ).astype(np.float32)[::2]                       # every other row: strided
            trailing = x.shape[axis:]
            scale = rng.standard_normal(trailing).astype(np.float32)
            bias = rng.standard_normal(trailing).astype(np.float32) if index % 2 else None
            names = ["x", "scale"] + (["bias"] if bias is not None else [])
            inits = [numpy_helper.from_array(scale, "scale")] + \
                ([numpy_helper.from_array(bias, "bias")] if bias is not None else [])
            node = helper.make_node("LayerNormalization", names, ["y"], axis=axis, epsilon=1e-5)
            graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                      ir_version=8).SerializeToString()
            taken = len(calls)
            ours = InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
            assert len(calls) > taken, "the native layer norm was not taken"
            with monkeypatch.context() as m:
                m.setattr(elementwise, "available", lambda: False)
                numpy_path = InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
            theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
                None, {"x": np.ascontiguousarray(x)})[0]
            for other, name in ((theirs, "onnxruntime"), (numpy_path, "numpy path")):
                np.testing.assert_allclose(ours, other, rtol=2e-6, atol=2e-6,
                                           err_msg=f"{name}, depth {depth}, axis {axis}")


# ---- tree ensembles: one native call against the numpy path and onnxruntime ---------------

@pytest.mark.parametrize("rows", [1, 3, 8, 9, 64, 517])
@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("modes", [("BRANCH_LEQ",), ("BRANCH_LT",), ("BRANCH_GTE", "BRANCH_LT")])
def test_native_tree_ensemble_is_the_numpy_path_and_matches_onnxruntime(rows, aggregate, double,
                                                                        modes):
    """cpu_kernels/forest.c: the same leaves and the same float64 sums as the numpy path, so
    outputs equal bit for bit; and onnxruntime's within 1e-5. Batch 1 and beyond, NaN inputs,
    values on thresholds, a strided feed, several weights per leaf, double thresholds, base
    values (added in the kernel to the targets some leaf reached). Forests of one comparison
    walk 8 rows in lockstep from 8 rows on (a partial last block at 9 and 517), and below 8
    rows each row through 8 trees in lockstep (12 trees: a partial last group); mixed ones
    row by row."""
    import onnxruntime

    from edgerun.providers.cpu.ops import ml

    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")
    seed = rows * 7 + len(aggregate) + double + len(modes)
    rng = np.random.default_rng(seed)
    model = random_tree_regressor(12, 6, 5, seed, aggregate, targets=3, spread=True,
                                  double=double, modes=modes,
                                  base=aggregate in ("SUM", "AVERAGE")).SerializeToString()
    x = np.round(rng.standard_normal((rows, 10)), 1)[:, ::2]
    x[rng.random(x.shape) < 0.1] = np.nan
    x = x.astype(np.float64 if double else np.float32)
    native = InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
    with ml.forced_tree_method("level"):                  # the numpy path
        numpy_path = InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(native, numpy_path)
    want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"x": np.ascontiguousarray(x)})[0]
    np.testing.assert_allclose(native, want, rtol=1e-5, atol=1e-5)


def test_native_tree_ensemble_errors_name_the_problem():
    """A feed with too few features and a weight whose target is out of range are errors
    that say so, never a read out of bounds."""
    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")
    from onnx import load_from_string

    model = random_tree_regressor(3, 3, 5, seed=3)
    m = load_from_string(model.SerializeToString())
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "F"      # any feature count
    sess = InferenceSession(m.SerializeToString(), providers=["cpu"])
    with pytest.raises(Exception, match=r"reads feature \d+ but the input has 2 features"):
        sess.run(None, {"x": np.zeros((2, 2), np.float32)})
    m = load_from_string(model.SerializeToString())
    for attr in m.graph.node[0].attribute:
        if attr.name == "n_targets":
            attr.i = 1                                   # weights target 0 and 1
    bad = InferenceSession(m.SerializeToString(), providers=["cpu"])
    with pytest.raises(Exception, match=r"outside \[0, 1\)"):
        bad.run(None, {"x": np.zeros((2, 5), np.float32)})


# ---- the common LSTM's and GRU's recurrences in one call ---------------------------------

RECURRENCES = [("LSTM", {}), ("GRU", {"linear_before_reset": 0}),
               ("GRU", {"linear_before_reset": 1})]


@pytest.mark.parametrize("op,attrs", RECURRENCES, ids=["lstm", "gru", "gru_lbr"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("steps,batch,hidden", [(2, 1, 1), (16, 1, 64), (5, 3, 7), (9, 2, 33),
                                                (4, 1, 129), (3, 5, 60)])
def test_native_recurrences_match_onnxruntime_and_the_numpy_path(op, attrs, direction, steps,
                                                                 batch, hidden, monkeypatch):
    """cpu_kernels/recurrent.c against onnxruntime and the numpy path, both within 1e-5 (the
    sums of h R differ in order, and recurrent.c's rational tanh, onnxruntime's MLAS fit, is
    ~1e-7 from numpy's; over 16 steps that reaches ~2e-6): batch 1 and more, hidden sizes that are not multiples of a vector,
    every direction, GRU's both reset forms, with and without bias and initial states, every
    output read; past recurrent.MAX_STEP_MACS the numpy path runs instead."""
    import onnxruntime

    from edgerun.providers.cpu.native import recurrent

    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")
    rng = np.random.default_rng(steps * 100 + hidden)
    dirs, features = 2 if direction == "bidirectional" else 1, 5
    gates = 4 if op == "LSTM" else 3
    outputs = ["y", "yh", "yc"] if op == "LSTM" else ["y", "yh"]
    native_fn = "lstm_f32" if op == "LSTM" else "gru_f32"
    for with_state in (False, True):
        inits = {"w": rng.standard_normal((dirs, gates * hidden, features)) * 0.5,
                 # recurrent weights scaled as trained ones are (1/sqrt(H)): a chaotic
                 # recurrence would amplify any rounding past every tolerance
                 "r": rng.standard_normal((dirs, gates * hidden, hidden)) / np.sqrt(hidden),
                 "b": rng.standard_normal((dirs, 2 * gates * hidden)) * 0.5}
        inputs = ["x", "w", "r", "b"]
        feeds = {"x": rng.standard_normal((steps, batch, features)).astype(np.float32)}
        if with_state:
            inputs += ["", "h0"]
            feeds["h0"] = rng.standard_normal((dirs, batch, hidden)).astype(np.float32)
            if op == "LSTM":
                inputs.append("c0")
                feeds["c0"] = rng.standard_normal((dirs, batch, hidden)).astype(np.float32)
        node = helper.make_node(op, inputs, outputs, hidden_size=hidden, direction=direction,
                                **attrs)
        graph = helper.make_graph(
            [node], "g",
            [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape))
             for k, v in feeds.items()],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
            initializer=[numpy_helper.from_array(v.astype(np.float32), k)
                         for k, v in inits.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                  ir_version=9).SerializeToString()
        calls = []
        real = getattr(recurrent, native_fn)
        monkeypatch.setattr(recurrent, native_fn, lambda *a: calls.append(1) or real(*a))
        native = InferenceSession(model, providers=["cpu"]).run(None, feeds)
        step_macs = batch * gates * hidden * hidden
        assert bool(calls) == (step_macs <= recurrent.MAX_STEP_MACS)
        monkeypatch.setattr(recurrent, "available", lambda: False)
        numpy_path = InferenceSession(model, providers=["cpu"]).run(None, feeds)
        monkeypatch.undo()
        want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
            None, feeds)
        for got, mine, expected in zip(native, numpy_path, want):
            np.testing.assert_allclose(got, mine, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# ---- convolution: the direct depthwise conv and the bias-and-activation epilogue ----------

# activation -> parameter sets to try (FusedConv's activation_params)
NATIVE_ACTIVATIONS = {"Relu": [[]], "LeakyRelu": [[0.01], [1.5]], "Clip": [[0.0, 6.0], [-1, 1]],
                      "HardSigmoid": [[0.2, 0.5], [1 / 6, 0.5]], "HardSwish": [[]]}


@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
def test_native_activations_are_the_numpy_in_place_ones_bit_for_bit(isa):
    """conv.c's epilogue (per-channel bias added first) and its activation alone (HardSwish
    and LeakyRelu nodes) against fused.py's in-place activations they stand in for: equal
    bits, NaN, infinities and signed zeros included."""
    from edgerun.providers.cpu.native import conv as native_conv
    from edgerun.providers.cpu.ops import fused

    if isa not in _isas():
        pytest.skip(f"this CPU's native kernels are {library.isa()}")
    rng = np.random.default_rng(11)
    with library.forced(isa):
        for name, param_sets in NATIVE_ACTIVATIONS.items():
            for params in param_sets:
                for size in SIZES:
                    y = _floats(rng, 3 * size, specials=True).reshape(1, 3, size)
                    bias = rng.standard_normal(3).astype(np.float32)
                    act = native_conv.activation_code(name, params)
                    got = native_conv.bias_activation(y.copy(), bias, act)
                    with np.errstate(all="ignore"):      # the specials overflow and NaN
                        want = fused.IN_PLACE[name](y + bias.reshape(1, 3, 1), params)
                    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32),
                                                  err_msg=f"{name}{params} size {size}")
                    alone = native_conv.activated(y, name, params)    # the op by itself
                    if not native_conv.pass_pays(name, y.size):
                        assert alone is None        # numpy's one or two passes are cheaper
                        continue
                    with np.errstate(all="ignore"):
                        want = fused.IN_PLACE[name](y.copy(), params)
                    np.testing.assert_array_equal(alone.view(np.int32), want.view(np.int32),
                                                  err_msg=f"{name}{params} size {size} alone")
    assert native_conv.activation_code("Sigmoid", []) is None       # applied after instead
    assert native_conv.activation_code("LeakyRelu", [-0.5]) is None


@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
def test_native_swish_is_within_a_few_ulp_of_float64(isa):
    """conv.c's Swish (x * sigmoid(alpha x) with fast_exp: fused_swish's FusedConv epilogue and
    the Swish node alone) against the formula in float64 from alpha x as float32 rounds it:
    within 2e-6 relative (a few ulp),
    NaN where it is NaN, infinities and signed zeros kept, and values where e^(-alpha x)
    passes 2^127 (alpha x below -88: 0, as the float32 formula's overflowing exp gives)
    within |x| e^-88 of 0."""
    from edgerun.providers.cpu.native import conv as native_conv

    if isa not in _isas():
        pytest.skip(f"this CPU's native kernels are {library.isa()}")
    rng = np.random.default_rng(12)
    with library.forced(isa):
        for alpha in (1.0, 1.702, 0.25):
            for size in SIZES:
                with np.errstate(over="ignore"):             # 3e38 * 8: inf
                    y = _floats(rng, 3 * size, specials=True).reshape(1, 3, size) * np.float32(8)
                bias = rng.standard_normal(3).astype(np.float32)
                act = native_conv.activation_code("Swish", [alpha])
                got = native_conv.bias_activation(y.copy(), bias, act)
                alone = native_conv.activated(y, "Swish", [alpha])
                for value, x in ((got, y + bias.reshape(1, 3, 1)), (alone, y)):
                    with np.errstate(all="ignore"):      # alpha x rounded as float32 has it
                        scaled = (x * np.float32(alpha)).astype(np.float64)
                        want = x.astype(np.float64) / (1 + np.exp(-scaled))
                    where = f"alpha {alpha} size {size}"
                    assert np.array_equal(np.isnan(value), np.isnan(want)), where
                    finite = np.isfinite(want)
                    assert np.array_equal(value[~finite & ~np.isnan(want)],
                                          want[~finite & ~np.isnan(want)]), where
                    error = np.abs(value[finite] - want[finite])
                    # |x| e^-88: where fast_exp's 2^n overflows, as the float32 formula's exp
                    bound = 2e-6 * np.abs(want[finite]) + 7e-39 * np.abs(x[finite])
                    assert (error <= bound).all(), (where, value[finite][error > bound],
                                                    want[finite][error > bound])
                    zeros = x == 0
                    assert np.array_equal(np.signbit(value[zeros]), np.signbit(x[zeros]))


# (input shape, multiplier, kernel, strides, dilations, pads or auto_pad): 1-D and 2-D, batch 1
# and 3, rows past conv.c's 64-value chunks and 4096-value row blocks, strides 1-3 (its phase
# planes), dilations, asymmetric and SAME padding, padding wider than a tap's reach, and the
# forms of its sliding rows (below)
DEPTHWISE_CASES = [
    ((1, 16, 112, 112), 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((1, 32, 57, 57), 1, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    ((3, 8, 14, 14), 1, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),
    ((1, 8, 15, 14), 2, (5, 5), (2, 2), (1, 1), (2, 2, 2, 2)),
    ((2, 5, 17, 23), 3, (3, 5), (2, 3), (2, 1), (1, 2, 0, 3)),
    ((1, 4, 9, 70), 1, (7, 7), (3, 3), (1, 1), "SAME_UPPER"),  # (onnxruntime: no dilation)
    ((1, 6, 1, 1), 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((1, 3, 4, 5), 1, (3, 3), (1, 1), (1, 1), (3, 3, 3, 3)),
    ((1, 64, 100), 1, (7,), (1,), (1,), (3, 3)),
    ((3, 5, 31), 3, (4,), (3,), (2,), (0, 1)),
    ((1, 2, 5000), 1, (9,), (2,), (1,), "SAME_LOWER"),
    ((1, 4, 300), 1, (1,), (1,), (1,), (0, 0)),
    # vertical stride and dilation 1, kernels 3/5/7 high (conv.c's dw_rows): output heights
    # 2, 3 and 5 (its 4-row calls and the rest), widths past its 64-value columns,
    # multipliers, horizontal strides and dilations
    ((2, 6, 5, 65), 2, (3, 3), (1, 2), (1, 2), (1, 1, 1, 1)),
    ((1, 3, 7, 130), 1, (7, 7), (1, 1), (1, 1), (3, 3, 3, 3)),
    ((1, 5, 3, 48), 1, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),
    ((1, 4, 2, 17), 1, (5, 3), (1, 1), (1, 1), (2, 1, 2, 1)),
]


@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=lambda c: f"{c[0]}x{c[1]}k{c[2]}s{c[3]}")
def test_native_depthwise_conv_matches_onnxruntime(isa, case, monkeypatch):
    """Depthwise Conv, alone and followed by each activation the optimizer fuses into
    FusedConv, against onnxruntime (1e-4: sums in another order), the input a strided view;
    the native method is the one that ran."""
    shape, multiplier, kernel, strides, dilations, pads = case
    channels = shape[1]
    _check_native_conv(isa, monkeypatch, "depthwise_conv", shape,
                       (channels * multiplier, 1) + kernel, channels, strides, dilations, pads)


# (input shape, output channels, group, kernel, strides, dilations, pads or auto_pad): first
# layers on 1-3 channels, output channels that are not a multiple of conv.c's tiles of 8
# (kernels along one axis with at most 16 per group: _direct_conv_pays),
# groups, rows shorter and longer than a tile's 32 outputs, row blocks (a 4096-value 1-D row),
# strides 1-3, dilations, asymmetric and SAME padding, batch 1 and more
DIRECT_CASES = [
    ((1, 3, 64, 64), 16, 1, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    ((1, 1, 90, 40), 13, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((2, 24, 31, 17), 40, 1, (5, 3), (2, 1), (1, 2), (2, 1, 0, 1)),
    ((1, 32, 14, 14), 32, 4, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((1, 6, 9, 70), 9, 3, (7, 7), (3, 3), (1, 1), "SAME_UPPER"),
    ((3, 5, 8, 7), 7, 1, (2, 2), (1, 1), (1, 1), (0, 0, 1, 1)),
    ((1, 8, 3, 3), 4, 1, (3, 3), (1, 1), (1, 1), (3, 3, 3, 3)),
    ((1, 16, 40, 40), 12, 1, (1, 1), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((1, 64, 100), 16, 1, (5,), (1,), (1,), (2, 2)),
    ((2, 4, 4100), 6, 2, (3,), (2,), (1,), "SAME_LOWER"),    # (onnxruntime: no dilation)
    ((1, 12, 333), 13, 1, (4,), (3,), (1,), (0, 3)),
]


@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
@pytest.mark.parametrize("case", DIRECT_CASES, ids=lambda c: f"{c[0]}m{c[1]}g{c[2]}k{c[3]}s{c[4]}")
def test_native_direct_conv_matches_onnxruntime(isa, case, monkeypatch):
    """conv.c's direct conv (every conv but depthwise and unpadded pointwise ones), alone and
    with each fused activation, against onnxruntime (1e-4)."""
    shape, outputs, group, kernel, strides, dilations, pads = case
    _check_native_conv(isa, monkeypatch, "DirectConv", shape,
                       (outputs, shape[1] // group) + kernel, group, strides, dilations, pads)


def _check_native_conv(isa, monkeypatch, native_name, shape, w_shape, group, strides,
                       dilations, pads):
    """A Conv (with bias) of these shapes, alone and followed by each activation the
    optimizer fuses, on the CPU provider against onnxruntime (1e-4: sums in another order),
    the input a strided view; `native_name` of native/conv.py is what ran."""
    import onnxruntime

    from edgerun.providers.cpu.native import conv as native_conv
    from edgerun.providers.cpu.ops import conv as conv_ops

    if isa not in _isas():
        pytest.skip(f"this CPU's native kernels are {library.isa()}")
    calls = []
    real = getattr(native_conv, native_name)
    monkeypatch.setattr(native_conv, native_name, lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(shape[-1] * 7 + w_shape[0])
    kernel = w_shape[2:]
    w = rng.standard_normal(w_shape) / np.prod(w_shape[1:]) ** 0.5
    bias = rng.standard_normal(w_shape[0]) * 0.1
    window = {"auto_pad": pads} if isinstance(pads, str) else {"pads": list(pads)}
    for activation in [None] + list(NATIVE_ACTIVATIONS) + ["Swish"]:
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if activation else "y"],
                                  group=group, strides=list(strides), kernel_shape=list(kernel),
                                  dilations=list(dilations), **window)]
        inits = [numpy_helper.from_array(w.astype(np.float32), "w"),
                 numpy_helper.from_array(bias.astype(np.float32), "b")]
        if activation == "Clip":
            inits += [numpy_helper.from_array(np.float32(-0.5), "lo"),
                      numpy_helper.from_array(np.float32(0.5), "hi")]
            nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
        elif activation == "Swish":                     # SiLU as exports write it
            nodes += [helper.make_node("Sigmoid", ["c"], ["s"]),
                      helper.make_node("Mul", ["c", "s"], ["y"])]
        elif activation:
            nodes.append(helper.make_node(activation, ["c"], ["y"]))
        graph = helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                  ir_version=9).SerializeToString()
        x = rng.standard_normal(shape[:-1] + (2 * shape[-1],)).astype(np.float32)[..., ::2]
        conv_ops._conv_plan.cache_clear()
        calls.clear()
        with library.forced(isa):
            got = InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
        assert calls, f"{shape} {w_shape}: native {native_name} did not run"
        want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
            None, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{shape} {w_shape} with {activation}")


# (x shape, second operand shape or None for a program/activation-only model): below and
# above the split (2 * MIN_RECORD_VALUES = 131,072 values), batch 1 and 3, per-channel
# operands either way round and of rank 3 or 4
def recorded_splits(monkeypatch) -> list:
    """(kernel, parts) of each parallel.run_split call from now on (the calls still run)."""
    from edgerun.providers.cpu.native import parallel

    calls: list = []
    real = parallel.run_split
    monkeypatch.setattr(parallel, "run_split", lambda kernel, words, parts: calls.append(
        (kernel, parts)) or real(kernel, words, parts))
    return calls


SPLIT_PASS_CASES = [((1, 8, 90, 91), (1, 8, 90, 91)), ((1, 16, 100, 100), (1, 16, 100, 100)),
                    ((1, 24, 80, 70), (1, 24, 1, 1)), ((3, 5, 97, 101), (5, 1, 1)),
                    ((1, 7, 150, 130), "channel first"), ((2, 64, 33, 33), (2, 64, 33, 33))]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("case", SPLIT_PASS_CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_split_elementwise_passes_are_the_one_thread_bits_and_match_onnxruntime(op, case,
                                                                              monkeypatch):
    """Large float32 Add/Sub/Mul/Div (same shapes, or one value per channel on either side),
    then an elementwise program (a scalar chain the optimizer fuses), a HardSwish and a
    Swish (native activation passes) on 2 threads: the same bits as on 1 thread (every value
    is computed alike, only the ranges differ), onnxruntime's within 1e-6 (1e-5 past the
    Swish), and split where large enough; a strided view of x runs too."""
    import onnxruntime

    from edgerun.providers.cpu.native import parallel

    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")
    shape, other = case
    swap = other == "channel first"
    other = (1, shape[1], 1, 1) if swap else other
    inputs = ["y", "x"] if swap and op in ("Add", "Mul") else ["x", "y"]
    nodes = [helper.make_node(op, inputs, ["a"]),
             helper.make_node("Add", ["a", "one"], ["b"]),
             helper.make_node("Mul", ["b", "half"], ["c"]),
             helper.make_node("HardSwish", ["c"], ["d"]),
             helper.make_node("Sigmoid", ["d"], ["s"]),
             helper.make_node("Mul", ["d", "s"], ["z"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape)),
                     helper.make_tensor_value_info("y", TensorProto.FLOAT, list(other))],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("a", "z")],
        [numpy_helper.from_array(np.float32(1.0), "one"),
         numpy_helper.from_array(np.float32(0.5), "half")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              ir_version=9).SerializeToString()
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32) * 4
    y = rng.standard_normal(other).astype(np.float32) + np.float32(2.5)   # no zero divisors
    calls = recorded_splits(monkeypatch)
    results = {}
    for threads in (1, 2):
        so = SessionOptions()
        so.intra_op_num_threads = threads
        results[threads] = InferenceSession(model, so).run(None, {"x": x, "y": y})
        strided = np.repeat(x, 2, axis=-1)[..., ::2]
        np.testing.assert_array_equal(
            InferenceSession(model, so).run(None, {"x": strided, "y": y})[0], results[threads][0])
    for one, two in zip(results[1], results[2]):
        np.testing.assert_array_equal(one.view(np.int32), two.view(np.int32))
    want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "y": y})
    np.testing.assert_allclose(results[2][0], want[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(results[2][1], want[1], rtol=1e-5, atol=1e-5)
    split = x.size >= 2 * parallel.MIN_RECORD_VALUES
    kernels = {kernel for kernel, _ in calls}
    assert ("er_cpu_binary_rows" in kernels) == split, kernels
    assert ("er_cpu_elementwise_program" in kernels) == split, kernels
    assert ("er_cpu_activation" in kernels) == split, kernels


@pytest.mark.parametrize("batch", [1, 2])
def test_a_split_conv_epilogue_is_the_one_thread_bits(batch, monkeypatch):
    """A pointwise conv's bias-and-activation pass (Relu, HardSwish, Swish) splits its
    channels over 2 threads at batch 1 (each part reading its own channels' biases) and
    stays whole above; the same bits as on 1 thread, onnxruntime's within 1e-4."""
    import onnxruntime

    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")
    calls = recorded_splits(monkeypatch)
    rng = np.random.default_rng(batch)
    x = rng.standard_normal((batch, 32, 75, 61)).astype(np.float32)
    inits = [numpy_helper.from_array(rng.standard_normal((48, 32, 1, 1)).astype(np.float32) / 6,
                                     "w"),
             numpy_helper.from_array(rng.standard_normal(48).astype(np.float32), "b")]
    for activation in ("Relu", "HardSwish", "Swish"):
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"])]
        nodes += ([helper.make_node("Sigmoid", ["c"], ["s"]),
                   helper.make_node("Mul", ["c", "s"], ["y"])] if activation == "Swish" else
                  [helper.make_node(activation, ["c"], ["y"])])
        graph = helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                  ir_version=9).SerializeToString()
        got = {}
        for threads in (1, 2):
            so = SessionOptions()
            so.intra_op_num_threads = threads
            calls.clear()
            got[threads] = InferenceSession(model, so).run(None, {"x": x})[0]
        assert any(kernel == "er_cpu_bias_activation" for kernel, _ in calls) == (batch == 1), \
            (activation, calls)
        np.testing.assert_array_equal(got[1].view(np.int32), got[2].view(np.int32))
        want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
            None, {"x": x})[0]
        np.testing.assert_allclose(got[2], want, rtol=1e-4, atol=1e-4, err_msg=activation)


def test_native_threads_split_work_and_give_the_same_bits(monkeypatch):
    """intra_op_num_threads splits a large direct conv's rows (its output channels' blocks
    where the weights outweigh the input: a one-row output, a small map of many channels),
    and a depthwise conv's channels, over threads; every output is computed as on one
    thread, so the results are equal bit for bit. A small conv is not split."""
    from edgerun import SessionOptions
    from edgerun.providers.cpu.native import parallel

    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")
    assert parallel.split(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert parallel.split(2, 4) == [(0, 1), (1, 2)]
    calls = recorded_splits(monkeypatch)
    rng = np.random.default_rng(3)
    for x_shape, w_shape, group in [((1, 32, 96, 96), (32, 32, 3, 3), 1),
                                    ((1, 128, 1, 2000), (16, 128, 1, 5), 1),
                                    ((2, 256, 150, 150), (256, 1, 3, 3), 256),
                                    ((1, 256, 7, 7), (256, 256, 3, 3), 1),
                                    ((1, 8, 8, 8), (8, 8, 3, 3), 1)]:
        conv = helper.make_node("Conv", ["x", "w"], ["y"], group=group, pads=[1, 1, 1, 1]
                                if w_shape[2] == 3 else [0, 2, 0, 2])
        graph = helper.make_graph(
            [conv], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(rng.standard_normal(w_shape).astype(np.float32), "w")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                  ir_version=9).SerializeToString()
        x = rng.standard_normal(x_shape).astype(np.float32)
        results = []
        for threads in (1, 2):
            options = SessionOptions()
            options.intra_op_num_threads = threads
            calls.clear()
            results.append(InferenceSession(model, options, providers=["cpu"]).run(
                None, {"x": x})[0])
            assert max(parts for _, parts in calls) == \
                (1 if threads == 1 or x_shape[1] == 8 else 2), (x_shape, threads, calls)
        np.testing.assert_array_equal(results[0], results[1], err_msg=str(x_shape))
    from edgerun.providers.cpu.native import conv as native_conv
    from edgerun.providers.cpu.ops import pool

    for x_shape, w_shape, channels in [((1, 256, 7, 7), (256, 256, 3, 3), True),
                                       ((1, 32, 96, 96), (32, 32, 3, 3), False)]:
        geometry = pool._geometry(np.empty(x_shape, np.float32), [3, 3], [1, 1], None,
                                  [1, 1, 1, 1], "NOTSET", 0)
        w = np.zeros(w_shape, np.float32)
        direct = native_conv.DirectConv(x_shape, w_shape, 1, geometry, (0, None),
                                        native_conv.pack_direct_weights(w, 1), None)
        assert direct._split_channels(2) == channels, x_shape


def test_split_products_match_numpy_on_random_shapes(monkeypatch):
    """products.matmul (the large products of MatMul, Gemm, convs, attention and recurrent
    projections, split over the run's threads) against np.matmul on random shapes either
    side of the split: 2-D, batched with broadcasting, a few rows (split by columns),
    strided operands and outputs, float32, float64 and mixed; within 1e-5 relative and
    1e-6 x k absolute (each part is one BLAS call, whose blocking and summation order may
    differ from the whole product's: a row of 512 sums gemv's way and gemm's, ~3e-5 apart
    on values ~20; a wrong part is off by the values themselves). float32 products BLAS
    takes as sgemm calls (rows of unit stride, a stack of rows by a matrix, stacks of
    matrices broadcast either side, B either way round, rows longer than k) are split from
    SPLIT_RECORD_MACS as sgemm records on the native pool (a stack's matrices from
    SPLIT_RECORD_MACS each); the others from SPLIT_MACS on the Python threads."""
    from edgerun.providers.cpu.native import parallel, products

    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")
    parts = []
    real_parts, real_split = parallel.run_parts, parallel.run_split
    monkeypatch.setattr(parallel, "run_parts",
                        lambda fn, n: parts.append(("python", n)) or real_parts(fn, n))
    monkeypatch.setattr(parallel, "run_split", lambda kernel, words, n: parts.append(
        ("native", n)) or real_split(kernel, words, n))
    monkeypatch.setattr(parallel, "_blas_pinned", [True])     # as after a run's native parts
    rng = np.random.default_rng(51)
    cases = [((700, 300), (300, 200)), ((3, 300), (300, 30000)), ((64, 64), (64, 64)),
             ((2, 3, 200, 160), (160, 300)), ((4, 1, 150, 200), (1, 5, 200, 180)),
             ((1, 400), (400, 300)), ((64, 40), (40, 3136)), ((3136, 64), (64, 64)),
             ((1, 512), (512, 4096)), ((2, 50, 120), (120, 400)),
             ((1, 96, 96), (3, 1, 96, 600)), ((4, 34, 34), (1, 4, 34, 784)),
             ((3, 1, 64, 90), (1, 90, 500)), ((16, 40, 40), (16, 40, 40))]
    layouts = ["strided a", "contiguous", "b transposed", "rows longer than k"]
    parallel.set_threads(2)
    try:
        for a_shape, b_shape in cases:
            for dtypes in ((np.float32, np.float32), (np.float64, np.float64),
                           (np.float32, np.float64)):
                for layout in layouts:
                    k = a_shape[-1]
                    wide = rng.standard_normal(a_shape[:-1] + (2 * k,)).astype(dtypes[0])
                    a = {"strided a": wide[..., ::2], "rows longer than k": wide[..., :k]}.get(
                        layout, np.ascontiguousarray(wide[..., :k]))
                    b = rng.standard_normal(b_shape).astype(dtypes[1])
                    if layout == "b transposed":
                        b = np.ascontiguousarray(np.swapaxes(b, -1, -2)).swapaxes(-1, -2)
                    want = np.matmul(a, b)
                    parts.clear()
                    got = products.matmul(a, b)
                    case = f"{a_shape} @ {b_shape} {dtypes} {layout}"
                    macs = math.prod(want.shape) * k
                    operands = products._sgemm_operands(a, b, None)
                    calls = 1 if operands is None else len(operands.c_at)
                    native = operands is not None and (
                        calls == 1 or macs // calls >= parallel.SPLIT_RECORD_MACS)
                    expected = macs >= (parallel.SPLIT_RECORD_MACS if native
                                        else parallel.SPLIT_MACS)
                    assert bool(parts) == expected, (case, parts)
                    assert all(kind == ("native" if native else "python")
                               for kind, _ in parts), (case, parts)
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * k, err_msg=case)
                    out = np.zeros(want.shape[:-1] + (2 * want.shape[-1],), want.dtype)
                    products.matmul(a, b, out=out[..., ::2])
                    np.testing.assert_allclose(out[..., ::2], want, rtol=1e-5, atol=1e-6 * k,
                                               err_msg=case)
                    out = np.zeros(want.shape, want.dtype)
                    products.matmul(a, b, out=out)
                    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6 * k, err_msg=case)
        assert products._blas_sgemm() is not None or not ON_X86_LINUX, \
            "numpy's OpenBLAS has no cblas_sgemm threadpoolctl can find"
    finally:
        parallel.set_threads(0)


def test_native_pool_runs_every_part_once_from_any_thread():
    """cpu_kernels/pool.c: runs of 2-40 parts on 2, 3 and 8 threads (more workers than this
    machine's cores) give every part's product once; four Python threads running at once
    (one holds the pool, the others run their parts on their own thread) all get theirs;
    the worst part's code comes back (a forest weight's target out of range, on parts)."""
    import threading

    from edgerun.providers.cpu.native import parallel, products

    if library.isa() == "none" or products._blas_sgemm() is None:
        pytest.skip(f"no native kernels or no cblas_sgemm here: {library.status()}")
    rng = np.random.default_rng(8)
    sgemm, ilp64 = products._blas_sgemm()

    def product_in_parts(a, b, parts, threads):
        """a @ b with each row of a one part."""
        c = np.full((a.shape[0], b.shape[1]), np.nan, np.float32)
        words = [sgemm, int(ilp64), 0, 1, b.shape[1], a.shape[1],
                 [library.address(a) + i * a.strides[0] for i in range(parts)], a.shape[1],
                 library.address(b), b.shape[1],
                 [library.address(c) + i * c.strides[0] for i in range(parts)], b.shape[1]]
        parallel.set_threads(threads)
        try:
            assert parallel.run_split("er_cpu_sgemm", words, parts) == 0
        finally:
            parallel.set_threads(0)
        return c

    for threads in (2, 3, 8):
        for parts in (2, 3, 7, 40):
            a = rng.standard_normal((parts, 33)).astype(np.float32)
            b = rng.standard_normal((33, 17)).astype(np.float32)
            np.testing.assert_allclose(product_in_parts(a, b, parts, threads), a @ b,
                                       rtol=1e-5, atol=1e-5, err_msg=f"{threads} {parts}")
    failures = []

    def hammer(seed: int) -> None:
        local = np.random.default_rng(seed)
        for _ in range(200):
            a = local.standard_normal((5, 9)).astype(np.float32)
            b = local.standard_normal((9, 4)).astype(np.float32)
            if not np.allclose(product_in_parts(a, b, 5, 2), a @ b, rtol=1e-5, atol=1e-5):
                failures.append(seed)
                return

    threads = [threading.Thread(target=hammer, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a run of the native pool hung"
    assert not failures, failures


def test_native_pool_starts_afresh_in_a_forked_child():
    """A child forked after the pool's workers started (they stay behind in the parent) runs
    split work on workers of its own instead of waiting for the parent's."""
    import multiprocessing

    from edgerun.providers.cpu.native import products

    if library.isa() == "none" or products._blas_sgemm() is None or \
            "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs native kernels, cblas_sgemm and fork")
    test_native_pool_runs_every_part_once_from_any_thread()      # workers started here
    assert library.library().er_cpu_pool_workers() > 0
    child = multiprocessing.get_context("fork").Process(
        target=test_native_pool_runs_every_part_once_from_any_thread)
    child.start()
    child.join(timeout=120)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive, "the forked child's pool hung"
    assert child.exitcode == 0


def test_a_threaded_session_sets_blas_to_one_thread_and_leaves_it(monkeypatch):
    """Before the process's first native parts (a large direct conv on two threads), numpy's
    BLAS goes to one thread and stays there (set back after every run, its woken threads
    spun on the cores the next run's parts use), and large products are split on the pool
    from then on; a model with no native parts leaves BLAS's threads alone, and a one-thread
    session sets BLAS to one thread for each run and back."""
    threadpoolctl = pytest.importorskip("threadpoolctl")

    from edgerun import SessionOptions
    from edgerun.providers.cpu.native import parallel

    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")
    monkeypatch.setattr(parallel, "_blas_pinned", [])
    rng = np.random.default_rng(52)
    conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [conv], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 96, 96])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(rng.standard_normal((32, 32, 3, 3)).astype(np.float32), "w")])
    conv_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                   ir_version=9).SerializeToString()
    node = helper.make_node("MatMul", ["x", "b"], ["y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [512, 512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((512, 512), np.float32), "b")])
    matmul_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                     ir_version=9).SerializeToString()
    blas = threadpoolctl.ThreadpoolController().select(user_api="blas")
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        for model, x, threads, after in (
                (matmul_model, np.ones((512, 512), np.float32), 2, 2),
                (conv_model, np.ones((1, 32, 96, 96), np.float32), 1, 2),
                (conv_model, np.ones((1, 32, 96, 96), np.float32), 2, 1),
                (matmul_model, np.ones((512, 512), np.float32), 2, 1)):
            options = SessionOptions()
            options.intra_op_num_threads = threads
            InferenceSession(model, options, providers=["cpu"]).run(None, {"x": x})
            assert [info["num_threads"] for info in blas.info()] == [after] * len(blas.info()), \
                (threads, after)
    assert parallel.blas_pinned()


@pytest.mark.parametrize("batch", [1, 2, 3])
@pytest.mark.parametrize("group", [1, 2])
def test_a_batchs_pointwise_convs_split_as_sgemm_calls_and_match_onnxruntime(batch, group,
                                                                           monkeypatch):
    """On two threads with BLAS pinned (after a run's native parts), a pointwise conv past
    batch 1 is a stack of products, one per image and group: each stack of at least
    SPLIT_RECORD_MACS a call runs as cblas_sgemm records on the native pool (a Python
    thread's part would share its core with the native workers still spinning), and the
    model, a depthwise conv then pointwise convs (a strided one: a view), matches
    onnxruntime within 1e-4 at batch 1, 2 and 3 (3 images on 2 threads: each split in rows)."""
    import onnxruntime as ort

    from edgerun.providers.cpu.native import parallel, products

    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")
    if products._blas_sgemm() is None:
        pytest.skip("numpy's BLAS has no cblas_sgemm threadpoolctl finds (not OpenBLAS)")
    monkeypatch.setattr(parallel, "_blas_pinned", [])
    kernels = recorded_splits(monkeypatch)
    rng = np.random.default_rng(53 + batch)
    c, m, side = 96, 192, 48        # (the depthwise conv: 2M multiply-adds, split in two)
    weights = {"dw": rng.standard_normal((c, 1, 3, 3)) / 3,
               "pw": rng.standard_normal((m, c // group, 1, 1)) / 10,
               "pw2": rng.standard_normal((m, m // group, 1, 1)) / 10}
    nodes = [helper.make_node("Conv", ["x", "dw"], ["d"], group=c, pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["d", "pw"], ["p"], group=group),
             helper.make_node("Relu", ["p"], ["r"]),
             helper.make_node("Conv", ["r", "pw2"], ["y"], group=group, strides=[2, 2])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, c, side, side])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w.astype(np.float32), name) for name, w in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              ir_version=9).SerializeToString()
    x = rng.standard_normal((batch, c, side, side)).astype(np.float32)
    options = SessionOptions()
    options.intra_op_num_threads = 2
    session = InferenceSession(model, options, providers=["cpu"])
    session.run(None, {"x": x})                       # (its native parts pin BLAS)
    kernels.clear()
    got = session.run(None, {"x": x})[0]
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    calls = batch * group
    per_call = m // group * c // group * side * side
    if calls > 1 and per_call >= parallel.SPLIT_RECORD_MACS:
            assert ("er_cpu_sgemm", calls * (2 if calls % 2 else 1)) in kernels, kernels
    assert parallel.blas_pinned()


def test_native_parts_raise_the_first_error():
    from edgerun.providers.cpu.native import parallel

    def fails(i):
        if i == 1:
            raise ValueError("part 1")

    with pytest.raises(ValueError, match="part 1"):
        parallel.run_parts(fails, 3)


# (input shape, kernel, strides, dilations, pads or auto_pad, ceil_mode): 1-D and 2-D, the
# tiles of 2x2 stride 2, overlapping windows, dilation (MaxPool), ceil_mode windows past the
# input, padding on one side, windows of padding alone
POOL_CASES = [
    ((1, 8, 90, 60), (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), 0),
    ((2, 5, 17, 23), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 1),
    ((1, 3, 30, 41), (5, 3), (1, 2), (2, 1), (2, 0, 1, 2), 0),
    ((1, 4, 7, 7), (3, 3), (1, 1), (1, 1), "SAME_UPPER", 0),
    ((3, 6, 100), (4,), (3,), (1,), (1, 2), 1),
    ((1, 2, 5000), (3,), (2,), (2,), (2, 2), 0),
]


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: f"{c[0]}k{c[1]}s{c[2]}")
def test_native_pools_match_onnxruntime(op, case, monkeypatch):
    """MaxPool (no indices) and AveragePool (both count_include_pad forms) through conv.c's
    window loops against onnxruntime (exact for MaxPool, 1e-5 for sums in another order),
    the input a strided view with infinities for MaxPool."""
    import onnxruntime

    from edgerun.providers.cpu.native import conv as native_conv

    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")
    shape, kernel, strides, dilations, pads, ceil_mode = case
    calls = []
    real = native_conv.pool
    monkeypatch.setattr(native_conv, "pool", lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = np.random.default_rng(shape[-1])
    window = {"auto_pad": pads} if isinstance(pads, str) else {"pads": list(pads)}
    variants = [{"dilations": list(dilations)}] if op == "MaxPool" else \
        [{"count_include_pad": 0}, {"count_include_pad": 1}]
    for attrs in variants:
        if op == "AveragePool" and ceil_mode and attrs["count_include_pad"]:
            continue        # onnxruntime's divisor there counts positions past the padding
        node = helper.make_node(op, ["x"], ["y"], kernel_shape=list(kernel),
                                strides=list(strides), ceil_mode=ceil_mode, **window, **attrs)
        graph = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)],
                                  ir_version=9).SerializeToString()
        x = rng.standard_normal(shape[:-1] + (2 * shape[-1],)).astype(np.float32)[..., ::2]
        if op == "MaxPool":
            x[0, 0, ..., :2] = [np.inf, -np.inf]   # (NaN: onnxruntime's max skips it)
        calls.clear()
        got = InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
        assert calls, f"{case}: the native pool did not run"
        want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
            None, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{case} {attrs}")


def _random_pool(rng) -> tuple:
    """(shape, kernel, strides, dilations, pads, ceil_mode) of a random 1-D or 2-D pool:
    kernels 1-4, strides 1-3, dilations 1-2, padding on either side, planes from a few bytes
    to thousands (past conv.c's 64-byte vectors), batch 1 or 2."""
    rank = int(rng.integers(1, 3))
    kernel = [int(rng.integers(1, 5)) for _ in range(rank)]
    size = [int(rng.integers(1, 70 if rank == 2 else 300)) for _ in range(rank)]
    size = [max(s, (k - 1) * 2 + 1) for s, k in zip(size, kernel)]
    pads = [int(rng.integers(0, k)) for k in kernel] * 2
    pads[rank:] = [int(rng.integers(0, k)) for k in kernel]
    return ((int(rng.integers(1, 3)), int(rng.integers(1, 6))) + tuple(size), kernel,
            [int(rng.integers(1, 4)) for _ in range(rank)],
            [int(rng.integers(1, 3)) for _ in range(rank)], pads, int(rng.integers(0, 2)))


@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
def test_native_8bit_max_pool_is_the_numpy_path_and_matches_onnxruntime(isa, monkeypatch):
    """MaxPool of 8-bit codes (a QDQ model's MaxPool, run on its codes) through conv.c's
    8-bit pool: equal to the numpy path on 150 random pools (1-D and 2-D, padding, ceil_mode
    windows past the input, dilation, strides 1-3, uint8 and int8 at their extremes, strided
    inputs), and to onnxruntime on every tenth."""
    import onnxruntime as ort

    from edgerun.providers.cpu.native import conv as native_conv
    from edgerun.providers.cpu.ops import pool

    if isa not in _isas():
        pytest.skip(f"this CPU's native kernels are {library.isa()}")
    calls = []
    real = native_conv.max_pool_8bit
    monkeypatch.setattr(native_conv, "max_pool_8bit",
                        lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(21)
    checked = 0
    with library.forced(isa):
        while checked < 150:
            shape, kernel, strides, dilations, pads, ceil_mode = _random_pool(rng)
            dtype = (np.uint8, np.int8)[checked % 2]
            low, high = RANGES[dtype]
            wide = rng.integers(low, high + 1, shape[:-1] + (2 * shape[-1],)).astype(dtype)
            x = wide[..., ::2] if checked % 3 == 0 else np.ascontiguousarray(wide[..., ::2])
            try:
                geometry = pool._geometry(x, kernel, strides, dilations, pads, "NOTSET",
                                          ceil_mode)
            except ValueError:
                continue
            if min(geometry.out_shape) < 1:
                continue
            calls.clear()
            got = pool._separable_reduce(x, geometry, low, np.maximum)
            with pool.forced_path("axes"):
                want = pool._separable_reduce(x, geometry, low, np.maximum)
            case = f"{shape} {dtype.__name__} k{kernel} s{strides} d{dilations} p{pads} " \
                   f"ceil {ceil_mode}"
            assert calls or pool._reduce_path(x, geometry) == "whole", case
            np.testing.assert_array_equal(got, want, err_msg=case)
            if checked % 10 == 0:
                node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=kernel,
                                        strides=strides, dilations=dilations, pads=pads,
                                        ceil_mode=ceil_mode)
                graph = helper.make_graph(
                    [node], "g", [helper.make_tensor_value_info("x", CODES[dtype], list(shape))],
                    [helper.make_tensor_value_info("y", CODES[dtype], None)])
                model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)],
                                          ir_version=7).SerializeToString()
                ours = InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
                theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
                    None, {"x": np.ascontiguousarray(x)})[0]
                np.testing.assert_array_equal(ours, theirs, err_msg=case)
            checked += 1


@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
def test_native_lookup_table_is_numpys_gather(isa):
    """com.edgerun LookupTable's kernel (with VBMI, 64 bytes a step with a masked tail;
    else a byte at a time) against numpy's table[x], every length from 0 to 200 and a
    large one, every byte value."""
    from edgerun.providers.cpu.native import elementwise

    if isa not in _isas():
        pytest.skip(f"this CPU's native kernels are {library.isa()}")
    rng = np.random.default_rng(22)
    table = rng.permutation(256).astype(np.uint8)
    with library.forced(isa):
        for n in list(range(201)) + [100_003]:
            x = rng.integers(0, 256, n).astype(np.uint8)
            np.testing.assert_array_equal(elementwise.lookup_table(x, table), table[x],
                                          err_msg=f"length {n}")
        every = np.arange(256, dtype=np.uint8)
        np.testing.assert_array_equal(elementwise.lookup_table(every, table), table)


def _svm_classifier_model(rng, kind: str, classes: int, features: int, probabilities: bool):
    """A random SVMClassifier with support vectors (1-6 per class), its kernel's parameters,
    and with `probabilities` Platt's prob_a / prob_b."""
    counts = [int(c) for c in rng.integers(1, 7, classes)]
    total, pairs = sum(counts), classes * (classes - 1) // 2
    attrs = dict(classlabels_ints=list(range(10, 10 + classes)), kernel_type=kind,
                 kernel_params=[float(rng.uniform(0.05, 0.5)), float(rng.uniform(-1, 1)), 3.0],
                 vectors_per_class=counts,
                 support_vectors=rng.standard_normal(total * features).tolist(),
                 coefficients=rng.standard_normal((classes - 1) * total).tolist(),
                 rho=rng.standard_normal(pairs).tolist())
    if probabilities:
        attrs.update(prob_a=rng.uniform(-4, -0.5, pairs).tolist(),
                     prob_b=rng.uniform(-0.5, 0.5, pairs).tolist())
    node = helper.make_node("SVMClassifier", ["x"], ["label", "scores"], domain="ai.onnx.ml",
                            **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, features])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, None),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("ai.onnx.ml", 3)],
                             ir_version=8).SerializeToString()


@pytest.mark.parametrize("kind", ["LINEAR", "POLY", "RBF", "SIGMOID"])
def test_native_svm_classifier_matches_the_numpy_path_and_onnxruntime(kind, monkeypatch):
    """SVMClassifier through cpu_kernels/svm.c (kernels, one-vs-one votes, Platt-scaled
    probabilities and their coupling in one call) against the numpy path and onnxruntime:
    2, 3 and 5 classes, with and without probabilities, batch 1 and the most rows svm.c takes
    (ml._NATIVE_SVM_ROWS; one more runs numpy's), strided inputs. Labels equal; scores within 1e-4 (the kernels' sums run in another
    order than numpy's BLAS, and the coupling stops on a float32 test)."""
    import onnxruntime as ort

    from edgerun.providers.cpu.native import svm as native_svm
    from edgerun.providers.cpu.ops import ml

    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")
    rng = np.random.default_rng(31)
    limit = ml._NATIVE_SVM_ROWS
    calls = []
    real = native_svm.Classifier.classify
    monkeypatch.setattr(native_svm.Classifier, "classify",
                        lambda self, x: calls.append(1) or real(self, x))
    for classes in (2, 3, 5):
        for probabilities in (False, True):
            features = int(rng.integers(2, 9))
            model = _svm_classifier_model(rng, kind, classes, features, probabilities)
            wide = rng.standard_normal((limit + 1, 2 * features)).astype(np.float32)
            inputs = [wide[:1, ::2], wide[:limit, ::2], wide[:limit + 1, ::2]]
            native = InferenceSession(model, providers=["cpu"])
            got = []
            for x in inputs:
                calls.clear()
                got.append(native.run(None, {"x": x}))
                assert bool(calls) == (x.shape[0] <= limit), \
                    f"{kind}, {classes} classes, {x.shape[0]} rows: svm.c ran {len(calls)} times"
            with monkeypatch.context() as numpy_only:
                numpy_only.setattr(native_svm, "classifier", lambda *a: None)
                calls.clear()
                plain = InferenceSession(model, providers=["cpu"])
                want = [plain.run(None, {"x": x}) for x in inputs]
                assert not calls
            theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
            for x, ours, numpy_path in zip(inputs, got, want):
                case = f"{kind}, {classes} classes, probabilities {probabilities}, " \
                       f"{x.shape[0]} rows"
                reference = theirs.run(None, {"x": np.ascontiguousarray(x)})
                for mine in (ours, numpy_path):
                    np.testing.assert_array_equal(mine[0], reference[0], err_msg=case)
                    np.testing.assert_allclose(mine[1], reference[1], rtol=1e-4, atol=1e-5,
                                               err_msg=case)


@pytest.mark.parametrize("step", ["SOFTMAX", "LOGISTIC", "MAX", "L1", "L2"])
def test_native_ml_rows_match_the_numpy_path_and_onnxruntime(step, monkeypatch):
    """cpu_kernels/ml_scores.c's row steps (the ai.onnx.ml SOFTMAX and LOGISTIC transforms,
    Normalizer's MAX, L1 and L2) against the numpy path they stand in for, 1 to 12 columns
    (numpy sums left to right below 8, pairwise from 8), batch 1, the most rows that go
    through a thread's buffers (row_buffers.FEW_ROWS) and many rows, rows of zeros, NaN and
    infinities (the same NaN places); within 2e-6 relative (libm's expf against numpy's;
    LOGISTIC's 1 - e within 2.5e-7 absolute). Normalizer also against onnxruntime."""
    import onnxruntime as ort

    from edgerun.providers.cpu.native import elementwise
    from edgerun.providers.cpu.ops import ml

    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")
    rng = np.random.default_rng(41)
    transforms = {"SOFTMAX": ml._softmax_rows, "LOGISTIC": ml._logistic}
    for columns in range(1, 13):
        for rows in (1, 5, 8, 300):
            x = (rng.standard_normal((rows, 2 * columns)) * 4).astype(np.float32)[:, ::2]
            if rows > 1:
                x[1] = 0
            if rows > 4:
                x[2, 0], x[3, -1], x[4, 0] = np.nan, np.inf, -np.inf
            ours = elementwise.ml_rows(x, step)
            again = elementwise.ml_rows(x[:1] + 1, step)       # the buffers are reused
            assert not np.shares_memory(ours, again)
            with monkeypatch.context() as m, np.errstate(all="ignore"):
                m.setattr(elementwise, "available", lambda: False)
                numpy_path = transforms[step](np.ascontiguousarray(x)) if step in transforms \
                    else ml.normalizer(None, x, norm=step)
            case = f"{step}, {rows} x {columns}"
            # LOGISTIC's negative side is 1 - e: e's last bit is worth 1.2e-7 absolute there
            atol = 2.5e-7 if step == "LOGISTIC" else 1e-7
            np.testing.assert_allclose(ours, numpy_path, rtol=2e-6, atol=atol, err_msg=case)
            if step in transforms or rows in (5, 8):
                continue
            node = helper.make_node("Normalizer", ["x"], ["y"], domain="ai.onnx.ml", norm=step)
            graph = helper.make_graph(
                [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
            model = helper.make_model(graph, opset_imports=[
                helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)],
                ir_version=8).SerializeToString()
            theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
                None, {"x": np.ascontiguousarray(x)})[0]
            got = InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
            np.testing.assert_allclose(got, theirs, rtol=2e-6, atol=1e-7, err_msg=case)


def _linear_model(op: str, rng, features: int, targets: int, transform: str) -> bytes:
    """A random LinearClassifier (int labels 7, 8, ...; as many as targets, or two for one
    target) or LinearRegressor."""
    attrs = dict(coefficients=rng.standard_normal(features * targets).tolist(),
                 intercepts=rng.standard_normal(targets).tolist(), post_transform=transform)
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if op == "LinearClassifier":
        attrs["classlabels_ints"] = list(range(7, 7 + max(targets, 2)))
        outputs.insert(0, helper.make_tensor_value_info("label", TensorProto.INT64, None))
    else:
        attrs["targets"] = targets
    node = helper.make_node(op, ["x"], [o.name for o in outputs], domain="ai.onnx.ml", **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, features])],
        outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("ai.onnx.ml", 3)],
                             ir_version=8).SerializeToString()


@pytest.mark.parametrize("op", ["LinearClassifier", "LinearRegressor"])
@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
def test_native_linear_rows_match_the_numpy_path_and_onnxruntime(op, transform, monkeypatch):
    """cpu_kernels/ml_scores.c er_cpu_linear_rows (float64 products, the top target, the
    transform, in one call) against the numpy path (np.dot, argmax, _post_transform) and
    onnxruntime: 1-5 targets, 1-20 features, batch 1, the most rows a thread's buffers take
    (8), one more and many, strided feeds; rows of NaN and ties against the numpy path
    (argmax's first NaN, first largest). Labels equal; scores within 1e-6 relative of the
    numpy path (the sums' order: numpy's BLAS against a loop), 1e-5 of onnxruntime (float32
    products). Transforms the kernel does not take (SOFTMAX_ZERO, PROBIT) stay numpy's."""
    import onnxruntime as ort

    from edgerun.providers.cpu.native import linear

    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")
    rng = np.random.default_rng(len(op) * 10 + len(transform))
    calls = []
    real = linear.LinearRows.__call__
    monkeypatch.setattr(linear.LinearRows, "__call__",
                        lambda self, v, t: calls.append(1) or real(self, v, t))
    for targets in (1, 2, 3, 5):
        features = int(rng.integers(1, 21))
        model = _linear_model(op, rng, features, targets, transform)
        wide = rng.standard_normal((40, 2 * features)).astype(np.float32)
        inputs = [wide[:1, ::2], wide[:8, ::2], wide[:9, ::2], wide[:, ::2]]
        special = np.ascontiguousarray(wide[:4, ::2])
        special[1] = np.nan
        special[2] = 0                                 # every score the intercept: no tie
        special[3] = special[0]
        calls.clear()
        ours = InferenceSession(model, providers=["cpu"])
        got = [ours.run(None, {"x": x}) for x in inputs + [special]]
        native_expected = transform in linear.TRANSFORMS and \
            (targets > 1 or op == "LinearRegressor")
        assert bool(calls) == native_expected, f"{op} {transform} {targets}: {len(calls)} calls"
        with monkeypatch.context() as numpy_only:
            numpy_only.setattr(linear, "available", lambda: False)
            plain = InferenceSession(model, providers=["cpu"])
            with np.errstate(all="ignore"):
                want = [plain.run(None, {"x": x}) for x in inputs + [special]]
        theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        for i, (x, mine, numpy_path) in enumerate(zip(inputs + [special], got, want)):
            case = f"{op} {transform}, {targets} targets, {features} features, {x.shape[0]} rows"
            for a, b in zip(mine, numpy_path):
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, err_msg=case)
            if i == len(inputs) or (op, transform, targets) == ("LinearClassifier", "PROBIT", 1):
                continue    # (one binary score under PROBIT: both paths differ from onnxruntime)
            reference = theirs.run(None, {"x": np.ascontiguousarray(x)})
            for a, b in zip(mine, reference):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=case)


def test_few_row_buffers_are_each_threads_own():
    """Batch-1 calls of the tree, linear, SVM and Normalizer kernels copy their rows into
    buffers of the calling thread's (row_buffers.py): one session run from four threads at
    once gives each thread the outputs of its own feeds."""
    import threading

    from edgerun.providers.cpu.ops import ml  # noqa: F401  (kernels registered)

    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")
    rng = np.random.default_rng(5)
    models = [random_tree_regressor(12, 6, 5, 3, "SUM", targets=3).SerializeToString(),
              _linear_model("LinearClassifier", rng, 5, 3, "LOGISTIC"),
              _svm_classifier_model(rng, "RBF", 3, 5, True)]
    for model in models:
        session = InferenceSession(model, providers=["cpu"])
        feeds = [rng.standard_normal((1, 5)).astype(np.float32) for _ in range(4)]
        want = [session.run(None, {"x": x}) for x in feeds]
        failures = []

        def hammer(i: int) -> None:
            for _ in range(300):
                got = session.run(None, {"x": feeds[i]})
                for a, b in zip(got, want[i]):
                    if not np.array_equal(a, b):
                        failures.append(i)
                        return

        threads = [threading.Thread(target=hammer, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures, f"threads {sorted(set(failures))} saw another thread's rows"


def test_direct_conv_leaves_batches_of_tiny_outputs_to_one_gemm():
    """The direct conv runs image by image in tiles of 32 outputs: a batch of images whose
    outputs are shorter than a tile (silero v6 over 937 windows: 4 positions each) takes a
    numpy method's one GEMM over the batch instead; a long output or a single image keeps it."""
    from edgerun.ir.conv_rules import window_geometry
    from edgerun.providers.cpu.ops import conv as conv_ops

    if library.isa() == "none":
        pytest.skip(f"no native kernels here: {library.status()}")

    def method(x_shape, w_shape):
        geometry = window_geometry(x_shape[2:], list(w_shape[2:]), [1], [1], [1, 1])
        return conv_ops._choose_method(x_shape, w_shape, 1, geometry, native=True)

    assert method((937, 129, 4), (16, 129, 3)) != "native_direct"
    assert method((937, 129, 40), (16, 129, 3)) == "native_direct"
    assert method((1, 129, 40), (16, 129, 3)) == "native_direct"
    # a kernel along one axis with many output channels: BLAS's per-tap products (taps)
    assert method((1, 129, 40), (128, 129, 3)) != "native_direct"


# ---- integer convolutions (native/qconv.py): im2col + the 8-bit products -------------------

def _integer_conv_case(rng, index: int) -> dict:
    """A random ConvInteger: batch 1-3, 1-D or 2-D windows (one 3-D case, which keeps numpy's
    path), 1-3 groups of 2-20 input channels (a single-channel input too), outputs per group
    crossing the 8-row blocks, positions crossing the 32-column panels, every 8-bit type
    pair, zero points absent, per tensor or per output channel, pads explicit or automatic,
    strides and dilations up to 2, x a strided view in some cases."""
    rank = 3 if index == 5 else int(rng.choice([1, 2, 2]))
    group = int(rng.choice([1, 1, 2, 3]))
    per_group = 1 if index == 7 else int(rng.integers(2, 21))
    group = 1 if per_group == 1 else group
    outputs = group * int(rng.integers(1, 20))
    kernel = [int(rng.integers(1, 4)) for _ in range(rank)]
    strides = [int(rng.integers(1, 3)) for _ in range(rank)]
    dilations = [int(rng.integers(1, 3)) for _ in range(rank)]
    spatial = [int(rng.integers((k - 1) * d + 1, (k - 1) * d + (12 if rank == 3 else 40)))
               for k, d in zip(kernel, dilations)]
    if index % 6 == 0:                                  # a plain pointwise conv
        kernel, strides, dilations = [1] * rank, [1] * rank, [1] * rank
    window = {"auto_pad": str(rng.choice(["SAME_UPPER", "SAME_LOWER", "VALID"]))} \
        if index % 4 == 1 and all(s == 1 for s in strides) else \
        {"pads": [int(p) for p in rng.integers(0, 3, 2 * rank)] if index % 6 else [0] * 2 * rank}
    x_type, w_type = rng.choice([np.uint8, np.int8]), rng.choice([np.uint8, np.int8])
    shape = (int(rng.integers(1, 4)), group * per_group, *spatial)
    low, high = RANGES[x_type]
    x = rng.integers(low, high + 1, shape[:-1] + (2 * shape[-1],)).astype(x_type)
    x = x[..., ::2] if index % 3 == 0 else np.ascontiguousarray(x[..., :shape[-1]])
    low, high = RANGES[w_type]
    w = rng.integers(low, high + 1, (outputs, per_group, *kernel)).astype(w_type)
    zero_form = index % 3
    xz = None if zero_form == 0 else np.array(rng.integers(*RANGES[x_type]), x_type)
    wz = None if zero_form == 0 else np.array(rng.integers(*RANGES[w_type]), w_type) \
        if zero_form == 1 else rng.integers(*RANGES[w_type], outputs).astype(w_type)
    return {"x": x, "w": w, "xz": xz, "wz": wz,
            "attrs": {"group": group, "kernel_shape": kernel, "strides": strides,
                      "dilations": dilations, **window}}


def _integer_conv_model(case: dict) -> bytes:
    types = {np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8}
    inits = [numpy_helper.from_array(case["w"], "w")]
    names = ["x", "w"]
    for name in ("xz", "wz"):
        if case[name] is not None:
            inits.append(numpy_helper.from_array(case[name], name))
            names.append(name)
        elif name == "xz" and case["wz"] is not None:
            names.append("")
    graph = helper.make_graph(
        [helper.make_node("ConvInteger", names, ["y"], **case["attrs"])], "g",
        [helper.make_tensor_value_info("x", types[case["x"].dtype], list(case["x"].shape))],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             ir_version=9).SerializeToString()


@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
def test_native_integer_conv_matches_onnxruntime(isa, monkeypatch):
    """ConvInteger on native/qconv.py (im2col padded with x's zero point, the weights packed
    once, every image and group in one call) equals the exact convolution of the centered
    integers (numpy's float64 im2col path) on 40 random cases, and onnxruntime where it
    implements the form (uint8 x): exactly, int32."""
    import onnxruntime as ort

    from edgerun.providers.cpu.native import qconv
    from edgerun.providers.cpu.ops import quantization

    if isa not in _isas():
        pytest.skip(f"this CPU's native products are {library.isa()}")
    calls = []
    real = qconv.BoundConv.__call__
    monkeypatch.setattr(qconv.BoundConv, "__call__",
                        lambda self, x, z: calls.append(1) or real(self, x, z))
    rng = np.random.default_rng(41)
    compared = 0
    with library.forced(isa):
        for index in range(40):
            case = _integer_conv_case(rng, index)
            x, w, attrs = case["x"], case["w"], case["attrs"]
            got = InferenceSession(_integer_conv_model(case), providers=["cpu"]).run(
                None, {"x": x})[0]
            centered_x = x.astype(np.float64) - (0 if case["xz"] is None else float(case["xz"]))
            wz = 0 if case["wz"] is None else case["wz"].astype(np.float64).reshape(
                (-1,) + (1,) * (w.ndim - 1))
            exact = quantization._conv_exact(
                centered_x, w.astype(np.float64) - wz, attrs["group"], attrs["strides"],
                attrs.get("pads"), attrs["dilations"], attrs.get("auto_pad", "NOTSET"))
            detail = f"case {index}: x {x.dtype}{list(x.shape)} w {w.dtype}{list(w.shape)} {attrs}"
            assert got.dtype == np.int32, detail
            np.testing.assert_array_equal(got, exact.astype(np.int32), err_msg=detail)
            if x.dtype == np.uint8 and (case["wz"] is None or case["wz"].size == 1):
                want = ort.InferenceSession(_integer_conv_model(case),
                                            providers=["CPUExecutionProvider"]).run(
                    None, {"x": np.ascontiguousarray(x)})[0]
                np.testing.assert_array_equal(got, want, err_msg=detail)
                compared += 1
    assert compared >= 10, compared
    assert len(calls) >= 30, "the native integer conv was not taken"


@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
@pytest.mark.parametrize("shape", [(1, 3, 128, 129), (2, 200, 2, 96), (3, 33, 1000), (1, 8, 1, 1)])
def test_native_batch_norm_is_the_numpy_path_and_matches_onnxruntime(isa, shape, monkeypatch):
    """BatchNormalization's one native pass (x * factor + shift per channel) gives numpy's two
    passes bit for bit (a strided input too; tiny inputs keep numpy's path), and so
    onnxruntime's values: factor and shift are computed in its steps (1 / sqrt(var + eps) *
    scale, bias - mean * factor), not in float64 (which left values an ulp off, and in a
    quantized graph the next quantizer a step off)."""
    import onnxruntime as ort

    from edgerun.providers.cpu.native import conv as native_conv

    if isa not in _isas():
        pytest.skip(f"this CPU's native kernels are {library.isa()}")
    rng = np.random.default_rng(shape[1])
    channels = shape[1]
    params = [rng.standard_normal(channels).astype(np.float32) for _ in range(3)]
    params.append((rng.random(channels) + 0.1).astype(np.float32))
    inits = [numpy_helper.from_array(p, n) for p, n in zip(params, "sbmv")]
    graph = helper.make_graph(
        [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)],
                              ir_version=9).SerializeToString()
    x = (rng.standard_normal(shape[:-1] + (2 * shape[-1],)) * 4).astype(np.float32)[..., ::2]
    calls = []
    real = native_conv.channel_affine
    monkeypatch.setattr(native_conv, "channel_affine", lambda *a: calls.append(1) or real(*a))
    with library.forced(isa):
        got = InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
    assert bool(calls) == (x.size >= native_conv.NATIVE_PASS_MIN_VALUES)
    monkeypatch.setattr(native_conv, "available", lambda: False)
    numpy_path = InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, numpy_path)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("isa", ["avx2", "avx512_vnni"])
@pytest.mark.parametrize("shape", [(1, 12, 16, 16), (3, 1000), (4, 5, 17), (64, 5), (1, 1, 300)])
def test_native_softmax_matches_onnxruntime_and_float64(isa, shape, monkeypatch):
    """Softmax along the last axis in one native pass (cpu_kernels/softmax.c, a polynomial
    exp): within 2e-6 relative of float64's softmax and of onnxruntime (and 1e-10 absolute:
    float32's x - max alone is off by up to half an ulp of it), rows holding an
    attention mask (-3.4e38 and -inf), a row of -inf (NaN, as numpy's path), a NaN and
    values near exp's limits included; a strided input; the native pass was what ran."""
    import onnxruntime as ort

    from edgerun.providers.cpu.native import elementwise

    if isa not in _isas():
        pytest.skip(f"this CPU's native kernels are {library.isa()}")
    rng = np.random.default_rng(shape[-1])
    rows = (rng.standard_normal(shape) * 8).astype(np.float32).reshape(-1, shape[-1])
    if rows.shape[0] >= 4 and shape[-1] >= 4:
        rows[0, shape[-1] // 2:] = -3.4e38
        rows[1, -2:] = -np.inf
        rows[2, :] = -np.inf
        rows[3, 0] = np.nan
        rows[-1, :2] = [80.0, -80.0]
    spread = np.zeros(shape[:-1] + (2 * shape[-1],), np.float32)
    spread[..., ::2] = rows.reshape(shape)
    x = spread[..., ::2]                                   # a strided view
    assert not x.flags.c_contiguous
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              ir_version=9).SerializeToString()
    calls = []
    real = elementwise.softmax_rows
    monkeypatch.setattr(elementwise, "softmax_rows", lambda v: calls.append(1) or real(v))
    with library.forced(isa), np.errstate(invalid="ignore", over="ignore"):
        got = InferenceSession(model, providers=["cpu"]).run(None, {"x": x})[0]
        wide = x.astype(np.float64)
        peak = np.max(wide, axis=-1, keepdims=True)
        peak = np.where(np.isfinite(peak), peak, 0)
        e = np.exp(wide - peak)
        exact = e / e.sum(axis=-1, keepdims=True)
    assert calls, "the native softmax did not run"
    np.testing.assert_allclose(got, exact, rtol=2e-6, atol=1e-10, equal_nan=True)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"x": np.ascontiguousarray(x)})[0]
    finite = np.isfinite(want) & np.isfinite(got)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-6, atol=1e-10)
