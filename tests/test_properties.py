"""Property tests (hypothesis) of gen against the independent references (issue 8, items 1, 6).

Valid problems, each checked against tests/reference.py (layouts), tests/convert_reference.py
(conversion formula) and tests/resample_reference.py (resampling weights), and each checking
that its source bytes are unchanged afterwards (hash of the raw buffer):

* same-dtype reorders: random descriptors of rank 1-6 (odd sizes, random tags with 0-2 blocks
  per axis in any order, strided plain layouts with gaps), any element type of 1, 2, 4 or 8
  bytes, Memory / primitive / NumPy-view sources, Memory / desc / tag destinations, 1-2 threads;
* conversions: random type pairs of the table with random attributes (one scale or per-axis
  scales over any mask, zero points, sum), the destination pre-filled (sum reads it);
* shuffle_channels forward/backward: any axis (negative too), any group dividing C, any layout,
  functions on Memory and NumPy views, the primitive;
* resampling forward/backward: rank 3-5, nearest/linear, up and down, out_spatial or factors,
  any tag (blocked included), functions and primitives, all five types.

Layouts whose blocks of one axis do not nest (2a and 3a) are drawn too: their reorders read
that axis through a table and must give the reference's result as well.

Invalid inputs (bad tags, dims, strides, perms, dtypes, buffers, reorder options, shuffle axes
and groups, resampling algs/sizes/factors/types, primitive calls with the wrong descriptor) must
raise gen.Error -- never another exception -- with a non-empty message, and a failed call leaves
its destination and source untouched (item 6).  A garbage fuzzer calls every entry point with
random values, valid or not, and accepts only success, gen.Error, or MemoryError for a
representable but absurd size.  ``test_found_by_fuzzing*`` are the minimal reproductions of what
the fuzzers found.

Budget: a fixed seed (``derandomize=True``) and a bounded number of examples per test (about
6000 cases, 40 s on 2 cores).  For a long run:

    GEN_FUZZ_EXAMPLES=5000 python -m pytest tests/test_properties.py -q -s

sets every property test's ``max_examples`` to 5000; add ``GEN_FUZZ_SEED=<int>`` to explore other
cases than the fixed seed's (derandomize off, hypothesis seeded with that integer), and
``GEN_ISA=scalar`` to run the kernels of another tier.  With ``-s`` the module prints how many
examples each test ran.
"""
import collections
import hashlib
import itertools
import math
import os
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st

import gen

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import convert_reference as cr  # noqa: E402
import reference as ref  # noqa: E402
import resample_reference as rr  # noqa: E402

BF16 = ref.BF16
EXAMPLES = int(os.environ.get("GEN_FUZZ_EXAMPLES", "0") or 0)
FUZZ_SEED = os.environ.get("GEN_FUZZ_SEED")
RUNS = collections.Counter()


def budget(n):
    """settings for a property test: n examples (GEN_FUZZ_EXAMPLES overrides), fixed seed."""
    s = settings(max_examples=EXAMPLES or n, deadline=None, database=None,
                 derandomize=FUZZ_SEED is None, print_blob=True,
                 suppress_health_check=list(HealthCheck))

    def deco(fn):
        fn = s(fn)
        if FUZZ_SEED is not None:
            fn = seed(int(FUZZ_SEED))(fn)
        return fn
    return deco


def counted(name):
    RUNS[name] += 1


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    t0 = time.perf_counter()
    yield
    total = sum(RUNS.values())
    print("\n[test_properties] %d random cases in %.1f s: %s" % (
        total, time.perf_counter() - t0, ", ".join("%s=%d" % kv for kv in sorted(RUNS.items()))))


def digest(obj):
    """sha256 of the raw bytes behind a Memory or a NumPy array (its whole base buffer)."""
    if isinstance(obj, gen.Memory):
        return hashlib.sha256(bytes(obj.data)).hexdigest()
    base = obj
    while isinstance(base, np.ndarray) and base.base is not None and isinstance(base.base,
                                                                               np.ndarray):
        base = base.base
    return hashlib.sha256(np.ascontiguousarray(base).view(np.uint8).tobytes()).hexdigest() \
        if isinstance(base, np.ndarray) else hashlib.sha256(bytes(base)).hexdigest()


# =========================================================================== strategies

MOVE_DTYPES = [np.dtype(t) for t in (np.uint8, np.int8, np.bool_, np.int16, np.uint16,
                                     np.float16, np.float32, np.int32, np.uint32, np.float64,
                                     np.int64, np.uint64, np.complex64)] + [BF16]
TABLE = ["f32", "bf16", "f16", "s8", "u8", "s32"]
RS_TYPES = ["f32", "bf16", "f16", "s8", "u8"]
BLOCK_SIZES = [2, 3, 4, 5, 8, 16]
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
RANK_CAP = {1: 300, 2: 40, 3: 15, 4: 9, 5: 6, 6: 5}


@st.composite
def dims_st(draw, min_rank=1, max_rank=6, max_elems=3000):
    rank = draw(st.integers(min_rank, max_rank))
    cap = RANK_CAP[rank]
    dims = tuple(draw(st.integers(1, cap)) for _ in range(rank))
    if math.prod(dims) > max_elems:  # shrink the largest axes instead of rejecting
        dims = list(dims)
        while math.prod(dims) > max_elems:
            i = int(np.argmax(dims))
            dims[i] = max(1, dims[i] // 2) | 1
        dims = tuple(dims)
    return dims


@st.composite
def tag_st(draw, nd, max_inner=64, blocked_axes=None):
    """A generic tag of rank nd: random outer order, 0-2 blocks per axis, blocks in any order."""
    order = draw(st.permutations(range(nd)))
    blocks = []
    axes = range(nd) if blocked_axes is None else blocked_axes
    for ax in axes:
        nb = draw(st.sampled_from([0, 0, 0, 1, 1, 2]))
        for _ in range(nb):
            blocks.append((ax, draw(st.sampled_from(BLOCK_SIZES))))
    blocks = draw(st.permutations(blocks))
    while math.prod(b for _, b in blocks) > max_inner:
        blocks = blocks[1:]
    return ref.tag_string(order, blocks)


@st.composite
def strides_st(draw, dims):
    """Non-overlapping plain strides: a random nesting order, gaps at every level."""
    order = draw(st.permutations(range(len(dims))))
    s = draw(st.sampled_from([1, 1, 1, 2, 3]))
    strides = [0] * len(dims)
    for ax in reversed(order):
        strides[ax] = s
        s *= dims[ax] + draw(st.sampled_from([0, 0, 1, 2, 5]))
    return tuple(strides)


@st.composite
def layout_st(draw, dims, max_footprint=30000, strided=True):
    """A tag (possibly blocked) or a tuple of strides for dims."""
    if strided and draw(st.integers(0, 3)) == 0:
        return draw(strides_st(dims))
    tag = draw(tag_st(len(dims)))
    if ref.layout_from_tag(dims, tag).footprint() > max_footprint:
        tag = ref.tag_string(list(range(len(dims))), [])
    return tag


def make_desc(dims, dtype, spec):
    if isinstance(spec, str):
        return gen.MemoryDesc(dims, dtype, spec)
    return gen.MemoryDesc(dims, dtype, strides=spec)


def filled_memory(a, spec, rng, dtype=None):
    """A gen.Memory of (a.shape, a.dtype, spec) holding a; every other byte (padding, gaps) is
    random garbage, which no op may copy into a result."""
    md = make_desc(a.shape, a.dtype if dtype is None else dtype, spec)
    m = gen.Memory(md)
    raw = rng.integers(0, 256, md.nbytes, dtype=np.uint8)
    lay = ref.make_layout(a.shape, spec)
    isz = a.dtype.itemsize
    flat = raw[: (raw.size // isz) * isz].view(UINT[isz])
    flat[ref.offsets(lay)] = np.ascontiguousarray(a).view(UINT[isz])
    m.data[:] = raw
    return m


def garbage_memory(md, rng):
    m = gen.Memory(md)
    m.data[:] = rng.integers(0, 256, md.nbytes, dtype=np.uint8)
    return m


def logical(mem, dims, spec, dtype):
    return ref.unpack(np.array(mem.data, copy=True), dims, ref.make_layout(dims, spec), dtype)


def check_written(mem, want, spec, what=""):
    """mem holds want in layout spec; a tag layout's padding is zero (bytes == reference pack);
    strided layouts: the logical content only."""
    got = logical(mem, want.shape, spec, want.dtype)
    assert ref.same_bits(got, want), "%s: logical content differs\n%s" % (
        what, cr.describe_mismatch(got.view(UINT[want.dtype.itemsize]),
                                   want.view(UINT[want.dtype.itemsize])))
    if isinstance(spec, str):
        exp = ref.pack(want, spec)
        raw = np.asarray(mem.data)
        assert raw.size == exp.size, (raw.size, exp.size)
        bad = np.flatnonzero(raw != exp)
        assert bad.size == 0, "%s: bytes differ (padding not zero?) at %s" % (what, bad[:10])


@st.composite
def view_st(draw, nd):
    """How to present a logical array as a NumPy view: axis permutation, flips, a step."""
    return (tuple(draw(st.permutations(range(nd)))),
            tuple(draw(st.booleans()) for _ in range(nd)), draw(st.booleans()))


def numpy_view(a, how):
    """(view, base): view is logically equal to a, stored as base (permuted, flipped,
    possibly every other element of a larger array)."""
    perm, flips, step = how
    sl = tuple(slice(None, None, -1) if f else slice(None) for f in flips)
    phys = np.ascontiguousarray(a[sl].transpose(perm))
    if step:
        big = np.zeros(phys.shape[:-1] + (2 * phys.shape[-1],), phys.dtype)
        big[..., ::2] = phys
        base = big
        phys = big[..., ::2]
    else:
        base = phys
    v = phys.transpose(np.argsort(perm))[sl]
    assert ref.same_bits(v, a)
    return v, base


# =========================================================================== reorder


@budget(700)
@given(data=st.data())
def test_reorder_same_dtype_matches_reference(data):
    dims = data.draw(dims_st(), "dims")
    dt = data.draw(st.sampled_from(MOVE_DTYPES), "dtype")
    s = data.draw(layout_st(dims), "src layout")
    d = data.draw(layout_st(dims), "dst layout")
    how = data.draw(st.sampled_from(["memory", "primitive", "numpy", "desc", "tag"]), "how")
    threads = data.draw(st.sampled_from([None, 1, 2]), "threads")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), "seed"))
    a = ref.random_bits(dims, dt, rng)
    kw = {} if threads is None else {"threads": threads}
    if how == "numpy":
        src, base = numpy_view(a, data.draw(view_st(len(dims)), "view"))
        h = digest(base)
    else:
        src = filled_memory(a, s, rng)
        base = src
        h = digest(src)
    dmd = make_desc(dims, dt, d)
    if how in ("memory", "numpy"):
        dst = garbage_memory(dmd, rng)
        out = gen.reorder(src, dst, **kw)
        assert out is dst
    elif how == "primitive":
        dst = garbage_memory(dmd, rng)
        p = gen.Reorder(src.desc, dmd)
        assert p(src, dst) in (None, dst)
    elif how == "desc":
        dst = gen.reorder(src, dmd, **kw)
    else:
        if not isinstance(d, str):
            d = ref.tag_string(list(range(len(dims))), [])
        dst = gen.reorder(src, d, **kw)
    assert isinstance(dst, gen.Memory)
    assert dst.desc == make_desc(dims, dt, d)
    check_written(dst, a, d, "reorder %s %s->%s" % (dt, s, d))
    assert digest(base) == h, "source modified"
    counted("reorder")


