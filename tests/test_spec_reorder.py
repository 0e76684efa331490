"""Acceptance tests for same-dtype gen.reorder / gen.Reorder (bitwise copies),
written from shared/API.md and checked against tests/reference.py."""
import itertools
import zlib

import numpy as np
import pytest

import gen
from checks import desc, raises_gen, run_threads, src_memory

try:
    from . import reference as ref
except ImportError:  # tests/ is not a package
    import reference as ref

BF16 = ref.BF16
NAME_OF = {np.dtype(np.float32): "f32", np.dtype(BF16): "bf16", np.dtype(np.float16): "f16",
           np.dtype(np.int8): "s8", np.dtype(np.uint8): "u8", np.dtype(np.int32): "s32"}


def seed_of(*x):
    return zlib.crc32(repr(x).encode())


def garbage_memory(md, rng):
    m = gen.Memory(md)
    m.data[:] = rng.integers(0, 256, md.nbytes, dtype=np.uint8)
    return m


def check_dst(m, a, spec):
    """dst Memory m must hold a in layout spec, padding zero."""
    raw = np.array(m.data, copy=True)
    lay = ref.make_layout(a.shape, spec)
    got = ref.unpack(raw, a.shape, lay, a.dtype)
    assert ref.same_bits(got, a), "logical content differs"
    if isinstance(spec, str):
        exp = ref.pack(a, spec)
        assert raw.size == exp.size
        bad = np.flatnonzero(raw != exp)
        assert bad.size == 0, "bytes differ (padding not zero?) at byte offsets %s" % bad[:10]


def run_case(a, sspec, dspec, threads=None, rng=None):
    rng = rng or np.random.default_rng(seed_of(a.shape, sspec, dspec))
    src = src_memory(a, sspec)
    before = bytes(src.data)
    dmd = desc(a.shape, a.dtype, dspec)
    dst = garbage_memory(dmd, rng)
    kw = {} if threads is None else {"threads": threads}
    out = gen.reorder(src, dst, **kw)
    assert out is dst
    assert bytes(src.data) == before, "source modified"
    check_dst(dst, a, dspec)
    return bytes(dst.data)


def rand(dims, dt=np.float32, seed=0):
    return ref.random_bits(dims, dt, np.random.default_rng(seed))


# ---------------------------------------------------------------- plain <-> plain

PERMS4 = ["".join(p) for p in itertools.permutations("abcd")]


@pytest.mark.parametrize("tag", PERMS4)
def test_plain_all_4d_permutations(tag):
    a = rand((3, 5, 7, 4), np.float32, seed_of(tag))
    run_case(a, "abcd", tag)
    run_case(a, tag, "abcd")
    run_case(a, tag, tag[::-1])


@pytest.mark.parametrize("dims", [(37, 53), (8, 8), (16, 24), (1, 9), (9, 1), (64, 33)])
@pytest.mark.parametrize("dt", [np.uint8, np.float16, np.float32, np.float64])
def test_2d_transpose_tails(dims, dt):
    a = rand(dims, dt, seed_of(dims, str(dt)))
    run_case(a, "ab", "ba")
    run_case(a, "ba", "ab")


def test_larger_transposes():
    a = rand((4, 64, 28, 28), np.float32, 11)
    run_case(a, "nchw", "nhwc")
    run_case(a, "nhwc", "nchw")
    b = rand((4, 64, 28, 28), np.uint8, 12)
    run_case(b, "nchw", "nhwc")
    c = rand((4, 64, 28, 28), BF16, 13)
    run_case(c, "nhwc", "nchw")


STRIDED = [
    ((3, 5, 7, 4), (200, 40, 5, 1)),      # padded row pitch and plane pitch
    ((3, 5, 7, 4), (1, 3, 15, 105)),      # column-major
    ((3, 5, 7, 4), (160, 1, 20, 5)),      # channels last with gaps
    ((6, 10), (16, 1)),
    ((6, 10), (1, 7)),
]


