/* 2-D pooling over NCHW planes (1-D pooling arrives as H = 1).
 *
 * er_args: [planes, H, W, KH, KW, SH, SW, PT, PL, PB, PR, DH, DW, OH, OW, count_include_pad]
 * Windows are clipped to the input; average pooling divides by the clipped window, or with
 * count_include_pad by the window clipped to the padded input (pads count, the ceil_mode
 * overhang does not).
 */
#include "dmath.h"

typedef struct {
    i32 planes, h, w, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, oh, ow, include_pad;
} PoolShape;

static PoolShape pool_shape(void) {
    const i32 *a = er_args;
    PoolShape s = {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
                   a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15]};
    return s;
}

#define LOWEST_FLOAT -3.402823466e+38f     /* a window of padding only, as onnxruntime */

/* 4 inputs sw apart (sw 1 or 2) */
static inline v128_t load_every(const float *p, i32 sw) {
    if (sw == 1) return wasm_v128_load(p);
    return wasm_i32x4_shuffle(wasm_v128_load(p), wasm_v128_load(p + 4), 0, 2, 4, 6);
}

/* out[ox] = max(out[ox], row[ox * sw + x0]) (`max`; NaN wins, as in f32x4.max) or
 * out[ox] += row[ox * sw + x0], for ox in [lo, hi): vectors for strides 1 and 2, elements
 * otherwise and at the end. `max` is a constant in each caller. */
static inline __attribute__((always_inline)) void row_into(float *out, const float *row,
                                                           i32 x0, i32 sw, i32 w, i32 lo,
                                                           i32 hi, const int max) {
    i32 ox = lo;
    if (sw <= 2)
        for (; ox + 4 <= hi && (ox + 3) * sw + x0 + sw - 1 < w; ox += 4) {
            v128_t o = wasm_v128_load(out + ox), v = load_every(row + ox * sw + x0, sw);
            wasm_v128_store(out + ox, max ? wasm_f32x4_max(o, v) : wasm_f32x4_add(o, v));
        }
    for (; ox < hi; ox++) {
        float v = row[ox * sw + x0], o = out[ox];
        out[ox] = max ? (v > o || v != v ? v : o) : o + v;
    }
}

/* The output columns [all_lo, all_hi) whose every window column falls in [lo, hi) */
static void every_tap_inside(const PoolShape *s, i32 lo, i32 hi, i32 *all_lo, i32 *all_hi) {
    *all_lo = 0;
    *all_hi = s->ow;
    for (i32 j = 0; j < s->kw; j++) {
        i32 first, last;
        inside_outputs(j * s->dw - s->pl - lo, s->sw, hi - lo, s->ow, &first, &last);
        *all_lo = max_i32(*all_lo, first);
        *all_hi = min_i32(*all_hi, last);
    }
}

/* Row by row: each valid (window row, window column) pair updates a whole output row with
 * vectors (strides 1 and 2; others by elements). An output whose window holds padding only
 * gets the lowest float; such windows sit at the edges (rows without a valid window row,
 * columns outside every window column's inside range). */
EXPORT void er_maxpool2d(const float *x, float *y) {
    PoolShape s = pool_shape();
    i32 all_lo, all_hi;                   /* the columns every window column reaches */
    every_tap_inside(&s, 0, s.w, &all_lo, &all_hi);
    for (i32 p = 0; p < s.planes; p++) {
        const float *xp = x + (size_t)p * s.h * s.w;
        for (i32 oy = 0; oy < s.oh; oy++) {
            float *out = y + ((size_t)p * s.oh + oy) * s.ow;
            for (i32 ox = 0; ox < s.ow; ox++) out[ox] = -__builtin_inff();
            i32 any_row = 0;
            for (i32 i = 0; i < s.kh; i++) {
                i32 yy = oy * s.sh - s.pt + i * s.dh;
                if (yy < 0 || yy >= s.h) continue;
                any_row = 1;
                for (i32 j = 0; j < s.kw; j++) {
                    i32 x0 = j * s.dw - s.pl, lo, hi;
                    inside_outputs(x0, s.sw, s.w, s.ow, &lo, &hi);
                    row_into(out, xp + (size_t)yy * s.w, x0, s.sw, s.w, lo, hi, 1);
                }
            }
            for (i32 ox = 0; ox < s.ow; ox++) {
                if (any_row && ox >= all_lo && ox < all_hi) {
                    ox = all_hi - 1;          /* the interior: every window has input */
                    continue;
                }
                i32 seen = 0;
                for (i32 j = 0; j < s.kw && any_row && !seen; j++) {
                    i32 xx = ox * s.sw - s.pl + j * s.dw;
                    seen = xx >= 0 && xx < s.w;
                }
                if (!seen) out[ox] = LOWEST_FLOAT;
            }
        }
    }
}

/* How many of the k taps start, start + step, ... fall in [lo, hi) */
static i32 taps(i32 start, i32 step, i32 k, i32 lo, i32 hi) {
    i32 n = 0;
    for (i32 t = 0; t < k; t++) {
        i32 v = start + t * step;
        n += v >= lo && v < hi;
    }
    return n;
}

/* Row by row like er_maxpool2d: each (window row, window column) pair inside the input adds
 * a whole output row with vectors, so every output sums its taps in the order the window
 * lists them. The divisor is separable: taps in the window's rows times taps in its columns,
 * counted against the input (or, with count_include_pad, the padded input); columns whose
 * every tap counts share one divisor. */