def _scales(data, dims):
    kind = data.draw(st.sampled_from(["none", "none", "one", "mask"]), "scales kind")
    if kind == "none":
        return {}
    f32s = st.one_of(st.floats(-8, 8, width=32), st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5,
                                                                  1e-3, 300.0, 1e-38, 3e38]))
    if kind == "one":
        return {"scales": [data.draw(f32s, "scale")]}
    mask = data.draw(st.integers(0, (1 << len(dims)) - 1), "scale_mask")
    n = math.prod(dims[i] for i in range(len(dims)) if mask >> i & 1)
    vals = data.draw(st.lists(f32s, min_size=min(n, 8), max_size=min(n, 8)), "scale values")
    vals = [vals[i % len(vals)] for i in range(n)]
    as_array = data.draw(st.booleans(), "scales as array")
    return {"scales": np.array(vals, np.float32) if as_array else vals, "scale_mask": mask}


# README: zero points are int32 values whatever the data types (taken as the nearest f32)
ZP_RANGE = (-(2 ** 31), 2 ** 31 - 1)


def zp_st(name):
    """Mostly inside the type's range (name's), some anywhere in int32."""
    lo, hi = {"s8": (-128, 127), "u8": (0, 255)}.get(name, (-300, 300))
    return st.one_of(st.just(0), st.integers(lo, hi), st.sampled_from([lo, hi, *ZP_RANGE]),
                     st.integers(*ZP_RANGE))


@budget(700)
@given(data=st.data())
def test_reorder_conversions_match_reference(data):
    dims = data.draw(dims_st(max_rank=5, max_elems=1500), "dims")
    sname = data.draw(st.sampled_from(TABLE), "src type")
    dname = data.draw(st.sampled_from(TABLE), "dst type")
    s = data.draw(layout_st(dims), "src layout")
    d = data.draw(layout_st(dims), "dst layout")
    attrs = _scales(data, dims)
    if data.draw(st.booleans(), "src zp"):
        attrs["src_zero_point"] = data.draw(zp_st(sname), "src_zero_point")
    if data.draw(st.booleans(), "dst zp"):
        attrs["dst_zero_point"] = data.draw(zp_st(dname), "dst_zero_point")
    if data.draw(st.booleans(), "sum"):
        attrs["sum_scale"] = data.draw(st.one_of(st.floats(-4, 4, width=32),
                                                 st.sampled_from([0.0, 1.0, -1.0])), "sum_scale")
    how = data.draw(st.sampled_from(["memory", "primitive", "numpy"]), "how")
    threads = data.draw(st.sampled_from([None, 1, 2]), "threads")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), "seed"))
    a = cr.make_tensor(sname, dims, rng)
    old = cr.random_values(dname, math.prod(dims), rng).reshape(dims)
    if how == "numpy":
        src, base = numpy_view(a, data.draw(view_st(len(dims)), "view"))
    else:
        src = base = filled_memory(a, s, rng)
    h = digest(base)
    dst = filled_memory(old, d, rng)  # garbage in the padding; the old values for the sum
    if how == "primitive":
        gen.Reorder(src.desc, dst.desc, **attrs)(src, dst)
    else:
        kw = dict(attrs)
        if threads is not None:
            kw["threads"] = threads
        assert gen.reorder(src, dst, **kw) is dst
    want = cr.reference_reorder(a, dname, dst_old=old, **attrs)
    got = logical(dst, dims, d, want.dtype)
    note("attrs=%r" % (attrs,))
    cr.assert_same(got, want, a, "%s:%s -> %s:%s %r" % (sname, s, dname, d, attrs))
    if isinstance(d, str):
        lay = ref.make_layout(dims, d)
        pad = np.repeat(ref.padding_mask(lay), want.dtype.itemsize)
        assert not np.asarray(dst.data)[: pad.size][pad].any(), "padding not zero"
    assert digest(base) == h, "source modified"
    counted("conversion")


# =========================================================================== shuffle


