"""The kernels' module in the JavaScript engine's own WebAssembly, for Pyodide (browser, Node).

Inside Pyodide the Python interpreter is itself WebAssembly, so the kernels' module runs
beside it in the same JS engine (V8, SpiderMonkey, JSC), reached through Pyodide's FFI:

- instantiate synchronously (`new WebAssembly.Module(bytes)`, `new WebAssembly.Instance`):
  the module is ~50 KB, well under the size browsers allow on the main thread, and a
  synchronous host keeps the provider's interface the same everywhere. The compiled JS
  module is kept per process, so every session after the first only instantiates;
- exports are looked up once per name and called directly (ints and floats cross as JS
  numbers);
- copies go through a `Uint8Array` over the whole of `memory.buffer`: `subarray(ptr, end)
  .assign(data)` copies a Python buffer in and `.assign_to(bytearray)` copies out, with no
  intermediate objects. Growing memory (inside er_alloc) detaches the old `ArrayBuffer`:
  a copy past the known size, or through a detached view, makes a new view first.
"""
from __future__ import annotations

import sys

from .host import WasmHost

_MODULES: dict = {}      # wasm bytes -> compiled WebAssembly.Module (once per process)


def js_available() -> tuple:
    """(True, "") inside Pyodide with a WebAssembly engine, else (False, why not)."""
    if sys.platform != "emscripten":
        return False, "not running inside Pyodide (sys.platform is not 'emscripten')"
    try:
        import js
        js.WebAssembly.Module   # noqa: B018 - raises AttributeError when absent
    except (ImportError, AttributeError):
        return False, "this JavaScript engine has no WebAssembly object"
    return True, ""


class JsHost(WasmHost):
    """The host over the JS engine's `WebAssembly` (see the module docstring)."""

    splat_loads = True

    def __init__(self, wasm_bytes: bytes):
        import js

        from pyodide.ffi import JsException

        self._js = js
        self._detached = JsException
        module = _compiled(wasm_bytes)
        instance = js.WebAssembly.Instance.new(module, js.Object.new())
        self._exports = instance.exports
        self._memory = self._exports.memory
        self._calls: dict = {}
        self._refresh()

    @property
    def exports(self):
        """The module instance's exports (a JavaScript object: memory, er_run_program...)."""
        return self._exports

    def _refresh(self) -> None:
        self._bytes = self._js.Uint8Array.new(self._memory.buffer)
        self._size = self._bytes.length

    def call(self, name: str, *args):
        fn = self._calls.get(name)
        if fn is None:
            fn = getattr(self._exports, name, None)
            if fn is None:
                raise AttributeError(f"the wasm kernels export no function '{name}'")
            self._calls[name] = fn
        return fn(*args)

    def alloc(self, nbytes: int) -> int:
        return super().alloc(nbytes) & 0xFFFFFFFF     # JS returns i32 results signed

    def _view(self, ptr: int, n: int):
        if ptr + n > self._size:                      # memory may have grown since
            self._refresh()
        if ptr < 0 or ptr + n > self._size:
            raise IndexError(f"copy of {n} bytes at {ptr} is outside linear memory "
                             f"({self._size} bytes)")
        try:
            return self._bytes.subarray(ptr, ptr + n)
        except self._detached:                         # grown: the old buffer is detached
            self._refresh()
            return self._bytes.subarray(ptr, ptr + n)

    def write(self, ptr: int, data) -> None:
        view = memoryview(data).cast("B")
        if view.nbytes:
            self._view(ptr, view.nbytes).assign(view)

    def read(self, ptr: int, nbytes: int) -> bytearray:
        out = bytearray(nbytes)
        if nbytes:
            self._view(ptr, nbytes).assign_to(out)
        return out


def _compiled(wasm_bytes: bytes):
    import js
    from pyodide.ffi import to_js

    module = _MODULES.get(wasm_bytes)
    if module is None:
        module = js.WebAssembly.Module.new(to_js(wasm_bytes))
        _MODULES[wasm_bytes] = module
    return module
