/* The pointwise half of one LSTM step. The host computes the gate pre-activations with the
 * packed SGEMM (X W^T + biases once per sequence, then H_prev R^T per step, accumulated in
 * place), and this kernel finishes the step in ONNX's gate order i, o, f, c:
 *
 *   i = sigmoid(g_i + P_i * C_prev)    f = sigmoid(g_f + P_f * C_prev)    c~ = tanh(g_c)
 *   C = f * C_prev + i * c~            o = sigmoid(g_o + P_o * C)         H = o * tanh(C)
 *
 * Pre-activations are clipped to [-clip, clip] when clip > 0; peepholes P (i, o, f) may be 0.
 * c may alias c_prev: each element is read before it is written.
 */
#include "vmath.h"

static inline v128_t clipped(v128_t v, float clip) {
    if (clip <= 0.0f) return v;
    return v_clamp(v, SPLAT(-clip), SPLAT(clip));
}

static inline v128_t load_or(const float *p, i32 i, v128_t fallback) {
    return p ? wasm_v128_load(p + i) : fallback;
}

/* gates: [batch, 4 * hidden] (row stride ldg floats); c_prev, c, h: [batch, hidden] rows of
 * stride ldc / ldc / ldh. hidden must be a multiple of 4 for the vector loop; the rest is
 * done one lane at a time through a padded vector. */
EXPORT void er_lstm_cell(const float *gates, i32 ldg, const float *c_prev, const float *peep,
                         float *c, i32 ldc, float *h, i32 ldh, i32 batch, i32 hidden,
                         float clip) {
    const float *pi = peep, *po = peep ? peep + hidden : 0, *pf = peep ? peep + 2 * hidden : 0;
    v128_t zero = SPLAT(0.0f);
    for (i32 b = 0; b < batch; b++) {
        const float *g = gates + (size_t)b * ldg;
        const float *cp = c_prev + (size_t)b * ldc;
        float *cb = c + (size_t)b * ldc, *hb = h + (size_t)b * ldh;
        for (i32 j = 0; j < hidden; j += 4) {
            i32 lanes = min_i32(4, hidden - j);
            float gi[4] = {0}, go[4] = {0}, gf[4] = {0}, gc[4] = {0}, cv[4] = {0};
            float ppi[4] = {0}, ppo[4] = {0}, ppf[4] = {0};
            for (i32 l = 0; l < lanes; l++) {
                gi[l] = g[j + l];
                go[l] = g[hidden + j + l];
                gf[l] = g[2 * hidden + j + l];
                gc[l] = g[3 * hidden + j + l];
                cv[l] = cp[j + l];
                if (peep) {
                    ppi[l] = pi[j + l];
                    ppo[l] = po[j + l];
                    ppf[l] = pf[j + l];
                }
            }
            v128_t vc_prev = wasm_v128_load(cv);
            v128_t vi = v_sigmoid(clipped(wasm_f32x4_add(wasm_v128_load(gi),
                                  wasm_f32x4_mul(load_or(peep ? ppi : 0, 0, zero), vc_prev)), clip));
            v128_t vf = v_sigmoid(clipped(wasm_f32x4_add(wasm_v128_load(gf),
                                  wasm_f32x4_mul(load_or(peep ? ppf : 0, 0, zero), vc_prev)), clip));
            v128_t vct = v_tanh(clipped(wasm_v128_load(gc), clip));
            v128_t vcn = wasm_f32x4_add(wasm_f32x4_mul(vf, vc_prev), wasm_f32x4_mul(vi, vct));
            v128_t vo = v_sigmoid(clipped(wasm_f32x4_add(wasm_v128_load(go),
                                  wasm_f32x4_mul(load_or(peep ? ppo : 0, 0, zero), vcn)), clip));
            v128_t vh = wasm_f32x4_mul(vo, v_tanh(vcn));
            float outc[4], outh[4];
            wasm_v128_store(outc, vcn);
            wasm_v128_store(outh, vh);
            for (i32 l = 0; l < lanes; l++) {
                cb[j + l] = outc[l];
                hb[j + l] = outh[l];
            }
        }
    }
}

/* One step of a simple RNN (gru = 0) or a GRU (gru = 1, gate order z, r, h) for `batch`
 * rows. gates [batch, G * hidden] hold X W^T plus the biases (for the GRU's h gate only Wb:
 * its Rb comes as rbh, nullable); h_prev (nullable: zeros) and h_out [batch, hidden]; R is
 * [G * hidden, hidden]. f and g are typed-kernel activations (map.c codes with two params),
 * applied after clipping to [-clip, clip] when clip > 0. scratch holds `hidden` floats.
 *   RNN: H = f(g + H_prev R^T)
 *   GRU: z = f(g_z + H_prev R_z^T), r = f(g_r + H_prev R_r^T),
 *        h~ = g(g_h + (r H_prev) R_h^T + Rb_h), or with linear_before_reset
 *        h~ = g(g_h + r (H_prev R_h^T + Rb_h)); H = (1 - z) h~ + z H_prev */
static inline float act(i32 code, double v, const float *p, float clip) {
    if (clip > 0) v = v < -clip ? -clip : v > clip ? clip : v;
    return (float)map_unary_value(code, v, p[0], p[1]);
}

static inline double dot(const float *a, const float *b, i32 n) {
    float s = 0;
    for (i32 i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

EXPORT void er_rnn_step(i32 gru, const float *gates, const float *h_prev, const float *R,
                        const float *rbh, float *h_out, i32 batch, i32 hidden,
                        i32 linear_before_reset, i32 f, i32 g, const float *params, float clip,
                        float *scratch) {
    i32 G = gru ? 3 : 1;
    const float *fp = params, *gp = params + 2;
    for (i32 b = 0; b < batch; b++) {
        const float *gb = gates + (i64)b * G * hidden;
        const float *hp = h_prev ? h_prev + (i64)b * hidden : 0;
        float *ho = h_out + (i64)b * hidden;
        if (!gru) {
            for (i32 j = 0; j < hidden; j++)
                ho[j] = act(f, gb[j] + (hp ? dot(hp, R + (i64)j * hidden, hidden) : 0), fp, clip);
            continue;
        }
        float *reset_h = scratch;          /* r * H_prev, for the default variant */
        for (i32 j = 0; j < hidden; j++) {
            float r = act(f, gb[hidden + j] + (hp ? dot(hp, R + (i64)(hidden + j) * hidden,
                                                         hidden) : 0), fp, clip);
            reset_h[j] = r;
        }
        for (i32 j = 0; j < hidden; j++) {
            float z = act(f, gb[j] + (hp ? dot(hp, R + (i64)j * hidden, hidden) : 0), fp, clip);
            const float *rh = R + (i64)(2 * hidden + j) * hidden;
            double pre;
            if (linear_before_reset) {
                double hr = (hp ? dot(hp, rh, hidden) : 0) + (rbh ? rbh[j] : 0);
                pre = gb[2 * hidden + j] + reset_h[j] * hr;
            } else {
                float s = 0;
                if (hp) for (i32 i = 0; i < hidden; i++) s += reset_h[i] * hp[i] * rh[i];
                pre = gb[2 * hidden + j] + s + (rbh ? rbh[j] : 0);
            }
            float cand = act(g, pre, gp, clip);
            float prev = hp ? hp[j] : 0;
            ho[j] = (1 - z) * cand + z * prev;
        }
    }
}
