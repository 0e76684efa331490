"""Acceptance tests for gen.resample, gen.resample_backward, gen.Resample and
gen.ResampleBackward (shared/API.md "Resampling", seed shared/seeds/resampling.txt, issue 5).

The reference (tests/resample_reference.py) builds per-axis weight matrices W (out x in) from
API.md's formula with exact rational positions and applies W (forward) or W^T (backward) along
every spatial axis in float64.  Memory layouts are packed/unpacked and padding located with
tests/reference.py.  Nothing here is taken from gen's implementation; only the public API is used.

Decisions where the contract is silent (see the report):
* f32 "relative 1e-6" is measured against |W| |x| (the magnitude of the terms summed), so
  cancellation between terms of opposite sign cannot turn an f32 accumulation error into a
  failure; bf16/f16 data for linear checks is positive for the same reason.
* a source Memory whose blocked padding holds garbage still gives a result (and a primitive's
  destination whose padding held garbage ends) with zero padding bytes.
* a strided plain source (format None) gives a dense plain result whose axes are laid out in
  the same order (its strides sort the same way); a tag source gives the same tag.
* a NumPy input with format=<tag> or format="any" returns a Memory (the format asks for one).
* factors are only used with values whose product with the size is exact in binary
  (1.5, 0.5, 2.0, 0.75, 1.25, 2.5): whether floor(in * factor) is taken on the float product
  or on the exact value of the float is left open.
* GEN_VERBOSE=1: one stderr line per executed call (creating a primitive prints nothing);
  the backward function's line names `resample_backward`.
"""
import copy
import os
import pickle
import warnings
import zlib

import numpy as np
import pytest

import gen
from checks import raises_gen, run_py

try:
    from . import reference as ref
    from . import resample_reference as rr
except ImportError:  # tests/ is not a package
    import reference as ref
    import resample_reference as rr

BF16 = rr.BF16
TYPES = ["f32", "bf16", "f16", "s8", "u8"]
ALGS = ["nearest", "linear"]


def rng_for(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def random_data(shape, dtype, rng, positive=False):
    """Finite values of dtype; positive=True keeps floats in [0.5, 8)."""
    name = rr.name_of(dtype)
    dt = rr.NP_OF[name]
    if name == "s8":
        return rng.integers(-128, 128, size=shape).astype(np.int8)
    if name == "u8":
        return rng.integers(0, 256, size=shape).astype(np.uint8)
    if positive:
        v = rng.uniform(0.5, 8.0, size=shape)
    else:
        v = rng.standard_normal(size=shape) * 4.0
    return v.astype(np.float32).astype(dt)


def random_bits_data(shape, dtype, rng):
    """Random bit patterns (NaN payloads, infs, subnormals included)."""
    return ref.random_bits(shape, rr.NP_OF[rr.name_of(dtype)], rng)


def assert_ok(got, ref64, abs64, dtype, what=""):
    msg = rr.check(got, ref64, abs64, dtype)
    assert msg is None, "%s: %s" % (what, msg)


def same_bits(a, b):
    return ref.same_bits(a, b)


def mem_from(x, fmt):
    return gen.Memory.from_array(x, format=fmt)


def mem_logical(m):
    """Logical content read from the raw bytes with the independent layout reference."""
    lay = ref.layout_of_desc(m.desc)
    dt = rr.NP_OF[rr.name_of(m.desc.dtype)]
    return ref.unpack(np.array(m.data, copy=True), lay.dims, lay, dt)


def padding_bytes(m):
    lay = ref.layout_of_desc(m.desc)
    mask = ref.padding_mask(lay)
    isz = rr.NP_OF[rr.name_of(m.desc.dtype)].itemsize
    bmask = np.repeat(mask, isz)
    raw = np.asarray(m.data)[: bmask.size]
    return raw[bmask]


def fill_padding(m, value=0xFF):
    lay = ref.layout_of_desc(m.desc)
    mask = ref.padding_mask(lay)
    isz = rr.NP_OF[rr.name_of(m.desc.dtype)].itemsize
    bmask = np.repeat(mask, isz)
    data = m.data
    sel = np.zeros(data.size, dtype=bool)
    sel[: bmask.size] = bmask
    data[sel] = value
    return int(sel.sum())


def check_forward(x, y, out_spatial, alg, dtype, what=""):
    if alg == "nearest":
        want = rr.nearest_gather(x, out_spatial)
        assert y.shape == want.shape, (what, y.shape, want.shape)
        assert same_bits(y, want), "%s: nearest is not a bitwise copy" % what
    else:
        assert_ok(y, rr.forward(x, out_spatial, alg), rr.forward_abs(x, out_spatial, alg), dtype, what)


def check_backward(dy, dx, in_spatial, alg, dtype, what=""):
    assert_ok(dx, rr.backward(dy, in_spatial, alg), rr.backward_abs(dy, in_spatial, alg), dtype, what)


# ============================================================ the reference itself


def test_reference_tie_example():
    # API.md: in=30, out=29, o=14 -> index 15 (pos = 14.5 exactly, half away from zero)
    assert rr.position(14, 30, 29) == rr.Fraction(29, 2)
    assert rr.nearest_indices(30, 29)[14] == 15
    w = rr.weight_matrix(30, 29, "nearest")
    assert w[14, 15] == 1.0 and w[14].sum() == 1.0


def test_reference_linear_values():
    # 2 -> 4: pos = -0.25, 0.25, 0.75, 1.25 (clamped at the edges)
    w = rr.weight_matrix(2, 4, "linear")
    np.testing.assert_array_equal(w, [[1, 0], [0.75, 0.25], [0.25, 0.75], [0, 1]])
    # 4 -> 2: pos = 0.5, 2.5
    w = rr.weight_matrix(4, 2, "linear")
    np.testing.assert_array_equal(w, [[0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5]])
    for n_in, n_out in [(7, 13), (30, 29), (5, 3), (13, 4), (1, 9), (9, 1)]:
        for alg in ALGS:
            w = rr.weight_matrix(n_in, n_out, alg)
            np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=0, atol=1e-15)
            assert (w >= 0).all()
        np.testing.assert_array_equal(rr.weight_matrix(n_in, n_in, "linear"), np.eye(n_in))
        np.testing.assert_array_equal(rr.weight_matrix(n_in, n_in, "nearest"), np.eye(n_in))


# ============================================================ forward, NumPy, f32

CASES = [
    # (in spatial, out spatial)
    ((7,), (13,)),
    ((30,), (29,)),
    ((5,), (3,)),
    ((13,), (4,)),
    ((1,), (9,)),
    ((9,), (1,)),
    ((7, 30), (13, 29)),
    ((5, 1), (3, 9)),
    ((1, 9), (9, 1)),
    ((13, 4), (4, 13)),
    ((8, 8), (16, 4)),
    ((5, 7, 3), (3, 13, 4)),
    ((1, 9, 2), (9, 1, 5)),
    ((4, 4, 4), (8, 8, 8)),
    ((6, 5, 9), (3, 11, 2)),
]


def case_id(c):
    return "x".join(map(str, c[0])) + "->" + "x".join(map(str, c[1]))


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_forward_numpy_f32(case, alg):
    sp_in, sp_out = case
    x = random_data((2, 3) + sp_in, "f32", rng_for("fwd", case, alg))
    x0 = x.copy()
    y = gen.resample(x, alg=alg, out_spatial=sp_out)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    assert y.shape == (2, 3) + sp_out
    assert y.flags.c_contiguous
    assert same_bits(x, x0)
    check_forward(x, y, sp_out, alg, "f32", case_id(case))
    if alg == "nearest":  # also against W
        np.testing.assert_array_equal(y, rr.forward(x, sp_out, alg).astype(np.float32))


