/* Comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual) on any numeric type, the
 * logical operators on bool (And, Or, Xor, Not), and Where for any element size.
 *
 * Broadcasting is er_binary's: the host merges dimensions and passes the output shape and
 * each operand's strides in elements (0 where broadcast) through er_args. Results are bool
 * bytes (0 or 1).
 */
#include "elemtypes.h"

enum { C_EQ = 0, C_LT, C_GT, C_LE, C_GE, C_AND, C_OR, C_XOR };

static inline uint8_t compare_int(i32 op, i64 x, i64 z) {
    switch (op) {
    case C_EQ: return x == z;
    case C_LT: return x < z;
    case C_GT: return x > z;
    case C_LE: return x <= z;
    case C_GE: return x >= z;
    case C_AND: return (x != 0) & (z != 0);
    case C_OR: return (x != 0) | (z != 0);
    default: return (x != 0) ^ (z != 0);
    }
}

static inline uint8_t compare_float(i32 op, double x, double z) {
    switch (op) {
    case C_EQ: return x == z;
    case C_LT: return x < z;
    case C_GT: return x > z;
    case C_LE: return x <= z;
    default: return x >= z;
    }
}

/* One innermost row of n results; a and b are element offsets into the operands. */
static void compare_row(i32 op, i32 type, const void *a, i32 ia, i32 sa, const void *b, i32 ib,
                        i32 sb, uint8_t *y, i32 n) {
    if (type == T_F32) {
        const float *fa = (const float *)a + ia, *fb = (const float *)b + ib;
        for (i32 i = 0; i < n; i++) y[i] = compare_float(op, fa[i * sa], fb[i * sb]);
    } else if (type == T_I32) {
        const i32 *pa = (const i32 *)a + ia, *pb = (const i32 *)b + ib;
        for (i32 i = 0; i < n; i++) y[i] = compare_int(op, pa[i * sa], pb[i * sb]);
    } else if (is_float_type(type)) {
        for (i32 i = 0; i < n; i++)
            y[i] = compare_float(op, load_float(a, ia + i * sa, type),
                                 load_float(b, ib + i * sb, type));
    } else {
        for (i32 i = 0; i < n; i++)
            y[i] = compare_int(op, load_int(a, ia + i * sa, type), load_int(b, ib + i * sb, type));
    }
}

/* er_args: shape[rank], astride[rank], bstride[rank]; y is contiguous bool. */
EXPORT void er_compare(i32 op, i32 type, const void *a, const void *b, uint8_t *y, i32 rank) {
    const i32 *shape = er_args, *sa = er_args + rank, *sb = er_args + 2 * rank;
    i32 idx[MAX_RANK] = {0}, off[2] = {0, 0};
    i32 inner = shape[rank - 1], rows = outer_rows(shape, rank);
    for (i32 r = 0; r < rows; r++) {
        compare_row(op, type, a, off[0], sa[rank - 1], b, off[1], sb[rank - 1], y, inner);
        y += inner;
        next_row(idx, shape, rank, 2, off);
    }
}

EXPORT void er_not(const uint8_t *x, uint8_t *y, i32 n) {
    for (i32 i = 0; i < n; i++) y[i] = !x[i];
}

/* y = cond ? a : b. er_args: shape[rank], cstride[rank], astride[rank], bstride[rank]. */
EXPORT void er_where(const uint8_t *cond, const unsigned char *a, const unsigned char *b,
                     unsigned char *y, i32 elsize, i32 rank) {
    const i32 *shape = er_args, *sc = er_args + rank, *sa = er_args + 2 * rank,
              *sb = er_args + 3 * rank;
    i32 idx[MAX_RANK] = {0}, off[3] = {0, 0, 0};     /* cond, a, b */
    i32 inner = shape[rank - 1], rows = outer_rows(shape, rank);
    i32 ic = sc[rank - 1], ia = sa[rank - 1], ib = sb[rank - 1];
    for (i32 r = 0; r < rows; r++) {
        for (i32 i = 0; i < inner; i++) {
            const unsigned char *src = cond[off[0] + i * ic]
                ? a + (size_t)(off[1] + i * ia) * elsize : b + (size_t)(off[2] + i * ib) * elsize;
            copy_element(y, src, elsize);
            y += elsize;
        }
        next_row(idx, shape, rank, 3, off);
    }
}
