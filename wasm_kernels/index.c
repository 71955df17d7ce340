/* Indexed data movement and per-axis scans for any element type: GatherElements,
 * ScatterElements, GatherND, ScatterND (with reductions), Trilu, CumSum/CumProd, OneHot,
 * TopK and Hardmax.
 *
 * Indices are int64 or int32 (idx64); a negative index counts from the end of its axis.
 * Kernels that read indices return 0, or -1 - i for the first index i out of range (the
 * host names it). Reductions compute in the element type (elemtypes.h loads and stores).
 */
#include "elemtypes.h"

static inline i64 index_at(const void *indices, i32 idx64, i64 i) {
    return idx64 ? ((const i64 *)indices)[i] : ((const i32 *)indices)[i];
}

enum { S_NONE = 0, S_ADD, S_MUL, S_MAX, S_MIN };

/* dst[k] combined with src[k] (one element of type t) by a scatter reduction */
static void combine_into(unsigned char *dst, const unsigned char *src, i32 t, i32 size,
                         i32 reduction) {
    if (reduction == S_NONE) {
        copy_element(dst, src, size);
    } else if (is_float_type(t)) {
        double a = load_float(dst, 0, t), b = load_float(src, 0, t);
        double r = reduction == S_ADD ? a + b : reduction == S_MUL ? a * b
                 : reduction == S_MAX ? (a > b || a != a ? a : b) : (a < b || a != a ? a : b);
        store_float(dst, 0, t, r);
    } else {
        i64 a = load_int(dst, 0, t), b = load_int(src, 0, t);
        int u = t == T_U64;
        i64 r = reduction == S_ADD ? (i64)((uint64_t)a + (uint64_t)b)
              : reduction == S_MUL ? (i64)((uint64_t)a * (uint64_t)b)
              : reduction == S_MAX ? (u ? ((uint64_t)a > (uint64_t)b ? a : b) : (a > b ? a : b))
              : (u ? ((uint64_t)a < (uint64_t)b ? a : b) : (a < b ? a : b));
        store_int(dst, 0, t, r);
    }
}

/* GatherElements (scatter = 0) and ScatterElements (scatter = 1, into dst already holding
 * data). er_args: rank, axis, index shape[rank], data strides[rank] (elements). For the
 * gather, dst is contiguous in the index shape; for the scatter, src (the updates) is. */
EXPORT i32 er_elements(i32 scatter, unsigned char *dst, const unsigned char *src,
                       const void *indices, i32 idx64, i32 t, i32 size, i32 reduction) {
    i32 rank = er_args[0], axis = er_args[1];
    const i32 *shape = er_args + 2, *strides = er_args + 2 + rank;
    i64 n = 1;
    for (i32 d = 0; d < rank; d++) n *= shape[d];
    i32 axis_dim = er_args[2 + rank + rank];        /* the data's size along axis */
    i32 idx[MAX_RANK] = {0};
    i64 base = 0;                                   /* data offset without the axis term */
    for (i64 i = 0; i < n; i++) {
        i64 k = index_at(indices, idx64, i);
        if (k < -axis_dim || k >= axis_dim) return (i32)(-1 - i);
        if (k < 0) k += axis_dim;
        i64 at = base + k * strides[axis];
        if (scatter) combine_into(dst + at * size, src + i * size, t, size, reduction);
        else copy_element(dst + i * size, src + at * size, size);
        for (i32 d = rank - 1; d >= 0; d--) {
            if (d != axis) base += strides[d];
            if (++idx[d] < shape[d]) break;
            if (d != axis) base -= (i64)strides[d] * shape[d];
            idx[d] = 0;
        }
    }
    return 0;
}

/* GatherND (scatter = 0: dst gets `tuples` slices) and ScatterND (scatter = 1: dst holds
 * data, src the updates). Each index tuple of k values addresses a slice of slice_elems
 * elements; tuples are grouped in `batches` of `per_batch`, batch b reading data block b
 * (batch_elems elements). er_args: k dims[k] then k strides[k] (elements). */
EXPORT i32 er_nd(i32 scatter, unsigned char *dst, const unsigned char *src,
                 const void *indices, i32 idx64, i32 batches, i32 per_batch, i32 k,
                 i32 slice_elems, i32 batch_elems, i32 t, i32 size, i32 reduction) {
    const i32 *dims = er_args, *strides = er_args + k;
    for (i32 b = 0; b < batches; b++) {
        for (i32 j = 0; j < per_batch; j++) {
            i64 tuple = (i64)b * per_batch + j, at = (i64)b * batch_elems;
            for (i32 q = 0; q < k; q++) {
                i64 v = index_at(indices, idx64, tuple * k + q);
                if (v < -dims[q] || v >= dims[q]) return (i32)(-1 - (tuple * k + q));
                at += (v < 0 ? v + dims[q] : v) * strides[q];
            }
            if (scatter) {
                for (i32 e = 0; e < slice_elems; e++)
                    combine_into(dst + (at + e) * size, src + (tuple * slice_elems + e) * size,
                                 t, size, reduction);
            } else {
                __builtin_memcpy(dst + tuple * slice_elems * size, src + at * size,
                                 (size_t)slice_elems * size);
            }
        }
    }
    return 0;
}