def test_forward_tie_30_to_29():
    x = np.arange(30, dtype=np.float32).reshape(1, 1, 30)
    y = gen.resample(x, alg="nearest", out_spatial=(29,))
    assert y[0, 0, 14] == 15.0, y[0, 0]
    np.testing.assert_array_equal(y[0, 0], rr.nearest_indices(30, 29).astype(np.float32))
    # the same tie along every spatial axis of a 3D problem
    x3 = np.arange(30, dtype=np.float32)
    for ax in range(3):
        shape = [1, 1, 1, 1, 1]
        shape[2 + ax] = 30
        out = [1, 1, 1]
        out[ax] = 29
        y = gen.resample(x3.reshape(shape), alg="nearest", out_spatial=tuple(out))
        np.testing.assert_array_equal(y.ravel(), rr.nearest_indices(30, 29).astype(np.float32))


@pytest.mark.parametrize("n_in,n_out", [(2, 61), (4, 41), (14, 1), (14, 39), (30, 9), (100, 30),
                                        (2, 7), (3, 8), (6, 4), (10, 4), (20, 12)])
def test_nearest_ties_exact(n_in, n_out):
    """Pairs where float-scaled peers pick the low index at exact ties (NOTES.md)."""
    x = np.arange(n_in, dtype=np.float32).reshape(1, 1, n_in)
    y = gen.resample(x, alg="nearest", out_spatial=(n_out,))
    np.testing.assert_array_equal(y[0, 0], rr.nearest_indices(n_in, n_out).astype(np.float32))


def test_linear_known_values():
    x = np.array([[[1.0, 3.0]]], dtype=np.float32)
    y = gen.resample(x, alg="linear", out_spatial=(4,))
    np.testing.assert_array_equal(y[0, 0], np.array([1.0, 1.5, 2.5, 3.0], np.float32))
    x = np.array([[[0.0, 2.0, 4.0, 8.0]]], dtype=np.float32)
    y = gen.resample(x, alg="linear", out_spatial=(2,))
    np.testing.assert_array_equal(y[0, 0], np.array([1.0, 6.0], np.float32))
    # 1 -> 9: every output replicates the single source value (nearest exactly; linear sums
    # two clamped taps whose f32 weights need not add up to exactly 1: rounding allowed)
    x = np.array([[[2.5]], [[-7.0]]], dtype=np.float32)
    y = gen.resample(x, alg="nearest", out_spatial=(9,))
    np.testing.assert_array_equal(y, np.repeat(x, 9, axis=2))
    y = gen.resample(x, alg="linear", out_spatial=(9,))
    np.testing.assert_allclose(y, np.repeat(x, 9, axis=2), rtol=1e-6, atol=0)


# ============================================================ output size from factors


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("sp_in,factors,sp_out", [
    ((5,), (1.5,), (7,)),
    ((7,), (0.5,), (3,)),
    ((9,), (0.75,), (6,)),
    ((4, 6), (2.0, 0.5), (8, 3)),
    ((5, 3), (1.25, 2.5), (6, 7)),
    ((4, 4, 2), (0.75, 1.25, 2.5), (3, 5, 5)),
    ((3, 5, 7), (1.0, 1.5, 0.75), (3, 7, 5)),
])
def test_factors_give_out_spatial(sp_in, factors, sp_out, alg):
    assert tuple(rr.out_size(i, f) for i, f in zip(sp_in, factors)) == sp_out
    x = random_data((2, 3) + sp_in, "f32", rng_for("factors", sp_in, alg))
    yf = gen.resample(x, alg=alg, factors=factors)
    yo = gen.resample(x, alg=alg, out_spatial=sp_out)
    assert yf.shape == (2, 3) + sp_out
    # the arithmetic uses F = out / in, whatever factors were given
    assert same_bits(yf, yo)
    check_forward(x, yf, sp_out, alg, "f32", "factors %r" % (factors,))


def test_factors_list_and_memory():
    x = random_data((1, 4, 5, 6), "f32", rng_for("factors-mem"))
    m = mem_from(x, "nhwc")
    r = gen.resample(m, alg="linear", factors=[1.5, 0.5])
    assert isinstance(r, gen.Memory)
    assert tuple(r.desc.dims) == (1, 4, 7, 3)
    assert same_bits(r.to_array(), gen.resample(m, alg="linear", out_spatial=(7, 3)).to_array())
    check_forward(x, r.to_array(), (7, 3), "linear", "f32", "factors on nhwc")


# ============================================================ every type


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("case", [((7, 30), (13, 29)), ((13,), (4,)), ((5, 7, 3), (3, 13, 4))],
                         ids=case_id)
def test_nearest_bitwise_every_type(dtype, case):
    sp_in, sp_out = case
    x = random_bits_data((2, 5) + sp_in, dtype, rng_for("nn-bits", dtype, case))
    x0 = x.copy()
    y = gen.resample(x, alg="nearest", out_spatial=sp_out)
    assert y.dtype == x.dtype and y.shape == (2, 5) + sp_out
    assert same_bits(y, rr.nearest_gather(x, sp_out)), "nearest %s %s not a bitwise copy" % (dtype, case)
    assert same_bits(x, x0)
    # same through a Memory (blocked)
    fmt = {1: "nCw16c", 2: "nChw8c", 3: "nCdhw16c"}[len(sp_in)]
    r = gen.resample(mem_from(x, fmt), alg="nearest", out_spatial=sp_out)
    assert same_bits(mem_logical(r), rr.nearest_gather(x, sp_out))
    assert not padding_bytes(r).any()


def test_nearest_nan_payloads_f32():
    payloads = np.array([0x7FC00001, 0xFFC12345, 0x7F800001, 0x7FBFFFFF, 0xFF800000, 0x80000000,
                         0x00000001], dtype=np.uint32)
    x = payloads.view(np.float32).reshape(1, 1, 7)
    for n_out in (7, 13, 3, 1):
        y = gen.resample(x, alg="nearest", out_spatial=(n_out,))
        assert same_bits(y, rr.nearest_gather(x, (n_out,)))
    # backward of an identity-size problem passes NaN through as a value (sum of one term)
    y = gen.resample_backward(x, alg="nearest", in_spatial=(7,))
    assert np.isnan(y[0, 0, :4]).all()


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("case", [((7, 30), (13, 29)), ((13,), (4,)), ((1, 9), (9, 1)),
                                  ((5, 7, 3), (3, 13, 4))], ids=case_id)
def test_linear_every_type(dtype, case):
    sp_in, sp_out = case
    x = random_data((2, 5) + sp_in, dtype, rng_for("lin-type", dtype, case),
                    positive=dtype in ("bf16", "f16"))
    x0 = x.copy()
    y = gen.resample(x, alg="linear", out_spatial=sp_out)
    assert y.dtype == x.dtype and y.shape == (2, 5) + sp_out and y.flags.c_contiguous
    assert same_bits(x, x0)
    check_forward(x, y, sp_out, "linear", dtype, "linear %s %s" % (dtype, case_id(case)))


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("case", [((7, 30), (13, 29)), ((3,), (8,)), ((5, 7, 3), (3, 13, 4))],
                         ids=case_id)
