/* SGEMM: C (+)= op(A) op(B), packed and register-blocked (GotoBLAS loop order).
 *
 * A is M x K with element (i, k) at A[i*rsa + k*csa]; B is K x N with (k, j) at
 * B[k*rsb + j*csb]; so transposes are just strides. C is row-major with leading dimension
 * ldc. `accumulate` adds to what C holds (the host pre-fills C with a broadcast bias).
 *
 * Blocking: B panels of KC x NC are packed NR columns at a time, A blocks of MC x KC MR rows
 * at a time (zero padded), and a 4x8 micro-kernel keeps 8 accumulators of 4 lanes.
 * A's four values per k are broadcast one of two ways, whichever the engine compiles better
 * (er_set_splat_loads, set by the host): splat loads, 4-12% faster per model under V8
 * (inception_v1, squeezenet, MiniLM, ppocr det in Pyodide), or one vector load shuffled lane
 * by lane, ~30% faster under wasmtime's Cranelift (inception_v1's convolutions).
 */
#include "elemtypes.h"

#ifndef MC
#define MC 128
#endif
#ifndef KC
#define KC 256
#endif
#ifndef NC
#define NC 1024
#endif
#define MR 4
#define NR 8

static float pack_a_buf[MC * KC] __attribute__((aligned(16)));
static float pack_b_buf[KC * NC] __attribute__((aligned(16)));

static void pack_a(const float *A, i32 rsa, i32 csa, i32 mc, i32 kc, float *out) {
    for (i32 i0 = 0; i0 < mc; i0 += MR) {
        i32 mr = min_i32(MR, mc - i0);
        const float *a = A + i0 * rsa;
        if (mr == MR) {
            for (i32 k = 0; k < kc; k++, out += MR) {
                const float *col = a + k * csa;
                out[0] = col[0];
                out[1] = col[rsa];
                out[2] = col[2 * rsa];
                out[3] = col[3 * rsa];
            }
        } else {
            for (i32 k = 0; k < kc; k++, out += MR)
                for (i32 i = 0; i < MR; i++) out[i] = i < mr ? a[i * rsa + k * csa] : 0.0f;
        }
    }
}

static void pack_b(const float *B, i32 rsb, i32 csb, i32 kc, i32 nc, float *out) {
    for (i32 j0 = 0; j0 < nc; j0 += NR) {
        i32 nr = min_i32(NR, nc - j0);
        const float *b = B + j0 * csb;
        if (nr == NR && csb == 1) {
            for (i32 k = 0; k < kc; k++, out += NR) {
                const float *row = b + k * rsb;
                wasm_v128_store(out, wasm_v128_load(row));
                wasm_v128_store(out + 4, wasm_v128_load(row + 4));
            }
        } else {
            for (i32 k = 0; k < kc; k++, out += NR)
                for (i32 j = 0; j < NR; j++) out[j] = j < nr ? b[k * rsb + j * csb] : 0.0f;
        }
    }
}

static i32 splat_loads = 0;    /* how the micro-kernels broadcast A: see the top */

EXPORT void er_set_splat_loads(i32 on) { splat_loads = on; }

#define LANE(v, l) wasm_i32x4_shuffle(v, v, l, l, l, l)

/* Lanes 0..3 of `p` (32-bit units `unit` apart) broadcast to four vectors; `splat` is a
 * constant in each caller, so each micro-kernel is compiled twice, once per way. */
#define BROADCAST4(p, unit, splat, a0, a1, a2, a3)                                          \
    do {                                                                                    \
        if (splat) {                                                                        \
            a0 = wasm_v128_load32_splat(p);                                                 \
            a1 = wasm_v128_load32_splat((p) + (unit));                                      \
            a2 = wasm_v128_load32_splat((p) + 2 * (unit));                                  \
            a3 = wasm_v128_load32_splat((p) + 3 * (unit));                                  \
        } else {                                                                            \
            v128_t va = wasm_v128_load(p);                                                  \
            a0 = LANE(va, 0); a1 = LANE(va, 1); a2 = LANE(va, 2); a3 = LANE(va, 3);         \
        }                                                                                   \
    } while (0)

