"""Element-type conversion: Cast, CastLike and BitCast.

`cast_array(x, to, ...)` is the one conversion routine; other kernels (quantization) reuse it.
Plain numeric casts are numpy/ml_dtypes `astype`. What needs care:
- float8 targets saturate to the largest finite value unless `saturate=0`;
- float8e8m0 (a bare power-of-two exponent) has its own rounding modes;
- strings: numbers format as numpy's shortest round-trip repr ("0.47892547", "nan", "inf"),
  and parse case-insensitively, including "NaN", "INF", "+INF", "-INF" and "1e-5";
- sub-byte types (int4, uint2, float4e2m1, ...) live one value per byte in ml_dtypes arrays.
"""
from __future__ import annotations

import numpy as np

from ....ir import dtypes
from ..registry import kernel
from .float_errors import ignored_float_errors

FLOAT8_CODES = frozenset({dtypes.FLOAT8E4M3FN, dtypes.FLOAT8E4M3FNUZ,
                          dtypes.FLOAT8E5M2, dtypes.FLOAT8E5M2FNUZ})
FNUZ_CODES = frozenset({dtypes.FLOAT8E4M3FNUZ, dtypes.FLOAT8E5M2FNUZ})
# Types stored with fewer than 8 bits; ml_dtypes keeps them one per byte, in the low bits.
SIGNED_NARROW_CODES = frozenset({dtypes.INT4, dtypes.INT2})
NARROW_INT_CODES = frozenset({dtypes.INT4, dtypes.UINT4, dtypes.INT2, dtypes.UINT2})

_E8M0_ROUND_MODES = ("up", "down", "nearest")


def target_code(to) -> int:
    """The element type code of a `to` attribute: an int, or a name such as "FLOAT" (Cast-1)."""
    if isinstance(to, (bytes, str)):
        name = to.decode() if isinstance(to, bytes) else to
        t = dtypes.BY_NAME.get(name.upper())
        if t is None:
            raise ValueError(f"Cast: unknown type name {name!r} in 'to'")
        return t.code
    return int(to)


def cast_array(x: np.ndarray, to: int, saturate: bool = True, round_mode: str = "up",
               fnuz_inf_to_nan: bool = False) -> np.ndarray:
    """Convert `x` to ONNX element type `to` with Cast's semantics.

    `fnuz_inf_to_nan`: Cast 19..23 map +-inf to NaN for the FNUZ float8 types even when
    saturating; opset 24 changed that to +-max.
    """
    x = np.asarray(x)
    with ignored_float_errors():   # out-of-range casts are undefined
        return _cast(x, to, saturate, round_mode, fnuz_inf_to_nan)


def _cast(x, to, saturate, round_mode, fnuz_inf_to_nan):
    if to == dtypes.STRING:
        return _format_strings(x)
    if x.dtype == object or x.dtype.kind in ("U", "S"):
        x = _parse_strings(x, to)
    target = dtypes.numpy_dtype(to)
    if to in FLOAT8_CODES:
        return _to_float8(x, target, to, saturate, fnuz_inf_to_nan)
    if to == dtypes.FLOAT8E8M0:
        return _to_float8e8m0(x, saturate, round_mode)
    return _astype(x, target)


