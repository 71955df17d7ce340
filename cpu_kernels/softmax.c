/* Softmax over contiguous rows, float32, in one call (providers/cpu/ops/softmax.py's numpy
 * path takes a maximum, a subtraction, an exp, a sum and a division, each a pass, and numpy
 * reduces short rows slowly: attention's [heads x 16 x 16] took ~30 us).
 *
 * Each row is shifted by its maximum (0 where that is infinite, as the numpy path: a row of
 * -inf stays NaN-free only there), exponentiated with fast_exp below, summed in float32 over
 * 16 lanes, and divided by the sum. fast_exp is within 2 ulp of expf, so results are within
 * ~1e-6 relative of the numpy path, not bit for bit. */
#include <stdint.h>
#include "isa.h"

/* e^x as 2^n e^r, x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two for an exact
 * product), e^r by its degree-6 Taylor-like minimax polynomial (Cephes' expf); 2^n built in
 * the exponent bits. x below -87.3 gives 0 (expf: subnormals down to 1e-45), above 88.7
 * +inf; NaN stays NaN. Vectorises, where a libm call per value does not. */
__attribute__((always_inline))
static inline float fast_exp(float x) {
    const float hi = 88.72283f, lo = -87.33654f;
    float v = x > hi ? hi : (x < lo ? lo : x);
    float n = __builtin_rintf(v * 1.44269504088896341f);
    float r = v - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union { float f; int32_t i; } scale = {.i = ((int32_t)n + 127) << 23};
    float y = p * scale.f;
    y = x < lo ? 0.0f : (x > hi ? __builtin_inff() : y);
    return x != x ? x : y;
}

#define LANES 16

__attribute__((always_inline))
static inline void softmax_rows_body(const float *x, float *y, int64_t rows, int64_t length) {
    for (int64_t r = 0; r < rows; r++) {
        const float *src = x + r * length;
        float *dst = y + r * length;
        float peak[LANES], total[LANES];
        int64_t i = 0;
        for (int j = 0; j < LANES; j++) { peak[j] = -__builtin_inff(); total[j] = 0.0f; }
        int nan = 0;
        for (; i + LANES <= length; i += LANES)
            for (int j = 0; j < LANES; j++) {
                float v = src[i + j];
                peak[j] = v > peak[j] ? v : peak[j];
                nan |= v != v;
            }
        for (; i < length; i++) {
            peak[0] = src[i] > peak[0] ? src[i] : peak[0];
            nan |= src[i] != src[i];
        }
        float shift = peak[0];
        for (int j = 1; j < LANES; j++) shift = peak[j] > shift ? peak[j] : shift;
        if (nan) shift = __builtin_nanf("");
        else if (shift == __builtin_inff() || shift == -__builtin_inff()) shift = 0.0f;
        for (i = 0; i + LANES <= length; i += LANES)
            for (int j = 0; j < LANES; j++) {
                float e = fast_exp(src[i + j] - shift);
                dst[i + j] = e;
                total[j] += e;
            }
        for (; i < length; i++) {
            dst[i] = fast_exp(src[i] - shift);
            total[0] += dst[i];
        }
        float sum = 0.0f;
        for (int j = 0; j < LANES; j++) sum += total[j];
        for (i = 0; i < length; i++) dst[i] = dst[i] / sum;
    }
}
DISPATCHED(softmax_rows, (const float *x, float *y, int64_t rows, int64_t length),
           (x, y, rows, length))
