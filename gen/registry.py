"""Picks the tier and, per normalised piece, the kernel that runs it.

The tier is the best one the CPU runs (cpuid, through the always-built scalar module), lowered
by `GEN_ISA`. A piece's innermost nodes decide the kernel kind (see space.py).
"""
from __future__ import annotations

import functools
import importlib
import math
import os

from . import codegen, space
from .dtypes import TABLE
from .errors import Error, checked
from .isa import TIERS
from .problem import Node


@functools.lru_cache(maxsize=None)
def _module(isa: str):
    try:
        return importlib.import_module(codegen.module_name(isa))
    except ImportError as e:
        raise Error(f"gen's {isa} kernels are not built ({e}); install gen with "
                    f"`pip install --no-build-isolation .`") from None


@functools.lru_cache(maxsize=None)
def supported() -> tuple:
    """Names of the tiers this CPU runs, lowest first."""
    lib = _module("scalar").lib
    tiers = sorted(TIERS.values(), key=lambda t: t.rank)
    return tuple(t.name for t in tiers if getattr(lib, f"gen_cpu_has_{t.name}")())


@functools.lru_cache(maxsize=None)
@checked
def isa() -> str:
    """The tier the registry dispatches to."""
    best = supported()[-1]
    forced = os.environ.get("GEN_ISA", "").strip().lower()
    if not forced:
        return best
    if forced not in TIERS:
        raise Error(f"GEN_ISA={forced!r} is not a tier; tiers are {', '.join(TIERS)}")
    if TIERS[forced].rank > TIERS[best].rank:
        raise Error(f"GEN_ISA={forced!r}: this CPU only runs {', '.join(supported())}")
    return forced


def module():
    return _module(isa())


# Ops that run on the reorder's data-movement kernels (no conversion).
MOVERS = ("shuffle_channels", "shuffle_channels_backward")


@checked
def kernels(op=None):
    """Descriptions of every built kernel of every tier, once per op that uses it."""
    if op is not None and not isinstance(op, str):
        raise Error(f"op must be an op's name (a string) or None, got {op!r}")
    out = []
    for tier in TIERS:
        for s in space.kernels(tier):
            uses = (s.op,) + (MOVERS if s.op == "reorder" and not s.cvt else ())
            if s.op == "resample":
                uses = ("resample",) + (("resample_backward",) if s.kind == "linear" else ())
            out += [dict(s.describe(), op=use) for use in uses if op is None or use == op]
    return out


# Elements of src-contiguous B the tile aims for: moving bytes (B_ELEMS; a longer B, oihw ->
# OIhw16i16o's 2304, measured 1.4x slower), and converting (B_CVT_ELEMS), whose longer
# converted lines read better (rand18's rows of 167 elements joined by the node of 6 that
# continues them: 1.15x faster at 1 thread).
B_ELEMS = 64
B_CVT_ELEMS = 512
# Rows of A a tile's offset table may hold (8 MB).
TILE_ROWS = 1 << 20
# Destination bytes of a run (with its padding) from which the run kind, in a large call,
# walks runs in the source's order; and bytes of a moved run (without padding) from which it
# does so where that node is shorter than the destination's next one.
RUN_LINE = 256
RUN_SHORT_BYTES = 16
# Elements a converting tile's B may hold whose runs a row gathers (_runs_gathered): rand06's
# 1470, rand15's 920
GATHER_ELEMS = 4096


def _size(nest) -> int:
    return math.prod(n.n for n in nest)


def _chain(first, nodes, side: str, limit: int) -> tuple:
    """`first`, then nodes that continue it contiguously on `side` ("src" or "dst") while it
    is shorter than `limit` elements: a nest (innermost first) the tile walks through a table
    of offsets (or, from a first of a larger step, whose runs it gathers). Scales stay linear
    along it (the kernel finds element i's at i * first.scl)."""
    nest = (first,)
    while _size(nest) < limit:
        step = _size(nest) * getattr(first, side)
        nxt = [n for n in nodes if n not in nest and getattr(n, side) == step
               and n.scl == first.scl * step]
        if not nxt:
            return nest
        nest += (nxt[0],)
    return nest


