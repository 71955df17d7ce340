/* Every kernel the host calls, declared once: common.h includes this file, so each kernel's
 * definition is checked against its declaration, and program.c can call them all.
 *
 * KERNELS is the list a recorded program (program.c) may call; a kernel's program id is its
 * position in the list plus one (0 is the program's copy instruction). The host reads the
 * list back from the module (er_program_kernels), so the ids live only here.
 */
#ifndef EDGERUN_KERNELS_H
#define EDGERUN_KERNELS_H

#define KERNELS(X) \
    X(er_memcpy) X(er_fill) X(er_copy_strided) X(er_gather) X(er_cast) \
    X(er_unary) X(er_binary) X(er_binary_i64) X(er_compare) X(er_not) X(er_where) \
    X(er_sgemm) X(er_sgemm_batch) X(er_conv2d) X(er_depthwise2d) \
    X(er_maxpool2d) X(er_avgpool2d) X(er_softmax) X(er_layer_norm) X(er_batch_norm) \
    X(er_lrn) X(er_reduce) X(er_argmax) X(er_lstm_cell) X(er_map_unary) X(er_map_binary) \
    X(er_attention) X(er_nll) X(er_elements) X(er_nd) X(er_trilu) X(er_cumulative) \
    X(er_one_hot) X(er_top_k) X(er_hardmax) X(er_resample) \
    X(er_fold) X(er_igemm) X(er_pool_nd) X(er_rnn_step) \
    X(er_grid_sample) X(er_rotary) X(er_reduce_int) X(er_argmax_int) X(er_quantize_linear) \
    X(er_dft) X(er_stft) X(er_roi_align) X(er_det) X(er_conv2d_int8) X(er_scale_int32) \
    X(er_dynamic_quantize) X(er_igemm_packed) X(er_dequantize_linear)

void er_memcpy(unsigned char *dst, const unsigned char *src, i32 nbytes);
void er_fill(unsigned char *dst, const unsigned char *pattern, i32 elsize, i32 n);
void er_copy_strided(unsigned char *dst, const unsigned char *src, i32 elsize, i32 rank);
i32 er_gather(unsigned char *dst, const unsigned char *src, const void *indices, i32 idx64,
              i32 nidx, i32 outer, i32 axis_dim, i32 inner_bytes);
i32 er_cast(const void *src, void *dst, i32 n, i32 from, i32 to, i32 flags);
void er_unary(i32 op, const float *x, float *y, i32 n, float p0, float p1);
void er_binary(i32 op, const float *a, const float *b, float *y, i32 rank);
void er_map_unary(i32 op, i32 tx, const void *x, i32 ty, void *y, i32 n, float p0, float p1);
void er_map_binary(i32 op, i32 ta, const void *a, i32 tb, const void *b, i32 ty, void *y,
                   i32 rank);
void er_attention(const float *q, const float *k, const float *v, const void *mask,
                  const i64 *valid_keys, float *y, float *qk, float *row, float scale,
                  float softcap);
i32 er_nll(const float *x, const void *target, i32 t64, const float *weight, float *loss,
           i32 N, i32 C, i32 D, i32 has_ignore, i32 ignore, i32 reduction);
i32 er_elements(i32 scatter, unsigned char *dst, const unsigned char *src, const void *indices,
                i32 idx64, i32 t, i32 size, i32 reduction);
i32 er_nd(i32 scatter, unsigned char *dst, const unsigned char *src, const void *indices,
          i32 idx64, i32 batches, i32 per_batch, i32 k, i32 slice_elems, i32 batch_elems,
          i32 t, i32 size, i32 reduction);
void er_trilu(unsigned char *dst, const unsigned char *src, i32 size, i32 batch, i32 rows,
              i32 cols, i32 k, i32 upper);
void er_cumulative(i32 prod, i32 t, const void *x, void *y, i32 outer, i32 n, i32 inner,
                   i32 exclusive, i32 reverse);
void er_one_hot(unsigned char *dst, const i64 *indices, const unsigned char *on, i32 size,
                i32 outer, i32 depth, i32 inner);
void er_top_k(const unsigned char *x, unsigned char *values, i64 *indices, i32 t, i32 size,
              i32 outer, i32 n, i32 inner, i32 k, i32 largest, unsigned char *scratch);
void er_hardmax(const float *x, float *y, i32 outer, i32 n, i32 inner);
void er_resample(const float *x, float *y, i32 outer, i32 in_n, i32 inner, i32 out_n,
                 const i32 *index, const float *weight, i32 taps, const uint8_t *outside,
                 float fill);
void er_fold(const float *col, float *y);
void er_quantize_linear(const void *x, i32 tx, const void *scale, i32 ts,
                        const void *zero_point, i32 tzp, void *y, i32 ty, i32 n, i32 low,
                        i32 high);
void er_igemm(i32 M, i32 N, i32 K, const void *A, i32 ta, i32 rsa, i32 csa, const void *a_zp,
              i32 a_zp_per_row, const void *B, i32 tb, i32 rsb, i32 csb, const void *b_zp,
              i32 b_zp_per_col, i32 *C, i32 ldc);
