/* Reductions over the middle axis of an (outer, R, inner) view: sum, mean, max, min,
 * sum of squares, and the index reductions ArgMax / ArgMin. The host folds the reduced axes into R (transposing first when they are
 * not adjacent). Also the global pools: GlobalAveragePool and GlobalMaxPool are reductions
 * with inner = 1.
 */
#include "common.h"

enum { R_SUM = 0, R_MEAN, R_MAX, R_MIN, R_SUM_SQUARE };

static inline __attribute__((always_inline)) v128_t combine(i32 op, v128_t acc, v128_t v) {
    switch (op) {
    case R_MAX: return wasm_f32x4_max(acc, v);
    case R_MIN: return wasm_f32x4_min(acc, v);
    case R_SUM_SQUARE: return wasm_f32x4_add(acc, wasm_f32x4_mul(v, v));
    default: return wasm_f32x4_add(acc, v);
    }
}

static inline float start_value(i32 op) {
    return op == R_MAX ? -__builtin_inff() : op == R_MIN ? __builtin_inff() : 0.0f;
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
    return (l[0] + l[1]) + (l[2] + l[3]);
}

static inline float combine1(i32 op, float acc, float v) {
    float out[4];
    wasm_v128_store(out, combine(op, wasm_f32x4_splat(acc), wasm_f32x4_splat(v)));
    return out[0];
}

EXPORT void er_reduce(i32 op, const float *x, float *y, i32 outer, i32 r, i32 inner) {
    float scale = (op == R_MEAN && r > 0) ? 1.0f / (float)r : 1.0f;
    v128_t init = wasm_f32x4_splat(start_value(op));
    for (i32 o = 0; o < outer; o++) {
        const float *xo = x + o * r * inner;
        float *yo = y + o * inner;
        if (inner == 1) {
            v128_t acc = init;
            i32 i = 0;
            for (; i + 4 <= r; i += 4) acc = combine(op, acc, wasm_v128_load(xo + i));
            float s = horizontal(op, acc);
            for (; i < r; i++) s = combine1(op, s, xo[i]);
            yo[0] = op == R_MEAN ? s * scale : s;
            continue;
        }
        i32 j = 0;
        for (; j + 4 <= inner; j += 4) {
            v128_t acc = init;
            for (i32 i = 0; i < r; i++) acc = combine(op, acc, wasm_v128_load(xo + i * inner + j));
            if (op == R_MEAN) acc = wasm_f32x4_mul(acc, wasm_f32x4_splat(scale));
            wasm_v128_store(yo + j, acc);
        }
        for (; j < inner; j++) {
            float s = start_value(op);
            for (i32 i = 0; i < r; i++) s = combine1(op, s, xo[i * inner + j]);
            yo[j] = op == R_MEAN ? s * scale : s;
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
