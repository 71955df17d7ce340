/* The ai.onnx.ml operators' per-row score steps in one call: SOFTMAX over each row of
 * float32 scores (the post_transform of linear, SVM and tree models) and Normalizer's MAX,
 * L1 and L2 forms. providers/cpu/ops/ml.py's numpy forms take a dozen numpy calls, a
 * microsecond each, at batch 1; these are one. The steps are onnxruntime's and the numpy
 * path's, in their order: a row's maximum (from the lowest finite float, NaN never winning:
 * a row of -inf normalizes by it), exp of the shifted scores, their sum left to right from
 * the first, the division; a norm of 0 divides by 1. expf is libm's (onnxruntime's), which
 * numpy's vectorised exp can differ from in the last bit. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include "isa.h"

enum { ML_NONE = -1, ML_SOFTMAX = 0, ML_NORM_MAX = 1, ML_NORM_L1 = 2, ML_NORM_L2 = 3,
       ML_LOGISTIC = 4 };

static inline float row_max(const float *v, int64_t n) {
    float m = -FLT_MAX;
    for (int64_t j = 0; j < n; j++) m = v[j] > m ? v[j] : m;
    return m;
}

/* onnxruntime's logistic: 1 / (1 + exp(-|v|)), mirrored below 0. */
static inline float logistic(float v) {
    float e = 1.0f / (1.0f + expf(-fabsf(v)));
    return v < 0.0f ? 1.0f - e : e;
}

/* y may be x (each row is read before it is written); ML_NONE leaves y as it is (used in
 * place, by er_cpu_linear_rows). */
EXPORT void er_cpu_ml_rows(const float *x, int64_t rows, int64_t columns, int op, float *y) {
    for (int64_t r = 0; r < rows; r++) {
        const float *v = x + r * columns;
        float *out = y + r * columns;
        float scale = 0.0f;
        if (op == ML_NONE) continue;
        if (op == ML_LOGISTIC) {
            for (int64_t j = 0; j < columns; j++) out[j] = logistic(v[j]);
            continue;
        }
        if (op == ML_SOFTMAX || op == ML_NORM_MAX) scale = row_max(v, columns);
        if (op == ML_SOFTMAX) {
            for (int64_t j = 0; j < columns; j++) out[j] = expf(v[j] - scale);
            scale = out[0];
            for (int64_t j = 1; j < columns; j++) scale += out[j];
            for (int64_t j = 0; j < columns; j++) out[j] /= scale;
            continue;
        }
        if (op == ML_NORM_L1) {
            scale = fabsf(v[0]);
            for (int64_t j = 1; j < columns; j++) scale += fabsf(v[j]);
        } else if (op == ML_NORM_L2) {
            scale = v[0] * v[0];
            for (int64_t j = 1; j < columns; j++) scale += v[j] * v[j];
            scale = sqrtf(scale);
        }
        if (scale == 0.0f) scale = 1.0f;
        for (int64_t j = 0; j < columns; j++) out[j] = v[j] / scale;
    }
}

/* A linear model's rows (LinearClassifier, LinearRegressor): y[r, t] = x[r] . coef[:, t]
 * + bias[t] in double, as the numpy path computes it (float32 inputs widened, the bias added
 * to the finished dot product), rounded to float32; best[r] the first largest y[r, t]
 * before the transform (the first NaN if any: np.argmax's choice); then the `op` step
 * (ML_NONE, or one of er_cpu_ml_rows's) over each row of y. coef is [features, targets]. */
EXPORT void er_cpu_linear_rows(const float *x, int64_t rows, int64_t features,
                               const double *coef, const double *bias, int64_t targets, int op,
                               float *y, int64_t *best) {
    for (int64_t r = 0; r < rows; r++) {
        const float *v = x + r * features;
        float *out = y + r * targets;
        int64_t top = 0;
        for (int64_t t = 0; t < targets; t++) {
            double s = 0.0;
            for (int64_t f = 0; f < features; f++) s += (double)v[f] * coef[f * targets + t];
            if (bias) s += bias[t];
            out[t] = (float)s;
            if (out[top] == out[top]) {          /* a NaN, once found, stays the answer */
                if (out[t] != out[t] || out[t] > out[top]) top = t;
            }
        }
        if (best) best[r] = top;
    }
    er_cpu_ml_rows(y, rows, targets, op, y);
}
