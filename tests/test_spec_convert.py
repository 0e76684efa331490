"""Acceptance tests for gen.reorder's type conversion, scales, zero points and sum,
written from shared/API.md ("Data types" / Conversion rules, "Memory objects", "Reorder") and the
reorder seed, checked against tests/convert_reference.py (which does not import gen).

Only the public API is used: gen.reorder, gen.Reorder, gen.Memory, gen.Memory.from_array,
Memory.to_array, gen.MemoryDesc (and gen.isa in the tier subprocesses)."""
import decimal
import json
import os
import subprocess
import sys
import warnings
import zlib

import numpy as np
import pytest

import gen
from gen import plan
from checks import raises_gen

try:
    from . import reference as ref
    from . import convert_reference as cr
except ImportError:  # tests/ is not a package
    import reference as ref
    import convert_reference as cr

import ml_dtypes

BF16 = cr.BF16
TYPES = cr.TYPES
SHAPE = (2, 19, 3, 5)  # C = 19: nChw16c / nChw8c destinations are padded
PAIRS = [(s, d) for s in TYPES for d in TYPES]
LAYOUTS = [("nchw", "nChw16c"), ("nChw8c", "nhwc"), ("nchw", "nhwc"), ("aBcd4b", "nchw")]
NAN_BITS = {"f32": 0x7FC00000, "bf16": 0x7FC0, "f16": 0x7E00, "s8": 0x80, "u8": 0xFF,
            "s32": 0x80000000}
# per-channel scales for C = 19: negative, zero, inexact, tiny and large values
SCALES19 = [0.5, -1.0, 0.0, 2.0, 0.1, 1.0 / 3, 1e-3, 100.0, -0.25, 1.0, 3.5, -7.0, 1e-6, 250.0,
            0.75, -0.125, 64.0, 1.5, 0.3]
SZP = {"f32": 3, "bf16": -2, "f16": 1, "s8": -5, "u8": 128, "s32": 1000}
DZP = {"f32": 2, "bf16": -1, "f16": 4, "s8": -3, "u8": 100, "s32": -1000}


def seed_of(*x):
    return zlib.crc32(repr(x).encode())


def rng_of(*x):
    return np.random.default_rng(seed_of(*x))


# ------------------------------------------------------------------------------ helpers


def src_memory(a, spec):
    """A gen.Memory holding the logical array a in layout spec (filled by the reference)."""
    md = gen.MemoryDesc(a.shape, a.dtype, spec)
    m = gen.Memory(md)
    raw = ref.pack(a, spec)
    assert raw.size == md.nbytes
    m.data[:] = raw
    return m


