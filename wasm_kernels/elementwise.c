/* Elementwise kernels: unary activations (one loop per op over 4 lanes) and broadcasting
 * binary arithmetic.
 *
 * Broadcasting: the host merges dimensions and passes, through er_args, the output shape and
 * each input's strides in elements (0 where an input is broadcast). The innermost dimension
 * gets vector loops for the three common stride pairs (1,1), (1,0), (0,1).
 */
#include "vmath.h"

#define V(ptr) wasm_v128_load(ptr)
#define ST(ptr, v) wasm_v128_store(ptr, v)

static inline __attribute__((always_inline)) v128_t apply_unary(i32 op, v128_t x, float p0, float p1) {
    switch (op) {
    case U_RELU: return v_at_least(x, SPLAT(0.0f));
    case U_SIGMOID: return v_sigmoid(x);
    case U_TANH: return v_tanh(x);
    case U_CLIP: return v_clamp(x, SPLAT(p0), SPLAT(p1));
    case U_LEAKY_RELU:
        return wasm_v128_bitselect(x, wasm_f32x4_mul(x, SPLAT(p0)), wasm_f32x4_ge(x, SPLAT(0.0f)));
    case U_HARD_SIGMOID:
        return v_clamp(wasm_f32x4_add(wasm_f32x4_mul(x, SPLAT(p0)), SPLAT(p1)), SPLAT(0.0f),
                       SPLAT(1.0f));
    case U_HARD_SWISH: {
        v128_t h = wasm_f32x4_add(wasm_f32x4_mul(x, SPLAT(1.0f / 6)), SPLAT(0.5f));
        return wasm_f32x4_mul(x, v_clamp(h, SPLAT(0.0f), SPLAT(1.0f)));
    }
    case U_ERF: return v_erf(x);
    case U_GELU: {
        v128_t e = v_erf(wasm_f32x4_mul(x, SPLAT(0.70710678f)));
        return wasm_f32x4_mul(wasm_f32x4_mul(x, SPLAT(0.5f)), wasm_f32x4_add(e, SPLAT(1.0f)));
    }
    case U_GELU_TANH: {
        v128_t x3 = wasm_f32x4_mul(wasm_f32x4_mul(x, x), x);
        v128_t in = wasm_f32x4_mul(SPLAT(0.7978845608f),
                                   wasm_f32x4_add(x, wasm_f32x4_mul(x3, SPLAT(0.044715f))));
        return wasm_f32x4_mul(wasm_f32x4_mul(x, SPLAT(0.5f)),
                              wasm_f32x4_add(v_tanh(in), SPLAT(1.0f)));
    }
    case U_SOFTPLUS: {   /* max(x, 0) + log(1 + e^-|x|) */
        v128_t t = v_exp(wasm_f32x4_neg(wasm_f32x4_abs(x)));
        v128_t u = wasm_f32x4_add(SPLAT(1.0f), t);
        /* log1p(t) = log(u) * t / (u - 1), exact where u rounds */
        v128_t d = wasm_f32x4_sub(u, SPLAT(1.0f));
        v128_t l = v_log(u);
        v128_t lp = wasm_v128_bitselect(t, wasm_f32x4_div(wasm_f32x4_mul(l, t), d),
                                        wasm_f32x4_eq(d, SPLAT(0.0f)));
        return wasm_f32x4_add(v_at_least(x, SPLAT(0.0f)), lp);
    }
    case U_EXP: return v_exp(x);
    case U_NEG: return wasm_f32x4_neg(x);
    case U_ABS: return wasm_f32x4_abs(x);
    case U_SQRT: return wasm_f32x4_sqrt(x);
    case U_RECIPROCAL: return wasm_f32x4_div(SPLAT(1.0f), x);
    case U_LOG: return v_log(x);
    case U_ELU: {
        v128_t em1 = wasm_f32x4_mul(wasm_f32x4_sub(v_exp(x), SPLAT(1.0f)), SPLAT(p0));
        return wasm_v128_bitselect(x, em1, wasm_f32x4_ge(x, SPLAT(0.0f)));
    }
    case U_SOFTSIGN:
        return wasm_f32x4_div(x, wasm_f32x4_add(SPLAT(1.0f), wasm_f32x4_abs(x)));
    case U_FLOOR: return wasm_f32x4_floor(x);
    case U_CEIL: return wasm_f32x4_ceil(x);
    case U_SILU: return wasm_f32x4_mul(x, v_sigmoid(x));
    case U_AFFINE: return wasm_f32x4_add(wasm_f32x4_mul(x, SPLAT(p0)), SPLAT(p1));
    default: return x;
    }
}

