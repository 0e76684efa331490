"""Memory descriptors: the tag grammar, strides, blocks, permute_axes and reshape.

A descriptor maps a logical index to a physical element offset, as oneDNN's does: every
logical axis `a` has an outer stride `strides[a]` (in elements) for the index divided by the
product of its blocks, and the inner blocks form a dense row-major region at the end of each
outer position. `parts(a)` exposes axis `a` as (size, stride) pieces, most significant first:
everything the normaliser (problem.py) needs to know about a layout.
"""
from __future__ import annotations

import math
import re

import numpy as np

from . import dtypes
from .errors import Error, checked, read_only
from .problem import grid_offsets

LETTERS = "abcdefghijkl"
MAX_NDIMS = len(LETTERS)

# oneDNN's named tags and the generic tag each one means.
ALIASES = {
    "x": "a", "nc": "ab", "cn": "ba", "ncw": "abc", "nwc": "acb", "nchw": "abcd",
    "nhwc": "acdb", "chwn": "bcda", "ncdhw": "abcde", "ndhwc": "acdeb",
    "nCw8c": "aBc8b", "nCw16c": "aBc16b", "nChw8c": "aBcd8b", "nChw16c": "aBcd16b",
    "nCdhw8c": "aBcde8b", "nCdhw16c": "aBcde16b",
    "oi": "ab", "io": "ba", "oiw": "abc", "wio": "cba", "oihw": "abcd", "hwio": "cdba",
    "ihwo": "bcda", "iohw": "bacd", "oidhw": "abcde", "dhwio": "cdeba",
    "OIhw16i16o": "ABcd16b16a", "OIhw16o16i": "ABcd16a16b", "Ohwi16o": "Acdb16a",
    "OIhw4i16o4i": "ABcd4b16a4b", "goihw": "abcde", "gOIhw16i16o": "aBCde16c16b",
    "NChw16n16c": "ABcd16a16b",
}
_TAG_RE = re.compile(r"([a-lA-L]+)((?:[0-9]+[a-l])*)")
_BLOCK_RE = re.compile(r"([0-9]+)([a-l])")


def parse_tag(tag, ndims: int):
    """A tag -> (outer order, inner blocks): axes outermost first, (axis, size) outer to inner."""
    if not isinstance(tag, str):
        raise Error(f"format must be a tag string, got {tag!r}")
    generic = ALIASES.get(tag, tag)
    m = _TAG_RE.fullmatch(generic)
    if not m:
        raise Error(f"unknown format tag {tag!r}")
    outer = m.group(1)
    order = tuple(LETTERS.index(c.lower()) for c in outer)
    if sorted(order) != list(range(len(order))):
        raise Error(f"format tag {tag!r} must name each of the axes {LETTERS[:len(order)]} once")
    if len(order) != ndims:
        raise Error(f"format tag {tag!r} has rank {len(order)} but dims have rank {ndims}")
    pairs = _BLOCK_RE.findall(m.group(2))
    if any(len(n.lstrip("0")) > 19 for n, _ in pairs):  # past int64 (and Python's int-digit limit)
        raise Error(f"format tag {tag!r} has a block too large to address")
    blocks = tuple((LETTERS.index(c), int(n.lstrip("0") or "0")) for n, c in pairs)
    blocked = {LETTERS.index(c.lower()) for c in outer if c.isupper()}
    for axis, size in blocks:
        if size < 1:
            raise Error(f"format tag {tag!r} has a block of size {size}")
        if axis not in blocked:
            raise Error(f"format tag {tag!r} blocks axis {LETTERS[axis]!r} which is not uppercase")
    missing = blocked - {a for a, _ in blocks}
    if missing:
        raise Error(f"format tag {tag!r} has uppercase axis "
                    f"{LETTERS[min(missing)].upper()!r} without a block")
    return order, blocks


# Byte sizes from here on do not fit the kernels' signed 64-bit offsets.
MAX_BYTES = 1 << 63


def _index(v):
    """v as an int when it is an integer (not a bool, not an array), else None."""
    if isinstance(v, (bool, np.bool_)) or not hasattr(v, "__index__"):
        return None
    try:
        return v.__index__()
    except TypeError:  # e.g. a NumPy array of several elements
        return None


def _check_dims(dims) -> tuple:
    try:
        dims = tuple(dims)
    except TypeError:
        raise Error(f"dims must be a sequence of positive integers, got {dims!r}") from None
    if not 1 <= len(dims) <= MAX_NDIMS:
        raise Error(f"dims {dims!r} must have 1 to {MAX_NDIMS} entries")
    for d in dims:
        if _index(d) is None or _index(d) <= 0:
            raise Error(f"dims {dims!r} must be positive integers, bad entry {d!r}")
    return tuple(_index(d) for d in dims)


