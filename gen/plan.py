"""A normalised Problem bound to kernels: the C task array one op call hands to `gen_run`.

Built once per problem (primitives keep theirs; the functional API caches them), so a call
is one C call with the GIL released.
"""
from __future__ import annotations

import functools
import math
import os
from collections import namedtuple
from pathlib import Path

import numpy as np

from . import codegen, jit, registry, runtime, space, wisdom
from .dtypes import TABLE
from .errors import Error
from .problem import Layout, Node, Problem, nest_offsets, normalise, widened
from .space import LINE

# A conversion's dtypes, and whether it adds beta * dst (then dst is read).
Conversion = namedtuple("Conversion", "src dst sum")
# Below this many bytes of traffic per thread, another thread costs more than it brings.
BYTES_PER_THREAD = 1 << 17
# Destinations at least this large are written with streaming stores where lines are whole,
# unless the call fits in the last-level cache (streams, llc_bytes).
STREAM_BYTES = 1 << 21
# The `stream` field of a destination that streams at any thread count (stream_threads)
ANY_THREADS = 1 << 30
# Runs (copied or converted) that do not start on a line, or end within one, stream only
# from this many destination bytes (_runs_stream)
RUN_STREAM_BYTES = 4 << 10
# Destination runs a tile's work item writes, up to which plain stores beat streaming ones;
# and the destination size from which a tile's whole rows that fill one region stream.
TILE_RUNS = 16
REGION_BYTES = 8 << 20
# The L1 data cache's sets of lines (32 KiB of 8 ways, 48 KiB of 12), and the most rows of an
# interleave in one set that its loads leave room for, with the destination's lines in it.
L1_SETS = 64
L1_SHARED = 4
# The interleave kind streams only from this size: below it, its destination left in the
# caches is worth more (f32 nchw->nChw8c, 8 channels: at 3.2 MB of destination 2x faster
# without streaming, at 6.4 MB 10-20 % slower).
INTERLEAVE_STREAM_BYTES = 4 << 20
# A tile work item with the most destination lines reads a source block of at most this many
# bytes (about an L1 data cache) when its rows follow each other: see _tile_lines.
TILE_BLOCK = 48 << 10
# Destination lines of a tile's column (its rows' bytes) from which it may go through the
# stage (_tile_staged): a move's, a conversion's.
TILE_STAGE_LINES = (24, 6)
# Rows of a tile's work item from which a move spreads its prefetches (_tile_prefetch).
TILE_SPREAD = 32
# Bytes per row of a work item from which a move prefetches no rows at once (_tile_prefetch)
TILE_PREFETCH_ROW = 512
# A converting tile's buffer from the heap, for longer pieces of its rows (_tile_buffer)
TILE_HEAP_BUFFER = 256 << 10
# Source bytes a run kernel's conversions prefetch ahead of their steps (prefetches)
RUN_AHEAD = 2 << 10


@functools.lru_cache(maxsize=None)
def llc_bytes() -> int:
    """The last-level cache a call's data can stay in: on AMD Zen, whose L3 is a fast victim
    cache of the cores' L2s, the size Linux reports for CPU 0's last level; elsewhere 0 (a
    Sapphire Rapids VM, whose L3 is large on paper, streamed faster from a few MiB: the floors
    above). GEN_LLC_BYTES overrides."""
    given = os.environ.get("GEN_LLC_BYTES", "").strip()
    if given:  # empty: unset, as the other GEN_ variables
        if not (given.isascii() and given.isdigit()):  # '²' is a digit int() refuses
            raise Error(f"GEN_LLC_BYTES must be a number of bytes, got {given!r}")
        return int(given)
    try:
        with open("/proc/cpuinfo") as f:
            if "AuthenticAMD" not in f.read(4096):
                return 0
        caches = Path("/sys/devices/system/cpu/cpu0/cache")
        last = max(caches.glob("index*"), key=lambda d: int((d / "level").read_text()))
        size = (last / "size").read_text().strip()
    except (OSError, ValueError):
        return 0
    unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
    return int(size.rstrip("KMG")) * unit


def _moved(dst_nbytes: int, traffic: "int | None") -> int:
    """A call's bytes read and written: `traffic`, or unless given twice the destination, as a
    copy."""
    return 2 * dst_nbytes if traffic is None else traffic


def streams(dst_nbytes: int, floor: int = None, traffic: int = None) -> bool:
    """Whether a destination of dst_nbytes is written with streaming stores: at least `floor`
    (STREAM_BYTES unless given), and not when the call's traffic (bytes read and written;
    unless given, twice the destination, as a copy) fits in llc_bytes(): its destination
    then stays in the cache for the next op. Measured on AMD Zen4 with 32 MiB of L3, every
    kernel kind: 6.4 MB copied 25-45 % faster with plain stores, 25.7 MB 1.5-2x slower;
    f32 -> s8 of 33.5 MB into 8.4 MB 15-20 % faster streaming; a resampling that writes
    25.7 MB from 6.4 MB 1.3-2x faster streaming at 1 thread (so it counts as a copy of its
    destination; at 2 threads plain stores won by 20 %, on a later VM streaming ones by
    1.2-1.7x: stream_threads)."""
    floor = STREAM_BYTES if floor is None else floor
    moved = _moved(dst_nbytes, traffic)
    return dst_nbytes >= floor and moved >= llc_bytes()


