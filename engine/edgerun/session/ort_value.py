"""OrtValue: a tensor and the device it lives on, as onnxruntime's Python API has it.

Devices are "cpu" (host numpy arrays, or HostTensors without numpy) and "webgpu" (the
process-wide GPU device every WebGPU session shares: providers/webgpu/provider.py's
`shared_context`). A webgpu value is the provider's own device value: a `GpuTensor` in a
GPU buffer, or, for the small integer tensors the provider keeps on the host for shape
arithmetic (and element types GPU buffers do not hold), a host array, exactly as inside a
run. Moving values between devices is the provider's `to_device` / `to_host`: the copies
the executor makes, counted in the device's `stats` ("uploads", "downloads").
"""
from __future__ import annotations

import threading

from ..errors import InvalidArgument
from ..ir import dtypes
from ..ir.host_tensor import HostTensor

DEVICES = ("cpu", "webgpu")
_providers: dict = {}
_lock = threading.Lock()


def available_devices() -> list:
    """The devices OrtValues and IO bindings can use here."""
    found = ["cpu"]
    from ..providers.registry import availability

    if availability("webgpu")[0]:
        found.append("webgpu")
    return found


def check_device(device_type, device_id: int = 0) -> str:
    """The device's name ("cpu", "webgpu"), or InvalidArgument naming the devices there are."""
    name = getattr(device_type, "device_name", None)       # an OrtValue or device-like
    name = str(name() if callable(name) else (name or device_type)).lower()
    if name not in DEVICES:
        raise InvalidArgument(
            f"unknown device '{device_type}': edgerun's devices are "
            f"{', '.join(repr(d) for d in DEVICES)} (available here: "
            f"{', '.join(available_devices())}); onnxruntime's 'cuda', 'gpu', 'dml' and "
            f"others have no edgerun provider")
    if device_id not in (0, None):
        raise InvalidArgument(f"device '{name}' has only device_id 0, got {device_id}")
    if name != "cpu" and name not in available_devices():
        from ..providers.registry import availability

        raise InvalidArgument(f"device '{name}' is not available here "
                              f"({availability(name)[1]}); available: "
                              f"{', '.join(available_devices())}")
    return name


def device_provider(device: str):
    """The provider whose `to_device` / `to_host` move values to and from `device` (None for
    the host). For webgpu: a provider on the shared GPU context, the one sessions use."""
    if device == "cpu":
        return None
    with _lock:
        if device not in _providers:
            from ..providers.registry import provider_class

            _providers[device] = provider_class(device)(None)
        return _providers[device]


def element_code(element_type) -> int:
    """An ONNX element type code from what onnxruntime callers pass: a numpy dtype or type
    (np.float32), an ONNX code (1), or a name ('tensor(float)', 'float32', 'FLOAT')."""
    if isinstance(element_type, bool) or element_type is None:
        raise InvalidArgument(f"element_type must name a tensor element type, got "
                              f"{element_type!r}")
    if isinstance(element_type, int):
        if element_type not in dtypes.BY_CODE:
            raise InvalidArgument(f"unknown ONNX element type code {element_type}")
        return element_type
    if isinstance(element_type, str):
        text = element_type.strip()
        inner = text[7:-1] if text.startswith("tensor(") and text.endswith(")") else text
        for t in dtypes.BY_CODE.values():
            if inner in (t.type_str, t.numpy_name, t.name):
                return t.code
        raise InvalidArgument(f"unknown element type '{element_type}'")
    try:
        return dtypes.code_of_numpy(element_type)
    except (TypeError, ValueError, ImportError) as e:
        raise InvalidArgument(f"element_type {element_type!r}: {e}") from None