def ref_shuffle(x, axis, group):
    ax = axis % x.ndim
    c = x.shape[ax]
    outer = math.prod(x.shape[:ax])
    inner = math.prod(x.shape[ax + 1:])
    return np.ascontiguousarray(
        x.reshape(outer, group, c // group, inner).transpose(0, 2, 1, 3).reshape(x.shape))


def ref_unshuffle(y, axis, group):
    ax = axis % y.ndim
    c = y.shape[ax]
    outer = math.prod(y.shape[:ax])
    inner = math.prod(y.shape[ax + 1:])
    return np.ascontiguousarray(
        y.reshape(outer, c // group, group, inner).transpose(0, 2, 1, 3).reshape(y.shape))


def divisors(n):
    return [k for k in range(1, n + 1) if n % k == 0]


@budget(500)
@given(data=st.data())
def test_shuffle_matches_reference(data):
    dims = list(data.draw(dims_st(max_elems=2500), "dims"))
    nd = len(dims)
    axis = data.draw(st.integers(-nd, nd - 1), "axis")
    ax = axis % nd
    dims[ax] = data.draw(st.sampled_from([1, 2, 4, 6, 8, 9, 12, 15, 16, 18, 20, 24, 30, 32,
                                          36, 48, 116]), "C")
    while math.prod(dims) > 4000:
        j = max((k for k in range(nd) if k != ax), key=lambda k: dims[k], default=None)
        if j is None or dims[j] == 1:
            break
        dims[j] = max(1, dims[j] // 2)
    dims = tuple(dims)
    group = data.draw(st.sampled_from(divisors(dims[ax])), "group")
    dt = data.draw(st.sampled_from(MOVE_DTYPES), "dtype")
    spec = data.draw(layout_st(dims), "layout")
    backward = data.draw(st.booleans(), "backward")
    how = data.draw(st.sampled_from(["memory", "numpy", "primitive"]), "how")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), "seed"))
    x = ref.random_bits(dims, dt, rng)
    want = (ref_unshuffle if backward else ref_shuffle)(x, axis, group)
    fn = gen.shuffle_channels_backward if backward else gen.shuffle_channels
    if how == "numpy":
        v, base = numpy_view(x, data.draw(view_st(nd), "view"))
        h = digest(base)
        y = fn(v, axis=axis, group=group)
        assert isinstance(y, np.ndarray) and y.flags.c_contiguous and y.dtype == dt
        assert not np.shares_memory(y, base)
        assert ref.same_bits(y, want), "shuffle differs"
    else:
        src = base = filled_memory(x, spec, rng)
        h = digest(src)
        if how == "memory":
            out = fn(src, axis, group)
            assert isinstance(out, gen.Memory) and out is not src and out.desc == src.desc
        else:
            out = garbage_memory(src.desc, rng)
            gen.ShuffleChannels(src.desc, axis=axis, group=group, backward=backward)(src, out)
        check_written(out, want, spec, "shuffle axis=%d group=%d" % (axis, group))
    assert digest(base) == h, "source modified"
    counted("shuffle")


# =========================================================================== resample


def _rs_data(shape, dt, rng, exact):
    """exact=True (nearest forward): any bits; else finite values (positive floats for the
    types whose tolerance is one ulp of the exact result)."""
    npdt = rr.NP_OF[dt]
    if exact:
        return ref.random_bits(shape, npdt, rng)
    if dt == "s8":
        return rng.integers(-128, 128, size=shape).astype(np.int8)
    if dt == "u8":
        return rng.integers(0, 256, size=shape).astype(np.uint8)
    if dt == "f32":
        return (rng.standard_normal(shape) * 4).astype(np.float32)
    return rng.uniform(0.5, 8.0, size=shape).astype(np.float32).astype(npdt)


FACTORS = [0.5, 0.75, 1.25, 1.5, 2.0, 2.5, 3.0, 0.25]


def tags_describing(desc):
    """Every tag (its axes' order permuted, the same blocks) whose descriptor equals desc."""
    nd, tag = desc.ndims, desc.format
    out = []
    for order in itertools.permutations(tag[:nd]):
        try:
            if gen.MemoryDesc(desc.dims, desc.dtype, "".join(order) + tag[nd:]) == desc:
                out.append("".join(order) + tag[nd:])
        except gen.Error:
            pass
    return out


@budget(500)
@given(data=st.data())
def test_resample_matches_reference(data):
    nsp = data.draw(st.integers(1, 3), "spatial dims")
    cap = {1: 23, 2: 11, 3: 6}[nsp]
    n = data.draw(st.integers(1, 2), "N")
    c = data.draw(st.integers(1, 20), "C")
    sp_in = tuple(data.draw(st.integers(1, cap), "in") for _ in range(nsp))
    alg = data.draw(st.sampled_from(["nearest", "linear"]), "alg")
    dt = data.draw(st.sampled_from(RS_TYPES), "dtype")
    use_factors = data.draw(st.booleans(), "factors")
    if use_factors:
        factors = tuple(data.draw(st.sampled_from(FACTORS), "factor") for _ in range(nsp))
        sp_out = tuple(rr.out_size(i, f) for i, f in zip(sp_in, factors))
        if min(sp_out) < 1:
            factors = tuple(max(f, 1.0) for f in factors)
            sp_out = tuple(rr.out_size(i, f) for i, f in zip(sp_in, factors))
    else:
        factors = None
        sp_out = tuple(data.draw(st.integers(1, cap + 6), "out") for _ in range(nsp))
    backward = data.draw(st.booleans(), "backward")
    how = data.draw(st.sampled_from(["memory", "numpy", "primitive"]), "how")
    fmt = data.draw(tag_st(2 + nsp, max_inner=32), "format")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), "seed"))
    in_dims = (n, c) + sp_in
    out_dims = (n, c) + sp_out
    if backward:
        x = _rs_data(out_dims, dt, rng, exact=False)
        want_dims = in_dims
    else:
        x = _rs_data(in_dims, dt, rng, exact=(alg == "nearest"))
        want_dims = out_dims
    note("x dims %s -> %s, fmt %s" % (x.shape, want_dims, fmt))

    if how == "numpy":
        v, base = numpy_view(x, data.draw(view_st(x.ndim), "view"))
        h = digest(base)
        if backward:
            y = gen.resample_backward(v, alg=alg, in_spatial=sp_in)
        elif factors is not None:
            y = gen.resample(v, alg=alg, factors=factors)
        else:
            y = gen.resample(v, alg=alg, out_spatial=sp_out)
        assert isinstance(y, np.ndarray) and y.dtype == rr.NP_OF[dt] and y.flags.c_contiguous
    else:
        src = base = filled_memory(x, fmt, rng)
        h = digest(src)
        # the result keeps the source's format: one of the tags that describe the source
        # (with size-1 axes several do, e.g. abdc == abcd for dims (1, 1, 1, 1))
        fmt = src.desc.format
        wmd = gen.MemoryDesc(want_dims, dt, fmt)
        if how == "memory":
            if backward:
                out = gen.resample_backward(src, alg=alg, in_spatial=sp_in)
            elif factors is not None:
                out = gen.resample(src, alg=alg, factors=factors)
            else:
                out = gen.resample(src, alg=alg, out_spatial=sp_out)
            assert isinstance(out, gen.Memory)
            assert any(out.desc == gen.MemoryDesc(want_dims, dt, t)
                       for t in tags_describing(src.desc)), (out.desc, wmd)
        else:
            out = garbage_memory(wmd, rng)
            if backward:
                gen.ResampleBackward(src.desc, wmd, alg=alg)(src, out)
            else:
                gen.Resample(src.desc, wmd, alg=alg)(src, out)
        y = logical(out, want_dims, fmt, rr.NP_OF[dt])
        lay = ref.make_layout(want_dims, fmt)
        pad = np.repeat(ref.padding_mask(lay), rr.NP_OF[dt].itemsize)
        assert not np.asarray(out.data)[: pad.size][pad].any(), "padding not zero"
    assert y.shape == want_dims
    if backward:
        msg = rr.check(y, rr.backward(x, sp_in, alg), rr.backward_abs(x, sp_in, alg), dt)
    elif alg == "nearest":
        msg = None if ref.same_bits(y, rr.nearest_gather(x, sp_out)) else \
            "nearest is not a bitwise gather"
    else:
        msg = rr.check(y, rr.forward(x, sp_out, alg), rr.forward_abs(x, sp_out, alg), dt)
    assert msg is None, "%s %s %s %s->%s %s: %s" % (
        "backward" if backward else "forward", alg, dt, in_dims, sp_out, fmt, msg)
    assert digest(base) == h, "source modified"
    counted("resample")


# =========================================================================== invalid inputs


def expect_gen_error(fn, *args, **kw):
    """fn(*args, **kw) must raise gen.Error with a non-empty message, nothing else."""
    try:
        fn(*args, **kw)
    except gen.Error as e:
        assert isinstance(e, ValueError)
        assert str(e).strip(), "empty message"
        return e
    except Exception as e:  # noqa: BLE001 - the point of the test
        raise AssertionError("%s raised %s instead of gen.Error: %s" % (
            getattr(fn, "__qualname__", fn), type(e).__name__, e)) from e
    raise AssertionError("%s(%r, %r) accepted an invalid input" % (
        getattr(fn, "__qualname__", fn), args, kw))


