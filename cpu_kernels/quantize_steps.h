/* One float32 value's steps on an 8-bit grid: providers/cpu/ops/quantization.py's float32
 * paths, shared by the quantization kernels (elementwise.c) and the activation that rounds a
 * convolution's result to its QDQ model's grid (conv.c). */
#ifndef EDGERUN_CPU_QUANTIZE_STEPS_H
#define EDGERUN_CPU_QUANTIZE_STEPS_H

/* q = rint(x / scale) saturated to [low - z, high - z], NaN to low - z
 * (_steps_around_zero_point). */
#define STEPS(x, scale, low, high) ({                                            \
        float v_ = __builtin_rintf((x) / (scale));                               \
        v_ = v_ < (low) ? (low) : (v_ > (high) ? (high) : v_);                   \
        v_ != v_ ? (low) : v_; })

/* DequantizeLinear(QuantizeLinear(x)) with lo, hi the grid's ends around the zero point:
 * (q + 0.0) * scale (-0.0 becomes +0.0, as the 8-bit value gives). */
#define QUANTIZE_DEQUANTIZE(x, scale, lo, hi) ((STEPS(x, scale, lo, hi) + 0.0f) * (scale))

#endif
