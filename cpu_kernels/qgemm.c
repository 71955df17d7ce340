/* Integer matrix products for the CPU provider: C = (A - za)(B - zb) over 8-bit operands,
 * as int32 (MatMulInteger) or scaled to float32 with a bias (MatMulIntegerToFloat), exact
 * (the int32 sums wrap as ONNX's int32 output does).
 *
 * Operands are brought to the form the x86 dot-product instructions take, unsigned A times
 * signed B: a signed A is stored as A + 128 (its zero point + 128), an unsigned B as
 * B - 128 (its zero point - 128), so every 8-bit type pair takes the same path. Then
 *     sum_k (A'_ik - za'_i)(B'_kj - zb'_j)
 *   = sum_k A'_ik B'_kj - za'_i (colsum_j - K zb'_j) - rowsum_i zb'_j
 * with colsum over B' (once, when B is packed) and rowsum over A' (per call, while A is
 * packed).
 *
 * B (weights) is packed once per session into panels of NR columns: for each group of 4
 * rows of K, NR columns of 4 bytes, the layout VPDPBUSD reads (one 32-bit word of A,
 * broadcast, times 4 bytes of 16 columns). A is packed per call into rows of K rounded up
 * to 4 (the padding multiplies B's zero padding).
 *
 * Paths: AVX-512 VNNI (VPDPBUSD) and AVX2 (bytes widened to 16 bits, VPMADDWD: exact, no
 * saturation), as isa.c picks (ISA_NONE: neither, and the caller keeps its own path). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>
#include "isa.h"

#define NR 32          /* columns per panel */
#define MR 8           /* rows per block */

EXPORT int64_t er_cpu_qgemm_packed_size(int64_t k, int64_t n) {
    return ((n + NR - 1) / NR) * ((k + 3) / 4) * NR * 4;
}

/* Packs B [k, n] (row stride ldb elements) and sums its columns (of B'). */
EXPORT void er_cpu_qgemm_pack_b(const uint8_t *b, int64_t ldb, int64_t k, int64_t n, int b_signed,
                                int8_t *packed, int32_t *colsum) {
    int64_t k4 = (k + 3) / 4;
    memset(colsum, 0, (size_t)n * sizeof(int32_t));
    for (int64_t p = 0; p < n; p += NR) {
        int8_t *panel = packed + (p / NR) * k4 * NR * 4;
        for (int64_t g = 0; g < k4; g++) {
            for (int c = 0; c < NR; c++) {
                for (int t = 0; t < 4; t++) {
                    int64_t row = 4 * g + t, col = p + c;
                    int8_t v = 0;
                    if (row < k && col < n) {
                        uint8_t raw = b[row * ldb + col];
                        v = b_signed ? (int8_t)raw : (int8_t)(raw ^ 0x80);
                        colsum[col] += v;
                    }
                    panel[(g * NR + c) * 4 + t] = v;
                }
            }
        }
    }
}

/* A' rows padded to k4*4 bytes (and to a whole block of MR rows), with their sums. */
static void pack_a(const uint8_t *a, int64_t lda, int64_t m, int64_t k, int a_signed,
                   uint8_t *packed, int32_t *rowsum) {
    int64_t width = (k + 3) / 4 * 4;
    uint8_t flip = a_signed ? 0x80 : 0;
    for (int64_t i = 0; i < m; i++) {
        const uint8_t *src = a + i * lda;
        uint8_t *dst = packed + i * width;
        int32_t sum = 0;
        for (int64_t j = 0; j < k; j++) {
            uint8_t v = src[j] ^ flip;
            dst[j] = v;
            sum += v;
        }
        memset(dst + k, 0, (size_t)(width - k));
        rowsum[i] = sum;
    }
}

/* What the epilogue needs of a call. */
typedef struct {
    int64_t n, ldc;
    const int32_t *za;      /* A' zero point per row (already + 128 for signed A) */
    const int32_t *zb;      /* B' zero point per column (already - 128 for unsigned B) */
    const int32_t *colfix;  /* colsum_j - k zb'_j */
    const int32_t *rowsum;
    const float *scale;     /* per column, or NULL: int32 output */
    const float *bias;      /* per column, or NULL */
    void *out;
} Epilogue;

