/* Integer convolutions for the CPU provider (ConvInteger, QLinearConv): every image's and
 * group's product of the packed weights and its columns on qgemm.c's kernels, in one call.
 * The columns are packed a chunk of output positions at a time, a chunk small enough to
 * stay in the cache between its packing and its products. They are read where they lie:
 * x's own rows for a pointwise conv; for a unit-stride window, shifted views of the image
 * copied once into a frame padded with x's zero point (the frame's extra columns computed
 * and dropped); for a strided one, im2col of each chunk. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "isa.h"
#include "byte_rows.h"
#include "qgemm.h"

/* Output positions [p0, p1) of tap (i, j) of channel image `src` [in_h, in_w], row by row:
 * `pad` where the tap falls outside the image. d: in_h, in_w, out_h, out_w, kh, kw, sh, sw,
 * dh, dw, pt, pl. */
static void tap_range(const uint8_t *src, const int64_t *d, int64_t i, int64_t j, uint8_t pad,
                      int64_t p0, int64_t p1, uint8_t *dst) {
    int64_t in_h = d[0], in_w = d[1], out_w = d[3];
    int64_t sh = d[6], sw = d[7], dh = d[8], dw = d[9], pt = d[10], pl = d[11];
    int64_t offset = j * dw - pl;                 /* input column of output column 0 */
    /* output columns whose input column is inside: inside_lo <= ow < inside_hi */
    int64_t inside_lo = offset >= 0 ? 0 : (-offset + sw - 1) / sw;
    int64_t inside_hi = in_w - offset <= 0 ? 0 : (in_w - offset + sw - 1) / sw;
    int64_t oh = p0 / out_w, c0 = p0 % out_w;
    while (p0 < p1) {
        int64_t c1 = c0 + (p1 - p0) < out_w ? c0 + (p1 - p0) : out_w;
        int64_t ih = oh * sh + i * dh - pt;
        if (ih < 0 || ih >= in_h) {
            fill_bytes(dst, pad, c1 - c0);
        } else {
            /* c0 <= lo <= hi <= c1 (a span wholly in the padding has lo == hi) */
            int64_t lo = inside_lo < c0 ? c0 : (inside_lo > c1 ? c1 : inside_lo);
            int64_t hi = inside_hi < lo ? lo : (inside_hi > c1 ? c1 : inside_hi);
            const uint8_t *line = src + ih * in_w + offset;
            fill_bytes(dst, pad, lo - c0);
            if (sw == 1) copy_bytes(dst + lo - c0, line + lo, hi - lo);
            else if (sw == 2) every_other(line + 2 * lo, hi - lo, dst + lo - c0);
            else for (int64_t ow = lo; ow < hi; ow++) dst[ow - c0] = line[ow * sw];
            fill_bytes(dst + hi - c0, pad, c1 - hi);
        }
        dst += c1 - c0;
        p0 += c1 - c0;
        oh++;
        c0 = 0;
    }
}

/* The packed weights of a convolution (er_cpu_qgemm_pack_a's rows [groups * mg, k], their
 * sums, the zero point: one value or one a row). */
typedef struct {
    const uint8_t *packed;
    const int32_t *rowsum;
    int64_t mg, k, a_signed;
    const int32_t *za;
    int64_t za_count, groups;
} ConvWeights;

#define CHUNK_BYTES (512 * 1024)  /* a chunk's columns: in L2 from packing to products */

/* How a convolution's columns are read: straight from x (a pointwise conv), from the image
 * copied into a padded frame where every tap of a unit-stride window is a shifted view
 * (rows of the frame's width, the columns past out_w computed and dropped), or from im2col
 * of each chunk (strided windows). */
enum { FROM_X, FROM_FRAME, FROM_IM2COL };

typedef struct {
    int source;
    int64_t k, taps, kw, plane, positions;   /* positions: of the chunks (frame width rows) */
    int64_t frame_h, frame_w, out_w;         /* FROM_FRAME */
    const int64_t *dims;
    const uint8_t *frames;                   /* FROM_FRAME: images x channels x frame */
    uint8_t *cols;                           /* FROM_IM2COL: k x chunk */
} Columns;

/* The frame of a unit-stride window: the output rows and columns plus the window's reach. */
static void frame_size(const int64_t *d, int64_t *frame_h, int64_t *frame_w) {
    *frame_h = d[2] + (d[4] - 1) * d[8];
    *frame_w = d[3] + (d[5] - 1) * d[9];
}

/* Bytes of the frames er_cpu_qconv reads for a unit-stride window (dims as er_cpu_qconv's),
 * or 0 where it reads none (strided windows: im2col). */
EXPORT int64_t er_cpu_qconv_frames_size(const int64_t *dims, int64_t images, int64_t channels) {
    if (dims[6] != 1 || dims[7] != 1) return 0;
    int64_t fh, fw;
    frame_size(dims, &fh, &fw);
    return images * channels * fh * fw;
}

