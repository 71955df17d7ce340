/* Float32 math on 4 lanes, freestanding (no libm): exp, log, tanh, erf, sigmoid.
 *
 * Accuracy targets the ONNX conformance tolerances (rtol 1e-3, atol 1e-7): relative error
 * around 1e-7 everywhere, including near zero where tanh and erf are ~x (series there).
 */
#ifndef EDGERUN_VMATH_H
#define EDGERUN_VMATH_H

#include "common.h"

#define SPLAT(c) wasm_f32x4_splat(c)

/* max(x, lo) and min(x, hi) where a NaN x stays NaN: pmax / pmin (one maxps / minps on
 * x86). wasm's f32x4.max and .min propagate a NaN from either operand and order -0 below
 * +0, which costs V8 about eight instructions each on x86; with a constant bound only the
 * sign of a zero result can differ (pmax(-0, 0) is -0, as numpy's and onnxruntime's max). */
static inline __attribute__((always_inline)) v128_t v_at_least(v128_t x, v128_t lo) {
    return wasm_f32x4_pmax(x, lo);
}
static inline __attribute__((always_inline)) v128_t v_at_most(v128_t x, v128_t hi) {
    return wasm_f32x4_pmin(x, hi);
}
static inline __attribute__((always_inline)) v128_t v_clamp(v128_t x, v128_t lo, v128_t hi) {
    return v_at_most(v_at_least(x, lo), hi);
}

static inline __attribute__((always_inline)) v128_t v_poly(v128_t x, const float *c, int n) {   /* c[0] + c[1] x + ... */
    v128_t r = SPLAT(c[n - 1]);
    for (int i = n - 2; i >= 0; i--) r = wasm_f32x4_add(wasm_f32x4_mul(r, x), SPLAT(c[i]));
    return r;
}

/* e^x: x = n ln2 + r, |r| <= ln2/2, e^r by its Taylor series to r^7, times 2^n. */
static inline __attribute__((always_inline)) v128_t v_exp(v128_t x) {
    static const float c[8] = {1.0f, 1.0f, 0.5f, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720,
                               1.0f / 5040};
    v128_t underflow = wasm_f32x4_lt(x, SPLAT(-87.3f));
    x = v_clamp(x, SPLAT(-87.3f), SPLAT(88.7f));
    v128_t n = wasm_f32x4_nearest(wasm_f32x4_mul(x, SPLAT(1.44269504f)));
    v128_t r = wasm_f32x4_sub(x, wasm_f32x4_mul(n, SPLAT(0.693145751953125f)));
    r = wasm_f32x4_sub(r, wasm_f32x4_mul(n, SPLAT(1.428606765330187e-06f)));
    v128_t p = v_poly(r, c, 8);
    v128_t ni = wasm_i32x4_trunc_sat_f32x4(n);
    v128_t scale = wasm_i32x4_shl(wasm_i32x4_add(ni, wasm_i32x4_splat(127)), 23);
    /* n can reach 128 at the top of the range: multiply by 2^(n-1) twice over two steps */
    v128_t big = wasm_i32x4_gt(ni, wasm_i32x4_splat(126));
    v128_t half = wasm_i32x4_shl(wasm_i32x4_add(ni, wasm_i32x4_splat(126)), 23);
    v128_t out = wasm_f32x4_mul(p, wasm_v128_bitselect(half, scale, big));
    out = wasm_v128_bitselect(wasm_f32x4_mul(out, SPLAT(2.0f)), out, big);
    return wasm_v128_andnot(out, underflow);
}

/* ln x for x > 0 (x <= 0 gives -inf / nan): x = 2^e m, m in [sqrt(.5), sqrt(2)),
 * ln m = 2 atanh(s), s = (m-1)/(m+1), by its odd series to s^11. */