/* y = op(x) on n floats; x and y may be the same buffer. */
void unary_f32(i32 op, const float *x, float *y, i32 n, float p0, float p1) {
    i32 i = 0;
#define UNARY_LOOP(OP) \
    for (; i + 4 <= n; i += 4) ST(y + i, apply_unary(OP, V(x + i), p0, p1)); break;
    switch (op) {   /* one loop per op so the switch is outside the loop */
    case U_RELU: UNARY_LOOP(U_RELU)
    case U_SIGMOID: UNARY_LOOP(U_SIGMOID)
    case U_TANH: UNARY_LOOP(U_TANH)
    case U_CLIP: UNARY_LOOP(U_CLIP)
    case U_LEAKY_RELU: UNARY_LOOP(U_LEAKY_RELU)
    case U_HARD_SIGMOID: UNARY_LOOP(U_HARD_SIGMOID)
    case U_HARD_SWISH: UNARY_LOOP(U_HARD_SWISH)
    case U_ERF: UNARY_LOOP(U_ERF)
    case U_GELU: UNARY_LOOP(U_GELU)
    case U_GELU_TANH: UNARY_LOOP(U_GELU_TANH)
    case U_SOFTPLUS: UNARY_LOOP(U_SOFTPLUS)
    case U_EXP: UNARY_LOOP(U_EXP)
    default: for (; i + 4 <= n; i += 4) ST(y + i, apply_unary(op, V(x + i), p0, p1)); break;
    }
#undef UNARY_LOOP
    if (i < n) {    /* the tail through one padded vector */
        float buf[4] = {0, 0, 0, 0};
        for (i32 j = 0; i + j < n; j++) buf[j] = x[i + j];
        v128_t r = apply_unary(op, V(buf), p0, p1);
        ST(buf, r);
        for (i32 j = 0; i + j < n; j++) y[i + j] = buf[j];
    }
}

EXPORT void er_unary(i32 op, const float *x, float *y, i32 n, float p0, float p1) {
    unary_f32(op, x, y, n, p0, p1);
}

/* ---- binary ------------------------------------------------------------------------------ */

enum { B_ADD = 0, B_SUB, B_MUL, B_DIV, B_MAX, B_MIN, B_POW };

static inline v128_t v_pow(v128_t a, v128_t b) {
    /* a^b = e^(b ln|a|), negative a only for integral b (sign from b's parity) */
    v128_t r = v_exp(wasm_f32x4_mul(b, v_log(wasm_f32x4_abs(a))));
    v128_t bi = wasm_i32x4_trunc_sat_f32x4(b);
    v128_t integral = wasm_f32x4_eq(wasm_f32x4_convert_i32x4(bi), b);
    v128_t odd = wasm_i32x4_eq(wasm_v128_and(bi, wasm_i32x4_splat(1)), wasm_i32x4_splat(1));
    v128_t neg = wasm_f32x4_lt(a, SPLAT(0.0f));
    v128_t flip = wasm_v128_and(neg, odd);
    r = wasm_v128_bitselect(wasm_f32x4_neg(r), r, flip);
    r = wasm_v128_bitselect(SPLAT(__builtin_nanf("")), r, wasm_v128_andnot(neg, integral));
    r = wasm_v128_bitselect(wasm_f32x4_mul(a, a), r, wasm_f32x4_eq(b, SPLAT(2.0f)));
    r = wasm_v128_bitselect(a, r, wasm_f32x4_eq(b, SPLAT(1.0f)));
    r = wasm_v128_bitselect(SPLAT(1.0f), r, wasm_f32x4_eq(b, SPLAT(0.0f)));
    return r;
}