/* acc[4][8] = sum over k of a[k][0..3] x b[k][0..7]; written to C (mr x nr valid). */
static inline __attribute__((always_inline)) void micro_4x8_with(
        i32 kc, const float *a, const float *b, float *C, i32 ldc, i32 mr, i32 nr,
        i32 accumulate, const i32 splat) {
    v128_t c00 = wasm_f32x4_splat(0), c01 = c00, c10 = c00, c11 = c00;
    v128_t c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    for (i32 k = 0; k < kc; k++) {
        v128_t b0 = wasm_v128_load(b), b1 = wasm_v128_load(b + 4);
        v128_t a0, a1, a2, a3;
        BROADCAST4(a, 1, splat, a0, a1, a2, a3);
        c00 = wasm_f32x4_add(c00, wasm_f32x4_mul(a0, b0));
        c01 = wasm_f32x4_add(c01, wasm_f32x4_mul(a0, b1));
        c10 = wasm_f32x4_add(c10, wasm_f32x4_mul(a1, b0));
        c11 = wasm_f32x4_add(c11, wasm_f32x4_mul(a1, b1));
        c20 = wasm_f32x4_add(c20, wasm_f32x4_mul(a2, b0));
        c21 = wasm_f32x4_add(c21, wasm_f32x4_mul(a2, b1));
        c30 = wasm_f32x4_add(c30, wasm_f32x4_mul(a3, b0));
        c31 = wasm_f32x4_add(c31, wasm_f32x4_mul(a3, b1));
        a += MR;
        b += NR;
    }
    if (mr == MR && nr == NR) {
        v128_t rows[8] = {c00, c01, c10, c11, c20, c21, c30, c31};
        for (i32 i = 0; i < MR; i++) {
            float *c = C + i * ldc;
            v128_t lo = rows[2 * i], hi = rows[2 * i + 1];
            if (accumulate) {
                lo = wasm_f32x4_add(lo, wasm_v128_load(c));
                hi = wasm_f32x4_add(hi, wasm_v128_load(c + 4));
            }
            wasm_v128_store(c, lo);
            wasm_v128_store(c + 4, hi);
        }
        return;
    }
    float tile[MR * NR] __attribute__((aligned(16)));
    v128_t rows[8] = {c00, c01, c10, c11, c20, c21, c30, c31};
    for (i32 i = 0; i < 8; i++) wasm_v128_store(tile + 4 * i, rows[i]);
    for (i32 i = 0; i < mr; i++)
        for (i32 j = 0; j < nr; j++)
            C[i * ldc + j] = (accumulate ? C[i * ldc + j] : 0.0f) + tile[i * NR + j];
}

static void micro_4x8(i32 kc, const float *a, const float *b, float *C, i32 ldc, i32 mr, i32 nr,
                      i32 accumulate) {
    if (splat_loads)
        micro_4x8_with(kc, a, b, C, ldc, mr, nr, accumulate, 1);
    else
        micro_4x8_with(kc, a, b, C, ldc, mr, nr, accumulate, 0);
}

/* Fewer rows than one micro-tile (batch-1 fully connected layers): stream B once, unpacked.
 * B row-major (csb == 1): C row += a_k * B row k. B column-major (rsb == 1): dot products. */
static void small_m(i32 M, i32 N, i32 K, const float *A, i32 rsa, i32 csa, const float *B,
                    i32 rsb, i32 csb, float *C, i32 ldc, i32 accumulate) {
    for (i32 i = 0; i < M; i++) {
        const float *a = A + i * rsa;
        float *c = C + i * ldc;
        if (csb == 1) {
            if (!accumulate)
                for (i32 j = 0; j < N; j++) c[j] = 0.0f;
            for (i32 k = 0; k < K; k++) {
                v128_t av = wasm_f32x4_splat(a[k * csa]);
                const float *b = B + k * rsb;
                i32 j = 0;
                for (; j + 4 <= N; j += 4)
                    wasm_v128_store(c + j, wasm_f32x4_add(wasm_v128_load(c + j),
                                                          wasm_f32x4_mul(av, wasm_v128_load(b + j))));
                for (; j < N; j++) c[j] += a[k * csa] * b[j];
            }
        } else {
            for (i32 j = 0; j < N; j++) {
                const float *b = B + j * csb;
                v128_t acc = wasm_f32x4_splat(0.0f);
                i32 k = 0;
                if (csa == 1)
                    for (; k + 4 <= K; k += 4)
                        acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_v128_load(a + k),
                                                                 wasm_v128_load(b + k)));
                float l[4];
                wasm_v128_store(l, acc);
                float s = (l[0] + l[1]) + (l[2] + l[3]);
                for (; k < K; k++) s += a[k * csa] * b[k];
                c[j] = accumulate ? c[j] + s : s;
            }
        }
    }
}