def stream_threads(dst_nbytes: int, floor: int = None, traffic: int = None) -> int:
    """The most threads that write with streaming stores (a kernel streams when its thread
    count is at most this): any where streams() says yes, else none. A call that expands
    (its destination 3/4 of its traffic or more) and moves under 1.5x llc_bytes() used to
    stream at 1 thread only, as a Zen5 measured it: at 2 threads, plain stores found much of
    the destination in the cache again (s8 -> f32 of 8.4 MB into 33.5 MB 1.1-1.5x faster,
    resampling 2x up 10-30 %). The Zen4 VM of _tile_stream_threads' later measurements
    disagrees, alternating in one process at 2 threads: streaming 1.39x faster on that
    s8 -> f32, 1.2-1.7x on linear 2x up of NCHW, NHWC, nChw16c, NCDHW and NDHWC (the
    bench's), 1.2x on nearest NHWC; an hour later the linear ones the same, s8 -> f32 and
    nearest NHWC within 6 % (nearest NCHW's rows never stream). An earlier Zen4 VM had
    found plain stores faster there (NDHWC 2x up into 16.8 MB 1.3-1.6x). Streaming stores
    run at the memory's rate whatever else shares the cache, so they are the guess;
    gen.tune measures the machine at hand. Resampling forward into a larger destination
    streams at 1 thread only (resample.EXPANDING_STREAM_THREADS: a Zen3 VM too found plain
    stores faster at 2); where llc_bytes() is 0 (an Intel VM) its rows at any thread count,
    its channel runs not at all."""
    return ANY_THREADS if streams(dst_nbytes, floor, traffic) else 0


def large(dst_nbytes: int, traffic: int = None) -> bool:
    """Whether a call is past the caches, for registry.options: its destination streams
    (streams), or it moves half of llc_bytes() or more."""
    return streams(dst_nbytes, traffic=traffic) or 0 < llc_bytes() <= 2 * _moved(dst_nbytes,
                                                                                 traffic)


def choices(problem, convert=None, dst_nbytes=0, traffic=None):
    """Per piece, the kernel kinds that can run it (registry.options), best guess first."""
    return [[o[0].kind for o in registry.options(*_choose_args(piece, problem.esize, convert),
                                                 large=large(dst_nbytes, traffic))]
            for piece in problem.pieces]


def _choose_args(piece, esize, convert):
    pair = (convert.src, convert.dst) if convert and not piece.zero else None
    return piece.nodes, piece.zero, esize, piece.pad, pair, not (convert and convert.sum)


def bind(problem, dst_nbytes: int, convert=None, tier=None, choice=None, traffic=None):
    """Per piece: (kernel spec on `tier`, the gen_piece fields as a dict). `choice`: measured
    wisdom.Choice (a kernel kind per piece, streaming stores or not (None: as guessed), the
    loops' order, the tiles' prefetches) instead of the guess.
    `traffic`: the bytes a call reads and writes (see streams)."""
    esize = problem.esize  # dst's element size
    src_esize = TABLE[convert.src].size if convert else esize
    moved = _moved(dst_nbytes, traffic)
    big = large(dst_nbytes, traffic)
    measured = choice is not None and choice.stream is not None  # else the guess's stores
    if measured:  # at one thread count, applied at all
        stream = ANY_THREADS if choice.stream else 0
    else:
        stream = stream_threads(dst_nbytes, traffic=traffic)
    out = []
    for i, piece in enumerate(problem.pieces):
        spec, a, b, outer = registry.choose(*_choose_args(piece, esize, convert), tier=tier,
                                            prefer=choice.kinds[i] if choice else None,
                                            large=big)
        order = choice.order if choice else wisdom.ORDERS[0]
        if order == "auto":
            order = loop_order(outer, src_esize, esize, piece.zero,
                               _block(spec, a, b) * src_esize, _dst_block(spec, a, b) * esize)
        if order == "src":  # the source's order (a stable sort)
            outer = sorted(outer, key=lambda n: -abs(n.src))
        # the only kind with a gap; _fuse_gaps gives one only to a piece without pad
        assert not piece.gap or (spec.kind == "strided" and not piece.pad)
        if len(outer) > codegen.MAX_NODES:
            raise Error(f"layout pair needs {len(outer)} loop nodes, more than "
                        f"{codegen.MAX_NODES}")
        tables = {"a_tab": None, "b_tab": None}
        c = Node(1, 0, 0)  # run: the node whose positions an item gathers; tile: B's runs
        a_run = 1  # tile: the count of A's innermost node
        if spec.kind == "run" and isinstance(b, tuple):
            b, c = b
        if spec.kind == "tile":
            k = _gathered_from(b)
            if k < len(b):  # B's runs lie c.src apart in src (registry._runs_gathered)
                c = Node(math.prod(n.n for n in b[k:]), b[k].src, 0)
            # rows past a_n (destination padding, a single node) are zeros, never read
            rows = nest_offsets(a, "src") * src_esize
            tables = {"a_tab": np.concatenate([rows, np.zeros(piece.pad, np.int64)]),
                      "b_tab": nest_offsets(b, "dst") * esize}
            a_run = a[0].n
            a, b = _linear(a), _linear(b)
            lines = _tile_lines(spec, rows, b.n, src_esize, convert)
            buffer = _tile_buffer(spec, moved, lines, a.n + piece.pad, b.n, src_esize, convert)
            even = _tile_even(rows, tables["b_tab"], a.src * src_esize, b.dst * esize, convert)
            starts = [piece.dst_off * esize] + [n.dst * esize for n in outer]
            whole = _tile_whole_lines(spec, tables["b_tab"], a.n + piece.pad, b, even, starts)
            staged = not whole and _tile_staged(spec, a.n + piece.pad, lines, dst_nbytes, moved,
                                                 convert)
            prefetch = _tile_prefetch(spec, rows, moved, lines, a.n + piece.pad, b.n, convert,
                                      staged)
            if choice is not None and choice.prefetch != "auto":
                prefetch = _tile_prefetch_how(spec, lines, a.n + piece.pad, b.n, convert) \
                    if choice.prefetch == "on" else 0
            tiled = stream if measured else _tile_stream_threads(dst_nbytes, moved)
            piece_stream = tiled if (whole or staged) and (
                measured or convert is not None
                or _tile_streams(spec, tables["b_tab"], a.n + piece.pad, lines, dst_nbytes)) else 0
        elif spec.kind == "interleave" and not measured:
            piece_stream = stream_threads(dst_nbytes, INTERLEAVE_STREAM_BYTES, traffic)
            lines = prefetch = even = staged = buffer = 0
        else:
            piece_stream, lines, prefetch, even, staged, buffer = stream, 0, 0, 0, 0, 0
            # (runs gathered along a node C, c.n > 1, are converted into one stretch of dst)
            if spec.kind == "run" and not piece.zero and not measured and c.n == 1 and \
                    not _runs_stream((a.n + piece.pad) * esize, b, outer,
                                     piece.dst_off * esize, esize):
                piece_stream = 0
            if spec.kind == "run" and convert is not None and not piece.zero:
                prefetch = RUN_AHEAD if prefetches(moved, choice, src_esize >= esize) else 0
        if spec.kind == "interleave":  # the buffer is no choice of gen.tune: with its stores too
            lines = _interleave_lines(spec, a.src * src_esize, a.n)
        out.append((spec, {
            "src_off": piece.src_off * src_esize, "dst_off": piece.dst_off * esize,
            "scl_off": piece.scl_off, "nouter": len(outer),
            "n": [n.n for n in outer], "src_str": [n.src * src_esize for n in outer],
            "dst_str": [n.dst * esize for n in outer], "scl_str": [n.scl for n in outer],
            "a_n": a.n, "a_src": a.src * src_esize, "a_dst": a.dst * esize, "a_scl": a.scl,
            "a_run": a_run,
            "b_n": b.n, "b_src": b.src * src_esize, "b_dst": b.dst * esize, "b_scl": b.scl,
            "c_n": c.n, "c_src": c.src * src_esize, "c_dst": c.dst * esize,
            "pad": piece.pad * esize, "gap": piece.gap * esize, "stream": int(piece_stream),
            "lines": lines, "prefetch": int(prefetch), "even": int(even),
            "staged": (1 + _tile_lined(spec)) if staged and piece_stream > 0 else 0,
            "buffer": buffer, **tables}))
    return out


