/* Convolutions, pools and activations numpy runs in many passes, float32, 1-D (as 1-high
 * images) and 2-D, any kernel size, stride, dilation and padding: the depthwise convolution
 * and the pools (window_body), the direct convolution of every other conv (direct_conv_impl),
 * and the bias-and-activation epilogue of a convolution's or a product's rows, the convs
 * applying the activation FusedConv carries in the same pass.
 *
 * Activations (codes shared with providers/cpu/native/conv.py's ACTIVATIONS), float32 in the
 * numpy path's operation order, so an activation of the same sum is the same bit for bit:
 *   1 Relu, 2 LeakyRelu (p[0]: alpha > 0), 3 Clip (p[0], p[1]), 4 HardSigmoid (p[0] alpha,
 *   p[1] beta), 5 HardSwish, 6 QuantizeDequantize (p[0] scale, p[1] low - zero point,
 *   p[2] high - zero point: the value rounded to a QDQ model's 8-bit grid), 7 Swish (p[0]
 *   alpha: x / (1 + e^(-alpha x)) with fast_exp, within a few ulp of the numpy formula, not
 *   bit for bit); 0 none. */
#include <stdint.h>
#include <string.h>
#include "isa.h"
#include "byte_rows.h"
#include "fast_exp.h"
#include "quantize_steps.h"

enum { ACT_NONE = 0, ACT_RELU = 1, ACT_LEAKY_RELU = 2, ACT_CLIP = 3, ACT_HARD_SIGMOID = 4,
       ACT_HARD_SWISH = 5, ACT_QUANTIZE_DEQUANTIZE = 6, ACT_SWISH = 7 };

/* NaN stays NaN in every branch, as np.maximum and np.clip keep it. */
__attribute__((always_inline))
static inline void activate(float *v, int64_t n, int act, const float *p) {
    switch (act) {
    case ACT_RELU:
        for (int64_t i = 0; i < n; i++) v[i] = v[i] < 0.0f ? 0.0f : v[i];
        break;
    case ACT_LEAKY_RELU: {      /* max(x, alpha x) for alpha <= 1, min above: leaky_relu_of */
        const float alpha = p[0];
        if (alpha <= 1.0f) {
            for (int64_t i = 0; i < n; i++) {
                float s = v[i] * alpha;
                v[i] = v[i] < s ? s : v[i];
            }
        } else {
            for (int64_t i = 0; i < n; i++) {
                float s = v[i] * alpha;
                v[i] = v[i] > s ? s : v[i];
            }
        }
        break;
    }
    case ACT_CLIP: {
        const float low = p[0], high = p[1];
        for (int64_t i = 0; i < n; i++) {
            float s = v[i] < low ? low : v[i];
            v[i] = s > high ? high : s;
        }
        break;
    }
    case ACT_HARD_SIGMOID: {
        const float alpha = p[0], beta = p[1];
        for (int64_t i = 0; i < n; i++) {
            float s = v[i] * alpha;
            s = s + beta;
            s = s < 0.0f ? 0.0f : s;
            v[i] = s > 1.0f ? 1.0f : s;
        }
        break;
    }
    case ACT_HARD_SWISH: {     /* x * clip(x * (1/6) + 1/2, 0, 1) */
        const float sixth = (float)(1.0 / 6.0);
        for (int64_t i = 0; i < n; i++) {
            float gate = v[i] * sixth;
            gate = gate + 0.5f;
            gate = gate < 0.0f ? 0.0f : gate;
            gate = gate > 1.0f ? 1.0f : gate;
            v[i] = v[i] * gate;
        }
        break;
    }
    case ACT_QUANTIZE_DEQUANTIZE: {
        const float scale = p[0], lo = p[1], hi = p[2];
        for (int64_t i = 0; i < n; i++) v[i] = QUANTIZE_DEQUANTIZE(v[i], scale, lo, hi);
        break;
    }
    case ACT_SWISH: {          /* x * sigmoid(alpha x); e^(-alpha x) = inf gives -0 or NaN (-inf) */
        const float minus_alpha = -p[0];
        for (int64_t i = 0; i < n; i++) v[i] = v[i] / (1.0f + fast_exp(v[i] * minus_alpha));
        break;
    }
    default:
        break;
    }
}

/* ---- bias and activation over rows ------------------------------------------------------ */
/* y [rows, cols] in place: y[r] = act(y[r] + bias[r]) (bias may be NULL), with
 * bias[r] indexed r % bias_period (the channels of a batch of images laid out (N, M, ...)). */
__attribute__((always_inline))
static inline void bias_activation_body(float *y, int64_t rows, int64_t cols, const float *bias,
                                        int64_t bias_period, int act, const float *p) {
    for (int64_t r = 0; r < rows; r++) {
        float *row = y + r * cols;
        if (bias) {
            const float b = bias[r % bias_period];
            for (int64_t i = 0; i < cols; i++) row[i] = row[i] + b;
        }
        activate(row, cols, act, p);
    }
}
DISPATCHED(bias_activation, (float *y, int64_t rows, int64_t cols, const float *bias,
                             int64_t bias_period, int act, const float *p),
           (y, rows, cols, bias, bias_period, act, p))

