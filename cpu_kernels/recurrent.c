/* The recurrence of the common LSTM (providers/cpu/ops/rnn.py's _plain_lstm): every time
 * step of every direction in one call, where numpy spends ten calls a step.
 *
 * The caller has computed each step's input projection with the biases (one product for the
 * whole sequence) and halved the i, o and f parts of it and of R, so that every gate is one
 * tanh: sigmoid(v) = (tanh(v / 2) + 1) / 2. Per step and direction d, for each batch row:
 *   gates = projected[t, d] + h[d] R_t[d]          (i, o, f, c; R_t is [H, 4H])
 *   i, o, f = (tanh(gates) + 1) / 2;  cell = tanh(gates_c)
 *   c[d] = f c[d] + i cell;  h[d] = o tanh(c[d]);  ys[t, d] = h[d]
 * in float32 with fast_tanh below: within ~1e-7 of the numpy path, not bit for bit. */
#include <stdint.h>
#include "isa.h"

/* tanh as the rational fit onnxruntime's MLAS and Eigen use (odd degree-13 numerator over an
 * even degree-6 denominator, x clamped to +-9, where tanh is 1 in float32): ~1e-7 from
 * tanhf, and a loop of them vectorises, where a libm call per value dominated a small step
 * (H = 64: ~320 calls a step). NaN stays NaN through the clamp's comparisons. */
__attribute__((always_inline))
static inline float fast_tanh(float v) {
    const float x = v < -9.0f ? -9.0f : (v > 9.0f ? 9.0f : v);
    const float x2 = x * x;
    float p = x2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    p = p * x;
    float q = x2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return p / q;
}

__attribute__((always_inline))
static inline void lstm_f32_body(const float *projected, const float *r_t, float *h, float *c,
                                 float *ys, int64_t steps, int64_t dirs, int64_t batch,
                                 int64_t hidden, float *gates) {
    const int64_t g4 = 4 * hidden;
    for (int64_t t = 0; t < steps; t++) {
        for (int64_t d = 0; d < dirs; d++) {
            const float *r = r_t + d * hidden * g4;
            for (int64_t b = 0; b < batch; b++) {
                float *hb = h + (d * batch + b) * hidden;
                float *cb = c + (d * batch + b) * hidden;
                const float *p = projected + ((t * dirs + d) * batch + b) * g4;
                for (int64_t j = 0; j < g4; j++) gates[j] = 0.0f;
                for (int64_t k = 0; k < hidden; k++) {
                    const float hk = hb[k];
                    const float *rk = r + k * g4;
                    for (int64_t j = 0; j < g4; j++) gates[j] += hk * rk[j];
                }
                for (int64_t j = 0; j < g4; j++) gates[j] = fast_tanh(gates[j] + p[j]);
                float *out = ys + ((t * dirs + d) * batch + b) * hidden;
                for (int64_t k = 0; k < hidden; k++) {
                    float i = gates[k] * 0.5f + 0.5f;
                    float o = gates[hidden + k] * 0.5f + 0.5f;
                    float f = gates[2 * hidden + k] * 0.5f + 0.5f;
                    float cell = f * cb[k] + i * gates[3 * hidden + k];
                    cb[k] = cell;
                    hb[k] = o * fast_tanh(cell);
                    out[k] = hb[k];
                }
            }
        }
    }
}
DISPATCHED(lstm_f32, (const float *projected, const float *r_t, float *h, float *c, float *ys,
                      int64_t steps, int64_t dirs, int64_t batch, int64_t hidden, float *gates),
           (projected, r_t, h, c, ys, steps, dirs, batch, hidden, gates))

/* The common GRU's recurrence (rnn.py's _plain_gru), likewise: projected [T, D, B, 3H]
 * holds each step's input projection with the biases (z and r halved, as are their columns
 * of r_zr [D, H, 2H]); r_h [D, H, H] is R's hidden-gate part. With linear_before_reset the
 * hidden gate is tanh(xw_h + r * (h R_h + rb_h)) (rb_h [D, H]), else
 * tanh(xw_h + (r h) R_h); then h = cand + z (h - cand). scratch: 4H floats. */
__attribute__((always_inline))
static inline void gru_f32_body(const float *projected, const float *r_zr, const float *r_h,
                                const float *rb_h, int linear_before_reset, float *h, float *ys,
                                int64_t steps, int64_t dirs, int64_t batch, int64_t hidden,
                                float *scratch) {
    const int64_t g2 = 2 * hidden, g3 = 3 * hidden;
    float *zr = scratch, *hp = scratch + g2, *rh = scratch + g3;
    for (int64_t t = 0; t < steps; t++) {
        for (int64_t d = 0; d < dirs; d++) {
            const float *rz = r_zr + d * hidden * g2, *rr = r_h + d * hidden * hidden;
            for (int64_t b = 0; b < batch; b++) {
                float *hb = h + (d * batch + b) * hidden;
                const float *p = projected + ((t * dirs + d) * batch + b) * g3;
                for (int64_t j = 0; j < g2; j++) zr[j] = 0.0f;
                for (int64_t j = 0; j < hidden; j++) hp[j] = 0.0f;
                for (int64_t k = 0; k < hidden; k++) {
                    const float hk = hb[k];
                    const float *rk = rz + k * g2;
                    for (int64_t j = 0; j < g2; j++) zr[j] += hk * rk[j];
                }
                for (int64_t j = 0; j < g2; j++) zr[j] = fast_tanh(zr[j] + p[j]) * 0.5f + 0.5f;
                const float *z = zr, *reset = zr + hidden;
                if (linear_before_reset) {
                    for (int64_t k = 0; k < hidden; k++) {
                        const float hk = hb[k];
                        const float *rk = rr + k * hidden;
                        for (int64_t j = 0; j < hidden; j++) hp[j] += hk * rk[j];
                    }
                    const float *rb = rb_h + d * hidden;
                    for (int64_t j = 0; j < hidden; j++) hp[j] = (hp[j] + rb[j]) * reset[j];
                } else {
                    for (int64_t k = 0; k < hidden; k++) rh[k] = reset[k] * hb[k];
                    for (int64_t k = 0; k < hidden; k++) {
                        const float hk = rh[k];
                        const float *rk = rr + k * hidden;
                        for (int64_t j = 0; j < hidden; j++) hp[j] += hk * rk[j];
                    }
                }
                float *out = ys + ((t * dirs + d) * batch + b) * hidden;
                for (int64_t j = 0; j < hidden; j++) {
                    float cand = fast_tanh(hp[j] + p[g2 + j]);
                    hb[j] = cand + z[j] * (hb[j] - cand);
                    out[j] = hb[j];
                }
            }
        }
    }
}
DISPATCHED(gru_f32, (const float *projected, const float *r_zr, const float *r_h,
                     const float *rb_h, int linear_before_reset, float *h, float *ys,
                     int64_t steps, int64_t dirs, int64_t batch, int64_t hidden, float *scratch),
           (projected, r_zr, r_h, rb_h, linear_before_reset, h, ys, steps, dirs, batch, hidden,
            scratch))
