"""The linear resampling kernel's ways to the same bits.

With two taps along the last axis and at most two along the others (1-D and 2-D), f32, runs of
8 channels or more and a destination large enough to stream (with one tap along the last axis,
any destination), each output is computed straight
from the source ("direct") instead of from a buffer of the item's source lines combined over
the other axes first. Both compute every tap value by the same chain of FMAs, so the results
must agree bit for bit; both are checked against the float64 reference of the formula too.
The destination-size condition is lowered here (plan.STREAM_BYTES) to keep the cases small.

Plain layouts take 16 outputs per step on the avx512 tier and 8 on avx2, with the same
arithmetic, and the scalar tier fuses as the vectors do: every tier gives the same bits."""
import dataclasses
import json
import math
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import gen
from gen import codegen, plan, registry
from gen.ops import resample as rs

import resample_reference as rr

# (logical source dims, output spatial, format): 2x up and down, non-integer ratios, channel
# runs with tails (19 = 16 + 3), two channel chunks (300 > 256), a blocked run of 16, 1-D, a
# last axis that shrinks with runs of 40; the direct path's items of several outer positions
# (group): 5 blocks of 16 channels, 3 of 8, and blocks of 16, 16 and 8 (one at a time)
CASES = [((2, 19, 7, 9), (14, 18), "nhwc"), ((1, 40, 9, 8), (5, 13), "nhwc"),
         ((1, 300, 3, 4), (7, 5), "nhwc"), ((2, 32, 5, 6), (11, 4), "nChw16c"),
         ((3, 24, 10), (23,), "nwc"), ((1, 40, 6, 20), (4, 9), "nhwc"),
         ((5, 32, 4, 6), (9, 11), "nChw16c"), ((1, 24, 5, 7), (3, 12), "nChw8c"),
         ((1, 40, 4, 5), (7, 9), "nChw16c")]


def on_tier(tier, script, cases, *more, env=None):
    """What `script` prints (JSON) given `cases` (JSON) and arguments `more` in a process on
    `tier` (GEN_ISA), with the variables of `env` set too."""
    return json.loads(subprocess.run([sys.executable, "-c", script, json.dumps(cases), *more],
                                     env=dict(os.environ, GEN_ISA=tier, **(env or {})),
                                     capture_output=True, text=True, check=True).stdout)


def plan_field(src, out_spatial, fmt, name, dtype="f32"):
    """A field of the forward plan of this problem."""
    sd = gen.MemoryDesc(src.shape, dtype, fmt)
    dd = gen.MemoryDesc(src.shape[:2] + out_spatial, dtype, fmt)
    return gen.Resample(sd, dd, alg="linear")._plan.tables.fields[name]


def direct_flag(src, out_spatial, fmt, dtype="f32"):
    """Whether the forward plan of this problem takes the direct path."""
    return plan_field(src, out_spatial, fmt, "direct", dtype)


@pytest.mark.parametrize("dims,out_spatial,fmt", CASES, ids=[c[2] + str(c[0]) for c in CASES])
def test_direct_gives_the_buffers_bits(dims, out_spatial, fmt, monkeypatch):
    rng = np.random.default_rng(len(dims) * 100 + dims[1])
    x = (rng.standard_normal(dims) * 4).astype(np.float32)
    x[0, 0] = -0.0  # signed zeros take the same path
    src = gen.Memory.from_array(x, format=fmt)
    dy = gen.Memory.from_array((rng.standard_normal(dims[:2] + out_spatial) * 4)
                               .astype(np.float32), format=fmt)
    results = {}
    monkeypatch.setattr(rs, "DIRECT_RUNS", 1 << 60)  # in cache: never direct
    for stream_bytes in (1 << 60, 0):
        monkeypatch.setattr(plan, "STREAM_BYTES", stream_bytes)
        rs._plan_of.cache_clear()
        direct = int(stream_bytes == 0)
        assert direct_flag(x, out_spatial, fmt) == direct
        for threads in (1, 2):
            fwd = gen.resample(src, alg="linear", out_spatial=out_spatial, threads=threads)
            bwd = gen.resample_backward(dy, alg="linear", in_spatial=dims[2:], threads=threads)
            results[direct, threads] = (bytes(fwd.data), bytes(bwd.data))
        want = rr.forward(x, out_spatial, "linear")
        got = fwd.to_array().astype(np.float64)
        scale = rr.forward_abs(x, out_spatial, "linear") + 1e-30
        assert np.all(np.abs(got - want) <= 1e-6 * scale)
    rs._plan_of.cache_clear()
    assert len(set(results.values())) == 1


def test_direct_only_where_it_measured_faster(monkeypatch):
    """Not for trilinear (4 taps along the other axes), other types, runs under a vector, or
    a destination in cache."""
    rng = np.random.default_rng(3)
    monkeypatch.setattr(plan, "STREAM_BYTES", 0)
    rs._plan_of.cache_clear()
    x = rng.standard_normal((1, 16, 4, 5, 6)).astype(np.float32)
    assert direct_flag(x, (8, 10, 12), "ndhwc") == 0
    assert direct_flag(x[:, :, 0], (10, 12), "nhwc") == 1
    assert direct_flag(x[:, :4, 0], (10, 12), "nhwc") == 0  # runs of 4 channels
    assert direct_flag(x[:, :, 0], (10, 12), "nchw") == 0
    assert direct_flag(x[:, :, 0], (10, 12), "nhwc", "bf16") == 0
    monkeypatch.setattr(plan, "STREAM_BYTES", 1 << 60)
    rs._plan_of.cache_clear()
    assert direct_flag(x[:, :, 0], (10, 12), "nhwc") == 0
    # in cache, a last axis that shrinks with runs of 32 channels or more
    y = rng.standard_normal((1, 32, 4, 12)).astype(np.float32)
    assert direct_flag(y, (2, 6), "nhwc") == 1
    assert direct_flag(y, (2, 13), "nhwc") == 0
    assert direct_flag(y[:, :16], (2, 6), "nhwc") == 0
    assert direct_flag(y, (2, 6), "nChw16c") == 0
    rs._plan_of.cache_clear()


@pytest.mark.parametrize("dims,fmt,group", [
    ((5, 32, 4, 6), "nChw16c", 5), ((2, 64, 4, 6), "nChw16c", 8), ((3, 48, 4, 6), "nChw16c", 3),
    ((1, 40, 4, 6), "nChw16c", 1), ((7, 16, 4, 6), "nhwc", 7), ((1, 24, 4, 6), "nChw8c", 3),
    ((8, 256, 4, 10), "nhwc", 4), ((2, 1024, 4, 10), "nhwc", 1)])
def test_direct_items_take_outer_positions_of_equal_runs(dims, fmt, group, monkeypatch):
    """Up to direct_group (8) outer positions per item, as many as divide their count and
    whose source lines (2 per output row here) and destination rows fit GROUP_BYTES: NHWC
    rows of 10 -> 11 pixels of 256 channels take 31 KB per image, so 4 images; of 1024, one.
    One at a time when the runs differ (16, 16 and 8 channels). The buffered path takes one."""
    x = np.zeros(dims, np.float32)
    for stream_bytes, want in ((0, group), (1 << 60, 1)):
        monkeypatch.setattr(plan, "STREAM_BYTES", stream_bytes)
        rs._plan_of.cache_clear()
        assert plan_field(x, (9, 11), fmt, "group") == want
    rs._plan_of.cache_clear()


