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

enum { ML_SOFTMAX = 0, ML_NORM_MAX = 1, ML_NORM_L1 = 2, ML_NORM_L2 = 3 };

static inline float row_max(const float *v, int64_t n) {
    float m = -FLT_MAX;
    for (int64_t j = 0; j < n; j++) m = v[j] > m ? v[j] : m;
    return m;
}

EXPORT void er_cpu_ml_rows(const float *x, int64_t rows, int64_t columns, int op, float *y) {
    for (int64_t r = 0; r < rows; r++) {
        const float *v = x + r * columns;
        float *out = y + r * columns;
        float scale = 0.0f;
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
