/* Double-precision math, freestanding (no libm): exp, log, sin, cos, tan, atan, asin, acos,
 * the hyperbolic functions and their inverses, erf, and half/bfloat16 conversions.
 *
 * The typed elementwise kernels (map.c) compute every element type through these, float32
 * included where an operator has no SIMD loop. Each reduces its argument to a small interval
 * and sums a series there to about 1e-16 relative error; speed matters less than on the
 * float32 SIMD paths (vmath.h), which the common activations take.
 */
#ifndef EDGERUN_DMATH_H
#define EDGERUN_DMATH_H

#include "common.h"

#define D_PI 3.14159265358979323846
#define D_LN2 0.69314718055994530942

static inline uint64_t d_bits(double d) { uint64_t u; __builtin_memcpy(&u, &d, 8); return u; }
static inline double d_from_bits(uint64_t u) { double d; __builtin_memcpy(&d, &u, 8); return d; }
static inline int d_isnan(double x) { return x != x; }
static inline int d_isinf(double x) { return x == __builtin_inf() || x == -__builtin_inf(); }

/* 2^n for an integer n in [-1074, 1023] */
static inline double d_pow2(int n) {
    if (n >= -1022) return d_from_bits((uint64_t)(n + 1023) << 52);
    return d_from_bits(1ull << (n + 1074));
}

static inline double d_exp(double x) {
    if (d_isnan(x)) return x;
    if (x > 709.782712893384) return __builtin_inf();
    if (x < -745.2) return 0.0;
    double n = __builtin_nearbyint(x / D_LN2);
    double r = (x - n * 0.6931471803691238) - n * 1.9082149292705877e-10;
    double term = 1.0, sum = 1.0;
    for (int k = 1; k <= 14; k++) { term *= r / k; sum += term; }
    int e = (int)n;
    if (e < -1021) return sum * d_pow2(e + 60) * d_pow2(-60);   /* subnormal results */
    if (e > 1023) return sum * 2.0 * d_pow2(e - 1);
    return sum * d_pow2(e);
}

/* log(1 + x) to full precision near 0 and anywhere else */
static inline double d_log(double x) {
    if (d_isnan(x) || x < 0) return __builtin_nan("");
    if (x == 0) return -__builtin_inf();
    if (d_isinf(x)) return x;
    uint64_t u = d_bits(x);
    int e = 0;
    if ((u >> 52) == 0) { x *= d_pow2(54); u = d_bits(x); e = -54; }    /* subnormal */
    e += (int)(u >> 52) - 1023;
    double m = d_from_bits((u & ((1ull << 52) - 1)) | (1023ull << 52));   /* [1, 2) */
    if (m > 1.4142135623730951) { m *= 0.5; e++; }
    double s = (m - 1) / (m + 1), s2 = s * s, term = s, sum = 0;     /* 2 atanh(s) */
    for (int k = 1; k <= 41; k += 2) { sum += term / k; term *= s2; }
    return 2 * sum + e * D_LN2;
}

static inline double d_expm1(double x) {
    if (x > -0.5 && x < 0.5) {                /* the series: no cancellation near 0 */
        double term = x, sum = x;
        for (int k = 2; k <= 20; k++) { term *= x / k; sum += term; }
        return sum;
    }
    return d_exp(x) - 1;
}

static inline double d_log1p(double x) {
    if (x > -0.25 && x < 0.25) {              /* 2 atanh(x / (2 + x)) */
        double s = x / (2 + x), s2 = s * s, term = s, sum = 0;
        for (int k = 1; k <= 31; k += 2) { sum += term / k; term *= s2; }
        return 2 * sum;
    }
    return d_log(1 + x);
}

/* sin and cos of r in [-pi/4, pi/4] */
static inline double d_sin_small(double r) {
    double r2 = r * r, term = r, sum = r;
    for (int k = 1; k <= 11; k++) { term *= -r2 / ((2 * k) * (2 * k + 1)); sum += term; }
    return sum;
}

static inline double d_cos_small(double r) {
    double r2 = r * r, term = 1, sum = 1;
    for (int k = 1; k <= 11; k++) { term *= -r2 / ((2 * k - 1) * (2 * k)); sum += term; }
    return sum;
}

/* x = q pi/2 + r with |r| <= pi/4 (pi/2 in three parts: about 1e-16 relative error below
 * |x| = 1e5, 1e-8 near 1e9) */
