/* Softmax / LogSoftmax over the middle axis of (outer, n, inner), LayerNormalization over
 * trailing rows, inference BatchNormalization per channel, and LRN across channels.
 */
#include "vmath.h"

static void softmax_row(const float *x, float *y, i32 n, i32 stride, i32 log_out) {
    float m = -__builtin_inff();
    for (i32 i = 0; i < n; i++) m = x[i * stride] > m ? x[i * stride] : m;
    float sum = 0.0f;
    i32 i = 0;
    v128_t vm = wasm_f32x4_splat(m), vsum = wasm_f32x4_splat(0.0f);
    if (stride == 1) {
        for (; i + 4 <= n; i += 4) {
            v128_t e = v_exp(wasm_f32x4_sub(wasm_v128_load(x + i), vm));
            if (!log_out) wasm_v128_store(y + i, e);
            vsum = wasm_f32x4_add(vsum, e);
        }
    }
    float lanes[4];
    wasm_v128_store(lanes, vsum);
    sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (; i < n; i++) {
        float buf[4] = {x[i * stride] - m, 0, 0, 0};
        wasm_v128_store(buf, v_exp(wasm_v128_load(buf)));
        if (!log_out) y[i * stride] = buf[0];
        sum += buf[0];
    }
    if (log_out) {
        float buf[4] = {sum, 1, 1, 1};
        wasm_v128_store(buf, v_log(wasm_v128_load(buf)));
        float shift = m + buf[0];
        for (i32 k = 0; k < n; k++) y[k * stride] = x[k * stride] - shift;
    } else {
        float inv = 1.0f / sum;
        for (i32 k = 0; k < n; k++) y[k * stride] *= inv;
    }
}

EXPORT void er_softmax(const float *x, float *y, i32 outer, i32 n, i32 inner, i32 log_out) {
    for (i32 o = 0; o < outer; o++)
        for (i32 j = 0; j < inner; j++)
            softmax_row(x + o * n * inner + j, y + o * n * inner + j, n, inner, log_out);
}

static inline float lanes_sum(v128_t v) {
    float l[4];
    wasm_v128_store(l, v);
    return (l[0] + l[1]) + (l[2] + l[3]);
}

/* Each of `rows` rows of n: (x - mean) / sqrt(var + eps) * scale + bias, or with rms set
 * (RMSNormalization) x / sqrt(mean(x^2) + eps) * scale. mean_out and inv_out (nullable)
 * get each row's mean and 1 / sqrt(var + eps); scale and bias may be 0 (none). */
EXPORT void er_layer_norm(const float *x, const float *scale, const float *bias, float *y,
                          float *mean_out, float *inv_out, i32 rows, i32 n, float eps,
                          i32 rms) {
    for (i32 r = 0; r < rows; r++, x += n, y += n) {
        i32 i = 0;
        float mean = 0;
        if (!rms) {
            v128_t vs = wasm_f32x4_splat(0.0f);
            for (; i + 4 <= n; i += 4) vs = wasm_f32x4_add(vs, wasm_v128_load(x + i));
            float sum = lanes_sum(vs);
            for (; i < n; i++) sum += x[i];
            mean = sum / (float)n;
        }
        v128_t vm = wasm_f32x4_splat(mean), vq = wasm_f32x4_splat(0.0f);
        for (i = 0; i + 4 <= n; i += 4) {
            v128_t d = wasm_f32x4_sub(wasm_v128_load(x + i), vm);
            vq = wasm_f32x4_add(vq, wasm_f32x4_mul(d, d));
        }
        float sq = lanes_sum(vq);
        for (; i < n; i++) sq += (x[i] - mean) * (x[i] - mean);
        float buf[4] = {sq / (float)n + eps, 1, 1, 1};
        wasm_v128_store(buf, wasm_f32x4_div(wasm_f32x4_splat(1.0f),
                                            wasm_f32x4_sqrt(wasm_v128_load(buf))));
        if (mean_out) mean_out[r] = mean;
        if (inv_out) inv_out[r] = buf[0];
        v128_t inv = wasm_f32x4_splat(buf[0]);
        for (i = 0; i + 4 <= n; i += 4) {
            v128_t v = wasm_f32x4_mul(wasm_f32x4_sub(wasm_v128_load(x + i), vm), inv);
            if (scale) v = wasm_f32x4_mul(v, wasm_v128_load(scale + i));
            if (bias) v = wasm_f32x4_add(v, wasm_v128_load(bias + i));
            wasm_v128_store(y + i, v);
        }
        for (; i < n; i++)
            y[i] = (x[i] - mean) * buf[0] * (scale ? scale[i] : 1.0f) + (bias ? bias[i] : 0.0f);
    }
}