class OrtValue:
    """A tensor on a device. Build one with `ortvalue_from_numpy` or
    `ortvalue_from_shape_and_type`; IO bindings return them for bound outputs."""
    __slots__ = ("_value", "_device", "_provider")

    def __init__(self, value, device: str = "cpu", provider=None):
        self._value = value
        self._device = device
        self._provider = provider if provider is not None or device == "cpu" \
            else device_provider(device)

    # ---- construction (onnxruntime's static methods) --------------------------------------

    @staticmethod
    def ortvalue_from_numpy(numpy_obj, device_type="cpu", device_id=0, vendor_id=-1):
        """On "cpu" the OrtValue holds the array itself (no copy, as onnxruntime); on
        "webgpu" the array is uploaded to the shared GPU device (one upload)."""
        device = check_device(device_type, device_id)
        value = numpy_obj
        if not isinstance(value, HostTensor):
            import numpy as np

            value = np.asarray(value)
            if device != "cpu":
                value = np.ascontiguousarray(value)
        if device == "cpu":
            return OrtValue(value)
        provider = device_provider(device)
        return OrtValue(provider.to_device(value), device, provider)

    @staticmethod
    def ortvalue_from_shape_and_type(shape=None, element_type=None, device_type="cpu",
                                     device_id=0, vendor_id=-1):
        """A zero-filled tensor of `shape` and `element_type` on the device."""
        if shape is None:
            raise InvalidArgument("ortvalue_from_shape_and_type needs a shape")
        import numpy as np

        code = element_code(element_type if element_type is not None else np.float32)
        try:
            dims = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise InvalidArgument(f"shape must be a list of ints, got {shape!r}") from None
        if any(d < 0 for d in dims):
            raise InvalidArgument(f"shape must not have negative dimensions, got {list(dims)}")
        return OrtValue.ortvalue_from_numpy(np.zeros(dims, dtype=dtypes.numpy_dtype(code)),
                                           device_type, device_id)

    # ---- onnxruntime's accessors ----------------------------------------------------------

    def numpy(self):
        """The value on the host: for "cpu" the array itself, else a copy read back from the
        device (one download, which waits for the device's pending work)."""
        if self._value is None:
            raise InvalidArgument("this OrtValue holds no value (an absent optional)")
        if self._provider is None:
            return self._value
        return self._provider.to_host(self._value)

    def device_name(self) -> str:
        return self._device

    def shape(self) -> list:
        return [int(d) for d in self._value.shape]

    def element_type(self) -> int:
        """The ONNX element type code (1 for float), as onnxruntime returns it."""
        return _element_type_of(self._value)

    def data_type(self) -> str:
        """'tensor(float)' and the like."""
        return dtypes.type_string(self.element_type())

    def is_tensor(self) -> bool:
        return self._value is not None

    def has_value(self) -> bool:
        return self._value is not None

    def data_ptr(self) -> int:
        """The address of a "cpu" value's data; device buffers have no host address."""
        if self._device != "cpu":
            raise InvalidArgument(f"a '{self._device}' value has no host address; read it "
                                  f"with numpy()")
        return self._value.ctypes.data

    def update_inplace(self, np_arr) -> None:
        """Overwrite the value with `np_arr` (same shape and element type)."""
        import numpy as np

        np_arr = np.asarray(np_arr)
        if list(np_arr.shape) != self.shape() or \
                dtypes.code_of_numpy(np_arr.dtype) != self.element_type():
            raise InvalidArgument(f"update_inplace: expected {self.data_type()} "
                                  f"{self.shape()}, got numpy {np_arr.dtype} {list(np_arr.shape)}")
        if self._device == "cpu":
            np.copyto(self._value, np_arr)
        else:
            self._value = self._provider.to_device(np.ascontiguousarray(np_arr))

    def _assign(self, other: "OrtValue") -> None:
        """Take `other`'s value (an output bound to this OrtValue): "cpu" values are copied
        into this array, whose memory callers may hold; device values are adopted."""
        if self._device == "cpu" and self._value is not None and not isinstance(
                self._value, HostTensor):
            got = other.numpy()
            if list(got.shape) != self.shape() or _element_type_of(got) != self.element_type():
                raise InvalidArgument(
                    f"the bound output OrtValue is {self.data_type()} {self.shape()} but the "
                    f"output is {dtypes.type_string(_element_type_of(got))} {list(got.shape)}")
            import numpy as np

            np.copyto(self._value, got)
            return
        self._value, self._device, self._provider = other._value, other._device, other._provider

    def __repr__(self) -> str:
        if self._value is None:
            return f"OrtValue(None, device='{self._device}')"
        return f"OrtValue({self.data_type()}, {self.shape()}, device='{self._device}')"


def _element_type_of(value) -> int:
    if isinstance(value, HostTensor):
        return value.elem_type
    dtype = value.dtype
    if isinstance(dtype, str):              # GpuTensor / GpuTensorParts: the numpy name
        return dtypes.BY_NUMPY[dtype].code
    return dtypes.code_of_numpy(dtype)
