"""Independent NumPy reference for gen.reorder's type conversion, scales, zero points and sum.

Written from shared/API.md ("Data types" / Conversion rules and "Reorder") without looking at
gen's implementation.  Nothing here imports gen.

Per element x, all arithmetic in f32, each operation rounded to f32 in the written order
(NumPy float32 operations are correctly rounded and never contracted into an FMA)::

    t = f32(src(x)) - f32(src_zero_point)
    t = alpha(x) * t
    t = t + beta * f32(dst_old(x))          (only with a sum; dst_old is not read otherwise)
    t = t + f32(dst_zero_point)             (skipped when dst_zero_point == 0)
    dst(x) = cvt(t)

An attribute at its default value is the identity and must not change -0.0: ``t - 0.0`` and
``1.0 * t`` are exact for every t (-0.0 included), while ``-0.0 + 0.0`` would give +0.0, so a
zero dst_zero_point is skipped.

Between equal dtypes without any attribute the reorder is a bitwise copy (no f32 round trip).
"""
import numpy as np

import ml_dtypes

BF16 = np.dtype(ml_dtypes.bfloat16)

NP_OF = {
    "f32": np.dtype(np.float32),
    "bf16": BF16,
    "f16": np.dtype(np.float16),
    "s8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "s32": np.dtype(np.int32),
}
NAME_OF = {v: k for k, v in NP_OF.items()}
TYPES = ["f32", "bf16", "f16", "s8", "u8", "s32"]
INT_TYPES = ("s8", "u8", "s32")
FLOAT_TYPES = ("f32", "bf16", "f16")
INT_RANGE = {"s8": (-128, 127), "u8": (0, 255), "s32": (-(2 ** 31), 2 ** 31 - 1)}
UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def name_of(dtype):
    """'f32', ... for a table name or a NumPy dtype of the table."""
    if isinstance(dtype, str) and dtype in NP_OF:
        return dtype
    return NAME_OF[np.dtype(dtype)]


def np_dtype(dtype):
    return NP_OF[name_of(dtype)]


def f32(x):
    return np.asarray(x, dtype=np.float32)


def bits(a):
    """The raw bits of an array as unsigned integers of the same size."""
    a = np.ascontiguousarray(a)
    return a.view(UINT_OF_SIZE[a.dtype.itemsize])


def from_bits(b, dtype):
    b = np.ascontiguousarray(b, dtype=UINT_OF_SIZE[np.dtype(dtype).itemsize])
    return b.view(np.dtype(dtype))


# --------------------------------------------------------------------------------- to f32


def to_f32(a):
    """Source conversion to f32: ints exact (s32 rounds to nearest even), bf16/f16 exact."""
    a = np.asarray(a)
    name = name_of(a.dtype)
    if name == "f32":
        return np.array(a, dtype=np.float32, copy=True)
    if name == "bf16":
        u = bits(a).astype(np.uint32) << np.uint32(16)
        return u.view(np.float32).reshape(a.shape)
    # f16 -> f32 is exact; s8/u8 exact; s32 -> f32 is the C/NumPy conversion (RNE)
    return a.astype(np.float32)


# --------------------------------------------------------------------------------- cvt


def cvt_int(t, name):
    """f32 -> s8/u8/s32: NaN -> 0, round half to even, saturate (+-inf saturate too)."""
    t = f32(t)
    lo, hi = INT_RANGE[name]
    r = np.rint(np.where(np.isnan(t), np.float32(0), t)).astype(np.float64)
    r = np.clip(r, float(lo), float(hi))  # f64 holds 2^31 - 1 exactly; +-inf clip to bounds
    return r.astype(NP_OF[name])


def cvt_bf16_bits(t):
    """f32 -> bf16 bits (uint16) with integer ops: IEEE round to nearest even.

    NaN stays NaN (quietened, sign kept), overflow goes to +-inf, subnormals are kept."""
    t = f32(t)
    u = np.ascontiguousarray(t).view(np.uint32).astype(np.uint64)
    is_nan = (u & 0x7FFFFFFF) > 0x7F800000
    lsb = (u >> 16) & 1
    rounded = (u + 0x7FFF + lsb) >> 16  # carries into the exponent: up to inf, never beyond
    nan_bits = (u >> 16) | 0x0040
    return np.where(is_nan, nan_bits, rounded).astype(np.uint16)


def cvt_bf16(t):
    return cvt_bf16_bits(t).view(BF16)


