/* 2-D pooling over NCHW planes (1-D pooling arrives as H = 1).
 *
 * er_args: [planes, H, W, KH, KW, SH, SW, PT, PL, PB, PR, DH, DW, OH, OW, count_include_pad]
 * Windows are clipped to the input; average pooling divides by the clipped window, or with
 * count_include_pad by the window clipped to the padded input (pads count, the ceil_mode
 * overhang does not).
 */
#include "common.h"

typedef struct {
    i32 planes, h, w, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, oh, ow, include_pad;
} PoolShape;

static PoolShape pool_shape(void) {
    const i32 *a = er_args;
    PoolShape s = {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
                   a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15]};
    return s;
}

EXPORT void er_maxpool2d(const float *x, float *y) {
    PoolShape s = pool_shape();
    for (i32 p = 0; p < s.planes; p++) {
        const float *xp = x + p * s.h * s.w;
        for (i32 oy = 0; oy < s.oh; oy++) {
            for (i32 ox = 0; ox < s.ow; ox++) {
                float best = -__builtin_inff();
                i32 seen = 0;
                for (i32 i = 0; i < s.kh; i++) {
                    i32 yy = oy * s.sh - s.pt + i * s.dh;
                    if (yy < 0 || yy >= s.h) continue;
                    for (i32 j = 0; j < s.kw; j++) {
                        i32 xx = ox * s.sw - s.pl + j * s.dw;
                        if (xx < 0 || xx >= s.w) continue;
                        float v = xp[yy * s.w + xx];
                        best = v > best || v != v ? v : best;
                        seen = 1;
                    }
                }
                /* a window of padding only: the lowest float, as onnxruntime and the CPU */
                *y++ = seen ? best : -3.402823466e+38f;
            }
        }
    }
}

EXPORT void er_avgpool2d(const float *x, float *y) {
    PoolShape s = pool_shape();
    for (i32 p = 0; p < s.planes; p++) {
        const float *xp = x + p * s.h * s.w;
        for (i32 oy = 0; oy < s.oh; oy++) {
            i32 y0 = oy * s.sh - s.pt, y1 = y0 + (s.kh - 1) * s.dh + 1;
            for (i32 ox = 0; ox < s.ow; ox++) {
                i32 x0 = ox * s.sw - s.pl, x1 = x0 + (s.kw - 1) * s.dw + 1;
                float sum = 0.0f;
                i32 count = 0;
                for (i32 yy = y0; yy < y1; yy += s.dh) {
                    for (i32 xx = x0; xx < x1; xx += s.dw) {
                        int inside = yy >= 0 && yy < s.h && xx >= 0 && xx < s.w;
                        int padded = yy >= -s.pt && yy < s.h + s.pb && xx >= -s.pl &&
                                     xx < s.w + s.pr;
                        if (inside) sum += xp[yy * s.w + xx];
                        count += s.include_pad ? padded : inside;
                    }
                }
                *y++ = count ? sum / (float)count : 0.0f;
            }
        }
    }
}
