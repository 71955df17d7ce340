/* Resize along one axis of an (outer, in_n, inner) float32 view: each output position sums
 * `taps` input slices times their weights, in tap order (the host computes the taps:
 * ir/resize_rules.py). Positions flagged in `outside` (tf_crop_and_resize past the input)
 * get `fill` instead. Nearest resizing needs no weights: the host uses er_gather.
 */
#include "common.h"

EXPORT void er_resample(const float *x, float *y, i32 outer, i32 in_n, i32 inner, i32 out_n,
                        const i32 *index, const float *weight, i32 taps,
                        const uint8_t *outside, float fill) {
    for (i32 o = 0; o < outer; o++) {
        const float *xo = x + (i64)o * in_n * inner;
        for (i32 p = 0; p < out_n; p++) {
            float *yp = y + ((i64)o * out_n + p) * inner;
            if (outside && outside[p]) {
                for (i32 j = 0; j < inner; j++) yp[j] = fill;
                continue;
            }
            const i32 *ip = index + (i64)p * taps;
            const float *wp = weight + (i64)p * taps;
            const float *first = xo + (i64)ip[0] * inner;
            for (i32 j = 0; j < inner; j++) yp[j] = first[j] * wp[0];
            for (i32 t = 1; t < taps; t++) {
                const float *src = xo + (i64)ip[t] * inner;
                float w = wp[t];
                i32 j = 0;
                v128_t vw = wasm_f32x4_splat(w);
                for (; j + 4 <= inner; j += 4)
                    wasm_v128_store(yp + j, wasm_f32x4_add(wasm_v128_load(yp + j),
                                                           wasm_f32x4_mul(wasm_v128_load(src + j), vw)));
                for (; j < inner; j++) yp[j] += src[j] * w;
            }
        }
    }
}
