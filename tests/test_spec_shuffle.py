"""Acceptance tests for gen.shuffle_channels, gen.shuffle_channels_backward and
gen.ShuffleChannels (shared/API.md "ShuffleChannels", seed shared/seeds/shuffle_channels.txt).

The reference is written from the seed's formula (reshape to [outer, group, C/group, inner],
transpose(0, 2, 1, 3), reshape back) with NumPy, and cross-checked against the index formula
of API.md; memory layouts are packed/unpacked with tests/reference.py. Nothing here is taken
from gen's implementation.

Decisions where the contract is silent (see the report / README):
* `axis` and `group` must be integers: Python ints and NumPy integer scalars are accepted;
  floats (also integral ones like 2.0), bools, strings and None raise gen.Error.
* a source Memory whose blocked padding holds garbage still gives a result whose padding is
  zero ("every op that writes a blocked destination fills the padding with zeros").
* with GEN_VERBOSE=1 the backward function's line names `shuffle_channels_backward`
  (its Python name); every call of a primitive prints one line, creating it prints none.
* element types of other sizes (complex128, longdouble, object, strings) raise gen.Error.
"""
import os
import zlib

import numpy as np
import pytest

import gen
from checks import desc, raises_gen, run_py, run_threads, src_memory

try:
    from . import reference as ref
except ImportError:  # tests/ is not a package
    import reference as ref

BF16 = ref.BF16


def seed_of(*x):
    return zlib.crc32(repr(x).encode())


# ---------------------------------------------------------------- the reference


def _norm_axis(ndim, axis):
    assert -ndim <= axis < ndim
    return axis + ndim if axis < 0 else axis


