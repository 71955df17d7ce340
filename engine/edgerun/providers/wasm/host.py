"""The host of the kernels' WebAssembly module: the only code that touches the runtime.

The provider needs five things from a host, nothing more:

    host = WasmtimeHost(wasm_bytes)   # instantiate
    host.call("er_unary", op, x, y, n, p0, p1)   # call an export (ints and floats)
    ptr = host.alloc(nbytes); host.free(ptr)     # blocks of linear memory (er_alloc/er_free)
    host.write(ptr, data)             # copy a bytes-like object into linear memory
    host.read(ptr, nbytes)            # a bytearray copied out of linear memory

Linear memory only grows inside er_alloc, so `alloc` is where a host refreshes its view of
memory. `WasmtimeHost` (here) runs natively; `JsHost` (host_js.py) implements the same five
inside Pyodide over the JS engine's own `WebAssembly`: synchronous `new WebAssembly.Module`
/ `Instance`, calls through `instance.exports`, copies with `Uint8Array.assign` /
`assign_to`, and a new view of `memory.buffer` whenever growth detached the old one.
"""
from __future__ import annotations

from typing import Any

import atexit
import ctypes

_EXITING: list = []    # set at interpreter exit: the runtime may be gone, frees are skipped
atexit.register(_EXITING.append, True)


class WasmHost:
    """The interface (see the module docstring)."""

    # how the GEMM micro-kernels broadcast (gemm.c, er_set_splat_loads): splat loads compile
    # better under V8, shuffles under wasmtime's Cranelift
    splat_loads = False

    def call(self, name: str, *args):
        raise NotImplementedError

    def alloc(self, nbytes: int) -> int:
        ptr = self.call("er_alloc", max(int(nbytes), 1))
        if not ptr:
            used = self.call("er_bytes_in_use")
            raise MemoryError(f"wasm linear memory cannot grow for {nbytes} more bytes "
                              f"({used} bytes in use, 4 GiB at most)")
        return ptr

    def free(self, ptr: int) -> None:
        if not _EXITING:
            self.call("er_free", ptr)

    def write(self, ptr: int, data) -> None:
        raise NotImplementedError

    def read(self, ptr: int, nbytes: int) -> bytearray:
        raise NotImplementedError


def wasmtime_available() -> tuple:
    try:
        import wasmtime  # noqa: F401
    except ImportError:
        return False, "wasmtime is not installed (pip install wasmtime==50.0.1)"
    return True, ""


class WasmtimeHost(WasmHost):
    """wasmtime (native): exports called through wasmtime-py, memory copied with ctypes."""

    def __init__(self, wasm_bytes: bytes):
        import wasmtime

        self._engine, module = _compiled(wasm_bytes)
        self._store = wasmtime.Store(self._engine)
        instance = wasmtime.Instance(self._store, module, [])
        exports = instance.exports(self._store)
        self._memory: Any = exports["memory"]
        store = self._store
        self._calls = {e.name: _bind(exports[e.name], store) for e in module.exports
                       if isinstance(exports[e.name], wasmtime.Func)}
        self.fast_calls = _fast_calls_supported()
        if self.fast_calls:
            self._calls = {name: _bind_unchecked(exports[name], store)
                           for name in self._calls}
        self._refresh()

    def _refresh(self) -> None:
        self._base = ctypes.addressof(self._memory.data_ptr(self._store).contents)
        self._size = self._memory.data_len(self._store)

    def call(self, name: str, *args):
        return self._calls[name](*args)

    def alloc(self, nbytes: int) -> int:
        ptr = super().alloc(nbytes) & 0xFFFFFFFF
        if ptr + nbytes > self._size:       # a new block past the end: memory grew
            self._refresh()
        return ptr

    def write(self, ptr: int, data) -> None:
        interface = getattr(data, "__array_interface__", None)
        if interface is not None and data.flags.c_contiguous:     # numpy: copy from its memory
            n = data.nbytes
            self._check(ptr, n)
            if n:
                ctypes.memmove(self._base + ptr, interface["data"][0], n)
            return
        view = memoryview(data).cast("B")
        n = view.nbytes
        self._check(ptr, n)
        if n:
            source = bytes(view) if view.readonly else (ctypes.c_char * n).from_buffer(view)
            ctypes.memmove(self._base + ptr, source, n)

    def read(self, ptr: int, nbytes: int) -> bytearray:
        self._check(ptr, nbytes)
        out = bytearray(nbytes)
        if nbytes:
            ctypes.memmove((ctypes.c_char * nbytes).from_buffer(out), self._base + ptr, nbytes)
        return out

    def _check(self, ptr: int, n: int) -> None:
        if ptr < 0 or ptr + n > self._size:
            raise IndexError(f"copy of {n} bytes at {ptr} is outside linear memory "
                             f"({self._size} bytes)")


_MODULES: dict = {}    # wasm bytes -> (engine, compiled module): compile once per process


def _compiled(wasm_bytes: bytes):
    import wasmtime

    if wasm_bytes not in _MODULES:
        config = wasmtime.Config()
        config.cranelift_opt_level = "speed"
        engine = wasmtime.Engine(config)
        _MODULES[wasm_bytes] = (engine, wasmtime.Module(engine, wasm_bytes))
    return _MODULES[wasm_bytes]


def _bind(func, store):
    """A plain callable for one export (wasmtime-py's checked call)."""
    return lambda *args: func(store, *args)


def _fast_calls_supported() -> bool:
    from wasmtime import _ffi as ffi
    return all(hasattr(ffi, n) for n in ("wasmtime_func_call_unchecked", "wasmtime_val_raw_t",
                                         "wasm_trap_t"))


def _bind_unchecked(func, store):
    """A callable for one export through wasmtime's unchecked call: the checked call spends
    ~10 us per call converting values; this one only fills a raw argument array. The
    argument kinds come from the export's type, so a wrong count still fails cleanly."""
    from wasmtime import Trap, WasmtimeError
    from wasmtime import _ffi as ffi

    ty = func.type(store)
    kinds = [str(t) for t in ty.params]
    unknown = set(kinds + [str(t) for t in ty.results]) - {"i32", "f32"}
    if unknown:
        return _bind(func, store)
    has_result = len(ty.results) == 1
    slots = ffi.wasmtime_val_raw_t * max(len(kinds), len(ty.results), 1)
    context, ref = store._context(), ctypes.byref(func._func)
    call_unchecked, trap_ptr = ffi.wasmtime_func_call_unchecked, ctypes.POINTER(ffi.wasm_trap_t)
    floats = [i for i, k in enumerate(kinds) if k == "f32"]
    ints = [i for i, k in enumerate(kinds) if k == "i32"]
    count = len(kinds)
    n = ctypes.sizeof(slots) // ctypes.sizeof(ffi.wasmtime_val_raw_t)

    def call(*args):
        if len(args) != count:
            raise TypeError(f"export takes {count} arguments, got {len(args)}")
        raw = slots()
        for i in ints:
            raw[i].i32 = args[i]
        for i in floats:
            raw[i].f32 = args[i]
        trap = trap_ptr()
        error = call_unchecked(context, ref, raw, n, ctypes.byref(trap))
        if error:
            raise WasmtimeError._from_ptr(error)
        if trap:
            raise Trap._from_ptr(trap)
        return raw[0].i32 if has_result else None
    return call
