/* Data movement for any element size (1, 2, 4, 8 bytes): strided copies (Transpose, Slice,
 * Expand, Concat, Pad, broadcast fills), Gather, fills, and Cast between the numeric types
 * (float32/64, signed and unsigned 8- to 64-bit integers, bool).
 */
#include "elemtypes.h"

/* er_args: shape[rank], dst_strides[rank], src_strides[rank] (elements, may be 0 or < 0). */
EXPORT void er_copy_strided(unsigned char *dst, const unsigned char *src, i32 elsize, i32 rank) {
    const i32 *shape = er_args, *ds = er_args + rank, *ss = er_args + 2 * rank;
    i32 idx[MAX_RANK] = {0};
    i32 inner = shape[rank - 1];
    i32 rows = 1;
    for (i32 d = 0; d < rank - 1; d++) rows *= shape[d];
    if (inner == 0) return;
    i32 di = ds[rank - 1] * elsize, si = ss[rank - 1] * elsize;
    int contiguous = di == elsize && si == elsize;
    for (i32 r = 0; r < rows; r++) {
        if (contiguous) {
            __builtin_memcpy(dst, src, (size_t)inner * (size_t)elsize);
        } else if (elsize == 4) {
            for (i32 i = 0; i < inner; i++)
                *(uint32_t *)(dst + i * di) = *(const uint32_t *)(src + i * si);
        } else {
            for (i32 i = 0; i < inner; i++) copy_element(dst + i * di, src + i * si, elsize);
        }
        for (i32 d = rank - 2; d >= 0; d--) {
            dst += ds[d] * elsize;
            src += ss[d] * elsize;
            if (++idx[d] < shape[d]) break;
            dst -= ds[d] * shape[d] * elsize;
            src -= ss[d] * shape[d] * elsize;
            idx[d] = 0;
        }
    }
}

/* out[o, i, :] = data[o, idx[i], :] for o < outer; returns -1 - i for the first index out of
 * [-axis_dim, axis_dim), else 0. Indices are int64 or int32 (idx64). */
EXPORT i32 er_gather(unsigned char *dst, const unsigned char *src, const void *indices,
                     i32 idx64, i32 nidx, i32 outer, i32 axis_dim, i32 inner_bytes) {
    for (i32 i = 0; i < nidx; i++) {
        i64 k = idx64 ? ((const i64 *)indices)[i] : ((const i32 *)indices)[i];
        if (k < -axis_dim || k >= axis_dim) return -1 - i;
    }
    for (i32 o = 0; o < outer; o++) {
        const unsigned char *block = src + (size_t)o * axis_dim * inner_bytes;
        for (i32 i = 0; i < nidx; i++) {
            i64 k = idx64 ? ((const i64 *)indices)[i] : ((const i32 *)indices)[i];
            if (k < 0) k += axis_dim;
            __builtin_memcpy(dst, block + (size_t)k * inner_bytes, (size_t)inner_bytes);
            dst += inner_bytes;
        }
    }
    return 0;
}

static int known_type(i32 t) {     /* every numeric type but complex */
    return t >= T_F32 && t <= T_I2 && t != 8 && t != 14 && t != 15;
}

enum { CAST_NO_SATURATE = 1, CAST_FNUZ_INF_TO_NAN = 2 };   /* flags; bits 2-3: e8m0 rounding */

/* One value to a narrow float type as Cast's attributes say (saturate, round_mode). */
static void cast_narrow(void *dst, i32 i, i32 to, double v, i32 flags) {
    i32 saturate = !(flags & CAST_NO_SATURATE);
    if ((flags & CAST_FNUZ_INF_TO_NAN) && d_isinf(v) &&
        (to == T_F8E4M3FNUZ || to == T_F8E5M2FNUZ)) v = __builtin_nan("");
    ((uint8_t *)dst)[i] = to == T_F8E8M0 ? e8m0_encode(v, saturate, (flags >> 2) & 3)
                        : (uint8_t)small_float_encode(small_float(to), v, to == T_F4E2M1 ? 4 : 8,
                                                      saturate);
}

/* f16_to_f32 on four halves (in the low 16 bits of each lane), bit for bit */
static inline v128_t f16x4_to_f32x4(v128_t h) {
    v128_t u = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x7fff)), 13);
    v128_t exp = wasm_v128_and(u, wasm_i32x4_splat(0x0f800000));
    v128_t base = wasm_i32x4_add(u, wasm_i32x4_splat(112 << 23));
    v128_t inf_nan = wasm_i32x4_add(base, wasm_i32x4_splat(112 << 23));
    v128_t tiny = wasm_f32x4_sub(wasm_i32x4_add(base, wasm_i32x4_splat(1 << 23)),
                                 wasm_f32x4_splat(6.103515625e-05f));     /* 2^-14 */
    v128_t r = wasm_v128_bitselect(inf_nan, base, wasm_i32x4_eq(exp, wasm_i32x4_splat(0x0f800000)));
    r = wasm_v128_bitselect(tiny, r, wasm_i32x4_eq(exp, wasm_i32x4_splat(0)));
    return wasm_v128_or(r, wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16));
}

/* f32_to_f16's fast path on four floats (as u32 lanes holding the halves); *ok is cleared
 * when a lane needs its slow path (subnormal, overflow, inf, NaN) */
