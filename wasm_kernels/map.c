/* Typed elementwise kernels: unary and broadcasting binary operators on any numeric element
 * type (float16/bfloat16/32/64, 8- to 64-bit integers, bool).
 *
 * Floats compute in double (dmath.h), integers in 64 bits (unsigned 64-bit where the type is
 * uint64), and the result is stored as the output's type. These are the general path: the
 * float32 activations and arithmetic that models spend their time in have SIMD loops in
 * elementwise.c, and the host takes those first.
 * Integer division and modulo by zero give 0 (wasm would trap; ONNX leaves it undefined).
 */
#include "elemtypes.h"

enum {
    B_ADD = 0, B_SUB, B_MUL, B_DIV, B_MAX, B_MIN, B_POW, B_MOD, B_FMOD, B_SHIFT_LEFT,
    B_SHIFT_RIGHT, B_BITWISE_AND, B_BITWISE_OR, B_BITWISE_XOR, B_PRELU
};

static inline int is_unsigned64(i32 t) { return t == T_U64; }

static inline double d_sigmoid(double x) {
    return x >= 0 ? 1 / (1 + d_exp(-x)) : d_exp(x) / (1 + d_exp(x));
}

static inline double d_softplus(double x) {            /* max(x, 0) + log1p(e^-|x|) */
    return (x > 0 ? x : 0) + d_log1p(d_exp(-__builtin_fabs(x)));
}

#include "unary_ops.h"

static double unary_float(i32 op, double x, double p0, double p1) {
    switch (op) {
    case M_IDENTITY: return x;
    case M_IS_INF: return (p0 != 0 && x == __builtin_inf()) || (p1 != 0 && x == -__builtin_inf());
    case M_IS_NAN: return x != x;
    case M_NOT: return x == 0;
    case M_CLIP: return x != x ? x : x < p0 ? p0 : x > p1 ? p1 : x;    /* min, max */
    case M_SATURATE: return x != x ? p0 : x < p0 ? p0 : x > p1 ? p1 : x;
    case M_GELU_TANH:
        return 0.5 * x * (1 + d_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    default: return row_unary(op, x, p0, p1);         /* ir/unary_ops.py's formulas */
    }
}

double map_unary_value(i32 op, double x, float p0, float p1) {
    return unary_float(op, x, p0, p1);
}

static i64 unary_int(i32 op, i64 x, int is_unsigned) {
    switch (op) {
    case M_ABS: return is_unsigned || x >= 0 ? x : -x;
    case M_NEG: return -x;
    case M_SIGN: return x > 0 ? 1 : x < 0 ? (is_unsigned ? 1 : -1) : 0;
    case M_RELU: return x > 0 || is_unsigned ? x : 0;
    case M_NOT: return x == 0;
    case M_BITWISE_NOT: return ~x;
    case M_IS_INF: case M_IS_NAN: return 0;
    default: return x;        /* M_IDENTITY, and rounding ops on integers */
    }
}

/* y[i] = op(x[i]) for n elements; x of type tx, y of type ty. */
/* IsNaN / IsInf of float32 into bool bytes, 16 at a time: the tests masks and guards in
 * exported attention graphs make on every run */
static i32 float32_predicate(i32 op, const float *x, uint8_t *y, i32 n, float p0, float p1) {
    v128_t pos = wasm_f32x4_splat(p0 != 0 ? __builtin_inff() : __builtin_nanf(""));
    v128_t neg = wasm_f32x4_splat(p1 != 0 ? -__builtin_inff() : __builtin_nanf(""));
    i32 i = 0;
    for (; i + 16 <= n; i += 16) {
        v128_t m[4];
        for (i32 j = 0; j < 4; j++) {
            v128_t v = wasm_v128_load(x + i + 4 * j);
            m[j] = op == M_IS_NAN ? wasm_f32x4_ne(v, v)
                                  : wasm_v128_or(wasm_f32x4_eq(v, pos), wasm_f32x4_eq(v, neg));
        }
        v128_t bytes = wasm_i8x16_narrow_i16x8(wasm_i16x8_narrow_i32x4(m[0], m[1]),
                                               wasm_i16x8_narrow_i32x4(m[2], m[3]));
        wasm_v128_store(y + i, wasm_v128_and(bytes, wasm_i8x16_splat(1)));
    }
    return i;
}

EXPORT void er_map_unary(i32 op, i32 tx, const void *x, i32 ty, void *y, i32 n, float p0,
                         float p1) {
    i32 start = 0;
    if (tx == T_F32 && ty == T_BOOL && (op == M_IS_NAN || op == M_IS_INF))
        start = float32_predicate(op, x, y, n, p0, p1);
    if (is_float_type(tx)) {
        for (i32 i = start; i < n; i++)
            store_float(y, i, ty, unary_float(op, load_float(x, i, tx), p0, p1));
    } else {
        int u = tx == T_U8 || tx == T_U16 || tx == T_U32 || tx == T_U64 || tx == T_BOOL;
        for (i32 i = 0; i < n; i++) store_int(y, i, ty, unary_int(op, load_int(x, i, tx), u));
    }
}

/* a^b: repeated squaring for integral b (exact where the result is), else e^(b log a) */
static double d_pow(double a, double b) {
    if (b == 0) return 1;
    if (d_isnan(a) || d_isnan(b)) return __builtin_nan("");
    if (b == __builtin_nearbyint(b) && __builtin_fabs(b) < 1e9) {
        i64 k = (i64)__builtin_fabs(b);
        double r = 1, base = a;
        while (k) { if (k & 1) r *= base; base *= base; k >>= 1; }
        return b < 0 ? 1 / r : r;
    }
    if (a < 0) return __builtin_nan("");
    if (a == 0) return b > 0 ? 0 : __builtin_inf();
    return d_exp(b * d_log(a));
}

static double binary_float(i32 op, double a, double b) {
    switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_MAX: return d_isnan(a) || d_isnan(b) ? __builtin_nan("") : a > b ? a : b;
    case B_MIN: return d_isnan(a) || d_isnan(b) ? __builtin_nan("") : a < b ? a : b;
    case B_POW: return d_pow(a, b);
    case B_FMOD: case B_MOD: {
        if (b == 0 || d_isinf(a) || d_isnan(a) || d_isnan(b)) return __builtin_nan("");
        if (d_isinf(b)) return op == B_FMOD || (a < 0) == (b < 0) || a == 0 ? a : b;
        double r = a - __builtin_trunc(a / b) * b;          /* C fmod: the dividend's sign */
        if (__builtin_fabs(r) >= __builtin_fabs(b)) r = 0;    /* a / b rounded up */
        if (op == B_MOD && r != 0 && (r < 0) != (b < 0)) r += b;   /* the divisor's sign */
        return r;
    }
    case B_PRELU: return a < 0 ? a * b : a;
    default: return __builtin_nan("");
    }
}