def _astype(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """`astype`, going through float32 (or int64) where ml_dtypes has no direct conversion."""
    if x.dtype == target:
        return x.copy()
    try:
        return x.astype(target)
    except (TypeError, ValueError):
        wide = np.int64 if x.dtype.kind in "iub" and target.kind in "iub" else np.float32
        return x.astype(wide).astype(target)


def _as_float(x: np.ndarray) -> np.ndarray:
    """`x` as a numpy float array (float32 unless it already is float16/32/64)."""
    if x.dtype in (np.float16, np.float32, np.float64):
        return x
    return x.astype(np.float64 if x.dtype.kind in "iu" and x.dtype.itemsize >= 4 else np.float32)


def _to_float8(x, target, to, saturate, fnuz_inf_to_nan):
    x = _as_float(x)
    if saturate:
        if fnuz_inf_to_nan and to in FNUZ_CODES:
            x = np.where(np.isinf(x), np.nan, x)
        import ml_dtypes

        limit = float(ml_dtypes.finfo(target).max)
        x = np.clip(x, -limit, limit)   # NaN passes through np.clip unchanged
    return x.astype(target)


def _to_float8e8m0(x, saturate: bool, round_mode: str) -> np.ndarray:
    """Keep the float32 exponent byte, rounding the dropped mantissa as `round_mode` says.

    The sign is ignored (negative inputs are undefined). NaN stays NaN (0xFF); with
    `saturate`, overflow and +-inf give the largest exponent (0xFE) instead of NaN.
    """
    import ml_dtypes

    if round_mode not in _E8M0_ROUND_MODES:
        raise ValueError(f"Cast: round_mode must be one of {_E8M0_ROUND_MODES}, got {round_mode!r}")
    bits = _as_float(x).astype(np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.int32)
    mantissa = bits & 0x7FFFFF
    is_special = exponent == 0xFF
    is_nan = is_special & (mantissa != 0)
    if round_mode == "up":
        bump = mantissa != 0
    elif round_mode == "down":
        bump = np.zeros(exponent.shape, bool)
    else:   # nearest, ties away from zero; float32 subnormals round down on a tie
        half = (mantissa & 0x400000) != 0
        bump = half & (((mantissa & 0x3FFFFF) != 0) | (exponent > 0))
    if saturate:
        bump &= exponent < 0xFE
    out = np.where(is_special, 0xFF, exponent + bump)
    if saturate:
        out = np.where(is_special & ~is_nan, 0xFE, out)
    return out.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)


def _format_strings(x: np.ndarray) -> np.ndarray:
    """Numbers to their shortest round-trip text in their own precision ("0.479" for float16)."""
    if x.dtype == object or x.dtype.kind in ("U", "S"):
        flat = [v.decode() if isinstance(v, bytes) else str(v) for v in x.reshape(-1).tolist()]
    elif dtypes.code_of_numpy(x.dtype) in NARROW_INT_CODES:
        flat = x.astype(np.int64).astype(np.str_).reshape(-1).tolist()
    elif dtypes.code_of_numpy(x.dtype) in dtypes.ML_DTYPES_CODES:
        flat = [_shortest_text(v, x.dtype) for v in x.reshape(-1)]
    else:   # numpy's own types already print the shortest round-trip text
        flat = x.astype(np.str_).reshape(-1).tolist()
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(x.shape)


def _shortest_text(value, dtype: np.dtype) -> str:
    """An ml_dtypes float as numpy prints floats: the fewest digits that read back to it."""
    number = float(value)
    if np.isfinite(number):
        for digits in range(1, 18):
            text = "%.*g" % (digits, number)
            if np.array(float(text)).astype(dtype) == value:
                number = float(text)
                break
    return str(np.float64(number))


def _parse_strings(x: np.ndarray, to: int) -> np.ndarray:
    """Text to numbers: a float64, int64/uint64 or bool array ready for the final cast."""
    flat = [v.decode() if isinstance(v, bytes) else str(v) for v in x.reshape(-1).tolist()]
    if to == dtypes.BOOL:
        return np.array([_parse_bool(s) for s in flat], dtype=bool).reshape(x.shape)
    target = dtypes.numpy_dtype(to)
    if target.kind in "iu":
        # Parsed as Python ints, exact for 64-bit values that a float64 detour would round;
        # bits above 64 are discarded like any out-of-range integer conversion.
        ints = [_parse_integer(s) % (1 << 64) for s in flat]
        return np.array(ints, dtype=np.uint64).astype(target).reshape(x.shape)
    return np.array(flat, dtype=np.str_).astype(np.float64).reshape(x.shape)


def _parse_integer(s: str) -> int:
    try:
        return int(s)
    except ValueError:
        number = float(s)   # "100.5" -> 100; the spec leaves this undefined
        return int(number) if np.isfinite(number) else 0


