"""Protocol-buffers wire format, the small subset ONNX needs: varints, fixed32/64 and
length-delimited fields. Pure Python so it runs inside Pyodide.

Reading walks a `memoryview` and yields `(field_number, wire_type, value)`; a truncated or
corrupt buffer raises `WireError`, which the ONNX reader turns into `InvalidProtobuf`.
"""
from __future__ import annotations

from typing import Any, Optional

import struct

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5

_UNPACK_F32 = struct.Struct("<f").unpack_from
_UNPACK_F64 = struct.Struct("<d").unpack_from


class WireError(ValueError):
    pass


def message(name: str, **numbers) -> dict:
    """A message's wire-type schema for `fields`: message("node", L=(1, 2), V=(5,)) says
    fields 1 and 2 are length-delimited and 5 a varint (P: packed or single varint, F32 /
    F64: packed or single fixed, as repeated scalars may be sent either way)."""
    kinds = {"L": (LENGTH,), "V": (VARINT,), "P": (LENGTH, VARINT), "F32": (LENGTH, FIXED32),
             "F64": (LENGTH, FIXED64), "S32": (FIXED32,)}
    schema: dict = {"name": name}
    for kind, field_numbers in numbers.items():
        for number in field_numbers:
            schema[number] = kinds[kind]
    return schema


def read_varint(buf: memoryview, pos: int, end: int) -> tuple:
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise WireError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def fields(buf: memoryview, schema: Optional[dict] = None, start: int = 0,
           end: Optional[int] = None):
    """Yield (field_number, wire_type, value) for each field of one message.

    value: int for VARINT, a memoryview slice for LENGTH, FIXED32 and FIXED64. `schema`
    (field number -> the wire types it may have) rejects a known field sent with another
    wire type, naming the message; unknown fields pass, as protobuf skips them.
    """
    if end is None:
        end = len(buf)
    pos = start
    while pos < end:
        # one-byte varints (nearly every key and length, most ints) are read inline: this
        # loop is most of a model's decoding, which in Pyodide is most of creating a session
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = read_varint(buf, pos, end)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0")
        if schema is not None and number in schema and wire_type not in schema[number]:
            raise WireError(f"{schema.get('name', 'message')} field {number} has wire type "
                            f"{wire_type}, expected {' or '.join(map(str, schema[number]))}")
        if wire_type == VARINT:
            value: Any = buf[pos] if pos < end else 0x80
            if value < 0x80:
                pos += 1
            else:
                value, pos = read_varint(buf, pos, end)
        elif wire_type == LENGTH:
            size = buf[pos] if pos < end else 0x80
            if size < 0x80:
                pos += 1
            else:
                size, pos = read_varint(buf, pos, end)
            if pos + size > end:
                raise WireError(f"field {number}: length {size} runs past the end of its message")
            value = buf[pos:pos + size]
            pos += size
        elif wire_type == FIXED32:
            if pos + 4 > end:
                raise WireError("truncated fixed32")
            value = buf[pos:pos + 4]
            pos += 4
        elif wire_type == FIXED64:
            if pos + 8 > end:
                raise WireError("truncated fixed64")
            value = buf[pos:pos + 8]
            pos += 8
        else:
            raise WireError(f"field {number}: unsupported wire type {wire_type}")
        yield number, wire_type, value


def to_signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def to_signed32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def packed_varints(wire_type: int, value) -> list:
    """A repeated varint field element: packed (LENGTH) or one unpacked value."""
    if wire_type == VARINT:
        return [value]
    out = []
    pos, end = 0, len(value)
    while pos < end:
        v, pos = read_varint(value, pos, end)
        out.append(v)
    return out


def packed_fixed(wire_type: int, value, fmt: str) -> list:
    """A repeated float/double field element (fmt 'f' or 'd'): packed or one value."""
    size = struct.calcsize(fmt)
    if len(value) % size:
        raise WireError(f"packed {fmt} field of {len(value)} bytes")
    return list(struct.unpack(f"<{len(value) // size}{fmt}", value))


def unpack_f32(value) -> float:
    return _UNPACK_F32(value)[0]


def unpack_f64(value) -> float:
    return _UNPACK_F64(value)[0]


# ---- writing -----------------------------------------------------------------------------

def varint(v: int) -> bytes:
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def key(number: int, wire_type: int) -> bytes:
    return varint((number << 3) | wire_type)


def field_varint(number: int, v: int) -> bytes:
    return key(number, VARINT) + varint(v)


def field_bytes(number: int, data) -> bytes:
    return key(number, LENGTH) + varint(len(data)) + bytes(data)


def field_str(number: int, s: str) -> bytes:
    return field_bytes(number, s.encode("utf-8"))


def field_f32(number: int, v: float) -> bytes:
    return key(number, FIXED32) + struct.pack("<f", v)


def field_packed_varints(number: int, values) -> bytes:
    return field_bytes(number, b"".join(varint(int(v)) for v in values))


def field_packed_fixed(number: int, values, fmt: str) -> bytes:
    return field_bytes(number, struct.pack(f"<{len(values)}{fmt}", *values))