@pytest.mark.parametrize("dims,st", STRIDED)
@pytest.mark.parametrize("other", ["nchw", "nhwc", "nChw8c", "dcba"])
def test_strided_plain_descs(dims, st, other):
    a = rand(dims, np.float32, seed_of(dims, st))
    if len(dims) == 2:
        other = {"nchw": "ab", "nhwc": "ba", "nChw8c": "aB8b", "dcba": "Ab4a"}[other]
    run_case(a, st, other)
    run_case(a, other, st)


def _numpy_view(kind):
    rng = np.random.default_rng(5)
    base = rng.standard_normal((6, 38, 8, 10)).astype(np.float32)
    if kind == "reversed":
        return base[::-1, :, ::-1, :]
    if kind == "all_reversed":
        return base[::-1, ::-1, ::-1, ::-1]
    if kind == "stepped":
        return base[::2, 1::2, ::3, 1::3]
    if kind == "transposed":
        return base.transpose(3, 1, 0, 2)
    if kind == "fortran":
        return np.asfortranarray(base)
    if kind == "broadcast":
        return np.broadcast_to(base[:1, :, :1, :], (3, 38, 4, 10))
    if kind == "readonly":
        a = base.copy()
        a.flags.writeable = False
        return a
    if kind == "padded_pitch":
        big = np.zeros((6, 38, 8, 16), np.float32)
        big[..., :10] = base
        return big[..., :10]
    if kind == "unaligned":
        st = np.zeros(base.size, dtype=[("pad", "u1"), ("v", "<f4")])
        st["v"] = base.ravel()
        return st["v"].reshape(base.shape)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["reversed", "all_reversed", "stepped", "transposed", "fortran",
                                  "broadcast", "readonly", "padded_pitch", "unaligned"])
@pytest.mark.parametrize("dst_tag", ["nchw", "nhwc", "nChw16c"])
def test_numpy_view_sources(kind, dst_tag):
    a = _numpy_view(kind)
    snap = np.array(a, copy=True)
    out = gen.reorder(a, dst_tag)
    assert isinstance(out, gen.Memory)
    assert out.desc == gen.MemoryDesc(a.shape, "f32", dst_tag)
    assert np.array_equal(a, snap)
    check_dst(out, np.ascontiguousarray(a), dst_tag)
    assert np.array_equal(out.to_array(), a)


# ---------------------------------------------------------------- blocked

PLAIN_BLOCKED = [
    ((3, 19, 5, 7), "nchw", "nChw16c"),
    ((3, 19, 5, 7), "nchw", "nChw8c"),
    ((3, 19, 5, 7), "nhwc", "nChw16c"),
    ((3, 19, 5, 7), "nhwc", "nChw8c"),
    ((3, 19, 5, 7), "chwn", "nChw16c"),
    ((2, 37, 9), "ncw", "nCw16c"),
    ((2, 37, 9), "nwc", "nCw8c"),
    ((2, 21, 3, 4, 5), "ncdhw", "nCdhw16c"),
    ((2, 21, 3, 4, 5), "ndhwc", "nCdhw8c"),
    ((19, 21, 3, 2), "oihw", "OIhw16i16o"),
    ((19, 21, 3, 2), "hwio", "OIhw16o16i"),
    ((19, 21, 3, 2), "oihw", "OIhw4i16o4i"),
    ((19, 21, 3, 2), "ihwo", "Ohwi16o"),
    ((19, 21, 3, 2), "iohw", "ABcd4b16a4b"),
    ((19, 21, 3, 2), "nchw", "NChw16n16c"),
    ((2, 19, 21, 3, 3), "goihw", "gOIhw16i16o"),
    ((33, 35, 1, 1), "oihw", "OIhw4i16o4i"),
    ((37,), "x", "A16a"),
    ((19, 21), "oi", "AB16b16a"),
    ((19, 21), "io", "BA8a4b"),
    ((3, 4, 5, 6, 7), "abcde", "aBCde4c2b"),
]


@pytest.mark.parametrize("dims,plain,blocked", PLAIN_BLOCKED)
@pytest.mark.parametrize("dt", [np.float32, BF16])
def test_plain_blocked_both_ways(dims, plain, blocked, dt):
    a = rand(dims, dt, seed_of(dims, plain, blocked))
    run_case(a, plain, blocked)
    run_case(a, blocked, plain)


