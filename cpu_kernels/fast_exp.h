/* fast_exp: e^x for float32 in a form compilers vectorise (softmax.c, the Swish activation). */
#ifndef ER_FAST_EXP_H
#define ER_FAST_EXP_H
#include <stdint.h>

/* e^x as 2^n e^r, x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two for an exact
 * product), e^r by its degree-6 Taylor-like minimax polynomial (Cephes' expf); 2^n built in
 * the exponent bits. x below -87.3 gives 0 (expf: subnormals down to 1e-45), above 88.7
 * +inf; NaN stays NaN. Vectorises, where a libm call per value does not. */
__attribute__((always_inline))
static inline float fast_exp(float x) {
    const float hi = 88.72283f, lo = -87.33654f;
    float v = x > hi ? hi : (x < lo ? lo : x);
    float n = __builtin_rintf(v * 1.44269504088896341f);
    float r = v - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union { float f; int32_t i; } scale = {.i = ((int32_t)n + 127) << 23};
    float y = p * scale.f;
    y = x < lo ? 0.0f : (x > hi ? __builtin_inff() : y);
    return x != x ? x : y;
}

#endif