def prefetches(nbytes, choice, fits=True) -> bool:
    """Whether a kernel prefetches what it reads ahead (a resampling's lines of the items
    ahead, a converting run's source, RUN_AHEAD bytes on): where it `fits` (its own rule), in a
    call of `nbytes` (its source, or all it moves) of half of llc_bytes() or more, and never
    where gen counts no last-level cache (llc_bytes() 0: on Sapphire Rapids the hardware
    fetched a resampling's contiguous lines, and prefetches only cost time); a measured choice
    (gen.tune) says on or off instead.

    A converting run fits where its source elements are as wide as the destination's or
    wider: the hardware prefetcher alone left its lines to their latency. Zen3, nchw -> nchw
    8x64x128x128, alternating processes, 1 / 2 threads, ratio to a copy: f32 -> bf16
    0.64-0.71 -> 0.89-0.97 / 0.55-0.84 -> 1.14-1.30, f32 -> f16 0.77 -> 1.04 / the same,
    f32 -> s8 0.61 -> 0.85 / 0.52-0.69 -> 0.96-0.99, rand07 (f32 -> u8) 0.51-0.55 -> 0.66 /
    the same; s8 -> f32 0.96-1.0 -> 0.92-0.98 and rand09's 0.94 -> 0.9 at 1 thread: widening
    ones do not."""
    if choice is not None and choice.prefetch != "auto":
        return choice.prefetch == "on"
    return fits and 0 < llc_bytes() <= 2 * nbytes


def _runs_stream(run, b, outer, dst_off, esize) -> bool:
    """Whether a run piece's runs (`run` destination bytes each, with their pad) may stream:
    each starts on a line and fills whole lines, or is RUN_STREAM_BYTES or more. Else the
    lines a run shares with its neighbours are stored plainly between streamed ones, and a
    converting run's first elements, up to a line, one by one: f32 nchw into rows of 65
    floats 70 apart (32x64x56x65) streamed 1.35-1.9x slower than plainly (with a plain store
    into each line that also took streaming ones, 7x), 129 of 134 1.5x; f32 -> s8, bf16 of
    65 of 70 16x, 8x, s8 -> f32 4.4x; f32 -> bf16 of 257 of 262 2.5x (Zen4, 1 thread)."""
    starts = [dst_off] + [n.dst * esize for n in outer] + ([b.dst * esize] if b.n > 1 else [])
    return run >= RUN_STREAM_BYTES or (run % LINE == 0 and all(x % LINE == 0 for x in starts))