def _parse_bool(s: str) -> bool:
    low = s.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    return float(low) != 0.0


# Casts between these types need no care beyond astype: to itself (the input is returned:
# kernels never write their inputs), and from bool/integers to anything but float16 (which
# may overflow, with a warning).
_PLAIN_TARGETS = {code: np.dtype(name) for code, name in (
    (dtypes.FLOAT, "float32"), (dtypes.DOUBLE, "float64"), (dtypes.FLOAT16, "float16"),
    (dtypes.INT64, "int64"), (dtypes.INT32, "int32"), (dtypes.INT16, "int16"),
    (dtypes.INT8, "int8"), (dtypes.UINT8, "uint8"), (dtypes.UINT16, "uint16"),
    (dtypes.UINT32, "uint32"), (dtypes.UINT64, "uint64"), (dtypes.BOOL, "bool"))}


def _plain_cast(x, to):
    """The cast of `x` to `to` when it is a plain one (see _PLAIN_TARGETS), else None."""
    target = _PLAIN_TARGETS.get(to) if type(x) is np.ndarray else None
    if target is None:
        return None
    if x.dtype == target:
        return x
    if x.dtype.kind in "biu" and (target.kind != "f" or target.itemsize >= 4):
        return x.astype(target)
    return None


@kernel("Cast")
def cast_1(ctx, input, to):
    to = target_code(to)
    plain = _plain_cast(input, to)
    return plain if plain is not None else cast_array(input, to)


@kernel("Cast", since=19)
def cast_19(ctx, input, to, saturate=1):
    plain = _plain_cast(input, to)
    if plain is not None:
        return plain
    return cast_array(input, target_code(to), bool(saturate), fnuz_inf_to_nan=True)


@kernel("Cast", since=24)
def cast_24(ctx, input, to, saturate=1, round_mode="up"):
    plain = _plain_cast(input, to)
    if plain is not None:
        return plain
    return cast_array(input, target_code(to), bool(saturate), round_mode)


def _code_of(array: np.ndarray) -> int:
    return dtypes.code_of_numpy(np.asarray(array).dtype)


@kernel("CastLike", since=15)
def cast_like_15(ctx, input, target_type):
    return cast_array(input, _code_of(target_type))


@kernel("CastLike", since=19)
def cast_like_19(ctx, input, target_type, saturate=1):
    return cast_array(input, _code_of(target_type), bool(saturate), fnuz_inf_to_nan=True)


@kernel("CastLike", since=24)
def cast_like_24(ctx, input, target_type, saturate=1, round_mode="up"):
    return cast_array(input, _code_of(target_type), bool(saturate), round_mode)


@kernel("BitCast", since=26)
def bit_cast(ctx, input, to):
    """Reinterpret the bits of each element as type `to` (same bit width, same shape)."""
    source = _code_of(input)
    to = int(to)
    if dtypes.STRING in (source, to):
        raise TypeError("BitCast: string tensors have no bit pattern to reinterpret")
    source_bits, target_bits = dtypes.elem_type(source).bits, dtypes.elem_type(to).bits
    if source_bits != target_bits:
        raise ValueError(
            f"BitCast: {dtypes.elem_type(source).name} has {source_bits} bits but "
            f"{dtypes.elem_type(to).name} has {target_bits}; they must match")
    target = dtypes.numpy_dtype(to)
    x = input if input.flags.c_contiguous else input.copy()   # view() needs contiguous data
    if source_bits >= 8:
        return x.view(target).copy()
    # Narrow types: ml_dtypes keeps signed values sign-extended in the byte, so take the
    # low bits, then sign-extend again when the target is signed.
    raw = x.view(np.uint8) & np.uint8((1 << source_bits) - 1)
    if to in SIGNED_NARROW_CODES:
        signed = raw.astype(np.int8) - ((raw >> (source_bits - 1)).astype(np.int8) << source_bits)
        return signed.astype(target)
    return raw.view(target).copy()
