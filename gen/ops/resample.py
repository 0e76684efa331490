"""Resampling (API.md "Resampling"): nearest and linear, 1D/2D/3D, forward and backward.

Per spatial axis the taps of every output coordinate (source index and weight) are computed
once per problem with exact integer arithmetic on the position
`pos = ((2o + 1) * in - out) / (2 * out)`, so no tie is decided by float rounding. Nearest
forward copies bytes; the weighted kernel (linear, and every backward op) is separable, see
templates/resample.c.j2. The backward op is the exact adjoint: the same kernel with each
axis' taps transposed (per diff_src coordinate, every diff_dst coordinate that read it), so
it needs no atomics and every thread count gives the same bits.
"""
from __future__ import annotations

import functools
import itertools
import math
import numbers
import time
from dataclasses import dataclass

import numpy as np

from .. import codegen, dtypes, jit, plan, registry, runtime, space, wisdom
from ..errors import Error, SetOnce, checked
from ..layout import LETTERS, MemoryDesc
from ..memory import Memory, Operand, check_call, new_array, rank_of
from ..problem import Layout
from .reorder import run_reorder

ALGS = ("nearest", "linear")
# The weighted kernel's buffer of combined source lines: floats per segment (fits L1), and
# channels per chunk of a run.
BUFFER = 1 << 13
CHANNEL_CHUNK = 256
# Channels per run from which a last axis that shrinks is computed straight from the source
# even in cache (see _Plan: r->direct).
DIRECT_RUNS = 32
# Bytes of source lines and destination row that the outer positions of one direct work item
# may take together (see _Plan: group).
GROUP_BYTES = 128 << 10
# An item's source lines (bytes) up to which those of items ahead are prefetched: NHWC 2x up
# backward's 112 KB (4 lines of 28) gained 1-10 %, NDHWC's 64 KB (16 lines) took 1.6x longer,
# nChw16c's items of two outputs (57 KB, 6 lines of 7 KB read) 1.1-1.3x longer (Zen3).
PREFETCH_BYTES = 32 << 10
# The most threads that stream forward into a larger destination (2x up): at 2, plain stores
# measured faster on a Zen3 VM (alternating processes, 8x64x56x56: linear NHWC 1165-1265 ->
# 630-870 us, nChw16c 2080-2180 -> 910-1040, NDHWC 2x16x16x32x32 786-1340 -> 595-770, nearest
# NHWC 1180-1220 -> 845-900; linear NCHW the same), as on a Zen5 and an earlier Zen4 VM (see
# plan.stream_threads; a later Zen4 VM found streaming 1.2-1.7x faster).
EXPANDING_STREAM_THREADS = 1
# The most threads at which forward into a larger destination streams its channel runs where
# gen counts no last-level cache (plan.llc_bytes() 0: Intel): none. There plain stores, still
# on the direct path, were faster at 1 thread (an Intel Xeon VM with AVX-512 and 480 MiB of L3,
# alternating processes, 2x up: linear NHWC 8x64x56x56 1390-1465 -> 1235-1310 us, nearest NHWC
# 1290-1365 -> 1185-1250, linear nChw16c 1400-1495 -> 1310-1430, NDHWC 2x16x16x32x32 about 3 %
# less; through the buffer, plainly, no faster), while rows kept streaming (NCDHW 1.25x, NCHW
# 1.05x faster so).
EXPANDING_RUNS_UNCOUNTED_STREAM_THREADS = 0
# And its rows (a channel each) there: at any thread count. At 2 threads streaming was faster
# on that Intel VM (alternating processes, 6 rounds, 2x up: linear NCDHW 2x16x16x32x32 600-690
# -> 480-515 us, linear NCHW 8x64x56x56 690-795 -> 655-725; nearest NCHW within 3 %).
EXPANDING_ROWS_UNCOUNTED_STREAM_THREADS = plan.ANY_THREADS
# Two outputs of axis 1 per item (see _Plan: span) where the combined taps are this few and
# one output's source line this long at least (forward, backward).
SPAN_TAPS = 4
SPAN_LINE_BYTES = 12 << 10
SPAN_LINE_BYTES_BACKWARD = 6 << 10
# Outputs of the last axis from which a specialised module renders 16-wide row steps
# (see Tables.row_steps)
WIDE_ROW = 64
# The most 8-wide steps of a row that a specialised module unrolls whole (Tables.row_steps)
ROW_UNROLL = 16
# An output size past any descriptor's (floor(in * factor) of a huge factor)
MAX_SIZE = 1 << 62
# Channels-last by rank: the format "any" picks (runs of channels vectorise).
CHANNELS_LAST = {3: "nwc", 4: "nhwc", 5: "ndhwc"}


def axis_taps(size_in: int, size_out: int, alg: str):
    """Forward taps of one axis: (index, weight) arrays of shape (size_out, taps)."""
    o = np.arange(size_out, dtype=np.int64)
    if alg == "nearest":  # round half away from zero of pos >= -1/2: floor(pos + 1/2)
        index = ((2 * o + 1) * size_in) // (2 * size_out)
        return index[:, None], np.ones((size_out, 1), np.float32)
    num, den = (2 * o + 1) * size_in - size_out, 2 * size_out  # pos = num / den
    i0 = num // den
    frac = (num - i0 * den) / den
    index = np.clip(np.stack([i0, i0 + 1], 1), 0, size_in - 1)
    weight = np.stack([1.0 - frac, frac], 1).astype(np.float32)
    return index, weight


@dataclass
class _Axis:
    """The tables of one spatial axis of a problem, in the kernel's terms."""
    start: np.ndarray  # int64, out + 1: taps of output coordinate o are start[o]..start[o+1]
    src: np.ndarray  # int64 source index per tap
    weight: np.ndarray  # float32 per tap
    out: int


def _forward_axis(size_in, size_out, alg) -> _Axis:
    index, weight = axis_taps(size_in, size_out, alg)
    taps = index.shape[1]
    return _Axis(np.arange(size_out + 1, dtype=np.int64) * taps, index.ravel(),
                 weight.ravel(), size_out)


