"""The parameter types of a WebAssembly module's exported functions, read from its bytes.

A recorded program (program.py) stores every argument as a 32-bit word, so it must know
which parameters are f32 (stored as their bits) and which are i32. Neither host can say:
JavaScript's WebAssembly API has no type reflection. The module's own type, import,
function and export sections do, so they are read here (the binary format's section layout,
https://webassembly.github.io/spec/core/binary/modules.html).

    export_signatures(wasm_bytes)
    # -> {"er_unary": (("i32", "i32", "i32", "i32", "f32", "f32"), ()), ...}
"""
from __future__ import annotations

from typing import Optional

VALUE_TYPES = {0x7F: "i32", 0x7E: "i64", 0x7D: "f32", 0x7C: "f64", 0x7B: "v128",
               0x70: "funcref", 0x6F: "externref"}
TYPE, IMPORT, FUNCTION, EXPORT = 1, 2, 3, 7


class _Reader:
    def __init__(self, data: bytes, pos: int = 0, end: Optional[int] = None):
        self.data, self.pos = data, pos
        self.end = len(data) if end is None else end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise ValueError("truncated WebAssembly module")
        self.pos += 1
        return self.data[self.pos - 1]

    def u32(self) -> int:
        value, shift = 0, 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def name(self) -> str:
        n = self.u32()
        self.pos += n
        return self.data[self.pos - n:self.pos].decode("utf-8")

    def limits(self) -> None:
        flags = self.u32()
        self.u32()
        if flags & 1:
            self.u32()


def export_signatures(wasm: bytes) -> dict:
    """{export name: (parameter types, result types)} for every exported function."""
    if wasm[:4] != b"\0asm":
        raise ValueError("not a WebAssembly module")
    types, functions, exports = [], [], {}
    r = _Reader(wasm, 8)
    while r.pos < r.end:
        section, size = r.byte(), r.u32()
        s = _Reader(wasm, r.pos, r.pos + size)
        r.pos += size
        if section == TYPE:
            for _ in range(s.u32()):
                if s.byte() != 0x60:
                    raise ValueError("unexpected entry in the type section")
                params = tuple(VALUE_TYPES[s.byte()] for _ in range(s.u32()))
                results = tuple(VALUE_TYPES[s.byte()] for _ in range(s.u32()))
                types.append((params, results))
        elif section == IMPORT:
            for _ in range(s.u32()):
                s.name(), s.name()
                kind = s.byte()
                if kind == 0:                  # a function: its type index
                    functions.append(s.u32())
                elif kind == 1:                # a table: element type and limits
                    s.byte()
                    s.limits()
                elif kind == 2:                # a memory
                    s.limits()
                else:                          # a global: value type and mutability
                    s.byte(), s.byte()
        elif section == FUNCTION:
            functions += [s.u32() for _ in range(s.u32())]
        elif section == EXPORT:
            for _ in range(s.u32()):
                name, kind, index = s.name(), s.byte(), s.u32()
                if kind == 0:
                    exports[name] = index
    return {name: types[functions[index]] for name, index in exports.items()}
