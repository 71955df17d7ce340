/* Recorded programs: a run of kernel calls replayed by ONE call from the host.
 *
 * The host records the kernel calls a graph makes for one set of input shapes (and the
 * bytes it writes, such as er_args), then replays them with er_run_program: a run costs one
 * host->wasm call instead of a few per node. A program is a list of 32-bit words:
 *
 *     header = id | nargs << 8, then nargs argument words
 *
 * where id is 0 for a copy (dst, src, nbytes) or a kernel's position in KERNELS (kernels.h)
 * plus one, and float arguments are stored as their bits. Every address is absolute: the
 * host keeps each block a program touches alive and unused by anything else.
 */
#include "common.h"

EXPORT void er_memcpy(unsigned char *dst, const unsigned char *src, i32 nbytes) {
    __builtin_memcpy(dst, src, (size_t)nbytes);
}

enum {
    OP_COPY = 0,
#define KERNEL_ID(name) OP_##name,
    KERNELS(KERNEL_ID)
#undef KERNEL_ID
    OP_COUNT
};

#define KERNEL_NAME(name) #name " "
static const char NAMES[] = KERNELS(KERNEL_NAME);
#undef KERNEL_NAME

/* The kernels a program may call, space-separated, in id order (from 1). */
EXPORT const char *er_program_kernels(void) { return NAMES; }