def test_bad_cache_size_is_named(cache_size, monkeypatch):
    """A GEN_LLC_BYTES that is not a number of bytes is the gen.Error that names it, from a
    resampling as from a reorder (not a resampling "too large to plan"); an empty one is
    unset."""
    monkeypatch.setattr(plan, "STREAM_BYTES", 0)  # so that the plans ask for the size
    cache_size("32M")
    x = np.zeros((1, 16, 5, 7), np.float32)
    for call in (lambda: gen.resample(x, alg="linear", out_spatial=(9, 11)),
                 lambda: gen.Reorder(gen.MemoryDesc(x.shape, "f32", "nchw"),
                                     gen.MemoryDesc(x.shape, "f32", "nhwc"))):
        with pytest.raises(gen.Error, match="GEN_LLC_BYTES must be a number of bytes") as e:
            call()
        assert "too large" not in str(e.value)
    cache_size("")  # empty: unset, as every GEN_ variable
    assert plan.llc_bytes() >= 0 and call()


def test_f32_streams_past_the_cache(cache_size, monkeypatch):
    """f32 streams where a copy of its destination, or the call's bytes (source and
    destination), reach llc_bytes() (plan.stream_threads), and not below; other types never.
    Into a larger destination (2x up) at 1 thread only, else at any thread count; where gen
    counts no last-level cache (llc_bytes() 0), rows into a larger one at any thread count and
    channel runs not at all, though on the direct path, as a destination past the caches.
    Results are the same bits either way."""
    x = np.random.default_rng(5).standard_normal((4, 32, 20, 24)).astype(np.float32)
    src = gen.Memory.from_array(x, format="nhwc")  # 245 KB; 2x up writes 983 KB
    monkeypatch.setattr(plan, "STREAM_BYTES", 0)
    copy = 2 * 4 * 32 * 40 * 48 * 4
    results = set()
    for llc, want in ((0, 0), (1, 1), (1 << 20, 1), (copy, 1), (copy + 1, 0)):
        cache_size(llc)
        assert plan_field(x, (40, 48), "nhwc", "stream") == want, llc
        assert direct_flag(x, (40, 48), "nhwc") == int(llc <= copy), llc
        # rows (a channel each) stream into a larger destination whatever the cache, where
        # gen counts none at any thread count
        rows = plan.ANY_THREADS if llc == 0 else int(llc <= copy)
        assert plan_field(x, (40, 48), "nchw", "stream") == rows, llc
        assert plan_field(x, (40, 48), "nhwc", "stream", "bf16") == 0
        for threads in (1, 2):
            y = gen.resample(src, alg="linear", out_spatial=(40, 48), threads=threads)
            results.add(bytes(y.data))
    assert len(results) == 1
    # 2x down: the call's bytes (source and destination) past the cache stream, though a
    # copy of the destination fits
    call = 4 * 32 * (20 * 24 + 10 * 12) * 4
    results = set()
    for llc, want in ((call, plan.ANY_THREADS), (call + 1, 0)):
        cache_size(llc)
        assert plan_field(x, (10, 12), "nhwc", "stream") == want, llc
        for threads in (1, 2):
            y = gen.resample(src, alg="linear", out_spatial=(10, 12), threads=threads)
            results.add(bytes(y.data))
    assert len(results) == 1


@pytest.mark.parametrize("alg", ["nearest", "linear"])
def test_a_call_that_shrinks_streams_as_a_copy_of_its_source(alg, cache_size, monkeypatch):
    """2x up backward reads four times what it writes: it streams at any thread count where
    twice its source reaches llc_bytes(), though the call's bytes fit (plan.stream_threads
    of a copy of the source), and not where twice the source fits. The same bits either way,
    at 1 and 2 threads."""
    dy = np.random.default_rng(6).standard_normal((2, 32, 16, 16)).astype(np.float32)
    monkeypatch.setattr(plan, "STREAM_BYTES", 0)
    want, scale = rr.backward(dy, (8, 8), alg), rr.backward_abs(dy, (8, 8), alg)
    for fmt in ("nhwc", "nchw"):
        dd = gen.Memory.from_array(dy, format=fmt)  # 64 KB, into 16 KB
        results = set()
        for llc, streams in ((1 << 30, 0), (200 << 10, 0), (120 << 10, plan.ANY_THREADS)):
            cache_size(llc)
            prim = gen.ResampleBackward(dd.desc, gen.MemoryDesc((2, 32, 8, 8), "f32", fmt),
                                        alg=alg)
            assert prim._plan.tables.fields["stream"] == streams, (fmt, llc)
            for threads in (1, 2):
                dx = gen.resample_backward(dd, alg=alg, in_spatial=(8, 8), threads=threads)
                results.add(dx.to_array().tobytes())
                assert rr.check(dx.to_array(), want, scale, "f32") is None
        assert len(results) == 1, fmt


def test_trilinear_streams_or_not_with_the_same_bits(cache_size, monkeypatch):
    """Trilinear 2x up of channel runs (the buffer path, not the direct one) and of NCDHW's
    rows streams at 1 thread past llc_bytes() and stores plainly within it: the same bits
    either way, at 1 and 2 threads, and the reference's values."""
    x = np.random.default_rng(8).standard_normal((1, 16, 4, 5, 8)).astype(np.float32)
    monkeypatch.setattr(plan, "STREAM_BYTES", 0)
    for llc, want in ((78 << 10, 1), (1 << 30, 0)):  # the call moves 90 KB
        cache_size(llc)
        for fmt in ("ndhwc", "ncdhw"):
            assert plan_field(x, (8, 10, 16), fmt, "stream") == want, (fmt, llc)
    for fmt in ("ndhwc", "ncdhw"):
        src = gen.Memory.from_array(x, format=fmt)
        results = set()
        for llc in (78 << 10, 1 << 30):  # streaming, then plain stores
            cache_size(llc)
            for threads in (1, 2):
                y = gen.resample(src, alg="linear", out_spatial=(8, 10, 16), threads=threads)
                results.add(y.to_array().tobytes())
        assert len(results) == 1, fmt
        got = np.frombuffer(results.pop(), np.float32).reshape(1, 16, 8, 10, 16)
        want = rr.forward(x, (8, 10, 16), "linear")
        scale = rr.forward_abs(x, (8, 10, 16), "linear") + 1e-30
        assert np.all(np.abs(got - want) <= 1e-6 * scale), fmt


def test_prefetch_from_a_source_of_half_the_cache(cache_size):
    """Items of contiguous lines prefetch the lines of items ahead when the kernel's source is
    half of llc_bytes() or more (forward and backward alike), not where gen counts no
    last-level cache (0: on Sapphire Rapids the hardware fetched them), and the item's lines
    hold PREFETCH_BYTES at most: NCHW rows and NHWC runs of 32 channels (2 lines of 3 KB),
    not runs of 256 (2 of 24 KB). The same bits either way."""
    x = np.random.default_rng(6).standard_normal((4, 32, 20, 24)).astype(np.float32)  # 245 KB
    dy = np.random.default_rng(7).standard_normal((4, 32, 40, 48)).astype(np.float32)
    wide = np.zeros((1, 256, 5, 24), np.float32)
    results = {}
    for llc, want in ((0, 0), (2 * x.nbytes, 1), (2 * x.nbytes + 1, 0)):
        cache_size(llc)
        for fmt in ("nchw", "nhwc"):
            assert plan_field(x, (40, 48), fmt, "prefetch") == want, (llc, fmt)
            y = gen.resample(gen.Memory.from_array(x, format=fmt), alg="linear",
                             out_spatial=(40, 48), threads=2)
            dx = gen.resample_backward(gen.Memory.from_array(dy, format=fmt), alg="linear",
                                       in_spatial=(20, 24), threads=2)
            results.setdefault(fmt, set()).add(bytes(y.data) + bytes(dx.data))
        assert plan_field(wide, (10, 48), "nhwc", "prefetch") == 0
    assert [len(r) for r in results.values()] == [1, 1]


