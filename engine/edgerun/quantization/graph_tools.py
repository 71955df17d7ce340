"""Reading, editing and writing the models the quantizers work on (edgerun's ir, no onnx)."""
from __future__ import annotations

import copy
import os
import struct

from .. import __version__ as EDGERUN_VERSION
from .. import ir
from ..ir import AttrType, dtypes
from ..onnx import load_model
from ..onnx.writer import model_to_bytes
from ..optimizer.graph_edit import subgraphs

PRODUCER = "edgerun.quantization"


def load_input(model_input) -> ir.Model:
    """A private copy of the model: a path, bytes, an edgerun ir.Model or an onnx ModelProto."""
    if isinstance(model_input, ir.Model):
        return copy.deepcopy(model_input)
    if isinstance(model_input, (str, os.PathLike)):
        return load_model(os.fspath(model_input))
    if isinstance(model_input, (bytes, bytearray, memoryview)):
        return load_model(bytes(model_input))
    if hasattr(model_input, "SerializeToString"):        # onnx.ModelProto
        return load_model(model_input.SerializeToString())
    raise TypeError(f"model_input must be a path, bytes, an onnx ModelProto or an edgerun "
                    f"ir.Model, got {type(model_input).__name__}")


def check_output_format(use_external_data_format: bool) -> None:
    if use_external_data_format:
        raise NotImplementedError("use_external_data_format=True: edgerun.quantization writes "
                                  "the weights inside the .onnx file only")


def save_output(model: ir.Model, model_output, use_external_data_format: bool = False) -> bytes:
    check_output_format(use_external_data_format)
    model.producer_name = PRODUCER
    model.producer_version = EDGERUN_VERSION
    data = model_to_bytes(model)
    if model_output is not None:
        with open(os.fspath(model_output), "wb") as f:
            f.write(data)
    return data


def opset_version(model: ir.Model) -> int:
    for domain in ("", "ai.onnx"):
        if domain in model.opset_imports:
            return model.opset_imports[domain]
    raise ValueError("the model imports no ai.onnx opset")


# --- tensors -------------------------------------------------------------------------------

def float_scalar(name: str, value: float, dims=()) -> ir.Tensor:
    return ir.Tensor(name=name, elem_type=dtypes.FLOAT, dims=tuple(dims),
                     raw=struct.pack("<f", value))


def floats_tensor(name: str, values, dims) -> ir.Tensor:
    return ir.Tensor(name=name, elem_type=dtypes.FLOAT, dims=tuple(dims),
                     raw=struct.pack(f"<{len(values)}f", *values))


def ints_tensor(name: str, elem_type: int, values, dims) -> ir.Tensor:
    fmt = {dtypes.INT8: "b", dtypes.UINT8: "B", dtypes.INT32: "i", dtypes.INT64: "q"}[elem_type]
    return ir.Tensor(name=name, elem_type=elem_type, dims=tuple(dims),
                     raw=struct.pack(f"<{len(values)}{fmt}", *values))


def node(op_type: str, inputs, outputs, name: str = "", domain: str = "", **attrs) -> ir.Node:
    attributes = {}
    for key, value in attrs.items():
        if value is None:
            continue
        if isinstance(value, (bool, int)):
            attributes[key] = ir.Attribute(key, AttrType.INT, int(value))
        elif isinstance(value, float):
            attributes[key] = ir.Attribute(key, AttrType.FLOAT, value)
        elif isinstance(value, (list, tuple)):
            attributes[key] = ir.Attribute(key, AttrType.INTS, [int(v) for v in value])
        else:
            raise TypeError(f"attribute {key}: {type(value).__name__}")
    return ir.Node(op_type=op_type, inputs=list(inputs), outputs=list(outputs),
                   attributes=attributes, domain=domain, name=name)


# --- graph walks ---------------------------------------------------------------------------

