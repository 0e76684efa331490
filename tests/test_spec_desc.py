"""Acceptance tests for gen.MemoryDesc, written from shared/API.md.

Checked against the independent reference in tests/reference.py.
"""
import itertools
import warnings

import numpy as np
import pytest

import gen
from checks import raises_gen

try:
    from . import reference as ref
except ImportError:  # tests/ is not a package
    import reference as ref

BF16 = ref.BF16

TABLE = [
    ("f32", np.float32),
    ("bf16", BF16),
    ("f16", np.float16),
    ("s8", np.int8),
    ("u8", np.uint8),
    ("s32", np.int32),
]
OTHER = [np.float64, np.int16, np.uint16, np.int64, np.uint64, np.bool_]

RANK_DIMS = {
    1: (37,),
    2: (19, 21),
    3: (3, 19, 5),
    4: (19, 21, 3, 2),
    5: (2, 19, 21, 2, 3),
}


def check_attrs(md, dims, lay, itemsize):
    assert tuple(md.dims) == tuple(dims)
    assert md.ndims == len(dims)
    assert tuple(md.padded_dims) == lay.padded_dims
    assert tuple(md.strides) == lay.strides
    assert tuple(tuple(b) for b in md.inner_blocks) == lay.inner_blocks
    assert md.nelems == int(np.prod(dims))
    assert md.is_plain == (len(lay.inner_blocks) == 0)
    assert md.nbytes == int(np.prod(lay.padded_dims)) * itemsize


# ---------------------------------------------------------------- reference


def test_reference_plain_matches_numpy_transpose():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    for tag, axes in [("nchw", (0, 1, 2, 3)), ("nhwc", (0, 2, 3, 1)), ("chwn", (1, 2, 3, 0)),
                      ("ihwo", (1, 2, 3, 0)), ("iohw", (1, 0, 2, 3)), ("hwio", (2, 3, 1, 0)),
                      ("dcba", (3, 2, 1, 0))]:
        raw = ref.pack(a, tag)
        assert np.array_equal(raw.view(np.float32), a.transpose(axes).ravel()), tag
        assert ref.same_bits(ref.unpack(raw, a.shape, tag, np.float32), a)
    # strides agree with NumPy's as_strided
    st = (40, 1, 8)
    b = rng.standard_normal((2, 5, 4)).astype(np.float32)
    raw = ref.pack(b, st)
    view = np.lib.stride_tricks.as_strided(raw.view(np.float32), b.shape, tuple(s * 4 for s in st))
    assert np.array_equal(view, b)


def test_reference_blocked_matches_reshape_transpose():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 20, 3, 4)).astype(np.float32)
    p = np.zeros((2, 32, 3, 4), np.float32)
    p[:, :20] = a
    exp = p.reshape(2, 2, 16, 3, 4).transpose(0, 1, 3, 4, 2).ravel()
    assert np.array_equal(ref.pack(a, "nChw16c").view(np.float32), exp)

    w = rng.standard_normal((20, 40, 2, 3)).astype(np.float32)
    p = np.zeros((32, 48, 2, 3), np.float32)
    p[:20, :40] = w
    # O = o1*16+o2 ; I = i1*16 + i2*4 + i3 ; layout O1 I1 h w i2 o2 i3
    exp = p.reshape(2, 16, 3, 4, 4, 2, 3).transpose(0, 2, 5, 6, 3, 1, 4).ravel()
    assert np.array_equal(ref.pack(w, "OIhw4i16o4i").view(np.float32), exp)

    g = rng.standard_normal((2, 17, 5, 2, 2)).astype(np.float32)
    p = np.zeros((2, 32, 16, 2, 2), np.float32)
    p[:, :17, :5] = g
    exp = p.reshape(2, 2, 16, 1, 16, 2, 2).transpose(0, 1, 3, 5, 6, 4, 2).ravel()
    assert np.array_equal(ref.pack(g, "gOIhw16i16o").view(np.float32), exp)