def loop_order(outer, src_esize: int, esize: int, zero: bool, block: int = 0,
               dst_block: int = 0) -> str:
    """The guessed order of the loops around a piece's kernel ("src" or "dst"): the side whose
    smallest outer stride (in bytes) is the shorter step goes innermost, so that the items
    that follow each other touch memory nearby on that side; the source on a tie, as a read
    that jumps stalls where a write does not; but never a source step under a cache line
    (items that share source lines). Measured on Zen5 against the destination's order,
    specialised kernels, 1 / 2 threads: rand00 (runs, 152-byte source steps against 512)
    1.38 / 1.06x, rand02 (narrow tile, 256 against 380) 1.45 / 1.2x, rand04 and rand18
    1.0 / 0.9-0.95x; rand01's 32-byte source steps against 224 were 1.1x faster at 1 thread,
    3x slower at 2; rand10 (34048 against 64) keeps the destination's order, the source's
    0.85-0.93x. The source's order also where its step is the `block` of bytes a tile reads
    at one outer position (they follow each other: the reads go on in order) and the
    destination's step is a line or more (Zen4, 1 / 2 threads: f32 ABcd4b16a4b -> bdca
    192x64x27x11, 256 against 64, 2.7 / 2.2x faster; f32 -> s8 deabc -> edacb 1.2 / 1.2x).
    And the source's order where a conversion narrows to a quarter (f32 -> s8, u8: it reads
    4 bytes for each it writes) and only its step is a line or more (the destination's
    items share lines; Zen4, in one process, 1 / 2 threads: the bench's rand03 of seed 2,
    f32 -> s8 cbda -> Acdb16a in runs, 988 bytes against 16, 1.6 / 1.46x faster, rand09 of
    seed 3, 192 against 8, 1.4 / 1.36x; rand16 and rand19 of seed 0 the same; into bf16,
    half the bytes, 0.95-1.2x: left to the destination's order). And the source's order, a
    tie, where each side's step is the block (`block`, `dst_block`: bytes) its kernel reads
    or writes at one position, whatever its size: both sides then go on in order (the
    bench's rand06 of seed 6, f16 cabd -> aBcd4b, interleaving 4 rows of 14 bytes into 56,
    1.9-2.3 / 2.0-2.4x faster at 1 / 2 threads than with reads 356 KB apart, Zen4)."""
    if zero or len(outer) < 2:
        return "dst"
    src_step = min(abs(n.src) for n in outer) * src_esize
    dst_step = min(abs(n.dst) for n in outer) * esize
    quarter = src_esize >= 4 * esize
    return "src" if LINE <= src_step <= dst_step or LINE <= dst_step and src_step == block \
        or quarter and dst_step < LINE <= src_step \
        or 0 < src_step == block and dst_step == dst_block else "dst"


def _block(spec, a, b) -> int:
    """Elements a tile or interleave reads at one outer position where they are one block in
    src (B's nest contiguous from stride 1, A's rows one after the other), else 0."""
    a, b = _nest(a), _nest(b)
    if spec.kind not in ("tile", "interleave") or not registry.follows(b, 1):
        return 0
    size = math.prod(n.n for n in b)
    return size * math.prod(n.n for n in a) if registry.follows(a, size) else 0


def _dst_block(spec, a, b) -> int:
    """Elements a tile or interleave writes at one outer position where they are one block
    in dst (its nodes, by destination stride, each following the ones before), else 0."""
    nest = sorted(_nest(a) + _nest(b), key=lambda n: abs(n.dst))
    if spec.kind not in ("tile", "interleave") or not registry.follows(nest, 1, "dst"):
        return 0
    return math.prod(n.n for n in nest)


def _nest(x) -> list:
    """A kernel side's nodes: a list of them, or one (the interleave's)."""
    return [x] if isinstance(x, Node) else list(x)


def _tile_streams(spec, b_tab, row, lines, dst_nbytes) -> bool:
    """Whether a tile that moves bytes streams its stores, given a large destination: only
    when a work item writes more than TILE_RUNS separate destination runs (its B rows), or
    writes them whole so that together they fill one region (in any order) of REGION_BYTES
    or more. With fewer runs, plain stores measured 2-5 % faster (nChw16c -> nchw: 16 runs);
    with more (nchw <-> nhwc: 512 or 64 runs), streaming is 7-20 % faster. One region:
    plain stores 5 % faster at 6.4 MB (nchw -> nChw16c 8x256x28x28), 18 % at 2.4 MB and 2
    threads (oihw -> OIhw16i16o), but at 12.8 MB from a tie to 10 % slower, depending on the
    machine's load (nchw -> nChw16c 32x64x56x56, 1 thread). (A converting tile always
    streams: plain stores made rand03, s8 -> f32 with 16 runs, 1.7x slower.) These are
    Sapphire Rapids measurements: where llc_bytes() is known, a call past it streams from
    any tile (AMD Zen4, nChw16c -> nchw 32x64x56x56: 1.45x faster)."""
    if llc_bytes():
        return True
    whole = row <= lines * spec.tile_a
    if whole and bool(np.all(np.diff(np.sort(b_tab)) == row * spec.esize)):
        return streams(dst_nbytes, REGION_BYTES)
    return min(len(b_tab), codegen.CHUNKS["tile_chunk"]) > TILE_RUNS


