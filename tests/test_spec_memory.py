"""Acceptance tests for gen.Memory, written from shared/API.md."""
import copy
import pickle
import warnings
import zlib

import ml_dtypes
import numpy as np
import pytest

import gen
from checks import raises_gen

try:
    from . import reference as ref
except ImportError:  # tests/ is not a package
    import reference as ref

BF16 = ref.BF16


NP_OF = {"f32": np.float32, "bf16": BF16, "f16": np.float16, "s8": np.int8, "u8": np.uint8,
         "s32": np.int32}


def np_dtype(dt):
    return np.dtype(NP_OF.get(dt, dt) if isinstance(dt, str) else dt)


def addr(a):
    return np.asarray(a).__array_interface__["data"][0]


def aligned_bytes(n, align=64, offset=0):
    """A writable uint8 array of n bytes starting ``offset`` bytes past an
    ``align``-byte boundary."""
    base = np.zeros(n + 2 * align + offset, np.uint8)
    start = (-addr(base)) % align + offset
    out = base[start:start + n]
    assert addr(out) % align == offset % align
    return out


DESCS = [
    ((2, 3, 4, 5), "f32", "nchw"),
    ((2, 19, 3, 5), "bf16", "nChw16c"),
    ((17, 19, 3, 2), "u8", "OIhw4i16o4i"),
    ((3, 5), np.float64, None),
    ((2, 17, 5, 2, 3), "s8", "gOIhw16i16o"),
    ((7,), "s32", "x"),
]


@pytest.mark.parametrize("dims,dt,fmt", DESCS)
def test_owned_buffer(dims, dt, fmt):
    md = gen.MemoryDesc(dims, dt, fmt)
    m = gen.Memory(md)
    assert m.desc == md
    d = m.data
    assert isinstance(d, np.ndarray)
    assert d.dtype == np.uint8 and d.ndim == 1
    assert d.size == md.nbytes == d.nbytes
    assert d.flags.writeable
    assert not d.any()  # zero-initialised
    assert addr(d) % 64 == 0
    # the view is live: writes through data show up in to_array
    d[:] = 0
    isz = np_dtype(dt).itemsize
    off0 = ref.offsets(ref.make_layout(dims, fmt or ref.LETTERS[:len(dims)]))[(0,) * len(dims)]
    d[off0 * isz] = 1
    arr = m.to_array()
    assert arr.shape == tuple(dims)
    assert arr.view(ref.ITEMSIZE_UINT[isz]).ravel()[0] == 1
    assert m.data[off0 * isz] == 1


def test_owned_buffers_are_distinct():
    md = gen.MemoryDesc((4, 4), "f32")
    a, b = gen.Memory(md), gen.Memory(md)
    a.data[:] = 7
    assert not b.data.any()
    assert not np.shares_memory(a.data, b.data)


def test_wrap_numpy_without_copy():
    md = gen.MemoryDesc((2, 19, 3, 5), "f32", "nChw16c")
    buf = aligned_bytes(md.nbytes + 100)
    m = gen.Memory(md, buf)
    assert m.desc == md
    assert m.data.size == md.nbytes
    assert addr(m.data) == addr(buf)
    assert np.shares_memory(m.data, buf)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 19, 3, 5)).astype(np.float32)
    buf[: md.nbytes] = ref.pack(a, "nChw16c")
    assert np.array_equal(m.to_array(), a)
    m.data[:4] = np.frombuffer(np.float32(42.0).tobytes(), np.uint8)
    assert buf[:4].view(np.float32)[0] == 42.0


def test_wrap_typed_numpy_array():
    md = gen.MemoryDesc((3, 4), "f32", "ba")
    buf = np.arange(12, dtype=np.float32)
    m = gen.Memory(md, buf)
    assert np.shares_memory(m.data, buf)
    assert np.array_equal(m.to_array(), np.arange(12, dtype=np.float32).reshape(4, 3).T)
    buf[0] = -1.0
    assert m.to_array()[0, 0] == -1.0


def test_wrap_arrays_memoryview_cannot_describe():
    """bfloat16 (which memoryview refuses) and np.matrix (2-D whatever its shape) are wrapped
    like any array: no copy, bytes in order."""
    md = gen.MemoryDesc((2, 3), "bf16", "ba")
    x = np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16)
    m = gen.Memory(md, x)
    assert np.shares_memory(m.data, x) and m.data.shape == (12,)
    assert np.array_equal(m.to_array().astype(np.float32), np.arange(6.0).reshape(3, 2).T)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # NumPy's, on np.matrix
        mat = np.matrix(np.arange(8, dtype=np.float32))
    m = gen.Memory(gen.MemoryDesc((2, 2), "f32"), mat)
    assert m.data.shape == (16,) and np.shares_memory(m.data, mat)
    assert np.array_equal(m.to_array(), [[0, 1], [2, 3]])