def _runs_gathered(a, b, others, width: int, pad: int, src_dtype: str):
    """A converting tile's (A, B) whose B takes in the node G of the shortest source step
    past B's elements, and the nodes that continue G in src while B holds at most
    GATHER_ELEMS elements (B's runs then lie G's step apart, the kernel gathering each row's
    runs before it converts them), or None. Where B's runs are shorter than a line, A's rows
    a line or more apart and G steps less than a line, a row's runs share lines that
    separate work items (one per position of G) would each read again (README, "Kernel
    kinds": tile). Rows closer than a line share theirs already: rand02's, 16 bytes apart,
    1.5x slower gathered. None where a scale varies along B or G (the converter takes B's
    scales as one)."""
    size = TABLE[src_dtype].size
    if _size(b) * size >= space.LINE or abs(a[0].src) * size < space.LINE or any(
            n.scl for n in b):
        return None
    rest = [n for n in others if n not in a + b and _size(b) < n.src and not n.scl]
    if not rest or min(n.src for n in rest) * size >= space.LINE:
        return None
    g = _chain(min(rest, key=lambda n: n.src), rest, "src", GATHER_ELEMS // _size(b))
    while _size(b + g) > GATHER_ELEMS:  # the node that passed the bound, dropped
        g = g[:-1]
    ok = g and _size(b + g) >= width and _size(a) + pad >= width
    return (a, b + g) if ok else None


def follows(nest, step: int, side: str = "src") -> bool:
    """Whether a nest's elements are `step` apart on `side` ("src" or "dst"), in order (rows
    of `step` elements that follow each other)."""
    return all(getattr(n, side) == step * _size(nest[:k]) for k, n in enumerate(nest))


def choose(nodes, zero: bool, esize: int, pad: int = 0, convert=None, tile: bool = True,
           tier=None, prefer=None, large=True):
    """(spec, a, b, outer nodes) for one piece's nest (element strides): the first of
    `options`, or the one of kind `prefer` (measured wisdom) where it applies."""
    found = options(nodes, zero, esize, pad, convert, tile, tier, large)
    return next((o for o in found if o[0].kind == prefer), found[0])


def options(nodes, zero: bool, esize: int, pad: int = 0, convert=None, tile: bool = True,
            tier=None, large=True):
    """Every kernel kind that runs one piece's nest, as (spec, a, b, outer), best guess first.

    `run` and `strided` work on the innermost node A and the next one B (a size-1 B when the
    nest has one node; for `run` in a large call, the node that continues A in src when a
    run and its padding fill RUN_LINE bytes, or a moved run fills RUN_SHORT_BYTES and that
    node is the shorter; for a conversion's short runs, the nest (B, C)
    of B and a node C that continues B's runs in dst); `tile` takes as A and B nests of nodes
    (tuples, innermost first): B from a node whose source stride is 1, A from the innermost
    node; `interleave` takes A with its padding as the rows and B the node of
    source stride 1 that steps over them. Every kind writes `pad` zeros after each run of A.
    `convert` is a (src, dst) dtype pair for the conversion kernels (esize is then dst's);
    `tile=False` rules the tile out (a conversion with sum reads dst element by element).
    `tier`: another than the dispatched one (export). `large`: whether the call is past the
    caches (plan.large: its destination streams, or it moves half the last-level cache)."""
    nodes = list(nodes) or [Node(1, 1, 1)]
    inner = nodes[-1]
    tier = tier or isa()
    src, dst = convert or (None, None)

    def spec(kind, size=esize):
        return space.KernelSpec("reorder", kind, size, zero, tier, src, dst)

    out, late = [], []  # late: options that go after the tile
    groups = inner.n + pad
    if not (zero or convert) and inner.dst == 1 and groups in space.GROUPS:
        rows = [n for n in nodes[:-1] if n.src == 1 and n.dst == groups]
        if rows:
            b = rows[-1]
            # before the tile where both apply: measured 1.5-2x faster (nchw -> nhwc with 8
            # channels; nchw -> nChw8c with 3 or nChw16c with 3, whose padding rows the tile
            # transposes too). 16 whole rows too: nchw -> nChw16c at DRAM sizes, f32 (four
            # shapes, 16.8-25.7 MB each way) 1.1-1.45x faster at 1 thread, 1.01-1.07x at 2;
            # s8 and f16 (16x64x128x128) 1.8x at 1 thread, 1.15x and 1.3x at 2; nchw -> nhwc
            # of 16 channels, f32 and bf16, 1.55-1.9x at 1 thread, 1.0-1.05x at 2 (Zen4,
            # alternating in one process, specialised); in cache, f32 8x256x28x28, 15 %. An
            # earlier machine measured the tile's 8 x 8 transposes, of fewer stages, ahead at
            # DRAM sizes (f32: 0.95 against 0.90 of a copy). But after the tile where B is
            # shorter than the interleave's vector step, which its scalar tail then does alone
            # (rand08, s8 with a B of 8: the tile 1.4 / 1.7x faster at 1 / 2 threads, Zen4).
            kernel = space.KernelSpec("reorder", "interleave", esize, False, tier, groups=groups)
            (out if b.n >= kernel.lanes else late).append(
                (kernel, inner, b, [n for n in nodes[:-1] if n is not b]))
    # elements of 16 or 32 bytes (runs a move takes whole, plan._interleaving) have no tile
    # or strided kernel
    tile = tile and esize in space.ESIZES
    # A tile's row table holds at most TILE_ROWS rows: a longer innermost node is split in
    # two (by its largest power-of-two factor up to TILE_ROWS), or gets no tile; not when
    # padding follows it (the tile writes it after each run of A, which must stay whole).
    rows, others = inner, nodes[:-1]
    if inner.n > TILE_ROWS and not pad:
        k = math.gcd(inner.n, TILE_ROWS)
        rows = Node(k, inner.src, inner.dst, inner.scl)
        others = others + [Node(inner.n // k, inner.src * k, inner.dst * k, inner.scl * k)]
    if tile and not zero and inner.dst == 1 and (rows is inner or rows.n >= TILE_ROWS >> 8):
        width = spec("tile").tile
        # B: src-contiguous nodes from one of stride 1, long enough for long converted lines
        # (or, if A needs one of them, for the tile); A: dst-contiguous nodes from the
        # innermost, a line's worth
        nests = [(a, b) for first in reversed(others) if first.src == 1
                 for b in (_chain(first, others, "src", limit)
                           for limit in (B_CVT_ELEMS if convert else B_ELEMS, width))
                 for a in [_chain(rows, [n for n in others if n not in b], "dst",
                                  1 if pad else space.LINE // esize)]]
        a, b = next(((a, b) for a, b in nests
                      if _size(a) + pad >= width and _size(b) >= width), (None, None))
        if convert and (not a or _size(b) * TABLE[src].size < space.LINE):  # short runs
            a, b = next(filter(None, (_runs_gathered(a_, b_, others, width, pad, src)
                                      for a_, b_ in nests)), (a, b))
        # else (no B a row wide, none gathered) B narrower than a row: rows of _size(b)
        # elements that follow each other (in src, or in a conversion's buffer, where they may
        # keep their gap to a narrow width) are read W at a time and de-interleaved; moved
        # rows need only follow each other W / _size(b) at a time, the rows of one load
        # (ABcd4b16a4b -> bdca in bf16, A's 16 rows then a jump: 3.5 GB/s in the strided
        # kernel before)
        narrow = spec("tile").narrow
        a, b = (a, b) if a else next(((a, b) for a, b in nests if not pad and (
            _size(b) in narrow and _size(a) >= width * width // _size(b)
            and (follows(a, _size(b)) or a[0].src == _size(b)
                 and a[0].n % (width // _size(b)) == 0) or convert and _size(b) < width
            and (_size(b) in narrow or a[0].src in narrow and a[0].src > _size(b)))),
            (None, None))
        # else B narrower than a row, its rows anywhere: each row read under a mask
        # (nChw16c -> nchw with 3 channels 1.25-2x, nhwc -> nchw with 5 to 7 channels 1.9-4.5x
        # faster than the strided kernel, specialised, on Zen5). A conversion where its rows
        # follow each other (one converter call per item: nhwc -> nchw with 5 channels, f32
        # -> bf16 or s8, 2.6-3x), or, with one scale for the item's rows, rows apart of 2- or
        # 4-byte elements, which the kernel gathers and converts in one call (rand15's 5 of 8
        # channels, f32 -> u8, 1.8x, before _runs_gathered took them; nChw16c -> nchw with 3
        # channels, f32 -> bf16 or s8, 1.2-1.3x; s8 -> f32 0.8x). Not for rows of 3 that
        # follow each other: there the specialised strided kernel's loop is vectorised by the
        # compiler (nhwc -> nchw with 3 channels 0.6-0.8x at 1 thread); nor where the kernel
        # would take the narrow path (bn a narrow width, A's innermost node stepping by it)
        # for rows that do not follow each other all along A.
        a, b = (a, b) if a else next(((a, b) for a, b in nests if spec("tile").masked and (
            1 < _size(b) < width <= _size(a) + pad
            and (not convert or follows(a, _size(b)) or spec("tile").src_size > 1
                 and not any(n.scl for n in a + b))
            and not (_size(b) == 3 and follows(a, 3))
            and not (_size(b) in narrow and a[0].src == _size(b)))), (None, None))
        if a:
            out.append((spec("tile"), a, b, [n for n in others if n not in a + b]))
    out += late
    b, outer = (nodes[-2], nodes[:-2]) if len(nodes) > 1 else (Node(1, 0, 0), [])
    if inner.dst == 1 and (zero or inner.src == 1):
        # Runs that fill whole lines go along the node that continues them in src, in a large
        # call: one read stream instead of a jump per run; the scattered writes cost little
        # (streamed: shuffle nchw 32x256x28x28 g4 1.22x, rand00's padded 512-byte lines
        # 1.13x faster, runs of 16 bytes 4 % slower; plain stores in a call of 17.7 MB, half
        # the L3: rand07, f32 -> u8 with runs of 10 KB, 1.9-2.1 / 1.4-1.5x at 1 / 2 threads,
        # Zen4; in calls that fit the L2 as fast or slower: shuffle nchw 1x116x28x28 g2)
        # Short converted runs of whole vectors (one scale, no sum: `tile`) go along it too,
        # the kernel then converting them where they lie (gen_cvt_runs), 8 or 16 at a time:
        # rand01 (f32 -> bf16, runs of 8 along a node of 17) 1.3x, rand16 (f32 -> u8, runs of
        # 16) 1.15x faster than gathered along the destination's next node; runs of 4 (rand09),
        # converted one element at a time, 2.3x slower (Zen5).
        # Moving shorter runs, from RUN_SHORT_BYTES, along the node that continues them
        # in src where it is the shorter of the two, so that both sides go in order, a few
        # runs apart, instead of the source in passes that each read one run of a few (nhwc
        # -> nChw16c: 4 passes over each image's 256-byte pixels): Sapphire Rapids, 1 / 2
        # threads, specialised, f32 32x64x56x56 1.3 / 1.35x, 8x256x28x28 1.65 / 1.6x, f32
        # into nChw8c 1.6 / 1.55x, bf16 1.2 / 1.15x, s8 (16-byte runs) 1.25 / 1.25x faster.
        follow = [n for n in nodes[:-1] if n.src == inner.n]
        run_b, run_outer = b, outer
        short = (convert and tile and not pad and inner.n < codegen.CHUNKS["pack_run"]
                 and inner.n % 8 == 0 and not any(n.scl for n in nodes))
        in_order = not convert and inner.n * esize >= RUN_SHORT_BYTES
        if not zero and follow and (short or large and (
                (inner.n + pad) * esize >= RUN_LINE or in_order and follow[-1].n < b.n)):
            run_b, run_outer = follow[-1], [n for n in nodes[:-1] if n is not follow[-1]]
        # Short converted runs (one scale, no sum) that follow each other in dst along B, B's
        # runs then along a node C (a conversion into larger blocks, nChw4c -> nChw8c: B the
        # source blocks of a destination block, C its pixels): the run kernel takes B and C
        # as a nest, a work item gathering the runs of some positions of C in dst order and
        # converting them at once
        if convert and tile and run_b is b and not pad and b.dst == inner.n and not any(
                n.scl for n in (inner, b)) and inner.n * b.n <= codegen.CHUNKS["pack_line"]:
            gather = [n for n in outer if n.dst == b.n * b.dst and not n.scl]
            if gather:
                run_b, run_outer = (b, gather[-1]), [n for n in outer if n is not gather[-1]]
        if convert:
            out.append((spec("run"), inner, run_b, run_outer))
        else:
            out.append((spec("run", 1), Node(inner.n * esize, 1, 1), run_b, run_outer))
    return out + [(spec("strided"), inner, b, outer)] * (esize in space.ESIZES)
