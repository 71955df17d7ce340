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
#include <string.h>
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

/* A forest's tables, filled once per node by native/forest.py (its FOREST dtype). */
typedef struct {
    const Node *nodes;       /* a leaf's next[] both point to itself */
    const int32_t *roots;
    int64_t n_trees;
    const int32_t *leaf_start, *leaf_count, *w_target;
    const double *w_value;
    int64_t max_steps;
    int64_t mode;            /* the one comparison every decision node makes, or -1: mixed */
    const int32_t *depths;   /* each tree's deepest leaf (decisions from the root) */
} Forest;

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

/* Adds the weights of `leaf` to one row's scores; 2 for a weight's target outside
 * [0, n_targets), else 0. */
static inline int add_leaf(const Forest *f, int64_t leaf, double *s, uint8_t *h,
                           int64_t n_targets, int aggregate) {
    int64_t start = f->leaf_start[leaf], stop = start + f->leaf_count[leaf];
    for (int64_t w = start; w < stop; w++) {
        int64_t c = f->w_target[w];
        if (c < 0 || c >= n_targets) return 2;
        double v = f->w_value[w];
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
    return 0;
}

/* Rows one at a time, each walked until its leaf: any comparison mode, cycles detected. */
static int rows_one_by_one(const double *x, int64_t n, int64_t n_features, const Forest *f,
                           int64_t n_targets, int aggregate, double *scores, uint8_t *hit) {
    for (int64_t t = 0; t < f->n_trees; t++) {
        for (int64_t r = 0; r < n; r++) {
            int64_t leaf = leaf_of(x + r * n_features, f->nodes, f->roots[t], f->max_steps);
            if (leaf < 0) return 1;
            int code = add_leaf(f, leaf, scores + r * n_targets, hit + r * n_targets,
                                n_targets, aggregate);
            if (code) return code;
        }
    }
    return 0;
}

enum { LANES = 8 };

/* LANES walks advanced `depth` decisions together, lane i reading row[i] from node at[i]
 * (every decision node makes comparison MODE; a lane at its leaf stays there). */
#define WALK_LANES(MODE)                                                                     \
    static inline void walk_lanes_##MODE(const Node *nodes, const double *const *row,        \
                                         int32_t *at, int32_t depth) {                       \
        for (int32_t d = 0; d < depth; d++) {                                                \
            for (int i = 0; i < LANES; i++) {                                                \
                const Node *p = nodes + at[i];                                               \
                double v = row[i][p->feature];                                               \
                at[i] = p->next[goes_true(MODE, v, p->threshold) |                           \
                                (p->missing_true & (v != v))];                               \
            }                                                                                \
        }                                                                                    \
    }
WALK_LANES(LEQ)
WALK_LANES(LT)

/* LANES rows walked in lockstep, each tree to its full depth (a row that reached its leaf
 * stays there: a leaf points to itself). The walks are independent, so the core overlaps
 * their loads, and no branch waits on where a row's walk ends. Every decision node makes
 * comparison MODE. */