def test_wrap_bytearray_and_memoryview():
    md = gen.MemoryDesc((4, 8), "u8")
    ba = bytearray(md.nbytes)
    m = gen.Memory(md, ba)
    m.data[:] = np.arange(32, dtype=np.uint8)
    assert bytes(ba) == bytes(range(32))
    ba[5] = 200
    assert m.to_array()[0, 5] == 200

    ba2 = bytearray(md.nbytes + 8)
    mv = memoryview(ba2)
    m2 = gen.Memory(md, mv)
    m2.data[:] = 9
    assert bytes(ba2[:32]) == b"\x09" * 32
    assert bytes(ba2[32:]) == b"\x00" * 8

    buf = aligned_bytes(64)
    m3 = gen.Memory(gen.MemoryDesc((4, 4), "f32"), memoryview(buf))
    m3.data[:] = 1
    assert (buf == 1).all()


def test_wrap_u8_at_odd_address_and_f32_at_4_bytes():
    # "misaligned for the dtype": 1-byte types have no alignment requirement,
    # f32 needs 4 bytes, not 64.
    m = gen.Memory(gen.MemoryDesc((3, 5), "u8"), aligned_bytes(15, offset=1))
    m.data[:] = 3
    assert (m.to_array() == 3).all()
    buf = aligned_bytes(60, offset=4)
    m = gen.Memory(gen.MemoryDesc((3, 5), "f32"), buf)
    assert addr(m.data) == addr(buf)


@pytest.mark.parametrize("dt,offset", [("f32", 1), ("f32", 2), ("s32", 3), (np.float64, 4),
                                       ("bf16", 1), ("f16", 1)])
def test_misaligned_buffer_raises(dt, offset):
    md = gen.MemoryDesc((3, 5), dt)
    buf = aligned_bytes(md.nbytes, offset=offset)
    raises_gen(lambda: gen.Memory(md, buf))


def test_too_small_buffer_raises():
    md = gen.MemoryDesc((2, 19, 3, 5), "f32", "nChw16c")  # padded: 2*32*15*4 bytes
    buf = aligned_bytes(md.nbytes - 4)
    raises_gen(lambda: gen.Memory(md, buf), str(md.nbytes), str(md.nbytes - 4))
    # logical size is not enough for a padded layout
    buf = aligned_bytes(2 * 19 * 15 * 4)
    raises_gen(lambda: gen.Memory(md, buf))
    raises_gen(lambda: gen.Memory(md, bytearray(10)))


def test_read_only_buffers_raise():
    md = gen.MemoryDesc((4, 4), "f32")
    buf = aligned_bytes(64)
    buf.flags.writeable = False
    raises_gen(lambda: gen.Memory(md, buf))
    raises_gen(lambda: gen.Memory(gen.MemoryDesc((4, 4), "u8"), bytes(16)))
    raises_gen(lambda: gen.Memory(gen.MemoryDesc((4, 4), "u8"), memoryview(bytes(16))))


def test_object_buffer_raises():
    """An array of Python objects holds references, not bytes a kernel may overwrite."""
    objs = np.array([None] * 16, dtype=object)
    raises_gen(lambda: gen.Memory(gen.MemoryDesc((4, 4), "u8"), objs), "object")
    assert all(o is None for o in objs)


def test_non_contiguous_buffer_raises():
    md = gen.MemoryDesc((4, 4), "f32")
    big = np.zeros(64, np.float32)
    raises_gen(lambda: gen.Memory(md, big[::2]))


@pytest.mark.parametrize("bad", ["nchw", 42, None, (2, 3)])
def test_memory_bad_desc_raises(bad):
    raises_gen(lambda: gen.Memory(bad))


def test_memory_bad_buffer_object_raises():
    md = gen.MemoryDesc((4, 4), "f32")
    raises_gen(lambda: gen.Memory(md, 42))
    raises_gen(lambda: gen.Memory(md, "a string of text that is long enough......................"))


# ---------------------------------------------------------------- from_array / to_array

