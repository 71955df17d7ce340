/* Tree ensembles: every (row, tree) pair walked from its root to a leaf, and the leaves'
 * weights aggregated per row and target, in one call.
 *
 * The forest is providers/cpu/ops/ml.py's flat node table (_Forest): node i compares
 * x[row, feature] with its threshold by its mode and goes to next[1] (true) or next[0]
 * (false); a NaN goes to the true side where missing_true. Leaves (mode 7) own the weights
 * w_target/w_value[leaf_start[i] : leaf_start[i] + leaf_count[i]].
 *
 * Comparisons are made in double on values the caller has already rounded to the
 * thresholds' own type, so they decide as the numpy path's do. Sums are float64 in the
 * numpy path's order (row by row, tree by tree, each leaf's weights in order), so scores
 * are equal bit for bit. */
#include <stdint.h>
#include "isa.h"

enum { LEQ = 0, LT = 1, GTE = 2, GT = 3, EQ = 4, NEQ = 5, LEAF = 7 };
enum { AGG_SUM = 0, AGG_MIN = 1, AGG_MAX = 2 };

/* One node in 24 bytes, read in one cache line (native/forest.py's NODE dtype). */
typedef struct {
    double threshold;
    int32_t feature;
    int32_t next[2];         /* false, true */
    int8_t mode;
    uint8_t missing_true;
    int16_t unused;
} Node;

static inline int goes_true(int mode, double v, double t) {
    switch (mode) {
    case LEQ: return v <= t;
    case LT: return v < t;
    case GTE: return v >= t;
    case GT: return v > t;
    case EQ: return v == t;
    default: return v != t;      /* NEQ */
    }
}

/* The leaf a row reaches from `node`, or -1 past max_steps decisions (a cycle). */
static inline int64_t leaf_of(const double *row, const Node *nodes, int64_t node,
                              int64_t max_steps) {
    for (int64_t step = 0; step <= max_steps; step++) {
        const Node *d = nodes + node;
        if (d->mode == LEAF) return node;
        double v = row[d->feature];
        int side = goes_true(d->mode, v, d->threshold) | (d->missing_true & (v != v));
        node = d->next[side];
    }
    return -1;
}

/* scores [n, n_targets] and hit [n, n_targets] (zeroed by the caller): the aggregate of
 * each row's leaf weights per target, and whether any weight reached it. Trees are the
 * outer loop (one tree's nodes stay in cache for every row); each (row, target) still
 * receives its weights in tree order, the numpy path's. Returns 0, 1 for a cycle, 2 for a
 * weight whose target is outside [0, n_targets). */
EXPORT int er_cpu_forest(const double *x, int64_t n, int64_t n_features, const Node *nodes,
                         const int32_t *roots, int64_t n_trees, const int32_t *leaf_start,
                         const int32_t *leaf_count, const int32_t *w_target,
                         const double *w_value, int64_t n_targets, int aggregate,
                         int64_t max_steps, double *scores, uint8_t *hit) {
    for (int64_t t = 0; t < n_trees; t++) {
        for (int64_t r = 0; r < n; r++) {
            int64_t leaf = leaf_of(x + r * n_features, nodes, roots[t], max_steps);
            if (leaf < 0) return 1;
            double *s = scores + r * n_targets;
            uint8_t *h = hit + r * n_targets;
            int64_t start = leaf_start[leaf], stop = start + leaf_count[leaf];
            for (int64_t w = start; w < stop; w++) {
                int64_t c = w_target[w];
                if (c < 0 || c >= n_targets) return 2;
                double v = w_value[w];
                if (!h[c]) {
                    s[c] = aggregate == AGG_SUM ? 0.0 + v : v;
                    h[c] = 1;
                } else if (aggregate == AGG_SUM) {
                    s[c] += v;
                } else if (aggregate == AGG_MIN) {      /* a NaN wins, as np.minimum's */
                    s[c] = (v != v || v < s[c]) ? v : s[c];
                } else {
                    s[c] = (v != v || v > s[c]) ? v : s[c];
                }
            }
        }
    }
    return 0;
}
