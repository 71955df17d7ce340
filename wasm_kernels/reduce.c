/* Reductions over the middle axis of an (outer, R, inner) view: sum, mean, max, min,
 * sum of squares, product, L1, L2, log-sum and log-sum-exp, and the index reductions ArgMax /
 * ArgMin. The host folds the reduced axes into R (transposing first when they are not
 * adjacent). Also the global pools: GlobalAveragePool and GlobalMaxPool are reductions
 * with inner = 1. er_reduce_int and er_argmax_int take integer and bool tensors.
 */
#include "elemtypes.h"

enum { R_SUM = 0, R_MEAN, R_MAX, R_MIN, R_SUM_SQUARE, R_PROD, R_L1, R_L2, R_LOG_SUM,
       R_LOG_SUM_EXP };

static inline __attribute__((always_inline)) v128_t combine(i32 op, v128_t acc, v128_t v) {
    switch (op) {
    case R_MAX: return wasm_f32x4_max(acc, v);
    case R_MIN: return wasm_f32x4_min(acc, v);
    case R_SUM_SQUARE: case R_L2: return wasm_f32x4_add(acc, wasm_f32x4_mul(v, v));
    case R_PROD: return wasm_f32x4_mul(acc, v);
    case R_L1: return wasm_f32x4_add(acc, wasm_f32x4_abs(v));
    default: return wasm_f32x4_add(acc, v);
    }
}

static inline float start_value(i32 op) {
    return op == R_MAX ? -__builtin_inff() : op == R_MIN ? __builtin_inff()
         : op == R_PROD ? 1.0f : 0.0f;
}

/* the result from the combined value s of r elements */
static inline float finish(i32 op, float s, i32 r) {
    switch (op) {
    case R_MEAN: return r > 0 ? s * (1.0f / (float)r) : s;
    case R_L2: return __builtin_sqrtf(s);
    case R_LOG_SUM: return (float)d_log(s);
    default: return s;
    }
}

/* log(sum(e^x)) over r elements `stride` apart, shifted by their maximum */
static float log_sum_exp(const float *x, i32 r, i32 stride) {
    float m = -__builtin_inff();
    for (i32 i = 0; i < r; i++) {
        float v = x[i * stride];
        m = v > m || v != v ? v : m;
    }
    if (m != m || m == __builtin_inff() || m == -__builtin_inff()) return m;
    double s = 0;
    for (i32 i = 0; i < r; i++) s += d_exp((double)x[i * stride] - m);
    return (float)(m + d_log(s));
}

static inline float horizontal(i32 op, v128_t v) {
    float l[4];
    wasm_v128_store(l, v);
    if (op == R_MAX) {
        float m = l[0];
        for (int i = 1; i < 4; i++) m = (l[i] > m || l[i] != l[i]) ? l[i] : m;
        return m;
    }
    if (op == R_MIN) {
        float m = l[0];
        for (int i = 1; i < 4; i++) m = (l[i] < m || l[i] != l[i]) ? l[i] : m;
        return m;
    }
    if (op == R_PROD) return (l[0] * l[1]) * (l[2] * l[3]);
    return (l[0] + l[1]) + (l[2] + l[3]);
}

static inline float combine1(i32 op, float acc, float v) {
    float out[4];
    wasm_v128_store(out, combine(op, wasm_f32x4_splat(acc), wasm_f32x4_splat(v)));
    return out[0];
}

EXPORT void er_reduce(i32 op, const float *x, float *y, i32 outer, i32 r, i32 inner) {
    v128_t init = wasm_f32x4_splat(start_value(op));
    for (i32 o = 0; o < outer; o++) {
        const float *xo = x + o * r * inner;
        float *yo = y + o * inner;
        if (op == R_LOG_SUM_EXP) {
            for (i32 j = 0; j < inner; j++) yo[j] = log_sum_exp(xo + j, r, inner);
            continue;
        }
        if (inner == 1) {
            v128_t acc = init;
            i32 i = 0;
            for (; i + 4 <= r; i += 4) acc = combine(op, acc, wasm_v128_load(xo + i));
            float s = horizontal(op, acc);
            for (; i < r; i++) s = combine1(op, s, xo[i]);
            yo[0] = finish(op, s, r);
            continue;
        }
        i32 j = 0;
        for (; j + 4 <= inner; j += 4) {
            v128_t acc = init;
            for (i32 i = 0; i < r; i++) acc = combine(op, acc, wasm_v128_load(xo + i * inner + j));
            float lanes[4];
            wasm_v128_store(lanes, acc);
            for (int l = 0; l < 4; l++) yo[j + l] = finish(op, lanes[l], r);
        }
        for (; j < inner; j++) {
            float s = start_value(op);
            for (i32 i = 0; i < r; i++) s = combine1(op, s, xo[i * inner + j]);
            yo[j] = finish(op, s, r);
        }
    }
}

/* ArgMax / ArgMin over the middle axis of (outer, R, inner) into int64 indices: the first
 * extreme, or the last with select_last; NaN counts as the extreme (numpy's rule). */
