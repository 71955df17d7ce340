"""WebGpuProvider: runs claimed nodes as WGSL kernels on one process-wide GPU device.

Device values are `GpuTensor`s (float32, int32, int64 held as int32, bool held as u32, in GPU
buffers; `GpuTensorParts` for a weight too large for one binding) or, for small integer
shape tensors, host numpy arrays: shape arithmetic stays on the host and never costs a GPU
round trip. Kernels record dispatches; the batch is submitted when a value is read back
(`to_host`) and at `end_run`, so one run is normally one command encoder. Initializers are
uploaded once, at session creation. The host-only operators (Constant, Range, If...) run
their own pure-Python versions. Where numpy exists, a node whose inputs are all host values
(shape arithmetic) is refused as a matter of routine and the CPU provider computes it on the
host; a kernel that meets inputs it has no GPU layout for raises Unsupported, and the
session's next provider runs that node instead (runtime/refusals.py; counted in
`stats["fallbacks"]`).

The device is wgpu-native natively and the browser's `navigator.gpu` inside Pyodide
(sys.platform "emscripten": browser_device.py). Without numpy (Pyodide here) host values are
HostTensors, shape arithmetic runs through the kernels, and a node the GPU kernel refuses
runs on the next provider (wasm in a page) or is an error that names it.
"""
from __future__ import annotations

from typing import Optional

import sys
import threading

from ...errors import KernelRefused
from ...ir import dtypes
from ...ir.walk import all_nodes
from ...ir.host_tensor import have_numpy
from ..base import ExecutionProvider
from . import host_values, program
from .gpu import GPU_TYPES, NARROW_TYPES, GpuContext
from .kernels import lookup
from .kernels.registry import Unsupported
from .memory import SMALL_MIRROR, GpuTensor, GpuTensorParts

_shared: dict = {"context": None, "problem": None}
_shared_lock = threading.Lock()
IN_BROWSER = sys.platform == "emscripten"


def _device_problem() -> str:
    if _shared["problem"] is None:
        if IN_BROWSER:
            from .browser_device import adapter_problem
        else:
            from .wgpu_device import adapter_problem
        _shared["problem"] = adapter_problem()
    return _shared["problem"]


def shared_context() -> GpuContext:
    """The process-wide GPU context (adapter + device open once: ~0.5 s; again after the
    device was lost)."""
    with _shared_lock:
        context = _shared["context"]
        if context is None or context.device.lost_reason:
            if IN_BROWSER:
                from .browser_device import BrowserDevice
                _shared["context"] = GpuContext(BrowserDevice())
            else:
                from .wgpu_device import WgpuDevice
                _shared["context"] = GpuContext(WgpuDevice())
        return _shared["context"]


def _narrow_operand(value) -> str:
    """The 8/16-bit element type (gpu.NARROW_TYPES) of an operand, or ""."""
    if isinstance(value, GpuTensor):
        return value.dtype if value.dtype in NARROW_NAMES else ""
    if value is not None and host_values.is_host_tensor(value):
        code = host_values.elem_type(value)
        return NARROW_TYPES.get(code, "")
    return ""


NARROW_NAMES = frozenset(NARROW_TYPES.values())