def cvt_f16(t):
    """f32 -> f16: IEEE round to nearest even, overflow to inf, subnormals kept."""
    with np.errstate(all="ignore"):
        return f32(t).astype(np.float16)


def cvt(t, name):
    """The API's cvt from f32 to the table type ``name``."""
    name = name_of(name)
    t = f32(t)
    if name == "f32":
        return np.array(t, dtype=np.float32, copy=True)
    if name == "bf16":
        return cvt_bf16(t)
    if name == "f16":
        return cvt_f16(t)
    return cvt_int(t, name)


# --------------------------------------------------------------------------------- scales


def masked_axes(scale_mask, ndims):
    return [i for i in range(ndims) if scale_mask >> i & 1]


def alpha_array(shape, scales, scale_mask):
    """The per-element f32 scale, broadcastable to ``shape``.

    mask 0: one scale; bit i set: one scale per index of logical axis i; with several bits the
    scales are indexed row-major over the masked axes in increasing axis order."""
    s = np.asarray(scales, dtype=np.float64).astype(np.float32).reshape(-1)
    axes = masked_axes(scale_mask, len(shape))
    sub = tuple(shape[i] for i in axes)
    assert s.size == int(np.prod(sub, dtype=np.int64)), (s.size, sub)
    bshape = [1] * len(shape)
    for i in axes:
        bshape[i] = shape[i]
    return s.reshape(bshape)


def alpha_slow(idx, shape, scales, scale_mask):
    """Scalar version of the scale lookup, for self-tests."""
    s = np.asarray(scales, dtype=np.float64).astype(np.float32).reshape(-1)
    k = 0
    for i in masked_axes(scale_mask, len(shape)):
        k = k * shape[i] + idx[i]
    return s[k]


# --------------------------------------------------------------------------------- reorder


def no_attributes(scales=None, scale_mask=0, src_zero_point=0, dst_zero_point=0,
                  sum_scale=None):
    return (scales is None and scale_mask == 0 and src_zero_point == 0 and dst_zero_point == 0
            and sum_scale is None)


def reference_reorder(src, dst_dtype, scales=None, scale_mask=0, src_zero_point=0,
                      dst_zero_point=0, sum_scale=None, dst_old=None):
    """Logical result of gen.reorder(src -> dst_dtype) with the given attributes.

    ``src`` is the logical source array (dtype of the table), ``dst_old`` the logical content of
    the destination before the call (needed only with ``sum_scale``).  Returns a C-contiguous
    array of the destination's NumPy dtype (bf16 as ml_dtypes.bfloat16)."""
    with np.errstate(all="ignore"):
        return _reference_reorder(np.asarray(src), dst_dtype, scales, scale_mask,
                                  src_zero_point, dst_zero_point, sum_scale, dst_old)


def _reference_reorder(src, dst_dtype, scales, scale_mask, src_zero_point, dst_zero_point,
                       sum_scale, dst_old):
    sname = name_of(src.dtype)
    dname = name_of(dst_dtype)
    if sname == dname and no_attributes(scales, scale_mask, src_zero_point, dst_zero_point,
                                        sum_scale):
        return np.array(src, copy=True, order="C")
    t = to_f32(src)
    if src_zero_point != 0:
        t = t - np.float32(src_zero_point)  # x - 0 is exact anyway (keeps -0.0)
    if scales is not None:
        t = alpha_array(src.shape, scales, scale_mask) * t  # 1.0 * x is exact
    elif scale_mask != 0:
        raise ValueError("scale_mask without scales")
    if sum_scale is not None:
        assert dst_old is not None and dst_old.shape == src.shape
        old = to_f32(np.asarray(dst_old, dtype=NP_OF[dname]))
        t = t + np.float32(sum_scale) * old
    if dst_zero_point != 0:
        t = t + np.float32(dst_zero_point)
    return np.ascontiguousarray(cvt(t, dname))


# --------------------------------------------------------------------------------- compare


def mismatches(got, want):
    """Indices (flat) where got differs from want: bitwise, except NaN matches any NaN."""
    got = np.ascontiguousarray(got)
    want = np.ascontiguousarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    g = bits(got).reshape(-1)
    w = bits(want).reshape(-1)
    diff = g != w
    if name_of(want.dtype) in FLOAT_TYPES:
        gn = np.isnan(to_f32(got)).reshape(-1)
        wn = np.isnan(to_f32(want)).reshape(-1)
        diff = np.where(gn & wn, False, diff)
    return np.flatnonzero(diff)


