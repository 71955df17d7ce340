/* Negative log-likelihood (NegativeLogLikelihoodLoss, and SoftmaxCrossEntropyLoss after a
 * log-softmax over the classes): per-element losses, or their sum or weighted mean.
 */
#include "common.h"

enum { REDUCE_NONE = 0, REDUCE_SUM, REDUCE_MEAN };

/* x (N, C, D) log-probabilities, target (N, D) int32 or int64 (t64), weight (C) or 0.
 * loss gets N * D values (REDUCE_NONE) or one. A target equal to ignore (when has_ignore)
 * adds nothing, not even to the weight total the mean divides by.
 * Returns 0, or -1 - i for the first target i outside [0, C). */
EXPORT i32 er_nll(const float *x, const void *target, i32 t64, const float *weight,
                  float *loss, i32 N, i32 C, i32 D, i32 has_ignore, i32 ignore, i32 reduction) {
    double total = 0, weights = 0;
    for (i32 n = 0; n < N; n++) {
        for (i32 d = 0; d < D; d++) {
            i32 i = n * D + d;
            i64 t = t64 ? ((const i64 *)target)[i] : ((const i32 *)target)[i];
            float value = 0;
            if (!(has_ignore && t == ignore)) {
                if (t < 0 || t >= C) return -1 - i;
                float w = weight ? weight[t] : 1.0f;
                value = -x[((i64)n * C + t) * D + d] * w;
                weights += w;
            }
            if (reduction == REDUCE_NONE) loss[i] = value;
            total += value;
        }
    }
    if (reduction == REDUCE_SUM) loss[0] = (float)total;
    if (reduction == REDUCE_MEAN) loss[0] = (float)(total / weights);
    return 0;
}
