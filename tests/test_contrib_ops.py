"""onnxruntime's contrib operators (com.microsoft) against onnxruntime's own kernels.

edgerun defines each once as standard nodes (engine/edgerun/optimizer/contrib_ops.py), so
every provider runs them: each case is a one-node com.microsoft model with random inputs,
run by onnxruntime and by edgerun on cpu, wasm and webgpu (each alone: explain() shows no
node elsewhere), at every optimization level for the CPU provider. Tolerances: rtol 1e-4,
atol 1e-5 (float32 reassociation), 2e-4 for MatMulNBits' dot products, one quantization step
for 8-bit outputs (onnxruntime's integer kernels round some values the other way). On WebGPU
the 8-bit and float16 tensors of these models live on the GPU too (one word an element), so
the quantize/dequantize nodes run there as well. GroupQueryAttention's output rows for a
first prompt's right padding are unspecified in onnxruntime (its kernel leaves them to stale
buffer contents), so those rows alone are left out of the comparison (_gqa_compared).
"""
import warnings

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import edgerun
from conftest import need, usable_provider

MS = "com.microsoft"
RTOL, ATOL = 1e-4, 1e-5


def _model(op, inputs: dict, outputs: list, opset=17, domain=MS, **attrs):
    """A one-node com.microsoft model; `inputs` name -> array ('' names or None arrays skip an
    input)."""
    names = [n if v is not None else "" for n, v in inputs.items()]
    while names and not names[-1]:
        names.pop()
    given = {n: v for n, v in inputs.items() if n and v is not None}
    node = helper.make_node(op, names, [o for o, _ in outputs], domain=domain, **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in given.items()],
        [helper.make_tensor_value_info(o, t, None) for o, t in outputs if o])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid(MS, 1)])
    return model.SerializeToString(), given


def _rand(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed + sum(shape)).standard_normal(shape) * scale).astype(
        np.float32)


