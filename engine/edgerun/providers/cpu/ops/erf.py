"""The error function (numpy has none), and GELU's erf form built on it.

float64: rational approximations of erf/erfc on four ranges of |x| (the classic fdlibm split),
good to double precision, each range evaluated on its masked subset.

float32 and narrower: one odd rational function of x on [-4, 4] (the minimax fit Eigen and
XLA use for float erf; erf(4) rounds to 1 in float32), evaluated in float64 so that its
roundoff stays far below float32's: within 1.6 float32 ulps of the true value (abs error
< 1e-7), with no masks, no exp and no branches. Large arrays are evaluated in blocks whose
float64 temporaries stay in the CPU cache; GELU fuses its own arithmetic into those blocks,
and where the native kernels run (native/elementwise.py) GELU is one pass of the same
arithmetic in C, equal bit for bit.
"""
from __future__ import annotations

import numpy as np

from ..native import elementwise as native
from .clamp import clip_to
from .float_errors import ignored_float_errors

# ---- float64: fdlibm ---------------------------------------------------------------------

_ERF_SMALL_P = (1.28379167095512558561e-01, -3.25042107247001499370e-01,
                -2.84817495755985104766e-02, -5.77027029648944159157e-03,
                -2.37630166566501626084e-05)
_ERF_SMALL_Q = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02,
                5.08130628187576562776e-03, 1.32494738004321644526e-04,
                -3.96022827877536812320e-06)
_ERF_NEAR_ONE = 8.45062911510467529297e-01
_ERF_MID_P = (-2.36211856075265944077e-03, 4.14856118683748331666e-01,
              -3.72207876035701323847e-01, 3.18346619901161753674e-01,
              -1.10894694282396677476e-01, 3.54783043256182359371e-02,
              -2.16637559486879084300e-03)
_ERF_MID_Q = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01,
              7.18286544141962662868e-02, 1.26171219808761642112e-01,
              1.36370839120290507362e-02, 1.19844998467991074170e-02)
_ERFC_A_P = (-9.86494403484714822705e-03, -6.93858572707181764372e-01,
             -1.05586262253232909814e+01, -6.23753324503260060396e+01,
             -1.62396669462573470355e+02, -1.84605092906711035994e+02,
             -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_ERFC_A_Q = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02,
             4.34565877475229228821e+02, 6.45387271733267880336e+02,
             4.29008140027567833386e+02, 1.08635005541779435134e+02,
             6.57024977031928170135e+00, -6.04244152148580987438e-02)
_ERFC_B_P = (-9.86494292470009928597e-03, -7.99283237680523006574e-01,
             -1.77579549177547519889e+01, -1.60636384855821916062e+02,
             -6.37566443368389627722e+02, -1.02509513161107724954e+03,
             -4.83519191608651397019e+02)
_ERFC_B_Q = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02,
             1.53672958608443695994e+03, 3.19985821950859553908e+03,
             2.55305040643316442583e+03, 4.74528541206955367215e+02,
             -2.24409524465858183362e+01)