def test_backward_every_type(dtype, alg, case):
    sp_in, sp_out = case
    dy = random_data((2, 5) + sp_out, dtype, rng_for("bwd-type", dtype, alg, case),
                     positive=dtype in ("bf16", "f16"))
    if dtype in ("s8", "u8"):  # keep some sums inside the range, some saturating
        dy = (dy // 4).astype(dy.dtype) if dtype == "s8" else (dy // 8).astype(dy.dtype)
    dy0 = dy.copy()
    dx = gen.resample_backward(dy, alg=alg, in_spatial=sp_in)
    assert dx.dtype == dy.dtype and dx.shape == (2, 5) + sp_in and dx.flags.c_contiguous
    assert same_bits(dy, dy0)
    check_backward(dy, dx, sp_in, alg, dtype, "backward %s %s %s" % (alg, dtype, case_id(case)))


def test_integer_saturation_and_rounding():
    # u8 linear 2 -> 4 of [0, 255]: 63.75 -> 64, 191.25 -> 191
    x = np.array([[[0, 255]]], dtype=np.uint8)
    y = gen.resample(x, alg="linear", out_spatial=(4,))
    assert np.abs(y[0, 0].astype(int) - [0, 64, 191, 255]).max() <= 1
    # s8 nearest backward 3 -> 8 sums saturate: 3 * 100 -> 127, 3 * -100 -> -128
    dy = np.full((1, 2, 8), 100, dtype=np.int8)
    dy[0, 1] = -100
    dx = gen.resample_backward(dy, alg="nearest", in_spatial=(3,))
    np.testing.assert_array_equal(dx, [[[127, 127, 127], [-128, -128, -128]]])
    # u8 backward sums above 255 saturate
    dy = np.full((1, 1, 8), 200, dtype=np.uint8)
    dx = gen.resample_backward(dy, alg="nearest", in_spatial=(3,))
    np.testing.assert_array_equal(dx, [[[255, 255, 255]]])


# ============================================================ backward


def test_backward_nearest_sums_contributions():
    # forward 3 -> 8 takes source floor((2o+1)*3/16) = 0,0,0,1,1,2,2,2 ; backward gathers them
    assert list(rr.nearest_indices(3, 8)) == [0, 0, 0, 1, 1, 2, 2, 2]
    dy = np.array([1, 2, 4, 8, 16, 32, 64, 128], dtype=np.float32).reshape(1, 1, 8)
    dx = gen.resample_backward(dy, alg="nearest", in_spatial=(3,))
    np.testing.assert_array_equal(dx, np.array([[[7, 24, 224]]], np.float32))
    # 2D: 8x8 -> 3x3 backward sums up to 3x3 contributions
    dy = np.arange(64, dtype=np.float32).reshape(1, 1, 8, 8)
    dx = gen.resample_backward(dy, alg="nearest", in_spatial=(3, 3))
    groups = [[0, 1, 2], [3, 4], [5, 6, 7]]
    want = np.array([[dy[0, 0][np.ix_(gi, gj)].sum() for gj in groups] for gi in groups], np.float32)
    np.testing.assert_array_equal(dx[0, 0], want)
    # downsample forward 8 -> 3: backward leaves untouched sources at zero
    dy = np.array([1.0, 2.0, 3.0], np.float32).reshape(1, 1, 3)
    dx = gen.resample_backward(dy, alg="nearest", in_spatial=(8,))
    want = np.zeros(8, np.float32)
    want[rr.nearest_indices(8, 3)] = [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(dx[0, 0], want)


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_backward_reference_f32(case, alg):
    sp_in, sp_out = case
    dy = random_data((2, 3) + sp_out, "f32", rng_for("bwd", case, alg))
    dx = gen.resample_backward(dy, alg=alg, in_spatial=sp_in)
    assert dx.shape == (2, 3) + sp_in and dx.dtype == np.float32
    check_backward(dy, dx, sp_in, alg, "f32", "backward " + case_id(case))


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("case", [((7,), (13,)), ((30,), (29,)), ((7, 30), (13, 29)),
                                  ((13, 4), (4, 13)), ((5, 7, 3), (3, 13, 4)),
                                  ((1, 9, 2), (9, 1, 5))], ids=case_id)
def test_backward_is_adjoint(case, alg):
    sp_in, sp_out = case
    rng = rng_for("adjoint", case, alg)
    x = random_data((2, 3) + sp_in, "f32", rng)
    y = random_data((2, 3) + sp_out, "f32", rng)
    wx = gen.resample(x, alg=alg, out_spatial=sp_out).astype(np.float64)
    wty = gen.resample_backward(y, alg=alg, in_spatial=sp_in).astype(np.float64)
    lhs = float(np.sum(wx * y.astype(np.float64)))
    rhs = float(np.sum(x.astype(np.float64) * wty))
    scale = float(np.sum(np.abs(rr.forward_abs(x, sp_out, alg)) * np.abs(y.astype(np.float64))))
    assert abs(lhs - rhs) <= 4e-6 * scale, (lhs, rhs, scale)


# ============================================================ Memory layouts

FORMATS = {
    1: ["ncw", "nwc", "nCw8c", "nCw16c"],
    2: ["nchw", "nhwc", "nChw8c", "nChw16c"],
    3: ["ncdhw", "ndhwc", "nCdhw8c", "nCdhw16c"],
}
LAYOUT_CASES = [((7,), (13,)), ((9,), (1,)), ((7, 30), (13, 29)), ((1, 9), (9, 1)),
                ((5, 7, 3), (3, 13, 4))]
LAYOUT_PARAMS = [(c, f) for c in LAYOUT_CASES for f in FORMATS[len(c[0])]]


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("case,fmt", LAYOUT_PARAMS, ids=["%s-%s" % (case_id(c), f) for c, f in LAYOUT_PARAMS])
def test_forward_memory_layouts(case, fmt, alg):
    sp_in, sp_out = case
    c = 19 if "16c" in fmt else 5  # never a multiple of the block
    x = random_data((2, c) + sp_in, "f32", rng_for("mem", case, fmt, alg))
    m = mem_from(x, fmt)
    fill_padding(m)  # garbage in the source padding must not reach the result
    raw0 = np.array(m.data, copy=True)
    r = gen.resample(m, alg=alg, out_spatial=sp_out)
    assert isinstance(r, gen.Memory)
    assert r.desc == gen.MemoryDesc((2, c) + sp_out, "f32", fmt)
    assert r.desc.format == m.desc.format
    assert np.array_equal(np.asarray(m.data), raw0), "source modified"
    got = mem_logical(r)
    assert same_bits(got, r.to_array())
    check_forward(x, got, sp_out, alg, "f32", "%s %s" % (fmt, case_id(case)))
    assert not padding_bytes(r).any(), "padding not zero"
    # same numbers as the NumPy path (nearest: bitwise; linear: rounding may differ by layout)
    if alg == "nearest":
        assert same_bits(got, gen.resample(x, alg=alg, out_spatial=sp_out))


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("case,fmt", LAYOUT_PARAMS, ids=["%s-%s" % (case_id(c), f) for c, f in LAYOUT_PARAMS])
def test_backward_memory_layouts(case, fmt, alg):
    sp_in, sp_out = case
    c = 19 if "16c" in fmt else 5
    dy = random_data((2, c) + sp_out, "f32", rng_for("membwd", case, fmt, alg))
    m = mem_from(dy, fmt)
    fill_padding(m)
    raw0 = np.array(m.data, copy=True)
    r = gen.resample_backward(m, alg=alg, in_spatial=sp_in)
    assert isinstance(r, gen.Memory)
    assert r.desc == gen.MemoryDesc((2, c) + sp_in, "f32", fmt)
    assert r.desc.format == m.desc.format
    assert np.array_equal(np.asarray(m.data), raw0), "source modified"
    got = mem_logical(r)
    check_backward(dy, got, sp_in, alg, "f32", "backward %s %s" % (fmt, case_id(case)))
    assert not padding_bytes(r).any(), "padding not zero"


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("fmt", ["nchw", "nhwc", "nChw16c"])
def test_backward_rows_no_output_reached_are_written(fmt, alg):
    """Backward of a 2x down-sampling (nearest: half the rows of diff_src get no
    contribution) into a destination full of NaN: every element is written."""
    dy = random_data((2, 19, 7, 9), "f32", rng_for("bwd-zero-rows", fmt, alg))
    sd, dd = gen.MemoryDesc(dy.shape, "f32", fmt), gen.MemoryDesc((2, 19, 14, 18), "f32", fmt)
    dst = gen.Memory(dd)
    dst.data[:] = 0xFF
    for threads in (1, 2):
        gen.ResampleBackward(sd, dd, alg=alg)(mem_from(dy, fmt), dst, threads=threads)
        got = mem_logical(dst)
        check_backward(dy, got, (14, 18), alg, "f32", "backward %s into NaN" % fmt)
        assert not padding_bytes(dst).any(), "padding not zero"


@pytest.mark.parametrize("dtype", ["bf16", "f16", "s8", "u8"])
@pytest.mark.parametrize("fmt", ["nhwc", "nChw16c", "nchw"])
def test_memory_layouts_other_types(dtype, fmt):
    sp_in, sp_out = (7, 30), (13, 29)
    x = random_data((2, 21) + sp_in, dtype, rng_for("memtype", dtype, fmt), positive=True)
    m = mem_from(x, fmt)
    fill_padding(m)
    r = gen.resample(m, alg="linear", out_spatial=sp_out)
    assert r.desc == gen.MemoryDesc((2, 21) + sp_out, dtype, fmt)
    check_forward(x, mem_logical(r), sp_out, "linear", dtype, "%s %s" % (dtype, fmt))
    assert not padding_bytes(r).any()
    d = gen.resample_backward(m, alg="linear", in_spatial=sp_out)
    check_backward(x, mem_logical(d), sp_out, "linear", dtype, "backward %s %s" % (dtype, fmt))
    assert not padding_bytes(d).any()


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("dims,strides", [
    ((2, 3, 7, 30), (1000, 300, 40, 1)),        # padded row pitch, nchw order
    ((2, 5, 7, 30), (2000, 1, 6 * 31, 6)),      # channels-last order with gaps
    ((2, 3, 13), (60, 1, 4)),                   # 1D nwc order with a gap
    ((2, 3, 5, 7, 3), (400, 130, 25, 3, 1)),    # 3D with gaps
])
def test_strided_plain_desc(dims, strides, alg):
    sp_in = dims[2:]
    sp_out = {2: (13, 29), 1: (4,), 3: (3, 13, 4)}[len(sp_in)]
    md = gen.MemoryDesc(dims, "f32", strides=strides)
    x = random_data(dims, "f32", rng_for("strided", dims, alg))
    m = gen.Memory(md)
    m.data[:] = ref.pack(x, strides, nbytes_total=md.nbytes)
    assert same_bits(m.to_array(), x)
    raw0 = np.array(m.data, copy=True)
    r = gen.resample(m, alg=alg, out_spatial=sp_out)
    assert isinstance(r, gen.Memory)
    assert tuple(r.desc.dims) == dims[:2] + sp_out
    assert r.desc.is_plain
    # the result lays out its axes in the same order as the source
    order_in = sorted(range(len(dims)), key=lambda a: -strides[a])
    out_strides = tuple(r.desc.strides)
    order_out = sorted(range(len(dims)), key=lambda a: -out_strides[a])
    assert order_in == order_out, (strides, out_strides)
    assert np.array_equal(np.asarray(m.data), raw0)
    check_forward(x, mem_logical(r), sp_out, alg, "f32", "strided %r" % (strides,))
    d = gen.resample_backward(m, alg=alg, in_spatial=sp_out)
    check_backward(x, mem_logical(d), sp_out, alg, "f32", "strided backward %r" % (strides,))


@pytest.mark.parametrize("dims,strides", [((1, 3, 7, 30), (2 ** 63, 210, 30, 1)),
                                          ((2, 1, 7, 30), (210, 2 ** 70, 30, 1))])
def test_size_one_axis_with_a_huge_stride(dims, strides):
    """A size-1 axis' stride is never used, so any value goes (past int64 too): the desc
    holds the same bytes as the dense one."""
    md = gen.MemoryDesc(dims, "f32", strides=strides)
    assert md.nbytes == 4 * np.prod(dims)
    x = random_data(dims, "f32", rng_for("huge stride", dims))
    m = gen.Memory(md, np.ascontiguousarray(x).view(np.uint8).ravel().copy())
    assert same_bits(m.to_array(), x)
    for alg in ALGS:
        r = gen.resample(m, alg=alg, out_spatial=(4, 9))
        check_forward(x, mem_logical(r), (4, 9), alg, "f32", "huge stride %r" % (strides,))
        p = gen.Resample(md, r.desc, alg=alg)
        out = gen.Memory(r.desc)
        p(m, out)
        assert bytes(out.data) == bytes(r.data)


@pytest.mark.parametrize("dims,tag,sp_out", [
    ((2, 1, 2, 1), "nhwc", (3, 3)),      # the same bytes as acbd, the canonical tag
    ((2, 1, 2, 1), "chwn", (3, 4)),
    ((2, 3, 1, 1, 4), "ndhwc", (2, 3, 5)),
    ((1, 1, 16, 1), "Acdb16a", (5, 2)),
    ((2, 1, 3), "nwc", (5,)),
])
def test_size_one_axes_keep_the_written_format(dims, tag, sp_out):
    """A source whose size-1 axes let several tags describe it: the result has the tag that
    keeps the spatial axes together (the user's), forward and backward."""
    x = random_data(dims, "f32", rng_for("size-1", dims, tag))
    m = gen.Memory.from_array(x, tag)
    out = dims[:2] + sp_out
    r = gen.resample(m, alg="nearest", out_spatial=sp_out)
    assert r.desc == gen.MemoryDesc(out, "f32", tag)
    check_forward(x, mem_logical(r), sp_out, "nearest", "f32", tag)
    d = gen.resample_backward(m, alg="linear", in_spatial=sp_out)
    assert d.desc == gen.MemoryDesc(out, "f32", tag)


@pytest.mark.parametrize("tag", ["ABcd32a16b", "ABcd17a16b"])
@pytest.mark.parametrize("threads", [1, 2])
def test_large_blocked_destination_padding_over_garbage(tag, threads):
    """A destination past the caches whose padding (n = 1 of a block of 32 or 17) comes in
    runs of hundreds of bytes, at every alignment with 17: written by streaming stores, zeros
    over garbage; the values are the reference's."""
    x = rng_for("large blocked", tag).integers(0, 256, (1, 30, 60, 60), dtype=np.uint8)
    src = gen.Memory.from_array(x, tag)
    dst = gen.Memory(gen.MemoryDesc((1, 30, 120, 120), "u8", tag))
    assert dst.desc.nbytes >= 4 << 20
    dst.data[:] = 0xCD
    gen.Resample(src.desc, dst.desc, alg="nearest")(src, dst, threads=threads)
    assert bytes(dst.data) == ref.pack(rr.nearest_gather(x, (120, 120)), tag).tobytes()


# ============================================================ format= argument


@pytest.mark.parametrize("src_fmt", ["nchw", "nhwc", "nChw16c", None])
def test_format_any(src_fmt):
    x = random_data((2, 19, 7, 30), "f32", rng_for("any", src_fmt))
    src = x if src_fmt is None else mem_from(x, src_fmt)
    for alg in ALGS:
        r = gen.resample(src, alg=alg, out_spatial=(13, 29), format="any")
        assert isinstance(r, gen.Memory)
        assert tuple(r.desc.dims) == (2, 19, 13, 29)
        assert r.desc.dtype == "f32"
        fmt = r.desc.format
        assert isinstance(fmt, str) and fmt and fmt != "any"
        assert r.desc == gen.MemoryDesc((2, 19, 13, 29), "f32", fmt)
        check_forward(x, mem_logical(r), (13, 29), alg, "f32", "any from %s" % src_fmt)
        assert not padding_bytes(r).any()
        d = gen.resample_backward(src, alg=alg, in_spatial=(3, 11), format="any")
        assert isinstance(d, gen.Memory) and d.desc.format not in (None, "any")
        assert d.desc == gen.MemoryDesc((2, 19, 3, 11), "f32", d.desc.format)
        check_backward(x, mem_logical(d), (3, 11), alg, "f32", "backward any from %s" % src_fmt)


@pytest.mark.parametrize("src_fmt,dst_fmt,chosen", [
    ("nChw8c", "any", "nChw8c"), ("any", "nchw", "nchw"), ("nhwc", "any", "nhwc"),
    ("any", "any", "nhwc")])
def test_primitive_descriptors_of_format_any(src_fmt, dst_fmt, chosen):
    """MemoryDesc(..., "any") where the primitive chooses the format (API.md "Memory
    descriptors"): it takes the other descriptor's, or channels-last for both (as
    format="any" does), and its src_desc / dst_desc say which."""
    x = random_data((2, 5, 4, 6), "f32", rng_for("any desc", src_fmt, dst_fmt))
    small = gen.MemoryDesc(x.shape, "f32", src_fmt)
    large = gen.MemoryDesc((2, 5, 9, 3), "f32", dst_fmt)
    for alg in ALGS:
        p = gen.Resample(small, large, alg=alg)
        assert p.src_desc == gen.MemoryDesc(x.shape, "f32", chosen)
        assert p.dst_desc == gen.MemoryDesc((2, 5, 9, 3), "f32", chosen)
        y = p(mem_from(x, chosen), gen.Memory(p.dst_desc))
        check_forward(x, mem_logical(y), (9, 3), alg, "f32", "any desc %s" % chosen)
        b = gen.ResampleBackward(large, small, alg=alg)
        assert (b.src_desc, b.dst_desc) == (p.dst_desc, p.src_desc)
        dx = b(y, gen.Memory(b.dst_desc))
        check_backward(mem_logical(y), mem_logical(dx), (4, 6), alg, "f32", "any desc backward")


def test_format_any_is_only_for_the_primitives_that_choose():
    """A desc of format "any" is a desc (equal, hashed, pickled) without a layout: anything
    that needs one raises gen.Error naming 'any'."""
    md = gen.MemoryDesc((2, 4, 3, 3), "f32", "any")
    assert md.format == "any" and not md.is_plain and md.dims == (2, 4, 3, 3)
    assert md == gen.MemoryDesc((2, 4, 3, 3), "f32", "any") != gen.MemoryDesc((2, 4, 3, 3), "f32")
    assert pickle.loads(pickle.dumps(md)) == copy.deepcopy(md) == md
    assert hash(copy.copy(md)) == hash(md)
    x = np.zeros((2, 4, 3, 3), np.float32)
    plain = gen.MemoryDesc(x.shape, "f32")
    for bad in (lambda: md.nbytes, lambda: gen.Memory(md), lambda: md.reshape((72,)),
                lambda: md.permute_axes((0, 1, 3, 2)), lambda: gen.Reorder(plain, md),
                lambda: gen.Reorder(md, plain), lambda: gen.reorder(x, md),
                lambda: gen.ShuffleChannels(md, 1, 2), lambda: gen.Memory.from_array(x, "any"),
                lambda: gen.reorder(x, "any")):
        raises_gen(bad, "any")


@pytest.mark.parametrize("want", ["nhwc", "nchw", "nChw8c", "nChw16c", "acdb"])
@pytest.mark.parametrize("src_fmt", ["nchw", "nChw16c", None])
def test_format_explicit(src_fmt, want):
    x = random_data((2, 5, 7, 30), "bf16", rng_for("fmt", src_fmt, want), positive=True)
    src = x if src_fmt is None else mem_from(x, src_fmt)
    r = gen.resample(src, alg="linear", out_spatial=(13, 29), format=want)
    assert isinstance(r, gen.Memory)
    assert r.desc == gen.MemoryDesc((2, 5, 13, 29), "bf16", want)
    check_forward(x, mem_logical(r), (13, 29), "linear", "bf16", "format %s" % want)
    assert not padding_bytes(r).any()
    d = gen.resample_backward(src, alg="nearest", in_spatial=(3, 11), format=want)
    assert d.desc == gen.MemoryDesc((2, 5, 3, 11), "bf16", want)
    check_backward(x, mem_logical(d), (3, 11), "nearest", "bf16", "backward format %s" % want)


def test_format_explicit_3d_and_1d():
    x = random_data((1, 6, 5, 7, 3), "f32", rng_for("fmt3"))
    r = gen.resample(mem_from(x, "ncdhw"), alg="linear", out_spatial=(3, 13, 4), format="ndhwc")
    assert r.desc == gen.MemoryDesc((1, 6, 3, 13, 4), "f32", "ndhwc")
    check_forward(x, mem_logical(r), (3, 13, 4), "linear", "f32", "ndhwc")
    x = random_data((1, 6, 13), "f32", rng_for("fmt1"))
    r = gen.resample(x, alg="nearest", out_spatial=(4,), format="nCw8c")
    assert r.desc == gen.MemoryDesc((1, 6, 4), "f32", "nCw8c")
    check_forward(x, mem_logical(r), (4,), "nearest", "f32", "nCw8c")
    assert not padding_bytes(r).any()


# ============================================================ NumPy inputs with any strides


def strided_views(x, rng):
    """Views with the logical content of x and non-contiguous strides."""
    nd = x.ndim
    views = []
    perm = list(rng.permutation(nd))
    base = np.ascontiguousarray(np.transpose(x, perm))
    inv = np.argsort(perm)
    views.append(("transposed", np.transpose(base, inv)))
    flip = tuple(slice(None, None, -1) for _ in range(nd))
    views.append(("negative", np.ascontiguousarray(x[flip])[flip]))
    big = np.zeros(tuple(2 * s for s in x.shape), dtype=x.dtype)
    big[tuple(slice(None, None, 2) for _ in range(nd))] = x
    views.append(("step2", big[tuple(slice(None, None, 2) for _ in range(nd))]))
    rev_sp = x[..., ::-1]
    views.append(("mixed", np.ascontiguousarray(rev_sp)[..., ::-1]))
    return views


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("case", [((7, 30), (13, 29)), ((13,), (4,)), ((5, 7, 3), (3, 13, 4))],
                         ids=case_id)
def test_numpy_any_strides(case, alg, dtype):
    sp_in, sp_out = case
    rng = rng_for("views", case, alg, dtype)
    x = random_data((2, 3) + sp_in, dtype, rng, positive=True)
    want = gen.resample(x, alg=alg, out_spatial=sp_out)
    want_b = gen.resample_backward(x, alg=alg, in_spatial=sp_out)
    for name, v in strided_views(x, rng):
        assert np.array_equal(v, x) and not v.flags.c_contiguous
        v0 = v.copy()
        y = gen.resample(v, alg=alg, out_spatial=sp_out)
        assert isinstance(y, np.ndarray) and y.dtype == x.dtype and y.flags.c_contiguous, name
        assert not np.shares_memory(y, v)
        assert same_bits(v, v0), name
        if alg == "nearest":
            assert same_bits(y, want), name
        check_forward(x, y, sp_out, alg, dtype, "view %s %s" % (name, dtype))
        yb = gen.resample_backward(v, alg=alg, in_spatial=sp_out)
        assert yb.flags.c_contiguous and yb.dtype == x.dtype and yb.shape == want_b.shape
        assert same_bits(v, v0), name
        check_backward(x, yb, sp_out, alg, dtype, "view backward %s %s" % (name, dtype))
    check_forward(x, want, sp_out, alg, dtype, "views %s" % dtype)


def test_identity_size_is_a_copy_not_a_view():
    x = random_data((2, 3, 5, 4), "f32", rng_for("ident"))
    for alg in ALGS:
        y = gen.resample(x, alg=alg, out_spatial=(5, 4))
        assert not np.shares_memory(x, y)
        assert same_bits(y, x)
        y = gen.resample_backward(x, alg=alg, in_spatial=(5, 4))
        assert not np.shares_memory(x, y)
        assert same_bits(y, x)


# ============================================================ primitives

PRIM_PARAMS = [("nchw", ((7, 30), (13, 29))), ("nChw16c", ((7, 30), (13, 29))),
               ("nhwc", ((8, 8), (16, 4))), ("nCw8c", ((13,), (4,))),
               ("ndhwc", ((5, 7, 3), (3, 13, 4))), ("ncdhw", ((1, 9, 2), (9, 1, 5)))]


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("fmt,case", PRIM_PARAMS, ids=["%s-%s" % (f, case_id(c)) for f, c in PRIM_PARAMS])
def test_primitives_equal_functions(fmt, case, alg):
    sp_in, sp_out = case
    c = 19
    md_in = gen.MemoryDesc((2, c) + sp_in, "f32", fmt)
    md_out = gen.MemoryDesc((2, c) + sp_out, "f32", fmt)
    x = random_data((2, c) + sp_in, "f32", rng_for("prim", fmt, case, alg))
    src = mem_from(x, fmt)
    p = gen.Resample(md_in, md_out, alg=alg)
    dst = gen.Memory(md_out)
    dst.data[:] = 0xFF  # garbage, padding included
    raw0 = np.array(src.data, copy=True)
    p(src, dst)
    assert np.array_equal(np.asarray(src.data), raw0)
    want = gen.resample(src, alg=alg, out_spatial=sp_out)
    assert np.array_equal(np.asarray(dst.data), np.asarray(want.data))
    assert not padding_bytes(dst).any()
    check_forward(x, mem_logical(dst), sp_out, alg, "f32", "primitive %s" % fmt)
    p(src, dst)  # reusable
    assert np.array_equal(np.asarray(dst.data), np.asarray(want.data))

    dy = random_data((2, c) + sp_out, "f32", rng_for("primb", fmt, case, alg))
    dmem = mem_from(dy, fmt)
    pb = gen.ResampleBackward(md_out, md_in, alg=alg)
    dsrc = gen.Memory(md_in)
    dsrc.data[:] = 0xFF
    pb(dmem, dsrc)
    wantb = gen.resample_backward(dmem, alg=alg, in_spatial=sp_in)
    assert np.array_equal(np.asarray(dsrc.data), np.asarray(wantb.data))
    assert not padding_bytes(dsrc).any()
    check_backward(dy, mem_logical(dsrc), sp_in, alg, "f32", "primitive backward %s" % fmt)


@pytest.mark.parametrize("dtype", ["bf16", "s8"])
def test_primitive_other_types(dtype):
    md_in = gen.MemoryDesc((1, 5, 7, 30), dtype, "nhwc")
    md_out = gen.MemoryDesc((1, 5, 13, 29), dtype, "nhwc")
    x = random_data((1, 5, 7, 30), dtype, rng_for("primtype", dtype), positive=True)
    for alg in ALGS:
        dst = gen.Memory(md_out)
        gen.Resample(md_in, md_out, alg=alg)(mem_from(x, "nhwc"), dst)
        assert same_bits(dst.to_array(), gen.resample(x, alg=alg, out_spatial=(13, 29)))


def _prim_pair():
    md_in = gen.MemoryDesc((2, 3, 7, 30), "f32", "nchw")
    md_out = gen.MemoryDesc((2, 3, 13, 29), "f32", "nchw")
    return md_in, md_out


def test_primitive_rejects_other_desc():
    md_in, md_out = _prim_pair()
    p = gen.Resample(md_in, md_out, alg="linear")
    pb = gen.ResampleBackward(md_out, md_in, alg="linear")
    other_in = gen.Memory(gen.MemoryDesc((2, 3, 7, 30), "f32", "nhwc"))
    other_out = gen.Memory(gen.MemoryDesc((2, 3, 13, 28), "f32", "nchw"))
    other_type = gen.Memory(gen.MemoryDesc((2, 3, 7, 30), "bf16", "nchw"))
    raises_gen(lambda: p(other_in, gen.Memory(md_out)), "src", "desc", "acdb", "nhwc")
    raises_gen(lambda: p(gen.Memory(md_in), other_out), "dst", "desc", "28")
    raises_gen(lambda: p(other_type, gen.Memory(md_out)), "src", "desc", "bf16")
    raises_gen(lambda: p(gen.Memory(md_out), gen.Memory(md_in)), "src", "desc", "dst")
    raises_gen(lambda: pb(gen.Memory(md_in), gen.Memory(md_out)), "desc", "diff_dst", "src")
    raises_gen(lambda: pb(gen.Memory(md_out), other_out), "desc", "dst", "diff_src", "28")
    # a NumPy array is not a Memory of the primitive's desc
    raises_gen(lambda: p(np.zeros((2, 3, 7, 30), np.float32), gen.Memory(md_out)), "src", "Memory")


def test_primitive_rejects_overlap():
    md = gen.MemoryDesc((2, 3, 8, 8), "f32", "nchw")
    p = gen.Resample(md, md, alg="linear")
    pb = gen.ResampleBackward(md, md, alg="nearest")
    buf = np.zeros(md.nbytes + 64, dtype=np.uint8)
    a = gen.Memory(md, buf[: md.nbytes])
    raises_gen(lambda: p(a, a), "overlap")
    raises_gen(lambda: pb(a, a), "overlap")
    # partial overlap through a shifted wrap of the same buffer
    b = gen.Memory(md, buf[64: 64 + md.nbytes])
    raises_gen(lambda: p(a, b), "overlap")
    # different spatial sizes sharing one buffer
    md_small = gen.MemoryDesc((2, 3, 4, 4), "f32", "nchw")
    ps = gen.Resample(md, md_small, alg="nearest")
    c = gen.Memory(md_small, buf[: md_small.nbytes])
    raises_gen(lambda: ps(a, c), "overlap")


def test_primitive_rejects_mismatched_descs():
    md = gen.MemoryDesc((2, 3, 7, 30), "f32", "nchw")
    for ctor in (gen.Resample, gen.ResampleBackward):
        raises_gen(lambda: ctor(md, gen.MemoryDesc((3, 3, 13, 29), "f32", "nchw")), "(3, 3, 13, 29)", "N", "dims")
        raises_gen(lambda: ctor(md, gen.MemoryDesc((2, 4, 13, 29), "f32", "nchw")), "(2, 4, 13, 29)", "C", "dims")
        raises_gen(lambda: ctor(md, gen.MemoryDesc((2, 3, 13, 29), "bf16", "nchw")), "bf16", "dtype")
        raises_gen(lambda: ctor(md, gen.MemoryDesc((2, 3, 13), "f32", "ncw")), "(2, 3, 13)", "rank", "dims")
        raises_gen(lambda: ctor(md, md, alg="cubic"), "cubic")
        raises_gen(lambda: ctor(gen.MemoryDesc((2, 3), "f32"), gen.MemoryDesc((2, 3), "f32")), "rank", "(2, 3)")
        raises_gen(lambda: ctor(gen.MemoryDesc((2, 3, 4), "s32"), gen.MemoryDesc((2, 3, 4), "s32")), "s32")


@pytest.mark.parametrize("bad", ["nchw", None, (2, 3, 7, 30), np.zeros((2, 3, 7, 30), np.float32), 3])
def test_primitive_rejects_non_desc(bad):
    md = gen.MemoryDesc((2, 3, 7, 30), "f32", "nchw")
    for ctor in (gen.Resample, gen.ResampleBackward):
        raises_gen(lambda: ctor(bad, md), "desc", "MemoryDesc")
        raises_gen(lambda: ctor(md, bad), "desc", "MemoryDesc")


# ============================================================ threads


@pytest.mark.parametrize("fmt", ["nchw", "nhwc", "nChw16c"])
@pytest.mark.parametrize("alg", ALGS)
def test_threads_bitwise_equal(fmt, alg):
    sp_in, sp_out = (20, 24), (31, 17)
    x = random_data((2, 19) + sp_in, "f32", rng_for("thr", fmt, alg))
    m = mem_from(x, fmt)
    r1 = gen.resample(m, alg=alg, out_spatial=sp_out, threads=1)
    r2 = gen.resample(m, alg=alg, out_spatial=sp_out, threads=2)
    assert np.array_equal(np.asarray(r1.data), np.asarray(r2.data))
    b1 = gen.resample_backward(m, alg=alg, in_spatial=sp_out, threads=1)
    b2 = gen.resample_backward(m, alg=alg, in_spatial=sp_out, threads=2)
    assert np.array_equal(np.asarray(b1.data), np.asarray(b2.data))
    n1 = gen.resample(x, alg=alg, out_spatial=sp_out, threads=1)
    n2 = gen.resample(x, alg=alg, out_spatial=sp_out, threads=2)
    assert same_bits(n1, n2)
    md_in = m.desc
    md_out = gen.MemoryDesc((2, 19) + sp_out, "f32", fmt)
    p = gen.Resample(md_in, md_out, alg=alg)
    d1, d2 = gen.Memory(md_out), gen.Memory(md_out)
    p(m, d1, threads=1)
    p(m, d2, threads=2)
    assert np.array_equal(np.asarray(d1.data), np.asarray(d2.data))
    assert np.array_equal(np.asarray(d1.data), np.asarray(r1.data))
    pb = gen.ResampleBackward(md_in, md_out, alg=alg)
    e1, e2 = gen.Memory(md_out), gen.Memory(md_out)
    pb(m, e1, threads=1)
    pb(m, e2, threads=2)
    assert np.array_equal(np.asarray(e1.data), np.asarray(e2.data))
    assert np.array_equal(np.asarray(e1.data), np.asarray(b1.data))


def test_threads_3d_bf16():
    x = random_data((2, 16, 6, 10, 12), "bf16", rng_for("thr3"), positive=True)
    for alg in ALGS:
        a = gen.resample(x, alg=alg, out_spatial=(11, 7, 25), threads=1)
        b = gen.resample(x, alg=alg, out_spatial=(11, 7, 25), threads=2)
        assert same_bits(a, b)
        a = gen.resample_backward(x, alg=alg, in_spatial=(11, 7, 25), threads=1)
        b = gen.resample_backward(x, alg=alg, in_spatial=(11, 7, 25), threads=2)
        assert same_bits(a, b)


# ============================================================ verbose, registry


FORWARD_CODE = """
import numpy as np, gen
x = np.ones((2, 3, 7, 30), dtype=np.float32)
y = gen.resample(x, alg="linear", out_spatial=(13, 29))
assert y.shape == (2, 3, 13, 29)
"""

BACKWARD_CODE = """
import numpy as np, gen
x = np.ones((2, 3, 13, 29), dtype=np.float32)
y = gen.resample_backward(x, alg="nearest", in_spatial=(7, 30))
assert y.shape == (2, 3, 7, 30)
"""

PRIMITIVE_CODE = """
import gen
a = gen.MemoryDesc((2, 3, 7, 30), "f32", "nhwc")
b = gen.MemoryDesc((2, 3, 13, 29), "f32", "nhwc")
p = gen.Resample(a, b, alg="linear")
q = gen.ResampleBackward(b, a, alg="linear")
p(gen.Memory(a), gen.Memory(b))
q(gen.Memory(b), gen.Memory(a))
"""


def _lines(text):
    return [ln for ln in text.splitlines() if ln.strip()]


def test_verbose_forward_one_line(tmp_path):
    p = run_py(FORWARD_CODE, tmp_path, GEN_VERBOSE="1")
    lines = _lines(p.stderr)
    assert len(lines) == 1, p.stderr
    assert "resample" in lines[0] and "resample_backward" not in lines[0], lines[0]
    assert "f32" in lines[0] or "float32" in lines[0], lines[0]
    assert "30" in lines[0] and "29" in lines[0], lines[0]  # shapes are named
    assert p.stdout == ""


def test_verbose_format_any_one_line(tmp_path):
    """The repacking of a NumPy source into the chosen format is part of the op: one line,
    naming both formats (the caller's source, not the repacked one)."""
    code = FORWARD_CODE.replace('out_spatial=(13, 29))', 'out_spatial=(13, 29), format="any")')
    code = code.replace("y.shape", "y.desc.dims")
    p = run_py(code, tmp_path, GEN_VERBOSE="1")
    lines = _lines(p.stderr)
    assert len(lines) == 1, p.stderr
    assert "exec,resample," in lines[0] and "dst:f32:acdb" in lines[0], lines[0]
    assert "src:f32:array" in lines[0], lines[0]


def test_verbose_backward_one_line(tmp_path):
    p = run_py(BACKWARD_CODE, tmp_path, GEN_VERBOSE="1")
    lines = _lines(p.stderr)
    assert len(lines) == 1, p.stderr
    assert "resample_backward" in lines[0], lines[0]
    assert p.stdout == ""


def test_verbose_primitives(tmp_path):
    p = run_py(PRIMITIVE_CODE, tmp_path, GEN_VERBOSE="1")
    lines = _lines(p.stderr)
    assert len(lines) == 2, p.stderr
    assert "resample" in lines[0] and "resample_backward" not in lines[0], lines
    assert "resample_backward" in lines[1], lines


@pytest.mark.parametrize("code", [FORWARD_CODE, BACKWARD_CODE, PRIMITIVE_CODE])
def test_silent_without_verbose(code, tmp_path):
    p = run_py(code, tmp_path)
    assert p.stdout == "" and p.stderr == ""
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("op", ["resample", "resample_backward"])
def test_kernels_registry(op):
    ks = gen.kernels(op)
    assert isinstance(ks, list) and ks, op
    for k in ks:
        assert k["op"] == op, k
        for key in ("name", "op", "isa", "dtypes", "layout"):
            assert key in k, (key, k)
    allk = gen.kernels()
    assert [k for k in allk if k["op"] == op] == ks
    assert gen.isa() in {k["isa"] for k in allk}


# ============================================================ bad input


def _x(shape, dtype=np.float32):
    return np.zeros(shape, dtype=dtype)


@pytest.mark.parametrize("alg", ["cubic", "bilinear_", "", "NEAREST_X", None, 3,
                                 np.array(["nearest", "linear"]), np.array(["linear"])])
def test_unknown_alg(alg):
    x = _x((1, 2, 5))
    md, md2 = gen.MemoryDesc((1, 2, 5), "f32"), gen.MemoryDesc((1, 2, 3), "f32")
    raises_gen(lambda: gen.resample(x, alg=alg, out_spatial=(3,)), repr(alg), str(alg), "alg")
    raises_gen(lambda: gen.resample_backward(x, alg=alg, in_spatial=(3,)), repr(alg), str(alg), "alg")
    raises_gen(lambda: gen.Resample(md, md2, alg=alg), repr(alg), str(alg), "alg")
    raises_gen(lambda: gen.ResampleBackward(md2, md, alg=alg), repr(alg), str(alg), "alg")


@pytest.mark.parametrize("shape", [(2, 3), (5,), (1, 1, 2, 2, 2, 2)])
def test_rank_outside_3_to_5(shape):
    x = _x(shape)
    nsp = max(len(shape) - 2, 1)
    raises_gen(lambda: gen.resample(x, out_spatial=(2,) * nsp), "rank", str(len(shape)), str(shape))
    raises_gen(lambda: gen.resample(x, factors=(2.0,) * nsp), "rank", str(len(shape)), str(shape))
    raises_gen(lambda: gen.resample_backward(x, alg="linear", in_spatial=(2,) * nsp),
               "rank", str(len(shape)), str(shape))
    m = gen.Memory(gen.MemoryDesc(shape, "f32"))
    raises_gen(lambda: gen.resample(m, out_spatial=(2,) * nsp), "rank", str(len(shape)), str(shape))


def test_wrong_lengths():
    x = _x((1, 2, 4, 5))
    for bad in [(3,), (3, 4, 5), ()]:
        raises_gen(lambda: gen.resample(x, out_spatial=bad), "out_spatial", str(bad))
        raises_gen(lambda: gen.resample(x, factors=tuple(float(b) for b in bad)), "factors", str(bad))
        raises_gen(lambda: gen.resample_backward(x, alg="nearest", in_spatial=bad), "in_spatial", str(bad))
    m = mem_from(_x((1, 2, 4, 5, 6)), "ndhwc")
    raises_gen(lambda: gen.resample(m, out_spatial=(3, 4)), "out_spatial", "(3, 4)")
    raises_gen(lambda: gen.resample_backward(m, alg="linear", in_spatial=(3, 4)), "in_spatial", "(3, 4)")


def test_non_positive_sizes():
    x = _x((1, 2, 4, 5))
    for bad in [(0, 3), (3, 0), (-1, 3), (3, -7)]:
        bad_v = [b for b in bad if b <= 0][0]
        raises_gen(lambda: gen.resample(x, out_spatial=bad), "out_spatial", str(bad), str(bad_v))
        raises_gen(lambda: gen.resample_backward(x, alg="linear", in_spatial=bad), "in_spatial", str(bad), str(bad_v))


def test_bad_factors():
    x = _x((1, 2, 5))
    raises_gen(lambda: gen.resample(x, factors=(0.1,)), "0.1", "factors", "empty", "0")
    raises_gen(lambda: gen.resample(x, factors=(0.0,)), "0.0", "factors")
    raises_gen(lambda: gen.resample(x, factors=(-2.0,)), "-2.0", "factors", "negative")
    raises_gen(lambda: gen.resample(x, factors=(-0.5,)), "-0.5", "factors", "negative")
    x2 = _x((1, 2, 5, 4))
    raises_gen(lambda: gen.resample(x2, factors=(2.0, 0.2)), "0.2", "factors", "empty")
    with warnings.catch_warnings():  # complex factors: refused, not cut to their real part
        warnings.simplefilter("error")
        for bad in (np.complex64(2), np.complex128(2 + 1j), 2j):
            raises_gen(lambda: gen.resample(x, factors=(bad,)), "factors")


def test_neither_or_both():
    x = _x((1, 2, 5))
    raises_gen(lambda: gen.resample(x), "out_spatial", "factors")
    raises_gen(lambda: gen.resample(x, alg="linear"), "out_spatial", "factors")
    raises_gen(lambda: gen.resample(x, out_spatial=(10,), factors=(2.0,)), "out_spatial", "factors")


@pytest.mark.parametrize("dtype", [np.int32, np.float64, np.int16, np.uint16, np.int64, np.bool_,
                                   np.complex64])
def test_unsupported_numpy_types(dtype):
    x = _x((1, 2, 5), dtype)
    name = np.dtype(dtype).name
    names = (name, "s32", "s16", "u16", "s64", "f64", "bool", "dtype")
    raises_gen(lambda: gen.resample(x, out_spatial=(3,)), *names)
    raises_gen(lambda: gen.resample(x, alg="linear", factors=(2.0,)), *names)
    raises_gen(lambda: gen.resample_backward(x, alg="nearest", in_spatial=(3,)), *names)


def test_unsupported_memory_type():
    m = gen.Memory(gen.MemoryDesc((1, 2, 5), "s32", "ncw"))
    raises_gen(lambda: gen.resample(m, out_spatial=(3,)), "s32")
    raises_gen(lambda: gen.resample_backward(m, alg="linear", in_spatial=(3,)), "s32")


def test_bad_source_objects():
    for bad in [None, "abc", [[[1.0, 2.0]]], 3.0, [[[1.0, 2.0], [3.0]]]]:
        try:
            gen.resample(bad, out_spatial=(3,))
        except gen.Error:
            pass  # a list may also be accepted as array-like; it must never raise anything else
        else:
            assert isinstance(bad, list)


def test_backward_without_alg_or_in_spatial():
    x = _x((1, 2, 5))
    raises_gen(lambda: gen.resample_backward(x, in_spatial=(3,)), "alg")
    raises_gen(lambda: gen.resample_backward(x, alg="linear"), "in_spatial")


def test_bad_format_argument():
    x = _x((1, 2, 5, 4))
    raises_gen(lambda: gen.resample(x, out_spatial=(3, 3), format="nosuchtag"), "nosuchtag")
    raises_gen(lambda: gen.resample(x, out_spatial=(3, 3), format="ncdhw"), "ncdhw", "rank")
    raises_gen(lambda: gen.resample_backward(x, alg="linear", in_spatial=(3, 3), format="ncw"), "ncw", "rank")