def _matmul_nbits(n, k, block, bits, zero_points, bias):
    rng = np.random.default_rng(n + k + bits)
    blocks = -(-k // block)
    names = ["a", "b", "scales", "zp", "", "bias"]
    values = [_rand(2, 3, k, seed=bits),
              rng.integers(0, 256, (n, blocks, block * bits // 8), dtype=np.uint8),
              (rng.random(n * blocks) * 0.1 + 0.01).astype(np.float32),
              rng.integers(0, 256, (n, -(-blocks * bits // 8)), dtype=np.uint8)
              if zero_points else None, None, _rand(n, seed=5) if bias else None]
    last = max(i for i, v in enumerate(values) if v is not None)
    node_inputs = [nm if v is not None else "" for nm, v in zip(names, values)][:last + 1]
    node = helper.make_node("MatMulNBits", node_inputs, ["y"], domain=MS, K=k, N=n, bits=bits,
                            block_size=block)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(nm, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for nm, v in zip(names, values) if v is not None],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(MS, 1)])
    return model.SerializeToString(), {nm: v for nm, v in zip(names, values) if v is not None}


def _ints(*shape, low=0, high=2, seed=0, dtype=np.int32):
    return np.random.default_rng(seed + sum(shape)).integers(low, high, shape).astype(dtype)


def _raw_mask(batch, length, seed=0):
    """0/1 int32 [batch, length], each row ending in zeros (padding) and keeping its first key."""
    mask = _ints(batch, length, seed=seed)
    mask[:, 0] = 1
    mask[0, length - 2:] = 0
    return mask


def _attention(batch, seq, hidden, heads, mask=None, *, sizes=None, past=0, bias=True,
               attention_bias=False, present=False, opset=17, **attrs):
    """com.microsoft Attention on input [batch, seq, hidden]; `mask` the mask_index."""
    sizes = sizes or [hidden] * 3
    if sizes != [hidden] * 3:
        attrs["qkv_hidden_sizes"] = sizes
    inputs = {"x": _rand(batch, seq, hidden),
              "w": _rand(hidden, sum(sizes), seed=1, scale=0.3),
              "bias": _rand(sum(sizes), seed=2) if bias else None,
              "mask": mask,
              "past": _rand(2, batch, heads, past, sizes[0] // heads, seed=3) if past else None,
              "attention_bias": _rand(batch, heads, seq, seq + past, seed=4)
              if attention_bias else None}
    return _model("Attention", inputs,
                         [("y", F)] + ([("present", F)] if present else []),
                         opset=opset, num_heads=heads, **attrs)


def _mha(batch, seq, kv_seq, hidden, heads, v_hidden=None, *, bias=True, mask=None,
         attention_bias=False, present=False, **attrs):
    """com.microsoft MultiHeadAttention of query [batch, seq, hidden] and key/value
    [batch, kv_seq, hidden / v_hidden]."""
    v_hidden = v_hidden or hidden
    inputs = {"q": _rand(batch, seq, hidden), "k": _rand(batch, kv_seq, hidden, seed=1),
              "v": _rand(batch, kv_seq, v_hidden, seed=2),
              "bias": _rand(2 * hidden + v_hidden, seed=3) if bias else None,
              "mask": mask,
              "attention_bias": _rand(batch, heads, seq, kv_seq, seed=4) if attention_bias
              else None}
    outputs = [("y", F)] + ([("present_key", F), ("present_value", F)] if present else [])
    return _model("MultiHeadAttention", inputs, outputs, num_heads=heads, **attrs)


def _undeclared(case, only=None):
    """The case with its inputs' shapes (or those of the inputs named in `only`) left out
    (what an expansion cannot read then)."""
    from onnx import load_from_string

    data, feeds = case
    proto = load_from_string(data)
    for v in proto.graph.input:
        if only is None or v.name in only:
            v.type.tensor_type.ClearField("shape")
    return proto.SerializeToString(), feeds


def _caches(rows, width, seed=0):
    """cos_cache and sin_cache [rows, width] of random angles."""
    angles = np.random.default_rng(seed + rows + width).random((rows, width)) * 3
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _rotary(shape, positions, width, opset=17, **attrs):
    """com.microsoft RotaryEmbedding of input `shape` (3-D [B, S, hidden] or 4-D
    [B, N, S, D]) at int64 `positions`, caches of 12 rows of `width`."""
    cos, sin = _caches(12, width)
    return _model("RotaryEmbedding", {"x": _rand(*shape), "positions": np.array(
        positions, np.int64), "cos": cos, "sin": sin}, [("y", F)], opset=opset, **attrs)


def _gqa(batch, seq, past, heads, kv_heads, head_size, seqlens, total, *, rotary=0,
         packed=False, opset=17, **attrs):
    """com.microsoft GroupQueryAttention: query [batch, seq, heads * head_size], key/value
    with kv_heads (packed into query with packed=True), past_key/past_value of `past`
    positions (None when past is None), seqlens_k and total_sequence_length; `rotary` the
    caches' width (do_rotary), 16 rows."""
    q = _rand(batch, seq, heads * head_size)
    k, v = (_rand(batch, seq, kv_heads * head_size, seed=s) for s in (1, 2))
    cos, sin = _caches(16, rotary) if rotary else (None, None)
    if rotary:
        attrs["do_rotary"] = 1
    cache = (lambda s: _rand(batch, kv_heads, past, head_size, seed=s)) if past is not None \
        else (lambda s: None)
    inputs = {"query": np.concatenate([q, k, v], -1) if packed else q,
              "key": None if packed else k, "value": None if packed else v,
              "past_key": cache(3), "past_value": cache(4),
              "seqlens_k": np.array(seqlens, np.int32), "total": np.array(total, np.int32),
              "cos": cos, "sin": sin}
    return _model("GroupQueryAttention", inputs, [("y", F), ("present_key", F),
                                                  ("present_value", F)], opset=opset,
                  num_heads=heads, kv_num_heads=kv_heads, **attrs)


def _gqa_compared(feeds):
    """GroupQueryAttention's output rows of a first prompt's padding (s >= seqlens_k[b] + 1
    when S == total_sequence_length) are unspecified in onnxruntime (its kernel leaves them
    to whatever its buffer held): they are left out of the comparison."""
    seq = feeds["query"].shape[1]
    rows = np.ones((len(feeds["seqlens_k"]), seq, 1), bool)
    if seq == int(feeds["total"]):
        rows = np.arange(seq)[None, :, None] <= feeds["seqlens_k"][:, None, None]
    return [rows, None, None]


def _embed(batch, seq, hidden, *, segments=True, mask=True, position_ids=None, outputs=3,
           opset=17):
    """com.microsoft EmbedLayerNormalization over a vocabulary of 30 and 12 positions."""
    inputs = {"ids": _ints(batch, seq, high=30), "segment_ids": _ints(batch, seq, seed=1)
              if segments else None, "words": _rand(30, hidden), "positions": _rand(
                  12, hidden, seed=1), "segments": _rand(2, hidden, seed=2) if segments else None,
              "gamma": _rand(hidden, seed=3), "beta": _rand(hidden, seed=4),
              "mask": _raw_mask(batch, seq) if mask else None, "position_ids": position_ids}
    names = [("y", F), ("mask_index", TensorProto.INT32), ("embedding_sum", F)][:outputs]
    return _model("EmbedLayerNormalization", inputs, names, opset=opset, epsilon=1e-5)


def _q(*shape, dtype=np.uint8, seed=0, low=None, high=None):
    """Random 8-bit values (the whole range unless low/high say)."""
    info = np.iinfo(dtype)
    low = info.min if low is None else low
    high = info.max if high is None else high
    return np.random.default_rng(seed + 7 * sum(shape)).integers(low, high + 1, shape).astype(
        dtype)


def _s(value):
    return np.array(value, np.float32)


def _qlinear_unary(op, shape, dtype=np.uint8, zero_points=True, **attrs):
    """zero_points=False leaves X's out (onnxruntime aborts without Y's)."""
    zero = np.array(3 if dtype == np.uint8 else -2, dtype)
    return _model(op, {"x": _q(*shape, dtype=dtype), "x_scale": _s(0.05),
                              "x_zero": zero if zero_points else None,
                              "y_scale": _s(0.004 if op == "QLinearSigmoid" else 0.03),
                              "y_zero": np.array(0 if op == "QLinearSigmoid" else 120, np.uint8)
                              .astype(dtype)},
                         [("y", _TYPES[dtype])], **attrs)


def _qlinear_binary(op, a_shape, b_shape, dtype=np.uint8, zero_points=True):
    inputs = {"a": _q(*a_shape, dtype=dtype), "a_scale": _s(0.02),
              "a_zero": _q(dtype=dtype, seed=1, low=0, high=20) if zero_points else None,
              "b": _q(*b_shape, dtype=dtype, seed=2), "b_scale": _s(0.03),
              "b_zero": _q(dtype=dtype, seed=3, low=0, high=20) if zero_points else None,
              "c_scale": _s(0.05 if op == "QLinearAdd" else 0.3),
              "c_zero": _q(dtype=dtype, seed=4, low=0, high=20)}
    return _model(op, inputs, [("c", _TYPES[dtype])])


def _pool(op, shape, dtype=np.uint8, **attrs):
    return _model(op, {"x": _q(*shape, dtype=dtype), "x_scale": _s(0.1),
                       "x_zero": np.array(5, dtype), "y_scale": _s(0.07),
                       "y_zero": np.array(9, dtype)}, [("y", _TYPES[dtype])], **attrs)


def _qlinear_concat():
    inputs = {"y_scale": _s(0.05), "y_zero": np.array(128, np.uint8)}
    for i, (shape, scale, zero) in enumerate([((2, 3, 4), 0.05, 128), ((2, 1, 4), 0.02, 10),
                                              ((2, 2, 4), 0.11, 200)]):
        inputs.update({f"x{i}": _q(*shape, seed=i), f"s{i}": _s(scale),
                       f"z{i}": np.array(zero, np.uint8)})
    return _model("QLinearConcat", inputs, [("y", _TYPES[np.uint8])], axis=1)


def _matmul_integer_to_float(a_shape, n, a_dtype, b_dtype, per_column, bias):
    k = a_shape[-1]
    inputs = {"a": _q(*a_shape, dtype=a_dtype), "b": _q(k, n, dtype=b_dtype, seed=1,
                                                        low=-64 if b_dtype == np.int8 else 0,
                                                        high=63 if b_dtype == np.int8 else 255),
              "a_scale": _s(0.02), "b_scale": (np.linspace(0.01, 0.05, n) if per_column else
                                               np.array(0.03)).astype(np.float32),
              "a_zero": np.array(7, a_dtype),
              "b_zero": (_q(n, dtype=b_dtype, seed=2, low=0, high=9) if per_column
                         else np.array(3, b_dtype)),
              "bias": _rand(n, seed=3) if bias else None}
    return _model("MatMulIntegerToFloat", inputs, [("y", F)])


def _dynamic_quantize_matmul(a_shape, n, b_dtype, per_column, bias, zero_point=True):
    k = a_shape[-1]
    inputs = {"a": _rand(*a_shape, scale=2), "b": _q(k, n, dtype=b_dtype, seed=1,
                                                     low=-64 if b_dtype == np.int8 else 0,
                                                     high=63 if b_dtype == np.int8 else 255),
              "b_scale": (np.linspace(0.01, 0.05, n) if per_column else np.array(0.03)).astype(
                  np.float32),
              "b_zero": (_q(n, dtype=b_dtype, seed=2, low=0, high=9) if per_column
                         else np.array(3, b_dtype)) if zero_point else None,
              "bias": _rand(n, seed=3) if bias else None}
    return _model("DynamicQuantizeMatMul", inputs, [("y", F)])


def _with_constant_weights(case):
    """The case's model with B, its scale, zero point and bias as initializers (the form
    onnxruntime's quantizers and graph optimizer write), feeds left with A alone."""
    from onnx import load_from_string, numpy_helper

    model, feeds = case
    proto = load_from_string(model)
    for name in ("b", "b_scale", "b_zero", "bias"):
        if name in feeds:
            proto.graph.initializer.append(numpy_helper.from_array(feeds.pop(name), name))
            proto.graph.input.remove(next(i for i in proto.graph.input if i.name == name))
    return proto.SerializeToString(), feeds


def _fused_conv(activation, params=None, *, z=False, batch=2, **attrs):
    inputs = {"x": _rand(batch, 4, 7, 6), "w": _rand(6, 2, 3, 3, seed=1, scale=0.5),
              "b": _rand(6, seed=2), "z": _rand(batch, 6, 4, 3, seed=3) if z else None}
    if params is not None:
        attrs["activation_params"] = params
    return _model("FusedConv", inputs, [("y", F)], activation=activation, group=2,
                         strides=[2, 2], pads=[1, 1, 1, 0], **attrs)


def _fused_gemm(activation, *, m=3, **attrs):
    return _model("FusedGemm", {"a": _rand(5, m), "b": _rand(7, 5, seed=1), "c": _rand(7, seed=2)},
                  [("y", F)], activation=activation, transA=1, transB=1, alpha=0.7, beta=1.3,
                  **attrs)


def _nhwc_conv(batch, **attrs):
    return _model("NhwcConv", {"x": _rand(batch, 6, 5, 4), "w": _rand(3, 3, 2, 4, seed=1),
                               "b": _rand(3, seed=2)}, [("y", F)], **attrs)


def _nhwc_conv_reference(feeds, **attrs):
    """onnxruntime's CPU build has no NhwcConv: its standard Conv on channels-first data."""
    x, w = (np.ascontiguousarray(feeds[n].transpose(0, 3, 1, 2)) for n in ("x", "w"))
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, F, None)
                                            for n in ("x", "w", "b")],
                              [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    y = onnxruntime.InferenceSession(model.SerializeToString(),
                                     providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "w": w, "b": feeds["b"]})[0]
    return [y.transpose(0, 2, 3, 1)]


def _float_average_pool_reference(feeds, **attrs):
    """DequantizeLinear -> AveragePool -> QuantizeLinear in onnxruntime: with ceil_mode and
    count_include_pad its QLinearAveragePool divides windows that overhang the padded input
    by the whole kernel, where AveragePool (and PyTorch) divide by the part inside."""
    x = helper.make_tensor_value_info("x", TensorProto.UINT8, None)
    nodes = [helper.make_node("DequantizeLinear", ["x", "x_scale", "x_zero"], ["real"]),
             helper.make_node("AveragePool", ["real"], ["pooled"], **attrs),
             helper.make_node("QuantizeLinear", ["pooled", "y_scale", "y_zero"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x] + [helper.make_tensor_value_info(
        n, helper.np_dtype_to_tensor_dtype(feeds[n].dtype), ()) for n in
        ("x_scale", "x_zero", "y_scale", "y_zero")], [helper.make_tensor_value_info(
            "y", TensorProto.UINT8, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = onnxruntime.SessionOptions()        # else its QDQ fusion makes QLinearAveragePool
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"]).run(None, feeds)


def _gather_block_quantized(indices, blocks, block, *, bits=4, zero_points=False,
                            scale_type=np.float32, code_type=np.uint8):
    """data [10, blocks * block] codes (uint8: two a byte for 4 bits), scales [10, blocks]."""
    rng = np.random.default_rng(blocks + block + bits + zero_points)
    per_byte = 2 if bits == 4 and code_type == np.uint8 else 1
    if code_type == np.uint8:
        data = rng.integers(0, 256, (10, blocks * block // per_byte), dtype=np.uint8)
        zp = rng.integers(0, 256, (10, -(-blocks // per_byte)), dtype=np.uint8)
    else:                                              # ml_dtypes' int4 / uint4
        low, high = (-8, 8) if code_type.__name__ == "int4" else (0, 16)
        data = rng.integers(low, high, (10, blocks * block)).astype(code_type)
        zp = rng.integers(low, high, (10, blocks)).astype(code_type)
    model, feeds = _model("GatherBlockQuantized",
                          {"data": data, "indices": np.array(indices), "scales":
                           (rng.random((10, blocks)) * 0.1 + 0.01).astype(scale_type),
                           "zp": zp if zero_points else None},
                          [("y", helper.np_dtype_to_tensor_dtype(np.dtype(scale_type)))],
                          opset=21, block_size=block, bits=bits)
    if code_type != np.uint8:          # onnxruntime takes no int4 feeds: constants instead
        model = _as_initializers(model, {k: feeds.pop(k) for k in ("data", "zp") if k in feeds})
    return model, feeds


def _as_initializers(model: bytes, values: dict) -> bytes:
    """The model with these graph inputs turned into initializers of the given values."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load_from_string(model)
    kept = [i for i in m.graph.input if i.name not in values]
    del m.graph.input[:]
    m.graph.input.extend(kept)
    m.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in values.items())
    return m.SerializeToString()


_TYPES = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}
F = TensorProto.FLOAT
CASES = {
    "SkipLayerNormalization": lambda: _model(
        "SkipLayerNormalization", {"x": _rand(2, 5, 16), "skip": _rand(2, 5, 16, seed=1),
                                   "gamma": _rand(16, seed=2), "beta": _rand(16, seed=3),
                                   "bias": _rand(16, seed=4)},
        [("y", F), ("", F), ("", F), ("sum", F)], epsilon=1e-5),
    "SkipLayerNormalization_no_beta": lambda: _model(
        "SkipLayerNormalization", {"x": _rand(1, 4, 32), "skip": _rand(1, 4, 32, seed=1),
                                   "gamma": _rand(32, seed=2)}, [("y", F)]),
    "SkipSimplifiedLayerNormalization": lambda: _model(
        "SkipSimplifiedLayerNormalization",
        {"x": _rand(2, 3, 16), "skip": _rand(2, 3, 16, seed=1), "gamma": _rand(16, seed=2),
         "bias": _rand(16, seed=3)}, [("y", F), ("", F), ("", F), ("sum", F)], epsilon=1e-6),
    "SimplifiedLayerNormalization": lambda: _model(
        "SimplifiedLayerNormalization", {"x": _rand(2, 3, 16), "scale": _rand(16, seed=2)},
        [("y", F)], domain="", axis=-1, epsilon=1e-6),     # onnxruntime has it in ai.onnx
    "BiasGelu": lambda: _model("BiasGelu", {"a": _rand(2, 5, 16, scale=2),
                                            "b": _rand(16, seed=1)}, [("y", F)]),
    "FastGelu": lambda: _model("FastGelu", {"x": _rand(2, 5, 16, scale=2),
                                            "bias": _rand(16, seed=1)}, [("y", F)]),
    "Gelu": lambda: _model("Gelu", {"x": _rand(3, 7, scale=3)}, [("y", F)]),
    "QuickGelu": lambda: _model("QuickGelu", {"x": _rand(3, 7, scale=3)}, [("y", F)],
                                alpha=1.5),
    "BiasAdd": lambda: _model("BiasAdd", {"x": _rand(2, 4, 320), "bias": _rand(320, seed=1),
                                          "skip": _rand(2, 4, 320, seed=2)}, [("y", F)]),
    "FusedMatMul": lambda: _model("FusedMatMul", {"a": _rand(2, 3, 4), "b": _rand(2, 5, 4)},
                                  [("y", F)], transB=1, alpha=0.5),
    "FusedMatMul_transA": lambda: _model("FusedMatMul", {"a": _rand(4, 3), "b": _rand(4, 6)},
                                         [("y", F)], transA=1),
    "MatMulNBits_4bit": lambda: _matmul_nbits(24, 64, 32, 4, False, False),
    "MatMulNBits_4bit_zero_points_bias": lambda: _matmul_nbits(20, 80, 32, 4, True, True),
    "MatMulNBits_8bit_zero_points": lambda: _matmul_nbits(12, 48, 16, 8, True, False),
    # Attention (BERT, GPT-2): mask_index in each form onnxruntime's CPU kernel takes
    "Attention": lambda: _attention(2, 5, 16, 4),
    "Attention_batch1_no_bias": lambda: _attention(1, 3, 12, 3, bias=False),
    "Attention_raw_mask": lambda: _attention(2, 7, 12, 2, _raw_mask(2, 7)),
    "Attention_3d_mask": lambda: _attention(2, 5, 8, 2, _ints(2, 5, 5, seed=3) | np.eye(
        5, dtype=np.int32)),
    "Attention_mask_lengths": lambda: _attention(3, 6, 16, 4, np.array([6, 2, 4], np.int32)),
    "Attention_mask_ends_and_starts": lambda: _attention(
        2, 6, 16, 2, np.array([6, 4, 1, 0], np.int32), mask_filter_value=-1000.0),
    "Attention_unidirectional": lambda: _attention(2, 6, 16, 4, _raw_mask(2, 6),
                                                   unidirectional=1),
    "Attention_attention_bias_scale": lambda: _attention(2, 4, 16, 2, attention_bias=True,
                                                         scale=0.3),
    "Attention_qkv_hidden_sizes": lambda: _attention(2, 5, 16, 2, sizes=[8, 8, 12]),
    "Attention_past_present": lambda: _attention(2, 3, 16, 4, past=4, present=True,
                                                 unidirectional=1),
    "Attention_opset13": lambda: _attention(2, 5, 16, 4, np.array([5, 3], np.int32),
                                            opset=13),
    "MultiHeadAttention": lambda: _mha(2, 5, 5, 16, 4),
    "MultiHeadAttention_cross_raw_mask": lambda: _mha(2, 3, 6, 16, 2, 12,
                                                      mask=_raw_mask(2, 6)),
    "MultiHeadAttention_mask_lengths_bias_scale": lambda: _mha(
        3, 4, 4, 12, 3, bias=False, mask=np.array([4, 1, 3], np.int32), attention_bias=True,
        scale=0.5),
    "MultiHeadAttention_unidirectional_present": lambda: _mha(1, 5, 5, 8, 2, present=True,
                                                              unidirectional=1),
    "MultiHeadAttention_undeclared_shapes_v_hidden": lambda: _undeclared(
        _mha(2, 3, 6, 8, 2, 20)),
    # decoder LLMs (onnxruntime-genai, transformers.js)
    "RotaryEmbedding": lambda: _rotary((2, 3, 32), [[1, 4, 2], [0, 11, 3]], 8),
    "RotaryEmbedding_interleaved_offset": lambda: _rotary((2, 3, 32), [2], 8, interleaved=1),
    "RotaryEmbedding_partial_num_heads": lambda: _rotary(
        (2, 3, 32), [[1, 4, 2], [0, 9, 3]], 4, rotary_embedding_dim=8, num_heads=2),
    "RotaryEmbedding_4d_interleaved_partial": lambda: _rotary(
        (2, 2, 3, 16), [[5, 1, 0], [7, 8, 9]], 4, interleaved=1, rotary_embedding_dim=8,
        num_heads=2),
    "RotaryEmbedding_4d_scalar_offset_opset14": lambda: _rotary((1, 3, 4, 16), 6, 8,
                                                                opset=14),
    "RotaryEmbedding_undeclared_positions": lambda: _undeclared(
        _rotary((2, 3, 16), [[0, 1, 2], [3, 4, 5]], 4, interleaved=1, rotary_embedding_dim=8,
                num_heads=2), ["positions"]),
    "RotaryEmbedding_undeclared_offset": lambda: _undeclared(
        _rotary((1, 4, 32), [3], 8), ["positions", "cos", "sin"]),
    "RotaryEmbedding_opset23": lambda: _rotary((2, 3, 32), [[1, 4, 2], [0, 11, 3]], 8,
                                               opset=23),
    "RotaryEmbedding_4d_partial_offset_opset23": lambda: _rotary(
        (1, 2, 3, 16), [4], 4, opset=23, interleaved=1, rotary_embedding_dim=8, num_heads=2),
    "GroupQueryAttention_prompt": lambda: _gqa(1, 5, None, 4, 2, 16, [4], 5),
    "GroupQueryAttention_prompt_right_padding": lambda: _gqa(2, 5, None, 4, 1, 16, [4, 2], 5),
    "GroupQueryAttention_prompt_empty_past": lambda: _gqa(2, 4, 0, 4, 2, 16, [3, 1], 4),
    "GroupQueryAttention_decode": lambda: _gqa(2, 1, 4, 4, 2, 16, [4, 4], 5),
    "GroupQueryAttention_decode_right_padding": lambda: _gqa(2, 1, 4, 4, 2, 16, [4, 2], 5),
    "GroupQueryAttention_decode_max_length_past": lambda: _gqa(2, 1, 8, 4, 2, 16, [4, 2], 5),
    "GroupQueryAttention_subsequent_prompt": lambda: _gqa(1, 3, 4, 4, 2, 16, [6], 7),
    "GroupQueryAttention_local_window": lambda: _gqa(2, 7, None, 4, 2, 16, [6, 4], 7,
                                                     local_window_size=3),
    "GroupQueryAttention_local_window_decode": lambda: _gqa(2, 1, 6, 4, 2, 16, [6, 3], 7,
                                                            local_window_size=2),
    "GroupQueryAttention_softcap_scale": lambda: _gqa(2, 4, None, 4, 2, 16, [3, 2], 4,
                                                      softcap=2.0, scale=0.7),
    "GroupQueryAttention_softcap_decode": lambda: _gqa(1, 1, 3, 4, 1, 16, [3], 4, softcap=1.5),
    "GroupQueryAttention_rotary": lambda: _gqa(2, 4, None, 4, 2, 16, [3, 2], 4, rotary=8),
    "GroupQueryAttention_rotary_interleaved_decode": lambda: _gqa(
        2, 1, 4, 4, 2, 16, [4, 2], 5, rotary=8, rotary_interleaved=1),
    "GroupQueryAttention_rotary_partial": lambda: _gqa(2, 3, None, 4, 2, 32, [2, 1], 3,
                                                       rotary=8),
    "GroupQueryAttention_rotary_partial_interleaved_decode": lambda: _gqa(
        1, 1, 5, 2, 1, 32, [5], 6, rotary=8, rotary_interleaved=1),
    "GroupQueryAttention_packed_qkv": lambda: _gqa(2, 3, None, 4, 2, 16, [2, 1], 3,
                                                   packed=True),
    "GroupQueryAttention_packed_qkv_rotary_decode": lambda: _gqa(
        2, 1, 3, 4, 2, 16, [3, 1], 4, packed=True, rotary=8),
    "GroupQueryAttention_rotary_partial_decode_opset23": lambda: _gqa(
        2, 1, 4, 4, 2, 32, [4, 2], 5, rotary=8, rotary_interleaved=1, opset=23),
    "GroupQueryAttention_heads_equal_opset14": lambda: _gqa(2, 1, 3, 2, 2, 8, [3, 3], 4,
                                                            opset=14),
    "GroupQueryAttention_undeclared_shapes_rotary_partial": lambda: _undeclared(
        _gqa(2, 1, 4, 4, 2, 32, [4, 2], 5, rotary=8)),
    "GroupQueryAttention_undeclared_shapes_rotary_softcap": lambda: _undeclared(
        _gqa(1, 2, None, 2, 1, 16, [1], 2, rotary=8, softcap=3.0)),
    "EmbedLayerNormalization": lambda: _embed(2, 7, 16),
    "EmbedLayerNormalization_batch1_no_segments_no_mask": lambda: _embed(1, 5, 8,
                                                                         segments=False,
                                                                         mask=False),
    "EmbedLayerNormalization_position_ids": lambda: _embed(
        2, 4, 8, position_ids=np.array([[3, 1, 0, 11]], np.int32), outputs=2),
    # quantization: onnxruntime's quantizer writes these
    "QuantizeLinear_per_axis": lambda: _model(
        "QuantizeLinear", {"x": _rand(2, 3, 4, scale=3), "scale": _s([0.02, 0.05, 0.1]),
                           "zero": np.array([0, 128, 250], np.uint8)},
        [("y", TensorProto.UINT8)], axis=1),
    "DequantizeLinear_int8": lambda: _model(
        "DequantizeLinear", {"x": _q(2, 5, dtype=np.int8), "scale": _s(0.1),
                             "zero": np.array(-3, np.int8)}, [("y", F)]),
    "QLinearAdd": lambda: _qlinear_binary("QLinearAdd", (2, 3, 4), (4,)),
    "QLinearMul": lambda: _qlinear_binary("QLinearMul", (1, 3, 5), (3, 1)),
    "QLinearMul_int8": lambda: _qlinear_binary("QLinearMul", (2, 7), (2, 7), np.int8),
    "QLinearSigmoid": lambda: _qlinear_unary("QLinearSigmoid", (2, 3, 5)),
    "QLinearSigmoid_int8": lambda: _qlinear_unary("QLinearSigmoid", (4, 9), np.int8),
    "QLinearLeakyRelu": lambda: _qlinear_unary("QLinearLeakyRelu", (2, 3, 5), alpha=0.2),
    "QLinearLeakyRelu_int8": lambda: _qlinear_unary("QLinearLeakyRelu", (1, 11), np.int8),
    "QLinearLeakyRelu_int8_no_x_zero_point": lambda: _qlinear_unary(
        "QLinearLeakyRelu", (3, 4), np.int8, zero_points=False),
    "QLinearGlobalAveragePool": lambda: _pool("QLinearGlobalAveragePool", (2, 3, 5, 5)),
    "QLinearGlobalAveragePool_channels_last_int8": lambda: _pool(
        "QLinearGlobalAveragePool", (1, 4, 3, 6), np.int8, channels_last=1),
    "QLinearAveragePool": lambda: _pool("QLinearAveragePool", (2, 3, 7, 7), kernel_shape=[3, 3],
                                        strides=[2, 2], pads=[1, 1, 1, 1]),
    "QLinearAveragePool_channels_last_ceil": lambda: _pool(
        "QLinearAveragePool", (1, 6, 5, 3), np.int8, kernel_shape=[2, 2], strides=[2, 2],
        ceil_mode=1, channels_last=1),
    "QLinearAveragePool_channels_last_include_pad": lambda: _pool(
        "QLinearAveragePool", (2, 5, 6, 4), kernel_shape=[3, 2], pads=[1, 0, 1, 1],
        count_include_pad=1, channels_last=1),
    "QLinearAveragePool_ceil_include_pad": lambda: _pool(
        "QLinearAveragePool", (1, 2, 6, 5), kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1,
        count_include_pad=1),
    "QLinearConcat": _qlinear_concat,
    "MatMulIntegerToFloat": lambda: _matmul_integer_to_float((2, 3, 16), 8, np.uint8,
                                                             np.uint8, False, False),
    "MatMulIntegerToFloat_per_column_int8_bias": lambda: _matmul_integer_to_float(
        (5, 33), 7, np.uint8, np.int8, True, True),
    "DynamicQuantizeMatMul": lambda: _dynamic_quantize_matmul((2, 4, 32), 10, np.int8, True,
                                                              True),
    "DynamicQuantizeMatMul_uint8_batch1": lambda: _dynamic_quantize_matmul((1, 3, 17), 5,
                                                                           np.uint8, False,
                                                                           False),
    "DynamicQuantizeMatMul_no_zero_point": lambda: _dynamic_quantize_matmul((3, 40), 6, np.int8,
                                                                            False, True, False),
    # constant weights: the integer kernels' form, kept as MatMulIntegerToFloat
    "MatMulIntegerToFloat_constant_int8_per_column": lambda: _with_constant_weights(
        _matmul_integer_to_float((1, 3, 36), 9, np.uint8, np.int8, True, True)),
    "MatMulIntegerToFloat_constant_uint8_rank1": lambda: _with_constant_weights(
        _matmul_integer_to_float((20,), 5, np.uint8, np.uint8, False, False)),
    "DynamicQuantizeMatMul_constant_int8_per_column": lambda: _with_constant_weights(
        _dynamic_quantize_matmul((2, 5, 48), 12, np.int8, True, True)),
    "DynamicQuantizeMatMul_constant_uint8_batch1": lambda: _with_constant_weights(
        _dynamic_quantize_matmul((1, 1, 17), 3, np.uint8, False, False)),
    "DynamicQuantizeMatMul_constant_no_zero_point": lambda: _with_constant_weights(
        _dynamic_quantize_matmul((4, 64), 8, np.int8, False, True, False)),
    # Conv and Gemm with an activation (onnxruntime's graph optimizer writes them)
    "FusedConv_Relu": lambda: _fused_conv("Relu"),
    "FusedConv_LeakyRelu_Z": lambda: _fused_conv("LeakyRelu", [0.3], z=True),
    "FusedConv_Clip": lambda: _fused_conv("Clip", [-0.5, 1.0], batch=1),
    "FusedConv_HardSigmoid": lambda: _fused_conv("HardSigmoid", [0.3, 0.4]),
    "FusedConv_Sigmoid": lambda: _fused_conv("Sigmoid", batch=1),
    "FusedConv_Tanh": lambda: _fused_conv("Tanh"),
    "FusedGemm_Relu": lambda: _fused_gemm("Relu"),
    "FusedGemm_LeakyRelu": lambda: _fused_gemm("LeakyRelu", activation_alpha=0.2),
    "FusedGemm_LeakyRelu_one_row": lambda: _fused_gemm("LeakyRelu", m=1,
                                                       activation_alpha=0.05),
    "FusedGemm_HardSigmoid": lambda: _fused_gemm("HardSigmoid", activation_alpha=0.3,
                                                 activation_beta=0.6),
    "FusedGemm_Sigmoid": lambda: _fused_gemm("Sigmoid"),
    "FusedGemm_Tanh": lambda: _fused_gemm("Tanh"),
    # 4- and 8-bit embedding tables (Gemma, Phi exports)
    "GatherBlockQuantized_4bit": lambda: _gather_block_quantized([[1, 3], [9, 0]], 2, 16),
    "GatherBlockQuantized_4bit_zero_points": lambda: _gather_block_quantized(
        np.array([7, 2, 2], np.int32), 3, 32, zero_points=True),
    "GatherBlockQuantized_8bit_zero_points": lambda: _gather_block_quantized(
        [5], 2, 16, bits=8, zero_points=True),
    "GatherBlockQuantized_float16": lambda: _gather_block_quantized([4, 8], 2, 32,
                                                                    scale_type=np.float16),
    "GatherBlockQuantized_int4": lambda: _gather_block_quantized(
        [0, 6], 2, 16, zero_points=True, code_type=__import__("ml_dtypes").int4),
    "GatherBlockQuantized_uint4": lambda: _gather_block_quantized(
        [3], 4, 16, code_type=__import__("ml_dtypes").uint4),
    "NhwcConv": lambda: _nhwc_conv(2),
    "NhwcConv_strided_padded": lambda: _nhwc_conv(1, strides=[2, 1], pads=[1, 0, 0, 1],
                                                  kernel_shape=[3, 2]),
}


# onnxruntime's CPU build lacks BiasAdd (CUDA only): its documented formula instead
REFERENCES = {"BiasAdd": lambda f: [f["x"] + f["bias"] + f["skip"]],
              "NhwcConv": _nhwc_conv_reference,
              "QLinearAveragePool_ceil_include_pad": lambda f: _float_average_pool_reference(
                  f, kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, count_include_pad=1),
              "NhwcConv_strided_padded": lambda f: _nhwc_conv_reference(
                  f, strides=[2, 1], pads=[1, 0, 0, 1], kernel_shape=[3, 2])}


def _eight_bit(case, arrays) -> bool:
    """Whether the case computes on 8-bit tensors outside a matrix product (WebGPU tensors
    are float32, int32, int64 or bool, so those nodes stay on the host)."""
    return case.startswith("DequantizeLinear") or any(
        a.dtype in (np.uint8, np.int8) for a in arrays)


def _compared(case, feeds):
    """Per output, where it is compared (None: everywhere)."""
    return _gqa_compared(feeds) if case.startswith("GroupQueryAttention") else None


def _assert_close(case, level, got, want, compared=None):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if compared and compared[i] is not None:
            g, w = (np.where(compared[i], x, 0) for x in (g, w))
        if w.dtype in (np.uint8, np.int8):
            # onnxruntime's integer kernels (MLAS requantization in QLinearAdd/Mul, the pools'
            # integer averages) may round a value one step away from the dequantize -> float
            # op -> quantize edgerun computes: 8-bit outputs may differ by 1
            np.testing.assert_allclose(g.astype(np.int64), w.astype(np.int64), rtol=0, atol=1,
                                       err_msg=f"{case} {level}")
            continue
        atol = 2e-4 if case.startswith("MatMulNBits") else ATOL
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=atol, err_msg=f"{case} {level}")


@pytest.mark.parametrize("provider", ["cpu", "wasm", "webgpu"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_contrib_op_matches_onnxruntime(case, provider):
    model, feeds = CASES[case]()
    if case in REFERENCES:
        want = REFERENCES[case](feeds)
    else:
        want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
            None, feeds)
    levels = ("disabled", "all") if provider == "cpu" else ("all",)
    for level in levels:
        opts = edgerun.SessionOptions()
        opts.graph_optimization_level = getattr(edgerun.GraphOptimizationLevel,
                                                f"ORT_{'DISABLE_ALL' if level == 'disabled' else 'ENABLE_ALL'}")
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)      # a skipped provider fails
            sess = edgerun.InferenceSession(model, opts, providers=[usable_provider(provider)])
        placed = {n["provider"] for n in sess.explain()["nodes"]}
        assert placed == {provider}, placed
        _assert_close(case, level, sess.run(None, feeds), want, _compared(case, feeds))


def test_matmul_nbits_weights_fold_into_one_float_matrix():
    """With the optimizer on, constant 4-bit weights are dequantized once at load: the
    session's graph holds a MatMul of a float initializer and nothing of the unpacking."""
    model, feeds = _matmul_nbits(24, 64, 32, 4, True, False)
    from onnx import numpy_helper, load_from_string
    proto = load_from_string(model)
    for name in ("b", "scales", "zp"):           # the quantized parts become initializers
        value = feeds.pop(name)
        proto.graph.initializer.append(numpy_helper.from_array(value, name))
        proto.graph.input.remove(next(i for i in proto.graph.input if i.name == name))
    data = proto.SerializeToString()
    sess = edgerun.InferenceSession(data, providers=["cpu"])
    assert [n["op_type"] for n in sess.explain()["nodes"]] == ["MatMul"]
    want = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(sess.run(None, feeds)[0], want[0], rtol=RTOL, atol=2e-4)


def _refused(data, match):
    from edgerun.errors import InvalidGraph

    with pytest.raises(InvalidGraph, match=match):
        edgerun.InferenceSession(data, providers=["cpu"])


def _edit_node(data, **attrs):
    """The one-node model with attributes added to its node."""
    from onnx import load_from_string

    proto = load_from_string(data)
    proto.graph.node[0].attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())
    return proto.SerializeToString()


def test_unsupported_forms_are_named():
    model, _ = _model("FusedMatMul", {"a": _rand(2, 3, 4), "b": _rand(2, 4, 5)}, [("y", F)],
                      transBatchA=1)
    _refused(model, "transBatchA")
    _refused(_attention(1, 3, 8, 2, do_rotary=1)[0], "do_rotary")
    _refused(_attention(1, 3, 8, 2, past_present_share_buffer=1)[0], "past_present_share_buffer")
    _refused(_attention(1, 3, 8, 2, np.ones((1, 1, 3, 3), np.int32))[0], "4-D mask")
    _refused(_model("MultiHeadAttention", {"qkv": _rand(1, 3, 2, 3, 4)}, [("y", F)],
                    num_heads=2)[0], "packed QKV")
    _refused(_model("MultiHeadAttention", {"q": _rand(1, 3, 8), "k": _rand(1, 2, 3, 4),
                                           "v": _rand(1, 2, 3, 4)}, [("y", F)],
                    num_heads=2)[0], "4-D 'k'")
    _refused(_fused_conv("Elu")[0], "activation 'Elu'")


def _gqa_with(name, value):
    """A GroupQueryAttention case given one more input (by its schema name)."""
    from onnx import load_from_string, numpy_helper

    order = ["position_ids", "attention_bias", "head_sink", "k_scale", "v_scale",
             "q_norm_weight", "k_norm_weight", "query_seqlens"]
    proto = load_from_string(_gqa(1, 2, None, 2, 1, 16, [1], 2)[0])
    node = proto.graph.node[0]
    while len(node.input) < 9 + order.index(name):
        node.input.append("")
    node.input.append(name)
    proto.graph.initializer.append(numpy_helper.from_array(value, name))
    return proto.SerializeToString()


def test_unsupported_decoder_forms_are_named():
    """GroupQueryAttention and RotaryEmbedding forms the expansions do not compute are refused
    by name when the session loads, not answered wrongly."""
    gqa = _gqa(1, 2, None, 2, 1, 16, [1], 2)[0]
    for attrs, match in (({"smooth_softmax": 1}, "smooth_softmax"),
                         ({"local_window_size": 0}, "local_window_size=0"),
                         ({"causal": 0}, "causal=0"),
                         ({"qk_output": 1}, "output_qk"),
                         ({"sliding_window_cache": 1}, "sliding_window_cache"),
                         ({"k_quant_type": "PER_TENSOR"}, "quantized KV cache"),
                         ({"kv_cache_bit_width": 8}, "quantized KV cache")):
        _refused(_edit_node(gqa, **attrs), match)
    for name, value in (("position_ids", np.zeros((1, 2), np.int64)),
                        ("attention_bias", np.zeros((1, 2, 2, 2), np.float32)),
                        ("head_sink", np.zeros(2, np.float32)),
                        ("q_norm_weight", np.ones(16, np.float32)),
                        ("query_seqlens", np.ones(1, np.int32))):
        _refused(_gqa_with(name, value), name)
    _refused(_model("GroupQueryAttention", {"q": _rand(1, 2, 32), "k": _rand(1, 2, 16)},
                    [("y", F)], num_heads=2, kv_num_heads=1)[0], "only one of key and value")
    _refused(_model("GroupQueryAttention", {"q": _rand(1, 2, 48)}, [("y", F)], num_heads=3,
                    kv_num_heads=2)[0], "kv_num_heads > 0 dividing num_heads")
    _refused(_gqa(1, 2, None, 2, 1, 16, [1], 2, do_rotary=1)[0], "do_rotary without cos_cache")
    _refused(_rotary((1, 2, 16), [0], 8, is_packed_batching=1)[0], "is_packed_batching")
    _refused(_undeclared(_rotary((1, 2, 16), [0], 8), ["x"])[0],
             "input 'x' has an unknown rank")
    _refused(_rotary((1, 2, 16), [0], 4, rotary_embedding_dim=8)[0], "needs num_heads")
    _refused(_opset(_gqa(1, 2, None, 2, 1, 16, [1], 2)[0], 10), "GatherElements.*opset 11")


def test_opset_too_old_for_an_expansion_is_named():
    _refused(_attention(2, 3, 8, 2, np.array([3, 1], np.int32), opset=10)[0],
             "Range for a 1-D mask_index.*opset 11")
    _refused(_attention(1, 3, 8, 2, opset=10, unidirectional=1)[0], "Range.*opset 11")
    _refused(_opset(_dynamic_quantize_matmul((2, 8), 3, np.uint8, False, False)[0], 10),
             "Round.*opset 11")


def _opset(data, version):
    from onnx import load_from_string

    proto = load_from_string(data)
    for o in proto.opset_import:
        if o.domain == "":
            o.version = version
    return proto.SerializeToString()


def test_mask_of_unknown_rank_is_refused_by_name():
    """Attention's mask_index means lengths (1-D) or a raw mask (2-D/3-D): a mask whose rank
    nothing declares cannot be expanded."""
    from onnx import load_from_string

    data, _ = _attention(2, 3, 8, 2, _raw_mask(2, 3))
    proto = load_from_string(data)
    for v in proto.graph.input:
        if v.name == "mask":
            v.type.tensor_type.ClearField("shape")
    _refused(proto.SerializeToString(), "mask 'mask' has an unknown rank")


def test_absent_output_zero_point_keeps_the_input_type():
    """QLinearLeakyRelu on int8 without zero points gives int8 (QuantizeLinear alone would
    give uint8); onnxruntime aborts on this form, so its explicit-zero form is the reference."""
    model, feeds = _qlinear_unary("QLinearLeakyRelu", (3, 4), np.int8, zero_points=False)
    from onnx import load_from_string

    feeds["y_zero"] = np.array(0, np.int8)
    want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, feeds)
    proto = load_from_string(model)
    del proto.graph.node[0].input[4]                       # no Y_zero_point either
    proto.graph.input.remove(next(i for i in proto.graph.input if i.name == "y_zero"))
    feeds.pop("y_zero")
    got = edgerun.InferenceSession(proto.SerializeToString(), providers=["cpu"]).run(None, feeds)
    assert got[0].dtype == np.int8
    np.testing.assert_array_equal(got[0], want[0])


def test_bert_embeddings_into_attention():
    """EmbedLayerNormalization's mask_index (its rank known to the expansion) feeding
    Attention, and a raw attention_mask reaching another Attention through a Cast, as
    onnxruntime's transformer optimizer writes them."""
    hidden, heads = 16, 4
    embed, feeds = _embed(2, 6, hidden)
    from onnx import load_from_string, numpy_helper

    proto = load_from_string(embed)
    graph = proto.graph
    for name, value in (("w", _rand(hidden, 3 * hidden, seed=5, scale=0.3)),
                        ("qkv_bias", _rand(3 * hidden, seed=6))):
        graph.initializer.append(numpy_helper.from_array(value, name))
    graph.node.extend([
        helper.make_node("Attention", ["y", "w", "qkv_bias", "mask_index"], ["a1"], domain=MS,
                         num_heads=heads),
        helper.make_node("Cast", ["mask"], ["mask32"], to=TensorProto.INT32),
        helper.make_node("Attention", ["a1", "w", "qkv_bias", "mask32"], ["a2"], domain=MS,
                         num_heads=heads, unidirectional=1)])
    del graph.output[:]
    graph.output.extend([helper.make_tensor_value_info("a2", F, None)])
    data = proto.SerializeToString()
    want = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    for provider in ("cpu", "wasm", "webgpu"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            sess = edgerun.InferenceSession(data, providers=[usable_provider(provider)])
        assert {n["provider"] for n in sess.explain()["nodes"]} == {provider}
        np.testing.assert_allclose(sess.run(None, feeds)[0], want[0], rtol=RTOL, atol=ATOL,
                                   err_msg=provider)


@pytest.mark.parametrize("provider", ["cpu", "wasm", "webgpu"])
@pytest.mark.parametrize("case", ["MatMulIntegerToFloat_constant_int8_per_column",
                                  "DynamicQuantizeMatMul_constant_int8_per_column"])
def test_constant_quantized_weights_run_on_the_integer_kernels(case, provider):
    """MatMulIntegerToFloat and DynamicQuantizeMatMul over constant 8-bit weights (what
    onnxruntime's graph optimizer writes for a quantize_dynamic model) stay integer products
    on every provider: MatMulIntegerToFloat's kernel (on cpu DynamicQuantizeMatMul's, which
    quantizes A in the same call), no float MatMul of weights widened to float32 (5x slower
    on an onnxruntime-optimized int8 MiniLM)."""
    model, feeds = CASES[case]()
    sess = edgerun.InferenceSession(model, providers=[usable_provider(provider)])
    ops = {n["op_type"]: n["provider"] for n in sess.explain()["nodes"]}
    integer = {ops.get("MatMulIntegerToFloat"), ops.get("DynamicQuantizeMatMul")} - {None}
    assert integer == {provider} and "MatMul" not in ops and "Cast" not in ops, ops
    want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(sess.run(None, feeds)[0], want[0], rtol=RTOL, atol=ATOL)


# ---- onnxruntime's tools on a real model ---------------------------------------------------

def _bert_optimized(src: str, dst: str) -> None:
    from onnxruntime.transformers.optimizer import optimize_model

    optimize_model(src, model_type="bert", num_heads=12, hidden_size=384).save_model_to_file(dst)


def _matmul_nbits_quantized(src: str, dst: str) -> None:
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    quantizer = MatMulNBitsQuantizer(onnx.load(src), block_size=32, is_symmetric=False)
    quantizer.process()
    quantizer.model.save_model_to_file(dst)


def _int8_optimized_by_onnxruntime(src: str, dst: str) -> None:
    from onnxruntime.quantization import quantize_dynamic

    from bench.models.minilm_variants import save_optimized_by_onnxruntime

    quantize_dynamic(src, dst + ".int8.onnx")
    save_optimized_by_onnxruntime(dst + ".int8.onnx", dst)


# variant -> (how onnxruntime's tools make it, com.microsoft operators it must contain)
MINILM_VARIANTS = {"bert_optimized": (_bert_optimized, {"SkipLayerNormalization", "BiasGelu"}),
                   "matmul_nbits_4bit": (_matmul_nbits_quantized, {"MatMulNBits"}),
                   "int8_optimized_by_onnxruntime": (_int8_optimized_by_onnxruntime,
                                                     {"DynamicQuantizeMatMul",
                                                      "MatMulIntegerToFloat"})}


@pytest.fixture(scope="module")
def minilm_variants(tmp_path_factory):
    """The MiniLM export (bench/models/export_minilm.py) through onnxruntime's transformer
    optimizer, its 4-bit weight quantizer, and its dynamic quantizer then its graph optimizer
    (a session's optimized_model_filepath), as users make them."""
    import onnx

    from bench.models import export_minilm as ex

    need(ex.is_cached() or not ex.missing_tools(), "torch, transformers and tokenizers "
         "(to export MiniLM once)", ex.INSTALL)
    src = ex.ensure_minilm()
    folder = tmp_path_factory.mktemp("minilm_variants")
    paths = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (make, ops) in MINILM_VARIANTS.items():
            paths[name] = str(folder / f"{name}.onnx")
            make(src, paths[name])
            made = {n.op_type for n in onnx.load(paths[name]).graph.node if n.domain == MS}
            assert ops <= made, f"{name}: onnxruntime's tool made {made}"
    return paths, dict(np.load(ex.feeds_path(16)))


@pytest.mark.parametrize("provider", ["cpu", "wasm", "webgpu"])
@pytest.mark.parametrize("variant", sorted(MINILM_VARIANTS))
def test_onnxruntime_tool_variants_of_minilm_run_wholly_on_eachusable_provider(minilm_variants,
                                                                          variant, provider):
    """What onnxruntime's transformer optimizer, 4-bit quantizer and graph optimizer make of
    MiniLM runs with every node on the provider and equals onnxruntime's output (atol 1e-4;
    onnxruntime's own integer products round the same way as edgerun's)."""
    paths, feeds = minilm_variants
    want = onnxruntime.InferenceSession(paths[variant], providers=["CPUExecutionProvider"]).run(
        None, feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        sess = edgerun.InferenceSession(paths[variant], providers=[usable_provider(provider)])
    assert {n["provider"] for n in sess.explain()["nodes"]} == {provider}
    for g, w in zip(sess.run(None, feeds), want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("per_channel", [False, True], ids=["tensor", "channel"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_dynamic_quantize_lstm_is_the_lstm_of_its_dequantized_weights(tmp_path, per_channel,
                                                                      direction):
    """onnxruntime's quantize_dynamic turns an LSTM into com.microsoft DynamicQuantizeLSTM
    (8-bit W and R, transposed). edgerun runs it as the float LSTM of the dequantized weights
    on every provider: equal to onnxruntime's LSTM over those weights (rtol 1e-4), and
    within onnxruntime's own quantization spread of its DynamicQuantizeLSTM (which also
    rounds X and H to 8 bits at each step: within twice its distance from the float model)."""
    import onnx
    from onnx import numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    rng = np.random.default_rng(per_channel + len(direction))
    dirs, size, hidden = (2 if direction == "bidirectional" else 1), 12, 20
    init = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
            for n, s in (("W", (dirs, 4 * hidden, size)), ("R", (dirs, 4 * hidden, hidden)),
                         ("B", (dirs, 8 * hidden)))]
    graph = helper.make_graph(
        [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "y_h", "y_c"], hidden_size=hidden,
                          direction=direction)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [7, 2, size])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "y_h", "y_c")],
        init)
    float_path, quantized_path = str(tmp_path / "lstm.onnx"), str(tmp_path / "lstm_q.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), float_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantize_dynamic(float_path, quantized_path, weight_type=QuantType.QInt8,
                         per_channel=per_channel)
    quantized = onnx.load(quantized_path)
    assert [n.op_type for n in quantized.graph.node] == ["DynamicQuantizeLSTM"]
    # the reference: a plain LSTM over the dequantized weights
    values = {t.name: numpy_helper.to_array(t) for t in quantized.graph.initializer}

    def dequantized(name):
        scale, zero = values[f"{name}_scale"], values[f"{name}_zero_point"].astype(np.float32)
        shape = (-1, 1, 1) if scale.ndim == 1 else (scale.shape[0], 1, -1)
        real = (values[f"{name}_quantized"].astype(np.float32) - zero.reshape(shape)) * \
            scale.reshape(shape)
        return np.ascontiguousarray(real.transpose(0, 2, 1))

    reference = onnx.load(float_path)
    for t in reference.graph.initializer:
        if t.name in ("W", "R"):
            t.CopyFrom(numpy_helper.from_array(dequantized(t.name), t.name))
    x = rng.standard_normal((7, 2, size)).astype(np.float32)
    ort = {name: onnxruntime.InferenceSession(m.SerializeToString() if hasattr(m, "graph") else m,
                                              providers=["CPUExecutionProvider"]).run(None, {"x": x})
           for name, m in (("dequantized", reference), ("quantized", quantized_path),
                           ("float", float_path))}
    spread = max(np.abs(a - b).max() for a, b in zip(ort["quantized"], ort["float"]))
    for provider in ("cpu", "wasm", "webgpu"):
        session = edgerun.InferenceSession(quantized_path, providers=[usable_provider(provider)])
        assert {n["provider"] for n in session.explain()["nodes"]} == {provider}
        got = session.run(None, {"x": x})
        for g, want, approx in zip(got, ort["dequantized"], ort["quantized"]):
            np.testing.assert_allclose(g, want, rtol=RTOL, atol=1e-5)
            assert np.abs(g - approx).max() <= 2 * spread