/* Trilu: keep the elements with col - row >= k (upper) or <= k (lower), zero the rest. */
EXPORT void er_trilu(unsigned char *dst, const unsigned char *src, i32 size, i32 batch,
                     i32 rows, i32 cols, i32 k, i32 upper) {
    for (i32 b = 0; b < batch; b++) {
        for (i32 r = 0; r < rows; r++) {
            i64 row = ((i64)b * rows + r) * cols;
            for (i32 c = 0; c < cols; c++) {
                int keep = upper ? c - r >= k : c - r <= k;
                if (keep) copy_element(dst + (row + c) * size, src + (row + c) * size, size);
                else __builtin_memset(dst + (row + c) * size, 0, (size_t)size);
            }
        }
    }
}

/* CumSum (prod = 0) or CumProd along the middle axis of (outer, n, inner), rounding to the
 * element type at every step as an accumulation in that type does. */
EXPORT void er_cumulative(i32 prod, i32 t, const void *x, void *y, i32 outer, i32 n,
                          i32 inner, i32 exclusive, i32 reverse) {
    int f = is_float_type(t);
    for (i32 o = 0; o < outer; o++) {
        for (i32 j = 0; j < inner; j++) {
            double acc = prod;
            i64 iacc = prod;
            for (i32 s = 0; s < n; s++) {
                i64 at = ((i64)o * n + (reverse ? n - 1 - s : s)) * inner + j;
                if (f) {              /* the running value, rounded to t by storing it */
                    double v = load_float(x, at, t);
                    store_float(y, at, t, prod ? acc * v : acc + v);
                    double next = load_float(y, at, t);
                    if (exclusive) store_float(y, at, t, acc);
                    acc = next;
                } else {
                    i64 v = load_int(x, at, t);
                    store_int(y, at, t, (i64)(prod ? (uint64_t)iacc * (uint64_t)v
                                                   : (uint64_t)iacc + (uint64_t)v));
                    i64 next = load_int(y, at, t);
                    if (exclusive) store_int(y, at, t, iacc);
                    iacc = next;
                }
            }
        }
    }
}

/* OneHot: dst (outer, depth, inner) holds `off` (filled by the host); the element at each
 * valid index (int64; negative counts from depth) is set to `on`. */
EXPORT void er_one_hot(unsigned char *dst, const i64 *indices, const unsigned char *on,
                       i32 size, i32 outer, i32 depth, i32 inner) {
    for (i32 o = 0; o < outer; o++) {
        for (i32 j = 0; j < inner; j++) {
            i64 k = indices[(i64)o * inner + j];
            if (k < 0) k += depth;
            if (k < 0 || k >= depth) continue;
            copy_element(dst + (((i64)o * depth + k) * inner + j) * size, on, size);
        }
    }
}

/* key order for TopK: NaN above everything; ties keep the lower index first */
static inline int before(const double *key, i32 a, i32 b, i32 largest) {
    double x = key[a], z = key[b];
    if (x != x) return z == z && largest;
    if (z != z) return !largest;
    return largest ? x > z : x < z;
}

static void merge_sort(i32 *order, i32 *tmp, i32 n, const double *key, i32 largest) {
    for (i32 width = 1; width < n; width *= 2) {
        for (i32 lo = 0; lo < n; lo += 2 * width) {
            i32 mid = min_i32(lo + width, n), hi = min_i32(lo + 2 * width, n);
            i32 a = lo, b = mid, out = lo;
            while (a < mid && b < hi)
                tmp[out++] = before(key, order[b], order[a], largest) ? order[b++] : order[a++];
            while (a < mid) tmp[out++] = order[a++];
            while (b < hi) tmp[out++] = order[b++];
        }
        for (i32 i = 0; i < n; i++) order[i] = tmp[i];
    }
}

/* TopK along the middle axis of (outer, n, inner): the k best values (by element type t)
 * and their int64 indices, in order. scratch: n doubles then 2n int32. */
EXPORT void er_top_k(const unsigned char *x, unsigned char *values, i64 *indices, i32 t,
                     i32 size, i32 outer, i32 n, i32 inner, i32 k, i32 largest,
                     unsigned char *scratch) {
    double *key = (double *)scratch;
    i32 *order = (i32 *)(key + n), *tmp = order + n;
    for (i32 o = 0; o < outer; o++) {
        for (i32 j = 0; j < inner; j++) {
            for (i32 i = 0; i < n; i++) {
                i64 at = ((i64)o * n + i) * inner + j;
                key[i] = is_float_type(t) ? load_float(x, at, t) : (double)load_int(x, at, t);
                order[i] = i;
            }
            merge_sort(order, tmp, n, key, largest);
            for (i32 i = 0; i < k; i++) {
                i64 out = ((i64)o * k + i) * inner + j;
                i64 from = ((i64)o * n + order[i]) * inner + j;
                copy_element(values + out * size, x + from * size, size);
                indices[out] = order[i];
            }
        }
    }
}

/* Hardmax along the middle axis of (outer, n, inner): 1 at the first maximum, 0 elsewhere
 * (a NaN counts as the maximum). */
EXPORT void er_hardmax(const float *x, float *y, i32 outer, i32 n, i32 inner) {
    for (i32 o = 0; o < outer; o++) {
        for (i32 j = 0; j < inner; j++) {
            const float *p = x + (i64)o * n * inner + j;
            float *q = y + (i64)o * n * inner + j;
            i32 best = 0;
            float top = p[0];
            for (i32 i = 1; i < n && top == top; i++) {
                float v = p[(i64)i * inner];
                if (v > top || v != v) { best = i; top = v; }
            }
            for (i32 i = 0; i < n; i++) q[(i64)i * inner] = i == best ? 1.0f : 0.0f;
        }
    }
}
