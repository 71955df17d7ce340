/* SGEMM: C (+)= op(A) op(B), packed and register-blocked (GotoBLAS loop order).
 *
 * A is M x K with element (i, k) at A[i*rsa + k*csa]; B is K x N with (k, j) at
 * B[k*rsb + j*csb]; so transposes are just strides. C is row-major with leading dimension
 * ldc. `accumulate` adds to what C holds (the host pre-fills C with a broadcast bias).
 *
 * Blocking: B panels of KC x NC are packed NR columns at a time, A blocks of MC x KC MR rows
 * at a time (zero padded), and a 4x8 micro-kernel keeps 8 accumulators of 4 lanes.
 * A's four values per k are one vector, broadcast lane by lane with shuffles (faster than
 * splat loads under wasmtime's Cranelift).
 */
#include "common.h"

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

#define LANE(v, l) wasm_i32x4_shuffle(v, v, l, l, l, l)

/* acc[4][8] = sum over k of a[k][0..3] x b[k][0..7]; written to C (mr x nr valid). */
static void micro_4x8(i32 kc, const float *a, const float *b, float *C, i32 ldc, i32 mr, i32 nr,
                      i32 accumulate) {
    v128_t c00 = wasm_f32x4_splat(0), c01 = c00, c10 = c00, c11 = c00;
    v128_t c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    for (i32 k = 0; k < kc; k++) {
        v128_t va = wasm_v128_load(a);
        v128_t b0 = wasm_v128_load(b), b1 = wasm_v128_load(b + 4);
        v128_t a0 = LANE(va, 0), a1 = LANE(va, 1), a2 = LANE(va, 2), a3 = LANE(va, 3);
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

static void sgemm(i32 M, i32 N, i32 K, const float *A, i32 rsa, i32 csa, const float *B,
                  i32 rsb, i32 csb, float *C, i32 ldc, i32 accumulate) {
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

/* C (int32, row stride ldc) = A (M x K) B (K x N) over int32 operands (centered quantized
 * values), summed in 64 bits and wrapped to 32 at the end (ONNX: the accumulation may
 * overflow only in 32 bits). Strides in elements. */
EXPORT void er_igemm(i32 M, i32 N, i32 K, const i32 *A, i32 rsa, i32 csa, const i32 *B,
                     i32 rsb, i32 csb, i32 *C, i32 ldc) {
    for (i32 i = 0; i < M; i++) {
        for (i32 j = 0; j < N; j++) {
            i64 sum = 0;
            for (i32 k = 0; k < K; k++)
                sum += (i64)A[(i64)i * rsa + (i64)k * csa] * B[(i64)k * rsb + (i64)j * csb];
            C[(i64)i * ldc + j] = (i32)sum;
        }
    }
}