def _tile_stream_threads(dst_nbytes, moved) -> int:
    """stream_threads for a tile, whose stores are scattered (a copy's, in order, stay as
    fast as streaming ones up to llc_bytes() of traffic): from STREAM_BYTES of destination,
    at one thread where the call moves half of llc_bytes() or more, at any from 4/5 of it or
    where the destination alone is 9/32 of it. That last bound, Zen4 (a later VM), 2 threads,
    streaming against plain stores: nchw -> nhwc of 32x64x56x56 bf16 (25.7 MB moved, 12.8 MB
    of destination) 1.9-2.25x, 16x64x56x56 f32 (25.7 / 12.8 MB) 1.75x, 12x64x56x56 f32
    (19.3 / 9.6 MB) 2x, s8 -> f32 24x64x56x56 (24 / 19.3 MB) 2.9x and 12x64x56x56 (12 / 9.6
    MB) 1.25x faster, rand04 (26 / 21 MB) 1.55x; but f32 10x64x56x56 (16 / 8 MB) 0.65x,
    8x64x56x56 0.9x, rand02 (21 / 7 MB) 0.88x, rand12 (15.3 / 7.6 MB) 0.87x. The earlier
    Zen4 machine below had found s8 -> f32 24x64x56x56 1.12x faster plain.
    Zen4, 32 MiB of L3, plain stores against streaming ones:
    - 1 thread: f32 nchw -> nhwc 3x64x100x100 (15.4 MB moved) 1.2x faster plain;
      2x64x128x128 (16.8 MB) 1.25x faster streaming, 3x64x110x110 (18.6 MB) 1.3x,
      3x64x120x120 (22 MB) 1.7x; f32 -> bf16 1.5x; s8 -> f32 32x64x56x56 (32.1 MB) 3x;
    - 2 threads: s8 -> f32 nchw -> nhwc 24x64x56x56 (24 MB) 1.12x faster plain, 28x64x56x56
      1.1x faster streaming, 32x64x56x56 1.35x, 36x and 44x (36-44 MB, calls that expand,
      which stream_threads then gave one thread) 1.6-1.8x; f32 of 29.5 and 32 MB the same."""
    if dst_nbytes < STREAM_BYTES:
        return 0
    if 5 * moved >= 4 * llc_bytes() or 32 * dst_nbytes >= 9 * llc_bytes():
        return ANY_THREADS
    return 1 if 2 * moved >= llc_bytes() else 0


def _quarters(spec, src_esize, convert) -> bool:
    """Whether a tile converts into a quarter of the bytes or less (f32 -> s8, u8)."""
    return convert is not None and 4 * spec.esize <= src_esize


def _tile_lines(spec, rows, bn, src_esize, convert) -> int:
    """Destination lines per row of a tile's work item: the most the kernel takes (4) when
    the item's source is one block (its rows follow each other) of at most TILE_BLOCK bytes,
    so that each destination row gets longer runs per visit (nChw16c->nchw 0.91 -> 0.95 of a
    copy, nhwc->nchw with C = 64 0.84 -> 0.88; larger blocks measured slower: nhwc->nchw with
    C = 512 by 10 %, nchw->nhwc with 56x56 pixels by 30 %). Else 1 where B is a tile wide or
    more and the tile narrows bytes to a quarter (f32 -> s8, u8) or, llc_bytes() known (AMD),
    moves them; else 2. Zen4, alternating in one process, specialised, 1 / 2 threads, 1 line
    against 2: nchw->nhwc 32x64x56x56 1.4 / 1.14x faster, 8x256x28x28 1.27 / 1.09x, nhwc->nchw
    8x256x28x28 (a 64 KB block) 1.13 / 1.12x, rand13 the same; rand14 1.3 / 1.0-1.3x, rand10,
    rand15, rand18 and rand19 the same within noise; but rand06 (s8 -> f32) 0.8 / 0.66x and
    rand02 (4 columns) 0.92x. Sapphire Rapids, a tile that moves bytes, 2 lines against 1,
    specialised, 1 / 2 threads: nchw -> nhwc 32x64x56x56 1.2 / 1.2x, bf16 1.13 / 1.16x, rand13
    1.16 / 1.14x faster; nhwc -> nchw 8x256x28x28 0.97 / 0.98x, ncdhw -> ndhwc 4x32x32x64x64
    the same; 4 lines as fast as 2 or slower. A conversion that widens takes the most lines
    where its rows lie closer than a line: rand04 (s8 -> f32, rows 63 bytes apart) 1.36 /
    1.23x faster than 2 (Zen4; rand03's 16 bytes apart the same)."""
    most = codegen.CHUNKS["tile_lines"]
    contiguous = _evenly(rows, bn * src_esize)
    small = most * spec.tile_a * bn * src_esize <= TILE_BLOCK
    if convert is None and contiguous and small:
        return most
    if convert is not None and spec.esize > src_esize and _step(rows) < LINE:
        return most
    one = bn >= spec.tile and (convert is None and llc_bytes() > 0
                               or _quarters(spec, src_esize, convert))
    return 1 if one else min(2, most)