def test_reference_slow_formula_and_roundtrip():
    rng = np.random.default_rng(2)
    for tag in ["ABcd4b16a4b", "aBCde16c16b", "Acdb16a", "cBa4b2b", "bAc2a3a"]:
        dims = (5, 7, 3, 2, 3)[: ref.tag_ndims(tag)]
        lay = ref.layout_from_tag(dims, tag)
        off = ref.offsets(lay)
        for idx in itertools.product(*map(range, dims)):
            assert off[idx] == ref.offset_slow(lay, idx)
        offp = ref.offsets(lay, padded=True)
        assert len(np.unique(offp)) == offp.size == lay.footprint()
    for i in range(100):
        nd = int(rng.integers(1, 6))
        dims = tuple(int(x) for x in rng.integers(1, 7, nd))
        tag = ref.random_tag(rng, nd)
        dt = [np.uint8, np.float16, np.float32, np.float64, BF16][i % 5]
        a = ref.random_bits(dims, dt, rng)
        assert ref.same_bits(ref.unpack(ref.pack(a, tag), dims, tag, dt), a)
        st = ref.random_strides(rng, dims)
        assert ref.same_bits(ref.unpack(ref.pack(a, st), dims, st, dt), a)


# ---------------------------------------------------------------- basics


def test_error_is_value_error():
    assert issubclass(gen.Error, ValueError)


@pytest.mark.parametrize("alias", sorted(ref.ALIASES))
def test_alias_attributes_and_equality(alias):
    generic = ref.ALIASES[alias]
    nd = ref.tag_ndims(generic)
    dims = RANK_DIMS[nd]
    lay = ref.layout_from_tag(dims, generic)
    md = gen.MemoryDesc(dims, "f32", alias)
    check_attrs(md, dims, lay, 4)
    assert md.dtype == "f32"
    mg = gen.MemoryDesc(dims, "f32", generic)
    assert md == mg
    assert hash(md) == hash(mg)
    assert isinstance(md.format, str)
    assert gen.MemoryDesc(dims, "f32", md.format) == md


GENERIC_TAGS = [
    ("a", (5,)),
    ("ab", (3, 4)),
    ("ba", (3, 4)),
    ("abcd", (2, 3, 4, 5)),
    ("acdb", (2, 3, 4, 5)),
    ("dcba", (2, 3, 4, 5)),
    ("aBcd16b", (2, 19, 3, 5)),
    ("ABcd16b16a", (17, 19, 3, 2)),
    ("ABcd4b16a4b", (17, 19, 3, 2)),
    ("Abc4a4a", (19, 3, 2)),
    ("aBc2b4b", (3, 13, 2)),
    ("BAc8a2b", (9, 5, 3)),
    ("cAdb8a", (11, 2, 3, 4)),
    ("Ab16a", (5, 3)),
    ("aB8b", (2, 3)),
    ("ABC2a3b4c", (3, 4, 5)),
    ("abcdefghijkl", (2, 3, 1, 2, 1, 2, 1, 1, 2, 1, 1, 3)),
    ("lkjihgfedcba", (2, 3, 1, 2, 1, 2, 1, 1, 2, 1, 1, 3)),
    ("hgfedcbalkji", (2, 3, 1, 2, 1, 2, 1, 1, 2, 1, 1, 3)),
    ("aBcdefghijkL2b4l", (2, 3, 1, 2, 1, 2, 1, 1, 2, 1, 1, 3)),
]


@pytest.mark.parametrize("tag,dims", GENERIC_TAGS)
def test_generic_tag_attributes(tag, dims):
    lay = ref.layout_from_tag(dims, tag)
    for name, npt in [("f32", np.float32), ("u8", np.uint8), ("bf16", BF16)]:
        md = gen.MemoryDesc(dims, name, tag)
        check_attrs(md, dims, lay, np.dtype(npt).itemsize)
        assert isinstance(md.format, str)
        assert gen.MemoryDesc(dims, name, md.format) == md


def test_default_format_is_dense_row_major():
    for dims in [(7,), (3, 4), (2, 3, 4, 5), (2, 1, 3, 1, 2, 2, 1, 1, 2, 1, 1, 3)]:
        nd = len(dims)
        md = gen.MemoryDesc(dims, "f32")
        mt = gen.MemoryDesc(dims, "f32", ref.LETTERS[:nd])
        assert md == mt and hash(md) == hash(mt)
        assert tuple(md.strides) == ref.dense_strides(dims)
        assert md.is_plain and tuple(md.inner_blocks) == ()
        assert tuple(md.padded_dims) == tuple(dims)


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_dense_strides_equal_their_tag(order):
    dims = (2, 3, 4, 5)
    tag = "".join(ref.LETTERS[a] for a in order)
    st = ref.dense_strides(dims, order)
    ms = gen.MemoryDesc(dims, "f32", strides=st)
    mt = gen.MemoryDesc(dims, "f32", tag)
    assert ms == mt
    assert hash(ms) == hash(mt)
    assert tuple(mt.strides) == st
    assert ms.format == mt.format
    assert isinstance(mt.format, str)
    assert ms.nbytes == mt.nbytes == 120 * 4
    # a different dense order is a different descriptor
    other = gen.MemoryDesc(dims, "f32", strides=ref.dense_strides(dims, order[::-1]))
    assert other != mt


