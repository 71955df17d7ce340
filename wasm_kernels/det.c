/* Det: the determinant of each square matrix of a batch, by LU decomposition with partial
 * pivoting (LAPACK getrf's choice of pivot, numpy.linalg.det's method) in double precision,
 * whatever the element type (float32, float64, float16, bfloat16: t).
 */
#include "common.h"
#include "dmath.h"
#include "elemtypes.h"

/* x [batch, n, n] -> y [batch]; scratch: n * n doubles. An empty matrix has determinant 1. */
EXPORT void er_det(const void *x, void *y, double *scratch, i32 t, i32 batch, i32 n) {
    double *a = scratch;
    i32 nn = n * n;
    for (i32 b = 0; b < batch; b++) {
        for (i32 i = 0; i < nn; i++) a[i] = load_float(x, b * nn + i, t);
        double det = 1.0;
        for (i32 col = 0; col < n && det != 0.0; col++) {
            i32 pivot = col;
            for (i32 r = col + 1; r < n; r++)
                if (__builtin_fabs(a[r * n + col]) > __builtin_fabs(a[pivot * n + col])) pivot = r;
            double p = a[pivot * n + col];
            if (p == 0.0) { det = 0.0; break; }
            if (pivot != col) {
                for (i32 k = 0; k < n; k++) {
                    double v = a[col * n + k];
                    a[col * n + k] = a[pivot * n + k];
                    a[pivot * n + k] = v;
                }
                det = -det;
            }
            det *= p;
            for (i32 r = col + 1; r < n; r++) {
                double factor = a[r * n + col] / p;
                if (factor == 0.0) continue;
                for (i32 k = col + 1; k < n; k++) a[r * n + k] -= factor * a[col * n + k];
            }
        }
        store_float(y, b, t, det);
    }
}