TAG_ALPHABET = "abcdefghijklmABCDEFGHIJKLMxyz0123456789_ -"
KNOWN_ALIASES = set(ref.ALIASES)


def tag_parses(tag, nd):
    try:
        return ref.tag_ndims(tag) == nd
    except ref.TagError:
        return False


BAD_DIM = st.sampled_from([0, -1, -7, -(2 ** 63), 2.5, 2.0, "3", None, True, False, [2], 1j,
                           float("nan"), float("inf"), np.float32(2.0), b"2"])


def _is_valid_numpy_dtype(s):
    try:
        d = np.dtype(s)
    except Exception:  # noqa: BLE001
        return False
    return d == BF16 or (d.kind in "biufc" and d.itemsize in (1, 2, 4, 8))


@st.composite
def bad_desc_call(draw):
    """(dims, dtype, format, strides) that MemoryDesc must refuse."""
    kind = draw(st.sampled_from(["tag", "rank", "dim", "dims_type", "dtype", "strides_len",
                                 "strides_val", "overlap", "both", "too_many"]))
    dims = draw(dims_st(max_rank=4, max_elems=500))
    nd = len(dims)
    dtype = draw(st.sampled_from(["f32", "u8", "bf16", np.float64]))
    fmt, strides = None, None
    if kind == "tag":
        fmt = draw(st.text(TAG_ALPHABET, min_size=0, max_size=10))
        if fmt in KNOWN_ALIASES or tag_parses(fmt, nd):
            fmt = fmt + "?"
    elif kind == "rank":
        other = draw(st.integers(1, 6).filter(lambda r: r != nd))
        fmt = draw(tag_st(other))
    elif kind == "dim":
        i = draw(st.integers(0, nd - 1))
        dims = dims[:i] + (draw(BAD_DIM),) + dims[i + 1:]
    elif kind == "dims_type":
        dims = draw(st.sampled_from([(), None, 5, "abc", 2.5, {"a": 1}, ((2, 3),), object()]))
    elif kind == "dtype":
        dtype = draw(st.one_of(
            st.sampled_from(["f64x", "float", "F32", "bf8", "s4", "u16x", "complex64", "c8",
                             "U3", "O", "V8", "M8[s]", "S4", "f128", "float128", "", 3, 1.5,
                             object, np.complex64, np.object_, [1], np.dtype("U2")]),
            st.text("abcdefsuif0123468_", min_size=1, max_size=6)))
        if isinstance(dtype, str) and (dtype in TABLE or _is_valid_numpy_dtype(dtype)):
            dtype = dtype + "!"
        elif not isinstance(dtype, str) and _is_valid_numpy_dtype(dtype):
            dtype = "c16"
    elif kind == "strides_len":
        n = draw(st.integers(0, 7).filter(lambda k: k != nd))
        strides = tuple(draw(st.integers(1, 50)) for _ in range(n))
    elif kind == "strides_val":
        strides = list(draw(strides_st(dims)))
        i = draw(st.integers(0, nd - 1))
        strides[i] = draw(st.sampled_from([0, -1, -5, 1.5, 2.0, "1", None, True]))
        strides = tuple(strides)
    elif kind == "overlap":
        if nd < 2:
            dims = (3, 2)
        dims = tuple(max(k, 2) for k in dims)
        strides = list(draw(strides_st(dims)))
        strides[1] = strides[0]  # two axes of size >= 2 with one stride: (1, 0) == (0, 1)
        strides = tuple(strides)
    elif kind == "both":
        fmt = ref.tag_string(list(range(nd)), [])
        strides = ref.dense_strides(dims)
    elif kind == "too_many":
        dims = (1,) * draw(st.integers(13, 16))
    return kind, dims, dtype, fmt, strides


@budget(500)
@given(call=bad_desc_call())
def test_invalid_descs_raise_gen_error(call):
    kind, dims, dtype, fmt, strides = call
    note(repr(call))
    kw = {} if strides is None else {"strides": strides}
    expect_gen_error(gen.MemoryDesc, dims, dtype, fmt, **kw)
    counted("invalid desc")


@pytest.mark.parametrize("dims,dtype,fmt,strides", [
    ((2 ** 62, 2 ** 62), "f32", None, None),
    ((2 ** 64,), "u8", None, None),
    ((2 ** 61,), "f32", None, None),
    ((3, 2 ** 62), "u8", "ba", None),
    ((2, 3), "f32", "Ab99999999999999999999a", None),
    ((2, 2), "f32", None, (2 ** 70, 1)),
    ((2, 2), "f32", None, (2 ** 62, 1)),
])
def test_sizes_beyond_64_bits_are_refused(dims, dtype, fmt, strides):
    """A descriptor whose byte size or offsets do not fit in 64 bits: the desc, or every op
    that uses it, raises gen.Error (not OverflowError / NumPy's ValueError / MemoryError)."""
    kw = {} if strides is None else {"strides": strides}
    try:
        md = gen.MemoryDesc(dims, dtype, fmt, **kw)
    except gen.Error:
        return
    nd = len(dims)
    small = gen.MemoryDesc((2,) * nd, dtype)
    errors = []
    for what, fn in [
            ("Memory(md)", lambda: gen.Memory(md)),
            ("Memory(md, buffer=bytearray(64))", lambda: gen.Memory(md, buffer=bytearray(64))),
            ("Reorder(md, reversed plain md)", lambda: gen.Reorder(md, gen.MemoryDesc(
                dims, dtype, ref.tag_string(list(range(nd))[::-1], [])))),
            ("ShuffleChannels(md)", lambda: gen.ShuffleChannels(md, axis=0, group=1)),
            ("Reorder(small, md)", lambda: gen.Reorder(small, md))]:
        try:
            expect_gen_error(fn)
        except AssertionError as e:
            errors.append("%s: %s" % (what, str(e).splitlines()[0]))
    assert not errors, "MemoryDesc%r accepted, then:\n  %s" % (
        (dims, dtype, fmt, kw), "\n  ".join(errors))


def _factors(n):
    out, f = [], 2
    while n > 1:
        while n % f == 0:
            out.append(f)
            n //= f
        f += 1
    return out


@st.composite
def regrouped_st(draw, dims):
    """Dims of the same element count: the prime factors of dims, in order or shuffled, cut
    into runs (so axes merge, split or both: (2, 3) -> (3, 2)), with size-1 axes anywhere."""
    factors = [f for d in dims for f in _factors(d)]
    if draw(st.booleans()):
        factors = draw(st.permutations(factors))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(factors) - 1)), max_size=5)))
    runs = [factors[a:b] for a, b in zip([0] + cuts, cuts + [len(factors)]) if factors[a:b]]
    new = [math.prod(r) for r in runs] or [1]
    for _ in range(draw(st.integers(0, 2))):
        new.insert(draw(st.integers(0, len(new))), 1)
    return tuple(new[:12])


@budget(400)
@given(data=st.data())
def test_reshape_views_the_same_bytes(data):
    """md.reshape(new) either raises gen.Error or is a descriptor over md's bytes holding
    NumPy's reshape of the content (read by the reference); a dense row-major md always has
    one, as has any md when only size-1 axes are inserted or removed."""
    dims = data.draw(dims_st(max_rank=5, max_elems=2000), "dims")
    dense_tag = ref.tag_string(list(range(len(dims))), [])
    spec = data.draw(st.one_of(st.just(dense_tag), layout_st(dims)), "layout")
    only_ones = data.draw(st.booleans(), "only size-1 axes")
    if only_ones:
        new = [d for d in dims if d > 1]
        for _ in range(data.draw(st.integers(0, 3), "ones")):
            new.insert(data.draw(st.integers(0, len(new)), "at"), 1)
        new = tuple(new) or (1,)
    else:
        new = data.draw(regrouped_st(dims), "new dims")
    md = make_desc(dims, "s32", spec)
    dense = md == gen.MemoryDesc(dims, "s32")
    try:
        out = md.reshape(new)
    except gen.Error as e:
        assert str(e).strip()
        assert not dense, "dense %r -> %r refused: %s" % (dims, new, e)
        assert not (only_ones and md.padded_dims == md.dims), (spec, new, str(e))
        counted("reshape refused")
        return
    assert tuple(out.dims) == new and out.dtype == "s32" and out.nbytes <= md.nbytes
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), "seed"))
    a = rng.integers(-2 ** 31, 2 ** 31, dims, dtype=np.int32)
    src = filled_memory(a, spec, rng)
    lay = ref.layout_of_desc(out)
    assert lay.footprint() * 4 <= md.nbytes
    got = ref.unpack(np.asarray(src.data)[: lay.footprint() * 4], new, lay, np.int32)
    assert np.array_equal(got, a.reshape(new)), (dims, spec, new, out)
    counted("reshape")


