"""Constant nodes become initializers, so later passes see one kind of constant.

Every form of Constant is handled (value, value_float(s), value_int(s), value_string(s));
a sparse_value is left as a node. The initializer takes the node's output name, so readers
and graph outputs are unchanged.
"""
from __future__ import annotations

from .graph_edit import GraphView, PassContext, is_onnx

_SCALAR_FORMS = {
    "value_float": ("float32", False), "value_floats": ("float32", True),
    "value_int": ("int64", False), "value_ints": ("int64", True),
    "value_string": ("object", False), "value_strings": ("object", True),
}


def constants_to_initializers(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for node in view.live_nodes():
        if not is_onnx(node, "Constant") or len(node.outputs) != 1:
            continue
        if "value" in node.attributes:     # the tensor as stored, not converted to numpy
            view.remove(node)
            view.set_constant_tensor(node.outputs[0], node.attributes["value"].value)
            count += 1
            continue
        value = _scalar_form_value(node)
        if value is None:
            continue
        view.remove(node)
        view.set_constant(node.outputs[0], value)
        count += 1
    return count


def _scalar_form_value(node):
    import numpy as np

    for name, (dtype, is_list) in _SCALAR_FORMS.items():
        if name in node.attributes:
            raw = node.attr(name)
            if dtype == "object":
                raw = [s.decode("utf-8", errors="surrogateescape") if isinstance(s, bytes)
                       else s for s in (raw if is_list else [raw])]
                arr = np.empty(len(raw), dtype=object)
                arr[:] = raw
                return arr if is_list else arr.reshape(())
            return np.array(raw, dtype=dtype)
    return None
