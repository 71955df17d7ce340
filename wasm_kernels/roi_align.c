/* RoiAlign: each region of interest pooled to [output_height, output_width] bins, every bin
 * the average (or max) of grid_h x grid_w bilinear samples, as the CPU provider and
 * onnxruntime compute it:
 *
 * - a region (x1, y1, x2, y2) is scaled by spatial_scale, minus 0.5 in half_pixel mode;
 *   without half_pixel (output_half_pixel, opset 10) its size is at least 1 x 1;
 * - the grid is sampling_ratio per axis, or ceil(bin size) when sampling_ratio is 0 (so it
 *   depends on the region: computed here, not on the host);
 * - a sample more than one pixel outside the map counts as 0; others clamp to the map;
 * - max mode takes, per sample, the largest of its four weighted corner values.
 *
 * Arithmetic in double, element types through elemtypes.h (t: x and y, tr: rois).
 */
#include "common.h"
#include "dmath.h"
#include "elemtypes.h"

typedef struct { i32 low, high; double w_low, w_high; } Tap;

/* The bilinear tap of coordinate c on an axis of `size` pixels: clamped to the axis, with
 * zero weights (the pixels still read, as the CPU kernel does) when c is more than one
 * pixel outside it. */
static Tap tap_at(double c, i32 size) {
    int valid = c >= -1.0 && c <= size;
    if (c < 0) c = 0;
    i32 low = (i32)c;                     /* saturating: -mnontrapping-fptoint */
    Tap tap;
    if (low >= size - 1) {
        tap.low = tap.high = size - 1;
        tap.w_high = 0;
    } else {
        tap.low = low;
        tap.high = low + 1;
        tap.w_high = c - low;
    }
    tap.w_low = 1 - tap.w_high;
    if (!valid) tap.w_low = tap.w_high = 0;
    return tap;
}

/* er_args: N, C, H, W, R (regions), output_height, output_width. x [N, C, H, W], rois [R, 4],
 * batch_index [R] (int64), y [R, C, output_height, output_width]; acc: C doubles.
 * flags: 1 half_pixel, 2 max mode. Returns 0, or 1 + the first region whose batch index is
 * outside [0, N). */
EXPORT i32 er_roi_align(const void *x, const void *rois, const i64 *batch_index, void *y,
                        double *acc, i32 t, i32 tr, i32 sampling_ratio, float spatial_scale,
                        i32 flags) {
    i32 N = er_args[0], C = er_args[1], H = er_args[2], W = er_args[3], R = er_args[4];
    i32 out_h = er_args[5], out_w = er_args[6];
    int half_pixel = flags & 1, max_mode = (flags & 2) != 0;
    double offset = half_pixel ? 0.5 : 0.0, scale = spatial_scale;
    i32 plane = H * W, bins = out_h * out_w;
    for (i32 r = 0; r < R; r++) {
        i64 b = batch_index[r];
        if (b < 0 || b >= N) return r + 1;
        double x1 = load_float(rois, 4 * r, tr) * scale - offset;
        double y1 = load_float(rois, 4 * r + 1, tr) * scale - offset;
        double x2 = load_float(rois, 4 * r + 2, tr) * scale - offset;
        double y2 = load_float(rois, 4 * r + 3, tr) * scale - offset;
        double roi_w = x2 - x1, roi_h = y2 - y1;
        if (!half_pixel) {
            if (roi_w < 1.0) roi_w = 1.0;
            if (roi_h < 1.0) roi_h = 1.0;
        }
        double bin_h = roi_h / out_h, bin_w = roi_w / out_w;
        i32 grid_h = sampling_ratio > 0 ? sampling_ratio : (i32)__builtin_ceil(bin_h);
        i32 grid_w = sampling_ratio > 0 ? sampling_ratio : (i32)__builtin_ceil(bin_w);
        i64 out = (i64)r * C * bins;
        const i64 image = b * C * plane;
        for (i32 ph = 0; ph < out_h; ph++) {
            for (i32 pw = 0; pw < out_w; pw++) {
                for (i32 c = 0; c < C; c++) acc[c] = 0;
                int first = 1;
                for (i32 iy = 0; iy < grid_h; iy++) {
                    Tap ty = tap_at(y1 + ph * bin_h + (iy + 0.5) * bin_h / grid_h, H);
                    for (i32 ix = 0; ix < grid_w; ix++) {
                        Tap tx = tap_at(x1 + pw * bin_w + (ix + 0.5) * bin_w / grid_w, W);
                        double w1 = ty.w_low * tx.w_low, w2 = ty.w_low * tx.w_high;
                        double w3 = ty.w_high * tx.w_low, w4 = ty.w_high * tx.w_high;
                        i32 p1 = ty.low * W + tx.low, p2 = ty.low * W + tx.high;
                        i32 p3 = ty.high * W + tx.low, p4 = ty.high * W + tx.high;
                        for (i32 c = 0; c < C; c++) {
                            i32 base = (i32)(image + (i64)c * plane);
                            double v1 = w1 * load_float(x, base + p1, t);
                            double v2 = w2 * load_float(x, base + p2, t);
                            double v3 = w3 * load_float(x, base + p3, t);
                            double v4 = w4 * load_float(x, base + p4, t);
                            if (max_mode) {
                                double m = v1 > v2 ? v1 : v2;
                                m = m > v3 ? m : v3;
                                m = m > v4 ? m : v4;
                                if (first || m > acc[c]) acc[c] = m;
                            } else {
                                acc[c] += v1 + v2 + v3 + v4;
                            }
                        }
                        first = 0;
                    }
                }
                double count = (double)grid_h * grid_w;
                for (i32 c = 0; c < C; c++) {
                    double v = grid_h > 0 && grid_w > 0 ? (max_mode ? acc[c] : acc[c] / count) : 0;
                    store_float(y, (i32)(out + (i64)c * bins + ph * out_w + pw), t, v);
                }
            }
        }
    }
    return 0;
}
