/* 2-D convolution, NCHW: im2col + SGEMM per image and group; 1x1 stride-1 unpadded
 * convolutions skip im2col (the input already is the GEMM's B); depthwise (one input
 * channel per group) runs a direct kernel. 1-D convolutions arrive as H = 1.
 *
 * er_args for er_conv2d / er_depthwise2d:
 *   [N, C, H, W, M, group, KH, KW, SH, SW, PT, PL, DH, DW, OH, OW]
 */
#include "elemtypes.h"

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
                        i32 lo, hi;
                        inside_outputs(x0, 1, s->w, s->ow, &lo, &hi);
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

/* im2col of 8-bit values; taps in the padding take `pad` (the zero point: they count 0). */
static void im2col8(const uint8_t *x, i32 channels, const ConvShape *s, uint8_t pad,
                    uint8_t *col) {
    i32 hw_out = s->oh * s->ow;
    for (i32 c = 0; c < channels; c++) {
        const uint8_t *plane = x + c * s->h * s->w;
        for (i32 i = 0; i < s->kh; i++) {
            for (i32 j = 0; j < s->kw; j++) {
                uint8_t *row = col + ((c * s->kh + i) * s->kw + j) * hw_out;
                for (i32 oy = 0; oy < s->oh; oy++) {
                    i32 y = oy * s->sh - s->pt + i * s->dh;
                    uint8_t *out = row + oy * s->ow;
                    if (y < 0 || y >= s->h) {
                        for (i32 ox = 0; ox < s->ow; ox++) out[ox] = pad;
                        continue;
                    }
                    const uint8_t *src = plane + y * s->w;
                    i32 x0 = j * s->dw - s->pl, lo, hi;
                    if (s->sw == 1) {
                        inside_outputs(x0, 1, s->w, s->ow, &lo, &hi);
                        for (i32 ox = 0; ox < lo; ox++) out[ox] = pad;
                        for (i32 ox = lo; ox < hi; ox++) out[ox] = src[ox + x0];
                        for (i32 ox = hi; ox < s->ow; ox++) out[ox] = pad;
                    } else {
                        for (i32 ox = 0; ox < s->ow; ox++) {
                            i32 xx = ox * s->sw + x0;
                            out[ox] = (xx >= 0 && xx < s->w) ? src[xx] : pad;
                        }
                    }
                }
            }
        }
    }
}

/* y[N, M, OH, OW] = conv(x - x_zp, w - w_zp) in int32, exactly (ConvInteger, QLinearConv):
 * x and w are 8-bit (types tx, tw), x_zp one value, w_zp one value or one per output channel
 * (w_zp_per_channel), either may be null. im2col of the bytes, then the integer GEMM; `col`
 * holds (C/group)*KH*KW*OH*OW bytes unless the convolution is 1x1, stride 1, unpadded. */
/* Depthwise ConvInteger (group == C == M): per plane, the sum over taps of the centered
 * input times the centered tap weight, eight int16 products a step (centered 8-bit values
 * fit int16, their products int32). Taps in the padding add nothing. */
static void depthwise_int8(const uint8_t *x, i32 tx, i32 x_zero, const uint8_t *w, i32 tw,
                           const void *w_zp, i32 w_zp_per_channel, i32 *y, const ConvShape *s) {
    v128_t zx = wasm_i16x8_splat((int16_t)x_zero);
    for (i32 plane = 0; plane < s->n * s->c; plane++) {
        i32 c = plane % s->c;
        const uint8_t *xp = x + (size_t)plane * s->h * s->w;
        i32 *yp = y + (size_t)plane * s->oh * s->ow;
        i32 wz = w_zp ? load8(w_zp, w_zp_per_channel ? c : 0, tw) : 0;
        for (i32 i = 0; i < s->oh * s->ow; i++) yp[i] = 0;
        for (i32 i = 0; i < s->kh; i++) {
            for (i32 j = 0; j < s->kw; j++) {
                i32 wv = load8(w, (c * s->kh + i) * s->kw + j, tw) - wz;
                v128_t vw = wasm_i16x8_splat((int16_t)wv);
                i32 x0 = j * s->dw - s->pl, lo, hi;
                inside_outputs(x0, s->sw, s->w, s->ow, &lo, &hi);
                for (i32 oy = 0; oy < s->oh; oy++) {
                    i32 yy = oy * s->sh - s->pt + i * s->dh;
                    if (yy < 0 || yy >= s->h) continue;
                    const uint8_t *src = xp + yy * s->w + x0;
                    i32 *out = yp + oy * s->ow;
                    i32 ox = lo;
                    if (s->sw == 1) {
                        for (; ox + 8 <= hi; ox += 8) {
                            v128_t v = tx == T_U8 ? wasm_u16x8_load8x8(src + ox)
                                                          : wasm_i16x8_load8x8(src + ox);
                            v = wasm_i16x8_sub(v, zx);
                            wasm_v128_store(out + ox, wasm_i32x4_add(
                                wasm_v128_load(out + ox), wasm_i32x4_extmul_low_i16x8(v, vw)));
                            wasm_v128_store(out + ox + 4, wasm_i32x4_add(
                                wasm_v128_load(out + ox + 4), wasm_i32x4_extmul_high_i16x8(v, vw)));
                        }
                    }
                    for (; ox < hi; ox++)
                        out[ox] += (load8(src, ox * s->sw, tx) - x_zero) * wv;
                }
            }
        }
    }
}