static inline float as_f32(uint32_t bits) {
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

#define P(i) ((void *)(uintptr_t)a[i])
#define I(i) ((i32)a[i])
#define F(i) as_f32(a[i])

/* Runs a program; 0 when every call succeeded, else 1 + the word index of the first
 * instruction that failed (a kernel returning an error, or an unknown id). */
EXPORT i32 er_run_program(const uint32_t *words, i32 nwords) {
    const uint32_t *w = words, *end = words + nwords;
    while (w < end) {
        uint32_t id = w[0] & 255u, n = w[0] >> 8;
        const uint32_t *a = w + 1;
        i32 bad = 0;
        switch (id) {
        case OP_COPY: case OP_er_memcpy: er_memcpy(P(0), P(1), I(2)); break;
        case OP_er_fill: er_fill(P(0), P(1), I(2), I(3)); break;
        case OP_er_copy_strided: er_copy_strided(P(0), P(1), I(2), I(3)); break;
        case OP_er_gather: bad = er_gather(P(0), P(1), P(2), I(3), I(4), I(5), I(6), I(7)); break;
        case OP_er_cast: bad = er_cast(P(0), P(1), I(2), I(3), I(4), I(5)); break;
        case OP_er_unary: er_unary(I(0), P(1), P(2), I(3), F(4), F(5)); break;
        case OP_er_binary: er_binary(I(0), P(1), P(2), P(3), I(4)); break;
        case OP_er_binary_i64: er_binary_i64(I(0), P(1), P(2), P(3), I(4)); break;
        case OP_er_compare: er_compare(I(0), I(1), P(2), P(3), P(4), I(5)); break;
        case OP_er_not: er_not(P(0), P(1), I(2)); break;
        case OP_er_where: er_where(P(0), P(1), P(2), P(3), I(4), I(5)); break;
        case OP_er_sgemm:
            er_sgemm(I(0), I(1), I(2), P(3), I(4), I(5), P(6), I(7), I(8), P(9), I(10), I(11));
            break;
        case OP_er_sgemm_batch:
            er_sgemm_batch(I(0), I(1), I(2), I(3), P(4), I(5), I(6), I(7), P(8), I(9), I(10),
                           I(11), P(12), I(13), I(14));
            break;
        case OP_er_conv2d: er_conv2d(P(0), P(1), P(2), P(3), I(4)); break;
        case OP_er_conv2d_int8:
            er_conv2d_int8(P(0), I(1), P(2), P(3), I(4), P(5), I(6), P(7), P(8));
            break;
        case OP_er_depthwise2d: er_depthwise2d(P(0), P(1), P(2), I(3)); break;
        case OP_er_maxpool2d: er_maxpool2d(P(0), P(1)); break;
        case OP_er_avgpool2d: er_avgpool2d(P(0), P(1)); break;
        case OP_er_softmax: er_softmax(P(0), P(1), I(2), I(3), I(4), I(5)); break;
        case OP_er_layer_norm:
            er_layer_norm(P(0), P(1), P(2), P(3), P(4), P(5), I(6), I(7), F(8), I(9));
            break;
        case OP_er_batch_norm:
            er_batch_norm(P(0), P(1), P(2), P(3), P(4), P(5), I(6), I(7), I(8), F(9));
            break;
        case OP_er_lrn: er_lrn(P(0), P(1), I(2), I(3), I(4), I(5), F(6), F(7), F(8)); break;
        case OP_er_reduce: er_reduce(I(0), P(1), P(2), I(3), I(4), I(5)); break;
        case OP_er_argmax: er_argmax(P(0), P(1), I(2), I(3), I(4), I(5), I(6)); break;
        case OP_er_quantize_linear:
            er_quantize_linear(P(0), I(1), P(2), I(3), P(4), I(5), P(6), I(7), I(8), I(9), I(10));
            break;
        case OP_er_reduce_int: er_reduce_int(I(0), I(1), P(2), P(3), I(4), I(5), I(6)); break;
        case OP_er_argmax_int:
            er_argmax_int(I(0), P(1), P(2), I(3), I(4), I(5), I(6), I(7));
            break;
        case OP_er_lstm_cell:
            er_lstm_cell(P(0), I(1), P(2), P(3), P(4), I(5), P(6), I(7), I(8), I(9), F(10));
            break;
        case OP_er_map_unary: er_map_unary(I(0), I(1), P(2), I(3), P(4), I(5), F(6), F(7)); break;
        case OP_er_map_binary: er_map_binary(I(0), I(1), P(2), I(3), P(4), I(5), P(6), I(7)); break;
        case OP_er_attention:
            er_attention(P(0), P(1), P(2), P(3), P(4), P(5), P(6), P(7), F(8), F(9));
            break;
        case OP_er_nll:
            bad = er_nll(P(0), P(1), I(2), P(3), P(4), I(5), I(6), I(7), I(8), I(9), I(10));
            break;
        case OP_er_elements: bad = er_elements(I(0), P(1), P(2), P(3), I(4), I(5), I(6), I(7)); break;
        case OP_er_nd:
            bad = er_nd(I(0), P(1), P(2), P(3), I(4), I(5), I(6), I(7), I(8), I(9), I(10), I(11),
                        I(12));
            break;
        case OP_er_trilu: er_trilu(P(0), P(1), I(2), I(3), I(4), I(5), I(6), I(7)); break;
        case OP_er_cumulative:
            er_cumulative(I(0), I(1), P(2), P(3), I(4), I(5), I(6), I(7), I(8));
            break;
        case OP_er_one_hot: er_one_hot(P(0), P(1), P(2), I(3), I(4), I(5), I(6)); break;
        case OP_er_top_k:
            er_top_k(P(0), P(1), P(2), I(3), I(4), I(5), I(6), I(7), I(8), I(9), P(10));
            break;
        case OP_er_hardmax: er_hardmax(P(0), P(1), I(2), I(3), I(4)); break;
        case OP_er_resample:
            er_resample(P(0), P(1), I(2), I(3), I(4), I(5), P(6), P(7), I(8), P(9), F(10));
            break;
        case OP_er_fold: er_fold(P(0), P(1)); break;
        case OP_er_igemm:
            er_igemm(I(0), I(1), I(2), P(3), I(4), I(5), I(6), P(7), I(8), P(9), I(10), I(11),
                     I(12), P(13), I(14), P(15), I(16));
            break;
        case OP_er_igemm_packed:
            er_igemm_packed(I(0), I(1), I(2), P(3), I(4), I(5), I(6), P(7), I(8), P(9), P(10),
                            I(11));
            break;
        case OP_er_pool_nd: er_pool_nd(I(0), P(1), P(2), P(3), F(4)); break;
        case OP_er_rnn_step:
            er_rnn_step(I(0), P(1), P(2), P(3), P(4), P(5), I(6), I(7), I(8), I(9), I(10), P(11),
                        F(12), P(13));
            break;
        case OP_er_grid_sample: er_grid_sample(P(0), P(1), P(2), I(3), I(4), I(5)); break;
        case OP_er_rotary: bad = er_rotary(P(0), P(1), P(2), P(3), P(4)); break;
        case OP_er_dft:
            er_dft(P(0), P(1), P(2), I(3), I(4), I(5), I(6), I(7), I(8), I(9), I(10));
            break;
        case OP_er_stft:
            er_stft(P(0), P(1), P(2), P(3), I(4), I(5), I(6), I(7), I(8), I(9), I(10), I(11),
                    I(12));
            break;
        case OP_er_roi_align:
            bad = er_roi_align(P(0), P(1), P(2), P(3), P(4), I(5), I(6), I(7), F(8), I(9));
            break;
        case OP_er_det: er_det(P(0), P(1), P(2), I(3), I(4), I(5)); break;
        case OP_er_scale_int32:
            er_scale_int32(P(0), P(1), I(2), I(3), P(4), P(5), I(6), P(7), I(8));
            break;
        case OP_er_dequantize_linear:
            er_dequantize_linear(P(0), I(1), P(2), P(3), I(4), P(5), I(6));
            break;
        case OP_er_dynamic_quantize: er_dynamic_quantize(P(0), I(1), P(2), P(3), P(4)); break;
        default: bad = 1;
        }
        if (bad) return (i32)(w - words) + 1;
        w = a + n;
    }
    return 0;
}
