/* qgemm.c's products, as qconv.c calls them. */
#ifndef EDGERUN_CPU_QGEMM_H
#define EDGERUN_CPU_QGEMM_H

#include <stdint.h>

/* Requantization of a product to 8 bits, per row of A (an output channel of a convolution):
 * y = clamp(rint(float(int32 sum + bias[i]) * mult[i]) + zy, lo, hi), as QLinearConv (in
 * float32, as onnxruntime's requantization). */
typedef struct {
    const int32_t *bias;    /* per row, or NULL */
    const float *mult;      /* per row */
    int32_t zy, lo, hi;     /* zero point and range (0..255 or -128..127) */
} Requant;

int64_t er_cpu_qgemm_packed_size(int64_t k, int64_t n);
void er_cpu_qgemm_pack_b_rows(const uint8_t *const *rows, int64_t offset, int64_t k,
                              int64_t n, int b_signed, int8_t *packed, int32_t *colsum);
int er_cpu_qgemm_packed(const uint8_t *a_packed, const int32_t *rowsum, int64_t m, int64_t k,
                        int a_signed, const int32_t *za, int64_t za_count,
                        const int8_t *packed, const int32_t *colsum, int64_t n, int b_signed,
                        const int32_t *zb, int64_t zb_count,
                        float a_scale, const float *b_scale, int64_t b_scale_count,
                        const float *bias, void *out, int64_t ldc);
int er_cpu_qgemm_packed_requant(const uint8_t *a_packed, const int32_t *rowsum, int64_t m,
                                int64_t k, int a_signed, const int32_t *za, int64_t za_count,
                                const int8_t *packed, const int32_t *colsum, int64_t n,
                                int b_signed, const int32_t *zb, int64_t zb_count,
                                const Requant *rq, uint8_t *out, int64_t ldc);

#endif