def describe_mismatch(got, want, src=None, limit=8):
    bad = mismatches(got, want)
    if bad.size == 0:
        return ""
    g = np.ascontiguousarray(got).reshape(-1)
    w = np.ascontiguousarray(want).reshape(-1)
    s = None if src is None else np.ascontiguousarray(src).reshape(-1)
    lines = ["%d of %d elements differ" % (bad.size, g.size)]
    for i in bad[:limit]:
        shown = "src=%r " % (s[i],) if s is not None else ""
        lines.append("  [%d] %sgot %r (0x%x) want %r (0x%x)" % (
            i, shown, g[i], int(bits(g[i:i + 1])[0]), w[i], int(bits(w[i:i + 1])[0])))
    return "\n".join(lines)


def assert_same(got, want, src=None, what=""):
    msg = describe_mismatch(got, want, src)
    assert not msg, (what + ": " if what else "") + msg


# --------------------------------------------------------------------------------- edge values

FLT_MAX = float(np.finfo(np.float32).max)
FLT_MIN = float(np.finfo(np.float32).tiny)  # 2^-126
F32_DENORM_MIN = 2.0 ** -149


def f32_from_bits(*u):
    return np.array(u, dtype=np.uint32).view(np.float32)


def special_f32():
    """+-0, f32 denormals, NaNs (quiet, signalling, negative, with payload), +-inf, FLT_MAX."""
    return np.concatenate([
        f32([0.0, -0.0, np.inf, -np.inf, np.nan, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
             F32_DENORM_MIN, -F32_DENORM_MIN, 2.0 ** -130, -3 * 2.0 ** -140, 1e-40, -1e-39]),
        f32_from_bits(0x7FC00000, 0xFFC00000, 0x7FA00001, 0xFF800001, 0x7FFFFFFF,
                      0x007FFFFF, 0x807FFFFF, 0x7F7FFFFF, 0xFF7FFFFF),
    ])


def int_rounding_f32():
    """Ties at .5 and values just inside / past every integer bound (as f32)."""
    ties = [0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, -3.5, 0.49999997, -0.49999997, 0.50000006,
            -0.50000006, 1.4999999, 2.5000002, 126.5, -126.5, 1e-3, -1e-3]
    s8 = [127.0, 127.49999, 127.5, 128.0, 129.0, -127.5, -128.0, -128.49998, -128.5, -129.0,
          -130.0, 1024.0, -124.0]
    u8 = [254.5, 255.0, 255.49998, 255.5, 256.0, 257.0, -0.5, -0.50000006, -1.0, -124.0]
    s32 = [2147483520.0, 2.0 ** 31, 2.0 ** 32, 1e10, -(2.0 ** 31), -2147483904.0, -1e10,
           16777216.0, 16777217.0, 8388608.5, -8388608.5, 8388609.0, 4194304.5, 4194305.5]
    return f32(ties + s8 + u8 + s32)


def bf16_rounding_f32():
    """f32 values at and around bf16 rounding ties (odd and even), overflow and subnormals."""
    return np.concatenate([
        f32([1 + 2.0 ** -8,            # tie, lower neighbour 1.0 even -> 1.0
             1 + 3 * 2.0 ** -8,        # tie, lower neighbour odd -> rounds up
             1 + 2.0 ** -8 + 2.0 ** -23,  # just above a tie -> up
             1 + 2.0 ** -8 - 2.0 ** -23,  # just below a tie -> down
             -(1 + 2.0 ** -8), -(1 + 3 * 2.0 ** -8),
             255.0 + 0.5, 257.0, 259.0, -257.0, 3.0e38]),
        f32_from_bits(0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF,   # ties around 1.0
                      0x7F7F8000, 0x7F7F7FFF, 0xFF7F8000,               # overflow tie -> inf
                      0x7F7EFFFF, 0x7F7E8000,                           # up; tie, even: stays
                      0x00008000, 0x00018000, 0x00010000, 0x00008001,   # subnormal ties
                      0x80008000, 0x80018000, 0x007F8000, 0x007FFFFF,   # ... up to the min normal
                      0x00000001, 0x7F800001, 0xFF812345),               # tiny, sNaN
    ])