EXPORT void er_argmax(const float *x, i64 *y, i32 outer, i32 r, i32 inner, i32 is_min,
                      i32 select_last) {
    for (i32 o = 0; o < outer; o++) {
        for (i32 j = 0; j < inner; j++) {
            const float *p = x + (size_t)o * r * inner + j;
            i32 best = 0;
            float v = p[0];
            for (i32 i = 1; i < r && v == v; i++) {
                float w = p[(size_t)i * inner];
                int better = w != w || (is_min ? w < v : w > v) || (select_last && w == v);
                if (better) {
                    best = i;
                    v = w;
                }
            }
            y[(size_t)o * inner + j] = best;
        }
    }
}

/* ---- integer and bool tensors ---------------------------------------------------------- */

static inline int int_greater(i32 t, i64 a, i64 b) {
    return t == T_U64 ? (uint64_t)a > (uint64_t)b : a > b;
}

static inline double int_as_double(i32 t, i64 v) {
    return t == T_U64 ? (double)(uint64_t)v : (double)v;
}

/* the value an empty max (largest = 0) or min (largest = 1) gives: the type's extreme */
static i64 int_extreme(i32 t, int largest) {
    switch (t) {
    case T_BOOL: return largest;
    case T_U8: return largest ? 255 : 0;
    case T_I8: return largest ? 127 : -128;
    case T_U16: return largest ? 65535 : 0;
    case T_I16: return largest ? 32767 : -32768;
    case T_I32: return largest ? 2147483647 : -2147483647 - 1;
    case T_U32: return largest ? 4294967295LL : 0;
    case T_U64: return largest ? -1 : 0;             /* all bits set */
    default: return largest ? 9223372036854775807LL : -9223372036854775807LL - 1;
    }
}

/* One reduced set of r elements `stride` apart, as the CPU provider computes it: sums,
 * products, L1 and sums of squares wrap in 64 bits (then keep the type's low bits, as
 * numpy's sum in the type does); the mean divides the int64 sum truncating toward zero;
 * L2 and the log-sums go through double and truncate. */
static void reduce_int_set(i32 op, i32 t, const void *x, size_t first, i32 r, i32 stride,
                           void *y, size_t at) {
    if (op == R_L2 || op == R_LOG_SUM || op == R_LOG_SUM_EXP) {
        double m = -__builtin_inf(), s = 0;
        if (op == R_LOG_SUM_EXP) {
            for (i32 i = 0; i < r; i++) {
                double v = int_as_double(t, load_int(x, first + (size_t)i * stride, t));
                m = v > m ? v : m;
            }
        }
        for (i32 i = 0; i < r; i++) {
            double v = int_as_double(t, load_int(x, first + (size_t)i * stride, t));
            s += op == R_L2 ? v * v : op == R_LOG_SUM ? v : d_exp(v - m);
        }
        double result = op == R_L2 ? __builtin_sqrt(s) : op == R_LOG_SUM ? d_log(s)
                      : r ? m + d_log(s) : -__builtin_inf();
        store_float(y, at, t, result);
        return;
    }
    i64 acc = op == R_PROD ? 1 : op == R_MAX ? int_extreme(t, 0)
            : op == R_MIN ? int_extreme(t, 1) : 0;
    for (i32 i = 0; i < r; i++) {
        i64 v = load_int(x, first + (size_t)i * stride, t);
        switch (op) {
        case R_MAX: acc = int_greater(t, v, acc) ? v : acc; break;
        case R_MIN: acc = int_greater(t, acc, v) ? v : acc; break;
        case R_PROD: acc = (i64)((uint64_t)acc * (uint64_t)v); break;
        case R_SUM_SQUARE: acc = (i64)((uint64_t)acc + (uint64_t)v * (uint64_t)v); break;
        case R_L1: acc = (i64)((uint64_t)acc + (uint64_t)(v < 0 && t != T_U64 ? -v : v)); break;
        default: acc = (i64)((uint64_t)acc + (uint64_t)v); break;     /* sum, mean */
        }
    }
    if (op == R_MEAN && r > 0) acc /= r;
    store_int(y, at, t, acc);
}

EXPORT void er_reduce_int(i32 op, i32 t, const void *x, void *y, i32 outer, i32 r, i32 inner) {
    for (i32 o = 0; o < outer; o++)
        for (i32 j = 0; j < inner; j++)
            reduce_int_set(op, t, x, (size_t)o * r * inner + j, r, inner, y,
                           (size_t)o * inner + j);
}

/* ArgMax / ArgMin of an integer or bool tensor, as er_argmax */
EXPORT void er_argmax_int(i32 t, const void *x, i64 *y, i32 outer, i32 r, i32 inner,
                          i32 is_min, i32 select_last) {
    for (i32 o = 0; o < outer; o++) {
        for (i32 j = 0; j < inner; j++) {
            size_t first = (size_t)o * r * inner + j;
            i32 best = 0;
            i64 v = load_int(x, first, t);
            for (i32 i = 1; i < r; i++) {
                i64 w = load_int(x, first + (size_t)i * inner, t);
                int better = is_min ? int_greater(t, v, w) : int_greater(t, w, v);
                if (better || (select_last && w == v)) {
                    best = i;
                    v = w;
                }
            }
            y[(size_t)o * inner + j] = best;
        }
    }
}
