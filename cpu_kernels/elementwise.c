/* Elementwise float32 kernels whose numpy forms take many passes: GELU (erf form) and the
 * two passes of DynamicQuantizeLinear (the range of x; x quantized to uint8).
 *
 * Each computes exactly what the CPU provider's numpy path computes, operation for
 * operation in the same order and precision (compiled with -ffp-contract=off, so no fused
 * multiply-add), so results are equal bit for bit; only the passes are fewer. The loops are
 * plain C, vectorised by the compiler for the instruction set isa.c picks. */
#include <stdint.h>
#include <immintrin.h>
#include "isa.h"
#include "quantize_steps.h"

/* ---- GELU: x * Phi(x), Phi = 0.5 + x P(x^2) / Q(x^2) clipped to [0, 1] -------------------- */
/* providers/cpu/ops/erf.py's _gelu_block, whose fit the caller passes (p: 7 coefficients,
 * q: 5, lowest order first; x clipped to [-limit, limit] in float32 first). */
__attribute__((always_inline))
static inline void gelu_body(const float *x, float *y, int64_t n, const double *p,
                             const double *q, float limit) {
    for (int64_t i = 0; i < n; i++) {
        float s = x[i];
        double v = (double)(s < -limit ? -limit : (s > limit ? limit : s));
        double t = v * v;
        double num = t * p[6];
        num = num + p[5];
        for (int c = 4; c >= 0; c--) {
            num = num * t;
            num = num + p[c];
        }
        double den = t * q[4];
        den = den + q[3];
        for (int c = 2; c >= 0; c--) {
            den = den * t;
            den = den + q[c];
        }
        num = num * v;
        num = num / den;
        num = num + 0.5;
        num = num < 0.0 ? 0.0 : (num > 1.0 ? 1.0 : num);
        y[i] = (float)(num * (double)s);
    }
}
DISPATCHED(gelu, (const float *x, float *y, int64_t n, const double *p, const double *q, float limit),
           (x, y, n, p, q, limit))

/* ---- DynamicQuantizeLinear ------------------------------------------------------------- */
/* range[0] = max(x), range[1] = min(x) of n > 0 values, both NaN when any x is (numpy's
 * max and min). */
#define LANES 16
__attribute__((always_inline))
static inline void range_body(const float *x, int64_t n, float *range) {
    float high[LANES], low[LANES];
    uint32_t nan[LANES];        /* per lane, so that the loop vectorizes (an int OR of all the
                                 * lanes each step did not) */
    for (int j = 0; j < LANES; j++) {
        high[j] = low[j] = x[0];
        nan[j] = 0;
    }
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        for (int j = 0; j < LANES; j++) {
            float v = x[i + j];
            high[j] = v > high[j] ? v : high[j];
            low[j] = v < low[j] ? v : low[j];
            nan[j] |= v != v;
        }
    }
    for (; i < n; i++) {
        float v = x[i];
        high[0] = v > high[0] ? v : high[0];
        low[0] = v < low[0] ? v : low[0];
        nan[0] |= v != v;
    }
    uint32_t any_nan = 0;
    for (int j = 0; j < LANES; j++) {
        high[0] = high[j] > high[0] ? high[j] : high[0];
        low[0] = low[j] < low[0] ? low[j] : low[0];
        any_nan |= nan[j];
    }
    range[0] = any_nan ? __builtin_nanf("") : high[0];
    range[1] = any_nan ? __builtin_nanf("") : low[0];
}

/* y = q + z as 8-bit values (int8 stored as its byte). */
__attribute__((always_inline))
static inline void quantize_body(const float *x, int64_t n, float scale, int32_t z, int32_t low,
                                 int32_t high, uint8_t *y) {
    float lo = (float)(low - z), hi = (float)(high - z), zf = (float)z;
    for (int64_t i = 0; i < n; i++) y[i] = (uint8_t)(int32_t)(STEPS(x[i], scale, lo, hi) + zf);
}
DISPATCHED(quantize, (const float *x, int64_t n, float scale, int32_t z, int32_t low, int32_t high,
                      uint8_t *y), (x, n, scale, z, low, high, y))