@pytest.mark.parametrize("dims,strides", [
    ((3, 5), (8, 1)),
    ((3, 5), (1, 4)),
    ((2, 3, 4), (1, 3, 12)),
    ((2, 3, 4, 5), (100, 1, 25, 5)),
    ((4, 6), (64, 2)),
])
def test_strided_desc(dims, strides):
    md = gen.MemoryDesc(dims, "f32", strides=strides)
    assert tuple(md.dims) == dims
    assert tuple(md.strides) == strides
    assert tuple(md.padded_dims) == dims
    assert tuple(md.inner_blocks) == ()
    assert md.is_plain
    assert md.nelems == int(np.prod(dims))
    assert md.format is None  # no tag describes a non-dense layout
    lay = ref.layout_from_strides(dims, strides)
    assert lay.footprint() * 4 <= md.nbytes <= max(d * s for d, s in zip(dims, strides)) * 4
    assert md == gen.MemoryDesc(dims, np.float32, strides=list(strides))
    assert md != gen.MemoryDesc(dims, "f32")


def test_size1_axis_stride_does_not_overlap():
    md = gen.MemoryDesc((1, 5), "f32", strides=(1, 1))
    assert tuple(md.dims) == (1, 5)
    assert md.nbytes >= 20


@pytest.mark.parametrize("name,npt", TABLE)
def test_table_dtypes(name, npt):
    dims = (2, 19, 3)
    a = gen.MemoryDesc(dims, name, "aBc16b")
    b = gen.MemoryDesc(dims, npt, "aBc16b")
    c = gen.MemoryDesc(dims, np.dtype(npt), "aBc16b")
    assert a == b == c
    assert hash(a) == hash(b) == hash(c)
    for m in (a, b, c):
        assert m.dtype == name
        assert isinstance(m.dtype, str)
    assert a.nbytes == 2 * 32 * 3 * np.dtype(npt).itemsize


@pytest.mark.parametrize("npt", OTHER)
def test_other_numpy_dtypes(npt):
    dims = (3, 5)
    a = gen.MemoryDesc(dims, npt)
    b = gen.MemoryDesc(dims, np.dtype(npt))
    assert a == b and hash(a) == hash(b)
    assert isinstance(a.dtype, np.dtype)
    assert a.dtype == np.dtype(npt)
    assert a.nbytes == 15 * np.dtype(npt).itemsize


def test_inequality():
    dims = (2, 3, 4, 5)
    base = gen.MemoryDesc(dims, "f32", "nchw")
    assert base != gen.MemoryDesc(dims, "f32", "nhwc")
    assert base != gen.MemoryDesc(dims, "s32", "nchw")
    assert base != gen.MemoryDesc((2, 3, 5, 4), "f32", "nchw")
    assert base != gen.MemoryDesc(dims, "f32", "nChw8c")
    assert gen.MemoryDesc(dims, "f32", "nChw8c") != gen.MemoryDesc(dims, "f32", "nChw16c")
    assert gen.MemoryDesc((32, 32, 3, 3), "f32", "OIhw16i16o") != \
        gen.MemoryDesc((32, 32, 3, 3), "f32", "OIhw16o16i")
    assert gen.MemoryDesc((2, 4), "f16") != gen.MemoryDesc((2, 4), "bf16")
    assert gen.MemoryDesc((2, 4), "s8") != gen.MemoryDesc((2, 4), "u8")
    # usable as dict keys
    d = {base: 1, gen.MemoryDesc(dims, "f32", "abcd"): 2}
    assert len(d) == 1


def test_padded_dims_and_nbytes_multi_block():
    md = gen.MemoryDesc((17, 19, 3, 2), "f32", "OIhw4i16o4i")
    assert tuple(md.padded_dims) == (32, 32, 3, 2)
    assert tuple(tuple(b) for b in md.inner_blocks) == ((1, 4), (0, 16), (1, 4))
    assert md.nbytes == 32 * 32 * 6 * 4
    assert md.nelems == 17 * 19 * 6
    assert not md.is_plain
    assert tuple(md.strides) == (2 * 6 * 256, 6 * 256, 2 * 256, 256)

    md = gen.MemoryDesc((3, 13, 2), "u8", "aBc2b4b")
    assert tuple(md.padded_dims) == (3, 16, 2)
    assert md.nbytes == 3 * 16 * 2


# ---------------------------------------------------------------- permute_axes