@budget(300)
@given(dims=dims_st(max_rank=5), perm=st.lists(
    st.one_of(st.integers(-3, 8), st.sampled_from([1.0, "0", None, 2 ** 70])), max_size=7))
def test_invalid_perms_raise_gen_error(dims, perm):
    if all(type(p) is int for p in perm) and sorted(perm) == list(range(len(dims))):
        perm = perm + [0]
    md = gen.MemoryDesc(dims, "f32", draw_free_tag(dims))
    expect_gen_error(md.permute_axes, perm)
    expect_gen_error(md.permute_axes, tuple(perm))
    counted("invalid perm")


def draw_free_tag(dims):
    return ref.tag_string(list(range(len(dims)))[::-1], [(0, 4)] if dims[0] > 1 else [])


@budget(300)
@given(dims=dims_st(max_rank=4, max_elems=400), dt=st.sampled_from(MOVE_DTYPES),
       spec_data=st.data(), kind=st.sampled_from(["short", "bytes", "readonly_np",
                                                  "readonly_mv", "misaligned", "object",
                                                  "noncontig"]))
def test_invalid_buffers_raise_gen_error(dims, dt, spec_data, kind):
    spec = spec_data.draw(layout_st(dims), "layout")
    md = make_desc(dims, dt, spec)
    n = md.nbytes
    if kind == "short":
        k = spec_data.draw(st.integers(1, n), "missing bytes")
        buf = bytearray(n - k)
    elif kind == "bytes":
        buf = bytes(n)
    elif kind == "readonly_np":
        buf = np.zeros(n, np.uint8)
        buf.flags.writeable = False
    elif kind == "readonly_mv":
        buf = memoryview(bytes(n + 8))
    elif kind == "misaligned":
        if dt.itemsize == 1:
            buf = bytearray(n - 1) if n > 1 else b"x"
        else:
            off = spec_data.draw(st.sampled_from([k for k in range(1, dt.itemsize)
                                                  if k % 2 == 1 or dt.itemsize == 2]), "offset")
            raw = np.zeros(n + 64, np.uint8)
            start = (-raw.ctypes.data) % 64 + off
            buf = raw[start:start + n]
    elif kind == "object":
        buf = spec_data.draw(st.sampled_from([[0] * n, 7, "x" * n, 1.5, {"a": 1}, object(),
                                              np.array([None] * n, dtype=object)]),
                             "object")
    else:
        buf = np.zeros(2 * n + 2, np.uint8)[::2]  # n + 1 bytes, not contiguous
    expect_gen_error(gen.Memory, md, buffer=buf)
    counted("invalid buffer")


@st.composite
def bad_reorder(draw):
    """A valid source and destination, then one invalid change."""
    dims = draw(dims_st(max_rank=4, max_elems=600))
    sname = draw(st.sampled_from(TABLE))
    dname = draw(st.sampled_from(TABLE))
    s = draw(layout_st(dims))
    d = draw(layout_st(dims))
    kind = draw(st.sampled_from(["dims", "rank", "scales_len", "mask_bit", "mask_neg",
                                 "mask_no_scales", "dst_tag", "type_outside", "overlap_np",
                                 "same_memory", "primitive_src", "primitive_dst"]))
    extra = draw(st.integers(0, 2 ** 31))
    return dims, sname, dname, s, d, kind, extra


@budget(500)
@given(case=bad_reorder())
def test_invalid_reorders_raise_and_leave_dst_untouched(case):
    dims, sname, dname, s, d, kind, extra = case
    rng = np.random.default_rng(extra)
    nd = len(dims)
    a = cr.make_tensor(sname, dims, rng)
    src = filled_memory(a, s, rng)
    dmd = make_desc(dims, dname, d)
    dst = garbage_memory(dmd, rng)
    kw = {}
    s_arg, d_arg, call = src, dst, gen.reorder
    if kind == "dims":
        other = list(dims)
        i = extra % nd
        other[i] += 1 + extra % 3
        d_arg = dst = garbage_memory(gen.MemoryDesc(other, dname), rng)
    elif kind == "rank":
        other = dims + (1 + extra % 2,) if nd < 4 else dims[:-1]
        d_arg = dst = garbage_memory(gen.MemoryDesc(other, dname), rng)
    elif kind == "scales_len":
        mask = extra % (1 << nd)
        need = math.prod(dims[i] for i in range(nd) if mask >> i & 1)
        wrong = need + 1 + extra % 3 if extra % 2 or need == 1 else need - 1
        kw = dict(scales=[1.0] * wrong, scale_mask=mask)
    elif kind == "mask_bit":
        kw = dict(scales=[1.0] * 64, scale_mask=1 << (nd + extra % 8))
    elif kind == "mask_neg":
        kw = dict(scales=[1.0], scale_mask=-(1 + extra % 5))
    elif kind == "mask_no_scales":
        kw = dict(scale_mask=1 + extra % ((1 << nd) - 1) if nd > 1 else 1)
    elif kind == "dst_tag":
        d_arg = ["abcdz", "nchw16c", "aB0b", "", "ABC", "Ab8c", "x" * (nd + 1), "a-b", "AB16a",
                 "aa"][extra % 10]
        if tag_parses(d_arg, nd) or d_arg in KNOWN_ALIASES:
            d_arg = "zz"
    elif kind == "type_outside":
        # a type change from a type outside the table (the destination is a table type)
        bad = [np.complex64, np.complex128, np.int16, np.uint16, np.float64, np.int64][extra % 6]
        with np.errstate(all="ignore"):
            s_arg = a.astype(np.float32).astype(bad)
    elif kind == "overlap_np":
        # a NumPy source that views the destination's own bytes
        s_arg = np.asarray(dst.data)[: math.prod(dims)].reshape(dims)
    elif kind == "same_memory":
        s_arg = d_arg = dst
    elif kind == "primitive_src":
        other = garbage_memory(make_desc(dims, dname if dname != sname else
                                         ("u8" if sname != "u8" else "s8"), s), rng)
        p = gen.Reorder(src.desc, dmd)
        call, s_arg = p, other
    elif kind == "primitive_dst":
        p = gen.Reorder(src.desc, dmd)
        other_tag = ref.tag_string(list(range(nd))[::-1], [(0, 8)])
        alt = gen.MemoryDesc(dims, dname, other_tag)
        if alt == dmd:
            alt = gen.MemoryDesc(dims, "s8" if dname != "s8" else "u8", other_tag)
        d_arg = dst = garbage_memory(alt, rng)
        call = p
    note("kind=%s kw=%r" % (kind, kw))
    before_dst = digest(dst)
    before_src = digest(src)
    before_np = digest(s_arg) if isinstance(s_arg, np.ndarray) and kind != "overlap_np" else None
    expect_gen_error(call, s_arg, d_arg, **kw)
    assert digest(dst) == before_dst, "a failed reorder (%s) modified its destination" % kind
    assert digest(src) == before_src, "a failed reorder modified the source"
    if before_np is not None:
        assert digest(s_arg) == before_np
    counted("invalid reorder")


BAD_INT = st.sampled_from([1.0, 2.0, "1", None, True, False, 1j, [1], float("nan"), b"1"])