/* ---- a per-channel affine map (BatchNormalization) ---------------------------------------- */
/* y [rows, cols] = act(x * factor[r % period] + shift[r % period]): the multiply, then the add,
 * each rounded to float32 (numpy's two passes, bit for bit), then the activation while the row
 * is in the cache (FusedBatchNormalization's; 0 for none). */
__attribute__((always_inline))
static inline void channel_affine_body(const float *x, float *y, int64_t rows, int64_t cols,
                                       const float *factor, const float *shift, int64_t period,
                                       int act, const float *p) {
    for (int64_t r = 0; r < rows; r++) {
        const float f = factor[r % period], b = shift[r % period];
        const float *src = x + r * cols;
        float *dst = y + r * cols;
        for (int64_t i = 0; i < cols; i++) dst[i] = src[i] * f + b;
        activate(dst, cols, act, p);
    }
}
DISPATCHED(channel_affine, (const float *x, float *y, int64_t rows, int64_t cols,
                            const float *factor, const float *shift, int64_t period, int act,
                            const float *p),
           (x, y, rows, cols, factor, shift, period, act, p))

/* ---- an activation alone ---------------------------------------------------------------- */
/* y = act(x) over n values, in blocks that stay in the L1 cache between the copy and the
 * activation's pass. */
__attribute__((always_inline))
static inline void activation_body(const float *x, float *y, int64_t n, int act,
                                   const float *p) {
    for (int64_t i0 = 0; i0 < n; i0 += 2048) {
        const int64_t count = n - i0 < 2048 ? n - i0 : 2048;
        for (int64_t i = 0; i < count; i++) y[i0 + i] = x[i0 + i];
        activate(y + i0, count, act, p);
    }
}
DISPATCHED(activation, (const float *x, float *y, int64_t n, int act, const float *p),
           (x, y, n, act, p))

/* ---- phase planes ------------------------------------------------------------------------ */
/* One input row into its phase rows: column ix goes to phase (ix + pl) % sw at column
 * (ix + pl) / sw, phase b's row starting at dst + b * phase_stride (the padding around is
 * the caller's). Stride 2 takes column pairs in a loop the compiler vectorises. */
__attribute__((always_inline))
static inline void split_row_into_phases(const float *src, int64_t in_w, int64_t pl,
                                         int64_t sw, float *dst, int64_t phase_stride) {
    if (sw == 2) {
        float *even = dst + (pl % 2) * phase_stride + pl / 2;
        float *odd = dst + ((pl + 1) % 2) * phase_stride + (pl + 1) / 2;
        for (int64_t j = 0; j < in_w / 2; j++) {
            even[j] = src[2 * j];
            odd[j] = src[2 * j + 1];
        }
        if (in_w % 2) even[in_w / 2] = src[in_w - 1];
        return;
    }
    for (int64_t b = 0; b < sw; b++) {        /* the columns of phase b */
        const int64_t ix0 = ((b - pl) % sw + sw) % sw;
        float *phase = dst + b * phase_stride + (ix0 + pl) / sw;
        for (int64_t ix = ix0, j = 0; ix < in_w; ix += sw, j++) phase[j] = src[ix];
    }
}

/* ---- depthwise convolution and pools ---------------------------------------------------- */
/* geometry (int64 x 15): batch, channels, multiplier, in_h, in_w, out_h, out_w, kernel_h,
 * kernel_w, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left. Output channel m
 * reads input channel m / multiplier with weights w[m] (kernel_h x kernel_w); 1-D convs are
 * the rows of a 1-high image.
 *
 * Each input channel is copied once into its zero-padded plane, split by the strides into
 * stride_h x stride_w phase planes of phase_h x phase_w (phase (a, b) holds the padded rows
 * a, a + stride_h, ... and columns b, b + stride_w, ...). Output (oy, ox)'s tap (ky, kx) then
 * reads phase (ky dh % sh, kx dw % sw) at (oy + ky dh / sh, ox + kx dw / sw): for a block of
 * output rows, every tap is one contiguous multiply-add over rows x phase_w values (the
 * columns past out_w are computed and dropped), which the compiler vectorises whatever the
 * kernel, stride or width. Blocks of `block_rows` keep the accumulator in the L1 cache.
 * Within a block, CHUNK outputs at a time are accumulated in registers over every tap.
 * With vertical stride and dilation 1 and a kernel 3, 5 or 7 high, dw_rows computes the
 * rows instead, reusing each loaded input vector across the output rows it is a tap of.
 * scratch: stride_h * stride_w * phase_h * phase_w + phase_w + CHUNK
 * + block_rows * (phase_w + 64) floats; tap_offsets: kernel_h * kernel_w int64. Only input channels [range[0], range[1])
 * (and their output channels) are computed: threads split the channels. */
#define CHUNK 64
enum { WINDOW_CONV = 0, WINDOW_MAX = 1, WINDOW_SUM = 2 };