static i64 int_pow(i64 a, i64 b) {
    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    uint64_t r = 1, base = (uint64_t)a;
    while (b) { if (b & 1) r *= base; base *= base; b >>= 1; }
    return (i64)r;
}

/* a shifted by b bits, for a of `bits` bits: b out of [0, bits) leaves only the sign fill */
static i64 shift_int(i32 op, i64 a, i64 b, i32 bits, int is_signed) {
    if (b < 0 || b >= bits) return op == B_SHIFT_RIGHT && is_signed && a < 0 ? -1 : 0;
    if (op == B_SHIFT_LEFT) return (i64)((uint64_t)a << b);
    return is_signed ? a >> b : (i64)((uint64_t)a >> b);    /* arithmetic for signed types */
}

static i64 binary_int(i32 op, i64 a, i64 b, int u64) {
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case B_ADD: return (i64)(ua + ub);
    case B_SUB: return (i64)(ua - ub);
    case B_MUL: return (i64)(ua * ub);
    case B_DIV:
        if (b == 0) return 0;
        if (u64) return (i64)(ua / ub);
        return b == -1 ? (i64)(0 - ua) : a / b;
    case B_MAX: return u64 ? (i64)(ua > ub ? ua : ub) : a > b ? a : b;
    case B_MIN: return u64 ? (i64)(ua < ub ? ua : ub) : a < b ? a : b;
    case B_POW: return int_pow(a, b);
    case B_MOD: case B_FMOD: {
        if (b == 0) return 0;
        if (u64) return (i64)(ua % ub);
        i64 r = b == -1 ? 0 : a % b;                          /* truncated (fmod=1) */
        if (op == B_MOD && r != 0 && (r < 0) != (b < 0)) r += b;   /* floored (fmod=0) */
        return r;
    }
    case B_BITWISE_AND: return a & b;
    case B_BITWISE_OR: return a | b;
    case B_BITWISE_XOR: return a ^ b;
    case B_PRELU: return a < 0 ? a * b : a;
    default: return 0;
    }
}

/* er_args: shape[rank], astride[rank], bstride[rank]; y is contiguous of type ty.
 * Float a computes in double (b read as whatever it is: Pow's exponent may be an integer);
 * integer a with integer b computes in 64 bits, with a float b in double. */
EXPORT void er_map_binary(i32 op, i32 ta, const void *a, i32 tb, const void *b, i32 ty,
                          void *y, i32 rank) {
    const i32 *shape = er_args, *sa = er_args + rank, *sb = er_args + 2 * rank;
    i32 idx[MAX_RANK] = {0}, off[2] = {0, 0};      /* this row's element offsets in a, b */
    i32 inner = shape[rank - 1], ia = sa[rank - 1], ib = sb[rank - 1];
    i32 rows = outer_rows(shape, rank), out = 0;
    int in_float = is_float_type(ta) || is_float_type(tb);
    int u64 = is_unsigned64(ta), shifts = op == B_SHIFT_LEFT || op == B_SHIFT_RIGHT;
    int is_signed = ta == T_I8 || ta == T_I16 || ta == T_I32 || ta == T_I64;
    i32 bits = ta == T_U8 || ta == T_I8 || ta == T_BOOL ? 8 : ta == T_U16 || ta == T_I16 ? 16
             : ta == T_U32 || ta == T_I32 ? 32 : 64;
    for (i32 r = 0; r < rows; r++) {
        for (i32 i = 0; i < inner; i++) {
            i32 ka = off[0] + i * ia, kb = off[1] + i * ib;
            if (in_float) {
                double x = is_float_type(ta) ? load_float(a, ka, ta) : (double)load_int(a, ka, ta);
                double z = is_float_type(tb) ? load_float(b, kb, tb) : (double)load_int(b, kb, tb);
                store_float(y, out + i, ty, binary_float(op, x, z));
            } else {
                i64 x = load_int(a, ka, ta), z = load_int(b, kb, tb);
                store_int(y, out + i, ty, shifts ? shift_int(op, x, z, bits, is_signed)
                                                 : binary_int(op, x, z, u64));
            }
        }
        out += inner;
        next_row(idx, shape, rank, 2, off);
    }
}