def f16_rounding_f32():
    """f32 values at and around f16 rounding ties, overflow and subnormals."""
    return f32([1 + 2.0 ** -11,            # tie, even -> 1.0
                1 + 3 * 2.0 ** -11,        # tie, odd -> up
                1 + 2.0 ** -11 + 2.0 ** -23, 1 + 2.0 ** -11 - 2.0 ** -23,
                -(1 + 2.0 ** -11), -(1 + 3 * 2.0 ** -11),
                2049.0, 2051.0, -2049.0,   # integer ties above 2048
                65504.0, 65519.0, 65520.0, 65535.0, 65536.0, 1e5, -65519.0, -65520.0,
                3e-8, -3e-8, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25, 2.0 ** -25 + 2.0 ** -40,
                2.0 ** -26, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25, 2.0 ** -15 + 2.0 ** -25,
                6.1e-5, -6.1e-5, 1e-9, 1e-45])


def f32_edges():
    """Every f32 edge value of this module (as f32)."""
    return np.concatenate([special_f32(), int_rounding_f32(), bf16_rounding_f32(),
                           f16_rounding_f32()])


def bf16_edges():
    """bf16 source edge values: rounded f32 edges plus raw bit patterns."""
    extra = np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x7FC1, 0x0001,
                      0x8001, 0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x3F00, 0x3FC0, 0x4020, 0xBF00,
                      0xBFC0, 0x42FF, 0x4300, 0xC301, 0x437F, 0x4380, 0x4F00, 0xCF00, 0xCF01],
                     dtype=np.uint16).view(BF16)
    return np.concatenate([cvt_bf16(f32_edges()), extra])


def f16_edges():
    """f16 source edge values: rounded f32 edges plus raw bit patterns."""
    extra = np.array([0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7D01, 0x7C01, 0x0001,
                      0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3800, 0x3E00, 0x4100, 0xB800,
                      0xBE00, 0x57F0, 0x5800, 0xD808, 0x5BF8, 0x5C00, 0x5C04],
                     dtype=np.uint16).view(np.float16)
    return np.concatenate([cvt_f16(f32_edges()), extra])


def int_edges(name):
    lo, hi = INT_RANGE[name]
    vals = {lo, lo + 1, hi, hi - 1, 0, 1, 2, 3}
    if lo < 0:
        vals |= {-1, -2, -3}
    for v in (100, 127, 128, 255, 256, -128, -129, 2 ** 24, 2 ** 24 + 1, 2 ** 24 + 3,
              -(2 ** 24) - 1, 2 ** 31 - 128, 2 ** 31 - 64, 2 ** 31 - 65, -(2 ** 31) + 1,
              123456789, -987654321):
        if lo <= v <= hi:
            vals.add(v)
    return np.array(sorted(vals), dtype=NP_OF[name])


def edge_values(name):
    """1-D array of edge values of source type ``name``."""
    name = name_of(name)
    if name == "f32":
        return f32_edges()
    if name == "bf16":
        return bf16_edges()
    if name == "f16":
        return f16_edges()
    return int_edges(name)


def random_values(name, n, rng):
    """n random values of type ``name``: raw bit patterns, small values with ties at .5,
    values spread over many magnitudes."""
    name = name_of(name)
    if name in INT_TYPES:
        lo, hi = INT_RANGE[name]
        a = rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64)
        k = n // 3
        a[:k] = rng.integers(max(lo, -300), min(hi, 300), size=k, endpoint=True)
        return rng.permutation(a).astype(NP_OF[name])
    q = n // 4
    parts = [
        rng.integers(0, 2 ** 32, size=q, dtype=np.uint64).astype(np.uint32).view(np.float32),
        f32(rng.integers(-700, 700, size=q) / 2.0),
        f32(rng.uniform(-300, 300, size=q)),
        f32(rng.standard_normal(n - 3 * q) * 10.0 ** rng.uniform(-12, 12, size=n - 3 * q)),
    ]
    x = rng.permutation(np.concatenate(parts))
    if name == "f32":
        return x
    if name == "bf16":
        b = cvt_bf16(x)
        u = bits(b).copy()
        u[: n // 8] = rng.integers(0, 2 ** 16, size=n // 8, dtype=np.uint16)
        return rng.permutation(u).view(BF16)
    h = cvt_f16(x)
    u = bits(h).copy()
    u[: n // 8] = rng.integers(0, 2 ** 16, size=n // 8, dtype=np.uint16)
    return rng.permutation(u).view(np.float16)


def make_tensor(name, shape, rng):
    """A tensor of ``shape`` holding all edge values of ``name`` (shuffled), the rest random."""
    n = int(np.prod(shape, dtype=np.int64))
    e = edge_values(name)
    if e.size >= n:
        e = e[:n]
    r = random_values(name, n - e.size, rng)
    a = np.concatenate([e, r])
    return rng.permutation(a).reshape(shape)
