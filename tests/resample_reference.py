"""Independent NumPy reference for gen.resample / gen.resample_backward.

Written from shared/API.md ("Resampling", "Data types" / Conversion rules) and the oneDNN
seed (shared/seeds/resampling.txt) without looking at gen's implementation.  Nothing here
imports gen.

Along each spatial axis (size ``in`` -> ``out``) the op is a linear map given by a weight
matrix ``W`` of shape (out, in).  With the source position evaluated *exactly* as the rational

    pos(o) = (2 o + 1) * in / (2 * out) - 1/2

* nearest: ``W[o, round_half_away_from_zero(pos)] = 1``
* linear:  ``i0 = floor(pos)``, ``i1 = i0 + 1``, ``W[o, clamp(i0)] += 1 - (pos - i0)``,
  ``W[o, clamp(i1)] += pos - i0``, with ``clamp`` to ``[0, in - 1]`` (edge replicate).

Forward applies ``W_k`` along every spatial axis k of an (N, C, spatial...) array, backward
applies ``W_k^T`` (the exact adjoint).  Everything is computed in float64 from weights that are
exact rationals (converted to float64 only at the end), so the reference is far more precise
than the f32 accumulation the op is allowed to use.
"""
from fractions import Fraction
import math

import numpy as np

import convert_reference

BF16 = convert_reference.BF16
# the conversion reference's dtype table, without s32 (resampling does not take it)
NP_OF = {k: v for k, v in convert_reference.NP_OF.items() if k != "s32"}
NAME_OF = {v: k for k, v in NP_OF.items()}
INT_RANGE = {"s8": (-128, 127), "u8": (0, 255)}
UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def name_of(dtype):
    if isinstance(dtype, str) and dtype in NP_OF:
        return dtype
    return NAME_OF[np.dtype(dtype)]


# ------------------------------------------------------------------ positions and weights


def position(o, n_in, n_out):
    """Exact source position of output index o, as a Fraction."""
    return Fraction((2 * o + 1) * n_in, 2 * n_out) - Fraction(1, 2)


def round_half_away(q):
    """Round a Fraction to the nearest integer, ties away from zero."""
    a = abs(q)
    r = math.floor(a + Fraction(1, 2))
    return r if q >= 0 else -r


def clamp(i, n):
    return min(max(i, 0), n - 1)


def nearest_indices(n_in, n_out):
    """Source index of every output index (nearest), exact."""
    idx = []
    for o in range(n_out):
        i = clamp(round_half_away(position(o, n_in, n_out)), n_in)
        # cross-check with the pure integer form floor((2o+1)*in / (2*out)); pos > -1/2 always
        assert i == ((2 * o + 1) * n_in) // (2 * n_out), (o, n_in, n_out)
        idx.append(i)
    return np.array(idx, dtype=np.int64)


def linear_taps(n_in, n_out):
    """[(i0, w0, i1, w1)] per output index: clamped indices and exact Fraction weights."""
    taps = []
    for o in range(n_out):
        pos = position(o, n_in, n_out)
        i0 = math.floor(pos)
        w1 = pos - i0
        w0 = 1 - w1
        taps.append((clamp(i0, n_in), w0, clamp(i0 + 1, n_in), w1))
    return taps


def weight_matrix(n_in, n_out, alg):
    """W (n_out x n_in), float64, of one spatial axis."""
    w = np.zeros((n_out, n_in), dtype=np.float64)
    if alg == "nearest":
        w[np.arange(n_out), nearest_indices(n_in, n_out)] = 1.0
    elif alg == "linear":
        for o, (i0, w0, i1, w1) in enumerate(linear_taps(n_in, n_out)):
            w[o, i0] += float(w0)
            w[o, i1] += float(w1)
    else:
        raise ValueError(alg)
    return w


def out_size(n_in, factor):
    """floor(in * factor), evaluated exactly on the binary value of the float factor."""
    return math.floor(n_in * Fraction(factor))


# ------------------------------------------------------------------ forward and backward


def to_f64(x):
    x = np.asarray(x)
    if x.dtype == BF16:
        return x.astype(np.float32).astype(np.float64)
    return x.astype(np.float64)


def _apply(x, mats):
    """Apply mats[k] (out x in) along spatial axis 2 + k of x (float64)."""
    y = to_f64(x)
    for k, m in enumerate(mats):
        ax = 2 + k
        y = np.moveaxis(np.tensordot(m, y, axes=([1], [ax])), 0, ax)
    return np.ascontiguousarray(y)