/* One output value from its raw sum (the AVX2 path's epilogue). */
static inline void store_one(const Epilogue *e, int64_t i, int64_t j, int32_t raw) {
    uint32_t v = (uint32_t)raw - (uint32_t)e->za[i] * (uint32_t)e->colfix[j]
                 - (uint32_t)e->rowsum[i] * (uint32_t)e->zb[j];
    if (e->scale) {
        float y = (float)(int32_t)v * e->scale[j];
        if (e->bias) y += e->bias[j];
        ((float *)e->out)[i * e->ldc + j] = y;
    } else {
        ((int32_t *)e->out)[i * e->ldc + j] = (int32_t)v;
    }
}

/* ---- AVX2: bytes widened to 16 bits, pairs summed by VPMADDWD ---------------------------- */
TARGET_AVX2
static void block_avx2(const uint8_t *a, int64_t width, int64_t i0, int mr, const int8_t *panel,
                       int64_t j0, const Epilogue *e) {
    int64_t k4 = width / 4;
    int cols = e->n - j0 < NR ? (int)(e->n - j0) : NR;
    for (int r = 0; r < mr; r++) {
        const uint8_t *row = a + (i0 + r) * width;
        __m256i acc[NR / 4];     /* per register: 4 columns x 2 partial sums */
        for (int q = 0; q < NR / 4; q++) acc[q] = _mm256_setzero_si256();
        for (int64_t g = 0; g < k4; g++) {
            int32_t word;
            memcpy(&word, row + 4 * g, 4);
            /* A's 4 bytes as 16-bit pairs (a0 a1 a2 a3), repeated for 4 columns */
            __m256i av = _mm256_cvtepu8_epi16(_mm_set1_epi32(word));
            const int8_t *p = panel + g * NR * 4;
            for (int q = 0; q < NR / 4; q++) {
                /* 4 columns x 4 bytes = 16 bytes of B, widened to 16 signed 16-bit values */
                __m256i bv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + q * 16)));
                acc[q] = _mm256_add_epi32(acc[q], _mm256_madd_epi16(av, bv));
            }
        }
        /* each register: 8 int32 = 4 columns x 2 partial sums (bytes 0-1, 2-3) */
        int32_t sums[NR];
        for (int q = 0; q < NR / 4; q++) {
            int32_t lanes[8];
            _mm256_storeu_si256((__m256i *)lanes, acc[q]);
            for (int c = 0; c < 4; c++) sums[q * 4 + c] = lanes[2 * c] + lanes[2 * c + 1];
        }
        for (int c = 0; c < cols; c++) store_one(e, i0 + r, j0 + c, sums[c]);
    }
}

/* ---- AVX-512 VNNI: VPDPBUSD, MR rows x 32 columns of int32 sums in 16 registers -------- */
TARGET_AVX512 __attribute__((always_inline))
static inline void block_vnni_rows(const uint8_t *a, int64_t width, int64_t i0, const int rows,
                                   const int8_t *panel, int64_t j0, const Epilogue *e) {
    int64_t k4 = width / 4;
    __m512i acc[MR][2];
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
    const uint8_t *base = a + i0 * width;
    for (int64_t g = 0; g < k4; g++) {
        __m512i b0 = _mm512_loadu_si512(panel + g * NR * 4);
        __m512i b1 = _mm512_loadu_si512(panel + g * NR * 4 + 64);
        for (int r = 0; r < rows; r++) {
            int32_t word;
            memcpy(&word, base + r * width + 4 * g, 4);
            __m512i av = _mm512_set1_epi32(word);
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], av, b0);
            acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], av, b1);
        }
    }
    int cols = e->n - j0 < NR ? (int)(e->n - j0) : NR;
    for (int h = 0; h < 2; h++) {
        int first = h * 16;
        if (first >= cols) break;
        __mmask16 mask = cols - first >= 16 ? 0xFFFF : (__mmask16)((1u << (cols - first)) - 1);
        __m512i colfix = _mm512_maskz_loadu_epi32(mask, e->colfix + j0 + first);
        __m512i zb = _mm512_maskz_loadu_epi32(mask, e->zb + j0 + first);
        __m512 scale = e->scale ? _mm512_maskz_loadu_ps(mask, e->scale + j0 + first) : _mm512_setzero_ps();
        __m512 bias = e->bias ? _mm512_maskz_loadu_ps(mask, e->bias + j0 + first) : _mm512_setzero_ps();
        for (int r = 0; r < rows; r++) {
            int64_t i = i0 + r;
            __m512i v = _mm512_sub_epi32(acc[r][h], _mm512_mullo_epi32(_mm512_set1_epi32(e->za[i]), colfix));
            v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_set1_epi32(e->rowsum[i]), zb));
            if (e->scale) {
                __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(v), scale);
                if (e->bias) y = _mm512_add_ps(y, bias);
                _mm512_mask_storeu_ps((float *)e->out + i * e->ldc + j0 + first, mask, y);
            } else {
                _mm512_mask_storeu_epi32((int32_t *)e->out + i * e->ldc + j0 + first, mask, v);
            }
        }
    }
}