/* Fewer columns than one micro-tile (a convolution over a handful of output positions, a
 * matrix-vector product) with A's rows contiguous: the packed kernel would compute NR columns
 * for N and repack all of A per call, so B's columns are copied contiguous once and each C
 * element is a dot product of an A row with one, four vector accumulators deep. */
static inline float dot(const float *a, const float *b, i32 k) {
    v128_t s0 = wasm_f32x4_splat(0.0f), s1 = s0, s2 = s0, s3 = s0;
    i32 i = 0;
    for (; i + 16 <= k; i += 16) {
        s0 = wasm_f32x4_add(s0, wasm_f32x4_mul(wasm_v128_load(a + i), wasm_v128_load(b + i)));
        s1 = wasm_f32x4_add(s1, wasm_f32x4_mul(wasm_v128_load(a + i + 4),
                                               wasm_v128_load(b + i + 4)));
        s2 = wasm_f32x4_add(s2, wasm_f32x4_mul(wasm_v128_load(a + i + 8),
                                               wasm_v128_load(b + i + 8)));
        s3 = wasm_f32x4_add(s3, wasm_f32x4_mul(wasm_v128_load(a + i + 12),
                                               wasm_v128_load(b + i + 12)));
    }
    for (; i + 4 <= k; i += 4)
        s0 = wasm_f32x4_add(s0, wasm_f32x4_mul(wasm_v128_load(a + i), wasm_v128_load(b + i)));
    v128_t s = wasm_f32x4_add(wasm_f32x4_add(s0, s1), wasm_f32x4_add(s2, s3));
    float l[4];
    wasm_v128_store(l, s);
    float total = (l[0] + l[1]) + (l[2] + l[3]);
    for (; i < k; i++) total += a[i] * b[i];
    return total;
}

static void small_n(i32 M, i32 N, i32 K, const float *A, i32 rsa, const float *B, i32 rsb,
                    i32 csb, float *C, i32 ldc, i32 accumulate) {
    float *bt = pack_b_buf;                     /* N rows of K: B's columns, contiguous */
    for (i32 j = 0; j < N; j++)
        for (i32 k = 0; k < K; k++) bt[j * K + k] = B[k * rsb + j * csb];
    for (i32 i = 0; i < M; i++) {
        const float *a = A + i * rsa;
        float *c = C + i * ldc;
        for (i32 j = 0; j < N; j++) {
            float v = dot(a, bt + j * K, K);
            c[j] = accumulate ? c[j] + v : v;
        }
    }
}

static void sgemm(i32 M, i32 N, i32 K, const float *A, i32 rsa, i32 csa, const float *B,
                  i32 rsb, i32 csb, float *C, i32 ldc, i32 accumulate) {
    if (N < NR && M >= MR && K > 0 && csa == 1 && N * K <= KC * NC) {
        small_n(M, N, K, A, rsa, B, rsb, csb, C, ldc, accumulate);
        return;
    }
    if (M < MR && K > 0 && (csb == 1 || rsb == 1)) {
        small_m(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, accumulate);
        return;
    }
    if (K == 0) {
        if (!accumulate)
            for (i32 i = 0; i < M; i++)
                for (i32 j = 0; j < N; j++) C[i * ldc + j] = 0.0f;
        return;
    }
    for (i32 jc = 0; jc < N; jc += NC) {
        i32 nc = min_i32(NC, N - jc);
        for (i32 pc = 0; pc < K; pc += KC) {
            i32 kc = min_i32(KC, K - pc);
            i32 acc = accumulate || pc > 0;
            pack_b(B + pc * rsb + jc * csb, rsb, csb, kc, nc, pack_b_buf);
            for (i32 ic = 0; ic < M; ic += MC) {
                i32 mc = min_i32(MC, M - ic);
                pack_a(A + ic * rsa + pc * csa, rsa, csa, mc, kc, pack_a_buf);
                for (i32 jr = 0; jr < nc; jr += NR) {
                    const float *bp = pack_b_buf + jr * kc;
                    for (i32 ir = 0; ir < mc; ir += MR)
                        micro_4x8(kc, pack_a_buf + ir * kc, bp, C + (ic + ir) * ldc + jc + jr,
                                  ldc, min_i32(MR, mc - ir), min_i32(NR, nc - jr), acc);
                }
            }
        }
    }
}