def ref_shuffle(x, axis, group):
    """Seed formula: reshape [outer, group, C/group, inner], transpose (0,2,1,3), reshape back."""
    x = np.asarray(x)
    shape = x.shape
    ax = _norm_axis(x.ndim, axis)
    c = shape[ax]
    assert c % group == 0
    outer = int(np.prod(shape[:ax], dtype=np.int64))
    inner = int(np.prod(shape[ax + 1:], dtype=np.int64))
    y = x.reshape(outer, group, c // group, inner).transpose(0, 2, 1, 3).reshape(shape)
    return np.ascontiguousarray(y)


def ref_unshuffle(y, axis, group):
    """Inverse of ref_shuffle (the reshape with the two channel factors exchanged)."""
    y = np.asarray(y)
    shape = y.shape
    ax = _norm_axis(y.ndim, axis)
    c = shape[ax]
    outer = int(np.prod(shape[:ax], dtype=np.int64))
    inner = int(np.prod(shape[ax + 1:], dtype=np.int64))
    x = y.reshape(outer, c // group, group, inner).transpose(0, 2, 1, 3).reshape(shape)
    return np.ascontiguousarray(x)


def ref_by_index(x, axis, group):
    """API.md: y[o, k*group + g, i] = x[o, g*K + k, i], with explicit loops."""
    x = np.asarray(x)
    ax = _norm_axis(x.ndim, axis)
    c = x.shape[ax]
    k_ = c // group
    y = np.empty_like(x)
    for g in range(group):
        for k in range(k_):
            dst = [slice(None)] * x.ndim
            src = [slice(None)] * x.ndim
            dst[ax] = k * group + g
            src[ax] = g * k_ + k
            y[tuple(dst)] = x[tuple(src)]
    return y


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def rand(dims, dt=np.float32, seed=0):
    return ref.random_bits(dims, dt, np.random.default_rng(seed))


def garbage_memory(md, seed):
    m = gen.Memory(md)
    m.data[:] = np.random.default_rng(seed).integers(0, 256, md.nbytes, dtype=np.uint8)
    return m


def check_numpy_result(out, x, expected):
    assert isinstance(out, np.ndarray), type(out)
    assert out.dtype == x.dtype, (out.dtype, x.dtype)
    assert out.shape == x.shape
    assert out.flags.c_contiguous
    assert not np.shares_memory(out, x), "result is a view of the input"
    assert ref.same_bits(out, expected), "content differs from the reference"


def check_memory_result(out, src, expected, spec):
    """out must be a new Memory of src's desc holding expected in layout spec (padding zero)."""
    assert isinstance(out, gen.Memory), type(out)
    assert out is not src
    assert out.desc == src.desc
    assert not np.shares_memory(out.data, src.data), "result shares the source's buffer"
    raw = np.array(out.data, copy=True)
    got = ref.unpack(raw, expected.shape, ref.make_layout(expected.shape, spec), expected.dtype)
    assert ref.same_bits(got, expected), "logical content differs from the reference"
    if isinstance(spec, str):
        exp_raw = ref.pack(expected, spec)
        assert raw.size == exp_raw.size
        bad = np.flatnonzero(raw != exp_raw)
        assert bad.size == 0, "bytes differ (padding not zero?) at byte offsets %s" % bad[:10]
        assert bytes(out.data) == bytes(gen.Memory.from_array(expected, spec).data)


def test_reference_matches_index_formula():
    """The seed-formula reference agrees with API.md's index formula and is a bijection."""
    rng = np.random.default_rng(1)
    for shape in [(12,), (2, 12, 3), (3, 4, 6, 2), (2, 3, 2, 2, 6)]:
        x = ref.random_bits(shape, np.int32, rng)
        for axis in range(-len(shape), len(shape)):
            for g in divisors(shape[axis]):
                y = ref_shuffle(x, axis, g)
                assert np.array_equal(y, ref_by_index(x, axis, g))
                assert np.array_equal(ref_unshuffle(y, axis, g), x)
    # the seed's picture on a tiny case: channels 0..5 with group 2 -> 0 3 1 4 2 5
    x = np.arange(6).reshape(1, 6, 1, 1)
    assert ref_shuffle(x, 1, 2).ravel().tolist() == [0, 3, 1, 4, 2, 5]
    assert ref_shuffle(x, 1, 3).ravel().tolist() == [0, 2, 4, 1, 3, 5]


# ---------------------------------------------------------------- seed example, ShuffleNet


def test_seed_example_5x12x200x400_group3():
    x = rand((5, 12, 200, 400), np.float32, 3)
    snap = x.copy()
    y = gen.shuffle_channels(x, axis=1, group=3)
    check_numpy_result(y, x, ref_shuffle(x, 1, 3))
    assert ref.same_bits(x, snap), "input modified"
    # spot check of the formula on whole planes: y[:, k*3 + g] == x[:, g*4 + k]
    assert ref.same_bits(y[:, 1 * 3 + 2], x[:, 2 * 4 + 1])
    assert ref.same_bits(y[:, 0], x[:, 0]) and ref.same_bits(y[:, 11], x[:, 11])


SHUFFLENET = [((1, 116, 28, 28), 2), ((1, 232, 14, 14), 2), ((32, 116, 28, 28), 2),
              ((1, 464, 7, 7), 2), ((1, 240, 28, 28), 3)]


@pytest.mark.parametrize("dims,group", SHUFFLENET, ids=lambda v: str(v))
def test_shufflenet_shapes_numpy(dims, group):
    x = rand(dims, np.float32, seed_of(dims, group))
    exp = ref_shuffle(x, 1, group)
    y = gen.shuffle_channels(x, 1, group)
    check_numpy_result(y, x, exp)
    back = gen.shuffle_channels_backward(y, 1, group)
    check_numpy_result(back, y, x)


@pytest.mark.parametrize("fmt", ["nchw", "nhwc", "nChw16c", "nChw8c"])
@pytest.mark.parametrize("dims,group", [((1, 116, 28, 28), 2), ((1, 232, 14, 14), 2),
                                        ((4, 116, 28, 28), 2)], ids=lambda v: str(v))
def test_shufflenet_shapes_memory(dims, group, fmt):
    x = rand(dims, np.float32, seed_of(dims, group, fmt))
    m = src_memory(x, fmt)
    before = bytes(m.data)
    exp = ref_shuffle(x, 1, group)
    out = gen.shuffle_channels(m, 1, group)
    check_memory_result(out, m, exp, fmt)
    assert bytes(m.data) == before, "source modified"
    back = gen.shuffle_channels_backward(out, 1, group)
    check_memory_result(back, out, x, fmt)


# ---------------------------------------------------------------- every axis, rank 1..6

RANK_SHAPES = [
    (12,),
    (1,),
    (6, 8),
    (4, 6, 9),
    (1, 6, 1, 4),
    (3, 8, 4, 6),
    (2, 6, 4, 3, 10),
    (2, 4, 12, 1, 3, 6),
]
AXIS_TYPES = [np.float32, np.uint8, np.float16, np.int64, BF16, np.int8, np.float64, np.int32]


@pytest.mark.parametrize("shape", RANK_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_axis_every_group(shape):
    nd = len(shape)
    for axis in range(-nd, nd):
        for g in divisors(shape[axis]):
            dt = AXIS_TYPES[(axis + g) % len(AXIS_TYPES)]
            x = rand(shape, dt, seed_of(shape, axis, g))
            snap = x.copy()
            exp = ref_shuffle(x, axis, g)
            where = "shape=%s axis=%d group=%d dtype=%s" % (shape, axis, g, np.dtype(dt).name)
            y = gen.shuffle_channels(x, axis, g)
            try:
                check_numpy_result(y, x, exp)
                if g in (1, shape[axis]):
                    assert ref.same_bits(y, x), "group 1 / group C must be an identity copy"
                dy = gen.shuffle_channels_backward(x, axis=axis, group=g)
                check_numpy_result(dy, x, ref_unshuffle(x, axis, g))
                assert ref.same_bits(x, snap), "input modified"
            except AssertionError as e:
                raise AssertionError("%s: %s" % (where, e))


def test_defaults_axis1_group1():
    x = rand((2, 6, 3), np.float32, 4)
    y = gen.shuffle_channels(x)
    check_numpy_result(y, x, x)
    check_numpy_result(gen.shuffle_channels_backward(x), x, x)
    check_numpy_result(gen.shuffle_channels(x, group=3), x, ref_shuffle(x, 1, 3))
    check_numpy_result(gen.shuffle_channels_backward(x, group=3), x, ref_unshuffle(x, 1, 3))
    # NumPy integer scalars are integers
    check_numpy_result(gen.shuffle_channels(x, np.int64(2), np.int32(3)), x, ref_shuffle(x, 2, 3))
    check_numpy_result(gen.shuffle_channels(x, axis=np.int8(-2), group=np.uint16(2)), x,
                       ref_shuffle(x, 1, 2))


# ---------------------------------------------------------------- element types, bits

ALL_TYPES = [np.uint8, np.int8, np.bool_, np.float16, BF16, np.int16, np.uint16,
             np.float32, np.int32, np.uint32, np.float64, np.int64, np.uint64]


@pytest.mark.parametrize("dt", ALL_TYPES, ids=lambda t: np.dtype(t).name)
def test_element_types_numpy(dt):
    dt = np.dtype(dt)
    for shape, axis, g in [((3, 12, 5, 7), 1, 3), ((3, 12, 5, 7), -1, 7), ((37, 8), 1, 4),
                           ((2, 116, 3), 1, 2), ((40,), 0, 8)]:
        x = rand(shape, dt, seed_of(shape, dt.name))
        y = gen.shuffle_channels(x, axis, g)
        check_numpy_result(y, x, ref_shuffle(x, axis, g))
        check_numpy_result(gen.shuffle_channels_backward(y, axis, g), y, x)


@pytest.mark.parametrize("dt", ALL_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("fmt,dims,axis,group", [("nhwc", (2, 12, 3, 5), 1, 3),
                                                 ("nChw16c", (2, 30, 3, 5), 1, 5),
                                                 ("nChw8c", (2, 24, 3, 5), 1, 3),
                                                 ("nChw8c", (2, 20, 3, 6), 3, 2)])
def test_element_types_memory(dt, fmt, dims, axis, group):
    dt = np.dtype(dt)
    x = rand(dims, dt, seed_of(dims, dt.name, fmt))
    m = src_memory(x, fmt)
    out = gen.shuffle_channels(m, axis, group)
    check_memory_result(out, m, ref_shuffle(x, axis, group), fmt)
    assert ref.same_bits(out.to_array(), ref_shuffle(x, axis, group))
    assert out.to_array().dtype == dt


F32_NANS = np.array([0x7FA00001, 0xFFA00001, 0x7F800001, 0x7FC00001, 0xFFC12345, 0x7FBFFFFF,
                     0x7F800000, 0xFF800000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF],
                    dtype=np.uint32)
F16_NANS = np.array([0x7C01, 0x7D00, 0x7DFF, 0xFC01, 0xFD55, 0x7E01, 0x7C00, 0x8001],
                    dtype=np.uint16)
F64_NANS = np.array([0x7FF0000000000001, 0xFFF4000000000123, 0x7FF8000000000001, 1],
                    dtype=np.uint64)


def _tiled(bits, dt, shape):
    n = int(np.prod(shape))
    return np.resize(bits, n).view(dt).reshape(shape)


@pytest.mark.parametrize("fmt", [None, "nchw", "nhwc", "nChw16c", "nChw8c"])
def test_nan_payloads_bit_exact(fmt):
    cases = [(_tiled(F32_NANS, np.float32, (2, 24, 3, 5)), 3),
             (_tiled(F16_NANS, np.float16, (2, 24, 3, 5)), 2),
             (_tiled(F16_NANS, BF16, (2, 24, 3, 5)), 4),
             (_tiled(F64_NANS, np.float64, (2, 24, 3, 5)), 6)]
    for x, g in cases:
        exp = ref_shuffle(x, 1, g)
        if fmt is None:
            y = gen.shuffle_channels(x, 1, g)
            check_numpy_result(y, x, exp)
            check_numpy_result(gen.shuffle_channels_backward(y, 1, g), y, x)
        else:
            m = src_memory(x, fmt)
            out = gen.shuffle_channels(m, 1, g)
            check_memory_result(out, m, exp, fmt)
            check_memory_result(gen.shuffle_channels_backward(out, 1, g), out, x, fmt)


def test_specific_nan_bits_land_where_expected():
    # C 4, group 2, K 2: channel g*K + k goes to k*group + g (ch 1 = g0 k1 -> 2)
    x = np.zeros((1, 4, 1, 1), np.uint32)
    x[0, 1] = 0x7FA00001
    y = gen.shuffle_channels(x.view(np.float32), 1, 2)
    assert y.view(np.uint32).ravel().tolist() == [0, 0, 0x7FA00001, 0]
    h = np.zeros((1, 4, 1, 1), np.uint16)
    h[0, 2] = 0x7C01  # f16 signalling NaN, ch 2 = g1 k0 -> 1
    h[0, 3] = 0xFD00  # negative signalling NaN, ch 3 = g1 k1 -> 3
    z = gen.shuffle_channels(h.view(np.float16), 1, 2)
    assert z.view(np.uint16).ravel().tolist() == [0, 0x7C01, 0, 0xFD00]


# ---------------------------------------------------------------- NumPy views


def _numpy_view(kind):
    base = rand((4, 36, 6, 10), np.float32, 5)
    if kind == "transposed":
        return base.transpose(0, 3, 2, 1)  # (4, 10, 6, 36)
    if kind == "reversed":
        return base[::-1, :, ::-1, :]
    if kind == "all_reversed":
        return base[::-1, ::-1, ::-1, ::-1]
    if kind == "stepped":
        return base[::2, 1::2, ::3, 1::3]  # (2, 18, 2, 3)
    if kind == "sliced":
        return base[1:3, 6:30, 1:5, 2:9]  # (2, 24, 4, 7)
    if kind == "fortran":
        return np.asfortranarray(base)
    if kind == "broadcast":
        return np.broadcast_to(base[:1, :, :1, :], (3, 36, 4, 10))
    if kind == "readonly":
        a = base.copy()
        a.flags.writeable = False
        return a
    if kind == "unaligned":
        st = np.zeros(base.size, dtype=[("pad", "u1"), ("v", "<f4")])
        st["v"] = base.ravel()
        return st["v"].reshape(base.shape)
    if kind == "transposed_reversed_u8":
        return rand((5, 12, 9), np.uint8, 6).transpose(2, 1, 0)[::-1, ::-1]  # (9, 12, 5)
    if kind == "neg_strided_f16":
        return rand((3, 24, 8), np.float16, 7)[:, ::-2, ::-3]  # (3, 12, 3)
    raise AssertionError(kind)


VIEW_KINDS = ["transposed", "reversed", "all_reversed", "stepped", "sliced", "fortran",
              "broadcast", "readonly", "unaligned", "transposed_reversed_u8", "neg_strided_f16"]


@pytest.mark.parametrize("kind", VIEW_KINDS)
def test_numpy_any_strides(kind):
    x = _numpy_view(kind)
    snap = np.array(x, copy=True)
    nd = x.ndim
    for axis in range(-nd, nd):
        for g in divisors(x.shape[axis]):
            exp = ref_shuffle(np.ascontiguousarray(x), axis, g)
            y = gen.shuffle_channels(x, axis, g)
            try:
                check_numpy_result(y, x, exp)
                check_numpy_result(gen.shuffle_channels_backward(x, axis, g), x,
                                   ref_unshuffle(np.ascontiguousarray(x), axis, g))
            except AssertionError as e:
                raise AssertionError("view %s shape=%s strides=%s axis=%d group=%d: %s"
                                     % (kind, x.shape, x.strides, axis, g, e))
    assert ref.same_bits(x, snap), "input modified"


# ---------------------------------------------------------------- Memory layouts

MEMORY_CASES = [
    # (dims, spec, axis, group)
    ((2, 12, 3, 5), "nchw", 1, 3),
    ((2, 12, 3, 5), "nhwc", 1, 4),
    ((2, 12, 3, 5), "nhwc", -3, 6),
    ((2, 12, 3, 5), "chwn", 1, 2),
    ((2, 12, 3, 6), "nhwc", 3, 3),
    ((6, 12, 3, 5), "nhwc", 0, 2),
    ((2, 116, 5, 6), "nChw16c", 1, 2),     # K = 58: groups straddle the 16-blocks
    ((2, 116, 5, 6), "nChw8c", 1, 4),      # K = 29
    ((2, 24, 5, 3), "nChw8c", 1, 3),
    ((2, 24, 5, 3), "nChw16c", 1, 3),      # 24 padded to 32, K = 8
    ((2, 30, 4, 5), "nChw16c", 1, 5),      # 30 padded to 32, K = 6
    ((2, 30, 4, 5), "nChw16c", 1, 3),      # K = 10
    ((2, 30, 4, 5), "nChw8c", 1, 15),
    ((1, 36, 3, 3), "nChw16c", 1, 4),      # K = 9
    ((1, 36, 3, 3), "nChw16c", 1, 9),
    ((2, 20, 3, 3), "nChw8c", 1, 10),      # K = 2
    ((2, 48, 3, 3), "nChw16c", 1, 3),      # K = 16: aligned
    ((2, 32, 3, 3), "nChw16c", 1, 2),      # aligned
    ((2, 12, 3, 3), "nChw16c", 1, 1),      # identity
    ((2, 12, 3, 3), "nChw16c", 1, 12),     # identity
    ((2, 20, 6, 4), "nChw16c", 2, 3),      # shuffle a plain axis of a blocked layout
    ((2, 20, 6, 4), "nChw16c", -1, 2),
    ((2, 12, 3, 4), "nChw16c", 2, 1),      # identity on a plain axis, padded blocked channels
    ((2, 20, 6, 4), "nChw8c", 3, 4),       # backward = group 1 on a plain axis, padded 8c
    ((4, 20, 6, 4), "nChw8c", 0, 2),
    ((2, 21, 3, 4, 5), "nCdhw16c", 1, 3),  # K = 7
    ((2, 21, 3, 4, 5), "nCdhw8c", 1, 7),
    ((2, 21, 3, 4, 6), "ndhwc", 1, 3),
    ((3, 18, 7), "nCw8c", 1, 6),
    ((3, 18, 7), "nCw16c", -2, 2),
    ((3, 18, 7), "nwc", 1, 9),
    ((18, 20, 3, 2), "OIhw16i16o", 0, 3),  # both O and I blocked
    ((18, 20, 3, 2), "OIhw16i16o", 1, 4),
    ((18, 20, 3, 2), "OIhw4i16o4i", 1, 5),
    ((18, 20, 3, 2), "OIhw16i16o", 2, 3),
    ((20, 12, 3, 3), "NChw16n16c", 0, 4),
    ((40,), "A16a", 0, 8),
    ((40,), "x", 0, 5),
    ((3, 12, 5, 7), (1000, 80, 8, 1), 1, 3),   # plain strided desc with gaps
    ((3, 12, 5, 7), (1, 3, 36, 180), 1, 4),    # column-major strides
    ((6, 10), (16, 1), 1, 5),
]


def _case_id(c):
    dims, spec, axis, g = c
    return "%s-%s-a%d-g%d" % ("x".join(map(str, dims)), spec if isinstance(spec, str)
                              else "st" + "_".join(map(str, spec)), axis, g)


@pytest.mark.parametrize("case", MEMORY_CASES, ids=_case_id)
def test_memory_layouts(case):
    dims, spec, axis, g = case
    for dt in (np.float32, BF16, np.uint8):
        x = rand(dims, dt, seed_of(case, np.dtype(dt).name))
        m = src_memory(x, spec)
        before = bytes(m.data)
        exp = ref_shuffle(x, axis, g)
        try:
            out = gen.shuffle_channels(m, axis, g)
            check_memory_result(out, m, exp, spec)
            assert bytes(m.data) == before, "source modified"
            bwd = gen.shuffle_channels_backward(m, axis, g)
            check_memory_result(bwd, m, ref_unshuffle(x, axis, g), spec)
            check_memory_result(gen.shuffle_channels_backward(out, axis, g), out, x, spec)
        except AssertionError as e:
            raise AssertionError("dtype %s: %s" % (np.dtype(dt).name, e))


@pytest.mark.parametrize("dims,fmt,group", [((2, 30, 4, 5), "nChw16c", 5),
                                            ((2, 116, 3, 3), "nChw16c", 2),
                                            ((2, 20, 3, 3), "nChw8c", 4),
                                            ((3, 18, 7), "nCw16c", 3)])
def test_blocked_padding_zero_even_with_garbage_in_source_padding(dims, fmt, group):
    """API.md: every op that writes a blocked destination fills the padding with zeros."""
    x = rand(dims, np.float32, seed_of(dims, fmt))
    m = src_memory(x, fmt)
    lay = ref.layout_from_tag(dims, fmt)
    pad = ref.padding_mask(lay)
    assert pad.any()
    m.data.view(np.uint32)[: pad.size][pad] = 0xFFA5A5A5
    out = gen.shuffle_channels(m, 1, group)
    exp = ref_shuffle(x, 1, group)
    assert bytes(out.data) == bytes(gen.Memory.from_array(exp, fmt).data)
    bwd = gen.shuffle_channels_backward(m, 1, group)
    assert bytes(bwd.data) == bytes(gen.Memory.from_array(ref_unshuffle(x, 1, group), fmt).data)


# ---------------------------------------------------------------- inverse and backward


def _random_problems(seed, count):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        nd = int(rng.integers(1, 7))
        dims = [int(d) for d in rng.integers(1, 6, nd)]
        ax = int(rng.integers(-nd, nd))
        dims[ax] = int(rng.choice([1, 2, 4, 6, 8, 12, 16, 18, 20, 24, 30, 36]))
        g = int(rng.choice(divisors(dims[ax])))
        out.append((tuple(dims), ax, g))
    return out


ROUND_TYPES = [np.float32, np.uint8, BF16, np.float64, np.int16, np.bool_]


def test_round_trips_numpy():
    for i, (dims, axis, g) in enumerate(_random_problems(20240607, 150)):
        dt = ROUND_TYPES[i % len(ROUND_TYPES)]
        x = rand(dims, dt, i)
        c = dims[axis]
        where = "dims=%s axis=%d group=%d dtype=%s" % (dims, axis, g, np.dtype(dt).name)
        y = gen.shuffle_channels(x, axis, g)
        dy = gen.shuffle_channels_backward(x, axis, g)
        assert ref.same_bits(y, ref_shuffle(x, axis, g)), where
        assert ref.same_bits(gen.shuffle_channels_backward(y, axis, g), x), where
        assert ref.same_bits(gen.shuffle_channels(dy, axis, g), x), where
        assert ref.same_bits(dy, gen.shuffle_channels(x, axis, c // g)), where
        assert ref.same_bits(dy, ref_unshuffle(x, axis, g)), where


@pytest.mark.parametrize("fmt", ["nchw", "nhwc", "nChw16c", "nChw8c"])
def test_round_trips_memory(fmt):
    rng = np.random.default_rng(seed_of(fmt))
    for i in range(25):
        dims = (int(rng.integers(1, 4)), int(rng.choice([6, 12, 18, 20, 24, 30, 36, 40, 116])),
                int(rng.integers(1, 5)), int(rng.integers(1, 6)))
        axis = int(rng.choice([1, -3, 1, 0, 2, 3]))
        g = int(rng.choice(divisors(dims[axis])))
        x = ref.random_bits(dims, np.float32, rng)
        m = src_memory(x, fmt)
        c = dims[axis]
        where = "dims=%s fmt=%s axis=%d group=%d" % (dims, fmt, axis, g)
        y = gen.shuffle_channels(m, axis, g)
        dy = gen.shuffle_channels_backward(m, axis, g)
        assert bytes(gen.shuffle_channels_backward(y, axis, g).data) == bytes(m.data), where
        assert bytes(gen.shuffle_channels(dy, axis, g).data) == bytes(m.data), where
        assert bytes(dy.data) == bytes(gen.shuffle_channels(m, axis, c // g).data), where
        assert bytes(y.data) == ref.pack(ref_shuffle(x, axis, g), fmt).tobytes(), where


# ---------------------------------------------------------------- primitive

PRIM_CASES = [
    ((2, 12, 3, 5), "nchw", 1, 3),
    ((2, 12, 3, 5), "nhwc", 1, 4),
    ((2, 116, 3, 3), "nChw16c", 1, 2),
    ((2, 24, 3, 3), "nChw8c", 1, 3),
    ((2, 30, 3, 3), "nChw16c", 1, 5),
    ((2, 20, 6, 4), "nChw16c", 2, 2),
    ((18, 20, 3, 2), "OIhw16i16o", 0, 6),
    ((3, 12, 5, 7), (1000, 80, 8, 1), 1, 6),
    ((36,), "x", -1, 4),
]


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("case", PRIM_CASES, ids=_case_id)
def test_primitive_equals_functions(case, backward):
    dims, spec, axis, g = case
    md = desc(dims, np.float32, spec)
    p = gen.ShuffleChannels(md, axis, g, backward=backward)
    fn = gen.shuffle_channels_backward if backward else gen.shuffle_channels
    rfn = ref_unshuffle if backward else ref_shuffle
    for i in range(3):
        x = rand(dims, np.float32, seed_of(case, backward, i))
        src = src_memory(x, spec)
        before = bytes(src.data)
        dst = garbage_memory(md, i)
        p(src, dst)
        assert bytes(src.data) == before, "source modified"
        exp = rfn(x, axis, g)
        got = ref.unpack(np.array(dst.data), dims, ref.make_layout(dims, spec), np.float32)
        assert ref.same_bits(got, exp)
        if isinstance(spec, str):
            assert bytes(dst.data) == ref.pack(exp, spec).tobytes()  # padding zeroed
            assert bytes(dst.data) == bytes(fn(src, axis, g).data)
        else:
            assert ref.same_bits(fn(src, axis, g).to_array(), exp)
    # keyword form and default backward=False
    if not backward:
        p2 = gen.ShuffleChannels(md, axis=axis, group=g)
        d2 = gen.Memory(md)
        p2(src, d2)
        assert ref.same_bits(d2.to_array(), ref_shuffle(x, axis, g))


def test_primitive_accepts_equal_desc_written_differently():
    dims = (2, 30, 3, 3)
    p = gen.ShuffleChannels(gen.MemoryDesc(dims, "f32", "nChw16c"), 1, 5)
    x = rand(dims, np.float32, 40)
    src = src_memory(x, "aBcd16b")
    dst = gen.Memory(gen.MemoryDesc(dims, np.float32, "aBcd16b"))
    p(src, dst)
    assert bytes(dst.data) == ref.pack(ref_shuffle(x, 1, 5), "nChw16c").tobytes()


def test_primitive_rejects_other_descs_and_writes_nothing():
    dims = (2, 12, 3, 5)
    md = gen.MemoryDesc(dims, "f32", "nChw8c")
    p = gen.ShuffleChannels(md, 1, 3)
    x = rand(dims, np.float32, 41)
    good_src = src_memory(x, "nChw8c")
    good_dst = garbage_memory(md, 42)
    snap = bytes(good_dst.data)
    others = [gen.MemoryDesc(dims, "f32", "nchw"), gen.MemoryDesc(dims, "f32", "nChw16c"),
              gen.MemoryDesc(dims, "s32", "nChw8c"), gen.MemoryDesc((2, 12, 3, 6), "f32", "nChw8c"),
              gen.MemoryDesc((2, 12, 3, 5, 1), "f32")]
    for other in others:
        bad = garbage_memory(other, 43)
        bad_snap = bytes(bad.data)
        raises_gen(lambda: p(bad, good_dst))
        raises_gen(lambda: p(good_src, bad))
        assert bytes(bad.data) == bad_snap
    raises_gen(lambda: p(None, good_dst))
    raises_gen(lambda: p(good_src, None))
    raises_gen(lambda: p(good_src, "nChw8c"))
    assert bytes(good_dst.data) == snap, "a failing call wrote to the destination"
    p(good_src, good_dst)
    assert bytes(good_dst.data) == ref.pack(ref_shuffle(x, 1, 3), "nChw8c").tobytes()


def _aligned(nbytes, fill=0):
    buf = np.full(nbytes + 128, fill, np.uint8)
    off = (-buf.__array_interface__["data"][0]) % 64
    return buf[off:off + nbytes + 64]


def test_primitive_rejects_overlapping_src_dst():
    dims = (2, 12, 3, 5)
    md = gen.MemoryDesc(dims, "f32", "nchw")
    p = gen.ShuffleChannels(md, 1, 3)
    pb = gen.ShuffleChannels(md, 1, 3, backward=True)
    buf = _aligned(2 * md.nbytes + 256)
    buf[:] = np.random.default_rng(44).integers(0, 256, buf.size, dtype=np.uint8)
    snap = bytes(buf)
    a = gen.Memory(md, buf)
    raises_gen(lambda: p(a, a))                               # the same Memory
    raises_gen(lambda: pb(a, a))
    b = gen.Memory(md, buf)                                   # same buffer, two Memories
    raises_gen(lambda: p(a, b))
    c = gen.Memory(md, buf[64:])                              # partial overlap
    raises_gen(lambda: p(a, c))
    raises_gen(lambda: pb(c, a))
    assert bytes(buf) == snap, "a failing call wrote to the buffer"
    # disjoint parts of one buffer are fine
    d = gen.Memory(md, buf[md.nbytes + 64:])
    p(a, d)
    assert ref.same_bits(d.to_array(), ref_shuffle(a.to_array(), 1, 3))


@pytest.mark.parametrize("bad", [None, (2, 12, 3, 5), "nchw", 42, [2, 12]])
def test_primitive_non_desc_argument(bad):
    raises_gen(lambda: gen.ShuffleChannels(bad, 1, 3), repr(bad), str(bad))


def test_primitive_non_desc_memory_or_array():
    m = gen.Memory(gen.MemoryDesc((2, 12), "f32"))
    raises_gen(lambda: gen.ShuffleChannels(m, 1, 3))
    raises_gen(lambda: gen.ShuffleChannels(np.zeros((2, 12), np.float32), 1, 3))


def test_primitive_bad_attributes():
    md = gen.MemoryDesc((2, 12, 3, 5), "f32", "nChw8c")
    raises_gen(lambda: gen.ShuffleChannels(md, 4, 1), "4")
    raises_gen(lambda: gen.ShuffleChannels(md, -5, 1), "-5")
    raises_gen(lambda: gen.ShuffleChannels(md, 1, 0), "0")
    raises_gen(lambda: gen.ShuffleChannels(md, 1, -3), "-3")
    raises_gen(lambda: gen.ShuffleChannels(md, 1, 13), "13")
    raises_gen(lambda: gen.ShuffleChannels(md, 1, 5), "5")
    raises_gen(lambda: gen.ShuffleChannels(md, 2, 2), "2")  # 3 channels on axis 2
    raises_gen(lambda: gen.ShuffleChannels(md, 1, 2.0), "2.0")
    raises_gen(lambda: gen.ShuffleChannels(md, 1.0, 2), "1.0")
    for bad in (np.array([True, False]), "yes", 2, None):
        raises_gen(lambda: gen.ShuffleChannels(md, 1, 2, backward=bad), "backward", repr(bad))
    assert gen.ShuffleChannels(md, 1, 2, backward=np.True_).backward is True


# ---------------------------------------------------------------- threads


@pytest.mark.parametrize("fmt", [None, "nhwc", "nChw16c"])
def test_threads_bit_identical(fmt):
    dims = (8, 48, 17, 19)
    x = rand(dims, np.float32, seed_of("threads", fmt))
    for axis, g in [(1, 4), (1, 3), (2, 17), (-1, 19)]:
        exp = ref_shuffle(x, axis, g)
        if fmt is None:
            r = [gen.shuffle_channels(x, axis, g, threads=t) for t in (1, 2, None)]
            b = [gen.shuffle_channels_backward(x, axis, g, threads=t) for t in (1, 2)]
            assert all(ref.same_bits(y, exp) for y in r)
            assert ref.same_bits(b[0], b[1]) and ref.same_bits(b[0], ref_unshuffle(x, axis, g))
        else:
            m = src_memory(x, fmt)
            r = [bytes(gen.shuffle_channels(m, axis, g, threads=t).data) for t in (1, 2, None)]
            b = [bytes(gen.shuffle_channels_backward(m, axis, g, threads=t).data) for t in (1, 2)]
            assert r[0] == r[1] == r[2] == ref.pack(exp, fmt).tobytes()
            assert b[0] == b[1] == ref.pack(ref_unshuffle(x, axis, g), fmt).tobytes()


@pytest.mark.parametrize("bad", [-1, 0, "two", 1.5])
def test_bad_threads_argument(bad):
    x = np.zeros((2, 4), np.float32)
    raises_gen(lambda: gen.shuffle_channels(x, 1, 2, threads=bad))


def test_concurrent_python_threads():
    dims = (4, 36, 9, 11)
    md = gen.MemoryDesc(dims, "f32", "nChw16c")
    p = gen.ShuffleChannels(md, 1, 4)
    errors = []

    def work(tid):
        try:
            rng = np.random.default_rng(100 + tid)
            for i in range(10):
                x = ref.random_bits(dims, np.float32, rng)
                exp = ref_shuffle(x, 1, 4)
                if i % 2:
                    if not ref.same_bits(gen.shuffle_channels(x, 1, 4), exp):
                        errors.append((tid, i))
                else:
                    out = gen.Memory(md)
                    p(src_memory(x, "nChw16c"), out)
                    if bytes(out.data) != ref.pack(exp, "nChw16c").tobytes():
                        errors.append((tid, i))
        except Exception as e:  # pragma: no cover - reported below
            errors.append((tid, repr(e)))

    run_threads(work, 4)
    assert not errors, errors


# ---------------------------------------------------------------- verbose, registry


FORWARD_CODE = """
import numpy as np, gen
x = np.arange(3 * 116 * 7 * 5, dtype=np.float32).reshape(3, 116, 7, 5)
y = gen.shuffle_channels(x, 1, 2)
assert y.shape == x.shape
"""

BACKWARD_CODE = """
import numpy as np, gen
x = np.arange(3 * 116 * 7 * 5, dtype=np.float32).reshape(3, 116, 7, 5)
y = gen.shuffle_channels_backward(x, 1, 2)
"""

PRIMITIVE_CODE = """
import numpy as np, gen
md = gen.MemoryDesc((3, 116, 7, 5), "f32", "nChw16c")
p = gen.ShuffleChannels(md, 1, 2)
a, b = gen.Memory(md), gen.Memory(md)
p(a, b)
p(a, b)
"""


def _lines(text):
    return [ln for ln in text.splitlines() if ln.strip()]


def test_verbose_forward_one_line(tmp_path):
    p = run_py(FORWARD_CODE, tmp_path, GEN_VERBOSE="1")
    lines = _lines(p.stderr)
    assert len(lines) == 1, p.stderr
    assert "shuffle_channels" in lines[0], lines[0]
    assert "116" in lines[0], lines[0]  # the shape is named
    assert "f32" in lines[0] or "float32" in lines[0], lines[0]
    assert p.stdout == ""


def test_verbose_backward_names_backward_op(tmp_path):
    p = run_py(BACKWARD_CODE, tmp_path, GEN_VERBOSE="1")
    lines = _lines(p.stderr)
    assert len(lines) == 1, p.stderr
    assert "shuffle_channels_backward" in lines[0], lines[0]
    assert p.stdout == ""


def test_verbose_primitive_one_line_per_call(tmp_path):
    p = run_py(PRIMITIVE_CODE, tmp_path, GEN_VERBOSE="1")
    lines = _lines(p.stderr)
    assert len(lines) == 2, p.stderr
    for ln in lines:
        assert "shuffle_channels" in ln, ln
    assert p.stdout == ""


@pytest.mark.parametrize("code", [FORWARD_CODE, BACKWARD_CODE, PRIMITIVE_CODE])
def test_silent_without_verbose(code, tmp_path):
    p = run_py(code, tmp_path)
    assert p.stdout == "" and p.stderr == ""
    assert os.listdir(tmp_path) == []


def test_kernels_registry():
    ks = gen.kernels("shuffle_channels")
    assert isinstance(ks, list)
    for k in ks:
        assert k["op"] == "shuffle_channels", k
        for key in ("name", "op", "isa", "dtypes", "layout"):
            assert key in k, (key, k)
    allk = gen.kernels()
    assert [k for k in allk if k["op"] == "shuffle_channels"] == ks


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("fn", [gen.shuffle_channels, gen.shuffle_channels_backward],
                         ids=["forward", "backward"])
def test_rank0(fn):
    for x in (np.float32(1.0), np.array(1.0), np.array(3, np.uint8)):
        raises_gen(lambda: fn(x), "rank", "0", "()")
        raises_gen(lambda: fn(x, 0, 1), "rank", "0", "()")


@pytest.mark.parametrize("fn", [gen.shuffle_channels, gen.shuffle_channels_backward],
                         ids=["forward", "backward"])
def test_axis_out_of_range(fn):
    x = np.zeros((2, 12, 3, 5), np.float32)
    raises_gen(lambda: fn(x, 4, 1), "4")
    raises_gen(lambda: fn(x, -5, 1), "-5")
    raises_gen(lambda: fn(x, 100, 1), "100")
    raises_gen(lambda: fn(np.zeros(6, np.float32), 1, 1), "1")
    raises_gen(lambda: fn(np.zeros(6, np.float32), -2, 1), "-2")
    m = gen.Memory(gen.MemoryDesc((2, 12, 3, 5), "f32", "nChw8c"))
    raises_gen(lambda: fn(m, 4, 1), "4")
    raises_gen(lambda: fn(m, -5, 1), "-5")


@pytest.mark.parametrize("fn", [gen.shuffle_channels, gen.shuffle_channels_backward],
                         ids=["forward", "backward"])
@pytest.mark.parametrize("axis", [1.5, 1.0, "1", None, True, np.float32(1)], ids=repr)
def test_non_integer_axis(fn, axis):
    x = np.zeros((2, 12, 3, 5), np.float32)
    raises_gen(lambda: fn(x, axis, 1), repr(axis), str(axis))


@pytest.mark.parametrize("fn", [gen.shuffle_channels, gen.shuffle_channels_backward],
                         ids=["forward", "backward"])
@pytest.mark.parametrize("group", [0, -1, -12, 13, 24, 5, 7, 11])
def test_bad_group(fn, group):
    x = rand((2, 12, 3, 5), np.float32, 50)
    snap = x.copy()
    raises_gen(lambda: fn(x, 1, group), str(group))
    m = src_memory(x, "nChw16c")
    before = bytes(m.data)
    raises_gen(lambda: fn(m, 1, group), str(group))
    raises_gen(lambda: fn(m, -3, group), str(group))
    assert bytes(m.data) == before
    assert ref.same_bits(x, snap)


@pytest.mark.parametrize("fn", [gen.shuffle_channels, gen.shuffle_channels_backward],
                         ids=["forward", "backward"])
@pytest.mark.parametrize("group", [2.0, 1.5, True, False, "2", None, np.float64(3)], ids=repr)
def test_non_integer_group(fn, group):
    """Decision: only integers (Python or NumPy) are groups; 2.0 and True are rejected."""
    x = np.zeros((2, 12, 3, 5), np.float32)
    raises_gen(lambda: fn(x, 1, group), repr(group), str(group))


def test_group_on_other_axes_checked_against_that_axis():
    x = np.zeros((2, 12, 3, 5), np.float32)
    raises_gen(lambda: gen.shuffle_channels(x, 2, 2), "2")     # 3 channels
    raises_gen(lambda: gen.shuffle_channels(x, -1, 3), "3")    # 5 channels
    raises_gen(lambda: gen.shuffle_channels(x, 0, 4), "4")     # 2 channels
    assert gen.shuffle_channels(x, 1, 4).shape == x.shape


def test_bad_source_kinds_and_types():
    for bad in (None, "abc", 3, 1.5, [[1.0, 2.0], [3.0]]):
        raises_gen(lambda: gen.shuffle_channels(bad, 0, 1))
        raises_gen(lambda: gen.shuffle_channels_backward(bad, 0, 1))
    raises_gen(lambda: gen.shuffle_channels(np.zeros((2, 4), np.complex128), 1, 2))
    raises_gen(lambda: gen.shuffle_channels(np.array([["a", "b"]]), 1, 2))
    raises_gen(lambda: gen.shuffle_channels(np.array([[object(), object()]], dtype=object), 1, 2))
    if np.dtype(np.longdouble).itemsize not in (1, 2, 4, 8):
        raises_gen(lambda: gen.shuffle_channels(np.zeros((2, 4), np.longdouble), 1, 2))


def test_memory_with_too_small_buffer():
    md = gen.MemoryDesc((2, 30, 3, 3), "f32", "nChw16c")
    small = _aligned(md.nbytes - 4)[: md.nbytes - 4]
    raises_gen(lambda: gen.Memory(md, small), str(md.nbytes), str(md.nbytes - 4))
    plain = gen.MemoryDesc((2, 30, 3, 3), "f32")
    small2 = _aligned(plain.nbytes)[: plain.nbytes - 1]
    raises_gen(lambda: gen.Memory(plain, small2), str(plain.nbytes), str(plain.nbytes - 1))
    raises_gen(lambda: gen.Memory(plain, bytearray(16)))


def test_failing_primitive_call_writes_nothing():
    dims = (2, 30, 3, 3)
    md = gen.MemoryDesc(dims, "f32", "nChw16c")
    p = gen.ShuffleChannels(md, 1, 5)
    dst = garbage_memory(md, 60)
    snap = bytes(dst.data)
    wrong = gen.Memory(gen.MemoryDesc(dims, "f32", "nhwc"))
    raises_gen(lambda: p(wrong, dst))
    raises_gen(lambda: p(dst, dst))
    assert bytes(dst.data) == snap