def forward(x, out_spatial, alg):
    """Exact (float64) forward result, logical N, C, out-spatial order."""
    x = np.asarray(x)
    sp = x.shape[2:]
    assert len(sp) == len(out_spatial)
    return _apply(x, [weight_matrix(i, o, alg) for i, o in zip(sp, out_spatial)])


def forward_abs(x, out_spatial, alg):
    """|W| applied to |x|: the magnitude the rounding error is relative to."""
    return forward(np.abs(to_f64(x)), out_spatial, alg)


def backward(dy, in_spatial, alg):
    """Exact (float64) diff_src: W^T along every spatial axis."""
    dy = np.asarray(dy)
    sp = dy.shape[2:]
    assert len(sp) == len(in_spatial)
    return _apply(dy, [weight_matrix(i, o, alg).T for i, o in zip(in_spatial, sp)])


def backward_abs(dy, in_spatial, alg):
    return backward(np.abs(to_f64(dy)), in_spatial, alg)


def nearest_gather(x, out_spatial):
    """Nearest forward as a pure gather: a bitwise copy of the selected elements (same dtype)."""
    x = np.asarray(x)
    y = x
    for k, o in enumerate(out_spatial):
        idx = nearest_indices(x.shape[2 + k], o)
        y = np.take(y, idx, axis=2 + k)
    return np.ascontiguousarray(y)


# ------------------------------------------------------------------ type conversion and checks


def round_to(ref64, dtype):
    """The exact reference rounded to dtype as in the Conversion rules."""
    name = name_of(dtype)
    ref64 = np.asarray(ref64, dtype=np.float64)
    if name in INT_RANGE:
        lo, hi = INT_RANGE[name]
        return np.clip(np.rint(ref64), lo, hi).astype(NP_OF[name])  # rint: half to even
    return ref64.astype(NP_OF[name])


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view(UINT_OF_SIZE[a.dtype.itemsize])


def ordered(a):
    """Float bits mapped to integers that are monotonic in the value (+0 and -0 equal)."""
    a = np.ascontiguousarray(a)
    isz = a.dtype.itemsize
    b = bits(a).astype(np.int64)
    sign = np.int64(1) << np.int64(8 * isz - 1)
    mag = b & (sign - 1)
    return np.where(b & sign, -mag, mag)


def ulp_distance(a, b):
    return np.abs(ordered(a) - ordered(b))


def check(got, ref64, abs64, dtype, rel=1e-6):
    """Return None when got (dtype) matches the exact reference within the API's rounding
    allowance, else a message naming the worst element (index, input magnitude, expected, got).

    f32: |got - ref| <= rel * (|W| |x|) (relative to the magnitude of the terms summed, so
    cancellation does not turn an f32 accumulation error into a failure); bf16/f16: at most one
    ulp from the reference rounded to the type; s8/u8: within 1 of the reference rounded half
    to even and saturated.
    """
    name = name_of(dtype)
    got = np.asarray(got)
    assert got.dtype == NP_OF[name], (got.dtype, name)
    ref64 = np.asarray(ref64, dtype=np.float64)
    assert got.shape == ref64.shape, (got.shape, ref64.shape)
    if name == "f32":
        err = np.abs(got.astype(np.float64) - ref64)
        tol = rel * np.asarray(abs64, dtype=np.float64) + 1e-30
        bad = ~(err <= tol)
    elif name in ("bf16", "f16"):
        r = round_to(ref64, name)
        bad = ~(ulp_distance(got, r) <= 1)
        err = ulp_distance(got, r).astype(np.float64)
    else:
        r = round_to(ref64, name).astype(np.int64)
        err = np.abs(got.astype(np.int64) - r).astype(np.float64)
        bad = err > 1
    if not bad.any():
        return None
    flat = np.flatnonzero(bad.ravel())
    worst = flat[np.argmax(err.ravel()[flat])]
    idx = np.unravel_index(worst, got.shape)
    return "%d of %d elements off (%s); worst at %s: expected %r (exact %r), got %r" % (
        len(flat), got.size, name, tuple(int(i) for i in idx),
        round_to(ref64[idx], name).item() if name != "f32" else float(ref64[idx]),
        float(ref64[idx]), got[idx].item())
