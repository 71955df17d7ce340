/* Integer convolutions for the CPU provider (ConvInteger, QLinearConv): im2col of 8-bit
 * images, and every image's and group's product of the packed weights and its columns on
 * qgemm.c's kernels, in one call. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "isa.h"

/* qgemm.c's */
int64_t er_cpu_qgemm_packed_size(int64_t k, int64_t n);
void er_cpu_qgemm_pack_b(const uint8_t *b, int64_t ldb, int64_t k, int64_t n, int b_signed,
                         int8_t *packed, int32_t *colsum);
int er_cpu_qgemm_packed(const uint8_t *a_packed, const int32_t *rowsum, int64_t m, int64_t k,
                        int a_signed, const int32_t *za, int64_t za_count,
                        const int8_t *packed, const int32_t *colsum, int64_t n, int b_signed,
                        const int32_t *zb, int64_t zb_count,
                        float a_scale, const float *b_scale, int64_t b_scale_count,
                        const float *bias, void *out, int64_t ldc);

/* One row of columns: tap (kh_i, kw_j) of channel image `src` [in_h, in_w] at every output
 * position, `pad` where the tap falls outside the image. */
static void tap_row(const uint8_t *src, const int64_t *d, int64_t i, int64_t j, uint8_t pad,
                    uint8_t *dst) {
    int64_t in_h = d[0], in_w = d[1], out_h = d[2], out_w = d[3];
    int64_t sh = d[6], sw = d[7], dh = d[8], dw = d[9], pt = d[10], pl = d[11];
    int64_t offset = j * dw - pl;                 /* input column of output column 0 */
    /* output columns whose input column is inside: lo <= ow < hi */
    int64_t lo = offset >= 0 ? 0 : (-offset + sw - 1) / sw;
    int64_t hi = in_w - offset <= 0 ? 0 : (in_w - offset + sw - 1) / sw;
    if (hi > out_w) hi = out_w;
    if (lo > hi) lo = hi;
    for (int64_t oh = 0; oh < out_h; oh++, dst += out_w) {
        int64_t ih = oh * sh + i * dh - pt;
        if (ih < 0 || ih >= in_h) {
            memset(dst, pad, (size_t)out_w);
            continue;
        }
        const uint8_t *line = src + ih * in_w + offset;
        memset(dst, pad, (size_t)lo);
        if (sw == 1) memcpy(dst + lo, line + lo, (size_t)(hi - lo));
        else for (int64_t ow = lo; ow < hi; ow++) dst[ow] = line[ow * sw];
        memset(dst + hi, pad, (size_t)(out_w - hi));
    }
}

/* im2col of `images` 8-bit images x [channels, in_h, in_w] (C-contiguous, image after image)
 * into out [images][channels * kh * kw][out_h * out_w], padded with `pad`. dims: in_h, in_w,
 * out_h, out_w, kh, kw, sh, sw, dh, dw, pt, pl (a 1-D window as the rows of a 1-high image). */
EXPORT void er_cpu_im2col_u8(const uint8_t *x, int64_t images, int64_t channels,
                             const int64_t *dims, uint8_t pad, uint8_t *out) {
    int64_t plane = dims[0] * dims[1], positions = dims[2] * dims[3], kh = dims[4], kw = dims[5];
    for (int64_t c = 0; c < images * channels; c++)
        for (int64_t i = 0; i < kh; i++)
            for (int64_t j = 0; j < kw; j++)
                tap_row(x + c * plane, dims, i, j, pad, out + ((c * kh + i) * kw + j) * positions);
}

/* A grouped convolution's int32 products, every image and group in one call: the weights
 * [groups * mg, k] packed by er_cpu_qgemm_pack_a (with row sums; za: one value or one a row)
 * times each image's and group's columns, B = cols + image * image_stride + group * k * ldb
 * ([k, n], row stride ldb), packed here, into out[image][group * mg + row][n] (contiguous).
 * Returns as er_cpu_qgemm_packed does. */
EXPORT int er_cpu_qgemm_grouped(const uint8_t *a_packed, const int32_t *rowsum, int64_t mg,
                                int64_t k, int a_signed, const int32_t *za, int64_t za_count,
                                int64_t groups, int64_t images, const uint8_t *cols, int64_t ldb,
                                int64_t image_stride, int b_signed, int32_t zb, int64_t n,
                                int32_t *out) {
    int8_t *packed = malloc((size_t)er_cpu_qgemm_packed_size(k, n) + 1);
    int32_t *colsum = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    int status = packed && colsum ? 0 : -1;
    int64_t width = (k + 3) / 4 * 4;
    for (int64_t image = 0; image < images && !status; image++) {
        for (int64_t g = 0; g < groups && !status; g++) {
            er_cpu_qgemm_pack_b(cols + image * image_stride + g * k * ldb, ldb, k, n, b_signed,
                                packed, colsum);
            int64_t first = g * mg;
            status = er_cpu_qgemm_packed(a_packed + first * width, rowsum + first, mg, k, a_signed,
                                         za_count > 1 ? za + first : za, za_count > 1 ? mg : za_count,
                                         packed, colsum, n, b_signed, &zb, 1, 1.0f, NULL, 0, NULL,
                                         out + (image * groups + g) * mg * n, n);
        }
    }
    free(packed); free(colsum);
    return status;
}
