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
#include "qgemm.h"

#define NR 32          /* columns per panel */
#define MR 8           /* rows per block */

EXPORT int64_t er_cpu_qgemm_packed_size(int64_t k, int64_t n) {
    return ((n + NR - 1) / NR) * ((k + 3) / 4) * NR * 4;
}

/* B is read through a pointer per row (rows[r] + offset is row r's first column): a matrix
 * with a row stride, or a convolution's taps, each a shifted view of a padded image. */

/* One group of 4 rows of K by NR columns of B, byte by byte (a CPU without AVX2): padding
 * is 0 in B', and adds nothing. */
static void pack_group_plain(const uint8_t *const *rows, int64_t offset, int64_t k, int64_t n,
                             uint8_t flip, int64_t g, int64_t p, int8_t *dst, int32_t *colsum) {
    for (int c = 0; c < NR; c++) {
        for (int t = 0; t < 4; t++) {
            int64_t row = 4 * g + t, col = p + c;
            int8_t v = 0;
            if (row < k && col < n) {
                v = (int8_t)(rows[row][offset + col] ^ flip);
                colsum[col] += v;
            }
            dst[c * 4 + t] = v;
        }
    }
}

/* One group of `count` (1 to 4) rows of K by NR = 32 columns of B: the rows' bytes
 * interleaved column by column (a 4 x 32 byte transpose by unpacks; rows past `count` are
 * 0 in B'), and each column's 4 bytes summed into sums (four registers of 8 columns) by
 * multiply-adds with ones. */
TARGET_AVX2 __attribute__((always_inline))
static inline void pack_group_avx2(const uint8_t *const src[4], int count, __m256i flip,
                                   int8_t *dst, __m256i sums[4]) {
    __m256i r[4];
    for (int t = 0; t < 4; t++)
        r[t] = t < count ? _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)src[t]), flip)
                         : _mm256_setzero_si256();
    __m256i lo01 = _mm256_unpacklo_epi8(r[0], r[1]), hi01 = _mm256_unpackhi_epi8(r[0], r[1]);
    __m256i lo23 = _mm256_unpacklo_epi8(r[2], r[3]), hi23 = _mm256_unpackhi_epi8(r[2], r[3]);
    /* 128-bit lane 0 holds columns 0-15, lane 1 columns 16-31, 4 columns a quarter */
    __m256i q0 = _mm256_unpacklo_epi16(lo01, lo23), q1 = _mm256_unpackhi_epi16(lo01, lo23);
    __m256i q2 = _mm256_unpacklo_epi16(hi01, hi23), q3 = _mm256_unpackhi_epi16(hi01, hi23);
    __m256i out[4] = {_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q2, q3, 0x20),
                      _mm256_permute2x128_si256(q0, q1, 0x31), _mm256_permute2x128_si256(q2, q3, 0x31)};
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int q = 0; q < 4; q++) {
        _mm256_storeu_si256((__m256i *)(dst + 32 * q), out[q]);
        sums[q] = _mm256_add_epi32(sums[q], _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, out[q]), ones16));
    }
}

/* A panel of NR columns starting at column p (all of them inside B) over every group of K. */
TARGET_AVX2 __attribute__((always_inline))
static inline void pack_panel_avx2(const uint8_t *const *rows, int64_t offset, int64_t k,
                                   int64_t p, __m256i flip, int8_t *panel, int32_t *colsum) {
    __m256i sums[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                       _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int64_t row = 0; row < k; row += 4) {
        int count = k - row < 4 ? (int)(k - row) : 4;
        const uint8_t *src[4];
        for (int t = 0; t < 4; t++) src[t] = t < count ? rows[row + t] + offset + p : NULL;
        pack_group_avx2(src, count, flip, panel + row * NR, sums);
    }
    for (int q = 0; q < 4; q++) _mm256_storeu_si256((__m256i *)(colsum + 8 * q), sums[q]);
}

