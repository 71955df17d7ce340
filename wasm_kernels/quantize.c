/* QuantizeLinear to 8- and 16-bit integers with one scale and zero point (per tensor: what
 * DynamicQuantizeLinear and most static graphs use), in one pass: y = saturate(round(x / scale)
 * + zero_point), rounding half to even. The division happens in float32 when the scale is
 * float32 (x converted first), else in double, as the CPU provider computes it; NaN gives the
 * lowest value (onnxruntime's). The scale
 * and zero point are read from linear memory, so a recorded program replays with new ones.
 */
#include "elemtypes.h"
#include "vmath.h"

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
        i32 i = 0;
        v128_t vs = wasm_f32x4_splat(s32), vz = wasm_f32x4_splat(z);
        v128_t vlo = wasm_f32x4_splat(lo), vhi = wasm_f32x4_splat(hi);
        for (; i + 16 <= n; i += 16) {   /* NaN stays NaN through the clamp: then low */
            v128_t q[4];
            for (i32 j = 0; j < 4; j++) {
                v128_t v = wasm_f32x4_add(
                    wasm_f32x4_nearest(wasm_f32x4_div(wasm_v128_load(xf + i + 4 * j), vs)), vz);
                v = v_clamp(v, vlo, vhi);
                q[j] = wasm_i32x4_trunc_sat_f32x4(wasm_v128_bitselect(vlo, v, wasm_f32x4_ne(v, v)));
            }
            v128_t lo16 = wasm_i16x8_narrow_i32x4(q[0], q[1]);
            v128_t hi16 = wasm_i16x8_narrow_i32x4(q[2], q[3]);
            wasm_v128_store((uint8_t *)y + i, ty == T_U8 ? wasm_u8x16_narrow_i16x8(lo16, hi16)
                                                         : wasm_i8x16_narrow_i16x8(lo16, hi16));
        }
        for (; i < n; i++) {
            float q = __builtin_nearbyintf(xf[i] / s32) + z;
            q = q < lo ? lo : q > hi ? hi : q;
            i32 v = q == q ? (i32)q : low;
            if (ty == T_U8) ((uint8_t *)y)[i] = (uint8_t)v;
            else ((int8_t *)y)[i] = (int8_t)v;
        }
        return;
    }
    for (i32 i = 0; i < n; i++) {
        double v = load_float(x, i, tx);
        double q = ts == T_F32 ? (double)((float)v / s32) : v / s;
        q = __builtin_nearbyint(q) + (double)zp;
        q = q < low ? low : q > high ? high : q;          /* NaN stays: stored as low */
        store_int(y, i, ty, q == q ? (i64)q : low);
    }
}

/* DequantizeLinear to float32 with one scale and zero point: y = float32(x - zero_point) *
 * scale, the CPU provider's steps (the difference is exact in float32 for 8- and 16-bit x),
 * sixteen 8-bit values at a time. */
EXPORT void er_dequantize_linear(const void *x, i32 tx, const float *scale, const void *zero_point,
                                 i32 tzp, float *y, i32 n) {
    float s = scale[0];
    i32 zp = zero_point ? (i32)load_int(zero_point, 0, tzp) : 0, i = 0;
    if (tx == T_U8 || tx == T_I8) {
        v128_t vs = wasm_f32x4_splat(s), vzp = wasm_i32x4_splat(zp);
        for (; i + 16 <= n; i += 16) {
            v128_t q[4];
            widen16_to_i32x4((const uint8_t *)x + i, tx, q);
            for (i32 j = 0; j < 4; j++)
                wasm_v128_store(y + i + 4 * j, wasm_f32x4_mul(
                    wasm_f32x4_convert_i32x4(wasm_i32x4_sub(q[j], vzp)), vs));
        }
    }
    for (; i < n; i++) y[i] = (float)((i32)load_int(x, i, tx) - zp) * s;
}

/* y = float32(acc) * (a_scale * b_scale), then + bias: an int32 product made float
 * (MatMulIntegerToFloat), as Cast -> Mul -> Add compute it with the two scales multiplied
 * first, each step rounded to float32, in one pass. a_scale holds one value; b_scale and bias
 * one, or one per column with *_per_col. */
EXPORT void er_scale_int32(const i32 *acc, float *y, i32 rows, i32 cols, const float *a_scale,
                           const float *b_scale, i32 scale_per_col, const float *bias,
                           i32 bias_per_col) {
    float sa = a_scale[0];
    for (i32 r = 0; r < rows; r++) {
        const i32 *a = acc + (size_t)r * cols;
        float *o = y + (size_t)r * cols;
        if (scale_per_col) {
            for (i32 c = 0; c < cols; c++) o[c] = (float)a[c] * (sa * b_scale[c]);
        } else {
            float s = sa * b_scale[0];
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

/* The range of x widened to include 0, in one pass: [low, high], or 0 when x holds a NaN
 * (the caller then takes er_reduce's NaN-propagating max and min). */
static i32 range_with_zero(const float *x, i32 n, float *low, float *high) {
    v128_t lo = SPLAT(0.0f), hi = lo, nan = wasm_i32x4_splat(0);
    i32 i = 0;
    for (; i + 4 <= n; i += 4) {
        v128_t v = wasm_v128_load(x + i);
        lo = v_at_most(lo, v);
        hi = v_at_least(hi, v);
        nan = wasm_v128_or(nan, wasm_f32x4_ne(v, v));
    }
    float l[4], h[4];
    wasm_v128_store(l, lo);
    wasm_v128_store(h, hi);
    float a = l[0], b = h[0];
    for (i32 j = 1; j < 4; j++) {
        a = l[j] < a ? l[j] : a;
        b = h[j] > b ? h[j] : b;
    }
    i32 clean = !wasm_v128_any_true(nan);
    for (; i < n; i++) {
        clean &= x[i] == x[i];
        a = x[i] < a ? x[i] : a;
        b = x[i] > b ? x[i] : b;
    }
    *low = a;
    *high = b;
    return clean;
}

/* DynamicQuantizeLinear of float32 x, all in linear memory (no value goes to the host, so a
 * recorded program replays it): the range of x widened to include 0, scale = (high - low) /
 * 255 in float32 (1 for a range of 0, as onnxruntime), zero_point = round(0 - low / scale)
 * half to even, saturated to [0, 255], then the uint8 quantization of er_quantize_linear. */
EXPORT void er_dynamic_quantize(const float *x, i32 n, uint8_t *y, float *scale,
                                uint8_t *zero_point) {
    float low, high;
    if (!range_with_zero(x, n, &low, &high)) {
        float top = 0.0f, bottom = 0.0f;
        er_reduce(2, x, &top, 1, n, 1);                /* R_MAX */
        er_reduce(3, x, &bottom, 1, n, 1);             /* R_MIN */
        high = top > 0.0f ? top : 0.0f;
        low = bottom < 0.0f ? bottom : 0.0f;
    }
    float s = high != low ? (high - low) / 255.0f : 1.0f;
    float z = __builtin_nearbyintf(0.0f - low / s);
    z = z < 0.0f ? 0.0f : z > 255.0f ? 255.0f : z;
    scale[0] = s;
    zero_point[0] = (uint8_t)z;
    er_quantize_linear(x, T_F32, scale, T_F32, zero_point, T_U8, y, T_U8, n, 0, 255);
}