static inline double d_reduce_half_pi(double x, int *q) {
    double n = __builtin_nearbyint(x * 0.63661977236758134308);
    *q = (int)((i64)n & 3);
    return ((x - n * 1.5707963267341256) - n * 6.077100506506192e-11) -
           n * 2.0222662487959506e-21;
}

static inline double d_sin(double x) {
    if (d_isnan(x) || d_isinf(x)) return __builtin_nan("");
    int q;
    double r = d_reduce_half_pi(x, &q);
    switch (q) {
    case 0: return d_sin_small(r);
    case 1: return d_cos_small(r);
    case 2: return -d_sin_small(r);
    default: return -d_cos_small(r);
    }
}

static inline double d_cos(double x) {
    if (d_isnan(x) || d_isinf(x)) return __builtin_nan("");
    int q;
    double r = d_reduce_half_pi(x, &q);
    switch (q) {
    case 0: return d_cos_small(r);
    case 1: return -d_sin_small(r);
    case 2: return -d_cos_small(r);
    default: return d_sin_small(r);
    }
}

static inline double d_tan(double x) {
    if (d_isnan(x) || d_isinf(x)) return __builtin_nan("");
    int q;
    double r = d_reduce_half_pi(x, &q);
    double s = d_sin_small(r), c = d_cos_small(r);
    return (q & 1) ? -c / s : s / c;
}

/* atan: |x| > 1 through pi/2 - atan(1/x), then atan(t) = pi/6 + atan((t sqrt3 - 1)/(t + sqrt3))
 * for t > tan(pi/12), leaving |t| <= 0.268 for the series */
static inline double d_atan(double x) {
    if (d_isnan(x)) return x;
    double sign = x < 0 ? -1 : 1, t = x * sign, offset = 0;
    int inverted = t > 1;
    if (inverted) t = 1 / t;
    if (t > 0.2679491924311227) {
        t = (t * 1.7320508075688772 - 1) / (t + 1.7320508075688772);
        offset = D_PI / 6;
    }
    double t2 = t * t, term = t, sum = 0;
    for (int k = 1; k <= 41; k += 2) { sum += term / k; term *= -t2; }
    sum += offset;
    if (inverted) sum = D_PI / 2 - sum;
    return sign * sum;
}

static inline double d_asin(double x) {
    if (d_isnan(x) || x > 1 || x < -1) return __builtin_nan("");
    if (x == 1 || x == -1) return x * (D_PI / 2);
    return d_atan(x / __builtin_sqrt((1 - x) * (1 + x)));
}

static inline double d_acos(double x) {
    if (d_isnan(x) || x > 1 || x < -1) return __builtin_nan("");
    if (x == -1) return D_PI;
    return 2 * d_atan(__builtin_sqrt((1 - x) / (1 + x)));
}

static inline double d_sinh(double x) {
    double a = __builtin_fabs(x);
    double v = a < 1 ? (d_expm1(a) - d_expm1(-a)) / 2 : (a > 709 ? d_exp(a - D_LN2)
                                                                   : (d_exp(a) - d_exp(-a)) / 2);
    return x < 0 ? -v : v;
}

static inline double d_cosh(double x) {
    double a = __builtin_fabs(x);
    return a > 709 ? d_exp(a - D_LN2) : (d_exp(a) + d_exp(-a)) / 2;
}

static inline double d_tanh(double x) {
    double a = __builtin_fabs(x);
    if (d_isnan(x)) return x;
    double v = a > 20 ? 1.0 : d_expm1(2 * a) / (d_expm1(2 * a) + 2);
    return x < 0 ? -v : v;
}

static inline double d_asinh(double x) {
    double a = __builtin_fabs(x);
    if (d_isnan(x) || d_isinf(x)) return x;
    double v = a > 1e150 ? d_log(a) + D_LN2
                         : d_log1p(a + a * a / (1 + __builtin_sqrt(1 + a * a)));
    return x < 0 ? -v : v;
}

static inline double d_acosh(double x) {
    if (d_isnan(x) || x < 1) return __builtin_nan("");
    if (x > 1e150) return d_log(x) + D_LN2;
    double t = x - 1;
    return d_log1p(t + __builtin_sqrt(2 * t + t * t));
}

static inline double d_atanh(double x) {
    if (d_isnan(x) || x > 1 || x < -1) return __builtin_nan("");
    if (x == 1 || x == -1) return x * __builtin_inf();
    double a = __builtin_fabs(x);
    double v = 0.5 * d_log1p(2 * a / (1 - a));
    return x < 0 ? -v : v;
}