@budget(400)
@given(data=st.data())
def test_invalid_shuffles_raise_and_leave_dst_untouched(data):
    dims = data.draw(dims_st(max_rank=5, max_elems=600), "dims")
    nd = len(dims)
    dt = data.draw(st.sampled_from(MOVE_DTYPES), "dtype")
    spec = data.draw(layout_st(dims), "layout")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), "seed"))
    x = ref.random_bits(dims, dt, rng)
    axis, group = 0, 1
    kind = data.draw(st.sampled_from(["axis_range", "axis_type", "group_range", "group_div",
                                      "group_type", "rank0", "dtype", "empty", "prim_src",
                                      "prim_dst", "prim_args"]), "kind")
    if kind == "axis_range":
        axis = data.draw(st.one_of(st.integers(nd, nd + 5), st.integers(-nd - 5, -nd - 1),
                                   st.sampled_from([2 ** 63, -(2 ** 70)])), "axis")
    elif kind == "axis_type":
        axis = data.draw(BAD_INT, "axis")
    else:
        axis = data.draw(st.integers(-nd, nd - 1), "axis")
    c = dims[axis % nd] if isinstance(axis, int) and -nd <= axis < nd else 1
    if kind == "group_range":
        group = data.draw(st.one_of(st.integers(-5, 0), st.integers(c + 1, c + 50),
                                    st.sampled_from([2 ** 64])), "group")
    elif kind == "group_div":
        bad = [g for g in range(2, c) if c % g]
        if not bad:
            kind, group = "group_range", c + 1
        else:
            group = data.draw(st.sampled_from(bad), "group")
    elif kind == "group_type":
        group = data.draw(BAD_INT, "group")
    src = filled_memory(x, spec, rng)
    h_src = digest(src)
    h_x = digest(x)
    backward = data.draw(st.booleans(), "backward")
    fn = gen.shuffle_channels_backward if backward else gen.shuffle_channels
    if kind in ("axis_range", "axis_type", "group_range", "group_div", "group_type"):
        expect_gen_error(fn, x, axis, group)
        expect_gen_error(fn, src, axis=axis, group=group)
        expect_gen_error(gen.ShuffleChannels, src.desc, axis=axis, group=group,
                         backward=backward)
    elif kind == "rank0":
        expect_gen_error(fn, np.array(1.5, np.float32), 0, 1)
    elif kind == "dtype":
        bad = data.draw(st.sampled_from([np.complex128, object, "U2", "S3",
                                         np.longdouble, "M8[s]", "V4"]), "bad dtype")
        expect_gen_error(fn, np.zeros(dims, bad), 0, 1)
    elif kind == "empty":
        z = list(dims)
        z[data.draw(st.integers(0, nd - 1))] = 0
        expect_gen_error(fn, np.zeros(z, np.float32), 0, 1)
    else:
        p = gen.ShuffleChannels(src.desc, axis=0, group=1, backward=backward)
        other = gen.MemoryDesc(dims, "u8" if dt != np.uint8 else "s8", spec) if isinstance(
            spec, str) else gen.MemoryDesc(dims, "u8" if dt != np.uint8 else "s8")
        dst = garbage_memory(src.desc if kind != "prim_dst" else other, rng)
        h_dst = digest(dst)
        if kind == "prim_src":
            wrong = garbage_memory(other, rng)
            expect_gen_error(p, wrong, dst)
        elif kind == "prim_dst":
            expect_gen_error(p, src, dst)
        else:
            bad = data.draw(st.sampled_from([None, x, "abc", 3, src.desc]), "bad arg")
            expect_gen_error(p, src, bad)
            expect_gen_error(p, bad, dst)
        assert digest(dst) == h_dst, "a failed shuffle (%s) modified its destination" % kind
    assert digest(src) == h_src and digest(x) == h_x, "source modified"
    counted("invalid shuffle")


@budget(400)
@given(data=st.data())
def test_invalid_resamples_raise_and_leave_dst_untouched(data):
    nsp = data.draw(st.integers(1, 3), "nsp")
    dims = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 9))) + tuple(
        data.draw(st.integers(1, 7)) for _ in range(nsp))
    dt = data.draw(st.sampled_from(RS_TYPES), "dtype")
    fmt = data.draw(tag_st(2 + nsp, max_inner=16), "format")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), "seed"))
    x = _rs_data(dims, dt, rng, exact=False)
    src = filled_memory(x, fmt, rng)
    h_src, h_x = digest(src), digest(x)
    good_out = tuple(data.draw(st.integers(1, 9)) for _ in range(nsp))
    alg = data.draw(st.sampled_from(["nearest", "linear"]), "alg")
    kind = data.draw(st.sampled_from(["alg", "rank", "out_len", "out_size", "factor_neg",
                                      "factor_zero", "neither", "both", "dtype", "in_len",
                                      "in_size", "prim_desc", "prim_call"]), "kind")
    calls = []
    if kind == "alg":
        bad = data.draw(st.one_of(st.text(max_size=8), st.sampled_from(
            [None, 1, "Nearest", "bilinear", "linear ", "cubic", b"linear"])), "alg")
        if bad in ("nearest", "linear"):
            bad = "nearest!"
        calls = [(gen.resample, (x,), dict(alg=bad, out_spatial=good_out)),
                 (gen.resample, (src,), dict(alg=bad, out_spatial=good_out)),
                 (gen.resample_backward, (x,), dict(alg=bad, in_spatial=good_out)),
                 (gen.Resample, (src.desc, src.desc), dict(alg=bad))]
    elif kind == "rank":
        r = data.draw(st.sampled_from([1, 2, 6, 7]), "rank")
        y = np.zeros((2,) * r, rr.NP_OF[dt])
        calls = [(gen.resample, (y,), dict(alg=alg, out_spatial=(3,) * max(r - 2, 1))),
                 (gen.resample_backward, (y,), dict(alg=alg, in_spatial=(3,) * max(r - 2, 1))),
                 (gen.Resample, (gen.MemoryDesc((2,) * r, dt),) * 2, dict(alg=alg))]
    elif kind == "out_len":
        k = data.draw(st.integers(0, 5).filter(lambda k: k != nsp), "len")
        calls = [(gen.resample, (x,), dict(alg=alg, out_spatial=(3,) * k)),
                 (gen.resample, (src,), dict(alg=alg, factors=(2.0,) * k))]
    elif kind == "out_size":
        bad = list(good_out)
        bad[data.draw(st.integers(0, nsp - 1))] = data.draw(st.sampled_from([0, -1, -9, 2.5,
                                                                            "3", None]))
        calls = [(gen.resample, (x,), dict(alg=alg, out_spatial=tuple(bad))),
                 (gen.resample, (src,), dict(alg=alg, out_spatial=tuple(bad)))]
    elif kind == "factor_neg":
        f = [1.0] * nsp
        f[data.draw(st.integers(0, nsp - 1))] = data.draw(st.sampled_from([-1.0, -0.5, -3.0,
                                                                          float("nan"),
                                                                          float("-inf")]))
        calls = [(gen.resample, (x,), dict(alg=alg, factors=tuple(f)))]
    elif kind == "factor_zero":
        f = [1.0] * nsp
        i = data.draw(st.integers(0, nsp - 1))
        f[i] = data.draw(st.sampled_from([0.0, -0.0, 0.9 / dims[2 + i]]))
        calls = [(gen.resample, (x,), dict(alg=alg, factors=tuple(f))),
                 (gen.resample, (src,), dict(alg=alg, factors=tuple(f)))]
    elif kind == "neither":
        calls = [(gen.resample, (x,), dict(alg=alg))]
    elif kind == "both":
        calls = [(gen.resample, (x,), dict(alg=alg, out_spatial=good_out,
                                           factors=(1.0,) * nsp))]
    elif kind == "dtype":
        bad = data.draw(st.sampled_from([np.int32, np.float64, np.int16, np.uint16, np.int64,
                                         np.bool_, np.complex64]), "dtype")
        y = np.ones(dims, bad)
        calls = [(gen.resample, (y,), dict(alg=alg, out_spatial=good_out)),
                 (gen.resample_backward, (y,), dict(alg=alg, in_spatial=good_out))]
        if bad in (np.int32, np.float64, np.int16):
            md = gen.MemoryDesc(dims, bad)
            calls.append((gen.Resample, (md, md), dict(alg=alg)))
    elif kind == "in_len":
        k = data.draw(st.integers(0, 5).filter(lambda k: k != nsp), "len")
        calls = [(gen.resample_backward, (x,), dict(alg=alg, in_spatial=(3,) * k))]
    elif kind == "in_size":
        bad = list(good_out)
        bad[0] = data.draw(st.sampled_from([0, -2, 1.5, None]))
        calls = [(gen.resample_backward, (src,), dict(alg=alg, in_spatial=tuple(bad)))]
    elif kind == "prim_desc":
        other = list(dims)
        j = data.draw(st.sampled_from([0, 1]), "axis")
        other[j] += 1
        odt = "f32" if dt != "f32" else "u8"
        calls = [(gen.Resample, (src.desc, gen.MemoryDesc(other, dt, fmt)), dict(alg=alg)),
                 (gen.ResampleBackward, (src.desc, gen.MemoryDesc(other, dt, fmt)),
                  dict(alg=alg)),
                 (gen.Resample, (src.desc, gen.MemoryDesc(dims, odt, fmt)), dict(alg=alg))]
    note("kind=%s" % kind)
    for fn, args, kw in calls:
        expect_gen_error(fn, *args, **kw)
    if kind == "prim_call":
        out_md = gen.MemoryDesc(dims[:2] + good_out, dt, fmt)
        p = gen.Resample(src.desc, out_md, alg=alg)
        pb = gen.ResampleBackward(out_md, src.desc, alg=alg)
        odt = "f32" if dt != "f32" else "u8"
        dst = garbage_memory(out_md, rng)
        wrong_dst = garbage_memory(gen.MemoryDesc(dims[:2] + good_out, odt, fmt), rng)
        wrong_src = garbage_memory(gen.MemoryDesc(dims, odt, fmt), rng)
        hd, hw = digest(dst), digest(wrong_dst)
        expect_gen_error(p, wrong_src, dst)
        expect_gen_error(p, src, wrong_dst)
        if good_out != dims[2:]:
            expect_gen_error(p, dst, src)        # swapped
            expect_gen_error(pb, src, dst)       # backward with the forward's operands
        assert digest(dst) == hd and digest(wrong_dst) == hw, \
            "a failed resampling call modified a destination"
    assert digest(src) == h_src and digest(x) == h_x, "source modified"
    counted("invalid resample")