def _backward_axis(size_in, size_out, alg) -> _Axis:
    """Transposed taps: per input coordinate, the output coordinates that read it."""
    index, weight = axis_taps(size_in, size_out, alg)
    outs = np.repeat(np.arange(size_out, dtype=np.int64), index.shape[1])
    order = np.argsort(index.ravel(), kind="stable")
    ins = index.ravel()[order]
    start = np.searchsorted(ins, np.arange(size_in + 1)).astype(np.int64)
    return _Axis(start, outs[order], weight.ravel()[order], size_in)


@dataclass(frozen=True)
class _Key:
    dims_in: tuple  # dims of the kernel's source
    dims_out: tuple
    src: Layout
    dst: Layout
    dtype: object
    alg: str
    backward: bool


class Tables:
    """The fields of one gen_resample: scalars, and arrays with their C element type; an
    indexed field (`start[k]`) is a dict. Bound to a cffi struct here, written as C by export."""
    NUMPY = {"int64_t": np.int64, "int32_t": np.int32, "float": np.float32}

    def __init__(self):
        self.fields = {}

    def scalar(self, name, value, index=None):
        self._set(name, int(value), index)

    def array(self, name, ctype, values, index=None):
        self._set(name, (ctype, np.ascontiguousarray(values, self.NUMPY[ctype]).ravel()), index)

    def _set(self, name, value, index):
        if index is None:
            self.fields[name] = value
        else:
            self.fields.setdefault(name, {})[index] = value

    def row_steps(self) -> dict:
        """The weighted kernel's 512-bit row steps a specialised module renders for these
        tables (codegen.render_kernel, templates/resample.c.j2 _rows): 16 outputs at once
        where the tables take them (win16) in rows of WIDE_ROW outputs or more, and 8 from
        two 16-float loads where they take those (a window of 32 sources, wide 2 or 3, or of
        16 for other than two taps). Without the others, gcc folds a row's steps whole: NCHW
        2x down, rows of 28, 197-316 -> 141-199 us at 1 thread, 128-186 -> 84-99 at 2
        (Zen4, alternating processes); in rows of 112 (NCHW 2x up) 16-wide steps were 1.1x
        faster, in rows of 64 (NCDHW 2x up) the same. Same bits: _rows16 computes as the
        8-wide steps do. And `fused` where the tables say so (_fused). `row_unroll`: rows of
        one segment in up to ROW_UNROLL 8-wide steps (AVX2's) unroll whole, their tables'
        loads folded. In cache, 1 thread, Zen3, us: NCDHW 2x up (rows of 8 steps) 47 -> 36,
        NCHW 2x up (14) 30-31 -> 22.6-24.8, its backward (7) 17 -> 12.4, 2x down (4) 6.0 ->
        5.5; unrolled by 16 rather than whole, rows of 8 took 54-64. The nearest kernel's
        tables take only `row_unroll` (its rows whole: NCHW 2x up in cache 25.5-27.3 ->
        15.6-19.9 us)."""
        def table(name):
            return self.fields[name][1] if name in self.fields else np.zeros(0, np.int32)
        win, wide = table("win"), table("wide")
        two = self.fields.get("taps2") == 2
        out = self.fields.get("out", {})
        long = bool(out) and out[max(out)] >= WIDE_ROW  # the last axis's outputs
        steps = -(-out[max(out)] // 8) if out else 0
        rows = bool(self.fields.get("rows")) and self.fields.get("nseg", 1) == 1
        return {"steps16": long and bool((table("win16") > 0).any()),
                "steps32": bool(((win > 0) & ((wide >= 2) | (wide == 1) & (not two))).any()),
                "fused": bool(self.fields.get("fused")),
                "row_unroll": steps if rows and steps <= ROW_UNROLL else 0}

    def entries(self) -> int:
        """Elements of all the arrays."""
        values = [v for f in self.fields.values() for v in (f.values() if isinstance(f, dict)
                                                             else [f])]
        return sum(v[1].size for v in values if isinstance(v, tuple))

    def bind(self, ffi):
        """(the cffi struct, the arrays it points to: keep them alive)."""
        r, keep = ffi.new("gen_resample *"), []

        def value(v):
            if isinstance(v, tuple):
                keep.append(v[1])
                return ffi.cast(f"const {v[0]} *", v[1].ctypes.data)
            return v

        for name, v in self.fields.items():
            if isinstance(v, dict):
                for k, item in v.items():
                    getattr(r, name)[k] = value(item)
            else:
                setattr(r, name, value(v))
        return r, keep


def _expanding_stream_threads(rows: bool) -> int:
    """The most threads at which forward into a larger destination streams: where gen counts
    a last-level cache, EXPANDING_STREAM_THREADS; else (plan.llc_bytes() 0) rows (a channel
    each) EXPANDING_ROWS_UNCOUNTED_STREAM_THREADS, channel runs
    EXPANDING_RUNS_UNCOUNTED_STREAM_THREADS."""
    if plan.llc_bytes():
        return EXPANDING_STREAM_THREADS
    return EXPANDING_ROWS_UNCOUNTED_STREAM_THREADS if rows else \
        EXPANDING_RUNS_UNCOUNTED_STREAM_THREADS


class _Plan:
    """One resampling problem bound to its kernel: the C tables and the dst padding.
    `choice`: measured wisdom.Choice (streaming stores or not, and with them the direct path
    or the buffer's for channel runs; the source lines' prefetches: gen.tune) instead of the
    guess."""

    def __init__(self, key: _Key, dst_nbytes: int, tier=None, choice=None):
        self.problem, self.dst_nbytes, self.choice = key, dst_nbytes, choice
        self.tier = tier or registry.isa()
        esize = dtypes.itemsize(key.dtype)
        nsp = len(key.dims_in) - 2
        fwd_in, fwd_out = (key.dims_out, key.dims_in) if key.backward else \
            (key.dims_in, key.dims_out)
        make = _backward_axis if key.backward else _forward_axis
        axes = [make(fwd_in[2 + k], fwd_out[2 + k], key.alg) for k in range(nsp)]
        axes = [_Axis(np.array([0, 1]), np.zeros(1, np.int64), np.ones(1, np.float32), 1)
                ] * (3 - nsp) + axes
        spatial = [None] * (3 - nsp) + list(range(2, 2 + nsp))
        nearest = key.alg == "nearest" and not key.backward
        self.spec = spec = space.KernelSpec("resample", "nearest" if nearest else "linear",
                                            esize, False, self.tier,
                                            *(() if nearest else (key.dtype, key.dtype)))
        self.kernel = spec.name
        self.tables = tb = Tables()
        doffs = []  # the outputs' byte offsets in dst, per axis
        for k, (ax, axis) in enumerate(zip(axes, spatial)):
            tb.scalar("out", ax.out, k)
            tb.array("start", "int64_t", ax.start, k)
            tb.array("w", "float", ax.weight, k)
            src_off = _offsets(key.src, axis, ax.src) * esize
            dst_off = _offsets(key.dst, axis, np.arange(ax.out)) * esize
            tb.array("soff", "int64_t", src_off, k)
            tb.array("doff", "int64_t", dst_off, k)
            doffs.append(dst_off)
            if k < 2:  # the kernel's loops of constant counts (_taps) take 1 or 2
                counts = np.diff(ax.start)
                tb.scalar("ntaps", counts[0] if counts[0] in (1, 2) and np.all(counts == counts[0])
                          else 0, k)
            if k == 1:  # rows one line each store such an output with the one before (_lines)
                tb.scalar("twins", _twins(ax.start, src_off, ax.weight))
        outer_src, outer_dst, runs = _outer(key.dims_out, key.src, key.dst)
        tb.scalar("nouter", runs.size)
        tb.array("src_outer", "int64_t", outer_src * esize)
        tb.array("dst_outer", "int64_t", outer_dst * esize)
        tb.array("run", "int64_t", runs)
        rows = bool(np.all(runs == 1)) and np.array_equal(dst_off,
                                                          np.arange(axes[2].out) * esize)
        rows = rows and (not nearest or np.abs(src_off).max(initial=0) < 2**31)
        tb.scalar("rows", rows)
        # streaming stores (nearest forward, else f32 only), at any thread count
        # (plan.stream_threads: 2x up at 2 threads, Zen5 and Zen4 disagree), where plan.streams
        # says so of the call's bytes, source and destination, or of a copy of its destination
        # (2x up: 25.7 MB from 6.4 1.3-2x faster streaming at 1 thread), or for backward, of a
        # copy of its source: all of diff_dst is read, unlike a forward call that skips source
        # lines, and reading it evicts the destination from the cache anyway (2x up backward,
        # 6.4 MB from 25.7: nearest and linear, NCHW, NHWC and nChw16c, 1.1-1.2x faster
        # streaming at 1 thread, at 2 as fast or up to 1.2x faster; Zen4, alternating runs)
        stream, in_memory = 0, False
        if nearest or dtypes.name(key.dtype) == "f32":
            src_nbytes = math.prod(key.dims_in) * esize
            moved = max(src_nbytes + math.prod(key.dims_out) * esize, 2 * dst_nbytes,
                        2 * src_nbytes if key.backward else 0)
            stream = plan.stream_threads(dst_nbytes, traffic=moved)
            # a destination in memory (the direct path's condition below)
            in_memory = stream > 0
            if not key.backward and math.prod(key.dims_out) > math.prod(key.dims_in):
                stream = min(stream, _expanding_stream_threads(rows))
            if choice is not None and choice.stream is not None:  # at one thread count, for all
                stream = plan.ANY_THREADS if choice.stream else 0
                in_memory = stream > 0  # streaming on the direct path, or plainly via the buffer
        # linear kernels store plainly unless all their stores are whole aligned vectors
        # (_whole_vectors)
        if not nearest and not _whole_vectors(outer_dst * esize, doffs, runs * esize,
                                              axes[2].out * esize if rows else None):
            stream = 0
        tb.scalar("stream", stream)
        if nearest and rows:
            tb.array("row_off", "int32_t", _pad8(src_off))
            size = key.dims_in[-1]
            row = _offsets(key.src, len(key.dims_in) - 1, np.arange(size))
            if np.array_equal(row, np.arange(size)):  # a contiguous source row: windows
                win, wide, perm = _windows(_pad8(axes[2].src[None, :]), 0, size)
                tb.array("win", "int32_t", np.where(win >= 0, win * esize, -1))
                tb.array("wide", "int32_t", wide)
                tb.array("perm", "int32_t", perm)
            else:
                tb.array("win", "int32_t", np.full(_pad8(src_off).size, -1))
        if not nearest:
            self._last_axis(tb, axes[2], [ax.start for ax in axes[:2]], key, esize,
                            int(runs.max()))
            # one or two taps along the last axis, at most two along the others (1-D and 2-D),
            # f32, channel runs of a vector or more, a destination in memory: each output straight
            # from the source (measured 10 % faster there, 20 % slower in cache; trilinear's 4
            # taps: 2.5x slower); in cache too where the last axis shrinks and the runs hold
            # DIRECT_RUNS channels or more, so that the buffer's pass costs more than reading
            # the outputs' taps again (NHWC 2x down, 64 channels 86 -> 78 us, 32: 45 -> 40;
            # 16, and nChw16c's blocks: 5-10 % slower); and one tap along the last axis
            # anywhere (backward of 2x down, in cache: NHWC and nChw16c, 16 or 64 channels,
            # 1.06-1.22x faster at 1 thread; at 2, NHWC 1.1-1.15x; from 25.7 MB, 1.05-1.7x)
            shrinks = key.dims_out[-1] < key.dims_in[-1] and int(runs.min()) >= DIRECT_RUNS
            tb.scalar("direct", tb.fields["taps2"] <= 2 and tb.fields["kmax"] <= 2
                      and dtypes.name(key.dtype) == "f32" and int(runs.min()) >= 8
                      and (in_memory or shrinks or tb.fields["taps2"] == 1))
        # a work item of the direct path takes up to direct_group outer positions whose runs
        # have one length (a blocked layout's channel blocks): they share the table reads. Their
        # source lines and destination rows stay within GROUP_BYTES: plain stores to NHWC 2x
        # up (57 KB per image) took 12 % less time at 2 threads in items of 2 images than of 8
        # (nChw16c's blocks, 14 KB: 8); streaming stores took the same
        group = 1
        if not nearest and tb.fields["direct"] and np.all(runs == runs[0]):
            line = (tb.fields["kmax"] * key.dims_in[-1] + key.dims_out[-1]) * int(runs[0])
            group = max(g for g in range(1, codegen.CHUNKS["direct_group"] + 1)
                        if runs.size % g == 0 and (g == 1 or g * line * esize <= GROUP_BYTES))
        tb.scalar("group", group)
        run = int(runs.max())
        # two outputs of axis 1 per item on the buffer path, whose sources overlap (2x up
        # backward: 4 taps, 2 shared), with SPAN_TAPS taps at most of source lines of
        # SPAN_LINE_BYTES (backward: _BACKWARD) or more: combined together (_combine2), each
        # line they share is read from memory once, while it is in L1. Zen4, alternating A/B,
        # 1 / 2 threads: NHWC 2x up backward with 64 channels (lines of 28 KB) 1.18 / 1.06x
        # faster, 128 channels 1.12x, 32 channels 1.05x at 1 thread; since the combine's steps
        # of 4 taps are unrolled, 7 KB lines too (nChw16c's blocks 1.1-1.2 / 1.2x, NHWC with 16
        # channels 1.1 / 1.08x), but not forward's (NDHWC 2x up, 6 and 8 KB: 1.0-1.17x slower,
        # 2 KB: 1.6x); 16 taps took longer (NDHWC 2x up backward, 4 and 16 KB: 1.2x)
        span = 1
        if not nearest and not tb.fields["direct"] and tb.fields["kmax"] <= SPAN_TAPS:
            seg = tb.fields["seg"][1]
            line = max(hi - lo for lo, hi in zip(seg[2::4], seg[3::4])) * run * esize
            least = SPAN_LINE_BYTES_BACKWARD if key.backward else SPAN_LINE_BYTES
            span = 2 if (tb.fields["flat"] == run and tb.fields["cw"] >= run
                         and not (rows and tb.fields["nseg"] == 1)
                         and line >= least and _overlap(axes[1])) else 1
        tb.scalar("span", span)
        # items whose source lines are contiguous (channel runs and the last axis, one segment)
        # and hold PREFETCH_BYTES at most (the lines of all its span outputs), read from a
        # source of half the last-level cache or more, prefetch the lines of items ahead (Zen4,
        # 2x up backward, 25.7 MB of diff_dst: NCHW 3-4x faster, nChw16c's items of one output
        # 1.25x; sources that stay in the cache took 5-10 % longer).
        # Not where gen counts no last-level cache (llc_bytes() 0): there, on Sapphire Rapids,
        # the hardware fetched those lines, and the prefetches only cost time (1 thread, one
        # process each way: nChw16c 2x up backward 1.33x, NCDHW 2x up 1.15-1.25x, its backward
        # 1.07-1.1x, NCHW 2x up 1.03-1.06x; NHWC and NDHWC 2x up backward the same)
        lines = (not nearest and tb.fields["flat"] == run and tb.fields["nseg"] == 1
                 and tb.fields["cw"] >= run
                 and span * tb.fields["kmax"] * key.dims_in[-1] * run * esize <= PREFETCH_BYTES)
        tb.scalar("prefetch", lines and plan.prefetches(math.prod(key.dims_in) * esize, choice))
        # groups of outer positions x rows of the last axis: the work, per thread of a row
        # at least
        self.items = runs.size // group * axes[0].out * -(-axes[1].out // span)
        self._zero = _padding_plan(key.dims_out, key.dst, esize, dst_nbytes)
        if tier is None:  # bound to this process' kernels
            mod = registry.module()
            self._fn = mod.ffi.addressof(mod.lib, spec.name)
            self._run = mod.lib.gen_resample_run
            self._r, self._keep = tb.bind(mod.ffi)
            self._null = mod.ffi.NULL
            self.jit = jit.Runs((math.prod(key.dims_in) + math.prod(key.dims_out)) * esize,
                                tb.entries())

    @staticmethod
    def _last_axis(tb, last: _Axis, axes01, key: _Key, esize, run):
        """The weighted kernel's tables of the last axis: dense taps, segments, buffer size."""
        counts = np.diff(last.start)
        taps = int(counts.max())
        slot = np.arange(last.src.size) - np.repeat(last.start[:-1], counts)
        index = np.full((taps, last.out), -1, np.int64)
        weight = np.zeros((taps, last.out), np.float32)
        owner = np.repeat(np.arange(last.out), counts)
        index[slot, owner], weight[slot, owner] = last.src, last.weight
        tb.scalar("taps2", taps)
        tb.array("w2", "float", _pad8(weight))
        tb.scalar("pitch", _pad8(weight).shape[1])
        axis = len(key.dims_in) - 1
        soff2 = _offsets(key.src, axis, np.arange(key.dims_in[axis])) * esize
        tb.array("soff2", "int64_t", soff2)
        steps = np.diff(soff2)
        tb.scalar("flat", steps[0] // esize if steps.size and np.all(steps == steps[0]) else 0)
        cw = min(run, CHANNEL_CHUNK)
        tb.scalar("cw", cw)
        seg = _segments(index, cw)
        tb.scalar("nseg", len(seg) // 4)
        tb.array("seg", "int64_t", seg)
        tb.scalar("rsize", max((hi - lo) * cw for hi, lo in zip(seg[3::4], seg[2::4])) + cw)
        # idx2: the line of R (from 1) within its segment; padding taps read line 0 (zeros)
        line = np.zeros_like(index)
        for begin, end, lo, _ in zip(*(seg[i::4] for i in range(4))):
            part = index[:, begin:end]
            line[:, begin:end] = np.where(part >= 0, part - lo + 1, 0)
        tb.array("idx2", "int32_t", _pad8(line))
        # windows of 32 R lines: two loads and a permute per tap on avx512, where 8 outputs'
        # taps span 17-32 sources (2x down forward, 2x up backward)
        win, wide, perm = _windows(_pad8(line), 1, None, 32)
        tb.array("win", "int32_t", win)
        tb.array("wide", "int32_t", wide)
        tb.array("perm", "int32_t", perm)
        win16, perm16, span16 = _windows16(_pad8(line))
        tb.array("win16", "int32_t", win16)
        tb.array("perm16", "int32_t", perm16)
        # rows (one line per item) go in pairs where all their outputs take the 16-wide steps
        # from 16 sources, which read two taps (one tap, as backward of 2x down's: _rows'
        # 8-wide steps)
        tb.scalar("pairs", taps == 2 and len(seg) == 4 and last.out % 16 == 0
                  and win16.size > 0 and bool(np.all((win16 > 0) & (span16 <= 16))))
        tb.array("fresh16", "int32_t", _fresh16(win16, perm16, _pad8(weight)))
        # rows whose every step of 16 outputs reads two taps within 32 sources of its own (2x
        # down forward, nearest 2x up backward): their steps straight from the source lines
        fwin, fperm = _fused(line) if (
            taps == 2 and len(seg) == 4 and tb.fields["flat"] == 1) else (None, None)
        tb.scalar("fused", fwin is not None)
        tb.array("fwin", "int32_t", fwin if fwin is not None else [0])
        tb.array("fperm", "int32_t", fperm if fwin is not None else [0])
        tb.array("fw", "float", _pad(weight, 16) if fwin is not None else [0])
        tb.scalar("kmax", np.diff(axes01[0]).max() * np.diff(axes01[1]).max())

    def key(self) -> str:
        """The problem as wisdom knows it: tier, problem, destination size."""
        return wisdom.key(self.tier, self.problem, None, self.dst_nbytes)

    def team(self, threads: int) -> int:
        """The threads a call asked for `threads` runs on."""
        return runtime.team(max(1, min(threads, self.items)))

    def run(self, src_addr, dst_addr, threads) -> str:
        """Returns the kernel name of this call."""
        nthr = self.team(threads)
        special = self.jit.special
        if special is not None:
            failed = special[0](src_addr, dst_addr, self._null, nthr)
        else:
            failed = self._run(src_addr, dst_addr, self._r, self._fn, nthr)
            self.jit.ran(self)
        if failed:
            raise Error("resampling could not allocate its line buffer (out of memory)")
        if self._zero is not None:
            self._zero.run(dst_addr, dst_addr, threads)
        return special[1] if special else self.kernel

    def jit_parts(self):
        return [], (self.spec, self.tables)


def _twins(start, soff, weight) -> bool:
    """Whether some output of an axis takes the taps of the one before it: as many, the same
    source offsets and the same weights to the bit (2x down backward's, two by two)."""
    counts = np.diff(start)
    if counts.size < 2:
        return False
    slot = np.arange(soff.size) - np.repeat(start[:-1], counts)
    owner = np.repeat(np.arange(counts.size), counts)
    offs = np.full((counts.size, max(int(counts.max()), 1)), -1, np.int64)
    bits = np.zeros(offs.shape, np.uint32)
    offs[owner, slot], bits[owner, slot] = soff, weight.view(np.uint32)
    same = ((counts[1:] == counts[:-1]) & (counts[1:] > 0) & np.all(offs[1:] == offs[:-1], 1)
            & np.all(bits[1:] == bits[:-1], 1))
    return bool(same.any())


def _segments(index, cw):
    """Outputs of the last axis in segments (steps of 8) whose sources, times `cw` channels,
    fill about BUFFER floats: [begin, end, first source, end source] per segment."""
    out, lo, hi, begin = [], None, None, 0
    for b in range(0, index.shape[1], 8):
        taps = index[:, b:b + 8]
        taps = taps[taps >= 0]
        if not taps.size:  # outputs without taps (backward): zeros, no sources
            continue
        s_lo, s_hi = int(taps.min()), int(taps.max()) + 1
        if lo is not None and (max(hi, s_hi) - min(lo, s_lo)) * cw > BUFFER:
            out += [begin, b, lo, hi]
            lo, begin = None, b
        lo, hi = (s_lo, s_hi) if lo is None else (min(lo, s_lo), max(hi, s_hi))
    return out + [begin, index.shape[1], lo or 0, hi or 0]


def _overlap(axis: _Axis) -> bool:
    """Whether most outputs 2i, 2i + 1 of the axis read a source in common."""
    counts = np.diff(axis.start)
    if axis.out < 2 or not np.all(counts > 0):  # (backward: outputs no input reached)
        return False
    lo = np.minimum.reduceat(axis.src, axis.start[:-1])
    hi = np.maximum.reduceat(axis.src, axis.start[:-1])
    even = np.arange(0, axis.out - 1, 2)
    return bool(np.mean((lo[even + 1] <= hi[even]) & (lo[even] <= hi[even + 1])) >= 0.5)


def _pad8(table):
    """The table's rows (last axis: outputs) run on to a multiple of 8 by repeating their last
    entry: the kernel's last step of 8 reads valid taps, then stores only the real outputs."""
    return _pad(np.atleast_1d(table), 8)


def _windows(index, lowest, size, widest=16):
    """Per step of 8 outputs (at multiples of 8): the first of the 8, 16 or (up to `widest`)
    32 consecutive sources that hold all of the step's taps, or -1 (then the kernel gathers),
    which of them it takes (wide: 0, 1 or 2, or 3 below), and each tap's position in them.
    `lowest`: the first usable index; `size`: sources end there (None: unbounded).
    Indices under `lowest` are padding taps (they read R's zero line). With widest 32 a step
    that has some is windowed over its other taps: wide 3, its padding taps at position -1,
    whose lanes the 32-source permute zeroes (the value the zero line gives: NCHW 2x down
    nearest backward, where every other output has no tap, gathered before)."""
    n = index.shape[1]
    starts = np.arange(0, n, 8)
    pad = index < lowest
    has_pad = np.logical_or.reduceat(pad.any(axis=0), starts)
    only_pad = np.logical_and.reduceat(pad.all(axis=0), starts)  # any window will do
    base = np.minimum.reduceat(np.where(pad, np.iinfo(np.int64).max, index).min(axis=0), starts)
    top = np.maximum.reduceat(np.where(pad, -1, index).max(axis=0), starts)
    base, top = np.where(only_pad, lowest, base), np.where(only_pad, lowest, top)
    span = top - base + 1
    masked = has_pad & (widest >= 32)
    width = np.where(masked | (span > 16), 32, np.where(span <= 8, 8, 16))
    ok = (base >= lowest) & (span <= widest) & (masked | ~has_pad)
    if size is not None:
        ok &= base + width <= size
    win = np.full(n, -1, np.int64)
    wide = np.zeros(n, np.int64)
    win[starts] = np.where(ok, base, -1)
    wide[starts] = np.where(ok, np.where(masked, 3, width // 16), 0)
    perm = np.where(pad, -1, index - base.repeat(8)[:n]) * ok.repeat(8)[:n]
    return win, wide, perm.astype(np.int64)


def _windows16(index):
    """Per whole step of 16 outputs (at multiples of 16): the first of the 32 consecutive
    sources (R lines, from 1) that hold all of the step's taps, or 0 (then two steps of 8);
    each tap's position in them, in a table of index's shape; and the span of each step's
    taps. 32 sources: 2x down, whose 16 outputs read 32 (NCHW 2x down forward, in the
    cache: 8-wide steps from two loads, a permute and a blend per load and tap, before)."""
    taps, n = index.shape
    steps = index[:, :n // 16 * 16].reshape(taps, -1, 16)
    base = steps.min(axis=(0, 2))
    span = steps.max(axis=(0, 2)) - base + 1
    win = np.where((base >= 1) & (span <= 32), base, 0)
    perm = np.zeros_like(index)
    used = (win > 0).repeat(16)
    perm[:, :n // 16 * 16] = (steps - base[None, :, None]).reshape(taps, -1) * used
    return win, perm, span


def _fused(line):
    """Per step of 16 outputs (the last one may be partial): the first of the 32 consecutive
    sources (lines from 1) that hold all of the step's taps, and the taps' positions in them
    (a table of `line`'s rows run on to a multiple of 16); or (None, None) where a step reads
    a padding tap (line 0), spans more than 32 sources, or shares some with the step before
    (then the buffer R combines each source once, and the steps read it)."""
    steps = np.arange(0, line.shape[1], 16)
    base = np.minimum.reduceat(line.min(axis=0), steps)
    top = np.maximum.reduceat(line.max(axis=0), steps)
    if (base < 1).any() or (top - base >= 32).any() or (base[1:] <= top[:-1]).any():
        return None, None
    return base, _pad(line - np.repeat(base, 16)[:line.shape[1]], 16)


def _pad(table, multiple):
    """The table's rows run on to a multiple of `multiple` by repeating their last entry."""
    extra = -table.shape[-1] % multiple
    return np.concatenate([table, np.repeat(table[..., -1:], extra, -1)], -1)


def _fresh16(win16, perm16, weight):
    """Per step of 16 outputs: 0 where its tap positions (perm16) and weights are the previous
    step's and both steps are windowed, else 1 (the kernel loads them again)."""
    steps = win16.size
    pos, wt = (t[:, :steps * 16].reshape(t.shape[0], steps, 16) for t in (perm16, weight))
    same = ((pos[:, 1:] == pos[:, :-1]).all(axis=(0, 2))
            & (wt[:, 1:] == wt[:, :-1]).all(axis=(0, 2)) & (win16[1:] > 0) & (win16[:-1] > 0))
    return np.concatenate([[1], ~same]).astype(np.int32)


def _offsets(layout: Layout, axis, index) -> np.ndarray:
    """Element offsets of the indices of one axis (zeros for a missing spatial axis)."""
    index = np.asarray(index, np.int64)
    if axis is None:
        return np.zeros(index.size, np.int64)
    if layout.table(axis) is not None:
        return np.asarray(layout.table(axis), np.int64)[index]
    return np.asarray(layout.offset(axis, index), np.int64)


def _whole_vectors(outer, doffs, runs, row) -> bool:
    """Whether every store of a linear kernel is a vector of 8 floats at a multiple of 32
    bytes from the destination's start, so that all of them may stream: given the byte
    offsets of the outer positions and of each axis' outputs, the runs' bytes, and `row`, a
    row's bytes where the items are rows (else None), those offsets and the rows' or the
    runs' bytes are multiples of 32. Else the tail of each row or run is stored plainly into
    a line whose other bytes stream, and rows at other offsets all plainly: lines that take
    both kinds were 2-8x slower than plain stores throughout (Zen4, 1 thread: NHWC 2x up of
    20 channels 8x20x112x112 41.5 -> 4.9 ms; NCHW 2x down 64x64x56x56, rows of 28, 13 ->
    3.8 ms)."""
    ends = [doffs[2], runs] if row is None else [row]
    return not any(np.any(np.asarray(x) % 32) for x in [outer, doffs[0], doffs[1], *ends])


def _outer(dims, src: Layout, dst: Layout):
    """Outer positions (n, first channel of a run): offsets on both sides and run lengths.
    A run is the innermost part of the channel axis when its stride is 1 on both sides."""
    channels = dims[1]
    (n_src, s_src), (n_dst, s_dst) = src.parts[1][-1], dst.parts[1][-1]
    block = n_src if (s_src, s_dst) == (1, 1) and n_src == n_dst and not (
        src.table(1) or dst.table(1)) else 1
    firsts = np.arange(0, channels, block)
    runs = np.minimum(block, channels - firsts)
    n = np.arange(dims[0])
    src_n, dst_n = (_offsets(lay, 0, n) for lay in (src, dst))
    src_c, dst_c = (_offsets(lay, 1, firsts) for lay in (src, dst))
    return ((src_n[:, None] + src_c[None, :]).ravel(), (dst_n[:, None] + dst_c[None, :]).ravel(),
            np.tile(runs, dims[0]))


def _padding_plan(dims, dst: Layout, esize, dst_nbytes):
    """The zero fill of a blocked destination's padding (None when it has none)."""
    if tuple(dst.padded) == tuple(dims):
        return None
    return plan.zero_fill(dims, dst, esize, dst_nbytes)


# Bytes of a plan's tables, upper bounds: per coordinate of a spatial axis, source and output
# counted (peak resident memory, with temporaries, per output coordinate: 50-230 for nearest,
# 70-450 for linear, forward and backward, one long axis or two), and per outer position
# (N x C at most: three int64 and temporaries)
TABLE_BYTES_PER_COORDINATE = 512
TABLE_BYTES_PER_OUTER = 64


def planned(key: _Key, dst_nbytes, tier=None, choice=None) -> _Plan:
    """The plan of a problem (`choice`, else the wisdom gen.tune measured for it on this tier,
    else the guess), or gen.Error when its tables cannot be held in memory: refused before
    they are built where they would need more than the memory available (the pages of a large
    allocation are only found missing when touched, and the kernel's out-of-memory killer
    then ends the process), else where building them fails."""
    coordinates = sum(key.dims_in[2:]) + sum(key.dims_out[2:])
    need = (coordinates * TABLE_BYTES_PER_COORDINATE
            + key.dims_out[0] * key.dims_out[1] * TABLE_BYTES_PER_OUTER)
    have = runtime.available_memory()
    too_large = f"resampling {key.dims_in} -> {key.dims_out} is too large to plan"
    if have is not None and need > have:
        raise Error(f"{too_large}: its tables need about {need} bytes, more than the {have} "
                    f"available")
    if choice is None:
        choice = wisdom.lookup(wisdom.key(tier or registry.isa(), key, None, dst_nbytes))
    try:
        return _Plan(key, dst_nbytes, tier=tier, choice=choice)
    except Error:  # a bad setting (GEN_LLC_BYTES), already named
        raise
    except (MemoryError, ValueError) as e:
        raise Error(f"{too_large}: {e}") from None


@functools.lru_cache(maxsize=64)
def _plan_of(key: _Key, dst_nbytes) -> _Plan:
    """planned(), cached: the functional API meets the same problems again."""
    return planned(key, dst_nbytes)


# ---------------------------------------------------------------- validation

def _alg(alg):
    if not isinstance(alg, str) or alg not in ALGS:
        raise Error(f"unknown alg {alg!r}; algs are {', '.join(ALGS)}")
    return alg


def _dtype(dtype):
    name = dtypes.name(dtype)
    if name not in space.RESAMPLE_DTYPES:
        raise Error(f"resampling does not support dtype {name}; it supports "
                    f"{', '.join(space.RESAMPLE_DTYPES)}")
    return dtype


def _rank(dims):
    if not 3 <= len(dims) <= 5:
        raise Error(f"resampling needs rank 3..5 (N, C, 1-3 spatial dims), got rank {len(dims)} "
                    f"(dims {tuple(dims)})")


def _sizes(name, values, nsp):
    try:
        values = tuple(values)
    except TypeError:
        raise Error(f"{name} must be a sequence of {nsp} sizes, got {values!r}") from None
    if len(values) != nsp:
        raise Error(f"{name}={values!r} has {len(values)} entries; the source has {nsp} "
                    f"spatial dims")
    for v in values:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)):
            raise Error(f"{name}={values!r}: sizes must be integers, got {v!r}")
        if v <= 0:
            raise Error(f"{name}={values!r}: sizes must be positive, got {v}")
    return tuple(int(v) for v in values)


def out_spatial_of(spatial_in, out_spatial, factors):
    """The output spatial dims from exactly one of out_spatial and factors."""
    nsp = len(spatial_in)
    if (out_spatial is None) == (factors is None):
        raise Error("give exactly one of out_spatial and factors "
                    f"(got out_spatial={out_spatial!r}, factors={factors!r})")
    if out_spatial is not None:
        return _sizes("out_spatial", out_spatial, nsp)
    try:
        factors = tuple(factors)
        if any(isinstance(f, (bool, np.bool_)) or not isinstance(f, numbers.Real)
               for f in factors):
            raise TypeError
        factors = tuple(float(f) for f in factors)
    except (TypeError, ValueError, OverflowError):
        raise Error(f"factors must be a sequence of {nsp} numbers, got {factors!r}") from None
    if len(factors) != nsp:
        raise Error(f"factors={factors!r} has {len(factors)} entries; the source has {nsp} "
                    f"spatial dims")
    out = []
    for size, f in zip(spatial_in, factors):
        if not math.isfinite(f) or f < 0:
            raise Error(f"factors={factors!r}: a factor must be finite and non-negative, "
                        f"got {f!r}")
        n = math.floor(size * f) if size * f < MAX_SIZE else MAX_SIZE
        if n <= 0:
            raise Error(f"factors={factors!r}: floor({size} * {f!r}) = {n} is an empty output")
        out.append(n)
    return tuple(out)


# ---------------------------------------------------------------- functional API and primitives

def _source(x) -> Operand:
    if rank_of(x) == 0:
        raise Error("resampling needs rank 3..5 (N, C, 1-3 spatial dims), got rank 0")
    src = Operand.of(x)
    _rank(src.dims)
    return src


def _execute(x, src: Operand, out_dims, alg, backward, format, threads, op):
    t0 = time.perf_counter()
    alg = _alg(alg)
    dtype = _dtype(src.dtype)
    MemoryDesc(out_dims, dtype)  # a result too large to address is a gen.Error here
    caller = src  # for GEN_VERBOSE: not the source repacked for format="any"
    if format is not None:
        if not isinstance(format, str):
            raise Error(f"format must be a format tag string, got {format!r}")
        if format == "any":  # channels-last: the kernels vectorise along the channels
            format = CHANNELS_LAST[len(src.dims)]
            if not (isinstance(x, Memory) and _channels_last(x.desc)):
                # repacked as part of this op (no verbose line of its own)
                packed = Memory(MemoryDesc(src.dims, dtype, format))
                run_reorder(src, Operand.of_memory(packed), threads)
                src = Operand.of_memory(packed)
        out = Memory(MemoryDesc(out_dims, dtype, format))
        dst = Operand.of_memory(out)
    elif isinstance(x, Memory):
        out = Memory(_same_format(x.desc, out_dims))
        dst = Operand.of_memory(out)
    else:
        out = new_array(out_dims, dtype)
        dst = Operand.of(out)
    key = _Key(src.dims, dst.dims, src.layout, dst.layout, dtype, alg, backward)
    p = _plan_of(key, dst.hi - dst.lo)
    kernel = p.run(src.addr, dst.addr, runtime.num_threads(threads))
    if runtime.VERBOSE:
        _verbose(op, kernel, caller, dst, alg, t0)
    return out


def _channels_last(desc) -> bool:
    return desc.format == MemoryDesc(desc.dims, desc.dtype,
                                     CHANNELS_LAST[desc.ndims]).format


def _same_format(desc, dims) -> MemoryDesc:
    """A descriptor like `desc` (format, or its strides' order) with other dims."""
    if desc.format is not None:
        return MemoryDesc(dims, desc.dtype, _resizable_tag(desc))
    order = sorted(range(desc.ndims), key=lambda a: -desc.strides[a])
    strides, step = [0] * desc.ndims, 1
    for a in reversed(order):
        strides[a], step = step, step * dims[a]
    return MemoryDesc(dims, desc.dtype, strides=tuple(strides))


def _chosen(src_desc, dst_desc):
    """The primitive's descriptors, format "any" replaced by its choice: the other one's
    format (as _same_format keeps it), or channels-last for both, as resample(format="any")."""
    if src_desc.strides is None and dst_desc.strides is None:
        tag = CHANNELS_LAST[src_desc.ndims]
        return (MemoryDesc(src_desc.dims, src_desc.dtype, tag),
                MemoryDesc(dst_desc.dims, dst_desc.dtype, tag))
    if src_desc.strides is None:
        return _same_format(dst_desc, src_desc.dims), dst_desc
    if dst_desc.strides is None:
        return src_desc, _same_format(src_desc, dst_desc.dims)
    return src_desc, dst_desc


@functools.lru_cache(maxsize=256)
def _resizable_tag(desc) -> str:
    """desc's tag with its spatial axes together and in order, where size-1 axes let several
    tags describe the same bytes (nhwc with C = W = 1 is also acbd, the canonical tag): the
    one the user most likely wrote, and so the one a result of other spatial dims keeps.
    Else the canonical tag."""
    tag, nd = desc.format, desc.ndims
    if all(n > 1 for n in desc.dims):
        return tag

    def together(order):
        axes = [LETTERS.index(ch.lower()) for ch in order]
        at = [i for i, a in enumerate(axes) if a >= 2]  # where the spatial axes sit
        return at == list(range(at[0], at[0] + nd - 2)) and [axes[i] for i in at] == sorted(
            axes[i] for i in at)

    for order in itertools.permutations(tag[:nd]):
        if together(order):
            try:
                if MemoryDesc(desc.dims, desc.dtype, "".join(order) + tag[nd:]) == desc:
                    return "".join(order) + tag[nd:]
            except Error:  # an order the tag grammar refuses
                continue
    return tag


def _verbose(op, kernel, src: Operand, dst: Operand, alg, t0):
    def fmt(side):
        return "array" if not isinstance(side.keep, Memory) else (side.keep.desc.format
                                                                  or "strided")
    runtime.verbose(f"exec,{op},{kernel},src:{dtypes.name(src.dtype)}:{fmt(src)} "
                    f"dst:{dtypes.name(dst.dtype)}:{fmt(dst)},alg:{alg},"
                    f"{'x'.join(map(str, src.dims))}->{'x'.join(map(str, dst.dims))},"
                    f"{(time.perf_counter() - t0) * 1e3:.4f}ms")


@checked
def resample(src, *, alg="nearest", out_spatial=None, factors=None, format=None, threads=None):
    """Resample src (NumPy N, C, spatial... -> NumPy; Memory -> Memory of its format)."""
    s = _source(src)
    out = out_spatial_of(s.dims[2:], out_spatial, factors)
    return _execute(src, s, s.dims[:2] + out, alg, False, format, threads, "resample")


@checked
def resample_backward(diff_dst, *, alg=None, in_spatial=None, format=None, threads=None):
    """diff_src of resampling: the adjoint of the forward op from `in_spatial`. `alg` and
    `in_spatial` are required (gen.Error naming them when missing)."""
    s = _source(diff_dst)
    spatial = _sizes("in_spatial", in_spatial, len(s.dims) - 2)
    return _execute(diff_dst, s, s.dims[:2] + spatial, alg, True, format, threads,
                    "resample_backward")


@checked
class _Primitive(SetOnce):
    op = ""

    def __init__(self, src_desc, dst_desc, alg):
        for name, d in (("src_desc", src_desc), ("dst_desc", dst_desc)):
            if not isinstance(d, MemoryDesc):
                raise Error(f"{name} must be a gen.MemoryDesc, got {d!r}")
        self.alg = _alg(alg)
        _rank(src_desc.dims)
        if src_desc.ndims != dst_desc.ndims or src_desc.dims[:2] != dst_desc.dims[:2]:
            raise Error(f"the descriptors must differ only in their spatial dims: "
                        f"{src_desc.dims} and {dst_desc.dims}")
        if dtypes.name(src_desc.dtype) != dtypes.name(dst_desc.dtype):
            raise Error(f"the descriptors' dtypes differ: {dtypes.name(src_desc.dtype)} and "
                        f"{dtypes.name(dst_desc.dtype)}")
        _dtype(src_desc.dtype)
        self.src_desc, self.dst_desc = src_desc, dst_desc = _chosen(src_desc, dst_desc)
        key = _Key(src_desc.dims, dst_desc.dims, Layout.of_desc(src_desc),
                   Layout.of_desc(dst_desc), src_desc.dtype, self.alg,
                   self.op == "resample_backward")
        self._plan = _plan_of(key, dst_desc.nbytes)

    @property
    def kernel(self) -> str:
        """The kernel a call runs ("jit:..." once specialised)."""
        return self._plan.kernel

    def __call__(self, src, dst, *, threads=None):
        t0 = time.perf_counter() if runtime.VERBOSE else 0
        sa, da = check_call(src, dst, self.src_desc, self.dst_desc, "resampling")
        kernel = self._plan.run(sa, da, runtime.num_threads(threads))
        if runtime.VERBOSE:
            _verbose(self.op, kernel, Operand.of_memory(src), Operand.of_memory(dst),
                     self.alg, t0)
        return dst


@checked
class Resample(_Primitive):
    """`gen.Resample(src_desc, dst_desc, alg=...)`: `p(src_mem, dst_mem)`."""
    op = "resample"

    def __init__(self, src_desc, dst_desc, alg="nearest"):
        super().__init__(src_desc, dst_desc, alg)


@checked
class ResampleBackward(_Primitive):
    """`gen.ResampleBackward(diff_dst_desc, diff_src_desc, alg=...)`: `p(diff_dst, diff_src)`."""
    op = "resample_backward"

    def __init__(self, diff_dst_desc, diff_src_desc, alg="nearest"):
        super().__init__(diff_dst_desc, diff_src_desc, alg)
