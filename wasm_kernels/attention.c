/* Scaled dot-product attention (ONNX Attention, opset 23+), one query row at a time:
 * scores against every key, softcap, the mask (bool or additive float, causal, sliding
 * window, per-batch valid key counts), softmax, then the weighted sum of the values.
 *
 * Heads may be grouped (GQA: query head h reads key/value head h / (Hq / Hkv)). Every tensor
 * is addressed through 4-D strides (batch, head, sequence, feature) in elements, so 3-D
 * inputs with packed heads and the present key/value buffers need no transposing copies.
 * A query row whose mask allows no key outputs zeros.
 */
#include "dmath.h"
#include "vmath.h"

enum { MASK_NONE = 0, MASK_BOOL, MASK_FLOAT };

static float dot_strided(const float *a, i32 sa, const float *b, i32 sb, i32 n) {
    float s = 0;
    for (i32 d = 0; d < n; d++) s += a[d * sa] * b[d * sb];
    return s;
}

/* a . b over n contiguous floats: four partial sums, then the rest */
static float dot_contiguous(const float *a, const float *b, i32 n) {
    v128_t acc = wasm_f32x4_splat(0.0f);
    i32 d = 0;
    for (; d + 4 <= n; d += 4)
        acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_v128_load(a + d), wasm_v128_load(b + d)));
    float lanes[4];
    wasm_v128_store(lanes, acc);
    float s = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (; d < n; d++) s += a[d] * b[d];
    return s;
}

/* er_args, in order (ints): B, Hq, Hkv, Sq, Skv, D, Dv, then strides[4] of q, k, v, y, mask,
 * then mask_kind, mask_len, is_causal, past_len, left_window, right_window, qk_mode
 * (-1: no qk output, else 0 raw, 1 softcapped, 2 masked logits, 3 probabilities) */
EXPORT void er_attention(const float *q, const float *k, const float *v, const void *mask,
                         const i64 *valid_keys, float *y, float *qk, float *row, float scale,
                         float softcap) {
    const i32 *a = er_args;
    i32 B = a[0], Hq = a[1], Hkv = a[2], Sq = a[3], Skv = a[4], D = a[5], Dv = a[6];
    const i32 *qs = a + 7, *ks = a + 11, *vs = a + 15, *ys = a + 19, *ms = a + 23;
    i32 mask_kind = a[27], mask_len = a[28], causal = a[29], past_len = a[30];
    i32 left = a[31], right = a[32], qk_mode = a[33];
    i32 group = Hq / Hkv;
    for (i32 b = 0; b < B; b++) {
        i32 offset = valid_keys ? (i32)valid_keys[b] - Sq : past_len;
        for (i32 h = 0; h < Hq; h++) {
            i32 kvh = h / group;
            const float *kb = k + b * ks[0] + kvh * ks[1], *vb = v + b * vs[0] + kvh * vs[1];
            for (i32 i = 0; i < Sq; i++) {
                const float *qr = q + b * qs[0] + h * qs[1] + i * qs[2];
                float *qk_row = qk_mode >= 0 ? qk + (((i64)b * Hq + h) * Sq + i) * Skv : 0;
                i32 pos = i + offset;
                float best = -__builtin_inff();
                for (i32 j = 0; j < Skv; j++) {
                    const float *kr = kb + j * ks[2];
                    float s = qs[3] == 1 && ks[3] == 1 ? dot_contiguous(qr, kr, D)
                                                       : dot_strided(qr, qs[3], kr, ks[3], D);
                    s *= scale;
                    if (qk_mode == 0) qk_row[j] = s;
                    if (softcap > 0) s = softcap * (float)d_tanh(s / softcap);
                    if (qk_mode == 1) qk_row[j] = s;
                    int allowed = (!causal || j <= pos) && (left < 0 || j >= pos - left) &&
                                  (right < 0 || j <= pos + right) &&
                                  (!valid_keys || j < valid_keys[b]);
                    if (mask_kind != MASK_NONE) {
                        i64 at = b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3];
                        if (j >= mask_len) allowed = 0;            /* a short mask pads */
                        else if (mask_kind == MASK_BOOL) allowed &= ((const uint8_t *)mask)[at] != 0;
                        else s += ((const float *)mask)[at];
                    }
                    row[j] = allowed ? s : -__builtin_inff();
                    if (qk_mode == 2) qk_row[j] = row[j];
                    if (row[j] > best) best = row[j];
                }
                float *yr = y + b * ys[0] + h * ys[1] + i * ys[2];
                if (best == -__builtin_inff() || best != best) {    /* nothing attended */
                    for (i32 j = 0; j < Skv && qk_mode == 3; j++) qk_row[j] = 0;
                    for (i32 d = 0; d < Dv; d++) yr[d * ys[3]] = 0;
                    continue;
                }
                for (i32 j = 0; j < Skv; j++) row[j] -= best;
                unary_f32(U_EXP, row, row, Skv, 0, 0);
                float total = 0;
                for (i32 j = 0; j < Skv; j++) total += row[j];
                float inv = 1 / total;
                for (i32 j = 0; j < Skv; j++) row[j] *= inv;
                if (qk_mode == 3)
                    for (i32 j = 0; j < Skv; j++) qk_row[j] = row[j];
                for (i32 d = 0; d < Dv; d++) yr[d * ys[3]] = 0;
                for (i32 j = 0; j < Skv; j++) {
                    const float *vr = vb + j * vs[2];
                    float p = row[j];
                    i32 d = 0;
                    if (vs[3] == 1 && ys[3] == 1) {
                        v128_t vp = wasm_f32x4_splat(p);
                        for (; d + 4 <= Dv; d += 4)
                            wasm_v128_store(yr + d, wasm_f32x4_add(
                                wasm_v128_load(yr + d), wasm_f32x4_mul(vp, wasm_v128_load(vr + d))));
                    }
                    for (; d < Dv; d++) yr[d * ys[3]] += p * vr[d * vs[3]];
                }
            }
        }
    }
}

