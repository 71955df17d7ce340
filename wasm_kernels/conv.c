/* 2-D convolution, NCHW: im2col + SGEMM per image and group; 1x1 stride-1 unpadded
 * convolutions skip im2col (the input already is the GEMM's B); depthwise (one input
 * channel per group) runs a direct kernel. 1-D convolutions arrive as H = 1.
 *
 * er_args for er_conv2d / er_depthwise2d:
 *   [N, C, H, W, M, group, KH, KW, SH, SW, PT, PL, DH, DW, OH, OW]
 */
#include "common.h"

void sgemm_internal(i32 M, i32 N, i32 K, const float *A, i32 rsa, i32 csa, const float *B,
                    i32 rsb, i32 csb, float *C, i32 ldc, i32 accumulate);

typedef struct {
    i32 n, c, h, w, m, group, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow;
} ConvShape;

static ConvShape conv_shape(void) {
    const i32 *a = er_args;
    ConvShape s = {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
                   a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15]};
    return s;
}

/* col[(c*KH + i)*KW + j][oy*OW + ox] = x[c][oy*SH - PT + i*DH][ox*SW - PL + j*DW] or 0. */
static void im2col(const float *x, i32 channels, const ConvShape *s, float *col) {
    i32 hw_out = s->oh * s->ow;
    for (i32 c = 0; c < channels; c++) {
        const float *plane = x + c * s->h * s->w;
        for (i32 i = 0; i < s->kh; i++) {
            for (i32 j = 0; j < s->kw; j++) {
                float *row = col + ((c * s->kh + i) * s->kw + j) * hw_out;
                for (i32 oy = 0; oy < s->oh; oy++) {
                    i32 y = oy * s->sh - s->pt + i * s->dh;
                    float *out = row + oy * s->ow;
                    if (y < 0 || y >= s->h) {
                        for (i32 ox = 0; ox < s->ow; ox++) out[ox] = 0.0f;
                        continue;
                    }
                    const float *src = plane + y * s->w;
                    i32 x0 = j * s->dw - s->pl;      /* input column of ox = 0 */
                    if (s->sw == 1) {
                        /* valid ox: 0 <= ox + x0 < W */
                        i32 lo = min_i32(max_i32(-x0, 0), s->ow);
                        i32 hi = max_i32(min_i32(s->w - x0, s->ow), lo);
                        for (i32 ox = 0; ox < lo; ox++) out[ox] = 0.0f;
                        for (i32 ox = lo; ox < hi; ox++) out[ox] = src[ox + x0];
                        for (i32 ox = hi; ox < s->ow; ox++) out[ox] = 0.0f;
                    } else {
                        for (i32 ox = 0; ox < s->ow; ox++) {
                            i32 xx = ox * s->sw + x0;
                            out[ox] = (xx >= 0 && xx < s->w) ? src[xx] : 0.0f;
                        }
                    }
                }
            }
        }
    }
}

/* y[N, M, OH, OW] (+)= conv(x[N, C, H, W], w[M, C/group, KH, KW]); `col` holds
 * (C/group)*KH*KW*OH*OW floats unless the convolution is 1x1, stride 1, unpadded. */
EXPORT void er_conv2d(const float *x, const float *w, float *y, float *col, i32 accumulate) {
    ConvShape s = conv_shape();
    i32 cg = s.c / s.group, mg = s.m / s.group;
    i32 k = cg * s.kh * s.kw, hw_out = s.oh * s.ow;
    i32 pointwise = s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.pt == 0 &&
                    s.pl == 0 && s.oh == s.h && s.ow == s.w;
    for (i32 n = 0; n < s.n; n++) {
        for (i32 g = 0; g < s.group; g++) {
            const float *xg = x + (n * s.c + g * cg) * s.h * s.w;
            const float *b = xg;
            if (!pointwise) {
                im2col(xg, cg, &s, col);
                b = col;
            }
            float *yg = y + (n * s.m + g * mg) * hw_out;
            sgemm_internal(mg, hw_out, k, w + g * mg * k, k, 1, b, hw_out, 1, yg, hw_out,
                           accumulate);
        }
    }
}

/* Depthwise: group == C == M, w[C, 1, KH, KW]; y (+)= per-channel 2-D correlation. */
EXPORT void er_depthwise2d(const float *x, const float *w, float *y, i32 accumulate) {
    ConvShape s = conv_shape();
    for (i32 plane = 0; plane < s.n * s.c; plane++) {
        i32 c = plane % s.c;
        const float *xp = x + plane * s.h * s.w;
        const float *wc = w + c * s.kh * s.kw;
        float *yp = y + plane * s.oh * s.ow;
        if (!accumulate)
            for (i32 i = 0; i < s.oh * s.ow; i++) yp[i] = 0.0f;
        for (i32 i = 0; i < s.kh; i++) {
            for (i32 j = 0; j < s.kw; j++) {
                float wv = wc[i * s.kw + j];
                v128_t vw = wasm_f32x4_splat(wv);
                i32 x0 = j * s.dw - s.pl;
                /* valid ox: 0 <= ox*SW + x0 < W */
                i32 lo = x0 >= 0 ? 0 : (-x0 + s.sw - 1) / s.sw;
                i32 hi = s.w - x0 <= 0 ? 0 : (s.w - x0 + s.sw - 1) / s.sw;
                lo = min_i32(lo, s.ow);
                hi = max_i32(min_i32(hi, s.ow), lo);
                for (i32 oy = 0; oy < s.oh; oy++) {
                    i32 yy = oy * s.sh - s.pt + i * s.dh;
                    if (yy < 0 || yy >= s.h) continue;
                    const float *src = xp + yy * s.w + x0;
                    float *out = yp + oy * s.ow;
                    i32 ox = lo;
                    if (s.sw == 1) {
                        for (; ox + 4 <= hi; ox += 4)
                            wasm_v128_store(out + ox, wasm_f32x4_add(
                                wasm_v128_load(out + ox),
                                wasm_f32x4_mul(vw, wasm_v128_load(src + ox))));
                    }
                    for (; ox < hi; ox++) out[ox] += wv * src[ox * s.sw];
                }
            }
        }
    }
}