static inline __attribute__((always_inline)) v128_t apply_binary(i32 op, v128_t a, v128_t b) {
    switch (op) {
    case B_ADD: return wasm_f32x4_add(a, b);
    case B_SUB: return wasm_f32x4_sub(a, b);
    case B_MUL: return wasm_f32x4_mul(a, b);
    case B_DIV: return wasm_f32x4_div(a, b);
    case B_MAX: return wasm_f32x4_max(a, b);
    case B_MIN: return wasm_f32x4_min(a, b);
    default: return v_pow(a, b);
    }
}

static inline float scalar_binary(i32 op, float a, float b) {
    float out[4];
    ST(out, apply_binary(op, wasm_f32x4_splat(a), wasm_f32x4_splat(b)));
    return out[0];
}

/* One innermost row: n outputs, input strides sa, sb. */
static void binary_row(i32 op, const float *a, i32 sa, const float *b, i32 sb, float *y, i32 n) {
    i32 i = 0;
#define ROW_LOOPS(OP)                                                                        \
    if (sa == 1 && sb == 1)                                                                \
        for (; i + 4 <= n; i += 4) ST(y + i, apply_binary(OP, V(a + i), V(b + i)));        \
    else if (sa == 1 && sb == 0) {                                                         \
        v128_t vb = wasm_f32x4_splat(*b);                                                  \
        for (; i + 4 <= n; i += 4) ST(y + i, apply_binary(OP, V(a + i), vb));              \
    } else if (sa == 0 && sb == 1) {                                                       \
        v128_t va = wasm_f32x4_splat(*a);                                                  \
        for (; i + 4 <= n; i += 4) ST(y + i, apply_binary(OP, va, V(b + i)));              \
    }                                                                                      \
    break;
    switch (op) {
    case B_ADD: ROW_LOOPS(B_ADD)
    case B_SUB: ROW_LOOPS(B_SUB)
    case B_MUL: ROW_LOOPS(B_MUL)
    case B_DIV: ROW_LOOPS(B_DIV)
    default: ROW_LOOPS(op)
    }
#undef ROW_LOOPS
    for (; i < n; i++) y[i] = scalar_binary(op, a[i * sa], b[i * sb]);
}

/* er_args: shape[rank], astride[rank], bstride[rank]; y is contiguous. */
EXPORT void er_binary(i32 op, const float *a, const float *b, float *y, i32 rank) {
    const i32 *shape = er_args, *sa = er_args + rank, *sb = er_args + 2 * rank;
    i32 idx[MAX_RANK] = {0}, off[2] = {0, 0};
    i32 inner = shape[rank - 1], rows = outer_rows(shape, rank);
    for (i32 r = 0; r < rows; r++) {
        binary_row(op, a + off[0], sa[rank - 1], b + off[1], sb[rank - 1], y, inner);
        y += inner;
        next_row(idx, shape, rank, 2, off);
    }
}

/* int64 Add/Sub/Mul with the same broadcasting (shape arithmetic). */
EXPORT void er_binary_i64(i32 op, const i64 *a, const i64 *b, i64 *y, i32 rank) {
    const i32 *shape = er_args, *sa = er_args + rank, *sb = er_args + 2 * rank;
    i32 idx[MAX_RANK] = {0}, off[2] = {0, 0};
    i32 inner = shape[rank - 1], rows = outer_rows(shape, rank);
    i32 ia = sa[rank - 1], ib = sb[rank - 1];
    for (i32 r = 0; r < rows; r++) {
        const i64 *pa = a + off[0], *pb = b + off[1];
        for (i32 i = 0; i < inner; i++) {
            i64 x = pa[i * ia], z = pb[i * ib];
            y[i] = op == B_ADD ? x + z : op == B_SUB ? x - z : x * z;
        }
        y += inner;
        next_row(idx, shape, rank, 2, off);
    }
}
