"""IOBinding: onnxruntime's way of running with inputs and outputs on chosen devices.

Inputs are bound as OrtValues (a numpy array is a "cpu" OrtValue); outputs are bound to a
device. `InferenceSession.run_with_iobinding` then runs the plan the executor builds for
those devices (`GraphExecutor.plan_for`): an input already on the device its consumers run
on is used as it is, an output bound to "webgpu" stays a GPU value (no read back), and an
output nobody bound is left where it was produced. Copies that remain (a webgpu input read
by a CPU node, a host output bound to webgpu) are the executor's planned copy steps:
`session.explain(binding)["copies_per_run"]` counts them, and the device's
`stats["uploads"]` / `stats["downloads"]` count what actually moved.

A device the session has no provider for (a webgpu OrtValue fed to a CPU-only session) is
bridged on the host: the value is read back (or uploaded) around the run.
"""
from __future__ import annotations

import ctypes

from ..errors import InvalidArgument
from ..ir import dtypes
from .feeds import check_feed
from .ort_value import OrtValue, check_device, device_provider, element_code


class IOBinding:
    def __init__(self, session):
        self._session = session
        self._inputs: dict = {}       # name -> OrtValue
        self._outputs: dict = {}      # name -> (device, OrtValue to write into, or None)
        self._results: list = []      # OrtValues of the last run, in binding order

    # ---- inputs ---------------------------------------------------------------------------

    def bind_cpu_input(self, name: str, arr_on_cpu) -> None:
        self._bind_input(name, OrtValue.ortvalue_from_numpy(arr_on_cpu))

    def bind_input(self, name: str, device_type, device_id, element_type, shape,
                   buffer_ptr) -> None:
        """Bind memory at a raw address. Only host memory has one ("cpu"); a webgpu value
        is bound with bind_ortvalue_input(OrtValue.ortvalue_from_numpy(arr, "webgpu"))."""
        device = check_device(device_type, device_id)
        self._bind_input(name, OrtValue(_array_at(buffer_ptr, device, element_type, shape)))

    def bind_ortvalue_input(self, name: str, ortvalue) -> None:
        if not isinstance(ortvalue, OrtValue):
            raise InvalidArgument(f"input '{name}': expected an OrtValue, got "
                                  f"{type(ortvalue).__name__}")
        self._bind_input(name, ortvalue)

    def _bind_input(self, name: str, value: OrtValue) -> None:
        s = self._session
        checker = s._check_feeds
        check_feed(name, value._value if value.device_name() == "cpu" else value,
                   checker.by_name, checker.overridable, s._inputs)
        self._inputs[name] = value

    # ---- outputs --------------------------------------------------------------------------

    def bind_output(self, name: str, device_type="cpu", device_id=0, element_type=None,
                    shape=None, buffer_ptr=None) -> None:
        """Ask for output `name` on a device. With `buffer_ptr` (host memory only, with its
        `element_type` and `shape`), the output is written there."""
        self._check_output_name(name)
        device = check_device(device_type, device_id)
        target = None
        if buffer_ptr is not None:
            target = OrtValue(_array_at(buffer_ptr, device, element_type, shape))
        self._outputs[name] = (device, target)

    def bind_ortvalue_output(self, name: str, ortvalue) -> None:
        """The output is written into `ortvalue`: copied into a "cpu" value's array (whose
        shape and element type must match), adopted by a device value."""
        self._check_output_name(name)
        if not isinstance(ortvalue, OrtValue):
            raise InvalidArgument(f"output '{name}': expected an OrtValue, got "
                                  f"{type(ortvalue).__name__}")
        self._outputs[name] = (ortvalue.device_name(), ortvalue)

    def _check_output_name(self, name: str) -> None:
        names = self._session._executor.output_names
        if name not in names:
            raise InvalidArgument(f"unknown output '{name}'; the model's outputs are "
                                  f"{', '.join(repr(n) for n in names)}")

    # ---- results and housekeeping ---------------------------------------------------------

    def synchronize_inputs(self) -> None:
        """Wait for device work pending on bound inputs (none is left pending: no-op)."""

    def synchronize_outputs(self) -> None:
        """Submit device work still recorded (runs submit theirs at the end already)."""
        for device in {d for d, _ in self._outputs.values() if d != "cpu"}:
            gpu = getattr(device_provider(device), "gpu", None)
            if gpu is not None:
                gpu.flush()

    def get_outputs(self) -> list:
        """The last run's outputs as OrtValues, in the order they were bound."""
        return list(self._results)

    def copy_outputs_to_cpu(self) -> list:
        return [v.numpy() for v in self._results]

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()
        self._results = []

    # ---- planning and running (InferenceSession.run_with_iobinding) -----------------------

    def _devices(self) -> tuple:
        """(input name -> device, output name -> device or None) for GraphExecutor.plan_for:
        only devices the session has a provider for; None leaves an unbound output where it
        is produced (when no output is bound, every output comes back on the host)."""
        s = self._session
        have = {p.device for p in s._providers}
        real = {v.name for v in s._inputs}
        ins = {n: v.device_name() for n, v in self._inputs.items()
               if n in real and v.device_name() in have}
        if not self._outputs:
            return ins, {}
        outs = {n: None for n in s._executor.output_names}
        outs.update({n: (d if d in have else "cpu") for n, (d, _) in self._outputs.items()})
        return ins, outs

    def _run(self, run_options=None) -> None:
        s = self._session
        in_devices, out_devices = self._devices()
        feeds = {}
        for name, value in self._inputs.items():
            if name in in_devices:
                feeds[name] = value                 # checked as an OrtValue, then unwrapped
            else:
                feeds[name] = value.numpy()         # host, or read back for a foreign device
        feeds = s._check_feeds(feeds)
        feeds = {n: (v._value if isinstance(v, OrtValue) else v) for n, v in feeds.items()}
        plan = s._executor.plan_for(in_devices, out_devices)
        outputs = s._execute(feeds, plan, run_options=run_options)
        index = {name: i for i, name in enumerate(s._executor.output_names)}
        providers = {p.device: p for p in s._providers}
        if not self._outputs:
            self._results = [OrtValue(v) for v in outputs]
            return
        results = []
        for name, (device, target) in self._outputs.items():
            value = outputs[index[name]]
            if device == "cpu":
                produced = OrtValue(value)
            elif device in providers:
                produced = OrtValue(value, device, providers[device])
            else:                                   # no provider here: upload after the run
                produced = OrtValue.ortvalue_from_numpy(value, device)
            if target is not None:
                target._assign(produced)
                produced = target
            results.append(produced)
        self._results = results


def _array_at(buffer_ptr, device: str, element_type, shape):
    """A numpy array over host memory at address `buffer_ptr` (no copy, as onnxruntime)."""
    if device != "cpu":
        raise InvalidArgument(
            f"raw buffer pointers are not supported on device '{device}': its buffers have no "
            f"address edgerun can take; use an OrtValue (OrtValue.ortvalue_from_numpy(arr, "
            f"'{device}')) with bind_ortvalue_input / bind_ortvalue_output")
    if not isinstance(buffer_ptr, int) or isinstance(buffer_ptr, bool) or buffer_ptr <= 0:
        raise InvalidArgument(f"buffer_ptr must be a host memory address (an int), got "
                              f"{buffer_ptr!r}")
    if shape is None:
        raise InvalidArgument("binding a buffer_ptr needs its shape")
    import numpy as np

    code = element_code(element_type)
    dtype = dtypes.numpy_dtype(code)
    dims = tuple(int(d) for d in shape)
    count = 1
    for d in dims:
        count *= d
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(buffer_ptr)
    return np.frombuffer(raw, dtype=dtype, count=count).reshape(dims)