/* The pair without the 8-bit tensor. */
__attribute__((always_inline))
static inline void quantize_dequantize_body(const float *x, int64_t n, float scale, int32_t z,
                                            int32_t low, int32_t high, float *y) {
    float lo = (float)(low - z), hi = (float)(high - z);
    for (int64_t i = 0; i < n; i++) y[i] = QUANTIZE_DEQUANTIZE(x[i], scale, lo, hi);
}
DISPATCHED(quantize_dequantize, (const float *x, int64_t n, float scale, int32_t z, int32_t low,
                                 int32_t high, float *y), (x, n, scale, z, low, high, y))

/* y = (float(x) - z) * scale of 8-bit x (signed: int8). */
__attribute__((always_inline))
static inline void dequantize_body(const uint8_t *x, int64_t n, int is_signed, int32_t z,
                                   float scale, float *y) {
    float zf = (float)z;
    if (is_signed) {
        const int8_t *s = (const int8_t *)x;
        for (int64_t i = 0; i < n; i++) y[i] = ((float)s[i] - zf) * scale;
    } else {
        for (int64_t i = 0; i < n; i++) y[i] = ((float)x[i] - zf) * scale;
    }
}
DISPATCHED(dequantize, (const uint8_t *x, int64_t n, int is_signed, int32_t z, float scale, float *y),
           (x, n, is_signed, z, scale, y))

/* y = table[x] of bytes x (an 8-bit code's byte, int8's as well): com.edgerun LookupTable.
 * With VBMI, 64 bytes at a time: two 128-entry permutes (the byte's low 7 bits index the
 * table's lower or upper half), and its high bit picks between them. */
TARGET_VBMI static void lookup_table_vbmi(const uint8_t *x, int64_t n, const uint8_t *table,
                                          uint8_t *y) {
    const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
    const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
    for (int64_t i = 0; i < n; i += 64) {
        const __mmask64 valid = n - i >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (n - i)) - 1;
        const __m512i v = _mm512_maskz_loadu_epi8(valid, x + i);
        const __m512i low = _mm512_permutex2var_epi8(t0, v, t1);
        const __m512i high = _mm512_permutex2var_epi8(t2, v, t3);
        const __m512i r = _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), low, high);
        _mm512_mask_storeu_epi8(y + i, valid, r);
    }
}

EXPORT void er_cpu_lookup_table(const uint8_t *x, int64_t n, const uint8_t *table, uint8_t *y) {
    if (cpu_vbmi()) {
        lookup_table_vbmi(x, n, table, y);
        return;
    }
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint8_t a = table[x[i]], b = table[x[i + 1]], c = table[x[i + 2]], d = table[x[i + 3]];
        y[i] = a; y[i + 1] = b; y[i + 2] = c; y[i + 3] = d;
    }
    for (; i < n; i++) y[i] = table[x[i]];
}

/* DynamicQuantizeLinear whole: the range of x widened to 0 (NaN counts as 0), scale =
 * (high - low) / 255 (1 when the range is empty), zero point = rint(clip(-low / scale, 0,
 * 255)), then x quantized: quantization.py's dynamic_quantize_linear, in float32. */
__attribute__((always_inline))
static inline void dynamic_quantize_body(const float *x, int64_t n, uint8_t *y, float *scale_out,
                                         uint8_t *zero_out) {
    float range[2] = {0.0f, 0.0f};
    if (n) range_body(x, n, range);
    float high = range[0] > 0.0f ? range[0] : 0.0f;
    float low = range[1] < 0.0f ? range[1] : 0.0f;
    float scale = high != low ? (high - low) / 255.0f : 1.0f;
    float zero = 0.0f - low / scale;
    zero = __builtin_rintf(zero < 0.0f ? 0.0f : (zero > 255.0f ? 255.0f : zero));
    *scale_out = scale;
    *zero_out = (uint8_t)(int32_t)zero;
    quantize_body(x, n, scale, (int32_t)zero, 0, 255, y);
}
DISPATCHED(dynamic_quantize, (const float *x, int64_t n, uint8_t *y, float *scale_out,
                              uint8_t *zero_out), (x, n, y, scale_out, zero_out))