EXPORT void er_avgpool2d(const float *x, float *y) {
    PoolShape s = pool_shape();
    i32 row_lo = s.include_pad ? -s.pt : 0, row_hi = s.include_pad ? s.h + s.pb : s.h;
    i32 col_lo = s.include_pad ? -s.pl : 0, col_hi = s.include_pad ? s.w + s.pr : s.w;
    i32 all_lo, all_hi;                  /* the columns whose every window column counts */
    every_tap_inside(&s, col_lo, col_hi, &all_lo, &all_hi);
    for (i32 p = 0; p < s.planes; p++) {
        const float *xp = x + (size_t)p * s.h * s.w;
        for (i32 oy = 0; oy < s.oh; oy++) {
            float *out = y + ((size_t)p * s.oh + oy) * s.ow;
            for (i32 ox = 0; ox < s.ow; ox++) out[ox] = 0.0f;
            i32 y0 = oy * s.sh - s.pt;
            for (i32 i = 0; i < s.kh; i++) {
                i32 yy = y0 + i * s.dh;
                if (yy < 0 || yy >= s.h) continue;
                for (i32 j = 0; j < s.kw; j++) {
                    i32 x0 = j * s.dw - s.pl, lo, hi;
                    inside_outputs(x0, s.sw, s.w, s.ow, &lo, &hi);
                    row_into(out, xp + (size_t)yy * s.w, x0, s.sw, s.w, lo, hi, 0);
                }
            }
            i32 rows = taps(y0, s.dh, s.kh, row_lo, row_hi);
            i32 ox = 0;
            for (; ox < s.ow; ox++) {
                if (ox == all_lo && all_lo < all_hi && rows) {
                    v128_t d = wasm_f32x4_splat((float)(rows * s.kw));
                    for (; ox + 4 <= all_hi; ox += 4)
                        wasm_v128_store(out + ox, wasm_f32x4_div(wasm_v128_load(out + ox), d));
                    for (; ox < all_hi; ox++) out[ox] = out[ox] / (float)(rows * s.kw);
                    if (ox >= s.ow) break;
                }
                i32 count = rows * taps(ox * s.sw - s.pl, s.dw, s.kw, col_lo, col_hi);
                out[ox] = count ? out[ox] / (float)count : 0.0f;
            }
        }
    }
}

/* Pooling over up to 3 spatial axes: max (with optional int64 indices, row- or column-major
 * within each plane), average (count_include_pad as er_avgpool2d) and Lp, (sum |x|^p)^(1/p).
 * er_args: planes, include_pad, column_major, then for 3 axes (missing leading ones are
 * 1, 1, 1, 0, 0, 1, 1): size, kernel, stride, pad_begin, pad_end, dilation, out. */
enum { P_MAX = 0, P_AVG, P_LP };

EXPORT void er_pool_nd(i32 mode, const float *x, float *y, i64 *indices, float p) {
    i32 planes = er_args[0], include_pad = er_args[1], column_major = er_args[2];
    i32 n[3], k[3], s[3], pb[3], pe[3], d[3], o[3];
    for (i32 a = 0; a < 3; a++) {
        const i32 *v = er_args + 3 + 7 * a;
        n[a] = v[0]; k[a] = v[1]; s[a] = v[2]; pb[a] = v[3]; pe[a] = v[4]; d[a] = v[5];
        o[a] = v[6];
    }
    i64 plane = (i64)n[0] * n[1] * n[2];
    for (i32 q = 0; q < planes; q++) {
        const float *xp = x + q * plane;
        for (i32 o0 = 0; o0 < o[0]; o0++)
        for (i32 o1 = 0; o1 < o[1]; o1++)
        for (i32 o2 = 0; o2 < o[2]; o2++) {
            double sum = 0;
            float best = -__builtin_inff();
            i64 best_at = -1;
            i32 count = 0;
            for (i32 k0 = 0; k0 < k[0]; k0++) {
                i32 i0 = o0 * s[0] - pb[0] + k0 * d[0];
                for (i32 k1 = 0; k1 < k[1]; k1++) {
                    i32 i1 = o1 * s[1] - pb[1] + k1 * d[1];
                    for (i32 k2 = 0; k2 < k[2]; k2++) {
                        i32 i2 = o2 * s[2] - pb[2] + k2 * d[2];
                        int inside = i0 >= 0 && i0 < n[0] && i1 >= 0 && i1 < n[1] &&
                                     i2 >= 0 && i2 < n[2];
                        int padded = i0 >= -pb[0] && i0 < n[0] + pe[0] && i1 >= -pb[1] &&
                                     i1 < n[1] + pe[1] && i2 >= -pb[2] && i2 < n[2] + pe[2];
                        count += include_pad ? padded : inside;
                        if (!inside) continue;
                        i64 at = ((i64)i0 * n[1] + i1) * n[2] + i2;
                        float v = xp[at];
                        if (mode == P_MAX) {
                            if (best_at < 0 || v > best || (v != v && best == best)) {
                                best = v;
                                best_at = column_major ? ((i64)i2 * n[1] + i1) * n[0] + i0 : at;
                            }
                        } else if (mode == P_AVG) {
                            sum += v;
                        } else {
                            double a = __builtin_fabs((double)v);
                            sum += p == 1 ? a : p == 2 ? a * a : d_exp(p * d_log(a));
                        }
                    }
                }
            }
            if (mode == P_MAX) {
                /* a window of padding only: the lowest float, and the plane's offset - 1 as
                 * its index, as onnxruntime and the CPU kernel */
                *y++ = best_at < 0 ? LOWEST_FLOAT : best;
                if (indices) *indices++ = q * plane + best_at;
            } else if (mode == P_AVG) {
                *y++ = count ? (float)(sum / count) : 0.0f;
            } else {
                *y++ = (float)(p == 1 ? sum : p == 2 ? __builtin_sqrt(sum)
                               : sum > 0 ? d_exp(d_log(sum) / p) : 0.0);
            }
        }
    }
}