def test_prefetch_counts_the_lines_of_all_outputs_of_an_item(cache_size):
    """An item of two outputs (span 2) reads the lines of both: nChw16c 2x up backward's blocks
    of 112 columns (lines of 7 KB: two outputs, 4 taps each, 56 KB) prefetch none; of 80
    columns (5 KB lines, too short for items of two: 20 KB) they do."""
    cache_size(1)
    for cols, want in ((112, (2, 0)), (80, (1, 1))):
        dd = gen.MemoryDesc((1, 16, 16, cols), "f32", "nChw16c")
        ds = gen.MemoryDesc((1, 16, 8, cols // 2), "f32", "nChw16c")
        fields = gen.ResampleBackward(dd, ds, alg="linear")._plan.tables.fields
        assert (fields["span"], fields["prefetch"]) == want, cols


# plain layouts: 2x up and odd ratios, rows shorter and longer than a step of 16, 1-D to 3-D;
# 71 -> 73, whose steps of 16 alternate between taps within 16 sources and wider ones; then
# channels-last and blocked layouts, and the other types (taps that cancel: values of both signs)
TIER_CASES = [((2, 3, 11, 37), (22, 74), "nchw", "f32"), ((1, 2, 5, 9), (7, 31), "nchw", "f32"),
              ((1, 2, 3, 4, 40), (6, 8, 80), "ncdhw", "f32"), ((2, 3, 50), (17,), "ncw", "f32"),
              ((1, 2, 3, 71), (5, 73), "nchw", "f32"), ((1, 8, 13, 11), (29, 6), "nchw", "f32"),
              ((2, 21, 13, 11), (29, 6), "nhwc", "f32"), ((2, 37, 7, 5), (3, 12), "nChw16c", "f32"),
              ((1, 6, 3, 4, 5), (5, 2, 9), "ndhwc", "f32"), ((2, 19, 13, 11), (29, 6), "nhwc", "bf16"),
              ((1, 20, 9, 7), (4, 15), "nChw8c", "f16"), ((2, 5, 13, 11), (29, 6), "nchw", "s8"),
              ((2, 18, 9, 7), (4, 15), "nhwc", "u8")]
SCRIPT = r"""
import json, sys, numpy as np, gen
SPECIAL = np.array([0x7fc00000, 0xffc00000, 0x7fc12345, 0xffc54321, 0x7fa00001, 0x7f800000,
                    0xff800000, 0x3f800000, 0xc0400000, 0], np.uint32).view(np.float32)
out = []
for dims, sp, fmt, dtype, *special in json.loads(sys.argv[1]):
    rng = np.random.default_rng(len(dims) + dims[-1])
    x = rng.choice(SPECIAL, size=dims) if special else (rng.standard_normal(dims) * 40).astype(np.float32)
    x = gen.Memory.from_array(x, format=fmt, dtype=dtype)
    for threads in (1, 2):
        y = gen.resample(x, alg="linear", out_spatial=sp, threads=threads)
        dx = gen.resample_backward(y, alg="linear", in_spatial=dims[2:], threads=threads)
        out.append(bytes(y.data).hex() + bytes(dx.data).hex())
print(json.dumps(out))
"""


def test_every_tier_gives_the_same_bits():
    """Every tier this machine runs, the scalar one included, at 1 and 2 threads. Under a
    last-level cache of 1 byte, every call is past it: the items of contiguous lines
    prefetch (which no call does where gen counts no cache, llc_bytes() 0)."""
    runs = [on_tier(tier, SCRIPT, TIER_CASES, env={"GEN_LLC_BYTES": "1"})
            for tier in registry.supported()]
    assert runs and all(run == runs[0] for run in runs)
    assert all(one == two for one, two in zip(runs[0][::2], runs[0][1::2]))


# NaN results: where the taps hold NaNs of several signs and payloads, infinities of both signs
# (0 * inf, inf - inf) and finite values, every tier returns the same NaN (the scalar tier's
# gen_fmaf picks the operand the FMA instruction does); SCRIPT draws x from SPECIAL for them
# (1, 3, 4, 20) -> (8, 40): backward, AVX2 takes taps every other line from two loads, its
# edges' taps gathered
SPECIAL_CASES = [((1, 3, 6, 9), (6, 13), "nchw", "f32"), ((1, 3, 6, 9), (5, 4), "nchw", "f32"),
                 ((1, 3, 4, 20), (8, 40), "nchw", "f32"),
                 ((2, 19, 6, 9), (11, 9), "nhwc", "f32"), ((1, 21, 5, 7), (9, 3), "nChw16c", "f32"),
                 ((1, 4, 3, 4, 9), (5, 6, 4), "ncdhw", "f32"), ((1, 18, 6, 9), (11, 17), "nhwc", "bf16"),
                 ((1, 20, 6, 9), (4, 15), "nChw8c", "f16")]


def test_every_tier_gives_the_same_nan_bits():
    runs = [on_tier(tier, SCRIPT, [case + ("special",) for case in SPECIAL_CASES])
            for tier in registry.supported()]
    assert len(runs[0]) == 2 * len(SPECIAL_CASES)
    assert all(run == runs[0] for run in runs)
    assert all(one == two for one, two in zip(runs[0][::2], runs[0][1::2]))
    # NaNs of more than one sign or payload reach the results (f32): the test can tell them apart
    nans = {w for h in runs[0][:10] for w in np.frombuffer(bytes.fromhex(h), np.uint32)
            if (w & 0x7fffffff) > 0x7f800000}
    assert len(nans) >= 3


# Items of several outer positions (group > 1) on every tier, with the direct path taken where
# the tier has it: nChw16c and nChw8c forward (groups of 8; runs of one vector on AVX-512 and
# AVX2), NHWC 4x down forward (2 images), and backward lines that no diff_dst row reaches
# (K = 0), written as zeros over a destination that holds garbage before the call. Last axes
# that expand hold their taps in registers, as many runs at a time as fit (AVX-512: 8 vectors,
# AVX2: 4, one run at a time where its stores stream: at 1 thread here, 2x up streams at 1
# only): 8 blocks of 16 (AVX2: 4 passes, 8 streaming), NHWC and NWC runs of 32 channels of 3
# images (AVX-512: one pass of 6 vectors, AVX2: 3 of 4), 3 -> 5 (outputs that fall on a source)
GROUPED = [((2, 64, 4, 6), (9, 11), "nChw16c", False), ((2, 64, 4, 6), (9, 11), "nChw8c", False),
           ((2, 40, 12, 20), (3, 5), "nhwc", False), ((2, 64, 16, 10), (4, 7), "nChw16c", True),
           ((3, 32, 6, 3), (11, 5), "nhwc", False), ((3, 32, 7), (17,), "nwc", False)]
GROUPED_SCRIPT = r"""
import json, sys, numpy as np, gen
from gen import plan
plan.STREAM_BYTES = 0  # every destination streams (2x up at 1 thread): the direct path
out = []
for dims, sp, fmt, backward in json.loads(sys.argv[1]):
    small = dims[:2] + sp
    x = (np.random.default_rng(dims[1]).standard_normal(small if backward else dims) * 4)
    x = gen.Memory.from_array(x.astype(np.float32), format=fmt)
    big = gen.MemoryDesc(dims, "f32", fmt)
    prim = (gen.ResampleBackward(x.desc, big, alg="linear") if backward
            else gen.Resample(x.desc, gen.MemoryDesc(small, "f32", fmt), alg="linear"))
    ys = []
    for threads in (1, 2):
        y = gen.Memory(big if backward else gen.MemoryDesc(small, "f32", fmt))
        y.data[:] = 0x7f
        prim(x, y, threads=threads)
        ys.append(y.to_array().tolist())
    out.append([prim._plan.tables.fields["group"], ys])
print(json.dumps(out))
"""


@pytest.mark.parametrize("tier", registry.supported())
def test_grouped_items_on_every_tier(tier):
    got = on_tier(tier, GROUPED_SCRIPT, GROUPED)
    assert [g for g, _ in got] == [8, 8, 2, 8, 3, 3]
    for (dims, sp, fmt, backward), (_, ys) in zip(GROUPED, got):
        small = dims[:2] + sp
        x = (np.random.default_rng(dims[1]).standard_normal(small if backward else dims) * 4)
        x = x.astype(np.float32)
        if backward:
            want, scale = rr.backward(x, dims[2:], "linear"), rr.backward_abs(x, dims[2:], "linear")
        else:
            want, scale = rr.forward(x, sp, "linear"), rr.forward_abs(x, sp, "linear")
        for threads, y in zip((1, 2), ys):
            assert np.all(np.abs(np.array(y) - want) <= 1e-6 * scale + 1e-30), \
                (tier, fmt, backward, threads)


# NCHW nearest backward of a 2x and a 3x down: most diff_src elements get no diff_dst element
# (padding taps), so steps of 8 outputs mix padding and real taps; they are windowed (wide 3)
# and their padding lanes zeroed, never given a value of the window (inf and NaN are in it).
# Rows no diff_dst row reached are zeros, streamed where the rows stream; every case with
# plain stores, and with streaming ones where all stores are whole aligned vectors (rows of
# 400 and 240 floats; 57 do not stream, resample._whole_vectors), into rows PITCH floats
# apart: the gaps between them keep their bytes
PITCH = 8
MASKED_SCRIPT = r"""
import json, sys, numpy as np, gen
from gen import plan
from gen.ops import resample
out = []
for dims, sp in json.loads(sys.argv[1]):
    dy = np.random.default_rng(sp[-1]).standard_normal(dims[:2] + sp).astype(np.float32)
    dy[..., ::3] = np.inf
    dy[..., 1::5] = np.nan
    x = gen.Memory.from_array(dy, format="nchw")
    for floor in (1 << 62, 0):
        plan.STREAM_BYTES = floor
        resample._plan_of.cache_clear()
        n, c, h, w = dims
        row = w + int(sys.argv[2])
        dst = gen.MemoryDesc(dims, "f32", strides=(c * h * row, h * row, row, 1))
        prim = gen.ResampleBackward(x.desc, dst, alg="nearest")
        y = gen.Memory(dst)
        y.data[:] = 0x7f
        prim(x, y)
        fields = prim._plan.tables.fields
        out.append([fields["wide"][1].tolist(), fields["stream"], bytes(y.data).hex()])
print(json.dumps(out))
"""
MASKED = [((1, 3, 6, 400), (3, 200)), ((2, 2, 5, 240), (2, 80)), ((2, 3, 7, 57), (3, 28))]


@pytest.mark.parametrize("tier", [t for t in registry.supported() if t != "scalar"])
def test_padding_taps_windowed_and_zeroed(tier):
    got = on_tier(tier, MASKED_SCRIPT, MASKED, str(PITCH))
    assert [bool(stream) for _, stream, _ in got] == [False, True, False, True, False, False]
    for (dims, sp), (wide, _, raw) in zip([c for c in MASKED for _ in (0, 1)], got):
        assert 3 in wide  # windowed steps: two 16-float loads on avx512, two of 8 on avx2
        dy = np.random.default_rng(sp[-1]).standard_normal(tuple(dims[:2]) + tuple(sp))
        dy = dy.astype(np.float32)
        dy[..., ::3] = np.inf
        dy[..., 1::5] = np.nan
        # each diff_src element gets at most one diff_dst element (a down-sampling): placed,
        # not summed by a matrix product, so that inf and NaN go nowhere else
        want = np.zeros(dims, np.float32)
        rows = rr.nearest_indices(dims[2], sp[0])[:, None]
        want[:, :, rows, rr.nearest_indices(dims[3], sp[1])[None, :]] = dy
        raw = bytes.fromhex(raw)
        raw += b"\x7f" * (4 * math.prod(dims[:3]) * (dims[3] + PITCH) - len(raw))
        y = np.frombuffer(raw, np.float32).reshape(tuple(dims[:3]) + (dims[3] + PITCH,))
        assert np.array_equal(y[..., :dims[3]], want, equal_nan=True), tier
        assert np.all(y[..., dims[3]:].view(np.uint32) == 0x7f7f7f7f), tier  # gaps untouched


# Nearest forward into a destination that streams (every size, every thread count here): runs
# of whole cache lines (64 f32 or 32 bf16 channels, nChw16c's blocks) stream, the others (20
# channels, NCHW rows) do not; over garbage, at 1 and 2 threads, every tier: the source's bytes
NEAREST = [((2, 64, 5, 7), (11, 13), "nhwc", "f32"), ((2, 32, 5, 7), (9, 4), "nhwc", "bf16"),
           ((2, 20, 5, 7), (11, 13), "nhwc", "f32"), ((1, 32, 6, 5), (13, 9), "nChw16c", "f32"),
           ((2, 3, 6, 40), (13, 80), "nchw", "f32")]
NEAREST_SCRIPT = r"""
import json, sys, numpy as np, gen
from gen import plan
from gen.ops import resample
plan.STREAM_BYTES = 0
# no call fits a cache of 1 byte: every destination streams at any count (gen counts a cache:
# with none, channel runs into a larger destination would not stream)
plan.llc_bytes = lambda: 1
resample.EXPANDING_STREAM_THREADS = plan.ANY_THREADS  # 2x up too
out = []
for dims, sp, fmt, dt in json.loads(sys.argv[1]):
    x = np.random.default_rng(dims[1]).standard_normal(dims).astype(np.float32)
    src = gen.Memory.from_array(x, format=fmt, dtype=dt)
    prim = gen.Resample(src.desc, gen.MemoryDesc(dims[:2] + sp, dt, fmt), alg="nearest")
    for threads in (1, 2):
        y = gen.Memory(prim.dst_desc)
        y.data[:] = 0x7f
        prim(src, y, threads=threads)
        out.append([prim._plan.tables.fields["stream"], y.to_array().astype(np.float32).tolist()])
print(json.dumps(out))
"""


@pytest.mark.parametrize("tier", registry.supported())
def test_nearest_streams_the_sources_bytes(tier):
    got = on_tier(tier, NEAREST_SCRIPT, NEAREST)
    for k, (dims, sp, fmt, dt) in enumerate(NEAREST):
        x = np.random.default_rng(dims[1]).standard_normal(dims).astype(np.float32)
        want = rr.nearest_gather(x.astype(ml_dtypes.bfloat16 if dt == "bf16" else x.dtype),
                                 tuple(sp))
        for stream, y in got[2 * k:2 * k + 2]:
            assert stream == plan.ANY_THREADS, (tier, fmt, dt)
            assert np.array_equal(np.array(y, np.float32), want.astype(np.float32)), (tier, fmt, dt)


# Items of two outputs of axis 1 (span 2), whose combines read the source lines they share
# once (_combine2), against items of one: backward 2x up (odd output counts: the last item
# has one output; 19 channels: tails of a vector step), nChw16c blocks, forward 2.2x up in the
# cache (not the direct path), trilinear forward (4 taps along axes 0 and 1), bf16 (converting
# loads). SPAN_LINE_BYTES (and _BACKWARD) is lowered to take these small cases.
SPAN = [((2, 19, 7, 9), (14, 18), "nhwc", True, "f32"),
        ((2, 32, 5, 6), (10, 12), "nChw16c", True, "f32"),
        ((1, 24, 5, 7), (11, 15), "nhwc", False, "f32"),
        ((1, 8, 3, 4, 5), (6, 8, 10), "ndhwc", False, "f32"),
        ((2, 40, 6, 5), (12, 10), "nhwc", True, "bf16")]
SPAN_SCRIPT = r"""
import json, sys, numpy as np, gen
from gen.ops import resample as rs
out = []
for dims, sp, fmt, backward, dt in json.loads(sys.argv[1]):
    small = dims[:2] + sp
    x = (np.random.default_rng(dims[1]).standard_normal(small if backward else dims) * 4)
    x = gen.Memory.from_array(x.astype(np.float32), format=fmt, dtype=dt)
    for line_bytes in (1 << 60, 0):
        rs.SPAN_LINE_BYTES = rs.SPAN_LINE_BYTES_BACKWARD = line_bytes
        rs._plan_of.cache_clear()
        for threads in (1, 2):
            if backward:
                y = gen.resample_backward(x, alg="linear", in_spatial=dims[2:], threads=threads)
                prim = gen.ResampleBackward(x.desc, y.desc, alg="linear")
            else:
                y = gen.resample(x, alg="linear", out_spatial=sp, threads=threads)
                prim = gen.Resample(x.desc, y.desc, alg="linear")
            out.append([prim._plan.tables.fields["span"], bytes(y.data).hex(),
                        y.to_array().astype(np.float32).tolist()])
print(json.dumps(out))
"""


@pytest.mark.parametrize("tier", registry.supported())
def test_two_outputs_per_item_give_the_same_bits(tier):
    got = on_tier(tier, SPAN_SCRIPT, SPAN)
    for k, (dims, sp, fmt, backward, dt) in enumerate(SPAN):
        runs = got[4 * k:4 * k + 4]
        assert [span for span, _, _ in runs] == [1, 1, 2, 2], (tier, fmt)
        assert len({raw for _, raw, _ in runs}) == 1, (tier, fmt, backward, dt)
        small = dims[:2] + sp
        x = (np.random.default_rng(dims[1]).standard_normal(small if backward else dims) * 4)
        x = x.astype(np.float32)
        if dt == "bf16":
            x = x.astype(ml_dtypes.bfloat16).astype(np.float32)
        if backward:
            want, scale = rr.backward(x, dims[2:], "linear"), rr.backward_abs(x, dims[2:], "linear")
        else:
            want, scale = rr.forward(x, sp, "linear"), rr.forward_abs(x, sp, "linear")
        tol = 2.0 ** -8 if dt == "bf16" else 1e-6  # bf16: the result's rounding
        assert np.all(np.abs(np.array(runs[0][2]) - want) <= tol * scale + 1e-30), (tier, fmt)


def test_two_outputs_per_item_where_they_share_long_lines(monkeypatch):
    """Span 2 where the outputs 2i, 2i + 1 of axis 1 share source lines of SPAN_LINE_BYTES
    or more (backward: SPAN_LINE_BYTES_BACKWARD), combined over SPAN_TAPS taps at most, on
    the buffer path: NHWC 2x up backward with 64 channels (lines of 28 KB) or 16 (7 KB),
    nChw16c's blocks (7 KB), not 8 channels (3.5 KB), nor trilinear forward's 8 KB lines
    (NDHWC with 64 channels), nor nearest's (its outputs share no source), nor trilinear
    backward's 16 taps (16 KB lines), nor the direct path (NHWC 2x up forward into a
    destination that streams)."""
    def span(small, big, fmt, alg="linear", backward=True):
        s, b = gen.MemoryDesc(small, "f32", fmt), gen.MemoryDesc(big, "f32", fmt)
        prim = gen.ResampleBackward(b, s, alg=alg) if backward else gen.Resample(s, b, alg=alg)
        return prim._plan.tables.fields["span"]
    rs._plan_of.cache_clear()
    assert span((1, 64, 56, 56), (1, 64, 112, 112), "nhwc") == 2
    assert span((1, 16, 56, 56), (1, 16, 112, 112), "nhwc") == 2
    assert span((1, 64, 56, 56), (1, 64, 112, 112), "nChw16c") == 2
    assert span((1, 8, 56, 56), (1, 8, 112, 112), "nhwc") == 1
    assert span((1, 64, 4, 8, 32), (1, 64, 8, 16, 64), "ndhwc", backward=False) == 1
    assert span((1, 64, 56, 56), (1, 64, 112, 112), "nhwc", "nearest") == 1
    assert span((1, 64, 4, 8, 64), (1, 64, 8, 16, 128), "ndhwc") == 1
    monkeypatch.setattr(plan, "STREAM_BYTES", 0)
    rs._plan_of.cache_clear()
    assert span((1, 64, 56, 56), (1, 64, 112, 112), "nhwc", backward=False) == 1
    rs._plan_of.cache_clear()


# Plain layouts' rows (the kernel's _lines) of 2x up and other ratios, 1-D to 3-D, axes that
# expand and shrink.
ROWS = [((2, 3, 5, 6, 7), (10, 12, 14)), ((2, 5, 9, 11), (18, 22)), ((1, 4, 7, 9), (13, 20)),
        ((1, 2, 6, 8, 9), (12, 16, 18)), ((3, 2, 5, 40), (7, 80)), ((1, 3, 9, 12), (4, 24)),
        ((2, 3, 17), (34,)),
        # rows of 16-output steps whose taps' positions, weights or both repeat the step
        # before (the kernel holds them) or not
        ((1, 2, 3, 48), (5, 100)), ((1, 2, 3, 64), (4, 112)), ((1, 2, 2, 3, 37), (3, 4, 96)),
        # rows all in 16-wide steps, in pairs (15 rows: at 2 threads 8 and 7)
        ((1, 3, 3, 32), (5, 64)),
        # 2x down: 16-wide steps whose 16 outputs read 32 sources (two loads), then a tail
        ((1, 2, 6, 104), (3, 52))]
ROWS_SCRIPT = r"""
import json, os, sys, numpy as np, gen
from gen import plan
from gen.ops import resample as rs
os.environ["GEN_LLC_BYTES"] = "1"  # with STREAM_BYTES 0 below: these small calls stream
rs.EXPANDING_STREAM_THREADS = plan.ANY_THREADS  # at any count
out = []
for dims, sp in json.loads(sys.argv[1]):
    x = (np.random.default_rng(len(dims) + dims[-1]).standard_normal(dims) * 4).astype(np.float32)
    plain, last = {3: ("ncw", "nwc"), 4: ("nchw", "nhwc"), 5: ("ncdhw", "ndhwc")}[len(dims)]
    for dt in ("f32", "bf16"):
        for stream_bytes in (1 << 60, 0):  # plain stores, then streaming ones (rows in pairs)
            plan.STREAM_BYTES = stream_bytes
            rs._plan_of.cache_clear()
            for fmt in (plain, last):
                for threads in (1, 2):
                    m = gen.Memory.from_array(x, format=fmt, dtype=dt)
                    y = gen.resample(m, alg="linear", out_spatial=sp, threads=threads)
                    out.append([dt, fmt, y.to_array().astype(np.float32).tobytes().hex()])
print(json.dumps(out))
"""


def test_16_wide_steps_of_taps_within_32_sources():
    """resample._windows16: a step of 16 outputs takes the first of the 32 sources that hold
    its taps (2x down: 16 outputs from 32 sources; 2x up: from 9), its taps' positions from
    there; none (0) where they span more, or a padding tap (index 0) is among them."""
    down = np.stack([np.arange(1, 97, 2), np.arange(2, 98, 2)])  # 48 outputs of 96 sources
    win, perm, span = rs._windows16(down)
    assert win.tolist() == [1, 33, 65] and span.tolist() == [32, 32, 32]
    assert perm[:, :16].tolist() == [list(range(0, 32, 2)), list(range(1, 32, 2))]
    assert (perm[:, 16:32] == perm[:, :16]).all()
    up = np.stack([np.arange(32) // 2 + 1, np.arange(32) // 2 + 2])
    assert rs._windows16(up)[0].tolist() == [1, 9] and rs._windows16(up)[2].tolist() == [9, 9]
    wide = np.stack([np.arange(16) * 3 + 1, np.arange(16) * 3 + 2])  # 47 sources
    assert rs._windows16(wide)[0].tolist() == [0]
    assert rs._windows16(np.stack([np.arange(16), np.arange(16) + 1]))[0].tolist() == [0]


def test_steps_straight_from_the_source_where_no_two_share_one():
    """resample._fused: per step of 16 outputs (a last partial one too), the first of the 32
    sources that hold its taps and their positions from there; none where two steps share a
    source (as 2x up's do), a step spans more than 32, or reads a padding tap (index 0).
    The generic avx512 kernel renders the path."""
    down = np.stack([np.arange(1, 57, 2), np.arange(2, 58, 2)])  # 28 outputs of 56 sources
    win, perm = rs._fused(down)
    assert win.tolist() == [1, 33] and perm.shape == (2, 32)
    assert perm[:, :16].tolist() == [list(range(0, 32, 2)), list(range(1, 32, 2))]
    assert perm[:, 16:28].tolist() == perm[:, :12].tolist()
    assert (perm[:, 28:] == perm[:, 27:28]).all()  # run on by the last output's
    assert rs._fused(np.stack([np.arange(32) // 2 + 1, np.arange(32) // 2 + 2]))[0] is None
    shared = down.copy()
    shared[:, 16:] -= 1  # the second step's first source is the first step's last
    assert rs._fused(shared)[0] is None
    assert rs._fused(down * 3)[0] is None  # 16 outputs span 96 sources
    assert rs._fused(down - 1)[0] is None  # a padding tap
    spec = gen.Resample(gen.MemoryDesc((1, 1, 2, 56), "f32", "nchw"),
                        gen.MemoryDesc((1, 1, 1, 28), "f32", "nchw"), alg="linear")._plan.spec
    assert "_fused_steps(" in codegen.render_kernel(dataclasses.replace(spec, isa="avx512"))


def test_rows_all_in_16_wide_steps_go_in_pairs():
    """The `pairs` field (plain rows, two per row step on avx512): where every output of a
    row takes a 16-wide step, not where a row has a tail or 16 outputs span more sources."""
    def pairs(dims, sp):
        return plan_field(np.zeros(dims, np.float32), sp, "nchw", "pairs")
    assert pairs((1, 3, 3, 32), (5, 64)) == pairs((1, 2, 3, 64), (4, 112)) == 1
    assert pairs((1, 2, 3, 48), (5, 100)) == 0  # a tail of 4
    assert pairs((2, 8, 56, 56), (28, 28)) == 0  # 2x down: 16 outputs read 32 sources


# Backward into plain rows whose outputs all take 16-wide steps, streamed: 2x down's one tap
# per diff_src element (not in pairs: those steps read two taps), 2x up's two
PAIRS_BACKWARD = [((1, 3, 8, 64), (4, 32)), ((2, 2, 4, 32), (8, 64)), ((1, 2, 6, 48), (3, 24))]
PAIRS_BACKWARD_SCRIPT = r"""
import json, sys, numpy as np, gen
from gen import plan
plan.STREAM_BYTES = 0
out = []
for dims, sp in json.loads(sys.argv[1]):
    dy = np.random.default_rng(dims[-1]).standard_normal(dims[:2] + sp).astype(np.float32)
    prim = gen.ResampleBackward(gen.MemoryDesc(dims[:2] + sp, "f32", "nchw"),
                                gen.MemoryDesc(dims, "f32", "nchw"), alg="linear")
    for threads in (1, 2):
        y = gen.Memory(prim.dst_desc)
        y.data[:] = 0x7f
        prim(gen.Memory.from_array(dy, format="nchw"), y, threads=threads)
        fields = prim._plan.tables.fields
        out.append([fields["taps2"], fields["pairs"], fields["stream"], bytes(y.data).hex()])
print(json.dumps(out))
"""


@pytest.mark.parametrize("tier", [t for t in registry.supported() if t != "scalar"])
def test_backward_rows_of_16_wide_steps(tier):
    got = iter(on_tier(tier, PAIRS_BACKWARD_SCRIPT, PAIRS_BACKWARD))
    for dims, sp in PAIRS_BACKWARD:
        dy = np.random.default_rng(dims[-1]).standard_normal(tuple(dims[:2]) + sp)
        dy = dy.astype(np.float32)
        for _ in (1, 2):
            taps, pairs, stream, raw = next(got)
            assert stream and (pairs == (taps == 2 and tier == "avx512")), (dims, taps, pairs)
            y = np.frombuffer(bytes.fromhex(raw), np.float32).reshape(dims)
            scale = rr.backward_abs(dy, dims[2:], "linear") + 1e-30
            assert np.all(np.abs(y - rr.backward(dy, dims[2:], "linear")) <= 1e-6 * scale), \
                (tier, dims)


@pytest.mark.parametrize("tier", registry.supported())
def test_plain_rows_give_the_channel_runs_bits(tier):
    """A plain layout's rows give the bits of the channels-last kernel (the same sums in the
    same order, other loops), at 1 and 2 threads, with plain and streaming stores (rows in
    pairs where `pairs` says so); and the reference's values."""
    got = iter(on_tier(tier, ROWS_SCRIPT, ROWS))
    for dims, sp in ROWS:
        x = (np.random.default_rng(len(dims) + dims[-1]).standard_normal(dims) * 4)
        x = x.astype(np.float32)
        for dt in ("f32", "bf16"):
            runs = [next(got) for _ in range(8)]
            assert len({raw for _, _, raw in runs}) == 1, (tier, dims, sp, dt)
            xs = x.astype(ml_dtypes.bfloat16).astype(np.float32) if dt == "bf16" else x
            y = np.frombuffer(bytes.fromhex(runs[0][2]), np.float32).reshape(dims[:2] + sp)
            tol = 2.0 ** -8 if dt == "bf16" else 1e-6  # bf16: the result's rounding
            scale = rr.forward_abs(xs, sp, "linear") + 1e-30
            assert np.all(np.abs(y - rr.forward(xs, sp, "linear")) <= tol * scale), (tier, dims)


# A plan's kernel as planned and with fields of its bound struct forced (a general path), at
# 1 and 2 threads, in a process on one tier: per case (dims, out spatial, format, dtype, alg,
# backward, input values), the plan's fields `names`, the four results' bytes, and the last
# one's values
FORCED_SCRIPT = r"""
import json, sys, numpy as np, gen
with open(json.loads(sys.argv[1])) as f:
    cases, forced, names = json.load(f)
out = []
for dims, sp, fmt, dt, alg, backward, x in cases:
    small, big = gen.MemoryDesc(dims, dt, fmt), gen.MemoryDesc(dims[:2] + sp, dt, fmt)
    prim = (gen.ResampleBackward(big, small, alg=alg) if backward
            else gen.Resample(small, big, alg=alg))
    src = gen.Memory.from_array(np.array(x, np.float32), format=fmt, dtype=dt)
    fields, r = prim._plan.tables.fields, prim._plan._r
    listed = lambda v: [int(e) for e in v.values()] if isinstance(v, dict) else int(v)
    planned = {k: listed(fields[k]) for k in forced}
    raw = []
    for threads in (1, 2):
        for values in (planned, forced):
            for k, v in values.items():
                if isinstance(v, list):
                    for i, e in enumerate(v):
                        getattr(r, k)[i] = e
                else:
                    setattr(r, k, v)
            dst = gen.Memory(small if backward else big)
            prim(src, dst, threads=threads)
            raw.append(bytes(dst.data).hex())
    out.append([[listed(fields[k]) for k in names], raw,
                dst.to_array().astype(np.float32).tolist()])
print(json.dumps(out))
"""


def forced_runs(tier, cases, forced, names, folder):
    """FORCED_SCRIPT's output for cases (dims, out spatial, format, dtype, alg, backward, x),
    handed over in a file in `folder` (the inputs pass the limit of a command line)."""
    path = folder / "cases.json"
    path.write_text(json.dumps([[c[:6] + (np.asarray(c[6]).tolist(),) for c in cases], forced,
                                names]))
    return on_tier(tier, FORCED_SCRIPT, str(path))


def check_reference(y, x, case):
    """y within the API's rounding of the float64 reference from x (f32 values of the input)."""
    dims, sp, _, dt, alg, backward = case[:6]
    if backward:
        want, scale = rr.backward(x, dims[2:], alg), rr.backward_abs(x, dims[2:], alg)
    else:
        want, scale = rr.forward(x, sp, alg), rr.forward_abs(x, sp, alg)
    tol = 2.0 ** -8 if dt == "bf16" else 1e-6  # bf16: the result's rounding
    assert np.all(np.abs(np.array(y) - want) <= tol * scale + 1e-30), case[:6]


def forced_input(dims, sp, backward, dt="f32"):
    """The input of a FORCED_SCRIPT case: normal values times 4, in dt's precision."""
    x = np.random.default_rng(dims[-1]).standard_normal(dims[:2] + sp if backward else dims)
    x = (x * 4).astype(np.float32)
    return x.astype(ml_dtypes.bfloat16).astype(np.float32) if dt == "bf16" else x


# Taps along axes 0 and 1 in counts every output shares (forward: 1 or 2 per axis), taken by
# loops of constant counts, against the general loop (ntaps 0): 3-D (2, 2), 2-D (1, 2) with a
# shrinking axis, a 3-D axis 0 of one output position (nearest's, backward's counts vary)
NTAPS = [((1, 3, 5, 6, 7), (10, 12, 14), "ncdhw", "f32", "linear", False, [2, 2]),
         ((2, 19, 9, 11), (4, 22), "nhwc", "f32", "linear", False, [1, 2]),
         ((1, 16, 6, 5, 9), (1, 9, 4), "nCdhw16c", "bf16", "linear", False, [2, 2]),
         ((1, 4, 3, 8, 6), (3, 5, 12), "ncdhw", "f32", "nearest", True, [1, 0]),
         ((2, 3, 7, 9), (14, 18), "nchw", "f32", "linear", True, [1, 0])]


@pytest.mark.parametrize("tier", registry.supported())
def test_taps_in_constant_counts_give_the_loops_bits(tier, tmp_path):
    cases = [c[:6] + (forced_input(c[0], c[1], c[5], c[3]),) for c in NTAPS]
    got = forced_runs(tier, cases, {"ntaps": [0, 0]}, ["ntaps"], tmp_path)
    for case, ntaps, ([counts], raw, y) in zip(cases, (c[6] for c in NTAPS), got):
        assert counts == ntaps, case[:6]
        assert len(set(raw)) == 1, case[:6]
        check_reference(y, case[6], case)


# One tap along the last axis (backward of down-sampling by 2 or more): direct wherever the
# runs hold 8 channels or more. Linear and nearest, NHWC, nChw16c, 1-D nwc; 2 taps along axis 1
# (5 from 3) or 1; runs of 12 channels (a tail of 4 on every tier)
ONE_TAP = [((2, 64, 5, 8), (3, 4), "nhwc", "linear"), ((2, 64, 6, 8), (3, 4), "nhwc", "nearest"),
           ((3, 32, 5, 9), (2, 4), "nChw16c", "nearest"), ((2, 24, 11), (5,), "nwc", "linear"),
           ((1, 16, 4, 12), (2, 4), "nhwc", "nearest"), ((2, 12, 6, 8), (3, 4), "nhwc", "linear")]


@pytest.mark.parametrize("tier", registry.supported())
def test_one_tap_direct_gives_the_buffers_bits(tier, tmp_path):
    """Where the last axis takes one tap, each output comes straight from the source (NHWC 2x
    down backward 1.2x faster in cache) with the buffer's bits, signed zeros included, at 1
    and 2 threads; and the reference's values. (The plans say direct on every tier; the
    scalar kernel has no direct path, so there both runs take the buffer.)"""
    cases = []
    for dims, sp, fmt, alg in ONE_TAP:
        x = forced_input(dims, sp, True)
        x.flat[::7] = -0.0  # signed zeros take the same path
        x.flat[3::13] = -2.0 ** -149  # and products that round to -0 (0.5 times this)
        cases.append((dims, sp, fmt, "f32", alg, True, x))
    got = forced_runs(tier, cases, {"direct": 0, "group": 1}, ["taps2", "direct"], tmp_path)
    for case, (flags, raw, y) in zip(cases, got):
        assert flags == [1, 1], case[:6]
        assert len(set(raw)) == 1, case[:6]
        check_reference(y, case[6], case)


# Backward of down-sampling by a whole factor: a row of axis 1 whose taps are the row before's
# (`twins`) is stored by that row's step, the item skipped; against every row its own step
# (twins 0), at 1 and 2 threads (30 items: a thread's share ends inside a pair). NCHW 2x and
# 4x down (rows of zeros between pairs), NCDHW 2x down; a 2x up backward, whose rows differ
TWINS = [((1, 3, 10, 24), (5, 12), "nchw", "f32", "linear", True, 1),
         ((2, 2, 12, 16), (3, 4), "nchw", "f32", "linear", True, 1),
         ((1, 2, 4, 6, 16), (2, 3, 8), "ncdhw", "f32", "linear", True, 1),
         ((1, 3, 7, 9), (14, 18), "nchw", "f32", "linear", True, 0)]


@pytest.mark.parametrize("tier", registry.supported())
def test_twin_rows_give_the_rows_bits(tier, tmp_path):
    cases = [c[:6] + (forced_input(c[0], c[1], c[5], c[3]),) for c in TWINS]
    got = forced_runs(tier, cases, {"twins": 0}, ["twins", "rows"], tmp_path)
    for case, twins, ([flag, rows], raw, y) in zip(cases, (c[6] for c in TWINS), got):
        assert (flag, rows) == (twins, 1), case[:6]
        assert len(set(raw)) == 1, case[:6]
        check_reference(y, case[6], case)


# Rows whose steps of 16 outputs take two taps within 32 sources of their own (2x down
# forward, nearest 2x up backward), with 1, 2 and 4 taps along the other axes, and a last
# step of 4, 8 or 12 outputs whose window runs past the row (masked loads); rows of whole
# steps, and of a last step of 8 (streamed, forced, as whole vectors)
FUSED = [((2, 3, 6, 56), (3, 28), "nchw", "f32", "linear", False),
         ((2, 3, 3, 20), (6, 40), "nchw", "f32", "nearest", True),
         ((1, 2, 4, 6, 48), (2, 3, 24), "ncdhw", "f32", "linear", False),
         ((3, 2, 40), (20,), "ncw", "f32", "linear", False),
         ((1, 2, 2, 24), (4, 48), "nchw", "f32", "nearest", True),
         ((2, 2, 4, 64), (2, 32), "nchw", "f32", "linear", False)]


@pytest.mark.parametrize("tier", registry.supported())
def test_steps_straight_from_the_source_give_the_buffers_bits(tier, tmp_path):
    """Rows whose steps read sources no other step reads take them straight from the source
    lines (avx512: resample.c.j2 _fused), with the bits of the buffer R's path (fused 0) and
    with streaming stores, at 1 and 2 threads; and the reference's values. (The plans say fused on every tier; tiers
    without 512-bit floats take the buffer in both runs.)"""
    cases = [c + (forced_input(c[0], c[1], c[5]),) for c in FUSED]
    for forced in ({"fused": 0}, {"stream": plan.ANY_THREADS}):
        got = forced_runs(tier, cases, forced, ["fused", "taps2"], tmp_path)
        for case, (flags, raw, y) in zip(cases, got):
            assert flags == [1, 2], case[:6]
            assert len(set(raw)) == 1, (forced, case[:6])
            check_reference(y, case[6], case)


FMA_CHECK = r"""
#include <stdio.h>
static uint64_t state = 88172645463325252ull;
static uint32_t next(void) { state ^= state << 13; state ^= state >> 7; state ^= state << 17;
                             return (uint32_t)state; }
static float of(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
int main(void) {
    long bad = 0;
    for (long i = 0; i < 4000000; ++i) {
        /* any bits; terms that nearly cancel; short mantissas; subnormals; products on a
         * float midpoint with a tiny addend (where rounding twice goes the wrong way) */
        const uint32_t keep[5] = {0xffffffffu, 0x807fffffu, 0x80fff000u, 0x80ffffffu, 0x807ff800u};
        const uint32_t set[5] = {0, 0x3f000000u, 0x3f000000u, 0x1f000000u, 0x3f800000u};
        const int m = (int)(i % 5);
        const float a = of((next() & keep[m]) | set[m]), b = of((next() & keep[m]) | set[m]);
        float c = of(next());
        if (m == 1) { float p = -a * b; uint32_t u; memcpy(&u, &p, 4); c = of(u ^ (next() & 0xff)); }
        if (m == 3) c = of(next() & 0x80ffffffu);
        if (m == 4) c = of((next() & 0x807fffffu) | 0x10000000u);  /* about 2^-95 */
        const float want = fmaf(a, b, c), got = gen_fmaf(a, b, c);
        bad += memcmp(&want, &got, 4) != 0 && !(isnan(want) && isnan(got));
    }
    printf("%ld\n", bad);
    return 0;
}
"""


def test_the_scalar_fma_rounds_once(tmp_path):
    """gen_fmaf without FMA hardware (the scalar tier's, compiled without -mfma) against the
    C library's fmaf: the same bits for 4 million triples, cancellations, sums on a rounding
    midpoint and subnormals among them (a double sum rounded twice would differ there)."""
    from gen import codegen
    src = tmp_path / "fma.c"
    src.write_text(codegen.render_common("scalar") + FMA_CHECK)
    exe = tmp_path / "fma"
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-std=c99", str(src), "-o", str(exe),
                    "-lm"], check=True, capture_output=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == "0\n"


@pytest.mark.parametrize("fmt,dims,spatial", [("nCw8c", (2, 9, 2), (2,)),
                                              ("nChw8c", (3, 17, 26, 58), (39, 19)),
                                              ("nChw16c", (2, 19, 7, 9), (11, 4))])
@pytest.mark.parametrize("backward", [False, True])
def test_a_nan_in_a_last_channel_block_stays_in_its_image(fmt, dims, spatial, backward):
    """A last channel block of fewer channels than a chunk put its buffer lines over the
    next chunk's line of zeros, which padding taps read with weight 0: a NaN there reached
    other images and channels (0 * NaN), by thread count. Each image's result depends on its
    own source alone."""
    src_dims = dims[:2] + spatial if backward else dims
    x = np.random.default_rng(len(dims)).standard_normal(src_dims).astype(np.float32)
    x[0, -1, ...] = np.nan  # the first image's last channel: its last block
    mem = gen.Memory.from_array(x, format=fmt)
    for threads in (1, 2, 3):
        if backward:
            y = gen.resample_backward(mem, alg="linear", in_spatial=dims[2:], threads=threads)
        else:
            y = gen.resample(mem, alg="linear", out_spatial=spatial, threads=threads)
        y = y.to_array()
        assert np.isfinite(y[1:]).all() and np.isfinite(y[0, :-1]).all(), (threads, fmt)
        clean = x.copy()
        clean[0] = 0.0
        want = (gen.resample_backward(gen.Memory.from_array(clean, format=fmt), alg="linear",
                                      in_spatial=dims[2:]) if backward else
                gen.resample(gen.Memory.from_array(clean, format=fmt), alg="linear",
                             out_spatial=spatial)).to_array()
        assert np.array_equal(y[1:], want[1:]), (threads, fmt)


@pytest.mark.parametrize("fmt,dims,out_spatial,streams", [
    ("nchw", (2, 4, 6, 6), (12, 16), True), ("nchw", (2, 4, 6, 6), (12, 12), False),
    ("nhwc", (2, 16, 6, 6), (12, 12), True), ("nhwc", (2, 20, 6, 6), (12, 12), False),
    ("nChw8c", (2, 24, 6, 6), (12, 12), True), ("nChw16c", (2, 20, 6, 6), (12, 12), False)])
def test_linear_streams_only_whole_aligned_vectors(fmt, dims, out_spatial, streams, cache_size,
                                                   monkeypatch):
    """Linear kernels stream only where every store is 8 floats at a multiple of 32 bytes:
    rows of 12 floats, runs of 20 channels, or the last block's 4 of 20, would store their
    tails plainly into lines that also take streamed vectors (resample._whole_vectors); rows
    and runs of multiples of 8 stream. Results as the reference's."""
    monkeypatch.setattr(plan, "STREAM_BYTES", 0)
    cache_size(1 << 10)
    x = np.random.default_rng(9).standard_normal(dims).astype(np.float32)
    assert (plan_field(x, out_spatial, fmt, "stream") > 0) == streams
    y = gen.resample(gen.Memory.from_array(x, format=fmt), alg="linear", out_spatial=out_spatial)
    want = rr.forward(x, out_spatial, "linear")
    scale = rr.forward_abs(x, out_spatial, "linear") + 1e-30
    assert np.all(np.abs(y.to_array() - want) <= 1e-6 * scale)
