/* NonMaxSuppression: greedy per (batch, class). Candidates (score above the threshold, when
 * one is given) are visited by descending score, ties lower box index first; each kept box
 * suppresses every later candidate whose IoU with it exceeds the threshold. Boxes with no
 * overlap or a non-positive area never suppress each other. Arithmetic in float32.
 */
#include "common.h"

/* box i of a batch entry as (y_min, x_min, y_max, x_max, area) */
static void corners(const float *b, i32 center, float *out) {
    float y0, x0, y1, x1;
    if (center) {              /* (x_center, y_center, width, height) */
        float hw = b[2] / 2, hh = b[3] / 2;
        y0 = b[1] - hh; x0 = b[0] - hw; y1 = b[1] + hh; x1 = b[0] + hw;
    } else {                   /* diagonal corners, in either order */
        y0 = b[0] < b[2] ? b[0] : b[2]; y1 = b[0] < b[2] ? b[2] : b[0];
        x0 = b[1] < b[3] ? b[1] : b[3]; x1 = b[1] < b[3] ? b[3] : b[1];
    }
    out[0] = y0; out[1] = x0; out[2] = y1; out[3] = x1; out[4] = (y1 - y0) * (x1 - x0);
}

static int suppresses(const float *a, const float *b, float threshold) {
    float ih = (a[2] < b[2] ? a[2] : b[2]) - (a[0] > b[0] ? a[0] : b[0]);
    float iw = (a[3] < b[3] ? a[3] : b[3]) - (a[1] > b[1] ? a[1] : b[1]);
    if (!(ih > 0 && iw > 0) || !(a[4] > 0) || !(b[4] > 0)) return 0;
    float inter = ih * iw, uni = a[4] + b[4] - inter;
    return uni > 0 && inter / uni > threshold;
}

/* boxes [B, N, 4], scores [B, C, N]; out gets (batch, class, box) int64 triples; returns
 * their count. scratch: 5N floats, then 2N int32. */
EXPORT i32 er_nms(const float *boxes, const float *scores, i64 *out, i32 B, i32 C, i32 N,
                  i32 max_out, float iou_threshold, i32 has_score_threshold,
                  float score_threshold, i32 center, unsigned char *scratch) {
    float *geo = (float *)scratch;
    i32 *order = (i32 *)(geo + 5 * N), *tmp = order + N;
    i32 count = 0;
    for (i32 b = 0; b < B; b++) {
        for (i32 i = 0; i < N; i++) corners(boxes + ((i64)b * N + i) * 4, center, geo + 5 * i);
        for (i32 c = 0; c < C; c++) {
            const float *s = scores + ((i64)b * C + c) * N;
            i32 n = 0;
            for (i32 i = 0; i < N; i++)
                if (!has_score_threshold || s[i] > score_threshold) order[n++] = i;
            /* stable merge sort by descending score */
            for (i32 width = 1; width < n; width *= 2) {
                for (i32 lo = 0; lo < n; lo += 2 * width) {
                    i32 mid = min_i32(lo + width, n), hi = min_i32(lo + 2 * width, n);
                    i32 p = lo, q = mid, k = lo;
                    while (p < mid && q < hi) tmp[k++] = s[order[q]] > s[order[p]] ? order[q++] : order[p++];
                    while (p < mid) tmp[k++] = order[p++];
                    while (q < hi) tmp[k++] = order[q++];
                }
                for (i32 i = 0; i < n; i++) order[i] = tmp[i];
            }
            i32 kept = 0;
            for (i32 i = 0; i < n && kept < max_out; i++) {
                if (order[i] < 0) continue;                      /* suppressed */
                i32 box = order[i];
                out[3 * count] = b; out[3 * count + 1] = c; out[3 * count + 2] = box;
                count++;
                kept++;
                for (i32 j = i + 1; j < n; j++)
                    if (order[j] >= 0 && suppresses(geo + 5 * box, geo + 5 * order[j], iou_threshold))
                        order[j] = -1;
            }
        }
    }
    return count;
}