# =========================================================================== garbage fuzzer

SMALL_INT = st.integers(-2, 9)
# sizes that do not fit 64-bit byte offsets (never an allocation that could succeed)
HUGE_INT = st.sampled_from([2 ** 63, 2 ** 64 + 1, 10 ** 30, -(2 ** 63), 2 ** 100, 10 ** 400])
G_INT = st.one_of(SMALL_INT, SMALL_INT, HUGE_INT)
G_FLOAT = st.one_of(st.floats(-3, 6), st.sampled_from([float("nan"), float("inf"), -0.0,
                                                       1e300, 1e20, 1e-300, -1e20]))
G_STR = st.one_of(st.sampled_from(["", "abcd", "nchw", "nChw16c", "ba", "Ab16a", "aBcd8b",
                                   "x", "f32", "u8", "bf16", "linear", "nearest", "any",
                                   "zz", "AB16a16b", "aBc99999999999999999b"]),
                  st.text(TAG_ALPHABET, max_size=8))
G_SCALAR = st.one_of(G_INT, G_FLOAT, G_STR, st.sampled_from([None, True, False, 1j, b"ab",
                                                             object(), np.float32(2),
                                                             np.int64(3)]))
G_SEQ = st.one_of(st.lists(G_INT, max_size=6).map(tuple), st.lists(G_SCALAR, max_size=4),
                  st.lists(SMALL_INT, min_size=1, max_size=6).map(tuple))


@st.composite
def g_array(draw):
    dims = draw(st.lists(st.integers(0, 5), min_size=0, max_size=6))
    dt = draw(st.sampled_from(MOVE_DTYPES + [np.dtype(np.complex128), np.dtype(object),
                                             np.dtype("U2"), np.dtype(np.longdouble)]))
    a = np.zeros(dims, dt)
    if draw(st.booleans()) and a.ndim:
        a = a[..., ::-1]
    return a


@st.composite
def g_desc(draw):
    dims = draw(st.lists(st.integers(1, 6), min_size=1, max_size=5))
    dt = draw(st.sampled_from(["f32", "u8", "bf16", "s32", np.float64]))
    tag = draw(tag_st(len(dims), max_inner=16))
    return gen.MemoryDesc(dims, dt, tag)


@st.composite
def g_huge_desc(draw):
    """A descriptor gen accepts whose byte size does not fit in 63 bits (or None)."""
    nd = draw(st.integers(1, 4))
    dims = [draw(st.integers(1, 4)) for _ in range(nd)]
    dims[draw(st.integers(0, nd - 1))] = draw(st.sampled_from([2 ** 61, 2 ** 62, 2 ** 63,
                                                               10 ** 30]))
    try:
        return gen.MemoryDesc(dims, draw(st.sampled_from(["f32", "u8"])),
                              ref.tag_string(draw(st.permutations(range(nd))), []))
    except gen.Error:
        return None


G_ANY = st.one_of(G_SCALAR, G_SEQ, g_array(), g_desc(), g_huge_desc(),
                  g_desc().map(lambda d: gen.Memory(d)))


@budget(2000)
@given(data=st.data())
def test_garbage_only_ever_raises_gen_error(data):
    which = data.draw(st.sampled_from([
        "MemoryDesc", "permute", "reshape", "Memory", "from_array", "reorder", "Reorder",
        "Reorder_call", "shuffle", "shuffle_backward", "ShuffleChannels", "resample",
        "resample_backward", "Resample", "ResampleBackward", "kernels"]), "entry point")
    d = lambda name, s=G_ANY: data.draw(s, name)  # noqa: E731
    opt = lambda name, s=G_ANY: {name: d(name, s)} if data.draw(st.booleans(), "has " + name) \
        else {}  # noqa: E731
    if which == "MemoryDesc":
        fn, args, kw = gen.MemoryDesc, (d("dims", st.one_of(G_SEQ, G_ANY)), d("dtype")), \
            dict(**opt("format", st.one_of(G_STR, G_ANY)), **opt("strides", G_SEQ))
    elif which in ("permute", "reshape"):
        md = d("desc", g_desc())
        fn = md.permute_axes if which == "permute" else md.reshape
        args, kw = (d("arg", st.one_of(G_SEQ, G_ANY)),), {}
    elif which == "Memory":
        fn, args, kw = gen.Memory, (d("desc", st.one_of(g_desc(), G_ANY)),), opt("buffer")
    elif which == "from_array":
        fn, args, kw = gen.Memory.from_array, (d("array", st.one_of(g_array(), G_ANY)),), \
            dict(**opt("format", G_STR), **opt("dtype"))
    elif which == "reorder":
        fn = gen.reorder
        args = (d("src", st.one_of(g_array(), G_ANY)), d("dst", st.one_of(G_STR, G_ANY)))
        kw = dict(**opt("scales", st.one_of(G_SEQ, G_ANY)), **opt("scale_mask", G_INT),
                  **opt("src_zero_point", G_SCALAR), **opt("dst_zero_point", G_SCALAR),
                  **opt("sum_scale", G_SCALAR), **opt("threads", G_SCALAR))
    elif which == "Reorder":
        fn = gen.Reorder
        args = (d("src_desc", st.one_of(g_desc(), G_ANY)), d("dst_desc", st.one_of(g_desc(),
                                                                                 G_ANY)))
        kw = dict(**opt("scales", G_SEQ), **opt("scale_mask", G_INT),
                  **opt("src_zero_point", G_SCALAR), **opt("sum_scale", G_SCALAR))
    elif which == "Reorder_call":
        md = d("desc", g_desc())
        fn = gen.Reorder(md, gen.MemoryDesc(md.dims, md.dtype,
                                            ref.tag_string(list(range(md.ndims))[::-1], [])))
        args, kw = (d("src", st.one_of(G_ANY, st.just(gen.Memory(md)))), d("dst")), {}
    elif which in ("shuffle", "shuffle_backward"):
        fn = gen.shuffle_channels if which == "shuffle" else gen.shuffle_channels_backward
        args = (d("x", st.one_of(g_array(), G_ANY)),)
        kw = dict(**opt("axis", G_SCALAR), **opt("group", G_SCALAR))
    elif which == "ShuffleChannels":
        fn = gen.ShuffleChannels
        args = (d("desc", st.one_of(g_desc(), G_ANY)),)
        kw = dict(**opt("axis", G_SCALAR), **opt("group", G_SCALAR))
    elif which in ("resample", "resample_backward"):
        fn = gen.resample if which == "resample" else gen.resample_backward
        args = (d("x", st.one_of(g_array(), G_ANY)),)
        kw = dict(alg=d("alg", st.one_of(st.sampled_from(["nearest", "linear"]), G_SCALAR)),
                  **opt("format", G_STR))
        if which == "resample":
            kw.update(opt("out_spatial", st.one_of(G_SEQ, G_ANY)))
        else:  # in_spatial is a required keyword
            kw["in_spatial"] = d("in_spatial", st.one_of(G_SEQ, G_ANY))
        if which == "resample":
            kw.update(opt("factors", st.one_of(st.lists(G_FLOAT, max_size=4).map(tuple),
                                               G_ANY)))
    elif which in ("Resample", "ResampleBackward"):
        fn = gen.Resample if which == "Resample" else gen.ResampleBackward
        args = (d("desc1", st.one_of(g_desc(), G_ANY)), d("desc2", st.one_of(g_desc(), G_ANY)))
        kw = {"alg": d("alg", st.one_of(st.sampled_from(["nearest", "linear"]), G_SCALAR))}
    else:
        fn, args, kw = gen.kernels, (d("op"),), {}
    call = "%s(*%r, **%r)" % (which, args, kw)
    note(call)
    try:
        fn(*args, **kw)
    except gen.Error as e:
        assert str(e).strip(), "empty gen.Error message"
    except MemoryError:
        # a representable but absurd size (say 4 EiB of u8): running out of memory is not an
        # argument error; sizes beyond 63 bits are test_sizes_beyond_64_bits_are_refused's
        pass
    except Exception as e:  # noqa: BLE001
        raise AssertionError("%s raised %s (not gen.Error): %s\n  call: %s" % (
            which, type(e).__name__, e, call[:500])) from e
    counted("garbage")