/* RotaryEmbedding: each head's first rot_dim features, as rot_dim/2 pairs (halves, or
 * neighbours when interleaved), rotated by the angle of the token's position:
 *   (x1, x2) -> (cos x1 - sin x2, sin x1 + cos x2); the other features are copied.
 * x and y are addressed as (batch, head, seq, feature) through er_args strides; cos/sin rows
 * (rot_dim/2 values) come from position_ids (int64 [B, S], nullable) or per (b, s).
 * er_args: B, H, S, D, rot_dim, interleaved, x strides[4], y strides[4], cache rows. */
EXPORT i32 er_rotary(const float *x, const float *cos_cache, const float *sin_cache,
                     const i64 *positions, float *y) {
    const i32 *a = er_args;
    i32 B = a[0], H = a[1], S = a[2], D = a[3], rot = a[4], interleaved = a[5];
    const i32 *xs = a + 6, *ys = a + 10;
    i32 rows = a[14], half = rot / 2;
    for (i32 b = 0; b < B; b++)
    for (i32 s = 0; s < S; s++) {
        i64 row = positions ? positions[(i64)b * S + s] : (i64)b * S + s;
        if (row < 0 || row >= rows) return -1 - (b * S + s);
        const float *c = cos_cache + row * half, *sn = sin_cache + row * half;
        for (i32 h = 0; h < H; h++) {
            const float *xr = x + (i64)b * xs[0] + (i64)h * xs[1] + (i64)s * xs[2];
            float *yr = y + (i64)b * ys[0] + (i64)h * ys[1] + (i64)s * ys[2];
            for (i32 i = 0; i < half; i++) {
                i32 p = interleaved ? 2 * i : i, q = interleaved ? 2 * i + 1 : i + half;
                float x1 = xr[p * xs[3]], x2 = xr[q * xs[3]];
                yr[p * ys[3]] = c[i] * x1 - sn[i] * x2;
                yr[q * ys[3]] = sn[i] * x1 + c[i] * x2;
            }
            for (i32 d = rot; d < D; d++) yr[d * ys[3]] = xr[d * xs[3]];
        }
    }
    return 0;
}