/* Every image of x [images, channels, in_h, in_w] copied into its frame at (pt, pl), the
 * rest the zero point. */
EXPORT void er_cpu_qconv_fill_frames(const uint8_t *x, int64_t images, int64_t channels,
                                     const int64_t *d, int32_t zx, uint8_t *frames) {
    int64_t in_h = d[0], in_w = d[1], pt = d[10], pl = d[11], fh, fw;
    frame_size(d, &fh, &fw);
    int64_t rows = in_h < fh - pt ? in_h : fh - pt, cols = in_w < fw - pl ? in_w : fw - pl;
    fill_bytes(frames, (uint8_t)zx, images * channels * fh * fw);
    for (int64_t c = 0; c < images * channels; c++)
        for (int64_t r = 0; r < rows; r++)
            copy_bytes(frames + (c * fh + r + pt) * fw + pl, x + (c * in_h + r) * in_w, cols);
}

/* Row r of group g's columns: its channel c of the image, its tap (i, j) of the window. */
static void row_source(const Columns *cs, int64_t g, int64_t r, int64_t *c, int64_t *i,
                       int64_t *j) {
    int64_t t = r % cs->taps;
    *c = g * (cs->k / cs->taps) + r / cs->taps;
    *i = t / cs->kw;
    *j = t % cs->kw;
}

/* The k row pointers of group g's columns, FROM_X or FROM_FRAME (im2col_chunk sets its own). */
static void column_rows(const Columns *cs, const uint8_t *img, const uint8_t *frame, int64_t g,
                        const uint8_t **rows) {
    for (int64_t r = 0; r < cs->k; r++) {
        int64_t c, i, j;
        row_source(cs, g, r, &c, &i, &j);
        if (cs->source == FROM_X)
            rows[r] = img + c * cs->plane;
        else
            rows[r] = frame + c * cs->frame_h * cs->frame_w + i * cs->dims[8] * cs->frame_w +
                      j * cs->dims[9];
    }
}

/* im2col of group g's columns for positions [p0, p0 + n) into the chunk buffer. */
static void im2col_chunk(const Columns *cs, const uint8_t *img, int64_t g, uint8_t pad,
                         int64_t p0, int64_t n, const uint8_t **rows) {
    for (int64_t r = 0; r < cs->k; r++) {
        int64_t c, i, j;
        row_source(cs, g, r, &c, &i, &j);
        tap_range(img + c * cs->plane, cs->dims, i, j, pad, p0, p0 + n, cs->cols + r * n);
        rows[r] = cs->cols + r * n - p0;         /* read at offset p0 */
    }
}

/* Frame-width results [rows][n] (element size `size`) of positions [p0, p0 + n) into out
 * [rows][out_h * out_w], the columns past out_w dropped. */
static void drop_frame_columns(const Columns *cs, const uint8_t *tmp, int64_t rows, int64_t p0,
                               int64_t n, int64_t size, uint8_t *out, int64_t out_positions) {
    for (int64_t m = 0; m < rows; m++) {
        const uint8_t *src = tmp + m * n * size;
        uint8_t *dst = out + m * out_positions * size;
        int64_t p = p0;
        while (p < p0 + n) {
            int64_t oh = p / cs->frame_w, ow = p % cs->frame_w;
            int64_t run = cs->frame_w - ow < p0 + n - p ? cs->frame_w - ow : p0 + n - p;
            int64_t valid = ow < cs->out_w ? (cs->out_w - ow < run ? cs->out_w - ow : run) : 0;
            copy_bytes(dst + (oh * cs->out_w + ow) * size, src + (p - p0) * size, valid * size);
            p += run;
        }
    }
}

/* A convolution's int32 sums (rq NULL) or 8-bit outputs of `images` 8-bit images x
 * [groups * k / (kh * kw), in_h, in_w] (C-contiguous; signed: int8, zero point zx), into
 * out [images][groups * mg][out_h * out_w]. dims: in_h, in_w, out_h, out_w, kh, kw, sh, sw,
 * dh, dw, pt, pl (a 1-D window as the rows of a 1-high image), or NULL for a pointwise conv
 * whose columns are x's own rows ([k] rows of `positions`, per group). A unit-stride window
 * reads `frames` (er_cpu_qconv_fill_frames'), a strided one im2col's chunks.
 * The work (every image's, group's and chunk's product) is cut into `parts` near-equal
 * runs of chunks; this call does run `part` (threads run the others at once).
 * Returns as er_cpu_qgemm_packed does. */