PERMUTE_CASES = [
    ((2, 3, 4, 5), "nchw", (0, 3, 1, 2)),
    ((2, 3, 4, 5), "nhwc", (1, 0, 3, 2)),
    ((2, 19, 3, 5), "nChw16c", (0, 3, 1, 2)),
    ((2, 19, 3, 5), "nChw8c", (3, 2, 1, 0)),
    ((17, 19, 3, 2), "OIhw4i16o4i", (1, 0, 2, 3)),
    ((17, 19, 3, 2), "OIhw16i16o", (2, 3, 0, 1)),
    ((2, 17, 5, 2, 3), "gOIhw16i16o", (4, 0, 2, 1, 3)),
    ((17, 19, 3, 2), "NChw16n16c", (0, 2, 1, 3)),
    ((3, 5), (8, 1), (1, 0)),
    ((2, 3, 4), (1, 3, 12), (2, 0, 1)),
]


@pytest.mark.parametrize("dims,spec,perm", PERMUTE_CASES)
def test_permute_axes(dims, spec, perm):
    md = (gen.MemoryDesc(dims, "s32", spec) if isinstance(spec, str)
          else gen.MemoryDesc(dims, "s32", strides=spec))
    out = md.permute_axes(perm)
    for i in range(len(dims)):
        assert out.dims[perm[i]] == md.dims[i]
        assert out.padded_dims[perm[i]] == md.padded_dims[i]
        assert out.strides[perm[i]] == md.strides[i]
    assert tuple(tuple(b) for b in out.inner_blocks) == tuple(
        (perm[a], b) for a, b in ref.make_layout(dims, spec).inner_blocks)
    assert out.nbytes == md.nbytes
    assert out.dtype == "s32"
    # same bytes: the permuted view reads what np.transpose says
    a = (np.arange(int(np.prod(dims)), dtype=np.int32) + 1).reshape(dims)
    raw = ref.pack(a, spec, nbytes_total=md.nbytes)
    got = ref.unpack(raw, out.dims, ref.layout_of_desc(out), np.int32)
    assert np.array_equal(got, np.transpose(a, np.argsort(perm)))
    # inverse permutation gives back the original
    assert out.permute_axes(tuple(int(i) for i in np.argsort(perm))) == md
    # identity
    assert md.permute_axes(tuple(range(len(dims)))) == md


def test_permute_axes_equals_known_tags():
    md = gen.MemoryDesc((2, 3, 4, 5), "f32", "nchw")
    assert md.permute_axes((0, 3, 1, 2)) == gen.MemoryDesc((2, 4, 5, 3), "f32", "adbc")
    md = gen.MemoryDesc((2, 19, 3, 5), "f32", "nChw16c")
    assert md.permute_axes((0, 3, 1, 2)) == gen.MemoryDesc((2, 3, 5, 19), "f32", "aDbc16d")
    md = gen.MemoryDesc((17, 19, 3, 2), "f32", "OIhw16i16o")
    assert md.permute_axes((1, 0, 2, 3)) == gen.MemoryDesc((19, 17, 3, 2), "f32", "BAcd16a16b")
    md = gen.MemoryDesc((2, 3, 4, 5), "f32", "nchw")
    assert md.permute_axes((1, 0, 2, 3)) == gen.MemoryDesc((3, 2, 4, 5), "f32", "iohw")


def test_permute_axes_random():
    rng = np.random.default_rng(7)
    for _ in range(25):
        nd = int(rng.integers(1, 6))
        dims = tuple(int(x) for x in rng.integers(1, 6, nd))
        tag = ref.random_tag(rng, nd)
        perm = tuple(int(p) for p in rng.permutation(nd))
        md = gen.MemoryDesc(dims, "u8", tag)
        out = md.permute_axes(perm)
        assert tuple(out.dims) == tuple(dims[i] for i in np.argsort(perm))
        a = ref.random_bits(dims, np.uint8, rng)
        raw = ref.pack(a, tag)
        got = ref.unpack(raw, out.dims, ref.layout_of_desc(out), np.uint8)
        assert np.array_equal(got, np.transpose(a, np.argsort(perm))), (tag, perm)


@pytest.mark.parametrize("perm,names", [
    ((0, 0, 1, 2), ("0,0,1,2",)),
    ((0, 1, 2, 4), ("0,1,2,4", "4")),
    ((0, 1, 2, -1), ("0,1,2,-1", "-1")),
    ((0, 1, 2), ("0,1,2",)),
    ((0, 1, 2, 3, 4), ("0,1,2,3,4",)),
    ((3, 1, 1, 0), ("3,1,1,0",)),
])
def test_permute_axes_invalid(perm, names):
    md = gen.MemoryDesc((2, 3, 4, 5), "f32", "nchw")
    raises_gen(lambda: md.permute_axes(perm), *names)