def _tile_prefetch(spec, rows, moved, lines, an, bn, convert, staged) -> int:
    """How a tile prefetches the source rows of its next work item: not at all (0) but in a
    call that moves (`moved`: bytes read and written) half of llc_bytes() or more, when its
    rows are a cache line or more apart. In-process A/B on Zen5, specialised, 1 / 2 threads:
    rand14 (rows of 64 bytes) 1.37 / 1.1x, rand18 1.2 / 1.23x, rand06 1.21 / 1.54x, rand13
    1.27 / 1.0x, nchw -> nhwc 32x64x56x56 1.16 / 1.02x faster, and at 21 MB moved rand19
    1.17-1.24x at 1 thread; smaller calls 0.9x at 2 threads (nchw -> nhwc 8x256x28x28, 12.8
    MB) down to 0.63x (oihw -> OIhw16i16o, 2.4 MB). Rows closer together read one region the
    hardware prefetcher follows: rand03's, 16 bytes apart, 0.91x (rand02's and rand04's
    1.04-1.13x, left without too). A converting tile prefetches a row of the next item as it
    converts one of its own, not all at the item's start: rand10 1.3x, rand18 1.6x, rand19
    1.3x, f32 -> s8 nchw -> nChw16c 2x faster at 1 thread. A tile that moves bytes does so at
    the item's start (1), or, specialised, spread over its column tiles (2) where an item has
    TILE_SPREAD rows or more (and a call of the micro kernel's) and 4 tiles or more: nhwc ->
    nchw 32x64x56x56 1.5x, rand05 1.3x, nchw -> nhwc (in items of 2 lines) 1.2x faster at
    1 thread; rand08's items of 16 rows were 1.25x slower spread.
    Three kinds of tile read only what the hardware prefetcher follows, and do not prefetch
    (Zen4; alternating A/B, specialised, 1 / 2 threads, without against with):
    - a tile that narrows to a quarter (f32 -> s8, u8), whose reads are most of its bytes, in
      the items of one line that _tile_lines gives it (the Zen5 figures above had two):
      rand18 1.5 / 1.2x, rand14 1.5 / 1.4x, rand10 1.25 / 1.15x, rand19 1.15 / 1.2x, nchw ->
      nChw16c 1.16 / 1.15x, nchw -> nhwc into s8 1.15 / 1.15x and nhwc -> nchw into u8 1.36 /
      1.33x faster, rand15 the same (f32 -> bf16 keeps it: nchw -> nhwc 1.38x slower without);
    - a tile that moves bytes, whose B takes several chunks read one after the other (items
      along B: the next item reads on along the same rows): nchw -> nhwc 32x64x56x56 1.3-1.4 /
      1.05-1.15x, 16x128x56x56 1.2 / 1.15x, 8x32x128x128 1.35 / 1.05x, ncdhw -> ndhwc
      4x32x32x64x64 1.35 / 1.07x faster;
    - a tile whose rows are a line each and follow each other (one region): nChw16c -> nchw
      32x64x56x56 1.2 / 1.05x, 16x128x56x56 1.2 / 1.25x, nCdhw16c -> ncdhw 1.4 / 1.1x faster
      (rows of 4 lines, nhwc -> nchw, gain 10 % from it);
    - a move that would prefetch at once (1) rows of TILE_PREFETCH_ROW bytes or more per
      item: the hardware prefetcher follows those, and the burst held up the item's own
      loads. Zen4, in one process, 1 / 2 threads, without against with: the bench's rand02
      of seed 1 (rows of 580 bytes) 1.2 / 1.11x, rand14 of seed 3 (1088) 1.5 / 1.05x, rand09
      of seed 2 (1152) 1.2 / 1.5x, rand11 of seed 2 (1856) 1.05 / 1.07x faster, rand10 and
      rand08 of seed 3 (872, 696) the same; abc -> cba with 16 rows of 512 and 1024 bytes
      1.46x and 1.3x at 1 thread. Rows of 256 bytes measured 0.9-1.26x: left."""
    if 2 * moved < llc_bytes() or _step(rows) < LINE:
        return 0
    line_rows = bn * spec.src_size == LINE and _evenly(rows, LINE)
    if line_rows or _quarters(spec, spec.src_size, convert) or (
            convert is None and not staged and bn > codegen.CHUNKS["tile_chunk"]):
        return 0
    how = _tile_prefetch_how(spec, lines, an, bn, convert)
    row = min(bn, codegen.CHUNKS["tile_chunk"]) * spec.esize  # bytes an item reads per row
    return 0 if convert is None and how == 1 and row >= TILE_PREFETCH_ROW else how


