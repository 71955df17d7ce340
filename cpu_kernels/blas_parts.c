/* Parts of a float32 matrix product through numpy's own BLAS (cblas_sgemm, its address
 * looked up by native/products.py): the record form the native pool (pool.c) runs, so the
 * parts of MatMul, Gemm and the GEMM-based convolutions are handed to the pool's workers
 * without the GIL. BLAS is set to one thread before any parts run (native/parallel.py). */
#include <stdint.h>
#include "isa.h"

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

typedef void (*sgemm64)(int, int, int, int64_t, int64_t, int64_t, float, const float *,
                        int64_t, const float *, int64_t, float, float *, int64_t);
typedef void (*sgemm32)(int, int, int, int32_t, int32_t, int32_t, float, const float *,
                        int32_t, const float *, int32_t, float, float *, int32_t);

/* C[m, n] (row stride ldc) = A[m, k] (lda) x B[k, n] (ldb; B^T stored [n, k] with trans_b),
 * every stride in elements. Words: sgemm's address, whether its integers are 64-bit (an
 * ILP64 build, as numpy's wheels ship), trans_b, m, n, k, a, lda, b, ldb, c, ldc. */
EXPORT int er_cpu_sgemm_record(const uint64_t *w) {
    int trans_b = w[2] ? TRANS : NO_TRANS;
    const float *a = (const float *)(uintptr_t)w[6], *b = (const float *)(uintptr_t)w[8];
    float *c = (float *)(uintptr_t)w[10];
    if (w[1])
        ((sgemm64)(uintptr_t)w[0])(ROW_MAJOR, NO_TRANS, trans_b, (int64_t)w[3], (int64_t)w[4],
                                    (int64_t)w[5], 1.0f, a, (int64_t)w[7], b, (int64_t)w[9],
                                    0.0f, c, (int64_t)w[11]);
    else
        ((sgemm32)(uintptr_t)w[0])(ROW_MAJOR, NO_TRANS, trans_b, (int32_t)w[3], (int32_t)w[4],
                                    (int32_t)w[5], 1.0f, a, (int32_t)w[7], b, (int32_t)w[9],
                                    0.0f, c, (int32_t)w[11]);
    return 0;
}