/* erf: its Taylor series below |x| = 3 (terms stay below 200: error < 1e-13), and past it
 * 1 - erfc(x), erfc from its continued fraction
 * erfc(x) = e^(-x^2) / sqrt(pi) / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...)))) */
static inline double d_erf(double x) {
    if (d_isnan(x)) return x;
    double a = __builtin_fabs(x);
    if (a >= 3) {
        if (a > 6) return x < 0 ? -1 : 1;
        double k = a;
        for (int n = 60; n >= 1; n--) k = a + (n * 0.5) / k;
        double erfc = d_exp(-a * a) * 0.5641895835477563 / k;    /* 1 / sqrt(pi) */
        return x < 0 ? erfc - 1 : 1 - erfc;
    }
    double x2 = x * x, term = x, sum = x;
    for (int n = 1; n < 80; n++) {
        term *= -x2 / n;
        double add = term / (2 * n + 1);
        sum += add;
        if (__builtin_fabs(add) < 1e-17 * __builtin_fabs(sum)) break;
    }
    return sum * 1.1283791670955126;     /* 2 / sqrt(pi) */
}

/* ---- 16-bit floats -------------------------------------------------------------------- */

static inline double f16_to_double(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? m * d_pow2(-24)
             : e == 31 ? (m ? __builtin_nan("") : __builtin_inf())
             : (1024 + m) * d_pow2(e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Round to nearest, ties to even, straight from the double (numpy's astype). */
static inline uint16_t double_to_f16(double d) {
    uint64_t b = d_bits(d);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
    uint64_t a = b & 0x7fffffffffffffffull;
    if (a >= 0x7ff0000000000000ull) return sign | (a > 0x7ff0000000000000ull ? 0x7e00 : 0x7c00);
    int e = (int)(a >> 52) - 1023;
    if (e > 15) return sign | 0x7c00;
    if (e < -26) return sign;
    uint64_t m = (a & ((1ull << 52) - 1)) | (1ull << 52);
    int shift = e >= -14 ? 42 : 42 + (-14 - e);
    uint64_t keep = m >> shift, rest = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    if (rest > half || (rest == half && (keep & 1))) keep++;
    if (e < -14) return sign | (uint16_t)keep;        /* subnormal (or the smallest normal) */
    int exp = e + 15;
    if (keep == (1u << 11)) { keep >>= 1; exp++; }
    if (exp >= 31) return sign | 0x7c00;
    return sign | (uint16_t)(exp << 10) | (uint16_t)(keep & 0x3ff);
}

/* float16 -> float32, exact, without going through double: the 15 exponent/mantissa bits
 * move under float32's, the exponent is rebiased (127 - 15), infinities and NaNs get the
 * full exponent, and subnormals are renormalized by subtracting the implicit bit's value. */
static inline float f16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)(h & 0x7fff) << 13, exp = u & 0x0f800000u;
    float f;
    u += (127 - 15) << 23;
    if (exp == 0x0f800000u) {
        u += (128 - 16) << 23;                          /* inf, NaN */
    } else if (exp == 0) {                              /* zero, subnormal */
        u += 1u << 23;
        __builtin_memcpy(&f, &u, 4);
        f -= 6.103515625e-05f;                          /* 2^-14 */
        __builtin_memcpy(&u, &f, 4);
    }
    u |= (uint32_t)(h & 0x8000) << 16;
    __builtin_memcpy(&f, &u, 4);
    return f;
}

/* float32 -> float16, round to nearest even. Normal results (2^-14 <= |x| < 65520) drop 13
 * mantissa bits after rebiasing the exponent, the carry of a round-up moving into the
 * exponent as it should; zeros are kept; the rest (subnormals, overflow, inf, NaN) go the
 * exact way through double. */
static inline uint16_t f32_to_f16(float f) {
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    uint32_t a = u & 0x7fffffffu, sign = (u >> 16) & 0x8000u;
    if (a >= 0x38800000u && a < 0x477ff000u)
        return (uint16_t)(sign | ((a - (112u << 23) + 0xfffu + ((a >> 13) & 1)) >> 13));
    if (a == 0) return (uint16_t)sign;
    return double_to_f16((double)f);
}

static inline double bf16_to_double(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}

/* Through float32, then round to nearest even on the dropped 16 bits (NaN stays NaN). */
static inline uint16_t double_to_bf16(double d) {
    float f = (float)d;
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

#endif