EXPORT int er_cpu_qconv(const ConvWeights *w, const uint8_t *x, int64_t images,
                        const int64_t *dims, int64_t positions, int x_signed, int32_t zx,
                        const Requant *rq, const uint8_t *frames, int64_t part, int64_t parts,
                        void *out) {
    int64_t k = w->k, mg = w->mg, groups = w->groups, size = rq ? 1 : 4;
    Columns cs = {FROM_X, k, dims ? dims[4] * dims[5] : 1, dims ? dims[5] : 1,
                  dims ? dims[0] * dims[1] : positions, positions, 0, 0, 0, dims, NULL, NULL};
    if (dims && frames) {
        cs.source = FROM_FRAME;
        cs.out_w = dims[3];
        frame_size(dims, &cs.frame_h, &cs.frame_w);
        cs.positions = (dims[2] - 1) * cs.frame_w + dims[3];
        cs.frames = frames;
    } else if (dims) {
        cs.source = FROM_IM2COL;
    }
    int64_t channels = groups * k / cs.taps;
    int64_t chunk = CHUNK_BYTES / (k > 0 ? k : 1) / 32 * 32;
    if (chunk < 32) chunk = 32;
    if (chunk > cs.positions) chunk = cs.positions;
    int64_t chunks = chunk ? (cs.positions + chunk - 1) / chunk : 0;
    int64_t tasks = images * groups * chunks;
    int64_t first = tasks * part / parts, last = tasks * (part + 1) / parts;
    if (cs.source == FROM_IM2COL)
        cs.cols = malloc((size_t)(k * chunk + 1));
    uint8_t *tmp = cs.source == FROM_FRAME ? malloc((size_t)(mg * chunk * size + 1)) : NULL;
    const uint8_t **rows = malloc((size_t)(k ? k : 1) * sizeof(*rows));
    int8_t *packed = malloc((size_t)er_cpu_qgemm_packed_size(k, chunk) + 1);
    int32_t *colsum = malloc((size_t)(chunk ? chunk : 1) * sizeof(int32_t));
    int status = packed && colsum && rows && (tmp || cs.source != FROM_FRAME) &&
                 (cs.cols || cs.source != FROM_IM2COL) ? 0 : -1;
    int64_t width = (k + 3) / 4 * 4, bound = -1;   /* the (image, group) rows point into */
    for (int64_t task = first; task < last && !status; task++) {
        int64_t image = task / (groups * chunks), g = task / chunks % groups;
        int64_t p0 = task % chunks * chunk;
        int64_t n = cs.positions - p0 < chunk ? cs.positions - p0 : chunk;
        const uint8_t *img = x + image * channels * cs.plane;
        int64_t m0 = g * mg;
        const int32_t *za = w->za_count > 1 ? w->za + m0 : w->za;
        int64_t za_n = w->za_count > 1 ? mg : w->za_count;
        Requant requant;
        if (rq)
            requant = (Requant){rq->bias ? rq->bias + m0 : NULL, rq->mult + m0, rq->zy, rq->lo,
                                rq->hi};
        uint8_t *dst_group = (uint8_t *)out + (image * groups * mg + m0) * positions * size;
        if (cs.source == FROM_IM2COL) {
            im2col_chunk(&cs, img, g, (uint8_t)zx, p0, n, rows);
        } else if (bound != image * groups + g) {
            column_rows(&cs, img, cs.frames + image * channels * cs.frame_h * cs.frame_w, g,
                        rows);
            bound = image * groups + g;
        }
        er_cpu_qgemm_pack_b_rows(rows, p0, k, n, x_signed, packed, colsum);
        uint8_t *dst = cs.source == FROM_FRAME ? tmp : dst_group + p0 * size;
        int64_t ldc = cs.source == FROM_FRAME ? n : positions;
        const uint8_t *a = w->packed + m0 * width;
        int32_t zb = zx;
        status = rq ? er_cpu_qgemm_packed_requant(a, w->rowsum + m0, mg, k, (int)w->a_signed,
                                                  za, za_n, packed, colsum, n, x_signed, &zb, 1,
                                                  &requant, dst, ldc)
                    : er_cpu_qgemm_packed(a, w->rowsum + m0, mg, k, (int)w->a_signed, za, za_n,
                                          packed, colsum, n, x_signed, &zb, 1, 1.0f, NULL, 0,
                                          NULL, dst, ldc);
        if (!status && cs.source == FROM_FRAME)
            drop_frame_columns(&cs, tmp, mg, p0, n, size, dst_group, positions);
    }
    free(cs.cols); free(tmp); free(rows); free(packed); free(colsum);
    return status;
}

/* er_cpu_qconv's record form for the native pool (pool.c): its arguments as words. */
EXPORT int er_cpu_qconv_record(const uint64_t *a) {
    return er_cpu_qconv(WORD(const ConvWeights *, 0), WORD(const uint8_t *, 1), WORD(int64_t, 2),
                        WORD(const int64_t *, 3), WORD(int64_t, 4), WORD(int, 5),
                        WORD(int32_t, 6), WORD(const Requant *, 7), WORD(const uint8_t *, 8),
                        WORD(int64_t, 9), WORD(int64_t, 10), WORD(void *, 11));
}