#define ROWS_IN_LOCKSTEP(NAME, MODE)                                                         \
    static int NAME(const double *x, int64_t n, int64_t n_features, const Forest *f,         \
                    int64_t n_targets, int aggregate, double *scores, uint8_t *hit) {        \
        for (int64_t t = 0; t < f->n_trees; t++) {                                           \
            int32_t depth = f->depths[t];                                                    \
            for (int64_t r0 = 0; r0 < n; r0 += LANES) {                                      \
                const double *row[LANES];                                                    \
                int32_t at[LANES];                                                           \
                for (int i = 0; i < LANES; i++) {    /* past the last row: repeat it */      \
                    row[i] = x + (r0 + i < n ? r0 + i : n - 1) * n_features;                 \
                    at[i] = f->roots[t];                                                     \
                }                                                                            \
                walk_lanes_##MODE(f->nodes, row, at, depth);                                 \
                for (int i = 0; i < LANES && r0 + i < n; i++) {                              \
                    int code = add_leaf(f, at[i], scores + (r0 + i) * n_targets,             \
                                        hit + (r0 + i) * n_targets, n_targets, aggregate);   \
                    if (code) return code;                                                   \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
        return 0;                                                                            \
    }
ROWS_IN_LOCKSTEP(rows_in_lockstep_leq, LEQ)
ROWS_IN_LOCKSTEP(rows_in_lockstep_lt, LT)

/* Fewer rows than LANES: each row walked through LANES trees in lockstep (each to the
 * group's deepest leaf; a row at its leaf stays there), so one row's walks overlap as the
 * rows' do above; the leaves' weights are then added in tree order. */
#define TREES_IN_LOCKSTEP(NAME, MODE)                                                        \
    static int NAME(const double *x, int64_t n, int64_t n_features, const Forest *f,         \
                    int64_t n_targets, int aggregate, double *scores, uint8_t *hit) {        \
        for (int64_t r = 0; r < n; r++) {                                                    \
            const double *row[LANES];                                                        \
            for (int i = 0; i < LANES; i++) row[i] = x + r * n_features;                     \
            for (int64_t t0 = 0; t0 < f->n_trees; t0 += LANES) {                             \
                const int lanes = f->n_trees - t0 < LANES ? (int)(f->n_trees - t0) : LANES;  \
                int32_t at[LANES], depth = 0;                                                \
                for (int i = 0; i < LANES; i++) {    /* past the last tree: repeat it */     \
                    const int64_t t = t0 + (i < lanes ? i : lanes - 1);                      \
                    at[i] = f->roots[t];                                                     \
                    depth = f->depths[t] > depth ? f->depths[t] : depth;                     \
                }                                                                            \
                walk_lanes_##MODE(f->nodes, row, at, depth);                                 \
                for (int i = 0; i < lanes; i++) {                                            \
                    int code = add_leaf(f, at[i], scores + r * n_targets, hit + r * n_targets, \
                                        n_targets, aggregate);                               \
                    if (code) return code;                                                   \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
        return 0;                                                                            \
    }
TREES_IN_LOCKSTEP(trees_in_lockstep_leq, LEQ)
TREES_IN_LOCKSTEP(trees_in_lockstep_lt, LT)

/* Each score divided by `divisor` (AVERAGE: the tree count; 0: none), then with `base` (one
 * value per target, or null) a hit target's plus its base and a missed one 0, as the numpy
 * path finishes them. */
static void finish(int64_t n, int64_t n_targets, double divisor, const double *base,
                   double *scores, const uint8_t *hit) {
    if (divisor == 0.0 && !base) return;
    for (int64_t i = 0; i < n * n_targets; i++) {
        double s = divisor != 0.0 ? scores[i] / divisor : scores[i];
        if (base) s = hit[i] ? s + base[i % n_targets] : 0.0;
        scores[i] = s;
    }
}

static int walk(const double *x, int64_t n, int64_t n_features, const Forest *f,
                int64_t n_targets, int aggregate, double *scores, uint8_t *hit) {
    if (f->depths && f->mode == LEQ)
        return (n >= LANES ? rows_in_lockstep_leq : trees_in_lockstep_leq)(
            x, n, n_features, f, n_targets, aggregate, scores, hit);
    if (f->depths && f->mode == LT)
        return (n >= LANES ? rows_in_lockstep_lt : trees_in_lockstep_lt)(
            x, n, n_features, f, n_targets, aggregate, scores, hit);
    return rows_one_by_one(x, n, n_features, f, n_targets, aggregate, scores, hit);
}

/* scores [n, n_targets] and hit [n, n_targets] (zeroed here first): the aggregate of
 * each row's leaf weights per target, and whether any weight reached it, finished by
 * `finish`. Trees are the outer loop (one tree's nodes stay in cache for every row); each
 * (row, target) still receives its weights in tree order, the numpy path's. Returns 0, 1
 * for a cycle, 2 for a weight whose target is outside [0, n_targets). */
EXPORT int er_cpu_forest(const double *x, int64_t n, int64_t n_features, const Forest *f,
                         int64_t n_targets, int aggregate, double divisor, const double *base,
                         double *scores, uint8_t *hit) {
    memset(scores, 0, (size_t)(n * n_targets) * sizeof(double));
    memset(hit, 0, (size_t)(n * n_targets));
    int code = walk(x, n, n_features, f, n_targets, aggregate, scores, hit);
    if (!code) finish(n, n_targets, divisor, base, scores, hit);
    return code;
}

/* er_cpu_forest's arguments in one record (native/forest.py's CALL): a batch-1 call's
 * arguments are made once per thread and node, and passing ten of them through ctypes
 * costs more than walking a small forest. */
typedef struct {
    const double *x;
    int64_t n, n_features;
    const Forest *f;
    int64_t n_targets, aggregate;
    double divisor;
    const double *base;
    double *scores;
    uint8_t *hit;
} ForestCall;

EXPORT int er_cpu_forest_call(const ForestCall *c) {
    return er_cpu_forest(c->x, c->n, c->n_features, c->f, c->n_targets, (int)c->aggregate,
                         c->divisor, c->base, c->scores, c->hit);
}