EXPORT void er_sgemm(i32 M, i32 N, i32 K, const float *A, i32 rsa, i32 csa, const float *B,
                     i32 rsb, i32 csb, float *C, i32 ldc, i32 accumulate) {
    sgemm(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, accumulate);
}

/* `batch` independent products; A, B and C advance by bsa, bsb, bsc elements per product
 * (0 broadcasts one operand over the batch). C's blocks are M x N row-major. */
EXPORT void er_sgemm_batch(i32 batch, i32 M, i32 N, i32 K, const float *A, i32 rsa, i32 csa,
                           i32 bsa, const float *B, i32 rsb, i32 csb, i32 bsb, float *C, i32 bsc,
                           i32 accumulate) {
    for (i32 b = 0; b < batch; b++)
        sgemm(M, N, K, A + b * bsa, rsa, csa, B + b * bsb, rsb, csb, C + b * bsc, N, accumulate);
}

void sgemm_internal(i32 M, i32 N, i32 K, const float *A, i32 rsa, i32 csa, const float *B,
                    i32 rsb, i32 csb, float *C, i32 ldc, i32 accumulate) {
    sgemm(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, accumulate);
}

/* ---- integer GEMM: C (int32) = (A - a_zp) (B - b_zp) of 8-bit operands ----------------
 *
 * MatMulInteger and QLinearMatMul. A (M x K) and B (K x N) are uint8 or int8 (type codes),
 * element (i, k) at A[i*rsa + k*csa]; a zero point is one value or, with its per flag, one
 * per row of A / per column of B, of the operand's type (null: 0). Packing subtracts the zero
 * points and stores int16 pairs along K, so i32x4.dot_i16x8_s multiplies 8 lanes and adds
 * neighbours: two k per instruction. A's panel holds, per k pair, the pair of each of MR rows
 * (one vector); B's, per k pair, the pairs of NR columns (two vectors). Sums wrap in 32 bits,
 * which ONNX allows (the same result as a wider sum wrapped at the end).
 */
#define IKC 256                     /* k per panel; even */

typedef struct {
    const void *x, *zp;
    i32 type, rs, cs, zp_per;       /* zp_per: a zero point per row (A) or column (B) */
} Quantized;

static int16_t ipack_a_buf[MC * IKC] __attribute__((aligned(16)));
static int16_t ipack_b_buf[IKC * NC] __attribute__((aligned(16)));

/* element (r, c) minus its zero point (`line`: the row of A or column of B it belongs to),
 * 0 outside rows x cols */
static inline int16_t centered(const Quantized *q, i32 r, i32 c, i32 rows, i32 cols,
                               i32 line) {
    if (r >= rows || c >= cols) return 0;
    i32 v = load8(q->x, (i64)r * q->rs + (i64)c * q->cs, q->type);
    if (q->zp) v -= load8(q->zp, q->zp_per ? line : 0, q->type);
    return (int16_t)v;
}

/* 8 consecutive 8-bit values as int16 lanes */
static inline v128_t widen8(const void *p, i32 type) {
    v128_t v = wasm_v128_load64_zero(p);
    return type == T_U8 ? wasm_u16x8_extend_low_u8x16(v) : wasm_i16x8_extend_low_i8x16(v);
}

static inline v128_t zero_point_splat(const Quantized *q, i32 line) {
    return wasm_i16x8_splat(q->zp ? (int16_t)load8(q->zp, q->zp_per ? line : 0, q->type) : 0);
}