/* ---- LayerNormalization over the last d values of each row, float32 -------------------- */
/* The row's mean and variance are summed in double (numpy's float32 sums round more), then
 * applied as the numpy path does in float32: y = (x - mean) * inv_std_dev * scale + bias. */
__attribute__((always_inline))
static inline void layer_norm_body(const float *x, int64_t rows, int64_t d, const float *scale,
                                   const float *bias, float epsilon, float *y) {
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * d;
        float *out = y + r * d;
        double sums[LANES] = {0}, squares[LANES] = {0};     /* lanes: vectorised sums */
        int64_t i = 0;
        for (; i + LANES <= d; i += LANES)
            for (int j = 0; j < LANES; j++) sums[j] += row[i + j];
        for (; i < d; i++) sums[0] += row[i];
        for (int j = 1; j < LANES; j++) sums[0] += sums[j];
        float mean = (float)(sums[0] / (double)d);
        for (i = 0; i + LANES <= d; i += LANES) {
            for (int j = 0; j < LANES; j++) {
                double c = (double)(row[i + j] - mean);
                squares[j] += c * c;
            }
        }
        for (; i < d; i++) {
            double c = (double)(row[i] - mean);
            squares[0] += c * c;
        }
        for (int j = 1; j < LANES; j++) squares[0] += squares[j];
        float variance = (float)(squares[0] / (double)d);
        float inv = 1.0f / __builtin_sqrtf(variance + epsilon);
        for (int64_t i = 0; i < d; i++) {
            float v = (row[i] - mean) * inv * scale[i];
            out[i] = bias ? v + bias[i] : v;
        }
    }
}
DISPATCHED(layer_norm, (const float *x, int64_t rows, int64_t d, const float *scale,
                        const float *bias, float epsilon, float *y),
           (x, rows, d, scale, bias, epsilon, y))

/* ---- Add, Sub, Mul, Div of two float32 tensors, for a split over the native pool -------- */
/* y = a op b (op 0 add, 1 sub, 2 mul, 3 div) over `rows` rows of `cols` values: b holds
 * a's layout (period 0) or one value per row, row r (counted from first_row) taking
 * b[r % period] (a per-channel scale or bias of (N, C, H, W) values). One IEEE operation a
 * value: numpy's bits. */
__attribute__((always_inline))
static inline void binary_rows_body(const float *a, const float *b, float *y, int64_t rows,
                                    int64_t cols, int64_t period, int64_t first_row, int op) {
    for (int64_t r = 0; r < rows; r++) {
        const float *ar = a + r * cols;
        float *yr = y + r * cols;
        if (period == 0) {
            const float *br = b + r * cols;
            switch (op) {
            case 0: for (int64_t i = 0; i < cols; i++) yr[i] = ar[i] + br[i]; break;
            case 1: for (int64_t i = 0; i < cols; i++) yr[i] = ar[i] - br[i]; break;
            case 2: for (int64_t i = 0; i < cols; i++) yr[i] = ar[i] * br[i]; break;
            default: for (int64_t i = 0; i < cols; i++) yr[i] = ar[i] / br[i]; break;
            }
        } else {
            const float v = b[(first_row + r) % period];
            switch (op) {
            case 0: for (int64_t i = 0; i < cols; i++) yr[i] = ar[i] + v; break;
            case 1: for (int64_t i = 0; i < cols; i++) yr[i] = ar[i] - v; break;
            case 2: for (int64_t i = 0; i < cols; i++) yr[i] = ar[i] * v; break;
            default: for (int64_t i = 0; i < cols; i++) yr[i] = ar[i] / v; break;
            }
        }
    }
}
DISPATCHED(binary_rows, (const float *a, const float *b, float *y, int64_t rows, int64_t cols,
                         int64_t period, int64_t first_row, int op),
           (a, b, y, rows, cols, period, first_row, op))

EXPORT int er_cpu_binary_rows_record(const uint64_t *a) {
    er_cpu_binary_rows(WORD(const float *, 0), WORD(const float *, 1), WORD(float *, 2),
                       WORD(int64_t, 3), WORD(int64_t, 4), WORD(int64_t, 5), WORD(int64_t, 6),
                       WORD(int, 7));
    return 0;
}