# ---------------------------------------------------------------- reshape


def _desc(dims, dtype, spec):
    if isinstance(spec, str):
        return gen.MemoryDesc(dims, dtype, spec)
    return gen.MemoryDesc(dims, dtype, strides=spec)


def _check_reshape_result(md, spec, newdims, out):
    """out must be a desc over the same bytes holding a.reshape(newdims)."""
    dims = tuple(md.dims)
    assert tuple(out.dims) == tuple(newdims)
    assert out.dtype == md.dtype
    assert out.nbytes <= md.nbytes
    a = (np.arange(int(np.prod(dims)), dtype=np.int32) + 1).reshape(dims)
    raw = ref.pack(a, spec, nbytes_total=md.nbytes)
    lay = ref.layout_of_desc(out)
    assert lay.footprint() * 4 <= md.nbytes
    got = ref.unpack(raw, newdims, lay, np.int32)
    assert np.array_equal(got, a.reshape(newdims))
    # padding of the new view lands only on padding of the old one (zeros)
    flat = raw[: lay.footprint() * 4].view(np.int32)
    assert not flat[ref.padding_mask(lay)].any()


MUST_RESHAPE = [
    ((2, 3, 4, 5), "abcd", (6, 20)),
    ((2, 3, 4, 5), "abcd", (2, 60)),
    ((2, 3, 4, 5), "abcd", (120,)),
    ((2, 3, 4, 5), "abcd", (2, 3, 20)),
    ((2, 3, 4, 5), "abcd", (1, 2, 3, 4, 5)),
    ((2, 3, 4, 5), "abcd", (2, 3, 4, 5, 1)),
    ((2, 3, 4, 5), "abcd", (2, 1, 3, 1, 4, 5)),
    ((2, 3, 4, 5), "abcd", (6, 2, 2, 5)),
    ((2, 3, 4, 5), "nhwc", (2, 3, 20)),
    ((2, 3, 4, 5), "nhwc", (2, 3, 4, 5, 1)),
    ((2, 3, 4, 5), "nhwc", (1, 2, 3, 2, 2, 5)),
    ((2, 3, 20), "acb", (2, 3, 4, 5)),
    ((1, 3, 1, 5), "acdb", (3, 5)),
    ((3, 5), (8, 1), (3, 5, 1)),
    ((3, 5), (8, 1), (1, 3, 5)),
    ((3, 5), (8, 1), (3, 1, 5)),
    ((3, 5, 4), (24, 4, 1), (3, 20)),
    ((3, 5, 4), (24, 4, 1), (3, 5, 2, 2)),
    ((2, 32, 3, 3), "nChw16c", (2, 2, 16, 3, 3)),
    ((2, 32, 3, 3), "nChw16c", (2, 32, 9)),
    ((2, 32, 3, 3), "nChw16c", (2, 32, 3, 3, 1)),
    ((2, 32, 3, 3), "nChw16c", (1, 2, 32, 3, 3)),
    ((2, 32, 3, 3), "nChw16c", (2, 1, 32, 3, 3)),
    ((2, 64, 3, 3), "nChw16c", (2, 2, 32, 3, 3)),
    ((2, 64, 3, 3), "nChw16c", (2, 4, 16, 3, 3)),
    ((2, 20, 3, 3), "nChw16c", (2, 20, 9)),
    ((2, 20, 3, 3), "nChw16c", (1, 2, 20, 3, 3)),
    ((2, 20, 3, 3), "nChw8c", (2, 20, 3, 3, 1)),
    ((32, 32, 3, 3), "OIhw16i16o", (2, 16, 32, 3, 3)),
    ((32, 32, 3, 3), "OIhw16i16o", (32, 32, 9)),
    ((32, 32, 3, 3), "OIhw16i16o", (32, 2, 16, 3, 3)),
    ((32, 48, 3, 3), "OIhw4i16o4i", (32, 48, 9)),
    ((32, 48, 3, 3), "OIhw4i16o4i", (32, 3, 16, 3, 3)),
    ((2, 32, 16, 3, 3), "gOIhw16i16o", (2, 32, 16, 9)),
    ((2, 32, 16, 3, 3), "gOIhw16i16o", (1, 2, 32, 16, 3, 3)),
    # a new axis made of pieces of several old ones (they lie one after the other)
    ((2, 3), "ab", (3, 2)),
    ((2, 3, 4), "abc", (4, 6)),
    ((2, 3, 4, 5), "abcd", (4, 30)),
    ((2, 3, 4, 5), "nhwc", (2, 3, 5, 4)),
    ((3, 5, 4), (24, 4, 1), (3, 4, 5)),
    ((2, 32, 4, 5), "aBcd16b", (2, 32, 5, 4)),
    ((2, 32, 4, 5), "aBcd16b", (4, 16, 20)),
    # a padded size-1 axis removed: plain strides over the padding (the last: a block left)
    ((2, 1, 3, 3), "nChw16c", (2, 3, 3)),
    ((2, 1, 4, 5), "nChw16c", (2, 20)),
    ((1, 1, 4, 5), "nChw8c", (4, 5, 1)),
    ((32, 1, 3, 3), "OIhw16i16o", (32, 3, 3)),
]