/* ---- depthwise rows by sliding input rows (vertical stride and dilation 1) ---------------- */
/* Output rows oy .. oy + R - 1 of one channel read input rows oy .. oy + R + KH - 2 (in the
 * phase planes): each input vector loaded is then a tap of up to KH of those rows, so a
 * column of 16 outputs takes R + KH - 1 loads per kernel column instead of R * KH (the
 * loads, not the arithmetic, bound the plain per-tap loop). The sums run kernel column by
 * kernel column (kx outer, ky inner), from the bias, as 16-value vectors. */
typedef float v16 __attribute__((vector_size(64), aligned(4)));

__attribute__((always_inline))
static inline v16 load16(const float *p) {
    v16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

#define DW_ROWS(R, C, KH)                                                                     \
    __attribute__((always_inline))                                                            \
    static inline void dw_rows_##R##_##KH(const float *origin, const int64_t *column_offsets,  \
                                          int64_t phase_w, int64_t kw, const float *wm,       \
                                          float b, int64_t width, float *acc,                 \
                                          int64_t acc_stride) {                               \
        for (int64_t c0 = 0; c0 < width; c0 += 16 * C) {                                      \
            v16 a[R][C];                                                                      \
            for (int r = 0; r < R; r++)                                                       \
                for (int c = 0; c < C; c++) a[r][c] = (v16){0} + b;                           \
            for (int64_t kx = 0; kx < kw; kx++) {                                             \
                const float *base = origin + column_offsets[kx] + c0;                         \
                v16 w[KH];                                                                    \
                for (int ky = 0; ky < KH; ky++) w[ky] = (v16){0} + wm[ky * kw + kx];          \
                _Pragma("clang loop unroll(full)")                                            \
                for (int i = 0; i < R + KH - 1; i++) {                                        \
                    _Pragma("clang loop unroll(full)")                                        \
                    for (int c = 0; c < C; c++) {                                             \
                        v16 v = load16(base + i * phase_w + 16 * c);                          \
                        _Pragma("clang loop unroll(full)")                                    \
                        for (int ky = 0; ky < KH; ky++)                                       \
                            if (i - ky >= 0 && i - ky < R)                                    \
                                a[i - ky][c] = a[i - ky][c] + w[ky] * v;                      \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
            for (int r = 0; r < R; r++)                                                       \
                memcpy(acc + r * acc_stride + c0, a[r], sizeof a[r]);                         \
        }                                                                                     \
    }
/* (rows, 16-value columns) per call: at least 4 independent sums, as the adds' latency asks */
#define DW_ROWS_ALL(KH) DW_ROWS(4, 1, KH) DW_ROWS(3, 2, KH) DW_ROWS(2, 2, KH) DW_ROWS(1, 4, KH)
DW_ROWS_ALL(3) DW_ROWS_ALL(5) DW_ROWS_ALL(7)

/* Whether dw_rows takes a geometry: a conv with vertical stride and dilation 1 and a kernel
 * 3, 5 or 7 high. */
static inline int dw_rows_take(int mode, int64_t sh, int64_t dh, int64_t kh) {
    return mode == WINDOW_CONV && sh == 1 && dh == 1 && (kh == 3 || kh == 5 || kh == 7);
}

/* `rows` output rows from phase row `first` into acc (row stride acc_stride, columns rounded
 * up to 64: acc_stride >= out_w + 63), four at a time, then the rest in one call. */
#define DW_CALL(R, KH) dw_rows_##R##_##KH(origin, column_offsets, phase_w, kw, wm, b, out_w, dst, \
                                          acc_stride)
#define DW_BY_HEIGHT(R)                                          \
    do {                                                         \
        if (kh == 3) DW_CALL(R, 3);                              \
        else if (kh == 5) DW_CALL(R, 5);                         \
        else DW_CALL(R, 7);                                      \
    } while (0)

__attribute__((always_inline))
static inline void dw_rows(const float *scratch, const int64_t *column_offsets, int64_t first,
                           int64_t rows, int64_t phase_w, int64_t kh, int64_t kw,
                           const float *wm, float b, int64_t out_w, float *acc,
                           int64_t acc_stride) {
    for (int64_t r = 0; r < rows; r += 4) {
        const float *origin = scratch + (first + r) * phase_w;
        float *dst = acc + r * acc_stride;
        switch (rows - r < 4 ? rows - r : 4) {
        case 4: DW_BY_HEIGHT(4); break;
        case 3: DW_BY_HEIGHT(3); break;
        case 2: DW_BY_HEIGHT(2); break;
        default: DW_BY_HEIGHT(1); break;
        }
    }
}

/* The depthwise conv's loops, shared with the pools: `mode` WINDOW_CONV sums the taps
 * weighted by w (plus bias, then the activation), WINDOW_MAX takes their maximum (NaN wins, as
 * np.maximum; padding reads -inf) and WINDOW_SUM their sum (padding reads 0). */
__attribute__((always_inline))
static inline void window_body(const float *x, const float *w, const float *bias,
                               const int64_t *geometry, int act, const float *p, float *y,
                               float *scratch, int64_t *tap_offsets, const int64_t *range,
                               int mode) {
    const int64_t batch = geometry[0], channels = geometry[1], multiplier = geometry[2];
    const int64_t in_h = geometry[3], in_w = geometry[4], out_h = geometry[5], out_w = geometry[6];
    const int64_t kh = geometry[7], kw = geometry[8], sh = geometry[9], sw = geometry[10];
    const int64_t dh = geometry[11], dw = geometry[12], pt = geometry[13], pl = geometry[14];
    const int64_t reach_h = (out_h - 1) * sh + (kh - 1) * dh + 1;  /* padded rows read */
    const int64_t reach_w = (out_w - 1) * sw + (kw - 1) * dw + 1;
    const int64_t padded_h = in_h + pt > reach_h ? in_h + pt : reach_h;
    const int64_t padded_w = in_w + pl > reach_w ? in_w + pl : reach_w;
    const int64_t phase_h = (padded_h + sh - 1) / sh, phase_w = (padded_w + sw - 1) / sw;
    const int64_t phase_size = phase_h * phase_w, phases = sh * sw;
    const int64_t block_rows = out_h < 1 + 4096 / phase_w ? out_h : 1 + 4096 / phase_w;
    const int64_t outputs = channels * multiplier;
    const int64_t taps = kh * kw, tail = phase_w + CHUNK;
    const float fill = mode == WINDOW_MAX ? -__builtin_inff() : 0.0f;   /* the padding */
    float *acc = scratch + phases * phase_size + tail;      /* past the planes' tail */
    /* dw_rows writes whole 64-value columns: its rows are out_w rounded up apart */
    const int sliding = dw_rows_take(mode, sh, dh, kh);
    const int64_t acc_stride = (out_w + 63) / 64 * 64;
    for (int64_t i = phases * phase_size; i < phases * phase_size + tail; i++)
        scratch[i] = fill;                 /* what the last chunk reads past the last plane */
    for (int64_t ky = 0; ky < kh; ky++) {
        for (int64_t kx = 0; kx < kw; kx++) {
            const int64_t ry = ky * dh, rx = kx * dw;
            tap_offsets[ky * kw + kx] = ((ry % sh) * sw + rx % sw) * phase_size
                + (ry / sh) * phase_w + rx / sw;
        }
    }
    for (int64_t n = 0; n < batch; n++) {
        for (int64_t c = range[0]; c < range[1]; c++) {
            const float *plane = x + (n * channels + c) * in_h * in_w;
            for (int64_t i = 0; i < phases * phase_size; i++) scratch[i] = fill;
            for (int64_t iy = 0; iy < in_h; iy++) {
                const int64_t py = iy + pt;
                split_row_into_phases(plane + iy * in_w, in_w, pl, sw,
                                      scratch + ((py % sh) * sw * phase_h + py / sh) * phase_w,
                                      phase_size);
            }
            for (int64_t k = 0; k < multiplier; k++) {
                const int64_t m = c * multiplier + k;
                const float *wm = w ? w + m * kh * kw : 0;
                const float b = mode == WINDOW_MAX ? -__builtin_inff() : (bias ? bias[m] : 0.0f);
                float *out = y + (n * outputs + m) * out_h * out_w;
                for (int64_t oy0 = 0; oy0 < out_h; oy0 += block_rows) {
                    const int64_t rows = out_h - oy0 < block_rows ? out_h - oy0 : block_rows;
                    if (sliding) {
                        dw_rows(scratch, tap_offsets, oy0, rows, phase_w, kh, kw, wm, b, out_w,
                                acc, acc_stride);
                        for (int64_t r = 0; r < rows; r++) {
                            float *row = acc + r * acc_stride;
                            activate(row, out_w, act, p);
                            memcpy(out + (oy0 + r) * out_w, row, (size_t)out_w * sizeof(float));
                        }
                        continue;
                    }
                    const int64_t count = rows * phase_w;
                    const float *origin = scratch + oy0 * phase_w;
                    /* CHUNK outputs at a time stay in registers through every tap */
                    for (int64_t i0 = 0; i0 < count; i0 += CHUNK) {
                        float a[CHUNK];
                        for (int j = 0; j < CHUNK; j++) a[j] = b;
                        if (mode == WINDOW_CONV) {
                            for (int64_t t = 0; t < taps; t++) {
                                const float *src = origin + tap_offsets[t] + i0;
                                const float wv = wm[t];
                                for (int j = 0; j < CHUNK; j++) a[j] = a[j] + wv * src[j];
                            }
                        } else if (mode == WINDOW_MAX) {
                            for (int64_t t = 0; t < taps; t++) {
                                const float *src = origin + tap_offsets[t] + i0;
                                for (int j = 0; j < CHUNK; j++)
                                    a[j] = (src[j] > a[j] || src[j] != src[j]) ? src[j] : a[j];
                            }
                        } else {
                            for (int64_t t = 0; t < taps; t++) {
                                const float *src = origin + tap_offsets[t] + i0;
                                for (int j = 0; j < CHUNK; j++) a[j] = a[j] + src[j];
                            }
                        }
                        const int64_t valid = count - i0 < CHUNK ? count - i0 : CHUNK;
                        for (int64_t j = 0; j < valid; j++) acc[i0 + j] = a[j];
                    }
                    for (int64_t r = 0; r < rows; r++) {
                        float *row = acc + r * phase_w;
                        float *dst = out + (oy0 + r) * out_w;
                        activate(row, out_w, act, p);      /* (act 0 for the pools) */
                        for (int64_t ox = 0; ox < out_w; ox++) dst[ox] = row[ox];
                    }
                }
            }
        }
    }
}
__attribute__((always_inline))
static inline void depthwise_conv_body(const float *x, const float *w, const float *bias,
                                       const int64_t *geometry, int act, const float *p,
                                       float *y, float *scratch, int64_t *tap_offsets,
                                       const int64_t *range) {
    window_body(x, w, bias, geometry, act, p, y, scratch, tap_offsets, range, WINDOW_CONV);
}
DISPATCHED(depthwise_conv, (const float *x, const float *w, const float *bias,
                            const int64_t *geometry, int act, const float *p, float *y,
                            float *scratch, int64_t *tap_offsets, const int64_t *range),
           (x, w, bias, geometry, act, p, y, scratch, tap_offsets, range))

/* Every window's maximum (mode 1: MaxPool) or sum (mode 2: AveragePool's and LpPool's) of
 * float32 x: the depthwise conv's geometry with multiplier 1, and its scratch. */
__attribute__((always_inline))
static inline void pool_body(const float *x, const int64_t *geometry, int mode, float *y,
                             float *scratch, int64_t *tap_offsets, const int64_t *range) {
    window_body(x, 0, 0, geometry, 0, 0, y, scratch, tap_offsets, range, mode);
}
DISPATCHED(pool, (const float *x, const int64_t *geometry, int mode, float *y, float *scratch,
                  int64_t *tap_offsets, const int64_t *range),
           (x, geometry, mode, y, scratch, tap_offsets, range))

/* ---- 8-bit max pools ----------------------------------------------------------------------- */
/* MaxPool of 8-bit codes (a MaxPool between a QDQ model's pairs runs on its codes) over the
 * pool's geometry (multiplier 1); padding reads the type's lowest value. Each channel's plane
 * (copied into a padded plane of padded_h x padded_w where the windows reach past the input)
 * is reduced in two passes over the whole flattened plane, so every operation is one long
 * run of vectors however narrow the rows: along rows, a[i] = max over kx of
 * plane[i + kx dw]; then down columns, a[i] = max over ky of a[i + ky dh padded_w]. What
 * these mix across row and plane ends lands only on columns no output reads. Output row oy
 * is then row oy sh of a, every sw-th column, gathered into the scratch's output plane and
 * copied to y. scratch: padded_h * padded_w + out_h * out_w + 128 bytes. Only channels
 * [range[0], range[1]) are computed. */
typedef uint8_t u8x64 __attribute__((vector_size(64), aligned(1)));
typedef uint8_t u8x16 __attribute__((vector_size(16), aligned(1)));
typedef int8_t s8x64 __attribute__((vector_size(64), aligned(1)));
typedef int8_t s8x16 __attribute__((vector_size(16), aligned(1)));

/* dst[i] = max over k < taps of src[i + k step], i < n. dst may be src: each vector's loads
 * come before its store, and later vectors read only bytes past those stored. */
#define MAX_TAPS(NAME, E, V64, V16)                                                          \
    static inline void NAME(uint8_t *d, const uint8_t *s, int64_t n, int64_t step,           \
                            int64_t taps) {                                                  \
        E *dst = (E *)d;                                                                     \
        const E *src = (const E *)s;                                                         \
        int64_t i = 0;                                                                       \
        for (; i + 64 <= n; i += 64) {                                                       \
            V64 m = *(const V64 *)(src + i);                                                 \
            for (int64_t k = 1; k < taps; k++)                                               \
                m = __builtin_elementwise_max(m, *(const V64 *)(src + i + k * step));        \
            *(V64 *)(dst + i) = m;                                                           \
        }                                                                                    \
        for (; i + 16 <= n; i += 16) {                                                       \
            V16 m = *(const V16 *)(src + i);                                                 \
            for (int64_t k = 1; k < taps; k++)                                               \
                m = __builtin_elementwise_max(m, *(const V16 *)(src + i + k * step));        \
            *(V16 *)(dst + i) = m;                                                           \
        }                                                                                    \
        for (; i < n; i++) {                                                                 \
            E m = src[i];                                                                    \
            for (int64_t k = 1; k < taps; k++)                                               \
                m = src[i + k * step] > m ? src[i + k * step] : m;                           \
            dst[i] = m;                                                                      \
        }                                                                                    \
    }
MAX_TAPS(max_taps_unsigned, uint8_t, u8x64, u8x16)
MAX_TAPS(max_taps_signed, int8_t, s8x64, s8x16)

static inline void max_taps(uint8_t *dst, const uint8_t *src, int64_t n, int64_t step,
                            int64_t taps, int signed_codes) {
    if (taps == 1 && dst == src) return;
    if (signed_codes) max_taps_signed(dst, src, n, step, taps);
    else max_taps_unsigned(dst, src, n, step, taps);
}

/* dst[i] = src[i * step], i < n, whole 16-byte vectors for a step of 1 or 2: up to 15 bytes
 * written past dst[n - 1] and 31 read past src[step * (n - 1)] (the pool's scratch has them). */
static inline void gather_columns(const uint8_t *src, int64_t n, int64_t step, uint8_t *dst) {
    if (step == 1) {
        for (int64_t i = 0; i < n; i += 16) *(u8x16 *)(dst + i) = *(const u8x16 *)(src + i);
        return;
    }
#ifdef __SSE2__
    if (step == 2) {
        for (int64_t i = 0; i < n; i += 16) every_other_16(src + 2 * i, dst + i);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) dst[i] = src[i * step];
}

__attribute__((always_inline))
static inline void max_pool_8bit_body(const uint8_t *x, const int64_t *geometry,
                                      int signed_codes, uint8_t *y, uint8_t *scratch,
                                      const int64_t *range) {
    const int64_t batch = geometry[0], channels = geometry[1];
    const int64_t in_h = geometry[3], in_w = geometry[4], out_h = geometry[5], out_w = geometry[6];
    const int64_t kh = geometry[7], kw = geometry[8], sh = geometry[9], sw = geometry[10];
    const int64_t dh = geometry[11], dw = geometry[12], pt = geometry[13], pl = geometry[14];
    const int64_t reach_h = (out_h - 1) * sh + (kh - 1) * dh + 1;
    const int64_t reach_w = (out_w - 1) * sw + (kw - 1) * dw + 1;
    const int64_t padded_h = in_h + pt > reach_h ? in_h + pt : reach_h;
    const int64_t padded_w = in_w + pl > reach_w ? in_w + pl : reach_w;
    const int padded = padded_h != in_h || padded_w != in_w;
    const int64_t size = padded_h * padded_w;
    const uint8_t lowest = signed_codes ? 0x80 : 0;
    uint8_t *a = scratch, *gathered = scratch + size + 64;
    for (int64_t n = 0; n < batch; n++) {
        for (int64_t c = range[0]; c < range[1]; c++) {
            const uint8_t *plane = x + (n * channels + c) * in_h * in_w;
            const uint8_t *source = plane;
            if (padded) {
                fill_bytes(a, lowest, size);
                for (int64_t iy = 0; iy < in_h; iy++)
                    memcpy(a + (iy + pt) * padded_w + pl, plane + iy * in_w, (size_t)in_w);
                source = a;
            }
            max_taps(a, source, size - (kw - 1) * dw, dw, kw, signed_codes);
            max_taps(a, a, size - (kh - 1) * dh * padded_w, dh * padded_w, kh, signed_codes);
            for (int64_t oy = 0; oy < out_h; oy++)
                gather_columns(a + oy * sh * padded_w, out_w, sw, gathered + oy * out_w);
            memcpy(y + (n * channels + c) * out_h * out_w, gathered, (size_t)(out_h * out_w));
        }
    }
}
DISPATCHED(max_pool_8bit, (const uint8_t *x, const int64_t *geometry, int signed_codes,
                           uint8_t *y, uint8_t *scratch, const int64_t *range),
           (x, geometry, signed_codes, y, scratch, range))

/* ---- direct convolution ------------------------------------------------------------------ */
/* Conv of x (N, C, in_h, in_w) by weights packed as [group][M_g / 8 blocks][C_g][taps][8]
 * (output channels in blocks of CONV_MB = 8, the last block zero-padded), 1-D convs as 1-high
 * images. geometry (int64 x 16): batch, channels, outputs, group, in_h, in_w, out_h, out_w,
 * kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left.
 *
 * The layout is the depthwise conv's, per block of output rows: the rows of every input
 * channel of a group that the block reads are copied into zero-padded phase planes, so each
 * tap of the block is one contiguous run of values (columns past out_w computed and
 * dropped). A tile of 8 output channels x `width` consecutive outputs is accumulated in
 * registers over every input channel and tap: each input vector loaded feeds 8 multiply-adds.
 * Then bias and activation, and the valid columns go to y.
 * Only output rows [range[0], range[1]) and channel blocks [range[2], range[3]) of each
 * group are computed: threads split the rows, or the blocks of a 1-row output.
 * scratch: providers/cpu/native/conv.py's DirectConv.scratch_size floats. */
#define CONV_MB 8
#define CONV_MAX_W 32

__attribute__((always_inline))
static inline void direct_conv_impl(const float *x, const float *wp, const float *bias,
                                    const int64_t *geometry, int act, const float *p, float *y,
                                    float *scratch, const int64_t *tap_offsets,
                                    const int64_t block_rows, const int64_t *range,
                                    const int width) {
#pragma clang fp contract(fast)
    const int64_t batch = geometry[0], channels = geometry[1], outputs = geometry[2];
    const int64_t group = geometry[3], in_h = geometry[4], in_w = geometry[5];
    const int64_t out_h = geometry[6], out_w = geometry[7], kh = geometry[8], kw = geometry[9];
    const int64_t sh = geometry[10], sw = geometry[11], dh = geometry[12], dw = geometry[13];
    const int64_t pt = geometry[14], pl = geometry[15];
    const int64_t cg = channels / group, mg = outputs / group;
    const int64_t m_blocks = (mg + CONV_MB - 1) / CONV_MB, taps = kh * kw;
    const int64_t reach_w = (out_w - 1) * sw + (kw - 1) * dw + 1;
    const int64_t padded_w = in_w + pl > reach_w ? in_w + pl : reach_w;
    const int64_t phase_w = (padded_w + sw - 1) / sw;
    const int64_t rows_reach = block_rows + ((kh - 1) * dh) / sh;   /* phase rows a block reads */
    const int64_t plane = rows_reach * phase_w;                     /* one phase plane */
    const int64_t channel_stride = sh * sw * plane;
    const int64_t planes = cg * channel_stride;
    const int64_t tail = phase_w + CONV_MAX_W;     /* what the last chunk reads past */
    float *tile_out = scratch + planes + tail;                 /* CONV_MB x block values */
    for (int64_t i = planes; i < planes + tail; i++) scratch[i] = 0.0f;
    for (int64_t n = 0; n < batch; n++) {
        for (int64_t g = 0; g < group; g++) {
            const float *xg = x + (n * channels + g * cg) * in_h * in_w;
            for (int64_t oy0 = range[0]; oy0 < range[1]; oy0 += block_rows) {
                const int64_t rows = range[1] - oy0 < block_rows ? range[1] - oy0 : block_rows;
                const int64_t count = rows * phase_w;
                /* the phase planes of this block: phase (a, b) row j is padded row
                 * (oy0 + j) * sh + a, its column q padded column q * sw + b */
                for (int64_t c = 0; c < cg; c++) {
                    for (int64_t a = 0; a < sh; a++) {
                        for (int64_t j = 0; j < rows_reach; j++) {
                            const int64_t iy = (oy0 + j) * sh + a - pt;
                            float *dst_row = scratch + c * channel_stride + (a * sw * rows_reach + j) * phase_w;
                            for (int64_t b = 0; b < sw; b++)
                                for (int64_t q = 0; q < phase_w; q++) dst_row[b * plane + q] = 0.0f;
                            if (iy < 0 || iy >= in_h) continue;
                            split_row_into_phases(xg + (c * in_h + iy) * in_w, in_w, pl, sw,
                                                  dst_row, plane);
                        }
                    }
                }
                for (int64_t mb = range[2]; mb < range[3]; mb++) {
                    const float *wb = wp + (g * m_blocks + mb) * cg * taps * CONV_MB;
                    const int64_t m0 = g * mg + mb * CONV_MB;
                    const int64_t live = mg - mb * CONV_MB < CONV_MB ? mg - mb * CONV_MB : CONV_MB;
                    float start[CONV_MB];
                    for (int k = 0; k < CONV_MB; k++) start[k] = bias && k < live ? bias[m0 + k] : 0.0f;
                    for (int64_t i0 = 0; i0 < count; i0 += width) {
                        float acc[CONV_MB][CONV_MAX_W];
                        for (int k = 0; k < CONV_MB; k++)
                            for (int j = 0; j < width; j++) acc[k][j] = start[k];
                        for (int64_t c = 0; c < cg; c++) {
                            const float *base = scratch + c * channel_stride + i0;
                            const float *wc = wb + c * taps * CONV_MB;
                            for (int64_t t = 0; t < taps; t++) {
                                const float *src = base + tap_offsets[t];
                                const float *wt = wc + t * CONV_MB;
                                for (int k = 0; k < CONV_MB; k++) {
                                    const float wv = wt[k];
                                    for (int j = 0; j < width; j++) acc[k][j] += wv * src[j];
                                }
                            }
                        }
                        const int64_t valid = count - i0 < width ? count - i0 : width;
                        for (int k = 0; k < CONV_MB; k++)
                            for (int64_t j = 0; j < valid; j++) tile_out[k * count + i0 + j] = acc[k][j];
                    }
                    for (int64_t k = 0; k < live; k++) {
                        float *out = y + ((n * outputs + m0 + k) * out_h + oy0) * out_w;
                        for (int64_t r = 0; r < rows; r++) {
                            float *row = tile_out + k * count + r * phase_w;
                            activate(row, out_w, act, p);
                            for (int64_t ox = 0; ox < out_w; ox++) out[r * out_w + ox] = row[ox];
                        }
                    }
                }
            }
        }
    }
}

/* Offsets of each tap (ky, kx) from an output's position in the phase planes (see above):
 * ((ky dh % sh) sw + kx dw % sw) plane + (ky dh / sh) phase_w + kx dw / sw. */
EXPORT void er_cpu_conv_tap_offsets(const int64_t *geometry, int64_t block_rows,
                                    int64_t *tap_offsets) {
    const int64_t out_w = geometry[7], kh = geometry[8], kw = geometry[9];
    const int64_t sh = geometry[10], sw = geometry[11], dh = geometry[12], dw = geometry[13];
    const int64_t in_w = geometry[5], pl = geometry[15];
    const int64_t reach_w = (out_w - 1) * sw + (kw - 1) * dw + 1;
    const int64_t padded_w = in_w + pl > reach_w ? in_w + pl : reach_w;
    const int64_t phase_w = (padded_w + sw - 1) / sw;
    const int64_t plane = (block_rows + ((kh - 1) * dh) / sh) * phase_w;
    for (int64_t ky = 0; ky < kh; ky++) {
        for (int64_t kx = 0; kx < kw; kx++) {
            const int64_t ry = ky * dh, rx = kx * dw;
            tap_offsets[ky * kw + kx] = ((ry % sh) * sw + rx % sw) * plane
                + (ry / sh) * phase_w + rx / sw;
        }
    }
}

/* The tile's width is each instruction set's: 2 zmm, 1 ymm, 4 floats (the 8 x width
 * accumulators must fit the registers), so the body is not DISPATCHED's one signature. */
#define DIRECT_CONV_PARAMS const float *x, const float *wp, const float *bias,            \
    const int64_t *geometry, int act, const float *p, float *y, float *scratch,          \
    const int64_t *tap_offsets, int64_t block_rows, const int64_t *range
#define DIRECT_CONV_ARGS x, wp, bias, geometry, act, p, y, scratch, tap_offsets, block_rows, range
TARGET_AVX512 static void direct_conv_avx512(DIRECT_CONV_PARAMS) {
    direct_conv_impl(DIRECT_CONV_ARGS, 32);
}
TARGET_AVX2 static void direct_conv_avx2(DIRECT_CONV_PARAMS) {
    direct_conv_impl(DIRECT_CONV_ARGS, 8);
}
static void direct_conv_plain(DIRECT_CONV_PARAMS) {
    direct_conv_impl(DIRECT_CONV_ARGS, 4);
}
EXPORT void er_cpu_direct_conv(DIRECT_CONV_PARAMS) {
    int isa = cpu_isa();
    if (isa == ISA_AVX512) direct_conv_avx512(DIRECT_CONV_ARGS);
    else if (isa == ISA_AVX2) direct_conv_avx2(DIRECT_CONV_ARGS);
    else direct_conv_plain(DIRECT_CONV_ARGS);
}

/* ---- record forms for the native pool (pool.c) ------------------------------------------ */

/* One part's arguments as 64-bit words, in the order of the function's parameters. */
EXPORT int er_cpu_depthwise_conv_record(const uint64_t *a) {
    er_cpu_depthwise_conv(WORD(const float *, 0), WORD(const float *, 1),
                          WORD(const float *, 2), WORD(const int64_t *, 3), WORD(int, 4),
                          WORD(const float *, 5), WORD(float *, 6), WORD(float *, 7),
                          WORD(int64_t *, 8), WORD(const int64_t *, 9));
    return 0;
}

EXPORT int er_cpu_pool_record(const uint64_t *a) {
    er_cpu_pool(WORD(const float *, 0), WORD(const int64_t *, 1), WORD(int, 2),
                WORD(float *, 3), WORD(float *, 4), WORD(int64_t *, 5),
                WORD(const int64_t *, 6));
    return 0;
}

EXPORT int er_cpu_activation_record(const uint64_t *a) {
    er_cpu_activation(WORD(const float *, 0), WORD(float *, 1), WORD(int64_t, 2), WORD(int, 3),
                      WORD(const float *, 4));
    return 0;
}

EXPORT int er_cpu_bias_activation_record(const uint64_t *a) {
    er_cpu_bias_activation(WORD(float *, 0), WORD(int64_t, 1), WORD(int64_t, 2),
                           WORD(const float *, 3), WORD(int64_t, 4), WORD(int, 5),
                           WORD(const float *, 6));
    return 0;
}

EXPORT int er_cpu_max_pool_8bit_record(const uint64_t *a) {
    er_cpu_max_pool_8bit(WORD(const uint8_t *, 0), WORD(const int64_t *, 1), WORD(int, 2),
                         WORD(uint8_t *, 3), WORD(uint8_t *, 4), WORD(const int64_t *, 5));
    return 0;
}

EXPORT int er_cpu_direct_conv_record(const uint64_t *a) {
    er_cpu_direct_conv(WORD(const float *, 0), WORD(const float *, 1), WORD(const float *, 2),
                       WORD(const int64_t *, 3), WORD(int, 4), WORD(const float *, 5),
                       WORD(float *, 6), WORD(float *, 7), WORD(const int64_t *, 8),
                       WORD(int64_t, 9), WORD(const int64_t *, 10));
    return 0;
}
