/* DFT and STFT: discrete Fourier transforms of any length, in double precision.
 *
 * A transform of n points runs as one radix-2 FFT when n is a power of two, else as
 * Bluestein's chirp-z: the n-point DFT written as a convolution with a chirp, computed by
 * radix-2 FFTs of m >= 2n - 1 points (a power of two). So every length costs O(m log m),
 * primes included. Inverse transforms conjugate in and out of the forward one and scale by
 * 1/n, as numpy's ifft does.
 *
 * Complex values are (real, imaginary) pairs of doubles. Tensors hold real signals as
 * [..., 1] and complex ones as [..., 2], of float32, float64, float16 or bfloat16 (t, the
 * ONNX element type), read and written through elemtypes.h.
 *
 * The host passes scratch of fft_scratch_doubles(n) doubles (ops/spectral.py mirrors it):
 *     twiddles (m/2 pairs) | line (n pairs) [| chirp (n pairs) | filter (m pairs) | work (m pairs)]
 * where the bracketed part is Bluestein's only.
 */
#include "common.h"
#include "dmath.h"
#include "elemtypes.h"

typedef struct {
    i32 n, m;           /* points, and the radix-2 size that computes them */
    double *twiddle;    /* e^(-2 pi i k / m) for k < m/2 */
    double *line;       /* the n values transformed in place */
    double *chirp;      /* Bluestein: e^(-pi i k^2 / n) for k < n */
    double *filter;     /* Bluestein: the FFT of the conjugate chirp, wrapped around m */
    double *work;       /* Bluestein: m values */
} Plan;

static int is_pow2(i32 n) { return (n & (n - 1)) == 0; }

/* In-place forward FFT of m (a power of two) pairs: bit reversal, then butterflies. */
static void fft_pow2(double *a, i32 m, const double *twiddle) {
    for (i32 i = 1, j = 0; i < m; i++) {
        i32 bit = m >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) {
            double re = a[2 * i], im = a[2 * i + 1];
            a[2 * i] = a[2 * j]; a[2 * i + 1] = a[2 * j + 1];
            a[2 * j] = re; a[2 * j + 1] = im;
        }
    }
    for (i32 len = 2; len <= m; len <<= 1) {
        i32 half = len >> 1, step = m / len;
        for (i32 i = 0; i < m; i += len) {
            for (i32 k = 0; k < half; k++) {
                double wr = twiddle[2 * k * step], wi = twiddle[2 * k * step + 1];
                double *u = a + 2 * (i + k), *v = a + 2 * (i + k + half);
                double tr = v[0] * wr - v[1] * wi, ti = v[0] * wi + v[1] * wr;
                v[0] = u[0] - tr; v[1] = u[1] - ti;
                u[0] += tr; u[1] += ti;
            }
        }
    }
}

static void conjugate(double *a, i32 n) {
    for (i32 i = 0; i < n; i++) a[2 * i + 1] = -a[2 * i + 1];
}

/* Lays the plan over `scratch` and fills its tables. */
static Plan plan_fft(i32 n, double *scratch) {
    Plan p;
    p.n = n;
    p.m = n;
    if (!is_pow2(n)) {
        p.m = 1;
        while (p.m < 2 * n - 1) p.m <<= 1;
    }
    i32 m = p.m;
    p.twiddle = scratch;
    p.line = p.twiddle + m;                 /* m/2 pairs */
    p.chirp = p.line + 2 * n;
    p.filter = p.chirp + 2 * n;
    p.work = p.filter + 2 * m;
    for (i32 k = 0; k < m / 2; k++) {
        double angle = 2 * D_PI * k / m;
        p.twiddle[2 * k] = d_cos(angle);
        p.twiddle[2 * k + 1] = -d_sin(angle);
    }
    if (m == n) return p;
    /* the chirp's phase k^2 / n taken modulo 2 (k^2 mod 2n), so large k keep full precision */
    for (i32 k = 0; k < n; k++) {
        double angle = D_PI * (double)(((i64)k * k) % (2 * (i64)n)) / n;
        p.chirp[2 * k] = d_cos(angle);
        p.chirp[2 * k + 1] = -d_sin(angle);
    }
    for (i32 k = 0; k < 2 * m; k++) p.filter[k] = 0;
    for (i32 k = 0; k < n; k++) {
        p.filter[2 * k] = p.chirp[2 * k];
        p.filter[2 * k + 1] = -p.chirp[2 * k + 1];
        if (k) {
            p.filter[2 * (m - k)] = p.chirp[2 * k];
            p.filter[2 * (m - k) + 1] = -p.chirp[2 * k + 1];
        }
    }
    fft_pow2(p.filter, m, p.twiddle);
    return p;
}

/* X[k] = c[k] sum_j (x[j] c[j]) conj(c[k - j]) with c[j] = e^(-pi i j^2 / n): the
 * convolution through m-point FFTs, its inverse as a conjugated forward FFT. */