class WebGpuProvider(ExecutionProvider):
    name = "webgpu"
    ort_name = "WebGpuExecutionProvider"
    device = "webgpu"

    @classmethod
    def available(cls) -> tuple:
        problem = _device_problem()
        if not problem and IN_BROWSER:        # a synchronous entry could never read back
            from .browser_device import entry_problem
            problem = entry_problem()
        return (not problem, problem)

    @classmethod
    def is_hardware(cls) -> bool:
        """True on a real GPU; False on software adapters (lavapipe, SwiftShader: type CPU)."""
        if not cls.available()[0]:
            return False
        return not shared_context().device.software

    def __init__(self, options: Optional[dict] = None, context: Optional[GpuContext] = None):
        super().__init__(options)
        self.gpu = context or shared_context()
        self.value_types: dict = {}      # name -> ir.TypeInfo, for operators whose check
                                         # needs input types (CastLike's target)
        self.captured: list = []         # each captured graph's programs (program.py)

    def prepare_model(self, model, ahead: tuple = ()) -> None:
        """Learn value types, by shape inference, where a claimed operator's check needs them,
        and wherever numpy is absent (a page): there capability refuses up front the nodes
        on tensors the GPU does not hold (see _operand_type_problem). Then capture the graph
        (program.py) where this provider claims it whole: natively unless the provider
        option `graph_capture` is False; in a page only where it is True (there, the JS
        real-model set gave wrong results for its largest CNNs after a dozen sessions with
        capture on: to be found before it is the default)."""
        self.value_types = {}
        self._learn_value_types(model)
        if self.options.get("graph_capture", not IN_BROWSER):
            program.capture(model, self, ahead)

    def _learn_value_types(self, model) -> None:
        if have_numpy() and not any(getattr(lookup(n.op_type, n.domain), "typed", False)
                                    for n in all_nodes(model.graph)):
            return
        from ...shape_inference import infer_shapes
        try:
            result = infer_shapes(model)
        except Exception:   # noqa: BLE001 - untyped values are refused by the checks
            return
        self.value_types = dict(result)
        for sub in result.subgraph_types.values():
            for name, t in sub.items():
                self.value_types.setdefault(name, t)

    @property
    def stats(self) -> dict:
        return self.gpu.stats

    def capability(self, node, opset):
        if program.is_program(node):
            return True, ""
        op = lookup(node.op_type, node.domain)
        if op is None:
            domain = node.domain or "ai.onnx"
            return False, f"no WGSL kernel for {domain}::{node.op_type}"
        if op.check is not None:
            why = (op.check(node, opset, self.value_types) if op.typed
                   else op.check(node, opset))
            if why:
                return False, f"{why} is not supported by the WGSL kernel"
        if not have_numpy():
            why = self._operand_type_problem(node)
            if why:
                return False, why
        return True, ""

    def _operand_type_problem(self, node) -> str:
        """Without numpy: why a node on a model-data type the GPU does not hold (bfloat16),
        or on an 8/16-bit type (quantized and float16 models) that its kernel does not take,
        is not this provider's. Its kernel would refuse those at run time; refused up front
        instead, the node shows on the next provider (wasm in a page) in explain() and costs
        no refusal per run. The host computes a few others (double, strings) without numpy;
        they stay."""
        op = lookup(node.op_type, node.domain)
        takes_narrow = op is not None and op.narrow
        for name in [*node.inputs, *node.outputs]:
            t = self.value_types.get(name) if name else None
            if t is None or t.kind != "tensor":
                continue
            if t.elem_type == dtypes.BFLOAT16:
                return (f"'{name}' is {dtypes.type_string(t.elem_type)}: GPU tensors are "
                        f"{', '.join(sorted(GPU_TYPES.values()))}")
            if t.elem_type in NARROW_TYPES and not takes_narrow:
                return (f"'{name}' is {dtypes.type_string(t.elem_type)}: the WGSL kernel of "
                        f"{node.op_type} computes in 32 bits")
        return ""

    def kernel(self, node, opset):
        if program.is_program(node):
            return program.bind_program(self, node)
        op = lookup(node.op_type, node.domain)
        gpu = self.gpu
        label = f"node '{node.name or '(unnamed)'}' ({node.op_type})"
        host_arithmetic = have_numpy() and not op.host_only

        def run(ctx, *inputs, **attrs):
            if host_arithmetic and not any(isinstance(v, (GpuTensor, GpuTensorParts))
                                           for v in inputs):
                raise KernelRefused("host values only: the host computes them", routine=True)
            gpu.label = label
            if not (op.narrow or op.host_only):     # host-only ones compute in Python
                narrow = next(filter(None, map(_narrow_operand, inputs)), "")
                if narrow:
                    raise Unsupported(f"a {narrow} operand (the kernel computes in 32 bits)")
            return op.run(gpu, ctx, *inputs, **attrs)
        return run

    def release(self) -> None:
        """Unpin the buffers of this session's recorded programs: the pool reuses them."""
        for programs in self.captured:
            program.release_all(programs)

    def refused(self, node, why) -> None:
        self.gpu._taint(f"{why} (ran on the next provider)")
        self.gpu.stats["fallbacks"] += 1
        self.gpu.fallback_log.append(why)
        del self.gpu.fallback_log[:-100]

    def to_device(self, value):
        """float32 tensors go to the GPU, and so do int32/int64/bool tensors of more than
        SMALL_MIRROR elements (data: token ids, masks, bytes). Small integer tensors stay on
        the host, where shape arithmetic reads them without a GPU round trip; so do other
        element types, int64 values beyond int32, and tensors larger than the adapter binds."""
        if not host_values.is_host_tensor(value):
            return value
        code = host_values.elem_type(value)
        if code not in GPU_TYPES or code == dtypes.UINT32:
            return value
        n = host_values.element_count(value)
        if code != dtypes.FLOAT and n <= SMALL_MIRROR:
            return value
        limit = getattr(self.gpu.device, "max_binding_size", None)
        if limit is not None and 4 * n > limit:
            return self._upload_in_parts(value, limit) if code == dtypes.FLOAT else value
        try:
            return self.gpu.upload(value)
        except Unsupported:
            return value

    def constant_to_device(self, value):
        """A constant as to_device makes it; one kept on the host is remembered, so that
        kernels binding it upload it once (GpuContext.keep_constant)."""
        device_value = self.to_device(value)
        if device_value is value and host_values.is_host_tensor(value):
            self.gpu.keep_constant(value)
        return device_value

    def _upload_in_parts(self, value, limit: int):
        """A float32 matrix too large for one binding as row blocks (GpuTensorParts), or the
        host value where one row alone is too large."""
        dims = host_values.shape(value)
        row = 4 * host_values.element_count(value) // dims[0] if dims and dims[0] else 0
        if len(dims) != 2 or row == 0 or row > limit:
            return value
        rows = max(limit // row // 4 * 4, 1)        # a multiple of 4 keeps vec4 kernels
        parts = [self.gpu.upload(host_values.row_block(value, r, min(r + rows, dims[0])))
                 for r in range(0, dims[0], rows)]
        return GpuTensorParts(parts, value)

    def to_host(self, value):
        if isinstance(value, GpuTensor):
            return self.gpu.download(value)
        if isinstance(value, GpuTensorParts):
            return value.host
        return value

    def end_run(self) -> None:
        self.gpu.flush()
