/* A chain of float32 elementwise nodes over one tensor in one pass (com.edgerun
 * ElementwiseProgram, made by optimizer/fuse_elementwise_program.py): Add, Sub, Mul and Div of
 * earlier values or a scalar, and the QDQ pair's rounding to an 8-bit grid. Each instruction
 * computes one value, as the node it stands for does (float32, no contraction), so the result
 * is the nodes', bit for bit; the chain runs BLOCK values at a time, its intermediate values
 * staying in the L1 cache instead of a memory pass and a node call each. */
#include <stdint.h>
#include <string.h>
#include "isa.h"
#include "quantize_steps.h"

#define BLOCK 256
#define MAX_INSTRUCTIONS 15

enum { OP_ADD = 1, OP_SUB = 2, OP_MUL = 3, OP_DIV = 4, OP_RSUB = 5, OP_RDIV = 6,
       OP_QUANTIZE_DEQUANTIZE = 7 };

/* Register 0 is x; instruction i writes register i + 1 from registers a and b (b < 0: the
 * scalar c[0]). OP_RSUB and OP_RDIV are c[0] - a and c[0] / a. OP_QUANTIZE_DEQUANTIZE rounds a
 * to the grid c = [scale, zero point, low, high]. */
typedef struct {
    int32_t op, a, b, unused;
    float c[4];
} Instruction;

__attribute__((always_inline))
static inline void run_instruction(const Instruction *in, const float *const *regs, int64_t m,
                                   float *dst) {
    const float *a = regs[in->a], *b = in->b >= 0 ? regs[in->b] : 0;
    const float c = in->c[0];
    switch (in->op) {
    case OP_ADD:
        if (b) for (int64_t j = 0; j < m; j++) dst[j] = a[j] + b[j];
        else for (int64_t j = 0; j < m; j++) dst[j] = a[j] + c;
        break;
    case OP_SUB:
        if (b) for (int64_t j = 0; j < m; j++) dst[j] = a[j] - b[j];
        else for (int64_t j = 0; j < m; j++) dst[j] = a[j] - c;
        break;
    case OP_MUL:
        if (b) for (int64_t j = 0; j < m; j++) dst[j] = a[j] * b[j];
        else for (int64_t j = 0; j < m; j++) dst[j] = a[j] * c;
        break;
    case OP_DIV:
        if (b) for (int64_t j = 0; j < m; j++) dst[j] = a[j] / b[j];
        else for (int64_t j = 0; j < m; j++) dst[j] = a[j] / c;
        break;
    case OP_RSUB:
        for (int64_t j = 0; j < m; j++) dst[j] = c - a[j];
        break;
    case OP_RDIV:
        for (int64_t j = 0; j < m; j++) dst[j] = c / a[j];
        break;
    default: {          /* OP_QUANTIZE_DEQUANTIZE */
        const float scale = in->c[0], lo = in->c[2] - in->c[1], hi = in->c[3] - in->c[1];
        for (int64_t j = 0; j < m; j++) dst[j] = QUANTIZE_DEQUANTIZE(a[j], scale, lo, hi);
        break;
    }
    }
}

__attribute__((always_inline))
static inline void elementwise_program_body(const float *x, int64_t n, const Instruction *program,
                                            int64_t count, float *y) {
    float values[MAX_INSTRUCTIONS][BLOCK];
    const float *regs[MAX_INSTRUCTIONS + 1];
    for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
        const int64_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
        regs[0] = x + i0;
        for (int64_t k = 0; k < count; k++) {
            float *dst = k == count - 1 ? y + i0 : values[k];   /* the last straight to y */
            run_instruction(&program[k], regs, m, dst);
            regs[k + 1] = dst;
        }
    }
}
DISPATCHED(elementwise_program, (const float *x, int64_t n, const Instruction *program,
                                 int64_t count, float *y), (x, n, program, count, y))

/* One part's arguments as 64-bit words (the native pool's record form, pool.c). */
EXPORT int er_cpu_elementwise_program_record(const uint64_t *a) {
    er_cpu_elementwise_program(WORD(const float *, 0), WORD(int64_t, 1),
                               WORD(const Instruction *, 2), WORD(int64_t, 3), WORD(float *, 4));
    return 0;
}