def fill(m, kind, dname, rng=None):
    """Pre-fill a destination's bytes: 'zero', 'ff', 'nan' (a NaN / odd pattern of the type),
    'rand'."""
    if kind == "zero":
        m.data[:] = 0
    elif kind == "ff":
        m.data[:] = 0xFF
    elif kind == "nan":
        isz = cr.NP_OF[dname].itemsize
        pat = np.array([NAN_BITS[dname]], dtype=cr.UINT_OF_SIZE[isz]).view(np.uint8)
        m.data[:] = np.tile(pat, m.data.size // isz)
    elif kind == "rand":
        rng = rng or np.random.default_rng(0)
        m.data[:] = rng.integers(0, 256, m.data.size, dtype=np.uint8)
    else:
        raise AssertionError(kind)
    return m


def dst_with_old(dst_old, spec, dname, pad_garbage=False):
    """A destination Memory whose logical content is dst_old (padding zero, or 0xFF)."""
    md = gen.MemoryDesc(dst_old.shape, dname, spec)
    m = gen.Memory(md)
    raw = ref.pack(dst_old, spec)
    if pad_garbage:
        isz = dst_old.dtype.itemsize
        lay = ref.layout_from_tag(dst_old.shape, spec)
        pad = ref.padding_mask(lay)
        assert pad.any()
        el = raw.view(cr.UINT_OF_SIZE[isz])
        el[pad] = np.iinfo(cr.UINT_OF_SIZE[isz]).max
    m.data[:] = raw
    return m


def check_padding(m, shape, spec):
    """Every byte of a blocked destination outside the logical elements is zero."""
    isz = cr.NP_OF[cr.name_of(m.desc.dtype)].itemsize
    lay = ref.layout_from_tag(shape, spec)
    raw = np.array(m.data, copy=True)
    assert raw.size == lay.footprint() * isz
    el = raw.view(cr.UINT_OF_SIZE[isz])
    pad = ref.padding_mask(lay)
    bad = np.flatnonzero(el[pad])
    assert bad.size == 0, "padding not zero (%d of %d padding elements)" % (bad.size, pad.sum())


def read(m, shape, spec, dname):
    return ref.unpack(np.array(m.data, copy=True), shape, spec, cr.NP_OF[dname])


def attrs_of(scales=None, scale_mask=0, src_zero_point=0, dst_zero_point=0, sum_scale=None):
    kw = {}
    if scales is not None:
        kw["scales"] = scales
    if scale_mask:
        kw["scale_mask"] = scale_mask
    if src_zero_point:
        kw["src_zero_point"] = src_zero_point
    if dst_zero_point:
        kw["dst_zero_point"] = dst_zero_point
    if sum_scale is not None:
        kw["sum_scale"] = sum_scale
    return kw


def run_convert(a, sspec, dname, dspec, attrs=None, dst_old=None, prefill="ff", threads=None,
                pad_garbage=False, what=""):
    """gen.reorder(Memory(a, sspec) -> Memory(dname, dspec), **attrs), checked against the
    reference (values, padding zero, source untouched).  Returns the destination's bytes."""
    attrs = dict(attrs or {})
    src = src_memory(a, sspec)
    before = bytes(src.data)
    if dst_old is not None:
        dst = dst_with_old(dst_old, dspec, dname, pad_garbage)
    else:
        dst = fill(gen.Memory(gen.MemoryDesc(a.shape, dname, dspec)), prefill, dname,
                   np.random.default_rng(seed_of(a.shape, dname, dspec)))
    kw = dict(attrs)
    if threads is not None:
        kw["threads"] = threads
    out = gen.reorder(src, dst, **kw)
    assert out is dst
    assert bytes(src.data) == before, "source modified"
    assert cr.name_of(dst.desc.dtype) == dname
    want = cr.reference_reorder(a, dname, dst_old=dst_old, **attrs)
    got = read(dst, a.shape, dspec, dname)
    cr.assert_same(got, want, a, what or "%s %s->%s %s %r" % (a.dtype, sspec, dname, dspec, attrs))
    check_padding(dst, a.shape, dspec)
    return bytes(dst.data)


def tensor(name, shape=SHAPE, *key):
    return cr.make_tensor(name, shape, rng_of(name, shape, *key))


# ============================================================================== reference
# Self-tests of convert_reference.py: they do not call gen.


def _random_f32(n, seed):
    return np.random.default_rng(seed).integers(0, 2 ** 32, n, dtype=np.uint64) \
        .astype(np.uint32).view(np.float32)


def test_reference_bf16_matches_ml_dtypes():
    x = np.concatenate([_random_f32(300000, 1), cr.f32_edges(),
                        cr.f32(np.random.default_rng(2).standard_normal(10000))])
    fin = x[np.isfinite(x)]
    with np.errstate(all="ignore"):
        want = fin.astype(BF16).view(np.uint16)
    got = cr.cvt_bf16_bits(fin)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(float(fin[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]
    # non-finite: inf stays inf, NaN stays NaN with its sign
    nf = cr.f32([np.inf, -np.inf, np.nan, -np.nan])
    nf = np.concatenate([nf, cr.f32_from_bits(0x7F800001, 0xFF800001, 0x7FFFFFFF, 0x7FA00001)])
    b = cr.cvt_bf16_bits(nf)
    assert b[0] == 0x7F80 and b[1] == 0xFF80
    out = cr.to_f32(b.view(BF16))
    assert np.isnan(out[2:]).all()
    assert (np.signbit(out[2:]) == np.signbit(nf[2:])).all()


def test_reference_bf16_known_bits():
    cases = {0x3F808000: 0x3F80, 0x3F818000: 0x3F82, 0x3F808001: 0x3F81, 0x3F807FFF: 0x3F80,
             0x7F7F8000: 0x7F80, 0x7F7F7FFF: 0x7F7F, 0xFF7F8000: 0xFF80, 0x7F7E8000: 0x7F7E,
             0x00008000: 0x0000, 0x00018000: 0x0002, 0x00008001: 0x0001, 0x80008000: 0x8000,
             0x007F8000: 0x0080, 0x00000001: 0x0000, 0x80000000: 0x8000, 0x7F800000: 0x7F80}
    x = cr.f32_from_bits(*cases)
    assert [hex(v) for v in cr.cvt_bf16_bits(x)] == [hex(v) for v in cases.values()]


def test_reference_f16_matches_numpy():
    x = np.concatenate([_random_f32(300000, 3), cr.f32_edges()])
    got = cr.cvt_f16(x)
    with np.errstate(all="ignore"):
        want = x.astype(np.float64).astype(np.float16)  # f32 -> f64 exact, one rounding to f16
    cr.assert_same(got, want, x, "f16")
    known = {65520.0: 0x7C00, 65519.0: 0x7BFF, 65504.0: 0x7BFF, 3e-8: 0x0001, 2.0 ** -25: 0,
             3 * 2.0 ** -25: 0x0002, 1 + 2.0 ** -11: 0x3C00, 1 + 3 * 2.0 ** -11: 0x3C02,
             -65520.0: 0xFC00, 2049.0: 0x6800, 2051.0: 0x6802, -0.0: 0x8000}
    got = cr.bits(cr.cvt_f16(cr.f32(list(known))))
    assert [hex(v) for v in got] == [hex(v) for v in known.values()]


def test_reference_int_known_values():
    x = cr.f32([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 127.5, 128.0, -128.5, -129.0, 255.5, 256.0,
                2147483520.0, 2.0 ** 31, -(2.0 ** 31), -2147483904.0, np.nan, np.inf, -np.inf,
                1024.0, -124.0, -0.0, 0.49999997, 126.5])
    want = {
        "s8": [0, 2, 2, 0, -2, -2, 127, 127, -128, -128, 127, 127, 127, 127, -128, -128, 0, 127,
               -128, 127, -124, 0, 0, 126],
        "u8": [0, 2, 2, 0, 0, 0, 128, 128, 0, 0, 255, 255, 255, 255, 0, 0, 0, 255, 0, 255, 0, 0,
               0, 126],
        "s32": [0, 2, 2, 0, -2, -2, 128, 128, -128, -129, 256, 256, 2147483520, 2147483647,
                -2147483648, -2147483648, 0, 2147483647, -2147483648, 1024, -124, 0, 0, 126],
    }
    for name, w in want.items():
        got = cr.cvt(x, name)
        assert got.dtype == cr.NP_OF[name]
        assert got.tolist() == w, name


def test_reference_to_f32():
    s = np.array([2 ** 24 + 1, 2 ** 24 + 3, -(2 ** 24) - 1, 2 ** 31 - 1, -(2 ** 31), 7],
                 dtype=np.int32)
    assert cr.to_f32(s).tolist() == [2.0 ** 24, 2.0 ** 24 + 4, -(2.0 ** 24), 2.0 ** 31,
                                     -(2.0 ** 31), 7.0]
    b = np.array([0x3F80, 0x0001, 0x8000, 0xFF80, 0x7F7F], dtype=np.uint16).view(BF16)
    assert cr.bits(cr.to_f32(b)).tolist() == [0x3F800000, 0x00010000, 0x80000000, 0xFF800000,
                                              0x7F7F0000]
    h = np.array([0x0001, 0x7BFF, 0x8400], dtype=np.uint16).view(np.float16)
    assert cr.to_f32(h).tolist() == [2.0 ** -24, 65504.0, -(2.0 ** -14)]
    # every bf16 / f16 value converts exactly: round trip is the identity on non-NaN bits
    allb = np.arange(2 ** 16, dtype=np.uint16)
    for dt, back in ((BF16, cr.cvt_bf16), (np.float16, cr.cvt_f16)):
        v = allb.view(dt)
        r = back(cr.to_f32(v))
        keep = ~np.isnan(cr.to_f32(v))
        assert (cr.bits(r)[keep] == allb[keep]).all()


@pytest.mark.parametrize("mask", [0, 1, 2, 4, 8, 3, 5, 6, 9, 10, 12, 15])
def test_reference_scale_indexing(mask):
    shape = (2, 3, 4, 5)
    n = int(np.prod([shape[i] for i in range(4) if mask >> i & 1]))
    scales = np.arange(1, n + 1, dtype=np.float32)
    al = np.broadcast_to(cr.alpha_array(shape, scales, mask), shape)
    for idx in np.ndindex(*shape):
        assert al[idx] == cr.alpha_slow(idx, shape, scales, mask)
    if mask == 6:  # explicitly: row-major over (c, h)
        assert al[1, 2, 3, 4] == scales[2 * 4 + 3]


def test_reference_formula_and_defaults():
    src = np.array([3, -7, 0], dtype=np.int8)
    old = np.array([10, 1, 0], dtype=np.int8)
    got = cr.reference_reorder(src, "s8", scales=0.5, src_zero_point=1, sum_scale=2.0,
                               dst_old=old, dst_zero_point=-3)
    assert got.tolist() == [18, -5, -4]  # (3-1)*.5 + 20 - 3; (-7-1)*.5 + 2 - 3; -.5 + 0 - 3
    # defaults keep -0.0; scales=1.0, src_zero_point=0 are exact
    z = cr.f32([-0.0, -0.0])
    for kw in ({}, {"scales": 1.0}, {"scales": 2.0}, {"src_zero_point": 0, "dst_zero_point": 0}):
        assert cr.bits(cr.reference_reorder(z, "f32", **kw)).tolist() == [0x80000000] * 2
    # equal dtypes without attributes: a bitwise copy (s32 is not rounded through f32)
    s = np.array([2 ** 24 + 1, 2 ** 31 - 1], dtype=np.int32)
    assert cr.reference_reorder(s, "s32").tolist() == s.tolist()
    assert cr.reference_reorder(s, "s32", scales=1.0).tolist() == [2 ** 24, 2 ** 31 - 1]
    p = cr.f32_from_bits(0x7FA00001)
    assert cr.bits(cr.reference_reorder(p, "f32")).tolist() == [0x7FA00001]


# ============================================================================== conversions


@pytest.mark.parametrize("layout", LAYOUTS, ids=["-".join(x) for x in LAYOUTS])
@pytest.mark.parametrize("sdt,ddt", PAIRS, ids=["%s-%s" % p for p in PAIRS])
def test_all_pairs_edge_and_random(sdt, ddt, layout):
    a = tensor(sdt, SHAPE, "pairs", layout)
    run_convert(a, layout[0], ddt, layout[1])


@pytest.mark.parametrize("sdt,ddt", PAIRS, ids=["%s-%s" % p for p in PAIRS])
def test_all_pairs_with_every_attribute(sdt, ddt):
    """Per-channel scales, both zero points and a sum, into a padded blocked destination."""
    a = tensor(sdt, SHAPE, "attrs")
    old = tensor(ddt, SHAPE, "old")
    full = dict(scales=SCALES19, scale_mask=2, src_zero_point=SZP[sdt],
                dst_zero_point=DZP[ddt])
    run_convert(a, "nhwc", ddt, "nChw16c", dict(full, sum_scale=0.5), dst_old=old)
    run_convert(a, "nChw16c", ddt, "nhwc", dict(full, sum_scale=-1.0), dst_old=old)
    run_convert(a, "nhwc", ddt, "nChw8c", full, prefill="nan")


def test_seed_examples():
    out = gen.reorder(np.array([1024.0], np.float32), gen.MemoryDesc((1,), "s8"))
    assert out.to_array().tolist() == [127] and out.to_array().dtype == np.int8
    out = gen.reorder(np.array([-124.0], np.float32), gen.MemoryDesc((1,), "u8"))
    assert out.to_array().tolist() == [0] and out.to_array().dtype == np.uint8
    assert gen.Memory.from_array(np.float32([1024.0]), "x", "s8").to_array().tolist() == [127]
    assert gen.Memory.from_array(np.float32([-124.0]), "x", "u8").to_array().tolist() == [0]


def test_conversion_rule_examples():
    """The examples of the Conversion rules, one element at a time."""
    cases = [
        (np.float32(3e-8), "f16", 0x0001), (np.float32(65520.0), "f16", 0x7C00),
        (np.float32(65519.0), "f16", 0x7BFF), (np.float32(-65520.0), "f16", 0xFC00),
        (np.float32(2.5), "s8", 2), (np.float32(-2.5), "s32", -2), (np.float32(0.5), "u8", 0),
        (np.float32(1.5), "u8", 2), (np.float32(np.nan), "s8", 0), (np.float32(np.nan), "u8", 0),
        (np.float32(np.nan), "s32", 0), (np.float32(np.inf), "s32", 2 ** 31 - 1),
        (np.float32(-np.inf), "s32", -(2 ** 31)), (np.float32(2.0 ** 31), "s32", 2 ** 31 - 1),
        (np.float32(-np.inf), "u8", 0), (np.float32(np.inf), "s8", 127),
        (np.float32(1 + 2.0 ** -8), "bf16", 0x3F80), (np.float32(1 + 3 * 2.0 ** -8), "bf16", 0x3F82),
        (cr.f32_from_bits(0x7F7F8000)[0], "bf16", 0x7F80),
        (cr.f32_from_bits(0x00018000)[0], "bf16", 0x0002),
    ]
    for v, dname, want in cases:
        a = np.full((1, 3, 1, 2), v, np.float32)
        m = gen.reorder(a, gen.MemoryDesc(a.shape, dname, "nChw16c"))
        got = cr.bits(m.to_array()).reshape(-1)
        if dname in ("f16", "bf16"):
            assert [hex(int(g)) for g in got] == [hex(want)] * 6, (float(v), dname)
        else:
            assert m.to_array().reshape(-1).tolist() == [want] * 6, (float(v), dname)
    # NaN stays NaN in bf16 / f16
    for dname in ("bf16", "f16"):
        a = cr.f32_from_bits(0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA00001).reshape(2, 2)
        m = gen.reorder(a, gen.MemoryDesc(a.shape, dname))
        assert np.isnan(cr.to_f32(m.to_array())).all()


@pytest.mark.parametrize("sdt", TYPES)
def test_numpy_sources_any_strides(sdt):
    """A NumPy source (non-contiguous views) converted into a MemoryDesc / Memory destination."""
    base = tensor(sdt, (2, 5, 19, 3), "np")
    a = base.transpose(0, 2, 3, 1)[:, :, :, ::-1]  # logical (2, 19, 3, 5), odd strides
    snap = np.array(a, copy=True)
    for ddt in TYPES:
        md = gen.MemoryDesc(a.shape, ddt, "nChw16c")
        out = gen.reorder(a, md)
        assert isinstance(out, gen.Memory) and out.desc == md
        want = cr.reference_reorder(np.ascontiguousarray(a), ddt)
        cr.assert_same(read(out, a.shape, "nChw16c", ddt), want, a, "%s->%s" % (sdt, ddt))
        check_padding(out, a.shape, "nChw16c")
        arr = out.to_array()
        assert arr.dtype == cr.NP_OF[ddt] and arr.flags.c_contiguous
        cr.assert_same(arr, want)
        dst = fill(gen.Memory(gen.MemoryDesc(a.shape, ddt, "nhwc")), "ff", ddt)
        assert gen.reorder(a, dst, scales=2.0, dst_zero_point=DZP[ddt]) is dst
        cr.assert_same(dst.to_array(), cr.reference_reorder(
            np.ascontiguousarray(a), ddt, scales=2.0, dst_zero_point=DZP[ddt]))
    assert cr.mismatches(a, snap).size == 0, "NumPy source modified"


# ============================================================================== scales


SINGLE_SCALES = [2.0, -0.5, 0.0, -0.0, 0.1, 1.0 / 3, 1e-30, 3e38, -1.0, 1.0, 1e-40]
SCALE_PAIRS = [("f32", "s8"), ("f32", "u8"), ("s8", "f32"), ("u8", "s8"), ("f32", "bf16"),
               ("f32", "f16"), ("s32", "s8"), ("bf16", "s32"), ("f16", "f32"), ("f32", "f32"),
               ("s8", "s8")]


@pytest.mark.parametrize("scale", SINGLE_SCALES)
def test_one_scale(scale):
    for sdt, ddt in SCALE_PAIRS:
        a = tensor(sdt, SHAPE, "one")
        run_convert(a, "nchw", ddt, "nChw16c", {"scales": scale})


def test_scales_as_float_list_or_array():
    a = tensor("f32", SHAPE, "kinds")
    want = run_convert(a, "nchw", "s8", "nChw16c", {"scales": 0.3})
    for s in ([0.3], (0.3,), np.array([0.3]), np.array([0.3], np.float32),
              np.array([[0.3]])):
        assert run_convert(a, "nchw", "s8", "nChw16c", {"scales": s}) == want, repr(s)
    per = np.linspace(-3, 3, 19)
    want = run_convert(a, "nchw", "u8", "nhwc", {"scales": per, "scale_mask": 2})
    for s in (per.tolist(), tuple(per.tolist()), per.astype(np.float32),
              per.astype(np.float32).tolist()):
        assert run_convert(a, "nchw", "u8", "nhwc", {"scales": s, "scale_mask": 2}) == want
    # the NumPy dtypes of the table's floats, bf16 (ml_dtypes) included: their values
    halves = per.astype(BF16)
    want = run_convert(a, "nchw", "u8", "nhwc", {"scales": halves.astype(np.float64),
                                                 "scale_mask": 2})
    assert run_convert(a, "nchw", "u8", "nhwc", {"scales": halves, "scale_mask": 2}) == want
    assert run_convert(a, "nchw", "s8", "nChw16c", {"scales": np.float16(0.3)}) == \
        run_convert(a, "nchw", "s8", "nChw16c", {"scales": float(np.float16(0.3))})


MASKS = [1, 2, 4, 8, 3, 5, 6, 9, 10, 12, 15]
MASK_LAYOUTS = [("nchw", "nChw16c"), ("nChw16c", "nhwc"), ("nChw8c", "nChw16c"),
                ("nhwc", "nchw")]
MASK_TYPES = [("f32", "s8"), ("s8", "f32"), ("u8", "bf16"), ("f32", "f16"), ("bf16", "u8"),
              ("s32", "f32"), ("f16", "s8"), ("f32", "s32")]


def mask_scales(shape, mask, rng):
    n = int(np.prod([shape[i] for i in range(len(shape)) if mask >> i & 1]))
    s = rng.uniform(-4, 4, n)
    s[rng.integers(0, n, max(1, n // 7))] = 0.0
    return s


@pytest.mark.parametrize("layout", MASK_LAYOUTS, ids=["-".join(x) for x in MASK_LAYOUTS])
@pytest.mark.parametrize("mask", MASKS)
def test_per_axis_scales(mask, layout):
    rng = rng_of("mask", mask, layout)
    sdt, ddt = MASK_TYPES[(MASKS.index(mask) + MASK_LAYOUTS.index(layout)) % len(MASK_TYPES)]
    a = tensor(sdt, SHAPE, "mask", mask)
    s = mask_scales(SHAPE, mask, rng)
    run_convert(a, layout[0], ddt, layout[1], {"scales": s, "scale_mask": mask})
    # the same with a list, and as f32 -> f32 (scaling only)
    run_convert(a, layout[0], ddt, layout[1], {"scales": s.tolist(), "scale_mask": mask})
    b = tensor("f32", SHAPE, "mask32", mask)
    run_convert(b, layout[0], "f32", layout[1], {"scales": s, "scale_mask": mask})


@pytest.mark.parametrize("sdt,ddt", [("f32", "s8"), ("u8", "bf16"), ("s8", "f32")])
def test_conversions_between_blocks_that_do_not_nest(sdt, ddt):
    """Channel blocks of 4 and 6 (19 channels: both padded), with a scale per channel and zero
    points: the channel axis is read through a table of its source offsets."""
    a = tensor(sdt, SHAPE, "nonest", sdt)
    s = mask_scales(SHAPE, 2, rng_of("nonest", sdt))
    for src, dst in (("aBcd4b", "aBcd6b"), ("aBcd6b", "ABcd2a4b")):
        run_convert(a, src, ddt, dst, {"scales": s, "scale_mask": 2, "src_zero_point": 1,
                                       "dst_zero_point": -2})


@pytest.mark.parametrize("mask", [1, 2, 3])
def test_per_axis_scales_weights_layout(mask):
    shape = (19, 21, 3, 2)
    rng = rng_of("w", mask)
    s = mask_scales(shape, mask, rng)
    a = tensor("f32", shape, "w", mask)
    run_convert(a, "oihw", "s8", "OIhw4i16o4i", {"scales": s, "scale_mask": mask})
    run_convert(a, "hwio", "bf16", "OIhw16i16o", {"scales": s, "scale_mask": mask})
    q = tensor("s8", shape, "w8", mask)
    run_convert(q, "OIhw16i16o", "f32", "oihw", {"scales": s, "scale_mask": mask})


NARROW = [((2, 19, 13, 11), "aBcd4b", "nchw"), ((2, 19, 13, 11), "aBcd2b", "nchw"),
          ((38, 21, 5, 3), "ABcd4b16a4b", "bdca"), ((3, 6, 7, 140), "aBcd4b", "abcd"),
          ((2, 5, 3, 200), "aBcd4b", "abcd")]


@pytest.mark.parametrize("sdt,ddt", [("f32", "bf16"), ("s8", "f32"), ("f32", "s8"),
                                     ("f16", "f32"), ("u8", "u8")])
def test_narrow_blocked_sources(sdt, ddt):
    """Sources read along a small inner block (2 or 4 channels), whole and partial blocks,
    rows more and fewer than a de-interleaved call, with per-channel scales; 1 and 2
    threads."""
    for shape, sspec, dspec in NARROW:
        a = tensor(sdt, shape, "narrow", sspec)
        s = mask_scales(shape, 2, rng_of("narrow", shape))
        for threads in (1, 2):
            run_convert(a, sspec, ddt, dspec, {"scales": s, "scale_mask": 2}, threads=threads)
            run_convert(a, sspec, ddt, dspec, threads=threads)


# A converting tile whose source rows are a few elements more than B apart (11 or 13 of a
# 16-block, 26 of 32): the rows and the gaps between them convert in one call where the scales
# are linear along them (none, one, or over axes 0 and 1 where they follow), else row by row;
# 1 and 2 threads.
GAPPED = [((32, 11, 3, 4), "ABcd16a16b", "ABcd16b16a"), ((5, 13, 7, 9), "nChw16c", "nchw"),
          ((27, 11, 6, 5), "ABcd16b16a", "ABcd16a16b"), ((3, 26, 5, 6), "aBcd32b", "abcd")]
# ... and rows shorter than a line that lie apart (the last 10 of 26 or 42 channels, rows of 10
# of a plain source): gathered and converted in one call
SHORT_ROWS = [((40, 42, 33), "aBc16b", "cba"), ((9, 26, 3, 40), "aBcd16b", "dcba"),
              ((40, 10, 33), "acb", "cba")]


@pytest.mark.parametrize("sdt,ddt", [("s8", "f32"), ("f32", "bf16"), ("u8", "f16"),
                                     ("f32", "s8")])
def test_converting_tiles_over_gapped_rows(sdt, ddt):
    for shape, sspec, dspec in GAPPED + SHORT_ROWS:
        a = tensor(sdt, shape, "gapped", sspec)
        s = mask_scales(shape, 2, rng_of("gapped", shape))
        s3 = mask_scales(shape, 3, rng_of("gapped", shape, 3))  # linear along merged rows
        for threads in (1, 2):
            run_convert(a, sspec, ddt, dspec, {"scales": s, "scale_mask": 2}, threads=threads)
            run_convert(a, sspec, ddt, dspec, {"scales": s3, "scale_mask": 3}, threads=threads)
            run_convert(a, sspec, ddt, dspec, {"scales": 0.5}, threads=threads)
            run_convert(a, sspec, ddt, dspec, threads=threads)


@pytest.mark.parametrize("sdt,ddt", [("f32", "s8"), ("s8", "f32"), ("bf16", "u8"), ("f16", "f16")])
def test_conversions_between_blocks_that_do_not_nest_through_an_intermediate(sdt, ddt,
                                                                              monkeypatch):
    """Past reorder.GATHER_INDICES (here 8) index combinations of the axes whose blocks do
    not nest, src goes into a dense intermediate of its type, which the second step converts
    with the attributes: a scale per channel (the axis that does not nest), zero points, a
    sum; at 1 and 2 threads."""
    from gen.ops import reorder as reorder_op
    monkeypatch.setattr(reorder_op, "GATHER_INDICES", 8)
    shape, sspec, dspec = (7, 11, 13, 5), "aBcd4b", "aBcd3b"
    prim = gen.Reorder(gen.MemoryDesc(shape, sdt, sspec), gen.MemoryDesc(shape, ddt, dspec),
                       scales=[0.5])
    assert isinstance(prim._plan, reorder_op.Staged)
    a = tensor(sdt, shape, "staged", sspec)
    s2 = mask_scales(shape, 2, rng_of("staged", shape))
    old = tensor(ddt, shape, "staged old", dspec)
    for threads in (1, 2):
        run_convert(a, sspec, ddt, dspec, {"scales": s2, "scale_mask": 2,
                                           "src_zero_point": SZP[sdt],
                                           "dst_zero_point": DZP[ddt]}, threads=threads)
        run_convert(a, sspec, ddt, dspec, {"scales": 0.5, "sum_scale": 0.25}, dst_old=old,
                    threads=threads)


# Conversions into larger blocks, whose short runs (2 or 4 channels) follow each other in dst
# along the source blocks and then along the pixels: the run kernel gathers several pixels'
# runs in dst order and converts them at once (registry.options' nest (B, C)); channel tails in
# padded blocks, 3-D, a chunk of pixels that ends inside a row (37 pixels)
INTO_LARGER = [((2, 20, 5, 37), "aBcd4b", "aBcd8b"), ((2, 24, 5, 9), "aBcd2b", "aBcd8b"),
               ((1, 16, 3, 4, 5), "aBcde4b", "aBcde16b"), ((3, 13, 5, 7), "aBcd4b", "aBcd8b"),
               ((2, 8, 41, 37), "aBcd4b", "aBcd8b")]


@pytest.mark.parametrize("sdt,ddt", [("s8", "f32"), ("f32", "bf16"), ("f32", "u8"),
                                     ("f16", "f32")])
def test_conversions_into_larger_blocks(sdt, ddt, monkeypatch):
    """Gathered along C with one scale (and zero points), streaming and not, at 1 and 2
    threads; per-channel scales take the run kernel's other paths, with the same results."""
    monkeypatch.setattr(plan, "cached", plan.cached.__wrapped__)  # each call plans anew
    for shape, sspec, dspec in INTO_LARGER:
        a = tensor(sdt, shape, "larger", sspec)
        prim = gen.Reorder(gen.MemoryDesc(shape, sdt, sspec), gen.MemoryDesc(shape, ddt, dspec),
                           scales=[0.5])
        assert any(f["c_n"] > 1 for spec, f in prim._plan.bound if spec.kind == "run"), shape
        s = mask_scales(shape, 2, rng_of("larger", shape))
        one = {"scales": 0.5, "src_zero_point": SZP[sdt], "dst_zero_point": DZP[ddt]}
        for stream_bytes in (plan.STREAM_BYTES, 0):
            monkeypatch.setattr(plan, "STREAM_BYTES", stream_bytes)
            bound = gen.Reorder(prim.src_desc, prim.dst_desc)._plan.bound
            # (other pieces' short runs apart stream only in whole lines: plan._runs_stream)
            assert {f["stream"] > 0 for _, f in bound if f["c_n"] > 1} == {stream_bytes == 0}
            for threads in (1, 2):
                run_convert(a, sspec, ddt, dspec, one, threads=threads)
                run_convert(a, sspec, ddt, dspec, threads=threads)
        run_convert(a, sspec, ddt, dspec, {"scales": s, "scale_mask": 2})


def test_scales_on_other_ranks():
    for shape, tag, dtag, mask in [((37,), "x", "A16a", 1), ((5, 37), "ab", "ba", 2),
                                   ((5, 37), "ab", "AB16b16a", 3), ((3, 21, 9), "ncw", "nCw16c", 5),
                                   ((2, 21, 3, 4, 5), "ncdhw", "nCdhw16c", 18)]:
        rng = rng_of("ranks", shape, mask)
        s = mask_scales(shape, mask, rng)
        a = tensor("f32", shape, "ranks")
        run_convert(a, tag, "s8", dtag, {"scales": s, "scale_mask": mask})
        run_convert(a, tag, "f16", dtag, {"scales": s, "scale_mask": mask})


def test_negative_and_zero_scales_allowed():
    a = cr.f32([1.5, -2.5, np.inf, -np.inf, 0.0, -0.0]).reshape(2, 3)
    for s in (-1.0, 0.0, -0.0):
        for ddt in ("f32", "s8", "u8", "bf16"):
            out = gen.reorder(a, gen.MemoryDesc(a.shape, ddt), scales=s)
            cr.assert_same(out.to_array(), cr.reference_reorder(a, ddt, scales=s), a)


# ============================================================================== zero points


@pytest.mark.parametrize("sdt,szp,ddt", [
    ("u8", 128, "f32"), ("u8", 255, "s8"), ("u8", 1, "u8"), ("s8", -5, "u8"), ("s8", -128, "s8"),
    ("s8", 127, "f16"), ("s32", 1000000, "s8"), ("s32", -(2 ** 31), "f32"),
    ("s32", 2 ** 31 - 1, "s32"), ("f32", 3, "s8"), ("bf16", -2, "bf16"), ("f16", 7, "u8"),
    ("f32", -1, "f32")])
def test_src_zero_point(sdt, szp, ddt):
    a = tensor(sdt, SHAPE, "szp")
    run_convert(a, "nchw", ddt, "nChw16c", {"src_zero_point": szp})
    run_convert(a, "nhwc", ddt, "nchw", {"src_zero_point": szp, "scales": 0.5})


@pytest.mark.parametrize("sdt,ddt,dzp", [
    ("f32", "u8", 128), ("f32", "u8", 255), ("f32", "s8", -3), ("f32", "s8", -128),
    ("f32", "s8", 127), ("f32", "s32", -1000), ("f32", "s32", 2 ** 31 - 1), ("s8", "u8", 128),
    ("u8", "s8", -128), ("f32", "f32", 5), ("s8", "bf16", 1), ("u8", "f16", -7),
    ("bf16", "s32", 2 ** 24 + 1)])
def test_dst_zero_point(sdt, ddt, dzp):
    a = tensor(sdt, SHAPE, "dzp")
    run_convert(a, "nchw", ddt, "nChw16c", {"dst_zero_point": dzp})
    run_convert(a, "nChw8c", ddt, "nhwc", {"dst_zero_point": dzp, "scales": 2.0})


@pytest.mark.parametrize("sdt,szp,ddt,dzp", [
    ("u8", 300, "u8", -3), ("u8", -1, "s8", 256), ("s8", 128, "u8", -129), ("s8", -129, "s8", 128),
    ("f32", 2 ** 31 - 1, "s32", -(2 ** 31)), ("u8", 2 ** 24 + 1, "f32", 2 ** 24 + 3)])
def test_zero_points_beyond_the_data_types(sdt, szp, ddt, dzp):
    """Outside the data type's range (u8 -> u8 with a dst zero point of -3: [10, 200] gives
    [7, 197]); beyond 2**24, as the f32 nearest them."""
    a = tensor(sdt, SHAPE, "zpx")
    run_convert(a, "nchw", ddt, "nChw16c", {"src_zero_point": szp, "dst_zero_point": dzp})
    got = gen.reorder(np.array([10, 200], np.float32), gen.MemoryDesc((2,), "u8"),
                      dst_zero_point=-3)
    assert got.to_array().tolist() == [7, 197]


def test_zero_points_given_as_numpy_integers():
    a = tensor("u8", SHAPE, "npzp")
    want = run_convert(a, "nchw", "s8", "nChw16c", {"src_zero_point": 128, "dst_zero_point": -2})
    got = run_convert(a, "nchw", "s8", "nChw16c",
                      {"src_zero_point": np.int32(128), "dst_zero_point": np.int64(-2)})
    assert got == want


def test_default_attributes_keep_negative_zero():
    """An attribute at its default value is the identity: -0.0 stays -0.0."""
    a = np.full((1, 3, 2, 2), -0.0, np.float32)
    for ddt, nz in (("f32", 0x80000000), ("bf16", 0x8000), ("f16", 0x8000)):
        for kw in ({}, {"scales": 1.0}, {"scales": 2.0}, {"src_zero_point": 0},
                   {"dst_zero_point": 0}, {"scales": [1.0, 1.0, 1.0], "scale_mask": 2},
                   {"scales": 1.0, "src_zero_point": 0, "dst_zero_point": 0}):
            for tag in ("nchw", "nChw16c"):
                m = gen.reorder(a, gen.MemoryDesc(a.shape, ddt, tag), **kw)
                got = cr.bits(m.to_array()).reshape(-1).tolist()
                assert got == [nz] * 12, (ddt, kw, tag, [hex(g) for g in got])


def test_s32_goes_through_f32_with_attributes():
    """With attributes, s32 -> s32 computes in f32 (2^24 + 1 rounds); without, a copy."""
    a = np.array([2 ** 24 + 1, 2 ** 24 + 3, 2 ** 31 - 1, -(2 ** 31), 123456789, -7],
                 np.int32).reshape(1, 6)
    assert gen.reorder(a, gen.MemoryDesc(a.shape, "s32")).to_array().tolist() == a.tolist()
    got = gen.reorder(a, gen.MemoryDesc(a.shape, "s32"), scales=1.0).to_array()
    cr.assert_same(got, cr.reference_reorder(a, "s32", scales=1.0), a)
    assert got.reshape(-1).tolist()[:3] == [2 ** 24, 2 ** 24 + 4, 2 ** 31 - 1]


# ============================================================================== sum


SUM_CASES = [("f32", "s8", 1.0), ("f32", "u8", 0.5), ("s8", "f32", -2.0), ("f32", "f32", 1.0),
             ("u8", "s32", 3.0), ("bf16", "bf16", 0.25), ("f32", "f16", -1.0),
             ("s32", "u8", 0.5), ("f16", "bf16", 2.0), ("s8", "s8", 1.0)]


@pytest.mark.parametrize("sdt,ddt,beta", SUM_CASES)
@pytest.mark.parametrize("layout", [("nchw", "nChw16c"), ("nhwc", "nchw"), ("nChw16c", "nChw8c")],
                         ids=lambda x: "-".join(x))
def test_sum(sdt, ddt, beta, layout):
    a = tensor(sdt, SHAPE, "sum", layout)
    old = tensor(ddt, SHAPE, "sum_old", layout)
    run_convert(a, layout[0], ddt, layout[1], {"sum_scale": beta}, dst_old=old)
    run_convert(a, layout[0], ddt, layout[1],
                {"sum_scale": beta, "scales": SCALES19, "scale_mask": 2}, dst_old=old)


def test_sum_known_values():
    a = np.float32([[1.0, 2.5, -3.0, 100.0]])
    old = np.int8([[10, -10, 127, -128]])
    dst = gen.Memory.from_array(old)
    gen.reorder(a, dst, sum_scale=2.0)
    assert dst.to_array().tolist() == [[21, -18, 127, -128]]  # 1+20, 2.5-20=-17.5->-18
    dst = gen.Memory.from_array(np.float32([[1.0, 1.0, 1.0, 1.0]]))
    gen.reorder(a, dst, sum_scale=0.5, scales=2.0, dst_zero_point=1)
    assert dst.to_array().tolist() == [[3.5, 6.5, -4.5, 201.5]]


def test_sum_scale_zero_reads_finite_dst():
    a = tensor("f32", SHAPE, "sum0")
    old = cr.f32(np.random.default_rng(4).uniform(-100, 100, SHAPE))
    run_convert(a, "nchw", "f32", "nChw16c", {"sum_scale": 0.0}, dst_old=old)
    run_convert(a, "nchw", "s8", "nChw16c", {"sum_scale": 0.0},
                dst_old=old.astype(np.int8))


@pytest.mark.parametrize("sdt,ddt", [("f32", "s8"), ("f32", "f32"), ("u8", "bf16"), ("s8", "u8")])
def test_sum_blocked_dst_padding_garbage_becomes_zero(sdt, ddt):
    """A blocked destination's padding is zero after the op even if it held garbage."""
    a = tensor(sdt, SHAPE, "padg")
    old = tensor(ddt, SHAPE, "padg_old")
    run_convert(a, "nchw", ddt, "nChw16c", {"sum_scale": 1.0}, dst_old=old, pad_garbage=True)
    run_convert(a, "nhwc", ddt, "nChw8c", {"sum_scale": -0.5, "dst_zero_point": DZP[ddt]},
                dst_old=old, pad_garbage=True)


# ============================================================================== dst not read


NOT_READ = [("f32", "s8", {}), ("s8", "f32", {}), ("f32", "bf16", {}), ("u8", "f16", {}),
            ("f32", "f32", {"scales": 2.0}), ("bf16", "bf16", {"scales": -1.0}),
            ("f32", "u8", {"scales": SCALES19, "scale_mask": 2, "dst_zero_point": 7}),
            ("s32", "s8", {"src_zero_point": 5}), ("f16", "f16", {"dst_zero_point": 3}),
            ("s32", "s32", {}), ("f32", "f32", {})]


@pytest.mark.parametrize("sdt,ddt,attrs", NOT_READ)
def test_dst_not_read_without_sum(sdt, ddt, attrs):
    a = tensor(sdt, SHAPE, "notread")
    for dspec in ("nChw16c", "nhwc"):
        outs = {run_convert(a, "nchw", ddt, dspec, attrs, prefill=p)
                for p in ("zero", "ff", "nan", "rand")}
        assert len(outs) == 1, "result depends on the destination's previous bytes"


# ============================================================================== from_array


@pytest.mark.parametrize("ddt", TYPES)
def test_from_array_converts(ddt):
    for sdt in ("f32", "bf16", "s32", "u8"):
        a = tensor(sdt, SHAPE, "from_array")
        want = cr.reference_reorder(a, ddt)
        for fmt, dt in (("nChw16c", ddt), ("nhwc", cr.NP_OF[ddt]), (None, ddt)):
            m = gen.Memory.from_array(a, fmt, dt)
            assert cr.name_of(m.desc.dtype) == ddt
            assert m.desc == gen.MemoryDesc(a.shape, ddt, fmt)
            arr = m.to_array()
            assert arr.dtype == cr.NP_OF[ddt]
            cr.assert_same(arr, want, a, "%s->%s %s" % (sdt, ddt, fmt))
            if fmt == "nChw16c":
                check_padding(m, a.shape, fmt)
        # non-contiguous source
        v = np.asfortranarray(a)[:, ::-1]
        m = gen.Memory.from_array(v, "nChw8c", ddt)
        cr.assert_same(m.to_array(), cr.reference_reorder(np.ascontiguousarray(v), ddt))


def test_bf16_to_array_dtype():
    a = tensor("f32", SHAPE, "bf16arr")
    m = gen.Memory.from_array(a, "nChw16c", "bf16")
    arr = m.to_array()
    assert arr.dtype == np.dtype(ml_dtypes.bfloat16)
    cr.assert_same(arr, cr.cvt_bf16(a), a)
    m2 = gen.reorder(a, gen.MemoryDesc(SHAPE, ml_dtypes.bfloat16, "nhwc"))
    assert m2.to_array().dtype == np.dtype(ml_dtypes.bfloat16)
    assert m2.desc.dtype == "bf16"


def test_bf16_in_a_process_that_never_imported_ml_dtypes():
    """`import gen` leaves ml_dtypes (slow to import) until a bf16 array is made or read; the
    name 'bfloat16' that NumPy knows only after that import still names bf16, and a bf16
    result's array is ml_dtypes' bfloat16."""
    code = """if True:
        import sys
        import numpy as np
        import gen
        assert "ml_dtypes" not in sys.modules, "imported with gen"
        assert gen.MemoryDesc((2, 3), "bfloat16", "ab").dtype == "bf16"
        x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
        arr = gen.reorder(x, gen.MemoryDesc((2, 3), "bf16", "ba")).to_array()
        assert arr.dtype.name == "bfloat16", arr.dtype
        assert (arr.astype(np.float32) == x).all(), arr
        back = gen.reorder(arr, gen.MemoryDesc((2, 3), "f32", "ab")).to_array()
        assert (back == x).all(), back
        print("ok")
    """
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


# ============================================================================== primitive


PRIM_CASES = [
    ("f32", "s8", "nchw", "nChw16c", {"scales": SCALES19, "scale_mask": 2, "dst_zero_point": -3}),
    ("u8", "f32", "nChw8c", "nhwc", {"src_zero_point": 128, "scales": 0.25}),
    ("s8", "bf16", "nhwc", "nChw16c", {"scales": 1.5, "sum_scale": 0.5}),
    ("f32", "u8", "nchw", "nChw8c",
     {"scales": np.linspace(-2, 2, 10), "scale_mask": 9, "src_zero_point": 2,
      "dst_zero_point": 100, "sum_scale": -1.0}),
    ("bf16", "f16", "nchw", "nhwc", {}),
    ("f16", "s32", "nhwc", "nchw", {"scales": 1e5}),
]


@pytest.mark.parametrize("sdt,ddt,st,dt,attrs", PRIM_CASES)
def test_primitive_with_attributes(sdt, ddt, st, dt, attrs):
    smd = gen.MemoryDesc(SHAPE, sdt, st)
    dmd = gen.MemoryDesc(SHAPE, ddt, dt)
    p = gen.Reorder(smd, dmd, **attrs)
    for i in range(3):
        a = tensor(sdt, SHAPE, "prim", i)
        src = src_memory(a, st)
        old = tensor(ddt, SHAPE, "prim_old", i) if "sum_scale" in attrs else None
        if old is not None:
            d1, d2 = dst_with_old(old, dt, ddt), dst_with_old(old, dt, ddt)
        else:
            d1 = fill(gen.Memory(dmd), "ff", ddt)
            d2 = fill(gen.Memory(dmd), "nan", ddt)
        p(src, d1)
        gen.reorder(src, d2, **attrs)
        assert bytes(d1.data) == bytes(d2.data)
        want = cr.reference_reorder(a, ddt, dst_old=old, **attrs)
        cr.assert_same(read(d1, SHAPE, dt, ddt), want, a)
        check_padding(d1, SHAPE, dt)


# ============================================================================== threads


THREAD_CASES = [("f32", "s8", "nchw", "nChw16c", {"scales": 0.7, "dst_zero_point": 3}),
                ("u8", "f32", "nhwc", "nchw", {"src_zero_point": 128, "scales": 0.5}),
                ("f32", "bf16", "nChw8c", "nhwc", {}),
                ("s32", "f16", "nchw", "nChw8c", {"scales": 1e-3}),
                ("f16", "u8", "nChw16c", "nChw8c", {"sum_scale": 0.5}),
                ("bf16", "s32", "nhwc", "nChw16c", {"scales": None}),
                ("s8", "s8", "nchw", "nChw16c", {"scale_mask": 2, "scales": np.arange(37) / 9})]


@pytest.mark.parametrize("sdt,ddt,st,dt,attrs", THREAD_CASES)
def test_threads_bitwise(sdt, ddt, st, dt, attrs):
    shape = (4, 37, 9, 11)
    attrs = {k: v for k, v in attrs.items() if v is not None}
    a = tensor(sdt, shape, "threads")
    old = tensor(ddt, shape, "threads_old") if "sum_scale" in attrs else None
    outs = [run_convert(a, st, ddt, dt, attrs, dst_old=old, threads=t) for t in (1, 2, None)]
    assert outs[0] == outs[1] == outs[2]


@pytest.mark.parametrize("sdt,ddt,dspec,attrs", [
    ("f32", "bf16", "ABcde16a16b", {}), ("s8", "f32", "ABcde16a16b", {"scales": 0.25}),
    ("f32", "u8", "ABcde16a16b", {"scales": 3.0, "dst_zero_point": 7}),
    ("f32", "u8", "ABcde17a16b", {"scales": 3.0})])
@pytest.mark.parametrize("threads", [1, 2])
def test_large_padded_destination(sdt, ddt, dspec, attrs, threads):
    """Short converted runs (16 and, in the tail block of b, 6 elements), each followed by
    hundreds of bytes of padding in a destination past the caches: runs and padding go out
    as one line of streaming stores, whose first block holds the end of a run (with 17a the
    runs start at every alignment)."""
    shape = (1, 38, 16, 9, 40)
    a = tensor(sdt, shape, "large_padded")
    assert gen.MemoryDesc(shape, ddt, dspec).nbytes >= 4 << 20
    run_convert(a, "cedba", ddt, dspec, attrs, threads=threads)


# ============================================================================== equal dtypes


@pytest.mark.parametrize("dname", TYPES)
def test_equal_dtype_without_attributes_is_bitwise_copy(dname):
    isz = cr.NP_OF[dname].itemsize
    u = cr.UINT_OF_SIZE[isz]
    special = {"f32": [0x7FA00001, 0xFFA00001, 0x7FC12345, 0x7F800001, 0xFFFFFFFF, 0x80000000,
                       0x00000001, 0x807FFFFF],
               "bf16": [0x7F81, 0xFF81, 0x7FC1, 0x7FFF, 0x8000, 0x0001],
               "f16": [0x7D01, 0xFD01, 0x7E01, 0x7FFF, 0x8000, 0x0001],
               "s8": [0x80, 0x7F], "u8": [0xFF, 0x00], "s32": [0x80000000, 0x7FFFFFFF,
                                                               0x01000001]}[dname]
    rng = rng_of("copy", dname)
    b = rng.integers(0, np.iinfo(u).max, size=int(np.prod(SHAPE)), dtype=u, endpoint=True)
    b[: len(special)] = special
    a = rng.permutation(b).view(cr.NP_OF[dname]).reshape(SHAPE)
    for st, dt in LAYOUTS + [("nChw16c", "nchw")]:
        for kw in ({}, {"scales": None, "scale_mask": 0, "src_zero_point": 0,
                        "dst_zero_point": 0, "sum_scale": None}):
            src = src_memory(a, st)
            dst = fill(gen.Memory(gen.MemoryDesc(SHAPE, dname, dt)), "rand", dname, rng)
            gen.reorder(src, dst, **kw)
            assert bytes(dst.data) == ref.pack(a, dt).tobytes(), (st, dt, kw)
    # from_array with the same dtype, named or as NumPy dtype
    for d in (dname, cr.NP_OF[dname]):
        m = gen.Memory.from_array(a, "nChw16c", d)
        assert bytes(m.data) == ref.pack(a, "nChw16c").tobytes()


# ============================================================================== ISA tiers

TIER_SCRIPT = r"""
import json, sys
import numpy as np
import gen
import ml_dtypes
NP = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16, "s8": np.int8,
      "u8": np.uint8, "s32": np.int32}
cases = json.loads(sys.stdin.read())
out = {"isa": gen.isa(), "results": []}
for c in cases:
    dims = tuple(c["dims"])
    res = []
    for threads in (1, 2):
        src = gen.Memory(gen.MemoryDesc(dims, c["sdt"], c["st"]))
        src.data[:] = np.frombuffer(bytes.fromhex(c["src"]), np.uint8)
        dst = gen.Memory(gen.MemoryDesc(dims, c["ddt"], c["dt"]))
        if c["old"] is not None:
            dst.data[:] = np.frombuffer(bytes.fromhex(c["old"]), np.uint8)
        else:
            dst.data[:] = 0xFF
        attrs = dict(c["attrs"])
        gen.reorder(src, dst, threads=threads, **attrs)
        res.append(bytes(dst.data).hex())
    out["results"].append(res)
sys.stdout.write(json.dumps(out))
"""


def tier_cases():
    cases = []
    shape = (2, 37, 5, 7)
    specs = [("nchw", "nChw16c"), ("nhwc", "nchw"), ("nChw8c", "nhwc"), ("nchw", "nhwc")]
    i = 0
    for sdt in TYPES:
        for ddt in TYPES:
            st, dt = specs[i % len(specs)]
            attr_sets = [{}]
            if i % 3 == 0:
                attr_sets.append({"scales": 0.37, "dst_zero_point": DZP[ddt]})
            if i % 3 == 1:
                attr_sets.append({"scales": list(np.linspace(-2, 3, 37)), "scale_mask": 2,
                                  "src_zero_point": SZP[sdt]})
            if i % 3 == 2:
                attr_sets.append({"sum_scale": 0.5, "scales": -1.25})
            for attrs in attr_sets:
                a = tensor(sdt, shape, "tier")
                old = tensor(ddt, shape, "tier_old") if "sum_scale" in attrs else None
                cases.append(dict(dims=list(shape), sdt=sdt, ddt=ddt, st=st, dt=dt, attrs=attrs,
                                  src=ref.pack(a, st).tobytes().hex(),
                                  old=None if old is None else ref.pack(old, dt).tobytes().hex(),
                                  a=a, old_arr=old))
            i += 1
    return cases


def run_tier(cases, tier):
    env = {k: v for k, v in os.environ.items() if k != "GEN_ISA"}
    if tier is not None:
        env["GEN_ISA"] = tier
    payload = json.dumps([{k: v for k, v in c.items() if k not in ("a", "old_arr")}
                          for c in cases])
    proc = subprocess.run([sys.executable, "-c", TIER_SCRIPT], input=payload, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_isa_tiers_bitwise_identical():
    cases = tier_cases()
    default = run_tier(cases, None)
    scalar = run_tier(cases, "scalar")
    assert scalar["isa"] == "scalar"
    for c, rd, rs in zip(cases, default["results"], scalar["results"]):
        what = "%s->%s %s->%s %r" % (c["sdt"], c["ddt"], c["st"], c["dt"], c["attrs"])
        assert rd[0] == rd[1] == rs[0] == rs[1], what + ": tiers / thread counts differ"
        raw = np.frombuffer(bytes.fromhex(rd[0]), np.uint8)
        got = ref.unpack(raw, tuple(c["dims"]), c["dt"], cr.NP_OF[c["ddt"]])
        want = cr.reference_reorder(c["a"], c["ddt"], dst_old=c["old_arr"], **c["attrs"])
        cr.assert_same(got, want, c["a"], what)
    assert len(default["results"]) == len(scalar["results"]) == len(cases)


# ============================================================================== errors


def test_unknown_dtype():
    a = np.zeros((2, 3), np.float32)
    for bad in ("fp8", "e4m3", "f8_e4m3", "complex128", "int4"):
        raises_gen(lambda: gen.MemoryDesc((2, 3), bad), bad)
        raises_gen(lambda: gen.Memory.from_array(a, "ab", bad), bad)
    raises_gen(lambda: gen.MemoryDesc((2, 3), np.complex128), "complex128", "c16")
    raises_gen(lambda: gen.Memory.from_array(a, None, np.complex128), "complex128", "c16")


def test_big_endian_arrays_refused():
    """A big-endian array has the native type's name: refused, not moved as if native."""
    x = np.arange(6, dtype=">f4").reshape(2, 3)
    raises_gen(lambda: gen.reorder(x, "ba"), ">f4", "big-endian")
    raises_gen(lambda: gen.shuffle_channels(x, 1, 3), ">f4", "big-endian")


def test_type_change_outside_the_table():
    c = np.zeros((2, 3), np.complex64)
    raises_gen(lambda: gen.reorder(c, gen.MemoryDesc((2, 3), "f32")), "complex64", "c8")
    raises_gen(lambda: gen.Memory.from_array(c, "ab", "f32"), "complex64", "c8")
    d = np.zeros((2, 3), np.float64)
    f64_names = ("float64", "f64", "f8")
    raises_gen(lambda: gen.reorder(d, gen.MemoryDesc((2, 3), "f32")), *f64_names)
    raises_gen(lambda: gen.Memory.from_array(d, "ab", "f32"), *f64_names)
    raises_gen(lambda: gen.reorder(gen.Memory.from_array(d), gen.MemoryDesc((2, 3), "s8")),
               *f64_names)
    f = np.zeros((2, 3), np.float32)
    raises_gen(lambda: gen.Memory.from_array(f, "ab", "f8"), *f64_names)  # 'f8' is float64
    raises_gen(lambda: gen.reorder(f, gen.MemoryDesc((2, 3), "f8")), *f64_names)
    raises_gen(lambda: gen.reorder(f, gen.MemoryDesc((2, 3), "s16")), "int16", "s16")
    raises_gen(lambda: gen.reorder(np.zeros((2, 3), np.int16), gen.MemoryDesc((2, 3), "s8")),
               "int16", "s16")
    raises_gen(lambda: gen.reorder(np.zeros((2, 3), np.bool_), gen.MemoryDesc((2, 3), "u8")),
               "bool")
    raises_gen(lambda: gen.Reorder(gen.MemoryDesc((2, 3), "f64"), gen.MemoryDesc((2, 3), "f32")),
               *f64_names)
    # data-movement-only types take no scales / zero points / sum either
    raises_gen(lambda: gen.reorder(d, "ba", scales=2.0), *f64_names)
    raises_gen(lambda: gen.reorder(np.zeros((2, 3), np.int16), "ba", dst_zero_point=1),
               "int16", "s16")


def _src_dst(sdt="f32", ddt="s8", shape=SHAPE, st="nchw", dt="nChw16c"):
    src = gen.Memory.from_array(tensor(sdt, shape, "err"), st)
    dst = fill(gen.Memory(gen.MemoryDesc(shape, ddt, dt)), "rand", ddt)
    return src, dst


def _raises_everywhere(src, dst, names, **attrs):
    """gen.reorder and gen.Reorder (creation) raise gen.Error naming the value; dst untouched."""
    snap = bytes(dst.data)
    raises_gen(lambda: gen.reorder(src, dst, **attrs), *names)
    raises_gen(lambda: gen.Reorder(src.desc, dst.desc, **attrs), *names)
    assert bytes(dst.data) == snap, "a failing call wrote the destination"


def test_scales_count_mismatch():
    src, dst = _src_dst()
    _raises_everywhere(src, dst, ["18"], scales=[1.0] * 18, scale_mask=2)
    _raises_everywhere(src, dst, ["20"], scales=np.ones(20), scale_mask=2)
    _raises_everywhere(src, dst, ["7"], scales=[1.0] * 7)  # mask 0: one scale
    _raises_everywhere(src, dst, ["0"], scales=[], scale_mask=0)
    _raises_everywhere(src, dst, ["19"], scales=[1.0] * 19, scale_mask=6)  # needs 19 * 3
    _raises_everywhere(src, dst, ["37"], scales=[1.0] * 37, scale_mask=3)  # needs 2 * 19
    _raises_everywhere(src, dst, ["2"], scales=[1.0, 2.0], scale_mask=0)


def test_scale_mask_bit_beyond_rank():
    src, dst = _src_dst()
    _raises_everywhere(src, dst, ["16"], scales=[1.0] * 2, scale_mask=16)
    _raises_everywhere(src, dst, ["17"], scales=[1.0] * 2, scale_mask=17)
    _raises_everywhere(src, dst, ["-1"], scales=[1.0], scale_mask=-1)
    a = np.zeros((3, 4), np.float32)
    raises_gen(lambda: gen.reorder(a, gen.MemoryDesc((3, 4), "s8"), scales=[1.0] * 3,
                                   scale_mask=4), "4")


def test_scale_mask_without_scales():
    src, dst = _src_dst()
    _raises_everywhere(src, dst, ["scale_mask", "scales", "None"], scale_mask=2)


def test_nonfinite_scales_rejected():
    src, dst = _src_dst()
    for bad, names in ((float("nan"), ["nan", "NaN"]), (float("inf"), ["inf"]),
                       (-np.inf, ["inf"])):
        _raises_everywhere(src, dst, names, scales=bad)
        _raises_everywhere(src, dst, names, scales=[bad])
        per = np.ones(19)
        per[5] = bad
        _raises_everywhere(src, dst, names, scales=per, scale_mask=2)
        _raises_everywhere(src, dst, names, scales=per.tolist(), scale_mask=2)
    # a finite Python float that overflows f32 would be an inf scale in f32: rejected too
    _raises_everywhere(src, dst, ["1e+300", "inf"], scales=1e300)
    _raises_everywhere(src, dst, ["1e+300", "inf"], scales=[1e300])


def test_nonfinite_sum_scale_rejected():
    src, dst = _src_dst()
    for bad, names in ((float("nan"), ["nan", "NaN"]), (float("inf"), ["inf"]),
                       (-np.inf, ["inf"])):
        _raises_everywhere(src, dst, names, sum_scale=bad)
    _raises_everywhere(src, dst, ["1e+300", "inf"], sum_scale=-1e300)


def test_bad_scale_kinds():
    src, dst = _src_dst()
    for bad in ("abc", [1.0, "x"], object()):
        snap = bytes(dst.data)
        raises_gen(lambda: gen.reorder(src, dst, scales=bad))
        assert bytes(dst.data) == snap
    # numbers written as strings, complex values, a None among numbers
    per_c = np.arange(1.0, 20.0)
    for bad, mask in (("2", 0), ([str(v) for v in per_c], 2), (per_c + 1j, 2),
                      ([1.0, None] * 9 + [1.0], 2)):
        _raises_everywhere(src, dst, ["scales"], scales=bad, scale_mask=mask)


def test_complex_and_overflowing_attribute_scalars(recwarn):
    """NumPy complex scalars are refused (not cut to their real part with a ComplexWarning),
    and a long double past the doubles is a gen.Error even when warnings are errors."""
    src, dst = _src_dst("f32", "s8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for c in (np.complex64(1 + 1j), np.complex128(2), 3j):
            _raises_everywhere(src, dst, ["zero_point"], dst_zero_point=c)
            _raises_everywhere(src, dst, ["sum_scale"], sum_scale=c)
        huge = np.longdouble("1e400") if np.finfo(np.longdouble).max > 1e400 else np.inf
        _raises_everywhere(src, dst, ["scales"], scales=huge)
        _raises_everywhere(src, dst, ["scales"], scales=np.array([huge]))
        _raises_everywhere(src, dst, ["sum_scale"], sum_scale=huge)
        _raises_everywhere(src, dst, ["zero_point"], dst_zero_point=huge)
    assert not recwarn.list


# zero points are int32 values (oneDNN's), whatever the data type
@pytest.mark.parametrize("sdt,szp", [("u8", 2 ** 31), ("s8", -(2 ** 31) - 1), ("s32", 2 ** 31),
                                     ("s32", -(2 ** 31) - 1), ("f32", 2 ** 40)])
def test_src_zero_point_out_of_range(sdt, szp):
    src, dst = _src_dst(sdt, "f32")
    _raises_everywhere(src, dst, [str(szp)], src_zero_point=szp)


@pytest.mark.parametrize("ddt,dzp", [("u8", 2 ** 31), ("s8", -(2 ** 31) - 1), ("s32", 2 ** 31),
                                     ("bf16", -(2 ** 31) - 1)])
def test_dst_zero_point_out_of_range(ddt, dzp):
    src, dst = _src_dst("f32", ddt)
    _raises_everywhere(src, dst, [str(dzp)], dst_zero_point=dzp)


@pytest.mark.parametrize("sdt,ddt", [("u8", "f32"), ("s8", "s8"), ("f32", "u8"), ("f32", "f32"),
                                     ("s32", "bf16")])
def test_non_integer_zero_points_rejected(sdt, ddt):
    src, dst = _src_dst(sdt, ddt)
    _raises_everywhere(src, dst, ["0.5"], src_zero_point=0.5)
    _raises_everywhere(src, dst, ["0.5"], dst_zero_point=0.5)
    _raises_everywhere(src, dst, ["nan", "NaN"], dst_zero_point=float("nan"))
    _raises_everywhere(src, dst, ["zero_point"], src_zero_point=10 ** 400)
    # values that compare equal to 0: refused as well, a plain copy (f32 -> f32) included
    _raises_everywhere(src, dst, ["0j"], src_zero_point=0j)
    _raises_everywhere(src, dst, ["False"], dst_zero_point=False)
    _raises_everywhere(src, dst, ["Decimal"], src_zero_point=decimal.Decimal(0))


def test_errors_with_numpy_source_write_nothing():
    a = tensor("f32", SHAPE, "npe")
    dst = fill(gen.Memory(gen.MemoryDesc(SHAPE, "u8", "nChw16c")), "rand", "u8")
    snap = bytes(dst.data)
    raises_gen(lambda: gen.reorder(a, dst, scales=[1.0] * 5, scale_mask=2), "5")
    raises_gen(lambda: gen.reorder(a, dst, dst_zero_point=2 ** 31), str(2 ** 31))
    raises_gen(lambda: gen.reorder(a, dst, sum_scale=float("nan")), "nan", "NaN")
    assert bytes(dst.data) == snap