def _polynomial(coefficients, t: np.ndarray) -> np.ndarray:
    """c0 + c1*t + c2*t^2 + ... by Horner's rule."""
    result = np.full_like(t, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        result *= t
        result += c
    return result


def _erf_double(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    out = np.ones_like(a)                        # |x| >= 6 (and inf): erf is 1 in float64

    small = a < 0.84375
    v = a[small]
    out[small] = v + v * (_polynomial(_ERF_SMALL_P, v * v) / _polynomial(_ERF_SMALL_Q, v * v))

    mid = (a >= 0.84375) & (a < 1.25)
    s = a[mid] - 1.0
    out[mid] = _ERF_NEAR_ONE + _polynomial(_ERF_MID_P, s) / _polynomial(_ERF_MID_Q, s)

    tail_a = (a >= 1.25) & (a < 1 / 0.35)
    tail_b = (a >= 1 / 0.35) & (a < 6.0)
    for mask, p, q in ((tail_a, _ERFC_A_P, _ERFC_A_Q), (tail_b, _ERFC_B_P, _ERFC_B_Q)):
        v = a[mask]
        s = 1.0 / (v * v)
        erfc = np.exp(-v * v - 0.5625 + _polynomial(p, s) / _polynomial(q, s)) / v
        out[mask] = 1.0 - erfc
    out[np.isnan(a)] = np.nan
    return np.copysign(out, x)




# ---- float32 ---------------------------------------------------------------------------------

# erf(x) ~ x * P(x^2) / Q(x^2) on |x| <= 4 (coefficients lowest order first)
_RATIONAL_P = (-1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04,
               -5.69250639462346e-05, -2.10102402082508e-06, 2.77068142495902e-08,
               -2.72614225801306e-10)
_RATIONAL_Q = (-1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03,
               -2.13374055278905e-04, -1.45660718464996e-05)
_RATIONAL_LIMIT = 4.0
_BLOCK = 32768           # elements per block: its four float64 buffers (1 MB) stay in L2
_SQRT_HALF = 0.5 ** 0.5


def erf(x: np.ndarray) -> np.ndarray:
    """The error function of a float array: float64 stays float64, anything else is float32."""
    x = np.asarray(x)
    with ignored_float_errors():
        if x.dtype == np.float64:
            return _erf_double(x)
        return _blockwise(_erf_block, x.astype(np.float32, copy=False))


def gelu_erf(x: np.ndarray) -> np.ndarray:
    """0.5 * x * (1 + erf(x / sqrt(2))) of a float32 array, as a fresh float32 array."""
    if x.dtype == np.float32 and native.available():
        return native.gelu(x, _GELU_P_ARRAY, _GELU_Q_ARRAY, float(np.float32(_GELU_LIMIT)))
    with ignored_float_errors():
        return _blockwise(_gelu_block, x)


def _blockwise(block_fn, x: np.ndarray) -> np.ndarray:
    """A fresh float32 array: block_fn(source, destination, scratch) over blocks of x."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(flat.shape, np.float32)
    scratch = np.empty((4, min(flat.size, _BLOCK)), np.float64)    # reused by every block
    for start in range(0, flat.size, _BLOCK):
        stop = min(start + _BLOCK, flat.size)
        block_fn(flat[start:stop], out[start:stop], scratch[:, :stop - start])
    return out.reshape(x.shape)


def _rational_erf(value, scratch):
    """erf of the float64 values in `value`, computed in place (scratch: 3 buffers)."""
    square, numerator, denominator = scratch
    clip_to(value, -_RATIONAL_LIMIT, _RATIONAL_LIMIT, out=value)    # NaN stays NaN
    np.multiply(value, value, out=square)
    _horner(_RATIONAL_P, square, numerator)
    _horner(_RATIONAL_Q, square, denominator)
    value *= numerator
    np.divide(value, denominator, out=value)
    return value


def _horner(coefficients, t, out):
    """c0 + c1*t + c2*t^2 + ... into out."""
    np.multiply(t, coefficients[-1], out=out)
    out += coefficients[-2]
    for c in reversed(coefficients[:-2]):
        out *= t
        out += c
    return out


def _erf_block(source, destination, scratch):
    value = scratch[0]
    np.copyto(value, source)
    np.copyto(destination, _rational_erf(value, scratch[1:4]), casting="same_kind")


# GELU's fit in x itself: 0.5 * erf(x / sqrt(2)) = x * P'(x^2) / Q'(x^2), with
# P'_k = P_k * 2^-k * 0.5 / sqrt(2) and Q'_k = Q_k * 2^-k (z = x / sqrt(2), z^2 = x^2 / 2)
_GELU_P = tuple(c * 0.5 ** k * 0.5 * _SQRT_HALF for k, c in enumerate(_RATIONAL_P))
_GELU_Q = tuple(c * 0.5 ** k for k, c in enumerate(_RATIONAL_Q))
_GELU_LIMIT = _RATIONAL_LIMIT / _SQRT_HALF
_GELU_P_ARRAY, _GELU_Q_ARRAY = np.array(_GELU_P), np.array(_GELU_Q)      # for the C kernel


def _gelu_block(source, destination, scratch):
    """x * Phi(x), Phi = 0.5 + 0.5 * erf(x / sqrt(2)) from the fit over x clipped to where
    it holds, then clipped to [0, 1]: exactly 0 below (the fit's residue there times a large
    |x| would not be) and exactly x above. 27 passes over the block."""
    x, square, numerator, denominator = scratch[:4]
    clip_to(source, -_GELU_LIMIT, _GELU_LIMIT, out=x)       # float32 in, float64 out
    np.multiply(x, x, out=square)
    _horner(_GELU_P, square, numerator)
    _horner(_GELU_Q, square, denominator)
    numerator *= x
    numerator /= denominator
    numerator += 0.5
    clip_to(numerator, 0.0, 1.0, out=numerator)
    np.multiply(numerator, source, out=destination, casting="same_kind")