def _block_products(ndims, blocks):
    prod = [1] * ndims
    for axis, size in blocks:
        prod[axis] *= size
    return prod


@checked
class MemoryDesc:
    """`gen.MemoryDesc(dims, dtype, format=None, *, strides=None)`: see API.md."""

    __slots__ = ("dims", "dtype", "padded_dims", "strides", "inner_blocks", "_key", "_nbytes")

    def __init__(self, dims, dtype, format=None, *, strides=None):
        dims = _check_dims(dims)
        dtype = dtypes.canonical(dtype)
        if format is not None and strides is not None:
            raise Error(f"give format {format!r} or strides {strides!r}, not both")
        if isinstance(format, str) and format == "any":
            # no layout yet: a primitive that chooses the format takes it (see concrete)
            for name, value in (("dims", dims), ("dtype", dtype), ("padded_dims", dims),
                                ("strides", None), ("inner_blocks", ()), ("_nbytes", None),
                                ("_key", ("any", dims, dtypes.name(dtype)))):
                object.__setattr__(self, name, value)
            return
        if strides is not None:
            self._init(dims, dtype, dims, _check_strides(strides, dims), ())
            return
        order, blocks = parse_tag(format if format is not None else LETTERS[:len(dims)],
                                  len(dims))
        bprod = _block_products(len(dims), blocks)
        padded = tuple(-(-d // b) * b for d, b in zip(dims, bprod))
        outer = [0] * len(dims)
        step = math.prod(size for _, size in blocks)
        for axis in reversed(order):
            outer[axis] = step
            step *= padded[axis] // bprod[axis]
        self._init(dims, dtype, padded, tuple(outer), blocks)

    def _init(self, dims, dtype, padded, strides, blocks):
        # immutable (a desc is hashed, and ops trust its nbytes): set here only
        for name, value in (("dims", dims), ("dtype", dtype), ("padded_dims", padded),
                            ("strides", strides), ("inner_blocks", blocks),
                            ("_key", (dims, dtypes.name(dtype), padded, strides, blocks))):
            object.__setattr__(self, name, value)
        last = sum((n - 1) * s for a in range(len(dims)) for n, s in self.parts(a))
        # every op call checks it: computed once
        object.__setattr__(self, "_nbytes", (last + 1) * self.itemsize)
        if self._nbytes >= MAX_BYTES:
            raise Error(f"dims {dims} of {dtypes.name(dtype)} need {self._nbytes} bytes, "
                        f"more than gen's 64-bit offsets address ({MAX_BYTES})")

    @classmethod
    def _make(cls, dims, dtype, padded, strides, blocks) -> "MemoryDesc":
        md = cls.__new__(cls)
        md._init(tuple(dims), dtype, tuple(padded), tuple(strides), tuple(blocks))
        return md

    __setattr__ = __delattr__ = read_only

    def __reduce__(self):  # copy and pickle
        if self.strides is None:
            return (MemoryDesc, (self.dims, self.dtype, "any"))
        return (MemoryDesc._make, (self.dims, self.dtype, self.padded_dims, self.strides,
                                   self.inner_blocks))

    # --- derived attributes -------------------------------------------------------------
    @property
    def ndims(self) -> int:
        return len(self.dims)

    @property
    def nelems(self) -> int:
        return math.prod(self.dims)

    @property
    def itemsize(self) -> int:
        return dtypes.itemsize(self.dtype)

    @property
    def is_plain(self) -> bool:
        return self.strides is not None and not self.inner_blocks

    @property
    def nbytes(self) -> int:
        if self._nbytes is None:  # format "any" (a test, not a call: read twice per op call)
            concrete(self, "nbytes")
        return self._nbytes

    @property
    def format(self):
        """The canonical generic tag, or None when no tag describes these strides ("any"
        before an op chose one)."""
        if self.strides is None:
            return "any"
        bprod = _block_products(self.ndims, self.inner_blocks)
        outer_n = [p // b for p, b in zip(self.padded_dims, bprod)]
        # Equal strides: a size-1 axis can only sit inside the other one.
        order = sorted(range(self.ndims),
                       key=lambda a: (-self.strides[a], outer_n[a] == 1, a))
        blocked = {a for a, _ in self.inner_blocks}
        tag = "".join(LETTERS[a].upper() if a in blocked else LETTERS[a] for a in order)
        tag += "".join(f"{size}{LETTERS[a]}" for a, size in self.inner_blocks)
        try:
            same = MemoryDesc(self.dims, self.dtype, tag) == self
        except Error:
            return None
        return tag if same else None

    def parts(self, axis: int):
        """Axis `axis` as (size, stride) pieces over its padded extent, most significant first."""
        if self.strides is None:  # every layout a kernel gets is read through here
            concrete(self, "layout of")
        blocks = self.inner_blocks
        bprod = _block_products(self.ndims, blocks)[axis]
        out = [(self.padded_dims[axis] // bprod, self.strides[axis])]
        for j, (a, size) in enumerate(blocks):
            if a == axis:
                out.append((size, math.prod(s for _, s in blocks[j + 1:])))
        return out

    # --- equality -----------------------------------------------------------------------
    def __eq__(self, other):
        return isinstance(other, MemoryDesc) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        how = f"format={self.format!r}" if self.format else f"strides={self.strides}"
        # inner blocks without a tag (a reshape's) have no constructor argument: shown only
        # where there are some, so that the others' repr makes them again
        blocks = "" if self.format or not self.inner_blocks else \
            f", inner_blocks={self.inner_blocks}"
        return f"MemoryDesc({self.dims}, {dtypes.name(self.dtype)!r}, {how}{blocks})"

    # --- views of the same bytes ----------------------------------------------------------
    def permute_axes(self, perm) -> "MemoryDesc":
        """Axis i becomes axis perm[i] (`out.dims[perm[i]] == self.dims[i]`)."""
        perm = _check_perm(perm, concrete(self, "permute_axes").ndims)
        inv = [0] * self.ndims
        for i, p in enumerate(perm):
            inv[p] = i
        pick = lambda seq: [seq[inv[j]] for j in range(self.ndims)]
        blocks = [(perm[a], size) for a, size in self.inner_blocks]
        return MemoryDesc._make(pick(self.dims), self.dtype, pick(self.padded_dims),
                                pick(self.strides), blocks)

    def reshape(self, dims, *more) -> "MemoryDesc":
        """The same bytes seen as NumPy's row-major reshape of the logical content; the dims
        as a sequence, or as NumPy also takes them, one argument per axis (reshape(2, 3))."""
        if more or isinstance(dims, (int, np.integer)) and not isinstance(dims, (bool, np.bool_)):
            dims = (dims, *more)
        return _reshape(concrete(self, "reshape"), _check_dims(dims))


def concrete(md: MemoryDesc, what: str) -> MemoryDesc:
    """md, which must have a layout: format "any" is for the primitives that choose one
    (gen.Resample and gen.ResampleBackward), which then say what they chose."""
    if md.strides is None:
        raise Error(f"{what}: {md!r} has format 'any', which only a primitive that chooses "
                    f"the format takes (gen.Resample, gen.ResampleBackward)")
    return md


def _check_strides(strides, dims) -> tuple:
    try:
        strides = tuple(strides)
    except TypeError:
        raise Error(f"strides must be a sequence of positive integers, got {strides!r}") from None
    if len(strides) != len(dims):
        raise Error(f"strides {strides!r} must have one entry per dim ({len(dims)})")
    for s in strides:
        if _index(s) is None or _index(s) <= 0:
            raise Error(f"strides {strides!r} must be positive integers, bad entry {s!r}")
    strides = tuple(_index(s) for s in strides)
    # Sorted by stride, each axis steps over the whole extent of the ones inside it: no
    # overlap. Axes that interleave (strides (3, 2) of dims (2, 3)) are checked offset by offset.
    extent = 0
    for s, d in sorted((s, d) for s, d in zip(strides, dims) if d > 1):
        if s <= extent:
            if _overlap(strides, dims):
                raise Error(f"strides {strides!r} make elements of dims {dims!r} overlap")
            break
        extent = s * (d - 1) + extent
    return strides


# The most elements of interleaving strides whose offsets are compared one by one (2^20:
# 30 ms and 30 MB)
INTERLEAVED_ELEMENTS = 1 << 20


def _overlap(strides, dims) -> bool:
    """Whether two elements of interleaving strides share an offset."""
    count = math.prod(dims)
    if count > INTERLEAVED_ELEMENTS:
        raise Error(f"strides {strides!r} interleave axes of dims {dims!r}: their offsets are "
                    f"checked for overlap up to {INTERLEAVED_ELEMENTS} elements, not {count}")
    offsets = grid_offsets(dims, strides)
    offsets.sort()  # (np.unique took 20x longer)
    return bool(np.any(offsets[1:] == offsets[:-1]))


def _check_perm(perm, ndims) -> tuple:
    try:
        perm = tuple(perm)
    except TypeError:
        raise Error(f"perm must be a sequence of axis indices, got {perm!r}") from None
    ok = all(_index(p) is not None for p in perm)
    if not ok or sorted(_index(p) for p in perm) != list(range(ndims)):
        raise Error(f"perm {perm!r} is not a permutation of 0..{ndims - 1}")
    return tuple(_index(p) for p in perm)


def _reshape(md: MemoryDesc, dims: tuple) -> MemoryDesc:
    if math.prod(dims) != md.nelems:
        raise Error(f"cannot reshape dims {md.dims} ({md.nelems} elements) to {dims}")
    if dims == md.dims:  # itself (rebuilt from its parts, size-1 axes and whole blocks
        return md        # could describe the same bytes otherwise: ABcd4b16a4b, B = 16)
    # Old layout as units, most significant first: a padded axis is one unit that a new axis
    # must take whole, or that no new axis takes where its size is 1 (its only index, 0,
    # adds nothing to an offset; the padding stays in the other axes' strides); any other
    # axis contributes its (size, stride) parts.
    # Parts that lie one after the other in memory merge first (across axes too), so that a
    # new axis may take pieces of several old ones: (2, 3) -> (3, 2) when dense.
    units = []
    for a in range(md.ndims):
        if md.padded_dims[a] != md.dims[a]:
            units.append(("padded", a))
            continue
        for n, s in md.parts(a):
            if n == 1:
                continue
            if units and units[-1][0] != "padded" and units[-1][1] == s * n:
                units[-1] = (units[-1][0] * n, s)
            else:
                units.append((n, s))
    new_parts, new_padded = [], []
    for d in dims:
        parts, need, padded = [], d, d
        if d == 1 and units and units[0][0] == "padded" and md.dims[units[0][1]] == 1:
            a = units.pop(0)[1]
            parts, padded = md.parts(a), md.padded_dims[a]
        while need > 1:
            if not units:
                raise Error(f"cannot reshape {md} to {dims}: no copy-free representation")
            head = units[0]
            if head[0] == "padded" and md.dims[head[1]] == 1:
                units.pop(0)  # a padded size-1 axis removed
            elif head[0] == "padded":
                a = head[1]
                if parts or need != md.dims[a]:
                    raise Error(f"cannot reshape {md} to {dims}: padded axis {a} "
                                f"({md.dims[a]} padded to {md.padded_dims[a]}) must stay whole")
                parts, padded, need = md.parts(a), md.padded_dims[a], 1
                units.pop(0)
            elif head[0] <= need:
                if need % head[0]:
                    raise Error(f"cannot reshape {md} to {dims}: size {d} does not split "
                                f"the physical pieces of the layout")
                parts.append(head)
                need //= head[0]
                units.pop(0)
            elif head[0] % need == 0:
                n, s = head
                parts.append((need, s * (n // need)))
                units[0] = (n // need, s)
                need = 1
            else:
                raise Error(f"cannot reshape {md} to {dims}: size {d} does not split "
                            f"the physical pieces of the layout")
        new_parts.append(_merge_parts(parts))
        new_padded.append(padded)
    if any(u[0] != "padded" or md.dims[u[1]] != 1 for u in units):
        raise Error(f"cannot reshape {md} to {dims}: a padded axis would be split or merged")
    return _from_parts(md, dims, new_padded, new_parts)


def _merge_parts(parts):
    out = []
    for n, s in parts:
        if out and out[-1][1] == s * n:
            out[-1] = (out[-1][0] * n, s)
        else:
            out.append((n, s))
    return out


def _from_parts(md, dims, padded, parts):
    """Rebuild a descriptor from per-axis pieces, or raise when blocks would be needed
    that are not one dense innermost region in significance order."""
    blocks = {(s, n, a) for a, p in enumerate(parts) for n, s in p[1:]}
    # An axis lying wholly inside the block region becomes a block itself (outer count 1).
    while True:
        region = math.prod(n for _, n, _ in blocks)
        inside = [a for a, p in enumerate(parts) if len(p) == 1 and p[0][1] < region]
        if not inside:
            break
        for a in inside:
            blocks.add((parts[a][0][1], parts[a][0][0], a))
            parts[a] = [(1, region)] + parts[a]
    blocks = sorted(blocks, reverse=True)
    step = 1
    for s, n, a in reversed(blocks):
        if s != step:
            raise Error(f"cannot reshape {md} to {dims}: merged axes are not contiguous")
        step *= n
    for a, p in enumerate(parts):
        inner = [s for s, n, b in blocks if b == a]
        if [s for _, s in p[1:]] != inner:
            raise Error(f"cannot reshape {md} to {dims}: axis {a} would need blocks out of order")
    strides = [p[0][1] if p else 0 for p in parts]
    # A size-1 axis takes the stride that a dense tag would give it.
    for a in reversed(range(len(dims))):
        if not parts[a]:
            right = [parts[b][0] for b in range(a + 1, len(dims)) if parts[b]]
            strides[a] = right[0][0] * right[0][1] if right else step
    return MemoryDesc._make(dims, md.dtype, padded, strides,
                            [(a, n) for s, n, a in blocks])
