/* ONNX element types in linear memory: their codes, and loads and stores of one element
 * through a 64-bit integer or a double (Cast, comparisons and Where on any numeric type).
 */
#ifndef EDGERUN_ELEMTYPES_H
#define EDGERUN_ELEMTYPES_H

#include "narrow.h"

/* ONNX element type codes */
enum { T_F32 = 1, T_U8 = 2, T_I8 = 3, T_U16 = 4, T_I16 = 5, T_I32 = 6, T_I64 = 7, T_BOOL = 9,
       T_F16 = 10, T_F64 = 11, T_U32 = 12, T_U64 = 13, T_BF16 = 16, T_F8E4M3FN = 17,
       T_F8E4M3FNUZ = 18, T_F8E5M2 = 19, T_F8E5M2FNUZ = 20, T_U4 = 21, T_I4 = 22,
       T_F4E2M1 = 23, T_F8E8M0 = 24, T_U2 = 25, T_I2 = 26 };

static inline int is_float_type(i32 t) {
    return t == T_F32 || t == T_F64 || t == T_F16 || t == T_BF16 ||
           (t >= T_F8E4M3FN && t <= T_F8E5M2FNUZ) || t == T_F4E2M1 || t == T_F8E8M0;
}

/* the small float format of a narrow float type (not e8m0), else 0 */
static inline const SmallFloat *small_float(i32 t) {
    switch (t) {
    case T_F8E4M3FN: return &F8E4M3FN;
    case T_F8E4M3FNUZ: return &F8E4M3FNUZ;
    case T_F8E5M2: return &F8E5M2;
    case T_F8E5M2FNUZ: return &F8E5M2FNUZ;
    case T_F4E2M1: return &F4E2M1;
    default: return 0;
    }
}

static inline double load_float(const void *p, i32 i, i32 t) {
    switch (t) {
    case T_F32: return ((const float *)p)[i];
    case T_F16: return f16_to_double(((const uint16_t *)p)[i]);
    case T_BF16: return bf16_to_double(((const uint16_t *)p)[i]);
    case T_F64: return ((const double *)p)[i];
    case T_F8E8M0: return e8m0_decode(((const uint8_t *)p)[i]);
    default: return small_float_decode(small_float(t), ((const uint8_t *)p)[i],
                                       t == T_F4E2M1 ? 4 : 8);
    }
}

static inline i64 load_int(const void *p, i32 i, i32 t) {
    switch (t) {
    case T_U8: case T_BOOL: return ((const uint8_t *)p)[i];
    case T_I8: return ((const int8_t *)p)[i];
    case T_U16: return ((const uint16_t *)p)[i];
    case T_U4: return ((const uint8_t *)p)[i] & 15;
    case T_I4: return (int8_t)(((const uint8_t *)p)[i] << 4) >> 4;
    case T_U2: return ((const uint8_t *)p)[i] & 3;
    case T_I2: return (int8_t)(((const uint8_t *)p)[i] << 6) >> 6;
    case T_I16: return ((const int16_t *)p)[i];
    case T_I32: return ((const i32 *)p)[i];
    case T_U32: return ((const uint32_t *)p)[i];
    default: return ((const i64 *)p)[i];      /* T_I64, T_U64 (bits kept) */
    }
}

/* element i of an 8-bit integer tensor (uint8 when type is T_U8, else int8): the integer
 * kernels' load, without load_int's switch over every type */
static inline i32 load8(const void *p, i64 i, i32 type) {
    return type == T_U8 ? ((const uint8_t *)p)[i] : ((const int8_t *)p)[i];
}

/* 16 consecutive 8-bit integers (uint8 when type is T_U8, else int8) as four i32x4 */
static inline void widen16_to_i32x4(const uint8_t *p, i32 type, v128_t q[4]) {
    v128_t v = wasm_v128_load(p);
    v128_t lo = type == T_U8 ? wasm_u16x8_extend_low_u8x16(v) : wasm_i16x8_extend_low_i8x16(v);
    v128_t hi = type == T_U8 ? wasm_u16x8_extend_high_u8x16(v) : wasm_i16x8_extend_high_i8x16(v);
    q[0] = wasm_i32x4_extend_low_i16x8(lo);
    q[1] = wasm_i32x4_extend_high_i16x8(lo);
    q[2] = wasm_i32x4_extend_low_i16x8(hi);
    q[3] = wasm_i32x4_extend_high_i16x8(hi);
}

/* float8, float4 and e8m0 codes, saturating (Cast's default; er_cast takes the others) */
static inline void store_narrow_float(void *p, i32 i, i32 t, double v) {
    ((uint8_t *)p)[i] = t == T_F8E8M0 ? e8m0_encode(v, 1, E8M0_UP)
                      : (uint8_t)small_float_encode(small_float(t), v, t == T_F4E2M1 ? 4 : 8, 1);
}

/* Integers narrow by keeping the low bits (C's conversion, numpy's astype). */
static inline void store_int(void *p, i32 i, i32 t, i64 v) {
    switch (t) {
    case T_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case T_U8: case T_I8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case T_U16: case T_I16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case T_I32: case T_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case T_F32: ((float *)p)[i] = (float)v; break;
    case T_F64: ((double *)p)[i] = (double)v; break;
    case T_F16: ((uint16_t *)p)[i] = double_to_f16((double)v); break;
    case T_BF16: ((uint16_t *)p)[i] = double_to_bf16((double)v); break;
    case T_U4: case T_I4: ((uint8_t *)p)[i] = (uint8_t)(v & 15); break;
    case T_U2: case T_I2: ((uint8_t *)p)[i] = (uint8_t)(v & 3); break;
    case T_I64: case T_U64: ((i64 *)p)[i] = v; break;
    default: store_narrow_float(p, i, t, (double)v);
    }
}

/* Floats to integers truncate toward zero (saturating, NaN -> 0); to bool, nonzero -> 1. */
static inline void store_float(void *p, i32 i, i32 t, double v) {
    switch (t) {
    case T_F32: ((float *)p)[i] = (float)v; break;
    case T_F64: ((double *)p)[i] = v; break;
    case T_F16: ((uint16_t *)p)[i] = double_to_f16(v); break;
    case T_BF16: ((uint16_t *)p)[i] = double_to_bf16(v); break;
    case T_BOOL: ((uint8_t *)p)[i] = v != 0.0; break;
    case T_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    default:
        if (is_float_type(t)) store_narrow_float(p, i, t, v);
        else store_int(p, i, t, (i64)v);
    }
}

#endif