/* y[n, c, :] = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c], as onnxruntime
 * computes it step for step (and the CPU provider): factor = 1 / sqrt(var + eps) * scale,
 * shift = bias - mean * factor, y = x * factor + shift. */
EXPORT void er_batch_norm(const float *x, const float *scale, const float *bias,
                          const float *mean, const float *var, float *y, i32 n, i32 c,
                          i32 inner, float eps) {
    for (i32 b = 0; b < n; b++) {
        for (i32 ch = 0; ch < c; ch++) {
            float a = 1.0f / __builtin_sqrtf(var[ch] + eps) * scale[ch];
            float shift = bias[ch] - mean[ch] * a;
            v128_t va = wasm_f32x4_splat(a), vb = wasm_f32x4_splat(shift);
            const float *xp = x + (b * c + ch) * inner;
            float *yp = y + (b * c + ch) * inner;
            i32 i = 0;
            for (; i + 4 <= inner; i += 4)
                wasm_v128_store(yp + i, wasm_f32x4_add(wasm_f32x4_mul(wasm_v128_load(xp + i), va),
                                                       vb));
            for (; i < inner; i++) yp[i] = xp[i] * a + shift;
        }
    }
}

/* LRN across channels: y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta,
 * the window being [c - (size - 1) / 2, c + size / 2] clipped to [0, C). x is (N, C, HW). */
EXPORT void er_lrn(const float *x, float *y, i32 n, i32 c, i32 hw, i32 size, float alpha,
                   float beta, float bias) {
    i32 before = (size - 1) / 2, after = size / 2;
    v128_t va = wasm_f32x4_splat(alpha / (float)size), vb = wasm_f32x4_splat(bias);
    v128_t vbeta = wasm_f32x4_splat(-beta);
    for (i32 b = 0; b < n; b++) {
        const float *xb = x + (size_t)b * c * hw;
        float *yb = y + (size_t)b * c * hw;
        for (i32 ch = 0; ch < c; ch++) {
            i32 lo = max_i32(ch - before, 0), hi = min_i32(ch + after, c - 1);
            for (i32 i = 0; i < hw; i += 4) {
                float buf[4] = {0, 0, 0, 0}, xs[4] = {1, 1, 1, 1};
                i32 lanes = min_i32(4, hw - i);
                v128_t sum = wasm_f32x4_splat(0.0f);
                for (i32 k = lo; k <= hi; k++) {
                    v128_t v;
                    if (lanes == 4) {
                        v = wasm_v128_load(xb + (size_t)k * hw + i);
                    } else {
                        for (i32 l = 0; l < lanes; l++) buf[l] = xb[(size_t)k * hw + i + l];
                        v = wasm_v128_load(buf);
                    }
                    sum = wasm_f32x4_add(sum, wasm_f32x4_mul(v, v));
                }
                v128_t base = wasm_f32x4_add(vb, wasm_f32x4_mul(va, sum));
                v128_t scale = v_exp(wasm_f32x4_mul(vbeta, v_log(base)));
                const float *xp = xb + (size_t)ch * hw + i;
                float *yp = yb + (size_t)ch * hw + i;
                if (lanes == 4) {
                    wasm_v128_store(yp, wasm_f32x4_mul(wasm_v128_load(xp), scale));
                } else {
                    for (i32 l = 0; l < lanes; l++) xs[l] = xp[l];
                    wasm_v128_store(buf, wasm_f32x4_mul(wasm_v128_load(xs), scale));
                    for (i32 l = 0; l < lanes; l++) yp[l] = buf[l];
                }
            }
        }
    }
}