static inline __attribute__((always_inline)) v128_t v_log(v128_t x) {
    static const float c[6] = {2.0f, 2.0f / 3, 2.0f / 5, 2.0f / 7, 2.0f / 9, 2.0f / 11};
    v128_t bits = x;
    v128_t e = wasm_i32x4_sub(wasm_u32x4_shr(bits, 23), wasm_i32x4_splat(127));
    v128_t m = wasm_v128_or(wasm_v128_and(bits, wasm_i32x4_splat(0x007FFFFF)),
                            wasm_i32x4_splat(0x3F800000));
    v128_t high = wasm_f32x4_gt(m, SPLAT(1.41421356f));
    m = wasm_v128_bitselect(wasm_f32x4_mul(m, SPLAT(0.5f)), m, high);
    e = wasm_i32x4_sub(e, high);             /* high lanes are -1: e + 1 */
    v128_t s = wasm_f32x4_div(wasm_f32x4_sub(m, SPLAT(1.0f)), wasm_f32x4_add(m, SPLAT(1.0f)));
    v128_t s2 = wasm_f32x4_mul(s, s);
    v128_t lm = wasm_f32x4_mul(s, v_poly(s2, c, 6));
    v128_t r = wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_convert_i32x4(e), SPLAT(0.693147181f)),
                              lm);
    v128_t zero = wasm_f32x4_eq(x, SPLAT(0.0f));
    v128_t neg = wasm_f32x4_lt(x, SPLAT(0.0f));
    v128_t inf = wasm_f32x4_eq(x, SPLAT(__builtin_inff()));
    r = wasm_v128_bitselect(SPLAT(-__builtin_inff()), r, zero);
    r = wasm_v128_bitselect(SPLAT(__builtin_nanf("")), r, neg);
    r = wasm_v128_bitselect(x, r, inf);
    return r;
}

static inline __attribute__((always_inline)) v128_t v_sigmoid(v128_t x) {
    return wasm_f32x4_div(SPLAT(1.0f), wasm_f32x4_add(SPLAT(1.0f), v_exp(wasm_f32x4_neg(x))));
}

/* tanh: odd series to x^13 below 0.4, else 1 - 2/(e^2|x| + 1) with the sign restored. */
static inline __attribute__((always_inline)) v128_t v_tanh(v128_t x) {
    static const float c[7] = {1.0f, -1.0f / 3, 2.0f / 15, -17.0f / 315, 62.0f / 2835,
                               -1382.0f / 155925, 21844.0f / 6081075};
    v128_t ax = wasm_f32x4_abs(x);
    v128_t small = wasm_f32x4_mul(x, v_poly(wasm_f32x4_mul(x, x), c, 7));
    v128_t e = v_exp(wasm_f32x4_mul(ax, SPLAT(2.0f)));
    v128_t big = wasm_f32x4_sub(SPLAT(1.0f), wasm_f32x4_div(SPLAT(2.0f),
                                                              wasm_f32x4_add(e, SPLAT(1.0f))));
    big = wasm_v128_or(big, wasm_v128_and(x, wasm_i32x4_splat((int)0x80000000)));
    return wasm_v128_bitselect(small, big, wasm_f32x4_lt(ax, SPLAT(0.4f)));
}

/* erf: Maclaurin series to x^13 below 0.5; Abramowitz-Stegun 7.1.26 (|err| < 1.5e-7) above. */
static inline __attribute__((always_inline)) v128_t v_erf(v128_t x) {
    static const float s[7] = {1.12837917f, -0.37612639f, 0.11283792f, -0.02686617f,
                               0.00522398f, -0.00085483f, 0.00012055f};
    static const float a[6] = {0.0f, 0.254829592f, -0.284496736f, 1.421413741f, -1.453152027f,
                               1.061405429f};
    v128_t ax = wasm_f32x4_abs(x);
    v128_t small = wasm_f32x4_mul(x, v_poly(wasm_f32x4_mul(x, x), s, 7));
    v128_t t = wasm_f32x4_div(SPLAT(1.0f),
                              wasm_f32x4_add(SPLAT(1.0f), wasm_f32x4_mul(ax, SPLAT(0.3275911f))));
    v128_t p = v_poly(t, a, 6);
    v128_t e = v_exp(wasm_f32x4_neg(wasm_f32x4_mul(ax, ax)));
    v128_t big = wasm_f32x4_sub(SPLAT(1.0f), wasm_f32x4_mul(p, e));
    big = wasm_v128_or(big, wasm_v128_and(x, wasm_i32x4_splat((int)0x80000000)));
    return wasm_v128_bitselect(small, big, wasm_f32x4_lt(ax, SPLAT(0.5f)));
}

#endif