/* Four k pairs (8 k from col) of MR = 4 whole rows of a row-major A from row r, minus their
 * zero points, as ipack_a lays them out: per pair, each row's two values. Each row's 8
 * values are four 32-bit pairs, so the layout is a 4 x 4 transpose of 32-bit lanes. */
static inline void ipack_a_rows(const Quantized *a, i32 r, i32 col, const v128_t zp[MR],
                                int16_t *out) {
    const uint8_t *base = (const uint8_t *)a->x + (i64)r * a->rs + col;
    v128_t r0 = wasm_i16x8_sub(widen8(base, a->type), zp[0]);
    v128_t r1 = wasm_i16x8_sub(widen8(base + a->rs, a->type), zp[1]);
    v128_t r2 = wasm_i16x8_sub(widen8(base + 2 * (i64)a->rs, a->type), zp[2]);
    v128_t r3 = wasm_i16x8_sub(widen8(base + 3 * (i64)a->rs, a->type), zp[3]);
    v128_t t0 = wasm_i32x4_shuffle(r0, r1, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(r2, r3, 0, 4, 1, 5);
    v128_t t2 = wasm_i32x4_shuffle(r0, r1, 2, 6, 3, 7), t3 = wasm_i32x4_shuffle(r2, r3, 2, 6, 3, 7);
    wasm_v128_store(out, wasm_i64x2_shuffle(t0, t1, 0, 2));
    wasm_v128_store(out + 8, wasm_i64x2_shuffle(t0, t1, 1, 3));
    wasm_v128_store(out + 16, wasm_i64x2_shuffle(t2, t3, 0, 2));
    wasm_v128_store(out + 24, wasm_i64x2_shuffle(t2, t3, 1, 3));
}

static void ipack_a(const Quantized *a, i32 row0, i32 col0, i32 mc, i32 kc, i32 rows,
                    int16_t *out) {
    for (i32 i0 = 0; i0 < mc; i0 += MR) {
        i32 k = 0;
        if (a->cs == 1 && i0 + MR <= mc) {          /* whole rows of MR: vectors */
            v128_t zp[MR];
            for (i32 i = 0; i < MR; i++) zp[i] = zero_point_splat(a, row0 + i0 + i);
            for (; k + 8 <= kc; k += 8, out += 8 * MR)
                ipack_a_rows(a, row0 + i0, col0 + k, zp, out);
        }
        for (; k < kc; k += 2)
            for (i32 i = 0; i < MR; i++, out += 2) {
                i32 r = row0 + i0 + i, live = i0 + i < mc;
                out[0] = live ? centered(a, r, col0 + k, rows, col0 + kc, r) : 0;
                out[1] = live ? centered(a, r, col0 + k + 1, rows, col0 + kc, r) : 0;
            }
    }
}

/* NR columns from column c of rows k and k + 1 of a row-major B, minus their zero points,
 * interleaved into k pairs: the vector loop of ipack_b */
static inline void ipack_b_rows(const Quantized *b, i32 k, i32 c, v128_t zp, int16_t *out) {
    const uint8_t *base = (const uint8_t *)b->x + (i64)k * b->rs + c;
    v128_t r0 = wasm_i16x8_sub(widen8(base, b->type), zp);
    v128_t r1 = wasm_i16x8_sub(widen8(base + b->rs, b->type), zp);
    wasm_v128_store(out, wasm_i16x8_shuffle(r0, r1, 0, 8, 1, 9, 2, 10, 3, 11));
    wasm_v128_store(out + 8, wasm_i16x8_shuffle(r0, r1, 4, 12, 5, 13, 6, 14, 7, 15));
}

static void ipack_b(const Quantized *b, i32 row0, i32 col0, i32 kc, i32 nc, i32 cols,
                    int16_t *out) {
    for (i32 j0 = 0; j0 < nc; j0 += NR) {
        i32 k = 0, c0 = col0 + j0;
        if (b->cs == 1 && j0 + NR <= nc) {          /* whole rows of NR bytes: vectors */
            v128_t zp = wasm_i16x8_splat(0);
            if (b->zp)
                zp = b->zp_per ? widen8((const uint8_t *)b->zp + c0, b->type)
                               : wasm_i16x8_splat((int16_t)load8(b->zp, 0, b->type));
            for (; k + 1 < kc; k += 2, out += 2 * NR) ipack_b_rows(b, row0 + k, c0, zp, out);
        }
        for (; k < kc; k += 2)
            for (i32 j = 0; j < NR; j++, out += 2) {
                i32 c = c0 + j, live = j0 + j < nc;
                out[0] = live ? centered(b, row0 + k, c, row0 + kc, cols, c) : 0;
                out[1] = live ? centered(b, row0 + k + 1, c, row0 + kc, cols, c) : 0;
            }
    }
}

#define DOT_ADD(acc, a, b) acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(a, b))

static inline __attribute__((always_inline)) void imicro_4x8_with(
        i32 pairs, const int16_t *a, const int16_t *b, i32 *C, i32 ldc, i32 mr, i32 nr,
        i32 accumulate, const i32 splat) {
    v128_t c00 = wasm_i32x4_splat(0), c01 = c00, c10 = c00, c11 = c00;
    v128_t c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    for (i32 p = 0; p < pairs; p++, a += 2 * MR, b += 2 * NR) {
        v128_t b0 = wasm_v128_load(b), b1 = wasm_v128_load(b + 8);
        v128_t a0, a1, a2, a3;
        BROADCAST4(a, 2, splat, a0, a1, a2, a3);
        DOT_ADD(c00, a0, b0);
        DOT_ADD(c01, a0, b1);
        DOT_ADD(c10, a1, b0);
        DOT_ADD(c11, a1, b1);
        DOT_ADD(c20, a2, b0);
        DOT_ADD(c21, a2, b1);
        DOT_ADD(c30, a3, b0);
        DOT_ADD(c31, a3, b1);
    }
    v128_t rows[8] = {c00, c01, c10, c11, c20, c21, c30, c31};
    if (mr == MR && nr == NR) {            /* a whole tile: vector stores (sums wrap) */
        for (i32 i = 0; i < MR; i++) {
            i32 *c = C + (i64)i * ldc;
            v128_t lo = rows[2 * i], hi = rows[2 * i + 1];
            if (accumulate) {
                lo = wasm_i32x4_add(lo, wasm_v128_load(c));
                hi = wasm_i32x4_add(hi, wasm_v128_load(c + 4));
            }
            wasm_v128_store(c, lo);
            wasm_v128_store(c + 4, hi);
        }
        return;
    }
    i32 tile[MR * NR] __attribute__((aligned(16)));
    for (i32 i = 0; i < 8; i++) wasm_v128_store(tile + 4 * i, rows[i]);
    for (i32 i = 0; i < mr; i++)
        for (i32 j = 0; j < nr; j++)
            C[(i64)i * ldc + j] = (i32)((uint32_t)(accumulate ? C[(i64)i * ldc + j] : 0) +
                                        (uint32_t)tile[i * NR + j]);
}

static void imicro_4x8(i32 pairs, const int16_t *a, const int16_t *b, i32 *C, i32 ldc, i32 mr,
                       i32 nr, i32 accumulate) {
    if (splat_loads)
        imicro_4x8_with(pairs, a, b, C, ldc, mr, nr, accumulate, 1);
    else
        imicro_4x8_with(pairs, a, b, C, ldc, mr, nr, accumulate, 0);
}

/* B packed whole for er_igemm_packed: every panel ipack_b makes, in the order the product
 * reads them (column blocks of NC, then k blocks of IKC), so a constant B (a weight) is
 * packed once per session instead of on every call. Panel (jc, pc) starts at
 * jc * round_up(K, 2) + round_up(nc, NR) * pc; the whole is round_up(N, NR) x round_up(K, 2)
 * int16 values. */
static inline i32 round_up(i32 x, i32 to) { return (x + to - 1) / to * to; }

static const int16_t *packed_panel(const int16_t *packed, i32 N, i32 K, i32 jc, i32 pc) {
    return packed + (i64)jc * round_up(K, 2) + (i64)round_up(min_i32(NC, N - jc), NR) * pc;
}

EXPORT i32 er_ipacked_b_count(i32 N, i32 K) { return round_up(N, NR) * round_up(K, 2); }

EXPORT void er_ipack_b(i32 N, i32 K, const void *B, i32 tb, i32 rsb, i32 csb,
                       const void *b_zp, i32 b_zp_per_col, int16_t *out) {
    Quantized b = {B, b_zp, tb, rsb, csb, b_zp_per_col};
    for (i32 jc = 0; jc < N; jc += NC)
        for (i32 pc = 0; pc < K; pc += IKC)
            ipack_b(&b, pc, jc, min_i32(IKC, K - pc), min_i32(NC, N - jc), N,
                    (int16_t *)packed_panel(out, N, K, jc, pc));
}

/* One MC x IKC block of A (packed) times the packed panel of B for columns jc.. jc + nc */
static void iblock(const int16_t *ap, const int16_t *bp, i32 mc, i32 nc, i32 pairs, i32 *C,
                   i32 ldc, i32 accumulate) {
    for (i32 jr = 0; jr < nc; jr += NR)
        for (i32 ir = 0; ir < mc; ir += MR)
            imicro_4x8(pairs, ap + ir * 2 * pairs, bp + jr * 2 * pairs, C + (i64)ir * ldc + jr,
                       ldc, min_i32(MR, mc - ir), min_i32(NR, nc - jr), accumulate);
}

/* C = (A - a_zp)(B - b_zp) with B packed by ipack_b, or by er_ipack_b into `packed`. With B
 * packed whole, each block of A is packed once for every column block; otherwise each panel
 * of B once for every row block. */
static void igemm(const Quantized *a, const Quantized *b, const int16_t *packed, i32 M, i32 N,
                  i32 K, i32 *C, i32 ldc) {
    if (K == 0) {
        for (i32 i = 0; i < M; i++)
            for (i32 j = 0; j < N; j++) C[(i64)i * ldc + j] = 0;
        return;
    }
    if (packed) {
        for (i32 ic = 0; ic < M; ic += MC) {
            i32 mc = min_i32(MC, M - ic);
            for (i32 pc = 0; pc < K; pc += IKC) {
                i32 kc = min_i32(IKC, K - pc), pairs = (kc + 1) / 2;
                ipack_a(a, ic, pc, mc, kc, M, ipack_a_buf);
                for (i32 jc = 0; jc < N; jc += NC)
                    iblock(ipack_a_buf, packed_panel(packed, N, K, jc, pc), mc,
                           min_i32(NC, N - jc), pairs, C + (i64)ic * ldc + jc, ldc, pc > 0);
            }
        }
        return;
    }
    for (i32 jc = 0; jc < N; jc += NC) {
        i32 nc = min_i32(NC, N - jc);
        for (i32 pc = 0; pc < K; pc += IKC) {
            i32 kc = min_i32(IKC, K - pc), pairs = (kc + 1) / 2;
            ipack_b(b, pc, jc, kc, nc, N, ipack_b_buf);
            for (i32 ic = 0; ic < M; ic += MC) {
                i32 mc = min_i32(MC, M - ic);
                ipack_a(a, ic, pc, mc, kc, M, ipack_a_buf);
                iblock(ipack_a_buf, ipack_b_buf, mc, nc, pairs, C + (i64)ic * ldc + jc, ldc,
                       pc > 0);
            }
        }
    }
}

EXPORT void er_igemm(i32 M, i32 N, i32 K, const void *A, i32 ta, i32 rsa, i32 csa,
                     const void *a_zp, i32 a_zp_per_row, const void *B, i32 tb, i32 rsb,
                     i32 csb, const void *b_zp, i32 b_zp_per_col, i32 *C, i32 ldc) {
    Quantized a = {A, a_zp, ta, rsa, csa, a_zp_per_row};
    Quantized b = {B, b_zp, tb, rsb, csb, b_zp_per_col};
    igemm(&a, &b, 0, M, N, K, C, ldc);
}

EXPORT void er_igemm_packed(i32 M, i32 N, i32 K, const void *A, i32 ta, i32 rsa, i32 csa,
                            const void *a_zp, i32 a_zp_per_row, const int16_t *packed, i32 *C,
                            i32 ldc) {
    Quantized a = {A, a_zp, ta, rsa, csa, a_zp_per_row};
    igemm(&a, 0, packed, M, N, K, C, ldc);
}