BLOCKED_BLOCKED = [
    ((3, 19, 5, 7), "nChw16c", "nChw8c"),
    ((3, 40, 5, 7), "nChw8c", "nChw16c"),
    ((19, 21, 3, 2), "OIhw16i16o", "OIhw16o16i"),
    ((19, 21, 3, 2), "OIhw4i16o4i", "OIhw16i16o"),
    ((19, 21, 3, 2), "OIhw4i16o4i", "Ohwi16o"),
    ((19, 21, 3, 2), "NChw16n16c", "nChw16c"),
    ((19, 21, 3, 2), "ABcd4b16a4b", "Acdb16a"),
    ((2, 19, 21, 3, 3), "gOIhw16i16o", "aBCde4c16b4c"),
    ((2, 21, 3, 4, 5), "nCdhw16c", "nCdhw8c"),
    ((17, 3, 5), "aBc2b4b", "Abc4a4a"),
    ((9, 5, 3), "BAc8a2b", "cAb2a"),
]


@pytest.mark.parametrize("dims,t1,t2", BLOCKED_BLOCKED)
@pytest.mark.parametrize("dt", [np.uint8, np.float32])
def test_blocked_blocked_both_ways(dims, t1, t2, dt):
    a = rand(dims, dt, seed_of(dims, t1, t2))
    run_case(a, t1, t2)
    run_case(a, t2, t1)


def test_dst_padding_is_zeroed_over_garbage():
    a = rand((2, 3, 2, 2), np.float32, 1)  # C=3 padded to 16
    md = gen.MemoryDesc(a.shape, "f32", "nChw16c")
    dst = gen.Memory(md)
    dst.data[:] = 0xFF
    gen.reorder(a, dst)
    lay = ref.layout_from_tag(a.shape, "nChw16c")
    pad = ref.padding_mask(lay)
    raw = np.array(dst.data).view(np.uint32)
    assert pad.sum() == 2 * 13 * 4
    assert not raw[pad].any()
    assert ref.same_bits(raw[~pad].view(np.float32), ref.pack(a, "nChw16c").view(np.float32)[~pad])
    # weights, both axes padded
    w = rand((5, 7, 1, 1), np.float32, 2)
    md = gen.MemoryDesc(w.shape, "f32", "OIhw4i16o4i")
    dst = gen.Memory(md)
    dst.data[:] = 0xAB
    gen.reorder(w, dst)
    assert bytes(dst.data) == ref.pack(w, "OIhw4i16o4i").tobytes()


@pytest.mark.parametrize("dims,tag", [((1, 30, 120, 120), "ABcd32a16b"),
                                       ((1, 30, 120, 120), "ABcd17a16b"),
                                       ((16, 9, 128, 128), "ABcd4b16a4b")])
@pytest.mark.parametrize("dt", [np.uint8, BF16, np.float32])
@pytest.mark.parametrize("threads", [1, 2])
def test_large_padding_zeroed_over_garbage(dims, tag, dt, threads):
    """A destination past the caches whose padding (axis a: 1 of 32 or 17) comes in runs of
    hundreds of bytes after each run of b, and after the tail block of b (30 of 32) too: the
    copy writes it all, at every alignment with 17a. With 4b16a4b (b: 9 of 16) the last 4b
    of each block are zeros in whole lines (u8: runs of 64 bytes, a line each)."""
    a = ref.random_bits(dims, dt, np.random.default_rng(seed_of(dims, str(dt))))
    dst = gen.Memory(gen.MemoryDesc(dims, a.dtype, tag))
    assert dst.desc.nbytes >= 4 << 20
    dst.data[:] = 0xCD
    gen.reorder(a, dst, threads=threads)
    assert bytes(dst.data) == ref.pack(a, tag).tobytes()


