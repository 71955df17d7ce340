"""Constant nodes become initializers, so later passes see one kind of constant.

Every form of Constant is handled (value, value_float(s), value_int(s), value_string(s));
a sparse_value is left as a node. The initializer takes the node's output name, so readers
and graph outputs are unchanged.
"""
from __future__ import annotations

import struct

from .. import ir
from ..ir import dtypes
from .graph_edit import GraphView, PassContext, is_onnx

# value_* attribute -> (element type, struct code, a list?): numeric forms become tensors by
# struct (no numpy: the pass runs in a page too); strings keep numpy's object arrays
_NUMERIC_FORMS = {"value_float": (dtypes.FLOAT, "f", False),
                  "value_floats": (dtypes.FLOAT, "f", True),
                  "value_int": (dtypes.INT64, "q", False), "value_ints": (dtypes.INT64, "q", True)}
_STRING_FORMS = {"value_string": False, "value_strings": True}


def constants_to_initializers(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for node in view.live_nodes():
        if not is_onnx(node, "Constant") or len(node.outputs) != 1:
            continue
        if "value" in node.attributes:     # the tensor as stored, not converted to numpy
            tensor = node.attributes["value"].value
        else:
            tensor = _numeric_form_tensor(node)
        if tensor is not None:
            view.remove(node)
            view.set_constant_tensor(node.outputs[0], tensor)
            count += 1
            continue
        value = _string_form_value(node) if ctx.has_numpy else None
        if value is None:
            continue
        view.remove(node)
        view.set_constant(node.outputs[0], value)
        count += 1
    return count


def _numeric_form_tensor(node):
    for name, (elem_type, code, is_list) in _NUMERIC_FORMS.items():
        if name in node.attributes:
            values = list(node.attr(name)) if is_list else [node.attr(name)]
            raw = struct.pack(f"<{len(values)}{code}", *values)
            return ir.Tensor(node.outputs[0], elem_type, (len(values),) if is_list else (), raw)
    return None


def _string_form_value(node):
    import numpy as np

    for name, is_list in _STRING_FORMS.items():
        if name in node.attributes:
            raw = node.attr(name)
            raw = [s.decode("utf-8", errors="surrogateescape") if isinstance(s, bytes)
                   else s for s in (raw if is_list else [raw])]
            arr = np.empty(len(raw), dtype=object)
            arr[:] = raw
            return arr if is_list else arr.reshape(())
    return None
