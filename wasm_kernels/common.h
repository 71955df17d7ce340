/* Shared definitions for edgerun's WebAssembly kernels (freestanding C, SIMD128).
 *
 * Conventions: every pointer is an offset into the module's linear memory; sizes and
 * strides are int32 element counts unless named *_bytes. Kernels never allocate: the host
 * allocates outputs and scratch with er_alloc (alloc.c) before calling, so linear memory
 * only grows inside er_alloc and the host knows when to rebuild its memory views.
 * Shape/stride arrays too long for arguments go through er_args (see args_ptr()).
 */
#ifndef EDGERUN_COMMON_H
#define EDGERUN_COMMON_H

#include <stdint.h>
#include <stddef.h>
#include <wasm_simd128.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_RANK 8

typedef int32_t i32;
typedef int64_t i64;

/* A small shared block the host fills with shapes and strides before a call. */
extern i32 er_args[256];

static inline i32 min_i32(i32 a, i32 b) { return a < b ? a : b; }
static inline i32 max_i32(i32 a, i32 b) { return a > b ? a : b; }

/* The outputs [lo, hi) of `count` whose input position o * stride + x0 lies inside [0, size)
 * (a window tap's valid span along one axis: pooling and depthwise convolution). */
static inline void inside_outputs(i32 x0, i32 stride, i32 size, i32 count, i32 *lo, i32 *hi) {
    i32 first = x0 >= 0 ? 0 : (-x0 + stride - 1) / stride;
    i32 last = size - 1 - x0 >= 0 ? (size - 1 - x0) / stride + 1 : 0;
    *lo = min_i32(first, count);
    *hi = max_i32(min_i32(last, count), *lo);
}

/* Unary operation codes, shared by er_unary and the fused epilogues (keep in sync with
 * providers/wasm/kernels.py UNARY). */
enum {
    U_IDENTITY = 0, U_RELU, U_SIGMOID, U_TANH, U_CLIP, U_LEAKY_RELU, U_HARD_SIGMOID,
    U_HARD_SWISH, U_ERF, U_GELU, U_GELU_TANH, U_SOFTPLUS, U_EXP, U_NEG, U_ABS, U_SQRT,
    U_RECIPROCAL, U_LOG, U_ELU, U_SOFTSIGN, U_FLOOR, U_CEIL, U_SILU, U_AFFINE
};

/* One element of 1, 2, 4 or 8 bytes (any other size byte by byte). */
static inline void copy_element(unsigned char *d, const unsigned char *s, i32 size) {
    switch (size) {
    case 4: *(uint32_t *)d = *(const uint32_t *)s; break;
    case 8: *(uint64_t *)d = *(const uint64_t *)s; break;
    case 2: *(uint16_t *)d = *(const uint16_t *)s; break;
    case 1: *d = *s; break;
    default: __builtin_memcpy(d, s, (size_t)size);
    }
}

/* Broadcasting loops: the host passes shape[rank], then one stride list (elements, 0 where
 * broadcast) per operand, through er_args. A kernel walks the innermost dimension itself and
 * calls next_row after each row: it advances the index over the outer dimensions and each
 * operand's element offset (offsets[k] reads the stride list k). */
static inline i32 outer_rows(const i32 *shape, i32 rank) {
    i32 rows = 1;
    for (i32 d = 0; d < rank - 1; d++) rows *= shape[d];
    return rows;
}

static inline void next_row(i32 *idx, const i32 *shape, i32 rank, i32 operands, i32 *offsets) {
    for (i32 d = rank - 2; d >= 0; d--) {
        for (i32 k = 0; k < operands; k++) offsets[k] += er_args[(k + 1) * rank + d];
        if (++idx[d] < shape[d]) return;
        for (i32 k = 0; k < operands; k++) offsets[k] -= er_args[(k + 1) * rank + d] * shape[d];
        idx[d] = 0;
    }
}

void unary_f32(i32 op, const float *x, float *y, i32 n, float p0, float p1);
/* one value through a typed-kernel operation (map.c's M_ codes), in double */
double map_unary_value(i32 op, double x, float p0, float p1);

#include "kernels.h"

#endif
