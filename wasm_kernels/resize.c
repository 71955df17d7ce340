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

/* GridSample over 1 to 3 spatial axes, float32 arithmetic in the CPU kernel's order.
 * Per axis each sampling point becomes up to 4 taps (input index, weight); a point's value
 * is the sum over tap combinations (first axis outermost) of the input times the product
 * of the taps' weights. mode 0 linear, 1 nearest, 2 cubic (a = -0.75); padding 0 zeros,
 * 1 border, 2 reflection. er_args: N, C, rank, size[rank], points. The grid's last axis
 * lists the innermost spatial axis first. */
static float reflect(float c, float low, float high) {
    float span = high - low;
    if (span <= 0) return low;
    if (c >= low && c <= high) return c;
    float distance = c < low ? low - c : c - high;
    float folds = __builtin_floorf(distance / span), rest = distance - folds * span;
    int even = __builtin_fmodf(folds, 2.0f) == 0;
    if (c < low) return even ? low + rest : high - rest;
    return even ? high - rest : low + rest;
}

static float cubic(float d) {
    float s = __builtin_fabsf(d), s2 = s * s, s3 = s2 * s, a = -0.75f;
    if (s <= 1) return (a + 2) * s3 - (a + 3) * s2 + 1;
    if (s < 2) return a * s3 - 5 * a * s2 + 8 * a * s - 4 * a;
    return 0;
}

/* the taps of one coordinate along an axis of `size`; returns their count (nearest without
 * zeros padding has no weights) */
static i32 grid_taps(float g, i32 size, i32 mode, i32 padding, i32 align, i32 *index,
                     float *weight) {
    float c, low, high;
    if (align) { c = (g + 1) / 2 * (float)(size - 1); low = 0; high = (float)size - 1; }
    else { c = ((g + 1) * (float)size - 1) / 2; low = -0.5f; high = (float)size - 0.5f; }
    if (mode == 1) c = __builtin_nearbyintf(c);
    if (padding == 1 && (c < low || c > high)) c = c < 0 ? 0 : c > size - 1 ? (float)(size - 1) : c;
    else if (padding == 2) c = reflect(c, low, high);
    i32 n;
    float at[4], w[4];
    if (mode == 1) {
        n = 1; at[0] = __builtin_truncf(c); w[0] = 1;
    } else {
        float base = __builtin_floorf(c), t = c - base;
        if (mode == 0) { n = 2; at[0] = base; w[0] = 1 - t; at[1] = base + 1; w[1] = t; }
        else { n = 4; for (i32 k = 0; k < 4; k++) { at[k] = base + (k - 1); w[k] = cubic(t - (k - 1)); } }
    }
    for (i32 k = 0; k < n; k++) {
        float i = at[k];
        if (padding == 0) {
            int inside = i >= 0 && i <= size - 1;
            w[k] = inside ? w[k] : 0;
        } else if (padding == 2) {
            i = __builtin_truncf(reflect(i, low, high));
        }
        i = i < 0 ? 0 : i > size - 1 ? (float)(size - 1) : i;
        index[k] = (i32)i;
        weight[k] = w[k];
    }
    return n;
}

EXPORT void er_grid_sample(const float *x, const float *grid, float *y, i32 mode, i32 padding,
                           i32 align) {
    i32 N = er_args[0], C = er_args[1], rank = er_args[2], points = er_args[3 + rank];
    const i32 *size = er_args + 3;
    i64 plane = 1;
    i32 stride[3];
    int weighted = mode != 1 || padding == 0;
    for (i32 d = rank - 1; d >= 0; d--) { stride[d] = (i32)plane; plane *= size[d]; }
    for (i32 n = 0; n < N; n++) {
        for (i32 p = 0; p < points; p++) {
            const float *g = grid + ((i64)n * points + p) * rank;
            i32 idx[3][4], count[3] = {1, 1, 1};
            float w[3][4];
            for (i32 d = 0; d < rank; d++)
                count[d] = grid_taps(g[rank - 1 - d], size[d], mode, padding, align, idx[d], w[d]);
            for (i32 c = 0; c < C; c++) {
                const float *xc = x + ((i64)n * C + c) * plane;
                float sum = 0;
                for (i32 a = 0; a < count[0]; a++)
                for (i32 b = 0; b < (rank > 1 ? count[1] : 1); b++)
                for (i32 e = 0; e < (rank > 2 ? count[2] : 1); e++) {
                    i32 t[3] = {a, b, e};
                    i64 at = 0;
                    float weight = w[0][a];
                    for (i32 d = 0; d < rank; d++) {
                        at += (i64)idx[d][t[d]] * stride[d];
                        if (d) weight *= w[d][t[d]];
                    }
                    sum += weighted ? xc[at] * weight : xc[at];
                }
                y[((i64)n * C + c) * points + p] = sum;
            }
        }
    }
}