def outer_names(g: ir.Graph) -> set:
    """Names a subgraph reads from enclosing graphs."""
    local = {v.name for v in g.inputs} | set(g.initializers)
    used: set = set()
    for n in g.nodes:
        local.update(o for o in n.outputs if o)
    for n in g.nodes:
        used.update(i for i in n.inputs if i)
        for sub in subgraphs(n):
            used |= outer_names(sub)
    used.update(v.name for v in g.outputs)
    return used - local


def node_reads(n: ir.Node) -> list:
    """Every name a node reads: its inputs, then what its subgraphs take from outside."""
    names = [i for i in n.inputs if i]
    for sub in subgraphs(n):
        names.extend(sorted(outer_names(sub)))
    return names


def all_names(g: ir.Graph) -> set:
    names = set(g.initializers) | {v.name for v in g.inputs} | {v.name for v in g.outputs}
    names |= {v.name for v in g.value_info}
    for n in g.nodes:
        names.update(n.inputs)
        names.update(n.outputs)
        for sub in subgraphs(n):
            names |= all_names(sub)
    names.discard("")
    return names


def consumers(g: ir.Graph) -> dict:
    """name -> nodes reading it (inputs and subgraph reads), in graph order."""
    out: dict = {}
    for n in g.nodes:
        for name in dict.fromkeys(node_reads(n)):
            out.setdefault(name, []).append(n)
    return out


def topological_sort(g: ir.Graph) -> None:
    """Orders the nodes so each comes after what it reads, keeping the given order where it
    already does (a node moves only behind the producers it waited for)."""
    producer = {}
    for n in g.nodes:
        for o in n.outputs:
            if o:
                producer[o] = n
    done = set()
    ordered = []
    for start in g.nodes:
        if id(start) in done:
            continue
        stack = [(start, iter(node_reads(start)))]
        on_stack = {id(start)}
        while stack:
            current, reads = stack[-1]
            for name in reads:
                p = producer.get(name)
                if p is not None and id(p) not in done and id(p) not in on_stack:
                    stack.append((p, iter(node_reads(p))))
                    on_stack.add(id(p))
                    break
            else:
                stack.pop()
                on_stack.discard(id(current))
                done.add(id(current))
                ordered.append(current)
    g.nodes = ordered


def remove_unused_initializers(g: ir.Graph) -> None:
    """Drops initializers no node reads and no graph output names (onnxruntime's
    clean_initializers); their entries among the graph inputs (IR < 4) go too."""
    used = set()
    for n in g.nodes:
        used.update(node_reads(n))
    used.update(v.name for v in g.outputs)
    unused = [name for name in g.initializers if name not in used]
    for name in unused:
        del g.initializers[name]
    if unused:
        gone = set(unused)
        g.inputs = [v for v in g.inputs if v.name not in gone]


def replace_input(nodes, old: str, new: str) -> None:
    for n in nodes:
        n.inputs = [new if i == old else i for i in n.inputs]


def replace_output(nodes, old: str, new: str) -> None:
    for n in nodes:
        n.outputs = [new if o == old else o for o in n.outputs]


def tensor_floats(t: ir.Tensor):
    from .arith import floats

    if t.elem_type != dtypes.FLOAT:
        raise ValueError(f"initializer '{t.name}' is {dtypes.type_string(t.elem_type)}, "
                         f"expected tensor(float)")
    return floats(t.raw)


def transposed_2d(t: ir.Tensor, name: str) -> ir.Tensor:
    """A float 2-D initializer transposed (numpy's .T then a contiguous copy)."""
    from .arith import numpy_or_none

    rows, cols = t.dims
    np = numpy_or_none()
    if np is not None:
        data = np.frombuffer(t.raw, dtype="<f4").reshape(rows, cols).T.copy().tobytes()
        return ir.Tensor(name=name, elem_type=t.elem_type, dims=(cols, rows), raw=data)
    width = 4
    raw = t.raw
    out = bytearray(len(raw))
    for r in range(rows):
        for c in range(cols):
            src = (r * cols + c) * width
            dst = (c * rows + r) * width
            out[dst:dst + width] = raw[src:src + width]
    return ir.Tensor(name=name, elem_type=t.elem_type, dims=(cols, rows), raw=bytes(out))