@pytest.mark.parametrize("dims,spec,newdims", MUST_RESHAPE)
def test_reshape_must_work(dims, spec, newdims):
    md = _desc(dims, "s32", spec)
    out = md.reshape(newdims)
    _check_reshape_result(md, spec, newdims, out)


MUST_FAIL_RESHAPE = [
    ((2, 3, 4, 5), "nhwc", (2, 12, 5)),
    ((2, 3, 4, 5), "nhwc", (120,)),
    ((2, 3, 4, 5), "nchw", (2, 3, 20, 2)),  # element count differs
    ((2, 3, 4, 5), "nchw", (2, 3, 4, 5, 2)),
    ((3, 5), (8, 1), (5, 3)),
    ((2, 32, 3, 3), "nChw16c", (2, 96, 3)),
    ((2, 3, 4, 5), "nchw", (2, 3, 0, 5)),
    ((2, 3, 4, 5), "nchw", (2, -3, -4, 5)),
]


@pytest.mark.parametrize("dims,spec,newdims", MUST_FAIL_RESHAPE)
def test_reshape_impossible_raises(dims, spec, newdims):
    md = _desc(dims, "f32", spec)
    raises_gen(lambda: md.reshape(newdims))


EITHER_RESHAPE = [
    ((2, 3, 4, 5), "nhwc", (6, 4, 5)),  # representable with an inner block of 3 (Abc3a)
    ((3, 5), (8, 1), (15,)),            # representable as A5a with outer stride 8
    ((3, 5), (8, 1), (5, 3, 1)),
    ((2, 32, 3, 3), "nChw16c", (2, 8, 4, 3, 3)),
    ((2, 32, 3, 3), "nChw16c", (64, 3, 3)),
    ((2, 20, 3, 3), "nChw16c", (2, 4, 5, 3, 3)),
    ((2, 20, 3, 3), "nChw16c", (40, 3, 3)),
    ((2, 20, 3, 3), "nChw16c", (2, 180)),
    ((1, 32, 3, 3), "OIhw16i16o", (32, 3, 3)),  # 16i would step over 16o's padding
    ((17, 19, 3, 2), "OIhw4i16o4i", (17, 19, 6)),
]


@pytest.mark.parametrize("dims,spec,newdims", EITHER_RESHAPE)
def test_reshape_correct_or_error(dims, spec, newdims):
    """Not required to work, but a result must be right."""
    md = _desc(dims, "s32", spec)
    try:
        out = md.reshape(newdims)
    except gen.Error as e:
        assert str(e).strip()
        return
    _check_reshape_result(md, spec, newdims, out)


# ---------------------------------------------------------------- invalid input


@pytest.mark.parametrize("tag", ["foo", "abcz", "abca", "aBcd0b", "aBcd16", "aBcd16e",
                                 "NCHW", "nchw16c", "ab-cd", "abcd "])
def test_unknown_tag(tag):
    raises_gen(lambda: gen.MemoryDesc((2, 3, 4, 5), "f32", tag), tag)


@pytest.mark.parametrize("block", ["9" * 20, "1" * 5000, "0" * 5000 + "99999999999999999999"])
def test_block_too_large(block):
    """Past int64 (and past Python's limit on digits read as an int): gen.Error."""
    raises_gen(lambda: gen.MemoryDesc((2, 3), "f32", f"aB{block}b"), "aB", "block")


def test_block_with_leading_zeros():
    assert gen.MemoryDesc((2, 3), "f32", "aB" + "0" * 5000 + "16b") == \
        gen.MemoryDesc((2, 3), "f32", "aB16b")