EXPORT void er_conv2d_int8(const uint8_t *x, i32 tx, const void *x_zp, const uint8_t *w,
                           i32 tw, const void *w_zp, i32 w_zp_per_channel, i32 *y,
                           uint8_t *col) {
    ConvShape s = conv_shape();
    i32 cg = s.c / s.group, mg = s.m / s.group;
    if (cg == 1 && mg == 1 && s.group > 1) {
        depthwise_int8(x, tx, x_zp ? load8(x_zp, 0, tx) : 0, w, tw, w_zp, w_zp_per_channel,
                       y, &s);
        return;
    }
    i32 k = cg * s.kh * s.kw, hw_out = s.oh * s.ow;
    i32 pointwise = s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.pt == 0 &&
                    s.pl == 0 && s.oh == s.h && s.ow == s.w;
    uint8_t pad = x_zp ? *(const uint8_t *)x_zp : 0;
    for (i32 n = 0; n < s.n; n++) {
        for (i32 g = 0; g < s.group; g++) {
            const uint8_t *xg = x + (n * s.c + g * cg) * s.h * s.w;
            const uint8_t *b = xg;
            if (!pointwise) {
                im2col8(xg, cg, &s, pad, col);
                b = col;
            }
            const void *wzp = w_zp && w_zp_per_channel ? (const uint8_t *)w_zp + g * mg : w_zp;
            er_igemm(mg, hw_out, k, w + g * mg * k, tw, k, 1, wzp, w_zp_per_channel, b, tx,
                     hw_out, 1, x_zp, 0, y + (n * s.m + g * mg) * hw_out, hw_out);
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
                i32 x0 = j * s.dw - s.pl, lo, hi;
                inside_outputs(x0, s.sw, s.w, s.ow, &lo, &hi);
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

/* Fold (col2im, adding): columns (C, *kernel, *blocks) summed into y (C, *out) for up to 3
 * spatial axes: column [c, k, b] lands on output position b * stride + k * dilation - pad,
 * and positions outside the output are dropped. y must hold zeros (or what it adds to).
 * er_args: rank, C, then per axis: kernel, blocks, out, stride, pad_begin, dilation. */
EXPORT void er_fold(const float *col, float *y) {
    i32 rank = er_args[0], C = er_args[1];
    i32 k[3] = {1, 1, 1}, b[3] = {1, 1, 1}, o[3] = {1, 1, 1}, s[3] = {1, 1, 1};
    i32 p[3] = {0, 0, 0}, d[3] = {1, 1, 1};
    for (i32 a = 0; a < rank; a++) {       /* right-aligned: missing leading axes are 1 */
        i32 at = 3 - rank + a;
        const i32 *v = er_args + 2 + 6 * a;
        k[at] = v[0]; b[at] = v[1]; o[at] = v[2]; s[at] = v[3]; p[at] = v[4]; d[at] = v[5];
    }
    i64 blocks = (i64)b[0] * b[1] * b[2], outs = (i64)o[0] * o[1] * o[2];
    for (i32 c = 0; c < C; c++) {
        float *yc = y + c * outs;
        for (i32 k0 = 0; k0 < k[0]; k0++)
        for (i32 k1 = 0; k1 < k[1]; k1++)
        for (i32 k2 = 0; k2 < k[2]; k2++) {
            const float *src = col + (((i64)c * k[0] + k0) * k[1] * k[2] + k1 * k[2] + k2) * blocks;
            for (i32 b0 = 0; b0 < b[0]; b0++) {
                i32 y0 = b0 * s[0] + k0 * d[0] - p[0];
                if (y0 < 0 || y0 >= o[0]) continue;
                for (i32 b1 = 0; b1 < b[1]; b1++) {
                    i32 y1 = b1 * s[1] + k1 * d[1] - p[1];
                    if (y1 < 0 || y1 >= o[1]) continue;
                    const float *row = src + ((i64)b0 * b[1] + b1) * b[2];
                    float *out = yc + ((i64)y0 * o[1] + y1) * o[2];
                    for (i32 b2 = 0; b2 < b[2]; b2++) {
                        i32 y2 = b2 * s[2] + k2 * d[2] - p[2];
                        if (y2 >= 0 && y2 < o[2]) out[y2] += row[b2];
                    }
                }
            }
        }
    }
}