@pytest.mark.parametrize("dims,t1,t2", [
    ((1, 19, 1, 1), "nchw", "nChw16c"),
    ((1, 1, 1, 1), "nchw", "nChw16c"),
    ((1, 1, 1, 1), "nhwc", "OIhw4i16o4i"),
    ((1, 5, 1, 7), "nhwc", "nchw"),
    ((7, 1, 1, 3), "dcba", "NChw16n16c"),
    ((1,), "a", "A8a"),
    ((1, 1), "ab", "ba"),
    ((2, 1, 3, 1, 2, 2, 1, 1, 2, 1, 1, 3), "abcdefghijkl", "lkjihgfedcba"),
    ((2, 1, 3, 1, 2, 2, 1, 1, 2, 1, 1, 3), "hgfedcbalkji", "aBcdefghijkL2b4l"),
])
def test_size1_axes_and_high_rank(dims, t1, t2):
    a = rand(dims, np.float32, seed_of(dims, t1))
    run_case(a, t1, t2)
    run_case(a, t2, t1)


# ---------------------------------------------------------------- element types

ALL_TYPES = [np.uint8, np.int8, np.bool_, np.float16, BF16, np.int16, np.uint16,
             np.float32, np.int32, np.float64, np.int64, np.uint64]


@pytest.mark.parametrize("dt", ALL_TYPES, ids=lambda t: np.dtype(t).name)
def test_element_sizes_bit_exact(dt):
    dt = np.dtype(dt)
    for dims, t1, t2 in [((3, 19, 5, 7), "nchw", "nhwc"), ((3, 19, 5, 7), "nhwc", "nChw16c"),
                         ((19, 21, 3, 2), "OIhw4i16o4i", "hwio"), ((37, 53), "ba", "ab")]:
        a = rand(dims, dt, seed_of(dims, dt.name))
        run_case(a, t1, t2)
        out = gen.reorder(a, t2)
        check_dst(out, a, t2)
        expected_dtype = NAME_OF.get(dt, dt)
        assert out.desc.dtype == expected_dtype
        back = out.to_array()
        assert back.dtype == dt
        assert ref.same_bits(back, a)


def test_nan_payloads_and_signalling_nans_kept():
    bits32 = np.array([0x7FC00001, 0xFFA00000, 0x7F800001, 0xFF800000, 0x7FFFFFFF, 0x80000000,
                       0x00000001, 0x7F7FFFFF, 0xFFC12345, 0x7F812345, 0, 1, 2, 3, 4, 5],
                      dtype=np.uint32)
    a = np.tile(bits32, 16 * 3).view(np.float32).reshape(3, 16, 4, 4)
    for t in ["nhwc", "nChw16c", "nChw8c", "dcba"]:
        run_case(a, "nchw", t)
        run_case(a, t, "nchw")
    bits16 = np.array([0x7C01, 0xFC01, 0x7E55, 0x7F81, 0xFF81, 0x7FC1, 0x0001, 0x8000],
                      dtype=np.uint16)
    for dt in (np.float16, BF16):
        b = np.tile(bits16, 2 * 9 * 5).view(dt).reshape(9, 16, 5)
        run_case(b, "abc", "acb")
        run_case(b, "abc", "aBc8b")
    bits64 = np.array([0x7FF0000000000001, 0xFFF8000000000123, 0x7FF4000000000000, 1],
                      dtype=np.uint64)
    c = np.tile(bits64, 30).view(np.float64).reshape(5, 24)
    run_case(c, "ab", "ba")
    run_case(c, "ab", "Ab4a")


# ---------------------------------------------------------------- randomized


def _random_spec(rng, dims):
    if rng.random() < 0.25:
        return ref.random_strides(rng, dims)
    # power-of-two blocks (any mix of them nests); several blocks per axis allowed
    return ref.random_tag(rng, len(dims), max_blocks=3, sizes=(2, 4, 8, 16))