@pytest.mark.parametrize("tag", [np.array(["ab", "ba"]), 3, ["ab"]])
def test_format_not_a_string(tag):
    raises_gen(lambda: gen.MemoryDesc((2, 3), "f32", tag), "format")
    raises_gen(lambda: gen.Memory.from_array(np.zeros((2, 3), np.float32), tag), "format")


@pytest.mark.parametrize("dims,tag", [
    ((2, 3, 4), "abcd"),
    ((2, 3, 4), "nchw"),
    ((2, 3, 4, 5, 6), "nChw16c"),
    ((2, 3, 4, 5), "abc"),
    ((2, 3), "x"),
    ((2, 3, 4, 5), "ncdhw"),
    ((2, 3, 4, 5), "gOIhw16i16o"),
])
def test_tag_rank_mismatch(dims, tag):
    raises_gen(lambda: gen.MemoryDesc(dims, "f32", tag), tag, str(dims), str(list(dims)))


@pytest.mark.parametrize("dims,bad", [((2, 0, 3, 4), "0"), ((2, -3, 3, 4), "-3"),
                                      ((0,), "0"), ((5, 3, -1), "-1")])
@pytest.mark.parametrize("fmt", [None, "tag"])
def test_non_positive_dims(dims, bad, fmt):
    f = ref.LETTERS[: len(dims)] if fmt else None
    raises_gen(lambda: gen.MemoryDesc(dims, "f32", f), bad)


@pytest.mark.parametrize("dt,names", [
    ("f31", ("f31",)),
    ("int3", ("int3",)),
    ("q8", ("q8",)),
    ("", ("''", '""', "dtype")),
    (np.clongdouble, ("complex", "clongdouble")),
    (np.dtype(object), ("object", "O")),
    (np.dtype("U3"), ("U3", "str")),
    (None, ("None",)),  # not NumPy's float64 default
])
def test_unknown_dtype(dt, names):
    raises_gen(lambda: gen.MemoryDesc((2, 3), dt), *names)


def test_deprecated_numpy_alias_is_unknown_under_warnings_as_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy warns on 'a' (a bytes alias) first
        raises_gen(lambda: gen.MemoryDesc((2, 3), "a"), "'a'")


@pytest.mark.parametrize("dims,strides,names", [
    ((2, 3), (3,), ("(3,)", "[3]")),
    ((2, 3), (3, 1, 1), ("3,1,1",)),
    ((2, 3), (3, 0), ("3,0",)),
    ((2, 3), (-3, 1), ("-3",)),
    ((2, 3), (2, 1), ("2,1",)),
    ((4, 4), (1, 1), ("1,1",)),
    ((3, 3), (2, 1), ("2,1",)),
    ((2, 2, 2), (4, 1, 1), ("4,1,1",)),
    ((2, 3, 4), (12, 4, 2), ("12,4,2",)),
    ((2, 3, 2), (7, 2, 3), ("7,2,3",)),  # interleaved: offset 7 twice
])
def test_bad_strides(dims, strides, names):
    raises_gen(lambda: gen.MemoryDesc(dims, "f32", strides=strides), *names)


@pytest.mark.parametrize("dims,strides", [((2, 3), (3, 2)), ((3, 3), (3, 2)),
                                          ((2, 3, 2), (8, 2, 3)), ((4, 5), (5, 3))])
def test_interleaved_strides_that_do_not_overlap(dims, strides):
    """Strides no axis of which steps over the others' extent, whose offsets are all distinct
    (API.md: only strides that make elements overlap are refused): a reorder writes and reads
    the elements where NumPy's as_strided puts them."""
    x = np.random.default_rng(len(dims)).standard_normal(dims).astype(np.float32)
    md = gen.MemoryDesc(dims, "f32", strides=strides)
    m = gen.Memory(md)
    m.data[:] = 0xFF
    gen.reorder(x, m)
    raw = np.frombuffer(bytes(m.data), np.float32)
    assert np.array_equal(np.lib.stride_tricks.as_strided(raw, dims, [4 * s for s in strides]), x)
    assert np.array_equal(gen.reorder(m, gen.MemoryDesc(dims, "f32")).to_array(), x)


def test_interleaved_strides_past_the_checked_count():
    raises_gen(lambda: gen.MemoryDesc((5000, 5000), "f32", strides=(3, 2)), "(3, 2)",
               "interleave")