ROUNDTRIP = [
    ((2, 3, 4, 5), "nchw"),
    ((2, 3, 4, 5), "nhwc"),
    ((2, 3, 4, 5), "chwn"),
    ((2, 19, 3, 5), "nChw16c"),
    ((2, 19, 3, 5), "nChw8c"),
    ((3, 13, 5), "nCw16c"),
    ((2, 9, 2, 3, 2), "nCdhw8c"),
    ((2, 19, 2, 3, 2), "nCdhw16c"),
    ((17, 19, 3, 2), "OIhw4i16o4i"),
    ((17, 19, 3, 2), "OIhw16i16o"),
    ((17, 19, 3, 2), "OIhw16o16i"),
    ((17, 19, 3, 2), "Ohwi16o"),
    ((17, 19, 3, 2), "NChw16n16c"),
    ((2, 17, 5, 2, 3), "gOIhw16i16o"),
    ((3, 13, 2), "aBc2b4b"),
    ((7, 5), "ba"),
    ((11,), "x"),
    ((2, 1, 3, 1, 2, 2, 1, 1, 2, 1, 1, 3), "lkjihgfedcba"),
]


@pytest.mark.parametrize("dims,tag", ROUNDTRIP)
@pytest.mark.parametrize("dt,npt", [("f32", np.float32), ("bf16", BF16), ("u8", np.uint8),
                                    (None, np.float64)])
def test_from_array_to_array_roundtrip(dims, tag, dt, npt):
    rng = np.random.default_rng(zlib.crc32(repr((dims, tag)).encode()))
    a = ref.random_bits(dims, npt, rng)
    a_copy = a.copy()
    m = gen.Memory.from_array(a, tag)
    assert ref.same_bits(a, a_copy)
    expect_dt = dt if dt is not None else np.dtype(npt)
    assert m.desc == gen.MemoryDesc(dims, expect_dt, tag)
    assert m.desc.dtype == expect_dt
    # packed bytes, padding zero
    assert m.data.size == m.desc.nbytes
    assert bytes(m.data) == ref.pack(a, tag).tobytes()
    out = m.to_array()
    assert isinstance(out, np.ndarray)
    assert out.dtype == np.dtype(npt)
    assert out.flags.c_contiguous
    assert out.shape == tuple(dims)
    assert ref.same_bits(out, a)
    assert not np.shares_memory(out, m.data)
    assert not np.shares_memory(out, a)


def test_from_array_default_format_and_dtype_name():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    m = gen.Memory.from_array(a)
    assert m.desc == gen.MemoryDesc((2, 3, 4), "f32")
    assert bytes(m.data) == a.tobytes()
    m2 = gen.Memory.from_array(a, "acb", "f32")
    assert m2.desc == gen.MemoryDesc((2, 3, 4), "f32", "acb")
    m3 = gen.Memory.from_array(a, "acb", np.float32)
    assert m3.desc == m2.desc
    assert bytes(m3.data) == a.transpose(0, 2, 1).tobytes()


@pytest.mark.parametrize("view", ["reversed", "strided", "transposed", "fortran", "broadcast",
                                  "readonly", "unaligned"])
def test_from_array_any_strides(view):
    rng = np.random.default_rng(3)
    base = rng.standard_normal((6, 38, 8, 10)).astype(np.float32)
    if view == "reversed":
        a = base[::-1, :, ::-1, :]
    elif view == "strided":
        a = base[::2, 1::2, ::3, 1::3]
    elif view == "transposed":
        a = base.transpose(3, 1, 0, 2)
    elif view == "fortran":
        a = np.asfortranarray(base)
    elif view == "broadcast":
        a = np.broadcast_to(base[:1, :, :1, :], (3, 38, 4, 10))
    elif view == "readonly":
        a = base.copy()
        a.flags.writeable = False
    else:
        st = np.zeros(base.size, dtype=[("pad", "u1"), ("v", "<f4")])
        st["v"] = base.ravel()
        a = st["v"].reshape(base.shape)  # 5-byte strides, misaligned
        assert a.strides[-1] == 5
    m = gen.Memory.from_array(a, "nChw16c")
    assert m.desc == gen.MemoryDesc(a.shape, "f32", "nChw16c")
    assert bytes(m.data) == ref.pack(np.ascontiguousarray(a), "nChw16c").tobytes()
    assert np.array_equal(m.to_array(), a)


def test_to_array_of_wrapped_strided_desc():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 5, 4)).astype(np.float32)
    st = (1, 60, 12)
    md = gen.MemoryDesc(a.shape, "f32", strides=st)
    buf = aligned_bytes(md.nbytes)
    raw = ref.pack(a, st)
    buf[: raw.size] = raw
    m = gen.Memory(md, buf)
    out = m.to_array()
    assert out.flags.c_contiguous and out.dtype == np.float32
    assert np.array_equal(out, a)
    out[...] = 0
    assert np.array_equal(m.to_array(), a)  # a copy, not a view


