/* Codecs of the narrow element types: the four float8 formats, float8e8m0 (a bare exponent),
 * float4e2m1, and the sub-byte integers. In linear memory every narrow value takes one byte,
 * in its low bits (ml_dtypes' layout; the host packs and unpacks ONNX's packed form).
 *
 * Encoding rounds to nearest, ties to even, from the double. Out-of-range values follow
 * ml_dtypes' astype unless saturating (Cast's default): NaN for the fn/fnuz formats, inf
 * for e5m2; saturation clamps to the largest finite value first.
 */
#ifndef EDGERUN_NARROW_H
#define EDGERUN_NARROW_H

#include "dmath.h"

/* a small float format: exponent and mantissa bits, exponent bias, and its special codes */
typedef struct {
    i32 man_bits, bias, max_code;   /* max_code: the largest finite positive code */
    i32 has_inf;                    /* e5m2: exponent all ones is inf/NaN (IEEE) */
    i32 unsigned_zero;              /* fnuz: one zero, and 0x80 is the only NaN */
    i32 nan_code;                   /* the positive NaN, or -1 when the format has none */
} SmallFloat;

static const SmallFloat F8E4M3FN = {3, 7, 0x7E, 0, 0, 0x7F};
static const SmallFloat F8E4M3FNUZ = {3, 8, 0x7F, 0, 1, 0x80};
static const SmallFloat F8E5M2 = {2, 15, 0x7B, 1, 0, 0x7E};
static const SmallFloat F8E5M2FNUZ = {2, 16, 0x7F, 0, 1, 0x80};
static const SmallFloat F4E2M1 = {1, 1, 0x7, 0, 0, -1};

static inline double small_float_max(const SmallFloat *f) {
    i32 e = f->max_code >> f->man_bits, m = f->max_code & ((1 << f->man_bits) - 1);
    return ((1 << f->man_bits) + m) * d_pow2(e - f->bias - f->man_bits);
}

static inline double small_float_decode(const SmallFloat *f, uint32_t code, i32 bits) {
    uint32_t sign_bit = 1u << (bits - 1), body = code & (sign_bit - 1);
    if (f->unsigned_zero && code == sign_bit) return __builtin_nan("");
    if (f->nan_code >= 0 && !f->unsigned_zero && body == (uint32_t)f->nan_code &&
        !f->has_inf) return __builtin_nan("");
    i32 e = (i32)(body >> f->man_bits), m = (i32)(body & ((1u << f->man_bits) - 1));
    if (f->has_inf && e == (1 << (bits - 1 - f->man_bits)) - 1)
        return m ? __builtin_nan("") : ((code & sign_bit) ? -__builtin_inf() : __builtin_inf());
    double v = e == 0 ? m * d_pow2(1 - f->bias - f->man_bits)
                      : ((1 << f->man_bits) + m) * d_pow2(e - f->bias - f->man_bits);
    return (code & sign_bit) ? -v : v;
}

/* float4e2m1 has neither NaN nor inf: ml_dtypes saturates and sends NaN to -0 */
static inline uint32_t small_float_encode(const SmallFloat *f, double v, i32 bits,
                                          i32 saturate) {
    uint32_t sign_bit = 1u << (bits - 1);
    int negative = v < 0 || (v == 0 && (d_bits(v) >> 63));
    uint32_t sign = negative ? sign_bit : 0;
    if (d_isnan(v))
        return f->nan_code < 0 ? sign_bit : f->unsigned_zero ? (uint32_t)f->nan_code
                                                              : sign | (uint32_t)f->nan_code;
    double a = __builtin_fabs(v), top = small_float_max(f);
    if (f->nan_code < 0) saturate = 1;
    if (a > top) {
        if (saturate) a = top;
        else if (f->has_inf) return sign | (uint32_t)(f->max_code + 1);     /* inf */
        else return f->unsigned_zero ? (uint32_t)f->nan_code : sign | (uint32_t)f->nan_code;
    }
    i32 emin = 1 - f->bias;
    double quantum;
    if (a < d_pow2(emin)) {
        quantum = d_pow2(emin - f->man_bits);
    } else {
        i32 e = (i32)((d_bits(a) >> 52) & 0x7FF) - 1023;
        quantum = d_pow2(e - f->man_bits);
    }
    double n = __builtin_nearbyint(a / quantum);         /* ties to even */
    uint32_t code;
    if (a < d_pow2(emin)) {
        code = (uint32_t)n;                  /* subnormal; n == 2^m carries into exponent 1 */
    } else {
        i32 e = (i32)((d_bits(a) >> 52) & 0x7FF) - 1023;
        if (n == (double)(2 << f->man_bits)) { n /= 2; e++; }
        code = (uint32_t)((e + f->bias) << f->man_bits) | ((uint32_t)n - (1u << f->man_bits));
    }
    if (code > (uint32_t)f->max_code) {      /* rounded past the largest finite value */
        if (saturate) code = (uint32_t)f->max_code;
        else if (f->has_inf) return sign | (uint32_t)(f->max_code + 1);
        else return f->unsigned_zero ? (uint32_t)f->nan_code : sign | (uint32_t)f->nan_code;
    }
    if (code == 0 && f->unsigned_zero) return 0;
    return sign | code;
}

/* float8e8m0: 2^(c - 127); 0xFF is NaN */
static inline double e8m0_decode(uint8_t c) {
    return c == 0xFF ? __builtin_nan("") : d_pow2((i32)c - 127);
}

enum { E8M0_UP = 0, E8M0_DOWN, E8M0_NEAREST };

/* The float32 exponent byte of v, its dropped mantissa rounded as `mode` says; the sign is
 * ignored. NaN gives 0xFF; with saturate, inf and overflow give 0xFE. */
static inline uint8_t e8m0_encode(double v, i32 saturate, i32 mode) {
    float f = (float)v;
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    uint32_t exponent = (u >> 23) & 0xFF, mantissa = u & 0x7FFFFF;
    if (exponent == 0xFF) return (mantissa || !saturate) ? 0xFF : 0xFE;
    int bump = mode == E8M0_UP ? mantissa != 0
             : mode == E8M0_DOWN ? 0
             : (mantissa & 0x400000) && ((mantissa & 0x3FFFFF) || exponent > 0);
    if (saturate && exponent >= 0xFE) bump = 0;
    return (uint8_t)(exponent + (uint32_t)bump);
}

#endif
