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
    for (i32 i = 0; i < n; i++) {
        double v = load_float(x, i, tx);
        double q = ts == T_F32 ? (double)((float)v / s32) : v / s;
        q = __builtin_nearbyint(q) + (double)zp;
        q = q < low ? low : q > high ? high : q;          /* NaN stays: stored as 0 */
        store_int(y, i, ty, q == q ? (i64)q : 0);
    }
}