static inline v128_t f32x4_to_f16x4(v128_t f, int *ok) {
    v128_t a = wasm_v128_and(f, wasm_i32x4_splat(0x7fffffff));
    v128_t sign = wasm_v128_and(wasm_u32x4_shr(f, 16), wasm_i32x4_splat(0x8000));
    v128_t zero = wasm_i32x4_eq(a, wasm_i32x4_splat(0));
    v128_t normal = wasm_v128_and(wasm_u32x4_ge(a, wasm_i32x4_splat(0x38800000)),
                                  wasm_u32x4_lt(a, wasm_i32x4_splat(0x477ff000)));
    *ok &= wasm_i32x4_all_true(wasm_v128_or(normal, zero));
    v128_t odd = wasm_v128_and(wasm_u32x4_shr(a, 13), wasm_i32x4_splat(1));
    v128_t v = wasm_i32x4_add(wasm_i32x4_sub(a, wasm_i32x4_splat(112 << 23)),
                              wasm_i32x4_add(wasm_i32x4_splat(0xfff), odd));
    v = wasm_v128_andnot(wasm_u32x4_shr(v, 13), zero);
    return wasm_v128_or(v, sign);
}

/* n elements from type `from` to type `to`, float8 targets as `flags` say; returns -1 for a
 * type it does not know. */
EXPORT i32 er_cast(const void *src, void *dst, i32 n, i32 from, i32 to, i32 flags) {
    if (!known_type(from) || !known_type(to)) return -1;
    if (flags && (small_float(to) || to == T_F8E8M0)) {
        for (i32 i = 0; i < n; i++) {
            double v = is_float_type(from) ? load_float(src, i, from)
                     : from == T_U64 ? (double)((const uint64_t *)src)[i]
                     : (double)load_int(src, i, from);
            cast_narrow(dst, i, to, v, flags);
        }
    } else if (from == T_F32 && to == T_F32) {
        __builtin_memcpy(dst, src, (size_t)n * 4);
    } else if (from == T_F16 && to == T_F32) {        /* float16 models: every widened op */
        const uint16_t *s = src;
        float *d = dst;
        i32 i = 0;
        for (; i + 8 <= n; i += 8) {
            v128_t h = wasm_v128_load(s + i);
            wasm_v128_store(d + i, f16x4_to_f32x4(wasm_u32x4_extend_low_u16x8(h)));
            wasm_v128_store(d + i + 4, f16x4_to_f32x4(wasm_u32x4_extend_high_u16x8(h)));
        }
        for (; i < n; i++) d[i] = f16_to_f32(s[i]);
    } else if (from == T_F32 && to == T_F16) {
        const float *s = src;
        uint16_t *d = dst;
        i32 i = 0;
        for (; i + 8 <= n; i += 8) {
            int ok = 1;
            v128_t lo = f32x4_to_f16x4(wasm_v128_load(s + i), &ok);
            v128_t hi = f32x4_to_f16x4(wasm_v128_load(s + i + 4), &ok);
            if (ok)
                wasm_v128_store(d + i, wasm_u16x8_narrow_i32x4(lo, hi));
            else
                for (i32 j = i; j < i + 8; j++) d[j] = f32_to_f16(s[j]);
        }
        for (; i < n; i++) d[i] = f32_to_f16(s[i]);
    } else if (from == T_I32 && to == T_F32) {        /* integer products made float */
        const i32 *s = src;
        float *d = dst;
        i32 i = 0;
        for (; i + 4 <= n; i += 4)
            wasm_v128_store(d + i, wasm_f32x4_convert_i32x4(wasm_v128_load(s + i)));
        for (; i < n; i++) d[i] = (float)s[i];
    } else if ((from == T_U8 || from == T_I8) && to == T_F32) {
        const uint8_t *s = src;
        float *d = dst;
        i32 i = 0;
        for (; i + 16 <= n; i += 16) {
            v128_t q[4];
            widen16_to_i32x4(s + i, from, q);
            for (i32 j = 0; j < 4; j++)
                wasm_v128_store(d + i + 4 * j, wasm_f32x4_convert_i32x4(q[j]));
        }
        for (; i < n; i++) d[i] = (float)load8(s, i, from);
    } else if (from == T_BF16 && to == T_F32) {
        const uint16_t *s = src;
        uint32_t *d = dst;
        for (i32 i = 0; i < n; i++) d[i] = (uint32_t)s[i] << 16;
    } else if (is_float_type(from)) {
        for (i32 i = 0; i < n; i++) store_float(dst, i, to, load_float(src, i, from));
    } else if (from == T_U64 && is_float_type(to)) {
        for (i32 i = 0; i < n; i++)
            store_float(dst, i, to, (double)((const uint64_t *)src)[i]);
    } else {
        for (i32 i = 0; i < n; i++) store_int(dst, i, to, load_int(src, i, from));
    }
    return 0;
}

/* dst holds n copies of the elsize-byte element at pattern (ConstantOfShape, Pad, zeros). */
EXPORT void er_fill(unsigned char *dst, const unsigned char *pattern, i32 elsize, i32 n) {
    int zero = 1;
    for (i32 i = 0; i < elsize; i++) zero &= pattern[i] == 0;
    if (zero || elsize == 1) {
        __builtin_memset(dst, pattern[0], (size_t)n * (size_t)elsize);
        return;
    }
    for (i32 i = 0; i < n; i++) copy_element(dst + (size_t)i * elsize, pattern, elsize);
}