static void bluestein(const Plan *p) {
    i32 n = p->n, m = p->m;
    double *w = p->work, *x = p->line;
    const double *c = p->chirp, *f = p->filter;
    for (i32 k = 0; k < n; k++) {
        w[2 * k] = x[2 * k] * c[2 * k] - x[2 * k + 1] * c[2 * k + 1];
        w[2 * k + 1] = x[2 * k] * c[2 * k + 1] + x[2 * k + 1] * c[2 * k];
    }
    for (i32 k = 2 * n; k < 2 * m; k++) w[k] = 0;
    fft_pow2(w, m, p->twiddle);
    for (i32 k = 0; k < m; k++) {          /* conj(W F), ready for the forward FFT */
        double re = w[2 * k] * f[2 * k] - w[2 * k + 1] * f[2 * k + 1];
        double im = w[2 * k] * f[2 * k + 1] + w[2 * k + 1] * f[2 * k];
        w[2 * k] = re;
        w[2 * k + 1] = -im;
    }
    fft_pow2(w, m, p->twiddle);
    double scale = 1.0 / m;
    for (i32 k = 0; k < n; k++) {          /* conj(w) / m times the chirp */
        double re = w[2 * k] * scale, im = -w[2 * k + 1] * scale;
        x[2 * k] = re * c[2 * k] - im * c[2 * k + 1];
        x[2 * k + 1] = re * c[2 * k + 1] + im * c[2 * k];
    }
}

/* The plan's line transformed in place: forward, or inverse (scaled by 1/n). */
static void transform(const Plan *p, int inverse) {
    if (inverse) conjugate(p->line, p->n);
    if (p->m == p->n) fft_pow2(p->line, p->n, p->twiddle);
    else bluestein(p);
    if (inverse) {
        double scale = 1.0 / p->n;
        for (i32 k = 0; k < p->n; k++) {
            p->line[2 * k] *= scale;
            p->line[2 * k + 1] *= -scale;
        }
    }
}

/* DFT along one axis of x viewed as [outer, n_in, inner, channels] (channels 1: real,
 * 2: complex), `length` points (the signal cut or zero-padded to it). y is
 * [outer, out_n, inner, 2] with out_n = length, or length / 2 + 1 (one-sided).
 * mode 1: inverse. mode 3: inverse of a one-sided spectrum (numpy's irfft): the first
 * length / 2 + 1 values extended by Hermitian symmetry, the imaginary parts of the
 * zero-frequency (and, for even lengths, Nyquist) terms dropped; y is then
 * [outer, length, inner, 1], the real signal. */
EXPORT void er_dft(const void *x, void *y, double *scratch, i32 t, i32 outer, i32 n_in,
                   i32 inner, i32 channels, i32 length, i32 out_n, i32 mode) {
    Plan p = plan_fft(length, scratch);
    int inverse = mode & 1, real_out = (mode & 2) != 0;
    i32 given = real_out ? min_i32(n_in, length / 2 + 1) : min_i32(n_in, length);
    i32 out_channels = real_out ? 1 : 2;
    double *line = p.line;
    for (i32 o = 0; o < outer; o++) {
        for (i32 i = 0; i < inner; i++) {
            i64 base = (i64)o * n_in * inner + i;
            for (i32 j = 0; j < given; j++) {
                i64 at = (base + (i64)j * inner) * channels;
                line[2 * j] = load_float(x, (i32)at, t);
                line[2 * j + 1] = channels == 2 ? load_float(x, (i32)at + 1, t) : 0.0;
            }
            for (i32 j = given; j < length; j++) line[2 * j] = line[2 * j + 1] = 0;
            if (real_out) {
                line[1] = 0;
                if (length % 2 == 0 && length / 2 < given) line[length + 1] = 0;
                for (i32 j = 1; length - j >= length / 2 + 1; j++) {
                    line[2 * (length - j)] = line[2 * j];
                    line[2 * (length - j) + 1] = -line[2 * j + 1];
                }
            }
            transform(&p, inverse);
            i64 out_base = (i64)o * out_n * inner + i;
            for (i32 k = 0; k < out_n; k++) {
                i64 at = (out_base + (i64)k * inner) * out_channels;
                store_float(y, (i32)at, t, line[2 * k]);
                if (!real_out) store_float(y, (i32)at + 1, t, line[2 * k + 1]);
            }
        }
    }
}

/* STFT: x [batch, n, channels] cut into `frames` frames of `size` samples every `step`,
 * each times the window (tw: its element type; 0 for none), transformed; y
 * [batch, frames, bins, 2] keeps the first `bins` frequencies (size, or size / 2 + 1 when
 * one-sided). */
EXPORT void er_stft(const void *x, const void *window, void *y, double *scratch, i32 t,
                    i32 tw, i32 batch, i32 n, i32 channels, i32 frames, i32 step, i32 size,
                    i32 bins) {
    Plan p = plan_fft(size, scratch);
    double *line = p.line;
    for (i32 b = 0; b < batch; b++) {
        for (i32 f = 0; f < frames; f++) {
            i64 start = (i64)b * n + (i64)f * step;
            for (i32 j = 0; j < size; j++) {
                i32 at = (i32)((start + j) * channels);
                double w = window ? load_float(window, j, tw) : 1.0;
                line[2 * j] = load_float(x, at, t) * w;
                line[2 * j + 1] = channels == 2 ? load_float(x, at + 1, t) * w : 0.0;
            }
            transform(&p, 0);
            i64 out = ((i64)b * frames + f) * bins * 2;
            for (i32 k = 0; k < bins; k++) {
                store_float(y, (i32)(out + 2 * k), t, line[2 * k]);
                store_float(y, (i32)(out + 2 * k + 1), t, line[2 * k + 1]);
            }
        }
    }
}
