/* Softmax over contiguous rows, float32, in one call (providers/cpu/ops/softmax.py's numpy
 * path takes a maximum, a subtraction, an exp, a sum and a division, each a pass, and numpy
 * reduces short rows slowly: attention's [heads x 16 x 16] took ~30 us).
 *
 * Each row is shifted by its maximum (0 where that is infinite, as the numpy path: a row of
 * -inf stays NaN-free only there), exponentiated with fast_exp (fast_exp.h), summed in float32 over
 * 16 lanes, and divided by the sum. fast_exp is within 2 ulp of expf, so results are within
 * ~1e-6 relative of the numpy path, not bit for bit. */
#include <stdint.h>
#include "fast_exp.h"
#include "isa.h"

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
