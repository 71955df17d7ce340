"""The wasm provider's operators: one table from (domain, op_type) to a check and a binder.

    @operator("Relu", "Sigmoid", check=float_only)
    def bind_unary(dev, node, opset):          # called once per node at plan time
        ...
        return run                             # run(ctx, *inputs, **attributes) -> WasmTensor

`check(node, opset)` returns "" when the kernels handle the node's attributes, else the
reason the provider refuses it (shown by session.explain()). Values' element types are not
known at partition time, so binders check them at run time: a float kernel given another
type refuses it (ops/common.refuse), and the session's next provider that claims the node
runs it instead (counted in provider.stats), or the run fails naming the types where no
later provider does (a page without numpy). Importing this package registers every family.
"""
from __future__ import annotations

OPS: dict = {}              # (domain, op_type) -> (check, bind)
ONNX = ("",)
EDGERUN = ("com.edgerun",)


def no_check(node, opset) -> str:
    return ""


def operator(*op_types: str, domains=ONNX, check=no_check):
    def register(bind):
        for op_type in op_types:
            for domain in domains:
                OPS[(domain, op_type)] = (check, bind)
        return bind
    return register


def lookup(op_type: str, domain: str):
    return OPS.get(("" if domain in ("", "ai.onnx") else domain, op_type))


from . import (conv, elementwise, matmul, normalization, pool, reduce, tensor,  # noqa: E402,F401
               attention, constant, control_flow, index, logic, loss, ml, pad, recurrent,
               detection, einsum, quantization, random, rearrange, resize, sequence,
               signal, text, spectral, roi_align, unpool, det)