@pytest.mark.parametrize("fmt", ["nchw", "nhwc", "nChw16c", "OIhw16i16o", "ABcd4b16a4b"])
def test_reshape_to_its_own_dims_is_itself(fmt):
    """md.reshape(md.dims) == md, also where size-1 axes or whole blocks would let its parts
    describe the same bytes another way (ABcd4b16a4b with B = 16 came back AcdB16a4b)."""
    for dims in itertools.product((1, 2, 17), (1, 3, 16), (1, 4), (1, 5)):
        md = gen.MemoryDesc(dims, "f32", fmt)
        assert md.reshape(dims) == md, (fmt, dims)


def test_reshape_takes_dims_as_numpy_does():
    """A sequence, one argument per axis, or one int (reshape(2, 12), reshape(24)); bools and
    floats are not dims."""
    md = gen.MemoryDesc((2, 3, 4), "f32", "abc")
    for args in (((2, 12),), ([2, 12],), (2, 12), (np.int64(2), 12)):
        assert md.reshape(*args) == gen.MemoryDesc((2, 12), "f32", "ab"), args
    assert md.reshape(24) == md.reshape(dims=(24,)) == gen.MemoryDesc((24,), "f32", "a")
    for bad in ((True,), (2.0, 12), ((2, 12), 1)):
        raises_gen(lambda: md.reshape(*bad), "dims")


def test_repr_of_a_desc_without_a_tag_makes_it_again():
    md = gen.MemoryDesc((2, 3), "f32", strides=(8, 1))
    assert eval(repr(md), {"MemoryDesc": gen.MemoryDesc}) == md
    blocked = gen.MemoryDesc((2, 32, 4, 5), "f32", "nChw16c").reshape((2, 4, 8, 4, 5))
    assert "inner_blocks=((1, 2), (2, 8))" in repr(blocked)  # no argument makes these


def test_reshape_random():
    """Random reshapes: required ones must work, every result must be right."""
    rng = np.random.default_rng(31337)
    for it in range(150):
        nd = int(rng.integers(1, 5))
        dims = [int(x) for x in rng.choice([1, 2, 3, 4, 6, 8, 12, 16], nd)]
        blocked = it % 2 == 1
        tag = ref.random_tag(rng, nd, max_blocks=2 if blocked else 0, sizes=(2, 4, 8))
        md = gen.MemoryDesc(tuple(dims), "s32", tag)
        lay = ref.layout_from_tag(dims, tag)
        bp = lay.block_products()
        op = rng.integers(0, 4)
        must = False
        if op == 0:  # insert a size-1 axis
            pos = int(rng.integers(0, nd + 1))
            new = dims[:pos] + [1] + dims[pos:]
            must = True
        elif op == 1:  # remove size-1 axes (not blocked ones)
            new = [d for d in dims if d != 1] or [1]
            must = all(bp[i] == 1 for i, d in enumerate(dims) if d == 1)
        elif op == 2 and nd >= 2:  # merge two adjacent axes
            i = int(rng.integers(0, nd - 1))
            new = dims[:i] + [dims[i] * dims[i + 1]] + dims[i + 2:]
            must = (bp[i] == 1 and bp[i + 1] == 1
                    and lay.strides[i] == lay.strides[i + 1] * dims[i + 1])
        else:  # split an axis
            i = int(rng.integers(0, nd))
            f = [k for k in range(1, dims[i] + 1) if dims[i] % k == 0]
            k = int(rng.choice(f))
            new = dims[:i] + [dims[i] // k, k] + dims[i + 1:]
            must = bp[i] == 1 or (k % bp[i] == 0)
        new = tuple(new)
        try:
            out = md.reshape(new)
        except gen.Error as e:
            assert str(e).strip()
            assert not must, "required reshape refused: %s %s -> %s: %s" % (dims, tag, new, e)
            continue
        _check_reshape_result(md, tag, new, out)


def test_dims_as_list_and_numpy_integers():
    a = gen.MemoryDesc((2, 3, 4, 5), "f32", "nchw")
    assert gen.MemoryDesc([2, 3, 4, 5], "f32", "nchw") == a
    assert gen.MemoryDesc(tuple(np.array([2, 3, 4, 5], np.int64)), "f32", "nchw") == a
    assert gen.MemoryDesc(np.zeros((2, 3, 4, 5)).shape, "f32", "nchw") == a
    assert a.permute_axes([0, 1, 2, 3]) == a
    assert a.reshape([2, 3, 20]) == gen.MemoryDesc((2, 3, 20), "f32")


@pytest.mark.parametrize("dims", [(2, 2.5), None, "2x3", (2, "3")])
def test_non_integer_dims(dims):
    raises_gen(lambda: gen.MemoryDesc(dims, "f32"))