TARGET_AVX512
static void block_vnni(const uint8_t *a, int64_t width, int64_t i0, int mr, const int8_t *panel,
                       int64_t j0, const Epilogue *e) {
    switch (mr) {   /* each row count unrolled on its own */
    case 8: block_vnni_rows(a, width, i0, 8, panel, j0, e); break;
    case 7: block_vnni_rows(a, width, i0, 7, panel, j0, e); break;
    case 6: block_vnni_rows(a, width, i0, 6, panel, j0, e); break;
    case 5: block_vnni_rows(a, width, i0, 5, panel, j0, e); break;
    case 4: block_vnni_rows(a, width, i0, 4, panel, j0, e); break;
    case 3: block_vnni_rows(a, width, i0, 3, panel, j0, e); break;
    case 2: block_vnni_rows(a, width, i0, 2, panel, j0, e); break;
    default: block_vnni_rows(a, width, i0, 1, panel, j0, e); break;
    }
}

typedef void (*BlockFn)(const uint8_t *, int64_t, int64_t, int, const int8_t *, int64_t, const Epilogue *);

/* out[m, n] (row stride ldc) = the product of A [m, k] (row stride lda) and the packed B,
 * with za (m values, or 1 broadcast) and zb (n values, or 1), as int32 when b_scale is NULL,
 * else as float32 times a_scale * b_scale (b_scale: n values, or 1; the product formed in
 * float32) plus bias (n values, or NULL).
 * Returns 0; -1 when scratch memory could not be had, -2 on a CPU with neither path. */
EXPORT int er_cpu_qgemm(const uint8_t *a, int64_t lda, int64_t m, int64_t k, int a_signed,
                        const int32_t *za, int64_t za_count,
                        const int8_t *packed, const int32_t *colsum, int64_t n, int b_signed,
                        const int32_t *zb, int64_t zb_count,
                        float a_scale, const float *b_scale, int64_t b_scale_count,
                        const float *bias, void *out, int64_t ldc) {
    int64_t width = (k + 3) / 4 * 4;
    size_t a_bytes = (size_t)m * width;
    uint8_t *a_packed = malloc(a_bytes ? a_bytes : 1);
    int32_t *rowsum = malloc((size_t)(m ? m : 1) * sizeof(int32_t));
    int32_t *za_full = malloc((size_t)(m ? m : 1) * sizeof(int32_t));
    int32_t *zb_full = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    int32_t *colfix = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    float *scale = b_scale ? malloc((size_t)(n ? n : 1) * sizeof(float)) : NULL;
    int status = 0;
    if (!a_packed || !rowsum || !za_full || !zb_full || !colfix || (b_scale && !scale)) {
        status = -1;
        goto done;
    }
    if (scale)
        for (int64_t j = 0; j < n; j++) scale[j] = a_scale * b_scale[b_scale_count > 1 ? j : 0];
    pack_a(a, lda, m, k, a_signed, a_packed, rowsum);
    for (int64_t i = 0; i < m; i++)
        za_full[i] = (za ? za[za_count > 1 ? i : 0] : 0) + (a_signed ? 128 : 0);
    for (int64_t j = 0; j < n; j++) {
        zb_full[j] = (zb ? zb[zb_count > 1 ? j : 0] : 0) - (b_signed ? 0 : 128);
        colfix[j] = (int32_t)((uint32_t)colsum[j] - (uint32_t)k * (uint32_t)zb_full[j]);
    }
    Epilogue e = {n, ldc, za_full, zb_full, colfix, rowsum, scale, bias, out};
    int path = cpu_isa();
    if (path == ISA_NONE) { status = -2; goto done; }
    BlockFn block = path == ISA_AVX512 ? block_vnni : block_avx2;
    int64_t k4 = width / 4;
    for (int64_t j0 = 0; j0 < n; j0 += NR) {
        const int8_t *panel = packed + (j0 / NR) * k4 * NR * 4;
        for (int64_t i0 = 0; i0 < m; i0 += MR)
            block(a_packed, width, i0, m - i0 < MR ? (int)(m - i0) : MR, panel, j0, &e);
    }
done:
    free(a_packed); free(rowsum); free(za_full); free(zb_full); free(colfix); free(scale);
    return status;
}