void er_igemm_packed(i32 M, i32 N, i32 K, const void *A, i32 ta, i32 rsa, i32 csa,
                     const void *a_zp, i32 a_zp_per_row, const int16_t *packed, i32 *C,
                     i32 ldc);
void er_dynamic_quantize(const float *x, i32 n, uint8_t *y, float *scale,
                         uint8_t *zero_point);
void er_dequantize_linear(const void *x, i32 tx, const float *scale, const void *zero_point,
                          i32 tzp, float *y, i32 n);
void er_scale_int32(const i32 *acc, float *y, i32 rows, i32 cols, const float *a_scale,
                    const float *b_scale, i32 scale_per_col, const float *bias,
                    i32 bias_per_col);
void er_conv2d_int8(const uint8_t *x, i32 tx, const void *x_zp, const uint8_t *w, i32 tw,
                    const void *w_zp, i32 w_zp_per_channel, i32 *y, uint8_t *col);
void er_pool_nd(i32 mode, const float *x, float *y, i64 *indices, float p);
void er_rnn_step(i32 gru, const float *gates, const float *h_prev, const float *R,
                 const float *rbh, float *h_out, i32 batch, i32 hidden,
                 i32 linear_before_reset, i32 f, i32 g, const float *params, float clip,
                 float *scratch);
/* not callable from programs: its result (a count) sets the output's shape */
i32 er_nms(const float *boxes, const float *scores, i64 *out, i32 B, i32 C, i32 N, i32 max_out,
           float iou_threshold, i32 has_score_threshold, float score_threshold, i32 center,
           unsigned char *scratch);
void er_grid_sample(const float *x, const float *grid, float *y, i32 mode, i32 padding,
                    i32 align);
i32 er_rotary(const float *x, const float *cos_cache, const float *sin_cache,
              const i64 *positions, float *y);
void er_binary_i64(i32 op, const i64 *a, const i64 *b, i64 *y, i32 rank);
void er_compare(i32 op, i32 type, const void *a, const void *b, uint8_t *y, i32 rank);
void er_not(const uint8_t *x, uint8_t *y, i32 n);
void er_where(const uint8_t *cond, const unsigned char *a, const unsigned char *b,
              unsigned char *y, i32 elsize, i32 rank);
void er_sgemm(i32 M, i32 N, i32 K, const float *A, i32 rsa, i32 csa, const float *B,
              i32 rsb, i32 csb, float *C, i32 ldc, i32 accumulate);
void er_sgemm_batch(i32 batch, i32 M, i32 N, i32 K, const float *A, i32 rsa, i32 csa,
                    i32 bsa, const float *B, i32 rsb, i32 csb, i32 bsb, float *C, i32 bsc,
                    i32 accumulate);
void er_conv2d(const float *x, const float *w, float *y, float *col, i32 accumulate);
void er_depthwise2d(const float *x, const float *w, float *y, i32 accumulate);
void er_maxpool2d(const float *x, float *y);
void er_avgpool2d(const float *x, float *y);
void er_softmax(const float *x, float *y, i32 outer, i32 n, i32 inner, i32 log_out);
void er_layer_norm(const float *x, const float *scale, const float *bias, float *y,
                   float *mean_out, float *inv_out, i32 rows, i32 n, float eps, i32 rms);
void er_batch_norm(const float *x, const float *scale, const float *bias,
                   const float *mean, const float *var, float *y, i32 n, i32 c,
                   i32 inner, float eps);
void er_lrn(const float *x, float *y, i32 n, i32 c, i32 hw, i32 size, float alpha,
            float beta, float bias);
void er_reduce(i32 op, const float *x, float *y, i32 outer, i32 r, i32 inner);
void er_reduce_int(i32 op, i32 t, const void *x, void *y, i32 outer, i32 r, i32 inner);
void er_argmax_int(i32 t, const void *x, i64 *y, i32 outer, i32 r, i32 inner, i32 is_min,
                   i32 select_last);
void er_argmax(const float *x, i64 *y, i32 outer, i32 r, i32 inner, i32 is_min,
               i32 select_last);
void er_lstm_cell(const float *gates, i32 ldg, const float *c_prev, const float *peep,
                  float *c, i32 ldc, float *h, i32 ldh, i32 batch, i32 hidden, float clip);
/* signal and detection kernels (fft.c, roi_align.c, det.c) */
void er_dft(const void *x, void *y, double *scratch, i32 t, i32 outer, i32 n_in, i32 inner,
            i32 channels, i32 length, i32 out_n, i32 mode);
void er_stft(const void *x, const void *window, void *y, double *scratch, i32 t, i32 tw,
             i32 batch, i32 n, i32 channels, i32 frames, i32 step, i32 size, i32 bins);
i32 er_roi_align(const void *x, const void *rois, const i64 *batch_index, void *y,
                 double *acc, i32 t, i32 tr, i32 sampling_ratio, float spatial_scale,
                 i32 flags);
void er_det(const void *x, void *y, double *scratch, i32 t, i32 batch, i32 n);

#endif