def _random_pairs(seed, count, types, ranks, sizes, max_elems):
    """`count` random layout pairs of random dims, each checked against the reference."""
    rng = np.random.default_rng(seed)
    for i in range(count):
        nd = int(rng.integers(*ranks))
        dims = tuple(int(x) for x in rng.integers(1, sizes, nd))
        while int(np.prod(dims)) > max_elems:
            dims = tuple(max(1, d // 2) for d in dims)
        s1, s2 = _random_spec(rng, dims), _random_spec(rng, dims)
        dt = types[i % len(types)]
        a = ref.random_bits(dims, dt, rng)
        try:
            run_case(a, s1, s2, rng=rng)
        except AssertionError as e:
            raise AssertionError("case %d: dims=%s src=%s dst=%s dtype=%s: %s"
                                 % (i, dims, s1, s2, np.dtype(dt).name, e))


def test_random_layout_pairs():
    _random_pairs(20240601, 120, [np.uint8, np.float16, BF16, np.float32, np.int32, np.float64,
                                  np.int64], (1, 6), 10, 10 ** 9)


@pytest.mark.parametrize("dims,t1,t2", [
    ((7, 5), "Ab3a", "Ab2a"),
    ((7, 5), "Ab3a", "Ab4a3a"),
    ((4, 9, 5), "aBc3b", "aBc2b"),
    ((5,), "A4a", "A3a"),
    ((2, 10, 3, 5), "ABcd4a6b", "ABcd6a4b"),
    ((2, 10, 3, 5), "aBcd3b", "ABcd2a4b"),
])
def test_non_nesting_blocks(dims, t1, t2):
    """Blocks of an axis whose extents do not divide each other (3 and 2): the axis is read
    through a table of its source offsets (it was a gen.Error)."""
    a = rand(dims, np.float32, seed_of(dims, t1, t2))
    check_dst(gen.reorder(src_memory(a, t1), t2), a, t2)


@pytest.mark.parametrize("dims,t1,t2", [((20000, 3), "Ab16a", "Ab3a"),
                                         ((1, 20000, 1, 1), "aBcd16b", "aBcd24b"),
                                         ((129, 128), "AB4a4b", "AB6a6b")])
def test_non_nesting_blocks_of_long_axes_go_through_an_intermediate(dims, t1, t2):
    """The planner takes such axes index by index (a piece per combination of their
    indices) up to GATHER_INDICES combinations (over two axes, their product counts) in
    small calls; past them, src is moved into a dense intermediate and that into dst
    (reorder.Staged), each step a pair that nests. Bit for bit, padding zero, at 1 and 2
    threads, by the function and by the primitive."""
    from gen.ops import reorder as reorder_op
    n = reorder_op.GATHER_INDICES
    assert not isinstance(gen.Reorder(gen.MemoryDesc((n, 2), "f32", "Ab4a"),
                                      gen.MemoryDesc((n, 2), "f32", "Ab3a"))._plan,
                          reorder_op.Staged)
    a = rand(dims, np.float32, seed_of(dims, t1, t2))
    src = src_memory(a, t1)
    p = gen.Reorder(src.desc, gen.MemoryDesc(dims, np.float32, t2))
    assert isinstance(p._plan, reorder_op.Staged)
    for threads in (1, 2):
        check_dst(gen.reorder(src, t2, threads=threads), a, t2)
        out = gen.Memory(p.dst_desc)
        out.data[:] = 0xCD
        check_dst(p(src, out, threads=threads), a, t2)


def test_random_medium_sizes():
    """Sizes large enough for vector tiles, with odd tails, on random layout pairs."""
    _random_pairs(777, 40, [np.uint8, BF16, np.float32, np.float64], (2, 5), 41, 60000)


@pytest.mark.parametrize("dims,dt", [((16, 64, 56, 56), np.float32), ((32, 64, 56, 56), BF16),
                                     ((8, 67, 61, 59), np.uint8)])
@pytest.mark.parametrize("threads", [1, 2])
def test_large_tensors(dims, dt, threads):
    """Destinations far beyond the caches (streaming-store paths), checked with NumPy."""
    rng = np.random.default_rng(seed_of(dims, threads))
    a = ref.random_bits(dims, dt, rng)
    n, c, h, w = dims
    nhwc = gen.reorder(a, "nhwc", threads=threads)
    assert bytes(nhwc.data) == a.transpose(0, 2, 3, 1).tobytes()
    back = gen.reorder(nhwc, "nchw", threads=threads)
    assert bytes(back.data) == a.tobytes()
    cp = -(-c // 16) * 16
    pad = np.zeros((n, cp, h, w), a.dtype)
    pad[:, :c] = a
    exp = pad.reshape(n, cp // 16, 16, h, w).transpose(0, 1, 3, 4, 2).tobytes()
    dst = gen.Memory(gen.MemoryDesc(dims, a.dtype, "nChw16c"))
    dst.data[:] = 0xCD
    gen.reorder(nhwc, dst, threads=threads)
    assert bytes(dst.data) == exp
    assert bytes(gen.reorder(dst, "nchw", threads=threads).data) == a.tobytes()


# ---------------------------------------------------------------- argument kinds


def test_dst_as_memory_desc_and_string():
    a = rand((3, 19, 5, 7), np.float32, 21)
    src = src_memory(a, "nchw")
    md = gen.MemoryDesc(a.shape, "f32", "nChw16c")
    out = gen.reorder(src, md)
    assert isinstance(out, gen.Memory)
    assert out.desc == md
    check_dst(out, a, "nChw16c")
    out2 = gen.reorder(src, "nChw16c")
    assert isinstance(out2, gen.Memory)
    assert out2.desc == md  # dtype is src's
    assert bytes(out2.data) == bytes(out.data)
    assert not np.shares_memory(out.data, out2.data)
    assert not np.shares_memory(out.data, src.data)
    # generic tag string equals the alias
    out3 = gen.reorder(src, "aBcd16b")
    assert out3.desc == md and bytes(out3.data) == bytes(out.data)
    # dtype of a string destination is the source's
    b = rand((4, 6), np.uint8, 22)
    o = gen.reorder(b, "ba")
    assert o.desc == gen.MemoryDesc((4, 6), "u8", "ba")
    assert bytes(o.data) == b.T.tobytes()


def test_numpy_source_with_memory_destination():
    a = rand((3, 19, 5, 7), np.int32, 23)
    md = gen.MemoryDesc(a.shape, "s32", "nChw8c")
    user = np.zeros(md.nbytes + 64, np.uint8)
    off = (-user.__array_interface__["data"][0]) % 64
    buf = user[off:off + md.nbytes]
    buf[:] = 0x5A
    dst = gen.Memory(md, buf)
    out = gen.reorder(a, dst)
    assert out is dst
    assert bytes(buf) == ref.pack(a, "nChw8c").tobytes()  # written in place, user buffer


def test_numpy_source_not_modified():
    a = rand((3, 19, 5, 7), np.float32, 24)
    snap = a.copy()
    gen.reorder(a, "nChw16c")
    gen.reorder(a, "nhwc")
    assert ref.same_bits(a, snap)


@pytest.mark.parametrize("t1,t2", [("nchw", "nhwc"), ("nchw", "nChw16c"), ("OIhw4i16o4i", "oihw"),
                                   ("nhwc", "NChw16n16c")])
def test_threads_bit_identical(t1, t2):
    a = rand((8, 48, 17, 19), np.float32, seed_of(t1, t2))
    r1 = run_case(a, t1, t2, threads=1)
    r2 = run_case(a, t1, t2, threads=2)
    r0 = run_case(a, t1, t2)
    assert r1 == r2 == r0


def test_primitive_reuse():
    dims = (3, 19, 5, 7)
    smd = gen.MemoryDesc(dims, "bf16", "nhwc")
    dmd = gen.MemoryDesc(dims, "bf16", "nChw16c")
    p = gen.Reorder(smd, dmd)
    rng = np.random.default_rng(25)
    for i in range(4):
        a = ref.random_bits(dims, BF16, rng)
        src = src_memory(a, "nhwc")
        dst = garbage_memory(dmd, rng)
        p(src, dst)
        check_dst(dst, a, "nChw16c")
    # a Memory whose desc is equal (written differently) is accepted
    a = ref.random_bits(dims, BF16, rng)
    src = src_memory(a, "acdb")
    dst = gen.Memory(gen.MemoryDesc(dims, ref.BF16, "aBcd16b"))
    p(src, dst)
    check_dst(dst, a, "nChw16c")


def test_primitive_plain_to_plain_strided():
    dims = (6, 10)
    smd = gen.MemoryDesc(dims, "f32", strides=(16, 1))
    dmd = gen.MemoryDesc(dims, "f32", "ba")
    p = gen.Reorder(smd, dmd)
    a = rand(dims, np.float32, 26)
    src = src_memory(a, (16, 1))
    dst = gen.Memory(dmd)
    p(src, dst)
    check_dst(dst, a, "ba")


def test_primitive_rejects_other_descs():
    dims = (3, 19, 5, 7)
    p = gen.Reorder(gen.MemoryDesc(dims, "f32", "nchw"), gen.MemoryDesc(dims, "f32", "nChw16c"))
    good_src = gen.Memory(gen.MemoryDesc(dims, "f32", "nchw"))
    good_dst = gen.Memory(gen.MemoryDesc(dims, "f32", "nChw16c"))
    p(good_src, good_dst)
    for bad_src in [gen.Memory(gen.MemoryDesc(dims, "f32", "nhwc")),
                    gen.Memory(gen.MemoryDesc(dims, "s32", "nchw")),
                    gen.Memory(gen.MemoryDesc((3, 19, 5, 8), "f32", "nchw"))]:
        raises_gen(lambda: p(bad_src, good_dst))
    for bad_dst in [gen.Memory(gen.MemoryDesc(dims, "f32", "nChw8c")),
                    gen.Memory(gen.MemoryDesc(dims, "f32", "nchw")),
                    gen.Memory(gen.MemoryDesc(dims, "s32", "nChw16c"))]:
        raises_gen(lambda: p(good_src, bad_dst))
    assert not good_dst.data.any()  # nothing written by the failing calls


# ---------------------------------------------------------------- errors


def test_dims_and_rank_mismatch():
    a = np.zeros((2, 3, 4, 5), np.float32)
    raises_gen(lambda: gen.reorder(a, gen.MemoryDesc((2, 3, 5, 4), "f32", "nhwc")),
               "(2, 3, 5, 4)", "2x3x5x4", "[2, 3, 5, 4]", "2,3,5,4")
    raises_gen(lambda: gen.reorder(a, gen.MemoryDesc((2, 3, 4), "f32")))
    raises_gen(lambda: gen.reorder(a, gen.Memory(gen.MemoryDesc((2, 3, 4, 5, 1), "f32"))))
    raises_gen(lambda: gen.reorder(a, gen.Memory(gen.MemoryDesc((1, 3, 4, 5), "f32"))))
    raises_gen(lambda: gen.reorder(a, "abc"), "abc")
    raises_gen(lambda: gen.reorder(a, "ncdhw"), "ncdhw")
    m = gen.Memory(gen.MemoryDesc((2, 3, 4, 5), "f32", "nChw16c"))
    raises_gen(lambda: gen.reorder(m, gen.MemoryDesc((2, 16, 4, 5), "f32")))
    raises_gen(lambda: gen.Reorder(gen.MemoryDesc((2, 3), "f32"), gen.MemoryDesc((3, 2), "f32")))
    raises_gen(lambda: gen.Reorder(gen.MemoryDesc((2, 3), "f32"), gen.MemoryDesc((2, 3, 1), "f32")))


@pytest.mark.parametrize("tag", ["abcz", "foo", "nChw17", "aBcd0b"])
def test_unknown_destination_tag(tag):
    a = np.zeros((2, 3, 4, 5), np.float32)
    raises_gen(lambda: gen.reorder(a, tag), tag)
    m = gen.Memory.from_array(a)
    raises_gen(lambda: gen.reorder(m, tag), tag)


def test_unknown_source_dtype():
    raises_gen(lambda: gen.reorder(np.zeros((2, 3), np.clongdouble), "ba"))
    raises_gen(lambda: gen.reorder(np.array([["a", "b"]]), "ba"))
    raises_gen(lambda: gen.reorder(np.array([[object()]], dtype=object), "ba"))


def test_bad_argument_kinds():
    a = np.zeros((2, 3), np.float32)
    raises_gen(lambda: gen.reorder(None, "ab"))
    raises_gen(lambda: gen.reorder(a, None))
    raises_gen(lambda: gen.reorder(a, 42))
    raises_gen(lambda: gen.reorder("ab", "ba"))


def test_overlap_numpy_source_views_destination():
    md = gen.MemoryDesc((8, 16), "f32")
    dst = gen.Memory(md)
    rng = np.random.default_rng(30)
    dst.data[:] = rng.integers(0, 256, md.nbytes, dtype=np.uint8)
    snap = bytes(dst.data)
    view = dst.data.view(np.float32).reshape(8, 16)
    raises_gen(lambda: gen.reorder(view, dst))
    # transposed view of the destination's own buffer
    md2 = gen.MemoryDesc((16, 8), "f32", "ba")
    dst2 = gen.Memory(md2)
    v2 = dst2.data.view(np.float32).reshape(8, 16).T
    raises_gen(lambda: gen.reorder(v2, dst2))
    # partial overlap: a slice of dst's buffer
    part = dst.data[32:32 + 4 * 16].view(np.float32).reshape(4, 4)
    dst3 = gen.Memory(gen.MemoryDesc((4, 4), "f32"), dst.data)  # bytes 0..63
    raises_gen(lambda: gen.reorder(part, dst3))
    # strides that are not a multiple of the item size (a field of 5-byte records): the
    # source is read through a copy, the overlap is still the caller's array's
    recs = np.zeros(64, dtype=[("a", "f4"), ("b", "u1")])
    dst4 = gen.Memory(gen.MemoryDesc((4, 4), "f32"), recs.view(np.uint8)[:64])
    raises_gen(lambda: gen.reorder(recs["a"][:16].reshape(4, 4), dst4))
    assert bytes(dst.data) == snap  # failed reorders wrote nothing


def test_overlap_memory_source_shares_destination_buffer():
    buf = np.zeros(4096, np.uint8)
    off = (-buf.__array_interface__["data"][0]) % 64
    buf = buf[off:off + 2048]
    smd = gen.MemoryDesc((8, 16), "f32", "ab")
    dmd = gen.MemoryDesc((8, 16), "f32", "ba")
    src = gen.Memory(smd, buf)
    dst = gen.Memory(dmd, buf)
    raises_gen(lambda: gen.reorder(src, dst))
    p = gen.Reorder(smd, dmd)
    raises_gen(lambda: p(src, dst))
    # partially overlapping
    dst2 = gen.Memory(dmd, buf[256:])
    raises_gen(lambda: gen.reorder(src, dst2))
    raises_gen(lambda: p(src, dst2))
    # disjoint parts of one buffer are fine
    dst3 = gen.Memory(dmd, buf[512:])
    src.data[:] = np.arange(512, dtype=np.uint8)
    gen.reorder(src, dst3)
    assert ref.same_bits(dst3.to_array(), src.to_array())


def test_read_only_destination_buffer():
    md = gen.MemoryDesc((4, 4), "f32")
    ro = np.zeros(64, np.uint8)
    ro.flags.writeable = False
    raises_gen(lambda: gen.Memory(md, ro))
    raises_gen(lambda: gen.Memory(gen.MemoryDesc((4, 4), "u8"), bytes(16)))


@pytest.mark.parametrize("bad", [-1, "two", 1.5])
def test_bad_threads_argument(bad):
    a = np.zeros((2, 3), np.float32)
    raises_gen(lambda: gen.reorder(a, "ba", threads=bad))


def test_concurrent_python_threads():

    dims = (4, 35, 9, 11)
    smd = gen.MemoryDesc(dims, "f32", "nchw")
    dmd = gen.MemoryDesc(dims, "f32", "nChw16c")
    p = gen.Reorder(smd, dmd)
    errors = []

    def work(tid):
        try:
            rng = np.random.default_rng(100 + tid)
            for i in range(15):
                a = ref.random_bits(dims, np.float32, rng)
                exp = ref.pack(a, "nChw16c").tobytes()
                if i % 2:
                    out = gen.reorder(a, "nChw16c")
                else:
                    out = gen.Memory(dmd)
                    out.data[:] = 0xEE
                    p(src_memory(a, "nchw"), out)
                if bytes(out.data) != exp:
                    errors.append((tid, i))
        except Exception as e:  # pragma: no cover - reported below
            errors.append((tid, repr(e)))

    run_threads(work, 4)
    assert not errors, errors
