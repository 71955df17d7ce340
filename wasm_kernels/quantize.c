/* QuantizeLinear to 8- and 16-bit integers with one scale and zero point (per tensor: what
 * DynamicQuantizeLinear and most static graphs use), in one pass: y = saturate(round(x / scale)
 * + zero_point), rounding half to even. The division happens in float32 when the scale is
 * float32 (x converted first), else in double, as the CPU provider computes it. The scale
 * and zero point are read from linear memory, so a recorded program replays with new ones.
 */
#include "elemtypes.h"

EXPORT void er_quantize_linear(const void *x, i32 tx, const void *scale, i32 ts,
                               const void *zero_point, i32 tzp, void *y, i32 ty, i32 n,
                               i32 low, i32 high) {
    double s = load_float(scale, 0, ts);
    float s32 = (float)s;
    i64 zp = zero_point ? load_int(zero_point, 0, tzp) : 0;
    if (tx == T_F32 && ts == T_F32 && (ty == T_U8 || ty == T_I8)) {
        /* the common case (activations of int8 models) without the per-element type
         * switches: the same float32 division, rounding and saturation */
        const float *xf = x;
        float z = (float)zp, lo = (float)low, hi = (float)high;
        for (i32 i = 0; i < n; i++) {
            float q = __builtin_nearbyintf(xf[i] / s32) + z;
            q = q < lo ? lo : q > hi ? hi : q;
            i32 v = q == q ? (i32)q : 0;
            if (ty == T_U8) ((uint8_t *)y)[i] = (uint8_t)v;
            else ((int8_t *)y)[i] = (int8_t)v;
        }
        return;
    }
    for (i32 i = 0; i < n; i++) {
        double v = load_float(x, i, tx);
        double q = ts == T_F32 ? (double)((float)v / s32) : v / s;
        q = __builtin_nearbyint(q) + (double)zp;
        q = q < low ? low : q > high ? high : q;          /* NaN stays: stored as 0 */
        store_int(y, i, ty, q == q ? (i64)q : 0);
    }
}

/* y = float32(acc) * scale, then + bias: an int32 product made float (MatMulIntegerToFloat),
 * as Cast -> Mul -> Add compute it, each step rounded to float32, in one pass. scale and bias
 * hold one value, or one per column with *_per_col. */
EXPORT void er_scale_int32(const i32 *acc, float *y, i32 rows, i32 cols, const float *scale,
                           i32 scale_per_col, const float *bias, i32 bias_per_col) {
    for (i32 r = 0; r < rows; r++) {
        const i32 *a = acc + (size_t)r * cols;
        float *o = y + (size_t)r * cols;
        if (scale_per_col) {
            for (i32 c = 0; c < cols; c++) o[c] = (float)a[c] * scale[c];
        } else {
            float s = scale[0];
            for (i32 c = 0; c < cols; c++) o[c] = (float)a[c] * s;
        }
        if (bias && bias_per_col) {
            for (i32 c = 0; c < cols; c++) o[c] += bias[c];
        } else if (bias) {
            float b = bias[0];
            for (i32 c = 0; c < cols; c++) o[c] += b;
        }
    }
}

/* DynamicQuantizeLinear of float32 x, all in linear memory (no value goes to the host, so a
 * recorded program replays it): the range of x widened to include 0 (er_reduce's max and
 * min), scale = (high - low) / 255 in float32 (1 for a range of 0, as onnxruntime),
 * zero_point = round(0 - low / scale) half to even, saturated to [0, 255], then the uint8
 * quantization of er_quantize_linear. */
EXPORT void er_dynamic_quantize(const float *x, i32 n, uint8_t *y, float *scale,
                                uint8_t *zero_point) {
    float top = 0.0f, bottom = 0.0f;
    if (n > 0) {
        er_reduce(2, x, &top, 1, n, 1);                /* R_MAX */
        er_reduce(3, x, &bottom, 1, n, 1);             /* R_MIN */
    }
    float high = top > 0.0f ? top : 0.0f, low = bottom < 0.0f ? bottom : 0.0f;
    float s = high != low ? (high - low) / 255.0f : 1.0f;
    float z = __builtin_nearbyintf(0.0f - low / s);
    z = z < 0.0f ? 0.0f : z > 255.0f ? 255.0f : z;
    scale[0] = s;
    zero_point[0] = (uint8_t)z;
    er_quantize_linear(x, T_F32, scale, T_F32, zero_point, T_U8, y, T_U8, n, 0, 255);
}
