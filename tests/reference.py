"""Independent NumPy reference for oneDNN-style memory layouts.

Written from the public contract (shared/API.md) and oneDNN's format-tag
semantics, without looking at gen's implementation.  Nothing here imports gen.

A layout is described the way oneDNN's blocking descriptor does it:

* ``dims``          logical dims
* ``padded_dims``   dims rounded up to a multiple of the product of each axis'
                    blocks
* ``strides``       outer strides in elements, one per logical axis; the outer
                    index of axis ``d`` is ``idx[d] // block_product[d]``
* ``inner_blocks``  ``((axis, block), ...)`` outer to inner; the innermost block
                    is the fastest varying part of memory, dense

Offset of a logical index ``idx`` (in elements)::

    sum_d (idx[d] // B[d]) * strides[d]  +  inner offset

where the inner offset decomposes ``idx[d] % B[d]`` over the axis' blocks,
the innermost block taking the least significant digit (oneDNN ``off_v``).
"""
import re
from dataclasses import dataclass

import numpy as np

try:  # bf16 support
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except Exception:  # pragma: no cover - ml_dtypes is a test requirement
    ml_dtypes = None
    BF16 = None

LETTERS = "abcdefghijkl"

# Named aliases with their oneDNN meaning (dnnl_types.h).
ALIASES = {
    "x": "a",
    "nc": "ab",
    "cn": "ba",
    "ncw": "abc",
    "nwc": "acb",
    "nchw": "abcd",
    "nhwc": "acdb",
    "chwn": "bcda",
    "ncdhw": "abcde",
    "ndhwc": "acdeb",
    "nCw8c": "aBc8b",
    "nCw16c": "aBc16b",
    "nChw8c": "aBcd8b",
    "nChw16c": "aBcd16b",
    "nCdhw8c": "aBcde8b",
    "nCdhw16c": "aBcde16b",
    "oi": "ab",
    "io": "ba",
    "oiw": "abc",
    "wio": "cba",
    "oihw": "abcd",
    "hwio": "cdba",
    "ihwo": "bcda",
    "iohw": "bacd",
    "oidhw": "abcde",
    "dhwio": "cdeba",
    "OIhw16i16o": "ABcd16b16a",
    "OIhw16o16i": "ABcd16a16b",
    "Ohwi16o": "Acdb16a",
    "OIhw4i16o4i": "ABcd4b16a4b",
    "goihw": "abcde",
    "gOIhw16i16o": "aBCde16c16b",
    "NChw16n16c": "ABcd16a16b",
}

ITEMSIZE_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class TagError(ValueError):
    pass