TARGET_AVX2
static void pack_b_avx2(const uint8_t *const *rows, int64_t offset, int64_t k, int64_t n,
                        uint8_t flip, int8_t *packed, int32_t *colsum) {
    int64_t k4 = (k + 3) / 4;
    __m256i flips = _mm256_set1_epi8((char)flip);
    int64_t whole = n / NR * NR;
    for (int64_t p = 0; p < whole; p += NR)
        pack_panel_avx2(rows, offset, k, p, flips, packed + (p / NR) * k4 * NR * 4, colsum + p);
    if (whole == n) return;
    /* the last columns, through 4 rows at a time of a zero-padded copy (flip ^ flip = 0) */
    int cols = (int)(n - whole);
    uint8_t copy[4][NR];
    const uint8_t *src[4] = {copy[0], copy[1], copy[2], copy[3]};
    int32_t sums[NR];
    __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                      _mm256_setzero_si256(), _mm256_setzero_si256()};
    int8_t *panel = packed + (whole / NR) * k4 * NR * 4;
    for (int64_t row = 0; row < k; row += 4) {
        int count = k - row < 4 ? (int)(k - row) : 4;
        for (int t = 0; t < count; t++) {
            memset(copy[t], flip, NR);
            memcpy(copy[t], rows[row + t] + offset + whole, (size_t)cols);
        }
        pack_group_avx2(src, count, flips, panel + row * NR, acc);
    }
    for (int q = 0; q < 4; q++) _mm256_storeu_si256((__m256i *)(sums + 8 * q), acc[q]);
    memcpy(colsum + whole, sums, (size_t)cols * sizeof(int32_t));
}

static void pack_b_plain(const uint8_t *const *rows, int64_t offset, int64_t k, int64_t n,
                         uint8_t flip, int8_t *packed, int32_t *colsum) {
    int64_t k4 = (k + 3) / 4;
    for (int64_t p = 0; p < n; p += NR)
        for (int64_t g = 0; g < k4; g++)
            pack_group_plain(rows, offset, k, n, flip, g, p,
                             packed + ((p / NR) * k4 + g) * NR * 4, colsum);
}

/* Packs columns [offset, offset + n) of the k rows of B (row r at rows[r]) and sums the
 * columns (of B'). A convolution's columns are packed at every call, hence the vector path. */
EXPORT void er_cpu_qgemm_pack_b_rows(const uint8_t *const *rows, int64_t offset, int64_t k,
                                     int64_t n, int b_signed, int8_t *packed, int32_t *colsum) {
    uint8_t flip = b_signed ? 0 : 0x80;
    memset(colsum, 0, (size_t)n * sizeof(int32_t));
    if (cpu_isa() != ISA_NONE) pack_b_avx2(rows, offset, k, n, flip, packed, colsum);
    else pack_b_plain(rows, offset, k, n, flip, packed, colsum);
}

/* Packs B [k, n] (row stride ldb elements) and sums its columns (of B'). Returns 0, or -1
 * when the row pointers could not be had. */
EXPORT int er_cpu_qgemm_pack_b(const uint8_t *b, int64_t ldb, int64_t k, int64_t n, int b_signed,
                               int8_t *packed, int32_t *colsum) {
    const uint8_t **rows = malloc((size_t)(k ? k : 1) * sizeof(*rows));
    if (!rows) return -1;
    for (int64_t r = 0; r < k; r++) rows[r] = b + r * ldb;
    er_cpu_qgemm_pack_b_rows(rows, 0, k, n, b_signed, packed, colsum);
    free(rows);
    return 0;
}

