/* Rows of bytes moved by the 8-bit kernels (qconv.c's frames and im2col, conv.c's 8-bit
 * pools): short runs (tens of bytes), where a call to memcpy or memset costs more than the
 * copy, and the stride-2 split of a row. */
#ifndef EDGERUN_CPU_BYTE_ROWS_H
#define EDGERUN_CPU_BYTE_ROWS_H

#include <stdint.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#ifdef __SSE2__
/* dst[i] = src[2 i], i < 16 (reads src[0] .. src[31]). */
static inline void every_other_16(const uint8_t *src, uint8_t *dst) {
    const __m128i low_bytes = _mm_set1_epi16(0x00FF);
    __m128i a = _mm_and_si128(_mm_loadu_si128((const __m128i *)src), low_bytes);
    __m128i b = _mm_and_si128(_mm_loadu_si128((const __m128i *)(src + 16)), low_bytes);
    _mm_storeu_si128((__m128i *)dst, _mm_packus_epi16(a, b));
}
#endif

/* dst[i] = src[2 i], i < n: a stride-2 tap's columns (a quarter of YOLOX's convolution
 * time went to a byte loop here). Reads stop before src[2 n - 1]. */
static inline void every_other(const uint8_t *src, int64_t n, uint8_t *dst) {
    int64_t i = 0;
#ifdef __SSE2__
    for (; i + 16 < n; i += 16) every_other_16(src + 2 * i, dst + i);
#endif
    for (; i < n; i++) dst[i] = src[2 * i];
}

/* memcpy and memset of the few bytes a span of columns has (tens: a call each cost more). */
static inline void copy_bytes(uint8_t *dst, const uint8_t *src, int64_t n) {
#ifdef __SSE2__
    if (n >= 16) {
        int64_t i = 0;
        for (; i + 16 <= n; i += 16)
            _mm_storeu_si128((__m128i *)(dst + i), _mm_loadu_si128((const __m128i *)(src + i)));
        if (i < n)
            _mm_storeu_si128((__m128i *)(dst + n - 16), _mm_loadu_si128((const __m128i *)(src + n - 16)));
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
}

static inline void fill_bytes(uint8_t *dst, uint8_t value, int64_t n) {
#ifdef __SSE2__
    if (n >= 16) {
        __m128i v = _mm_set1_epi8((char)value);
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) _mm_storeu_si128((__m128i *)(dst + i), v);
        if (i < n) _mm_storeu_si128((__m128i *)(dst + n - 16), v);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) dst[i] = value;
}

#endif