@dataclass(frozen=True)
class Layout:
    dims: tuple
    padded_dims: tuple
    strides: tuple
    inner_blocks: tuple = ()

    @property
    def ndims(self):
        return len(self.dims)

    def block_products(self):
        b = [1] * self.ndims
        for ax, sz in self.inner_blocks:
            b[ax] *= sz
        return b

    def inner_size(self):
        n = 1
        for _, sz in self.inner_blocks:
            n *= sz
        return n

    def footprint(self):
        """Elements spanned: max offset + 1 (over the padded space)."""
        bp = self.block_products()
        m = 0
        for d in range(self.ndims):
            m += (self.padded_dims[d] // bp[d] - 1) * self.strides[d]
        return m + self.inner_size()

    @property
    def is_plain(self):
        return len(self.inner_blocks) == 0


# --------------------------------------------------------------------------
# tag parsing


def expand_alias(tag):
    return ALIASES.get(tag, tag)


def parse_tag(tag):
    """-> (outer_order, inner_blocks) for a generic tag or alias."""
    g = expand_alias(tag)
    m = re.fullmatch(r"([a-lA-L]+)((?:[0-9]+[a-l])*)", g)
    if not m:
        raise TagError("bad tag %r" % (tag,))
    outer = m.group(1)
    nd = len(outer)
    low = outer.lower()
    if sorted(low) != list(LETTERS[:nd]):
        raise TagError("bad tag %r" % (tag,))
    order = [LETTERS.index(ch) for ch in low]
    blocks = []
    for sz, ch in re.findall(r"([0-9]+)([a-l])", m.group(2)):
        ax = LETTERS.index(ch)
        if ax >= nd or int(sz) <= 0 or not outer[low.index(ch)].isupper():
            raise TagError("bad tag %r" % (tag,))
        blocks.append((ax, int(sz)))
    for i, ch in enumerate(outer):
        if ch.isupper() and not any(a == LETTERS.index(ch.lower()) for a, _ in blocks):
            raise TagError("bad tag %r" % (tag,))
    return tuple(order), tuple(blocks)


def tag_ndims(tag):
    return len(parse_tag(tag)[0])


def layout_from_tag(dims, tag):
    dims = tuple(int(d) for d in dims)
    order, blocks = parse_tag(tag)
    if len(order) != len(dims):
        raise TagError("rank mismatch %r vs %r" % (tag, dims))
    nd = len(dims)
    bp = [1] * nd
    for ax, sz in blocks:
        bp[ax] *= sz
    padded = tuple(-(-dims[d] // bp[d]) * bp[d] for d in range(nd))
    inner = 1
    for _, sz in blocks:
        inner *= sz
    strides = [0] * nd
    s = inner
    for ax in reversed(order):
        strides[ax] = s
        s *= padded[ax] // bp[ax]
    return Layout(dims, padded, tuple(strides), tuple(blocks))


def layout_from_strides(dims, strides):
    dims = tuple(int(d) for d in dims)
    return Layout(dims, dims, tuple(int(s) for s in strides), ())


def dense_strides(dims, order=None):
    """Row-major strides for the axes listed outermost first in ``order``."""
    nd = len(dims)
    order = list(range(nd)) if order is None else list(order)
    st = [0] * nd
    s = 1
    for ax in reversed(order):
        st[ax] = s
        s *= dims[ax]
    return tuple(st)


def make_layout(dims, spec):
    """spec: a tag string, a tuple of strides, or a Layout."""
    if isinstance(spec, Layout):
        return spec
    if isinstance(spec, str):
        return layout_from_tag(dims, spec)
    return layout_from_strides(dims, spec)


def layout_of_desc(md):
    """Layout read from the public attributes of a gen.MemoryDesc."""
    return Layout(
        tuple(int(d) for d in md.dims),
        tuple(int(d) for d in md.padded_dims),
        tuple(int(s) for s in md.strides),
        tuple((int(a), int(b)) for a, b in md.inner_blocks),
    )


def tag_string(order, blocks):
    """Build a generic tag from an outer order and inner blocks."""
    blocked = {a for a, _ in blocks}
    s = "".join(LETTERS[a].upper() if a in blocked else LETTERS[a] for a in order)
    return s + "".join("%d%s" % (b, LETTERS[a]) for a, b in blocks)


# --------------------------------------------------------------------------
# offsets


def offset_slow(layout, idx):
    """The obviously-correct scalar formula (oneDNN off_v)."""
    nd = layout.ndims
    bp = layout.block_products()
    off = 0
    for d in range(nd):
        off += (idx[d] // bp[d]) * layout.strides[d]
    rem = [idx[d] % bp[d] for d in range(nd)]
    blk_stride = 1
    for ax, sz in reversed(layout.inner_blocks):
        off += (rem[ax] % sz) * blk_stride
        rem[ax] //= sz
        blk_stride *= sz
    return off


def offsets(layout, padded=False):
    """Element offsets of every logical index, shape ``dims`` (or padded)."""
    shape = layout.padded_dims if padded else layout.dims
    idx = np.indices(shape, dtype=np.int64)
    nd = layout.ndims
    bp = layout.block_products()
    off = np.zeros(shape, dtype=np.int64)
    for d in range(nd):
        off += (idx[d] // bp[d]) * layout.strides[d]
    rem = [idx[d] % bp[d] for d in range(nd)]
    blk_stride = 1
    for ax, sz in reversed(layout.inner_blocks):
        off += (rem[ax] % sz) * blk_stride
        rem[ax] = rem[ax] // sz
        blk_stride *= sz
    return off


def nbytes(layout, itemsize):
    return layout.footprint() * itemsize


def _uint_view(arr):
    arr = np.ascontiguousarray(arr)
    return arr.view(ITEMSIZE_UINT[arr.dtype.itemsize])


def pack(arr, spec, nbytes_total=None):
    """Logical array -> raw uint8 buffer laid out as ``spec``; padding zero."""
    arr = np.asarray(arr)
    lay = make_layout(arr.shape, spec)
    assert tuple(lay.dims) == tuple(arr.shape), (lay.dims, arr.shape)
    isz = arr.dtype.itemsize
    n = lay.footprint() * isz
    if nbytes_total is not None:
        assert nbytes_total >= n
        n = nbytes_total
    raw = np.zeros(n, dtype=np.uint8)
    flat = raw[: (n // isz) * isz].view(ITEMSIZE_UINT[isz])
    flat[offsets(lay)] = _uint_view(arr)
    return raw


def unpack(raw, dims, spec, dtype):
    """Raw bytes laid out as ``spec`` -> logical C-contiguous array."""
    dtype = np.dtype(dtype)
    raw = np.frombuffer(bytes(np.asarray(raw, dtype=np.uint8).tobytes()), np.uint8)
    lay = make_layout(dims, spec)
    isz = dtype.itemsize
    flat = raw[: (len(raw) // isz) * isz].view(ITEMSIZE_UINT[isz])
    out = flat[offsets(lay)]
    return np.ascontiguousarray(out).view(dtype)


def padding_mask(layout):
    """Bool mask over the footprint (elements): True where no logical element lives."""
    used = np.zeros(layout.footprint(), dtype=bool)
    used[offsets(layout)] = True
    return ~used


# --------------------------------------------------------------------------
# data helpers


def random_bits(shape, dtype, rng):
    """Random bit patterns of ``dtype`` (NaN payloads included for floats)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    raw = rng.integers(0, 256, size=n * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def same_bits(a, b):
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype.itemsize == b.dtype.itemsize and a.tobytes() == b.tobytes()


def random_tag(rng, ndims, max_blocks=2, sizes=(2, 4, 8, 16)):
    order = list(rng.permutation(ndims))
    nb = int(rng.integers(0, max_blocks + 1))
    blocks = []
    for _ in range(nb):
        blocks.append((int(rng.integers(0, ndims)), int(rng.choice(sizes))))
    return tag_string(order, blocks)


def random_strides(rng, dims):
    """Non-dense, non-overlapping plain strides (nested, with random gaps)."""
    order = list(rng.permutation(len(dims)))
    st = [0] * len(dims)
    s = 1
    for ax in reversed(order):
        st[ax] = s
        s *= dims[ax] + int(rng.integers(0, 3))
    return tuple(st)
