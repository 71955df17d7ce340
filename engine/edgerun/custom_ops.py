"""Custom operators written in Python, registered the way onnxruntime-extensions does:

    from edgerun.custom_ops import PyCustomOpDef, get_library_path, onnx_op

    @onnx_op(op_type="Inverse", inputs=[PyCustomOpDef.dt_float],
             outputs=[PyCustomOpDef.dt_float])
    def inverse(x):
        return np.linalg.inv(x)

    options = edgerun.SessionOptions()
    options.register_custom_ops_library(get_library_path())
    session = edgerun.InferenceSession("model_with_inverse.onnx", options)

Nodes of the operator (domain "ai.onnx.contrib" unless another is given) then run on the CPU
provider, or on the wasm provider where it is first in the session's list (a page has no
CPU provider): the function gets the node's inputs as numpy arrays, and its declared
attributes (`attrs={"alpha": PyCustomOpDef.dt_float}`) as keyword arguments; it returns one
array or a tuple of them. Where numpy is absent (Pyodide without numpy loaded) the function
gets and returns `edgerun.ir.host_tensor.HostTensor`s instead (`.shape`, `.values()`,
`HostTensor.from_values(elem_type, shape, values)`). Sessions that do not register the
library do not see the operators, as in onnxruntime. Code written for onnxruntime-extensions
switches by changing its import.
"""
from __future__ import annotations

DEFAULT_DOMAIN = "ai.onnx.contrib"
LIBRARY_PATH = "edgerun:python-custom-ops"      # what get_library_path() gives
_OPERATORS: dict = {}      # (domain, op_type) -> CustomOp


class PyCustomOpDef:
    """Element type names for `inputs` and `outputs`, and attribute kinds for `attrs`
    (onnxruntime-extensions' spelling; edgerun passes values as they come)."""
    dt_float, dt_double, dt_float16 = 1, 11, 10
    dt_int8, dt_uint8, dt_int16, dt_uint16 = 3, 2, 5, 4
    dt_int32, dt_uint32, dt_int64, dt_uint64 = 6, 12, 7, 13
    dt_bool, dt_string = 9, 8


class CustomOp:
    def __init__(self, op_type: str, domain: str, fn, inputs, outputs, attrs):
        self.op_type, self.domain, self.fn = op_type, domain, fn
        self.inputs, self.outputs = list(inputs or []), list(outputs or [])
        self.attrs = dict(attrs or {})

    def kernel(self, ctx, *inputs, **attributes):
        """The CPU provider's kernel: the declared attributes only, as keywords."""
        return self.fn(*inputs, **{k: v for k, v in attributes.items() if k in self.attrs})

    def host_kernel(self, to_host, to_device):
        """The kernel for a provider whose tensors live in its own memory (wasm): inputs are
        read to the host (numpy arrays where numpy is installed, else HostTensors), the
        function runs there, and its results are copied back with `to_device`."""
        from .ir.host_tensor import HostTensor, have_numpy

        def run(ctx, *inputs, **attributes):
            values = [to_host(v) for v in inputs]
            if have_numpy():
                values = [v.numpy() if isinstance(v, HostTensor) else v for v in values]
            result = self.kernel(ctx, *values, **attributes)
            if isinstance(result, tuple):
                return tuple(to_device(_as_tensor(self, r)) for r in result)
            return to_device(_as_tensor(self, result))
        return run


def _as_tensor(op, value):
    """A result as a tensor the provider can take: numpy scalars and Python numbers become
    0-d arrays where numpy exists; without numpy only HostTensors are tensors."""
    from .ir.host_tensor import HostTensor, have_numpy

    if value is None or isinstance(value, HostTensor):
        return value
    if have_numpy():
        import numpy as np
        return value if isinstance(value, np.ndarray) else np.asarray(value)
    raise TypeError(f"custom operator {op.domain}::{op.op_type} returned "
                    f"{type(value).__name__}; without numpy it must return HostTensors "
                    f"(edgerun.ir.host_tensor.HostTensor.from_values)")


def onnx_op(op_type: str, inputs=None, outputs=None, attrs=None, domain: str = DEFAULT_DOMAIN):
    """Register the decorated function as operator `domain::op_type`."""
    def register(fn):
        _OPERATORS[(domain, op_type)] = CustomOp(op_type, domain, fn, inputs, outputs, attrs)
        return fn
    return register


def get_library_path() -> str:
    """What SessionOptions.register_custom_ops_library takes to enable the Python operators."""
    return LIBRARY_PATH


def lookup(op_type: str, domain: str):
    return _OPERATORS.get((domain, op_type))


def enabled(sess_options) -> bool:
    """Whether a session with these SessionOptions sees the Python operators."""
    return LIBRARY_PATH in (getattr(sess_options, "custom_op_libraries", None) or ())


def refusal(node) -> str:
    """Why a provider that could run a registered Python operator does not: the session has
    not enabled them ("" when `node` is no such operator)."""
    if lookup(node.op_type, node.domain) is None:
        return ""
    return (f"{node.domain or 'ai.onnx'}::{node.op_type} is a Python custom operator: enable it "
            f"with SessionOptions.register_custom_ops_library("
            f"edgerun.custom_ops.get_library_path())")