@pytest.mark.parametrize("dt,npt", [("f32", np.float32), ("bf16", BF16), ("f16", np.float16),
                                    ("s8", np.int8), ("u8", np.uint8), ("s32", np.int32)])
def test_to_array_dtype_is_table_dtype(dt, npt):
    m = gen.Memory(gen.MemoryDesc((2, 3), dt))
    out = m.to_array()
    assert out.dtype == np.dtype(npt)
    assert out.shape == (2, 3)
    assert not out.view(ref.ITEMSIZE_UINT[out.dtype.itemsize]).any()


def test_data_view_is_exact_and_writable_for_wrapped_larger_buffer():
    md = gen.MemoryDesc((2, 3), "s32")
    buf = aligned_bytes(200)
    m = gen.Memory(md, buf)
    assert m.data.shape == (24,)
    assert m.data.dtype == np.uint8
    m.data[:] = 0xFF
    assert (buf[:24] == 0xFF).all() and not buf[24:].any()
    assert (m.to_array() == -1).all()


@pytest.mark.parametrize("args,names", [
    (("abcz",), ("abcz",)),
    (("abc",), ("abc",)),
    (("nChw16c",), ("nChw16c",)),
    ((None, "f31"), ("f31",)),
    (("abcd", "q7"), ("q7",)),
])
def test_from_array_errors(args, names):
    a = np.zeros((2, 3, 4, 5), np.float32)
    if args == ("nChw16c",):
        a = np.zeros((2, 3, 4), np.float32)
    raises_gen(lambda: gen.Memory.from_array(a, *args), *names)


def test_from_array_unknown_array_dtype():
    a = np.zeros((2, 3), np.clongdouble)
    raises_gen(lambda: gen.Memory.from_array(a))
    raises_gen(lambda: gen.Memory.from_array(np.array([["a", "b"]])))
    raises_gen(lambda: gen.Memory.from_array(np.array([[object()]], dtype=object)))


# ---------------------------------------------------------------- immutability


def test_desc_attributes_are_read_only():
    """A desc is hashed and ops trust its nbytes: an attribute set or deleted raises gen.Error
    (also an AttributeError), and the desc is unchanged."""
    md = gen.MemoryDesc((2, 3), "f32", "ba")
    before = (md.dims, md.strides, md.nbytes, hash(md))
    for name in ("dims", "dtype", "strides", "padded_dims", "inner_blocks", "nbytes", "new"):
        with pytest.raises(AttributeError):
            setattr(md, name, (3000, 3000))
        raises_gen(lambda: setattr(md, name, (3000, 3000)), name)
    raises_gen(lambda: delattr(md, "dims"), "dims")
    assert (md.dims, md.strides, md.nbytes, hash(md)) == before


def test_memory_attributes_are_read_only():
    m = gen.Memory.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "ba")
    raises_gen(lambda: setattr(m, "desc", gen.MemoryDesc((4000, 4000), "f32")), "desc")
    raises_gen(lambda: setattr(m, "data", np.zeros(4 << 20, np.uint8)), "data")
    raises_gen(lambda: delattr(m, "data"), "data")
    assert m.data.size == 24 and np.array_equal(m.to_array(), np.arange(6.0).reshape(2, 3))
    m.data[:4] = 0  # the bytes themselves stay writable
    assert m.to_array()[0, 0] == 0


def test_copies_and_pickles():
    """Descs copy and pickle equal (and hash equal); a Memory's copy owns a copy of its bytes
    and works as a source and a destination."""
    md = gen.MemoryDesc((2, 19, 3, 5), "bf16", "nChw16c")
    for other in (copy.copy(md), copy.deepcopy(md), pickle.loads(pickle.dumps(md))):
        assert other == md and hash(other) == hash(md) and other.nbytes == md.nbytes
    a = np.random.default_rng(7).standard_normal((2, 19, 3, 5)).astype(ml_dtypes.bfloat16)
    m = gen.Memory.from_array(a, "nChw16c")
    for other in (copy.copy(m), copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert not np.shares_memory(other.data, m.data) and bytes(other.data) == bytes(m.data)
        assert np.array_equal(other.to_array(), a)
        gen.reorder(np.zeros_like(a), other)  # writes its own bytes only
        assert not other.to_array().any() and np.array_equal(m.to_array(), a)