def _tile_prefetch_how(spec, lines, an, bn, convert) -> int:
    """How a tile that prefetches does (see _tile_prefetch): spread (2) or at once (1)."""
    tiles = -(-min(bn, codegen.CHUNKS["tile_chunk"]) // spec.tile)
    spread = min(lines * spec.tile_a, an) >= max(spec.tile_a, TILE_SPREAD) and tiles >= 4
    return 2 if convert is None and spread else 1


def _interleave_lines(spec, row_bytes, rows) -> int:
    """1 where an interleave reads its rows through a buffer, 2 KiB of one row after the
    other (codegen.CHUNKS["interleave_run"]; see the template): where more than L1_SHARED of
    its rows, row_bytes apart, fall in one set of the L1 data cache (planes of about a 4 KiB
    multiple). Read in place, such rows' streams evicted each other's lines and the ones the
    hardware prefetched for them: f32 nchw -> nChw16c of 1x64x64x64 took about 3x as long
    per byte as of 1x64x56x56; through the buffer 1.9 / 1.8x faster at 1 / 2 threads,
    4x64x64x64 1.35 / 1.55x, 1x16x128x128 1.65x, 16x64x64x64 1.1x, nChw8c 1x64x64x64 1.4x
    (Zen3, specialised). A line of each row at a time gained nothing."""
    sets = np.arange(rows) * row_bytes // LINE % L1_SETS
    return int(np.bincount(sets).max() > L1_SHARED)


def _tile_whole_lines(spec, b_tab, rows, b, even, starts) -> bool:
    """Whether a tile's stores fill whole destination lines, so that it may stream: every
    column starts a line (a call stores a line per column), or B's columns of `rows` elements,
    less than a line, follow each other from a line, their rows a multiple of the tile's W
    (single tiles, one after the other along A, fill a W-column block of lines: nchw ->
    nChw16c into s8, 16-byte columns: f32 -> s8 of 8x64x128x128 1.2-1.3x faster streaming at
    1 thread, 1.15-1.4x at 2, Zen5, specialised). And so at every outer position: `starts`,
    the piece's destination offset and outer strides (bytes), are whole lines. Else the
    columns start anywhere in a line and may go through the stage (_tile_staged): f32 abc ->
    cba 2029x32x147 (B the 147 c, 259712 bytes apart; the outer b 8116) 1.2x faster staged
    than with plain stores at 1 and 2 threads (Zen4)."""
    W = spec.tile
    packed = (even and b.dst == rows and rows < spec.tile_a and rows % W == 0
              and W * rows * spec.esize % LINE == 0 and b.n >= W and b_tab[0] % LINE == 0)
    return (packed or not (b_tab % LINE).any()) and all(k % LINE == 0 for k in starts)


def _tile_buffer(spec, moved, lines, an, bn, src_esize, convert) -> int:
    """Bytes of a converting tile's buffer taken from the heap, or 0 for its L1 buffer on the
    stack (codegen's cvt_tile_buffer): TILE_HEAP_BUFFER where the L1 one holds less than the
    item's whole rows, the conversion narrows to a quarter (f32 -> s8, u8), the item has a
    line's rows (spec.tile_a) at most, and the call moves (`moved`) half of llc_bytes() or
    more. The item then reads longer pieces of its rows, each in order, which the hardware
    prefetcher follows. Zen4, specialised, 1 / 2 threads: f32 -> s8 nchw -> nChw16c
    8x64x128x128 (rows of 64 KB, read 4 KB per item) 1.6 / 1.55x faster, rand10 1.2 / 1.2x;
    rand18's items of 128 rows 1.0 / 0.75x, f32 -> bf16 nchw -> nChw16c 1.15 / 0.85x; with
    the prefetch off as well, s8 -> f32 (rand06) 0.7x and a call in the cache (1x64x64x64 f32
    -> s8) 0.8x at 1 thread."""
    rows = min(lines * spec.tile_a, an)
    if not _quarters(spec, src_esize, convert) or rows > spec.tile_a or 2 * moved < llc_bytes():
        return 0
    whole = rows * bn * spec.esize <= codegen.CHUNKS["cvt_tile_buffer"]
    return 0 if whole else TILE_HEAP_BUFFER


def _tile_staged(spec, rows, lines, dst_nbytes, moved, convert) -> bool:
    """Whether a tile whose columns start anywhere in a line streams through a stage (the
    template's _stage_out: each line written once, whole, from the stage; the rows that end
    an item's columns carried to the next item, which goes along A): when a work item's
    columns have all their lines of rows (rows, destination padding included), a column
    holds TILE_STAGE_LINES of bytes or more, and the destination is half the call's bytes
    (`moved`) or more. Measured on Zen5 in alternating processes, specialised, 1 / 2
    threads: rand05 (f32, columns of 16380 bytes) 1.5-1.75 / 1.3x, rand06 (s8 -> f32, 8116
    bytes) 1.7 / 1.75x faster than plain stores; rand14 (f32 -> s8, into a fifth of the
    bytes) 0.75-0.8 / 1.0x, rand18 (the same share) 1.05 / 1.1-1.15x. A short column has a
    line or two streamed between its plain partial ones, and the stage costs more than
    they gain. Zen4, in one process, abc -> cba of R x 42 x K (40 MB of f32), 1 / 2 threads,
    staged against plain: a move of f32 columns of 152 and 1000 bytes 0.72x and 0.86 /
    0.86x, 2004 bytes 1.04 / 1.14x, 4004 1.24 / 1.22x, bf16 of 1002 bytes the same, 2002
    1.12x; s8 -> f32 of 152 bytes 0.7 / 0.79x (the bench's rand01 of seed 2, aBcd4b -> bcda
    with 38 rows, 0.5 / 0.6x), 300 bytes 0.85x, 396 0.9x, 492 1.16 / 1.23x, 1000 1.33 /
    1.44x; bf16 -> f32 of 152 bytes 0.81x, 396 1.12x, 1000 1.44x (but rand06 of seed 1,
    ABcd16b16a -> abdc with 123 rows, 0.88x)."""
    lines_needed = TILE_STAGE_LINES[convert is not None]
    return (rows >= lines * spec.tile_a and rows * spec.esize >= lines_needed * LINE
            and 2 * dst_nbytes >= moved)


def _tile_lined(spec) -> bool:
    """Whether a staged tile makes its columns' lines in registers instead of a stage (the
    template's _lined; `staged` 2) wherever its kernel can (KernelSpec.lined). Sapphire
    Rapids VM, alternating processes, specialised, 1 / 2 threads: rand05 (f32 dabc -> cdba,
    columns of 16380 bytes) 1.07 / 1.07x faster, rand06 (s8 -> f32, 8116 bytes) 1.05 /
    1.05-1.1x, rand04 (s8 -> f32, 3808 bytes) 1.02 / 1.0x."""
    return spec.lined


def _tile_even(rows, cols, row_step, col_step, convert) -> bool:
    """Whether a tile's micro kernels may address its rows and columns by strides instead of
    through the tables: B's columns are col_step apart in dst and, moving bytes, A's rows
    row_step apart in src (a conversion's rows are its buffer's, always evenly spaced). Two
    loads of table entries per row and column cost a C probe of nchw -> nhwc 8x256x28x28
    (in the cache, 1 thread) 25 % of its time."""
    return _evenly(cols, col_step) and (convert is not None or _evenly(rows, row_step))


def _step(rows) -> int:
    """The least distance between a tile's rows in src (0 for a single row)."""
    return int(np.abs(np.diff(rows)).min()) if len(rows) > 1 else 0


def _evenly(offsets, step) -> bool:
    """Whether a table's offsets are `step` apart, one after the other."""
    return bool(np.all(np.diff(offsets) == step))


def _gathered_from(nest) -> int:
    """The first node of a tile's B nest that does not continue it in src (its runs are
    gathered from there on), or len(nest)."""
    return next((k for k, n in enumerate(nest)
                 if n.src != math.prod(m.n for m in nest[:k]) * nest[0].src), len(nest))


def _linear(nest) -> Node:
    """A nest as one node: its size, the innermost node's strides (the kernels use the tables
    for the offsets, and the scale index is linear along a nest)."""
    return Node(math.prod(n.n for n in nest), nest[0].src, nest[0].dst, nest[0].scl)


class Plan:
    """`convert` is None (move bytes) or Conversion(src, dst, sum): copy pieces then run the
    conversion kernels; the values (scales, zero points, beta) come with each call.

    A plan run again is specialised (jit.py): from its `jit.SECOND_RUN`-th run on, a module of
    its own is built in the background, and the runs after that call it instead."""

    def __init__(self, problem, traffic: int, dst_nbytes: int, convert=None, choice=None):
        mod = registry.module()
        self.problem, self.traffic, self.convert = problem, traffic, convert
        self.dst_nbytes = dst_nbytes
        # the most threads a call runs on, worked out once: a small call takes 2 us in all
        self._most_threads = max(1, traffic // BYTES_PER_THREAD)
        # measured wisdom for this problem on this tier, else the registry's guess
        self.choice = choice or wisdom.lookup(self.key())
        if self.choice and len(self.choice.kinds) != len(problem.pieces):
            self.choice = None  # wisdom of a corrupted file: guess instead
        self._tasks = mod.ffi.new("gen_task[]", max(1, len(problem.pieces)))
        self._ntasks = len(problem.pieces)
        self._run = mod.lib.gen_run
        self._ffi = mod.ffi
        # (spec, fields) per piece; the fields hold the tables the tasks point to
        self.bound = bind(problem, dst_nbytes, convert, choice=self.choice, traffic=traffic)
        for task, (spec, fields) in zip(self._tasks, self.bound):
            task.fn = mod.ffi.addressof(mod.lib, spec.name)
            for key, value in fields.items():
                if isinstance(value, np.ndarray):
                    setattr(task.piece, key, mod.ffi.cast("const int64_t *", value.ctypes.data))
                elif value is None:
                    setattr(task.piece, key, mod.ffi.NULL)
                elif isinstance(value, list):
                    getattr(task.piece, key)[0:len(value)] = value
                else:
                    setattr(task.piece, key, value)
        # the kernels a call runs now ("jit:" and theirs once specialised)
        self.kernel = "+".join(dict.fromkeys(spec.name for spec, _ in self.bound))
        self.jit = jit.Runs(traffic, pieces=len(self.bound))

    def key(self) -> str:
        """The problem as wisdom knows it: tier, nest, conversion, destination size."""
        return wisdom.key(registry.isa(), self.problem, self.convert, self.dst_nbytes)

    def team(self, threads: int) -> int:
        """The threads a call asked for `threads` runs on."""
        return runtime.team(min(threads, self._most_threads))

    def run(self, src_addr: int, dst_addr: int, threads: int, attr=None) -> str:
        """`attr`: the conversion's gen_attr (cffi), None when moving bytes. Returns the
        kernel name of this call."""
        nthr = self.team(threads)
        at = attr if attr is not None else self._ffi.NULL
        special = self.jit.special
        if special is not None:
            special[0](src_addr, dst_addr, at, nthr)
            return special[1]
        self._run(src_addr, dst_addr, at, self._tasks, self._ntasks, nthr)
        self.jit.ran(self)
        return self.kernel

    def jit_parts(self):
        return self.bound, None


@functools.lru_cache(maxsize=256)
def cached(dims: tuple, src: Layout, dst: Layout, esize: int, dst_nbytes: int,
           convert=None, scl: "Layout | None" = None) -> Plan:
    """The plan of one reorder problem (isa fixed per process, so not part of the key).
    `esize` is dst's element size; `scl` indexes the scales of a conversion."""
    try:
        problem = normalise(dims, src, dst, esize, scl)
        if convert is None:
            problem = _interleaving(problem)
            esize = problem.esize  # the widened elements'
        src_esize = TABLE[convert.src].size if convert else esize
        reads = src_esize + (esize if convert and convert.sum else 0)
        traffic = 0
        for piece in problem.pieces:
            n = math.prod(node.n for node in piece.nodes)
            runs = n // piece.nodes[-1].n if piece.nodes else 1
            traffic += (n * (esize + piece.gap * esize) + (0 if piece.zero else n * reads)
                        + runs * piece.pad * esize)
        return Plan(problem, traffic, dst_nbytes, convert)
    except MemoryError:  # its offset tables
        raise Error(f"the plan of dims {dims} does not fit in memory") from None


def _interleaving(problem: Problem) -> Problem:
    """The problem in wider elements (problem.widened) where that lets a piece interleave
    whole runs (the interleave kind) that it moved one run at a time (README, "Kernel
    kinds": interleave; nChw4c -> nChw8c, 25.7 MB each way: s8 3.3x, f16 2x, f32 1.5x
    faster at 1 thread, Zen4)."""
    wide = widened(problem, max(space.INTERLEAVE_ESIZES))
    if wide is None:
        return problem
    firsts = [[o[0].kind for o in registry.options(*_choose_args(piece, p.esize, None))[:1]]
              for p in (problem, wide) for piece in p.pieces]
    old, new = firsts[:len(problem.pieces)], firsts[len(problem.pieces):]
    # every piece keeps a kernel (wide elements have only the interleave and run kinds)
    better = all(new) and new.count(["interleave"]) > old.count(["interleave"])
    return wide if better else problem


def zero_fill(dims, dst: Layout, esize: int, dst_nbytes: int) -> Plan:
    """A plan writing only the padding of `dst` (for ops whose kernels write the real part)."""
    pieces = tuple(p for p in normalise(dims, dst, dst, esize, fuse=False).pieces if p.zero)
    problem = Problem(esize, pieces)
    traffic = sum(math.prod(n.n for n in p.nodes) for p in pieces) * esize
    return Plan(problem, traffic, dst_nbytes)