/* A' rows padded to k4*4 bytes (and to a whole block of MR rows), with their sums. */
__attribute__((always_inline))
static inline void qgemm_pack_a_body(const uint8_t *a, int64_t lda, int64_t m, int64_t k, int a_signed,
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
DISPATCHED(qgemm_pack_a, (const uint8_t *a, int64_t lda, int64_t m, int64_t k, int a_signed,
                          uint8_t *packed, int32_t *rowsum), (a, lda, m, k, a_signed, packed, rowsum))

EXPORT int64_t er_cpu_qgemm_packed_a_size(int64_t m, int64_t k) { return m * ((k + 3) / 4 * 4); }

/* What the epilogue needs of a call. */
typedef struct {
    int64_t n, ldc;
    const int32_t *za;      /* A' zero point per row (already + 128 for signed A) */
    const int32_t *zb;      /* B' zero point per column (already - 128 for unsigned B) */
    const int32_t *colfix;  /* colsum_j - k zb'_j */
    /* with one zero point each side, za' colfix_j and rowsum_i zb' (the correction's two
     * parts, made once: no multiply per value); NULL otherwise */
    const int32_t *colpart, *rowpart;
    const int32_t *rowsum;
    const float *scale;     /* per column, or NULL: int32 output */
    const float *bias;      /* per column, or NULL */
    const Requant *rq;      /* 8-bit output (QLinearConv), or NULL */
    void *out;
} Epilogue;

/* An 8-bit result per row (an output channel of a convolution): qgemm.h's Requant. */
static inline uint8_t requantize_one(const Requant *rq, int64_t i, int32_t v) {
    int32_t sum = (int32_t)((uint32_t)v + (uint32_t)(rq->bias ? rq->bias[i] : 0));
    float y = (float)sum * rq->mult[i];
    float low = (float)(rq->lo - rq->zy), high = (float)(rq->hi - rq->zy);
    y = y < low ? low : (y > high ? high : y);
    return (uint8_t)((int32_t)__builtin_rintf(y) + rq->zy);
}

/* One output value from its raw sum (the AVX2 path's epilogue). */
static inline void store_one(const Epilogue *e, int64_t i, int64_t j, int32_t raw) {
    uint32_t v = (uint32_t)raw - (uint32_t)e->za[i] * (uint32_t)e->colfix[j]
                 - (uint32_t)e->rowsum[i] * (uint32_t)e->zb[j];
    if (e->rq) {
        ((uint8_t *)e->out)[i * e->ldc + j] = requantize_one(e->rq, i, (int32_t)v);
    } else if (e->scale) {
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

/* requantize_one of 16 sums, stored as bytes under mask: the row's bias and multiplier, the
 * range [lo - zy, hi - zy] and zy given as values (read before any store: a byte store may
 * alias anything, so values read through pointers would be read again after each). */
TARGET_AVX512 __attribute__((always_inline))
static inline void requantize_16(__m512i v, int32_t bias, float mult, __m512 low, __m512 high,
                                 __m512i zy, uint8_t *dst, __mmask16 mask) {
    v = _mm512_add_epi32(v, _mm512_set1_epi32(bias));
    __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(mult));
    y = _mm512_min_ps(_mm512_max_ps(y, low), high);
    _mm512_mask_cvtepi32_storeu_epi8(dst, mask, _mm512_add_epi32(_mm512_cvtps_epi32(y), zy));
}

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
    /* the call's and the rows' values, read once before the stores (see requantize_16) */
    const Epilogue ep = *e;
    int32_t row_fix[MR], row_za[MR], row_sum[MR], row_bias[MR];
    float row_mult[MR];
    for (int r = 0; r < rows; r++) {
        int64_t i = i0 + r;
        row_fix[r] = ep.colpart ? ep.rowpart[i] : 0;
        row_za[r] = ep.za[i];
        row_sum[r] = ep.rowsum[i];
        row_bias[r] = ep.rq && ep.rq->bias ? ep.rq->bias[i] : 0;
        row_mult[r] = ep.rq ? ep.rq->mult[i] : 0.0f;
    }
    __m512 low = _mm512_setzero_ps(), high = _mm512_setzero_ps();
    __m512i zy = _mm512_setzero_si512();
    if (ep.rq) {
        low = _mm512_set1_ps((float)(ep.rq->lo - ep.rq->zy));
        high = _mm512_set1_ps((float)(ep.rq->hi - ep.rq->zy));
        zy = _mm512_set1_epi32(ep.rq->zy);
    }
    int cols = ep.n - j0 < NR ? (int)(ep.n - j0) : NR;
    for (int h = 0; h < 2; h++) {
        int first = h * 16;
        if (first >= cols) break;
        __mmask16 mask = cols - first >= 16 ? 0xFFFF : (__mmask16)((1u << (cols - first)) - 1);
        __m512i colfix = _mm512_maskz_loadu_epi32(mask, ep.colfix + j0 + first);
        __m512i zb = _mm512_maskz_loadu_epi32(mask, ep.zb + j0 + first);
        __m512i colpart = ep.colpart ? _mm512_maskz_loadu_epi32(mask, ep.colpart + j0 + first)
                                     : _mm512_setzero_si512();
        __m512 scale = ep.scale ? _mm512_maskz_loadu_ps(mask, ep.scale + j0 + first) : _mm512_setzero_ps();
        __m512 bias = ep.bias ? _mm512_maskz_loadu_ps(mask, ep.bias + j0 + first) : _mm512_setzero_ps();
        for (int r = 0; r < rows; r++) {
            int64_t i = i0 + r;
            __m512i v;
            if (ep.colpart) {
                v = _mm512_sub_epi32(_mm512_sub_epi32(acc[r][h], colpart),
                                     _mm512_set1_epi32(row_fix[r]));
            } else {
                v = _mm512_sub_epi32(acc[r][h], _mm512_mullo_epi32(_mm512_set1_epi32(row_za[r]), colfix));
                v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_set1_epi32(row_sum[r]), zb));
            }
            if (ep.rq) {
                requantize_16(v, row_bias[r], row_mult[r], low, high, zy,
                              (uint8_t *)ep.out + i * ep.ldc + j0 + first, mask);
            } else if (ep.scale) {
                __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(v), scale);
                if (ep.bias) y = _mm512_add_ps(y, bias);
                _mm512_mask_storeu_ps((float *)ep.out + i * ep.ldc + j0 + first, mask, y);
            } else {
                _mm512_mask_storeu_epi32((int32_t *)ep.out + i * ep.ldc + j0 + first, mask, v);
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

/* out[m, n] (row stride ldc) = the product of A packed by er_cpu_qgemm_pack_a (with its row
 * sums) and the packed B, with za (m values, or 1 broadcast) and zb (n values, or 1), as
 * int32 when b_scale is NULL, else as float32 times a_scale * b_scale (b_scale: n values, or
 * 1; the product formed in float32) plus bias (n values, or NULL).
 * Returns 0; -1 when scratch memory could not be had, -2 on a CPU with neither path. */
static int qgemm_packed(const uint8_t *a_packed, const int32_t *rowsum, int64_t m, int64_t k,
                        int a_signed, const int32_t *za, int64_t za_count,
                        const int8_t *packed, const int32_t *colsum, int64_t n, int b_signed,
                        const int32_t *zb, int64_t zb_count,
                        float a_scale, const float *b_scale, int64_t b_scale_count,
                        const float *bias, const Requant *rq, void *out, int64_t ldc) {
    int64_t width = (k + 3) / 4 * 4;
    int32_t *za_full = malloc((size_t)(m ? m : 1) * sizeof(int32_t));
    int32_t *zb_full = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    int32_t *colfix = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    float *scale = b_scale ? malloc((size_t)(n ? n : 1) * sizeof(float)) : NULL;
    int uniform = za_count <= 1 && zb_count <= 1 && m > 0;
    int32_t *colpart = uniform ? malloc((size_t)(n ? n : 1) * sizeof(int32_t)) : NULL;
    int32_t *rowpart = uniform ? malloc((size_t)(m ? m : 1) * sizeof(int32_t)) : NULL;
    int status = 0;
    if (!za_full || !zb_full || !colfix || (b_scale && !scale) ||
            (uniform && (!colpart || !rowpart))) {
        status = -1;
        goto done;
    }
    if (scale)
        for (int64_t j = 0; j < n; j++) scale[j] = a_scale * b_scale[b_scale_count > 1 ? j : 0];
    for (int64_t i = 0; i < m; i++)
        za_full[i] = (za ? za[za_count > 1 ? i : 0] : 0) + (a_signed ? 128 : 0);
    for (int64_t j = 0; j < n; j++) {
        zb_full[j] = (zb ? zb[zb_count > 1 ? j : 0] : 0) - (b_signed ? 0 : 128);
        colfix[j] = (int32_t)((uint32_t)colsum[j] - (uint32_t)k * (uint32_t)zb_full[j]);
    }
    if (uniform) {
        for (int64_t j = 0; j < n; j++)
            colpart[j] = (int32_t)((uint32_t)za_full[0] * (uint32_t)colfix[j]);
        for (int64_t i = 0; i < m; i++)
            rowpart[i] = (int32_t)((uint32_t)rowsum[i] * (uint32_t)zb_full[0]);
    }
    Epilogue e = {n, ldc, za_full, zb_full, colfix, colpart, rowpart, rowsum, scale, bias, rq,
                  out};
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
    free(za_full); free(zb_full); free(colfix); free(scale); free(colpart); free(rowpart);
    return status;
}

EXPORT int er_cpu_qgemm_packed(const uint8_t *a_packed, const int32_t *rowsum, int64_t m, int64_t k,
                               int a_signed, const int32_t *za, int64_t za_count,
                               const int8_t *packed, const int32_t *colsum, int64_t n, int b_signed,
                               const int32_t *zb, int64_t zb_count,
                               float a_scale, const float *b_scale, int64_t b_scale_count,
                               const float *bias, void *out, int64_t ldc) {
    return qgemm_packed(a_packed, rowsum, m, k, a_signed, za, za_count, packed, colsum, n, b_signed,
                        zb, zb_count, a_scale, b_scale, b_scale_count, bias, NULL, out, ldc);
}

/* er_cpu_qgemm_packed's int32 product requantized to 8 bits per row of A (rq, its rows
 * from the first of A's), into bytes out [m, n] (row stride ldc). */
EXPORT int er_cpu_qgemm_packed_requant(const uint8_t *a_packed, const int32_t *rowsum, int64_t m,
                                       int64_t k, int a_signed, const int32_t *za,
                                       int64_t za_count, const int8_t *packed,
                                       const int32_t *colsum, int64_t n, int b_signed,
                                       const int32_t *zb, int64_t zb_count, const Requant *rq,
                                       uint8_t *out, int64_t ldc) {
    return qgemm_packed(a_packed, rowsum, m, k, a_signed, za, za_count, packed, colsum, n, b_signed,
                        zb, zb_count, 1.0f, NULL, 0, NULL, rq, out, ldc);
}

/* er_cpu_qgemm_packed of A [m, k] (row stride lda), packed here. */
EXPORT int er_cpu_qgemm(const uint8_t *a, int64_t lda, int64_t m, int64_t k, int a_signed,
                        const int32_t *za, int64_t za_count,
                        const int8_t *packed, const int32_t *colsum, int64_t n, int b_signed,
                        const int32_t *zb, int64_t zb_count,
                        float a_scale, const float *b_scale, int64_t b_scale_count,
                        const float *bias, void *out, int64_t ldc) {
    uint8_t *a_packed = malloc((size_t)(m ? er_cpu_qgemm_packed_a_size(m, k) : 1));
    int32_t *rowsum = malloc((size_t)(m ? m : 1) * sizeof(int32_t));
    int status = -1;
    if (a_packed && rowsum) {
        er_cpu_qgemm_pack_a(a, lda, m, k, a_signed, a_packed, rowsum);
        status = er_cpu_qgemm_packed(a_packed, rowsum, m, k, a_signed, za, za_count, packed, colsum,
                                     n, b_signed, zb, zb_count, a_scale, b_scale, b_scale_count,
                                     bias, out, ldc);
    }
    free(a_packed); free(rowsum);
    return status;
}

/* A constant B bound once (MatMulIntegerToFloat's weights): what er_cpu_qgemm takes of B,
 * in one struct, so that a call passes one pointer instead of eight arguments (a ctypes
 * call costs ~0.1 us an argument, against products of a few microseconds). */
typedef struct {
    const int8_t *packed;
    const int32_t *colsum;
    int64_t k, n;
    int64_t b_signed;
    const int32_t *zb;
    int64_t zb_count;
    const float *bias;      /* n values, or NULL */
} BoundB;

/* float32 (A - za) @ (B - zb) * (a_scale * b_scale) + bias for A [m, k] (row stride lda)
 * and a bound B: er_cpu_qgemm's product. */
EXPORT int er_cpu_qgemm_bound(const BoundB *b, const uint8_t *a, int64_t lda, int64_t m,
                              int a_signed, int32_t za, float a_scale, const float *b_scale,
                              int64_t b_scale_count, float *out) {
    return er_cpu_qgemm(a, lda, m, b->k, a_signed, &za, 1, b->packed, b->colsum, b->n,
                        (int)b->b_signed, b->zb, b->zb_count, a_scale, b_scale, b_scale_count,
                        b->bias, out, b->n);
}

void er_cpu_dynamic_quantize(const float *x, int64_t n, uint8_t *y, float *scale_out,
                             uint8_t *zero_out);   /* elementwise.c */

/* com.microsoft DynamicQuantizeMatMul: float32 A [m, k] (contiguous) quantized to uint8 as
 * DynamicQuantizeLinear does (er_cpu_dynamic_quantize, over the whole tensor), then its
 * product with a bound B, scaled by that scale * b_scale, plus bias: the values of
 * DynamicQuantizeLinear then er_cpu_qgemm_bound, in one call. */
EXPORT int er_cpu_qgemm_dynamic(const BoundB *b, const float *a, int64_t m,
                                const float *b_scale, int64_t b_scale_count, float *out) {
    uint8_t *quantized = malloc((size_t)(m * b->k ? m * b->k : 1));
    if (!quantized) return -1;
    float scale;
    uint8_t zero;
    er_cpu_dynamic_quantize(a, m * b->k, quantized, &scale, &zero);
    int status = er_cpu_qgemm_bound(b, quantized, b->k, m, 0, zero, scale, b_scale,
                                    b_scale_count, out);
    free(quantized);
    return status;
}