# =========================================================================== regressions
# Minimal reproductions of what the fuzzers found (see the report); each must raise gen.Error.


# Non-gen.Error exceptions (or accepted invalid inputs): sizes that overflow 64 bits reach
# NumPy / cffi (ValueError 'Maximum allowed dimension exceeded', OverflowError), integers too
# large for a float (OverflowError), strings accepted as resampling factors, NumPy arrays of
# rank > 1 where a sequence of ints is expected (TypeError), an empty multi-dimensional buffer
# (TypeError from memoryview.cast), an array as kernels(op) (ValueError).
FOUND = [
    "gen.Memory(gen.MemoryDesc((2**61,), 'f32'))",
    "gen.Memory(gen.MemoryDesc((2, 3), 'f32', 'Ab99999999999999999999a'))",
    "gen.Memory(gen.MemoryDesc((2, 2), 'f32', strides=(2**62, 1)))",
    "gen.Reorder(gen.MemoryDesc((2**62, 2**62), 'f32'), gen.MemoryDesc((2**62, 2**62), 'f32', 'ba'))",
    "gen.ShuffleChannels(gen.MemoryDesc((2**62, 2**62), 'f32'), 1, 2)",
    "gen.reorder(np.zeros((2, 3), np.float32), 'Ab99999999999999999999a')",
    "gen.resample(np.zeros((1, 1, 4), np.float32), alg='linear', out_spatial=(2**70,))",
    "gen.resample(np.zeros((1, 1, 4), np.float32), alg='nearest', factors=(1e300,))",
    "gen.reorder(np.zeros(3, np.float32), 'a', sum_scale=10**400)",
    "gen.reorder(np.zeros(3, np.float32), 'a', scales=[10**400])",
    "gen.resample(np.zeros((1, 1, 3), np.float32), alg='nearest', factors=(10**400,))",
    "gen.resample(np.zeros((1, 1, 3), np.float32), alg='nearest', factors=('2',))",
    "gen.MemoryDesc(np.array([[2, 3]]), 'f32')",
    "gen.MemoryDesc((2, 3), 'f32').permute_axes(np.array([[1, 0]]))",
    "gen.MemoryDesc((2, 3), 'f32').reshape(np.array([[6]]))",
    "gen.Memory(gen.MemoryDesc((2,), 'u8'), buffer=np.zeros((0, 2), np.uint8))",
    "gen.kernels(np.array(['reorder', 'resample']))",
]


@pytest.mark.parametrize("call", FOUND, ids=["found%02d" % i for i in range(len(FOUND))])
def test_found_by_fuzzing(call):
    expect_gen_error(lambda: eval(call, {"gen": gen, "np": np}))


def _entry_points():
    """Every public function, constructor, primitive call and method, with valid arguments."""
    x = np.zeros((1, 4, 3, 3), np.float32)
    md, md2 = gen.MemoryDesc(x.shape, "f32"), gen.MemoryDesc((1, 4, 6, 6), "f32")
    mem, mem_b, mem2 = gen.Memory(md), gen.Memory(md), gen.Memory(md2)
    reorder, shuffle = gen.Reorder(md, md), gen.ShuffleChannels(md, 1, 2)
    up, down = gen.Resample(md, md2), gen.ResampleBackward(md2, md)
    return [
        (gen.reorder, (x, "nchw"), {}), (gen.Reorder, (md, md), {}), (reorder, (mem, mem_b), {}),
        (gen.shuffle_channels, (x, 1, 2), {}), (gen.shuffle_channels_backward, (x, 1, 2), {}),
        (gen.ShuffleChannels, (md, 1, 2), {}), (shuffle, (mem, mem_b), {}),
        (gen.resample, (x,), {"out_spatial": (6, 6)}),
        (gen.resample_backward, (mem2,), {"alg": "nearest", "in_spatial": (3, 3)}),
        (gen.Resample, (md, md2), {}), (gen.ResampleBackward, (md2, md), {}),
        (up, (mem, mem2), {}), (down, (mem2, mem), {}),
        (gen.MemoryDesc, ((2, 3), "f32"), {}), (md.permute_axes, ((0, 1, 2, 3),), {}),
        (md.reshape, ((4, 9),), {}), (gen.Memory, (md,), {}), (mem.to_array, (), {}),
        (gen.Memory.from_array, (x,), {}), (gen.isa, (), {}), (gen.kernels, (), {}),
        (gen.set_num_threads, (gen.runtime.num_threads(),), {}), (gen.tune, (reorder,), {}),
        (gen.forget_wisdom, (), {}), (gen.jit_wait, (), {}),
    ]


def test_arguments_that_do_not_fit_a_signature():
    """An unknown keyword, or one positional argument too many, to any entry point: gen.Error
    naming it (not Python's TypeError), a function by its public name; each call works with
    the arguments it takes."""
    public = {id(getattr(gen, name)): name for name in gen.__all__
              if not isinstance(getattr(gen, name), type)}
    for fn, args, kw in _entry_points():
        fn(*args, **kw)
        e = expect_gen_error(fn, *args, no_such_argument=1, **kw)
        assert "no_such_argument" in str(e), (fn, e)
        assert id(fn) not in public or str(e).startswith(public[id(fn)] + ":"), e
        e = expect_gen_error(fn, *args, *[None] * 9, 8.25, **kw)
        assert "8.25" in str(e), (fn, e)


def test_found_by_fuzzing_huge_valid_resample_primitive():
    """A valid but huge problem (6.9e18 bytes, representable): creating the primitive may
    raise gen.Error or MemoryError, not NumPy's ValueError('array is too big')."""
    md = gen.MemoryDesc((2 ** 61, 1, 3), "u8")
    try:
        gen.Resample(md, md)
    except (gen.Error, MemoryError):
        pass


def test_found_by_fuzzing_sum_scale_negative_zero():
    """dst = src + beta * dst_old in f32, in that order: with beta = -0.0, src = -0.0 and
    dst_old = 1.0 the sum is -0.0 + (-0.0 * 1.0) = -0.0 (the sign of beta matters)."""
    for old, want_bits in [(1.0, 0x80000000), (-1.0, 0x00000000)]:
        d = gen.Memory.from_array(np.full(20, old, np.float32))
        gen.reorder(np.full(20, -0.0, np.float32), d, sum_scale=-0.0)
        want = cr.reference_reorder(np.full(20, -0.0, np.float32), "f32", sum_scale=-0.0,
                                    dst_old=np.full(20, old, np.float32))
        assert int(cr.bits(want)[0]) == want_bits
        cr.assert_same(d.to_array(), want, what="sum_scale=-0.0, dst_old=%r" % old)
