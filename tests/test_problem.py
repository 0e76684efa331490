"""The layout normaliser, table-driven: descriptors in, expected nests out; and the
planner's per-piece choices (kernel kind, tile lines)."""
import numpy as np
import pytest

import gen
from gen import plan, problem, registry, space
from gen.isa import TIERS
from gen.problem import Layout, Node, normalise, simplify

import convert_reference as cref
import reference as ref


def nest(dims, src, dst, esize=4):
    s = gen.MemoryDesc(dims, "f32", src)
    d = gen.MemoryDesc(dims, "f32", dst)
    return normalise(dims, Layout.of_desc(s), Layout.of_desc(d), esize).pieces


def nodes(*triples):
    return tuple(Node(*t) for t in triples)


CASES = [
    # same layout: one contiguous run
    ((2, 3, 4, 5), "nchw", "nchw", [(0, 0, nodes((120, 1, 1)), False, 0)]),
    # plain transpose: n stays outer, h and w merge
    ((2, 3, 4, 5), "nchw", "nhwc",
     [(0, 0, nodes((2, 60, 60), (20, 1, 3), (3, 20, 1)), False, 0)]),
    # blocked without padding: c splits at 16 on the dst side
    ((2, 32, 4, 5), "nchw", "nChw16c",
     [(0, 0, nodes((4, 320, 320), (20, 1, 16), (16, 20, 1)), False, 0)]),
    # padding: c = 3 of 16; the other 13 are zeros after each run of 3
    ((1, 3, 2, 2), "nchw", "nChw16c", [(0, 0, nodes((4, 1, 16), (3, 4, 1)), False, 13)]),
    # the same with n = 2: the copy keeps n and hw apart (source strides), the zeros merge them
    ((2, 3, 2, 2), "nchw", "nChw16c",
     [(0, 0, nodes((2, 12, 64), (4, 1, 16), (3, 4, 1)), False, 13)]),
    # a single padded element (3 of 4): its zero piece lost its size-1 node, and still fuses
    ((2, 3, 2, 2), "nchw", "aBcd4b",
     [(0, 0, nodes((2, 12, 16), (4, 1, 4), (3, 4, 1)), False, 1)]),
    # blocks that nest: 8c into 16c, 20 channels = one full 16-block and a tail of 4
    ((1, 20, 1, 1), "nChw8c", "nChw16c",
     [(0, 0, nodes((16, 1, 1),), False, 0), (16, 16, nodes((4, 1, 1),), False, 12)]),
    # padding that does not continue a run stays a zero piece: here c is outer to n in dst
    ((1, 3, 1, 2), "nchw", "ABcd16b16a",
     [(0, 0, nodes((2, 1, 256), (3, 2, 16)), False, 0),
      (0, 1, nodes((32, 0, 16), (15, 0, 1)), True, 0),
      (0, 48, nodes((2, 0, 256), (13, 0, 16)), True, 0)]),
]


@pytest.mark.parametrize("dims,src,dst,expected", CASES,
                         ids=[f"{c[1]}->{c[2]}" for c in CASES])
def test_nests(dims, src, dst, expected):
    got = [(p.src_off, p.dst_off, p.nodes, p.zero, p.pad) for p in nest(dims, src, dst)]
    assert got == expected


def test_simplify_drops_merges_and_orders():
    got = simplify([Node(1, 7, 7), Node(4, 1, 6), Node(3, 4, 1), Node(2, 12, 24)])
    # (2,12,24) and (4,1,6) do not merge: 12 != 1 * 4
    assert got == nodes((2, 12, 24), (4, 1, 6), (3, 4, 1))
    assert simplify([Node(3, 1, 1), Node(2, 3, 3)]) == nodes((6, 1, 1))


def dst_hits(pieces, nbytes):
    """How many times the pieces write each destination element (their pads and gaps
    included)."""
    hits = [0] * (nbytes // 4)
    for p in pieces:
        starts = [p.dst_off]  # of the runs of the innermost node
        for n in p.nodes[:-1]:
            starts = [o + i * n.dst for o in starts for i in range(n.n)]
        inner = p.nodes[-1]
        for o in starts:
            for i in range(inner.n):
                for k in range(1 + p.gap):  # the element, then its gap
                    hits[o + i * inner.dst + k] += 1
            for k in range(p.pad):  # the pad follows the run (dst stride 1)
                hits[o + inner.n + k] += 1
    return hits


def test_every_dst_element_written_once():
    """Copy and zero pieces of a padded double-blocked pair tile dst's padded space."""
    dims = (17, 35, 3, 3)
    dst = gen.MemoryDesc(dims, "f32", "OIhw4i16o4i")
    pieces = normalise(dims, Layout.of_desc(gen.MemoryDesc(dims, "f32", "oihw")),
                       Layout.of_desc(dst), 4).pieces
    assert dst_hits(pieces, dst.nbytes) == [1] * (dst.nbytes // 4)


def test_padding_up_to_the_next_run():
    """a = 1 of a 16a block and b = 20 of two 16b blocks: one zero piece of 15 rows follows
    the runs of both copy pieces (16 b, then the tail's 4 b and 12 zeros of b): each copy
    pads on to the next run, and nothing else writes."""
    dims = (1, 20, 2, 1, 3)
    dst = gen.MemoryDesc(dims, "f32", "ABcde16a16b")
    pieces = normalise(dims, Layout.of_desc(gen.MemoryDesc(dims, "f32", "cedba")),
                       Layout.of_desc(dst), 4).pieces
    assert [(p.nodes[-1].n, p.pad, p.zero) for p in pieces] == [(16, 240, False),
                                                               (4, 252, False)]
    assert dst_hits(pieces, dst.nbytes) == [1] * (dst.nbytes // 4)


GAPS = [((35, 9, 3, 5), "badc", "ABcd4b16a4b", [0, 3, 0, 3]),  # 9 b: 1 of the third 4b
        ((2, 5, 3, 3), "nchw", "aBcd2b", [0, 1]),  # 5 c: 1 of the third 2c
        ((17, 35, 3, 3), "oihw", "OIhw4i16o4i", [0, 0, 0, 0])]  # 35 i: 3 of the last 4i


@pytest.mark.parametrize("dims,src,dst,gaps", GAPS)
def test_zeros_between_elements_fuse_into_the_copy(dims, src, dst, gaps):
    """Where a double block's inner block is padded after each element of the copy (b = 9
    of ABcd4b16a4b's 16: the 9th b alone in its 4b group), the zeros after each element
    are the copy piece's gap; each destination element is written once. (Where the real part
    is a run of more elements, 3 of OIhw4i16o4i's 4 i, the zeros follow each run: its pad.)"""
    d = gen.MemoryDesc(dims, "f32", dst)
    pieces = normalise(dims, Layout.of_desc(gen.MemoryDesc(dims, "f32", src)),
                       Layout.of_desc(d), 4).pieces
    assert [p.gap for p in pieces if not p.zero] == gaps
    assert dst_hits(pieces, d.nbytes) == [1] * (d.nbytes // 4)


def test_padding_past_the_run_limit_stays_zero_pieces(monkeypatch):
    """Over PITCH_RUNS runs the exact check is not made: the zero piece stays, still right."""
    monkeypatch.setattr(problem, "PITCH_RUNS", 8)
    dims = (1, 20, 2, 1, 3)
    dst = gen.MemoryDesc(dims, "f32", "ABcde16a16b")
    pieces = normalise(dims, Layout.of_desc(gen.MemoryDesc(dims, "f32", "cedba")),
                       Layout.of_desc(dst), 4).pieces
    assert [p.zero for p in pieces].count(True) == 1
    assert dst_hits(pieces, dst.nbytes) == [1] * (dst.nbytes // 4)


def test_blocks_that_do_not_nest_are_refused():
    dims = (1, 24, 2, 2)
    with pytest.raises(gen.Error, match="do not nest"):
        nest(dims, "aBcd8b", "aBcd6b")


def test_tile_takes_nests_of_nodes():
    """The tile's B may continue in src over a second node (oihw -> OIhw16i16o: the 9 hw and
    16 i of a weight row are 144 contiguous floats) and its A in dst (a 4-element block 4b
    takes the node that continues it in dst as more rows); the rest stay outer loops."""
    from gen import registry
    weights = nodes((16, 36864, 36864), (16, 144, 2304), (9, 1, 256), (16, 9, 16),
                    (16, 2304, 1))
    spec, a, b, outer = registry.choose(weights, False, 4)
    assert spec.kind == "tile"
    assert a == nodes((16, 2304, 1)) and b == nodes((9, 1, 256), (16, 9, 16))
    assert outer == list(nodes((16, 36864, 36864), (16, 144, 2304)))
    block4 = nodes((18, 1, 456320), (22, 11520, 19840), (31, 256320, 640), (160, 18, 4),
                   (4, 2880, 1))
    spec, a, b, outer = registry.choose(block4, False, 4)
    assert spec.kind == "tile"
    assert a == nodes((4, 2880, 1), (160, 18, 4)) and b == nodes((18, 1, 456320))


def test_converting_tile_rows_take_the_nodes_that_continue_them(cache_size):
    """A conversion's B takes the nodes that continue its rows in src up to
    registry.B_CVT_ELEMS elements (bdac -> aBcd4b: 167 c, then the 6 a that follow them, 1002
    elements), a move's stops at B_ELEMS (167); past the cache, its items prefetch the next
    item's rows as they convert theirs (f32 -> f16: a conversion to a quarter does not). The
    results are the reference's, from 1, 2 and 3 threads."""
    from gen import registry
    rows = nodes((6, 167, 1267864), (12, 585168, 97528), (167, 1, 584), (146, 1002, 4),
                 (4, 146292, 1))
    _, a, b, _ = registry.choose(rows, False, 1, convert=("f32", "u8"))
    assert a == nodes((4, 146292, 1), (146, 1002, 4))
    assert b == nodes((167, 1, 584), (6, 167, 1267864))
    _, _, b, _ = registry.choose(rows, False, 4)
    assert b == nodes((167, 1, 584))
    dims = (6, 12, 167, 23)
    x = np.random.default_rng(5).integers(0, 100, dims).astype(np.float32)
    src = gen.Memory.from_array(x, "bdac")
    cache_size(1)  # a call past the cache: prefetching
    prim = gen.Reorder(src.desc, gen.MemoryDesc(dims, "f16", "aBcd4b"), scales=[0.5])
    assert [(f["b_n"], f["prefetch"]) for spec, f in prim._plan.bound
            if spec.kind == "tile"] == [(1002, 1)]
    for threads in (1, 2, 3):
        out = gen.Memory(prim.dst_desc)
        prim(src, out, threads=threads)
        assert np.array_equal(out.to_array(), (x * np.float32(0.5)).astype(np.float16)), threads


# (dims, src dtype, tag, dst dtype, tag, attributes, pieces with a gap); each moves about
# 1 MB, so that 2 and 3 threads run
GAP_CONVERSIONS = [
    # rand10's b = 9 of ABcd4b16a4b's 16: each 9th b followed by 3 zero bytes, converted
    ((35, 9, 17, 29), "f32", "badc", "s8", "ABcd4b16a4b", dict(scales=[0.5]), 2),
    ((35, 9, 17, 29), "f32", "badc", "bf16", "ABcd4b16a4b", {}, 2),
    ((35, 9, 17, 29), "s8", "badc", "s8", "ABcd4b16a4b", {}, 2),  # a move
    # with a sum: the elements read from the destination, the gaps still zeros
    ((35, 9, 17, 29), "f32", "badc", "s8", "ABcd4b16a4b", dict(scales=[0.5], sum_scale=0.25),
     2),
    # 5 channels: the next pixel's channel right after each gap
    ((16, 5, 67, 69), "u8", "nchw", "u8", "aBcd4b", {}, 1),
    ((6, 5, 67, 69), "f32", "nchw", "bf16", "aBcd2b", {}, 1),  # a gap of one element
    # blocks that do not nest: the channels unrolled, one gap piece among their pieces
    ((6, 7, 67, 69), "f32", "aBcd4b", "s8", "aBcd6b", {}, 1),
    # one channel of 16: 256-element blocks of rows of 16 and 32 bytes (each row built
    # whole: codegen's strided_dense), of 64 (element by element), with a sum
    ((20, 1, 9, 150), "f32", "nchw", "s8", "aBcd16b", dict(scales=[0.5]), 1),
    ((20, 1, 9, 150), "f32", "nchw", "f32", "aBcd16b", {}, 1),
    ((20, 1, 9, 150), "f32", "nchw", "bf16", "aBcd16b", dict(sum_scale=0.5), 1),
]


@pytest.mark.parametrize("dims,st,sf,dt,df,attrs,gaps", GAP_CONVERSIONS)
def test_strided_kernel_writes_the_gap_after_each_element(dims, st, sf, dt, df, attrs, gaps,
                                                          monkeypatch):
    """A piece with a gap (zeros after each element, problem._fuse_gaps) runs on the
    strided kernel, which writes them: the results are the reference's and the padding is
    zeros, from 1, 2 and 3 threads, over a destination of nonzero bytes, with plain and with
    streaming stores."""
    monkeypatch.setattr(plan, "cached", plan.cached.__wrapped__)  # each primitive plans anew
    x = np.random.default_rng(3).integers(-60, 200, dims).astype(np.float32)
    src = gen.Memory.from_array(x.astype(cref.np_dtype(st)), sf)
    for stream_bytes in (plan.STREAM_BYTES, 0):
        monkeypatch.setattr(plan, "STREAM_BYTES", stream_bytes)
        prim = gen.Reorder(src.desc, gen.MemoryDesc(dims, dt, df), **attrs)
        gapped = [(spec.kind, f["stream"] > 0) for spec, f in prim._plan.bound if f["gap"]]
        assert gapped == [("strided", stream_bytes == 0)] * gaps
        assert prim._plan.traffic >= 3 * plan.BYTES_PER_THREAD
        for threads in (1, 2, 3):
            out = gen.Memory(prim.dst_desc)
            out.data[:] = 0xA5
            want = cref.reference_reorder(src.to_array(), dt, **attrs, dst_old=out.to_array())
            prim(src, out, threads=threads)
            cref.assert_same(out.to_array(), want, what=f"{threads} threads")
            assert bytes(out.data) == ref.pack(want, df, out.desc.nbytes).tobytes(), threads


GATHERS = [
    # rand15's 5 of 8 channels: runs of 20 bytes, 32 apart, then the 4 c that continue them
    ((60, 13, 4, 46), "f32", "aBcd8b", "u8", "dbca", dict(scales=[0.5], dst_zero_point=3)),
    # rows of 5 x 300 x 3 elements: several chunks and stage steps, split inside a run
    ((70, 13, 3, 300), "f32", "aBcd8b", "s8", "dbca", dict(scales=[0.25])),
    # widening: rand06's 10 of 16 channels, runs of 10 bytes 16 apart
    ((40, 42, 33), "s8", "aBc16b", "f32", "cba", dict(scales=[0.5])),
]


@pytest.mark.parametrize("dims,st,sf,dt,df,attrs", GATHERS)
def test_converting_tile_gathers_runs_shorter_than_a_line(dims, st, sf, dt, df, attrs):
    """A conversion whose B's runs are shorter than a line, its rows a line or more apart,
    takes the node of the shortest source step past them into B, and the nodes that continue
    it (each row's runs then gathered before they convert): one work item reads a row's
    lines once, where one item per position of that node read each again. The results are
    the reference's, from 1, 2 and 3 threads."""
    x = np.random.default_rng(7).integers(-60, 200, dims).astype(np.float32)
    src = gen.Memory.from_array(x.astype(cref.np_dtype(st)), sf)
    prim = gen.Reorder(src.desc, gen.MemoryDesc(dims, dt, df), **attrs)
    gathered = [f for spec, f in prim._plan.bound if spec.kind == "tile" and f["c_n"] > 1]
    assert gathered
    want = cref.reference_reorder(src.to_array(), dt, **attrs)
    for threads in (1, 2, 3):
        out = gen.Memory(prim.dst_desc)
        prim(src, out, threads=threads)
        cref.assert_same(out.to_array(), want, what=f"{threads} threads")


def test_gathered_b_of_the_tile():
    """rand15's partial block gathers the 46 d (32 bytes apart) and the 4 c that continue
    them; rows 16 bytes apart (rand02, f32 -> bf16 ABcd4b16a4b -> bdca) keep their B, and
    so does a move (its tile reads src directly), and a B that would pass GATHER_ELEMS."""
    rows = nodes((46, 8, 45032), (5, 1, 3464), (4, 368, 866), (866, 2944, 1))
    _, a, b, _ = registry.choose(rows, False, 1, convert=("f32", "u8"))
    assert a == nodes((866, 2944, 1))
    assert b == nodes((5, 1, 3464), (46, 8, 45032), (4, 368, 866))
    _, _, b, _ = registry.choose(rows, False, 4)
    assert b == nodes((5, 1, 3464))
    near = nodes((11, 256, 5130), (4, 1, 56430), (4, 64, 225720), (176, 4, 1))
    _, _, b, _ = registry.choose(near, False, 2, convert=("f32", "bf16"))
    assert b == nodes((4, 1, 56430))
    for n, gathers in ((100, True), (1000, False)):  # B of at most GATHER_ELEMS elements
        rows = nodes((n, 12, 640), (10, 1, 64), (64, 12 * n, 1))
        _, _, b, _ = registry.choose(rows, False, 1, convert=("f32", "u8"))
        assert (b == nodes((10, 1, 64), (n, 12, 640))) == gathers, n
        assert registry.GATHER_ELEMS < 10 * 1000


def test_tile_splits_a_long_innermost_node_only_without_padding():
    """A tile's row table holds at most TILE_ROWS rows: a longer innermost node becomes two
    (its power-of-two part as A), unless padding follows each run of A (written after A,
    which must then stay whole); without a power-of-two part of 2^12 or more, no tile."""
    from gen import registry
    rows = registry.TILE_ROWS
    n = 2 * rows
    spec, a, b, outer = registry.choose(nodes((16, 1, n), (n, 16, 1)), False, 4)
    assert spec.kind == "tile"
    assert a == nodes((rows, 16, 1)) and b == nodes((16, 1, n))
    assert outer == list(nodes((2, 16 * rows, rows)))
    spec, a, b, outer = registry.choose(nodes((16, 1, n + 4096), (n, 16, 1)), False, 4,
                                        pad=4096)
    assert spec.kind == "tile" and a == nodes((n, 16, 1)) and outer == []
    odd = rows + 11
    kinds = [o[0].kind for o in registry.options(nodes((16, 1, odd), (odd, 16, 1)), False, 4)]
    assert "tile" not in kinds


@pytest.mark.parametrize("tier", registry.supported())
def test_tile_reads_rows_narrower_than_a_row_under_a_mask(tier):
    """A B narrower than a tile row whose rows lie anywhere takes the tile where the tier
    has masked loads of the element size (the rows are read under a mask: test_guard_pages),
    else the strided kernel; rows of 3 that follow each other stay strided, rows of 2 or 4
    that follow each other take the narrow path. A conversion reads its buffer's rows under
    a mask where they follow each other in src, or where rows apart of 2- or 4-byte source
    elements share one scale (gathered and converted in one call)."""
    def kind(esize, *nest, convert=None):
        return registry.choose(nodes(*nest), False, esize, convert=convert, tier=tier)[0].kind
    for esize in (1, 2, 4, 8):
        vector = TIERS[tier].vectors.get(space.TILE_WIDTH[esize] * esize)
        masked = "tile" if vector and esize in vector.maskload else "strided"
        assert kind(esize, (3, 1, 300), (300, 16, 1)) == masked  # nChw16c -> nchw, 3 channels
        assert kind(esize, (3, 1, 300), (300, 3, 1)) == "strided"  # nhwc -> nchw, 3 channels
        if esize != 8:  # (a row of 4 elements: 5 columns are more than a row)
            assert kind(esize, (5, 1, 300), (300, 5, 1)) == masked
        assert kind(esize, (2, 1, 300), (300, 2, 1)) == ("tile" if vector else "strided")
        if vector and 4 in space.KernelSpec("reorder", "tile", esize, False, tier).narrow:
            # moved rows of 4 that follow each other 16 at a time (ABcd4b16a4b -> bdca): the
            # narrow path's loads take W / 4 rows each; 2 at a time do not fit them
            width = space.TILE_WIDTH[esize]
            assert kind(esize, (4, 1, 3000), (8, 64, 16), (16, 4, 1)) == "tile"
            assert kind(esize, (4, 1, 3000), (64, 64, 2), (2, 4, 1)) == (
                "tile" if width // 4 <= 2 else "strided")
    vector = TIERS[tier].vectors.get(space.CVT_TILE_WIDTH[2] * 2)
    masked = "tile" if vector and 2 in vector.maskload else "strided"
    f32_bf16 = ("f32", "bf16")
    assert kind(2, (5, 1, 300), (300, 5, 1), convert=f32_bf16) == masked
    assert kind(2, (3, 1, 300), (300, 16, 1), convert=f32_bf16) == masked  # rows apart
    assert kind(2, (3, 1, 300, 1), (300, 16, 1, 0), convert=f32_bf16) == "strided"  # scales/c
    vector = TIERS[tier].vectors.get(space.CVT_TILE_WIDTH[4] * 4)
    masked = "tile" if vector and 4 in vector.maskload else "strided"
    assert kind(4, (3, 1, 300), (300, 16, 1), convert=("bf16", "f32")) == masked
    assert kind(4, (3, 1, 300), (300, 16, 1), convert=("s8", "f32")) == "strided"  # 1-byte src


def tile_lines(dims, src, dst, src_strides=None):
    s = gen.MemoryDesc(dims, "f32", src, strides=src_strides)
    d = gen.MemoryDesc(dims, "f32", dst)
    problem_ = normalise(dims, Layout.of_desc(s), Layout.of_desc(d), 4)
    return [f["lines"] for spec, f in plan.bind(problem_, d.nbytes) if spec.kind == "tile"]


def test_tile_lines_follow_the_source_block(monkeypatch, cache_size):
    """A tile's work item takes 4 destination lines per row when its source rows follow each
    other in a block of at most TILE_BLOCK bytes (4 lines x 16 rows x B floats), else, B a
    tile wide or more, 1 where llc_bytes() is known (AMD) and 2 where it is not (a narrower
    B: 2); each gives the bytes of a NumPy transpose. A conversion that widens takes 4 where
    its rows lie closer than a line (s8 -> f32 of dcba -> aBcd8b: rows of 63 bytes), else 2
    (aBc16b -> cba: rows 7 KB apart)."""
    def cvt_lines(dims, src, dst):
        return [f["lines"] for spec, f in bound(dims, src, dst, ("s8", "f32"))
                if spec.kind == "tile"]
    assert cvt_lines((63, 81, 8, 119), "dcba", "aBcd8b") == [4]
    assert cvt_lines((20, 42, 147), "aBc16b", "cba")[:1] == [2]
    assert tile_lines((2, 32, 7, 9), "nChw16c", "nchw") == [4]
    assert tile_lines((2, 40, 7, 9), "nhwc", "nchw") == [4]
    assert plan.TILE_BLOCK == 4 * 16 * 192 * 4
    assert tile_lines((2, 192, 7, 9), "nhwc", "nchw") == [4]
    for llc, lines in ((32 << 20, 1), (0, 2)):
        cache_size(llc)
        assert tile_lines((2, 200, 7, 9), "nhwc", "nchw") == [lines]  # the block is too large
        assert tile_lines((2, 40, 30, 30), "nchw", "nhwc") == [lines]
        # a padded pitch (w rows of 9 in 16): the tile's source rows, channels, 7 x 16 apart
        assert tile_lines((2, 40, 7, 9), None, "nhwc", (40 * 7 * 16, 7 * 16, 16, 1)) == [lines]
    # channels 16 apart, 5 pixels: B under a tile's width
    assert tile_lines((2, 40, 1, 5), None, "nhwc", (40 * 16, 16, 16, 1)) == [2]
    # 99 rows of A: two work items of 4 lines, four of 2, seven of 1
    x = np.random.default_rng(5).standard_normal((3, 40, 9, 11)).astype(np.float32)
    src = gen.MemoryDesc(x.shape, "f32", "nhwc")
    nhwc = gen.Memory(src, np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
    monkeypatch.setattr(plan, "cached", plan.cached.__wrapped__)  # each primitive plans anew
    for lines in (4, 2, 1):
        monkeypatch.setattr(plan, "_tile_lines", lambda *args: lines)
        for threads in (1, 2):
            out = gen.Memory(gen.MemoryDesc(x.shape, "f32", "nchw"))
            prim = gen.Reorder(src, out.desc)
            assert [f["lines"] for _, f in prim._plan.bound] == [lines]
            prim(nhwc, out, threads=threads)
            assert bytes(out.data) == x.tobytes()


@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32", "float64"])
def test_few_channels_into_blocks_interleave_with_zero_rows(dtype, monkeypatch):
    """nchw -> a channel block wider than the channels (3 of 8, 3 of 4, 3 of 16) is the
    interleave kind with the block's padding as zero rows, not a tile transposing the zeros;
    11 channels of 8 are a full block and a padded one, 2 of 2 a plain interleave (19 of 16: a
    full block and 3 channels, both interleaved). Same bytes as the reference packing, with
    and without streaming stores, at 1 and 2 threads, with tails (99 pixels) and without a
    whole vector step (3 pixels)."""
    from reference import pack
    monkeypatch.setattr(plan, "cached", plan.cached.__wrapped__)  # each primitive plans anew
    cases = [((2, 3, 9, 11), "aBcd8b", "interleave8"), ((2, 3, 1, 3), "aBcd8b", "interleave8"),
             ((2, 3, 9, 11), "aBcd16b", "interleave16"),
             ((2, 19, 9, 11), "aBcd16b", "interleave16"),
             ((2, 3, 9, 11), "aBcd4b", "interleave4"), ((3, 2, 9, 11), "aBcd2b", "interleave2"),
             ((2, 11, 9, 11), "aBcd8b", "interleave8")]
    rng = np.random.default_rng(6)
    for dims, tag, kind in cases:
        x = rng.integers(0, 256, int(np.prod(dims)) * np.dtype(dtype).itemsize,
                         dtype=np.uint8).view(dtype).reshape(dims)
        src = gen.Memory(gen.MemoryDesc(dims, dtype, "nchw"), x)
        for stream_bytes in (plan.INTERLEAVE_STREAM_BYTES, 0):
            monkeypatch.setattr(plan, "INTERLEAVE_STREAM_BYTES", stream_bytes)
            monkeypatch.setattr(plan, "STREAM_BYTES", stream_bytes)
            prim = gen.Reorder(src.desc, gen.MemoryDesc(dims, dtype, tag))
            assert kind in prim.kernel, (dims, tag, prim.kernel)
            assert "tile" not in prim.kernel, prim.kernel
            assert {f["stream"] > 0 for spec, f in prim._plan.bound
                    if spec.kind == "interleave"} == {stream_bytes == 0}
            for threads in (1, 2):
                out = gen.Memory(prim.dst_desc)
                out.data[:] = 0xA5  # the padding must be written
                prim(src, out, threads=threads)
                assert bytes(out.data) == pack(x, tag).tobytes(), (dims, tag, threads)


@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
def test_interleave_reads_rows_that_share_cache_sets_through_a_buffer(dtype, monkeypatch):
    """Channel rows a 4 KiB multiple apart (planes of 64 x 64 f32, 64 x 32 f16, 64 x 64 u8,
    or a row pitch of 4 KiB) all fall in one L1 set: the interleave reads them through its
    buffer (lines 1); planes of 56 x 56 read in place (0). Same bytes as the reference
    packing, with padded channels (19 of 16, 5 of 8), rows that end in part of a buffered
    step (1000 of 4 KiB), streaming or not, at 1 and 2 threads."""
    from reference import pack
    monkeypatch.setattr(plan, "cached", plan.cached.__wrapped__)  # each primitive plans anew
    size = np.dtype(dtype).itemsize
    side = {1: 64, 2: 32, 4: 64}[size]  # a plane of 4096 // size elements or 16 KiB
    pitch = 4096 // size
    rng = np.random.default_rng(9)
    # (a block of 16 channels and one of 3, whose 3 rows share sets with room to spare)
    for dims, tag, strided, lines in [((2, 19, 64, side), "aBcd16b", False, [1, 0]),
                                      ((2, 5, 64, side), "aBcd8b", False, [1]),
                                      ((2, 19, 1, 1000), "aBcd16b", True, [1, 0]),
                                      ((2, 19, 56, 56), "aBcd16b", False, [0, 0])]:
        x = rng.integers(0, 256, int(np.prod(dims)) * size, dtype=np.uint8).view(
            dtype).reshape(dims)
        if strided:  # each channel's 1000 elements at the start of its 4 KiB
            n, c, _, w = dims
            raw = np.zeros((n, c, 1, pitch), dtype)
            raw[..., :w] = x
            src = gen.Memory(gen.MemoryDesc(dims, dtype, strides=(c * pitch, pitch, pitch, 1)),
                             raw)
        else:
            src = gen.Memory(gen.MemoryDesc(dims, dtype, "nchw"), x)
        for stream_bytes in (plan.INTERLEAVE_STREAM_BYTES, 0):
            monkeypatch.setattr(plan, "INTERLEAVE_STREAM_BYTES", stream_bytes)
            prim = gen.Reorder(src.desc, gen.MemoryDesc(dims, dtype, tag))
            assert [(spec.kind, f["lines"]) for spec, f in prim._plan.bound] == [
                ("interleave", k) for k in lines], (dims, prim.kernel)
            for threads in (1, 2):
                out = gen.Memory(prim.dst_desc)
                out.data[:] = 0xA5  # the padding must be written
                prim(src, out, threads=threads)
                assert bytes(out.data) == pack(x, tag).tobytes(), (dims, tag, threads)


def test_interleave_with_a_short_b_goes_after_the_tile(monkeypatch):
    """Where B is shorter than the interleave's vector step, a tile that fits goes first: s8
    aBcd8b -> ABcd16b16a (rand08's layouts; B, the 8 channels of a source block, against 32
    lanes) is the tile, on tiers with masked 1-byte loads; a B of a vector step or more stays
    the interleave's. Same bytes as the reference packing."""
    from reference import pack
    monkeypatch.setattr(plan, "cached", plan.cached.__wrapped__)
    rng = np.random.default_rng(8)
    for dims, tags, first in [((35, 19, 6, 4), ("aBcd8b", "ABcd16b16a"), "tile"),
                              ((2, 3, 9, 11), ("nchw", "aBcd16b"), "interleave")]:
        x = rng.integers(0, 256, int(np.prod(dims)), dtype=np.uint8).reshape(dims)
        src = gen.Memory.from_array(x, tags[0])
        prim = gen.Reorder(src.desc, gen.MemoryDesc(dims, "u8", tags[1]))
        kinds = [spec.kind for spec, _ in prim._plan.bound]
        if first == "interleave" or space.KernelSpec("reorder", "tile", 1, False,
                                                     registry.isa()).masked:
            assert kinds[0] == first, (dims, prim.kernel)
        out = gen.Memory(prim.dst_desc)
        out.data[:] = 0xA5
        prim(src, out)
        assert bytes(out.data) == pack(x, tags[1]).tobytes(), dims


def test_widened_nests():
    """problem.widened: runs contiguous on both sides become elements of up to `most` bytes,
    every other stride, offset and pad divided by the runs' factor; a run followed by padding
    stays the innermost node, even of one element. None where a piece's innermost node is not
    contiguous on both sides."""
    def layout(dims, tag):
        return Layout.of_desc(gen.MemoryDesc(dims, "u8", tag))

    dims = (3, 20, 5, 7)  # 5 blocks of 4 into 2 blocks of 8 and one of 4 (+ 4 zeros)
    wide = problem.widened(normalise(dims, layout(dims, "aBcd4b"), layout(dims, "aBcd8b"), 1),
                           32)
    assert wide.esize == 4
    assert [(p.src_off, p.dst_off, p.nodes, p.pad) for p in wide.pieces] == [
        (0, 0, nodes((3, 175, 210), (2, 70, 70), (35, 1, 2), (2, 35, 1)), 0),
        (140, 140, nodes((3, 175, 210), (35, 1, 2), (1, 1, 1)), 1)]
    dims = (2, 16, 3, 3)  # f32 runs of 8: elements of 32 bytes
    wide = problem.widened(normalise(dims, layout(dims, "aBcd8b"), layout(dims, "aBcd16b"), 4),
                           32)
    assert wide.esize == 32
    assert [p.nodes for p in wide.pieces] == [nodes((2, 18, 18), (9, 1, 2), (2, 9, 1))]
    assert problem.widened(normalise(dims, layout(dims, "aBcd8b"), layout(dims, "aBcd16b"), 4),
                           16).esize == 16
    assert problem.widened(normalise(dims, layout(dims, "nchw"), layout(dims, "nhwc"), 4),
                           32) is None


@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32", "float64"])
def test_blocks_into_larger_blocks_interleave_whole_runs(dtype, monkeypatch):
    """A move into larger blocks (4c -> 8c, 8c -> 16c, 2c -> 8c, 4c -> 16c in 3-D) interleaves
    the source blocks' runs (2 to 32 bytes) as elements, the destination block's padding (20 or
    24 channels) as zero rows; runs longer than 32 bytes (f64 8c -> 16c) stay the run
    kind. Same bytes as the reference packing, with and without streaming stores, at 1 and 2
    threads."""
    from reference import pack
    monkeypatch.setattr(plan, "cached", plan.cached.__wrapped__)  # each primitive plans anew
    cases = [((2, 20, 5, 37), "aBcd4b", "aBcd8b"), ((2, 24, 5, 9), "aBcd8b", "aBcd16b"),
             ((2, 24, 5, 9), "aBcd2b", "aBcd8b"), ((2, 16, 3, 4, 5), "aBcde4b", "aBcde16b"),
             ((3, 32, 1, 3), "aBcd8b", "aBcd16b")]  # 3 pixels: no whole vector step
    rng = np.random.default_rng(7)
    size = np.dtype(dtype).itemsize
    for dims, tag_src, tag_dst in cases:
        x = rng.integers(0, 256, int(np.prod(dims)) * size, dtype=np.uint8).view(dtype)
        x = x.reshape(dims)
        src = gen.Memory.from_array(x, tag_src)
        run, groups = int(tag_src[-3 if tag_src[-3].isdigit() else -2:-1]), 0
        groups = int(tag_dst[-3 if tag_dst[-3].isdigit() else -2:-1]) // run
        kind = f"interleave{groups}" if run * size <= 32 else "run"
        for stream_bytes in (plan.INTERLEAVE_STREAM_BYTES, 0):
            monkeypatch.setattr(plan, "INTERLEAVE_STREAM_BYTES", stream_bytes)
            monkeypatch.setattr(plan, "STREAM_BYTES", stream_bytes)
            prim = gen.Reorder(src.desc, gen.MemoryDesc(dims, dtype, tag_dst))
            assert kind in prim.kernel, (dims, tag_src, tag_dst, prim.kernel)
            for threads in (1, 2):
                out = gen.Memory(prim.dst_desc)
                out.data[:] = 0xA5  # the padding must be written
                prim(src, out, threads=threads)
                assert bytes(out.data) == pack(x, tag_dst).tobytes(), (dims, tag_dst, threads)


def bound(dims, src, dst, dtypes=("f32", "f32")):
    """plan.bind's (spec, fields) per piece of a reorder of dims between two tags."""
    s = gen.MemoryDesc(dims, dtypes[0], src)
    d = gen.MemoryDesc(dims, dtypes[1], dst)
    convert = plan.Conversion(*dtypes, False) if dtypes[0] != dtypes[1] else None
    problem_ = normalise(dims, Layout.of_desc(s), Layout.of_desc(d), d.itemsize)
    return plan.bind(problem_, d.nbytes, convert)


def streams(dims, src, dst, dtypes=("f32", "f32")):
    """(kernel kind, whether it streams at one thread) per piece."""
    return [(spec.kind, int(f["stream"] > 0)) for spec, f in bound(dims, src, dst, dtypes)]


def test_tile_streams_only_past_sixteen_runs():
    """On a destination of STREAM_BYTES or more a tile that moves bytes streams only when its
    work item writes more than TILE_RUNS separate destination runs, or whole rows filling one
    region of REGION_BYTES or more: nchw <-> nhwc (512 or 64 runs) streams, nChw16c -> nchw
    (16 runs) does not; oihw -> OIhw16i16o (one region) by size (18.9 MB does, 2.4 does not); a
    converting tile always does. Small destinations never stream; 16 whole rows (nchw ->
    nChw16c) are the interleave's."""
    big = (32, 64, 56, 56)
    assert streams(big, "nchw", "nhwc") == [("tile", 1)]
    assert streams(big, "nhwc", "nchw") == [("tile", 1)]
    assert streams(big, "nChw16c", "nchw") == [("tile", 0)]
    assert streams(big, "nchw", "nChw16c") == [("interleave", 1)]
    assert streams((1024, 512, 3, 3), "oihw", "OIhw16i16o") == [("tile", 1)]
    assert streams((256, 256, 3, 3), "oihw", "OIhw16i16o") == [("tile", 0)]
    assert streams(big, "nChw16c", "nchw", ("f32", "bf16")) == [("tile", 1)]
    # columns shorter than a line, one after the other: the single tiles along A (16 rows of
    # 16 s8 or 8 bf16 columns; 48 rows: three tiles) fill whole lines, unless a column's rows
    # are not a multiple of a tile's (12 of 8 bf16)
    assert streams(big, "nchw", "nChw16c", ("f32", "s8")) == [("tile", 1)]
    assert streams(big, "nchw", "nChw8c", ("f32", "bf16")) == [("tile", 1)]
    assert streams((32, 48, 56, 56), "nchw", "aBcd48b", ("f32", "s8")) == [("tile", 1)]
    assert streams((32, 48, 56, 56), "nchw", "aBcd12b", ("f32", "bf16")) == [("tile", 0)]
    assert streams((2, 64, 56, 56), "nchw", "nhwc") == [("tile", 0)]


def run_b(dims, src, dst, dtype="f32"):
    """The run kind's B node of a copy of dims: (n, src stride, dst stride), strides in bytes."""
    [(spec, f)] = bound(dims, src, dst, (dtype, dtype))
    assert spec.kind == "run", spec
    return f["b_n"], f["b_src"], f["b_dst"]


def test_streamed_runs_follow_the_source():
    """When the destination streams and a run fills RUN_LINE bytes or more, the run kind steps
    along the node that continues the run in src (reads in order); a move's runs of
    RUN_SHORT_BYTES or more too where that node is the shorter one; otherwise along the next
    node of dst."""
    mib = 1 << 20
    assert (registry.RUN_LINE, registry.RUN_SHORT_BYTES) == (256, 16)
    # nhwc -> nChw16c into 67 MB: runs of 64 (f32) or 16 bytes (s8) along the 4 channel
    # blocks, not along the 16384 pixels (which continue them in dst); into 1.6 MB, pixels
    big, small = (16, 64, 128, 128), (1, 64, 80, 80)
    assert run_b(big, "nhwc", "nChw16c") == (4, 64, 16384 * 64)
    assert run_b(big, "nhwc", "nChw16c", "s8") == (4, 16, 16384 * 16)
    assert run_b(small, "nhwc", "nChw16c") == (6400, 256, 64)
    # nChw16c -> nhwc: the node that continues the runs in src (pixels) is the longer one
    assert run_b(big, "nChw16c", "nhwc") == (4, 16384 * 64, 64)
    # runs of 8 bytes (s8 into nChw8c), or of 5 and 11 of padding, stay along the pixels
    assert run_b(big, "nhwc", "nChw8c", "s8") == (16384, 64, 8)
    assert run_b((24, 5, 64, 100), "cdab", "nChw16c", "s8") == (6400, 120, 16)
    # planes of 4 MiB, outer axes swapped: 60 MiB streams, 120 KB does not
    assert run_b((5, 3, 1024, 1024), "abcd", "bacd") == (3, 4 * mib, 20 * mib)
    assert run_b((5, 3, 64, 32), "abcd", "bacd") == (5, 24576, 8192)
    # u8 runs of 256 and 127 bytes into 3.9 MB
    assert run_b((1024, 3, 5, 256), "abcd", "acbd", "u8") == (5, 256, 768)
    assert run_b((2048, 3, 5, 127), "abcd", "acbd", "u8") == (3, 635, 127)


# (row length, row pitch, types, whether the run kind streams): rows of 65 floats 70 apart
# share lines; 64 of 80 fill whole lines; 1029 of 1034 hold RUN_STREAM_BYTES (4 KiB) of f32,
# but not of bf16
PADDED_ROWS = [(65, 70, ("f32", "f32"), False), (65, 70, ("f32", "bf16"), False),
               (65, 70, ("s8", "f32"), False), (64, 80, ("f32", "f32"), True),
               (64, 80, ("f32", "s8"), False), (1029, 1034, ("f32", "f32"), True),
               (1029, 1034, ("f32", "bf16"), False)]


@pytest.mark.parametrize("w,pitch,dtypes,want", PADDED_ROWS)
def test_runs_stream_whole_lines_or_long(w, pitch, dtypes, want, monkeypatch):
    """Into a destination that streams, the run kind streams only where each run starts on a
    line and fills whole lines, or holds plan.RUN_STREAM_BYTES or more (plan._runs_stream):
    elsewhere the lines runs share, and a converting run's first elements, would be stored
    plainly between streamed lines. The same bits either way, from 1 and 2 threads."""
    monkeypatch.setattr(plan, "cached", plan.cached.__wrapped__)  # each primitive plans anew
    monkeypatch.setattr(plan, "STREAM_BYTES", 0)
    dims = (2, 3, 5, w)
    x = np.random.default_rng(w).integers(-60, 200, dims).astype(cref.np_dtype(dtypes[0]))
    src = gen.Memory.from_array(x, "nchw")
    dst = gen.MemoryDesc(dims, dtypes[1], strides=(15 * pitch, 5 * pitch, pitch, 1))
    prim = gen.Reorder(src.desc, dst)
    assert [(spec.kind, f["stream"] > 0) for spec, f in prim._plan.bound] == [("run", want)]
    want_bits = cref.reference_reorder(src.to_array(), dtypes[1])
    for threads in (1, 2):
        out = gen.Memory(dst)
        out.data[:] = 0xA5
        prim(src, out, threads=threads)
        cref.assert_same(out.to_array(), want_bits, what=f"{threads} threads")
        row = pitch * out.desc.itemsize  # the last row ends without a gap
        raw = np.frombuffer(bytes(out.data) + b"\xa5" * (30 * row - out.desc.nbytes), np.uint8)
        assert np.all(raw.reshape(30, row)[:, w * out.desc.itemsize:] == 0xA5)  # gaps untouched


def test_loop_order_guess():
    """The loops around a piece's kernel go in the source's order when its smallest outer
    stride in bytes is no longer than the destination's and at least a cache line, or is the
    block a tile reads at one position (the destination's a line or more), or is a line or
    more and the destination's is not in a conversion into a quarter of the bytes, or where
    each side's step is the block it reads or writes at one position; else in the
    destination's; zero pieces and single loops keep the destination's."""
    # rand02's tile piece, f32 -> bf16: source steps of 256 bytes against 380
    rand02 = [Node(3, 76032, 902880), Node(4, 64, 225720), Node(11, 256, 5130),
              Node(27, 2816, 190)]
    assert plan.loop_order(rand02, 4, 2, False) == "src"
    # rand10's, f32 -> s8: 34048 bytes against 64
    assert plan.loop_order([Node(138, 8512, 136192), Node(2, 4711392, 64)], 4, 1, False) == "dst"
    # rand03 of seed 2's runs, f32 -> s8: 988 bytes against 16; into bf16 (32) not
    rand03 = [Node(54, 71136, 4608), Node(12, 247, 384), Node(24, 2964, 16)]
    assert plan.loop_order(rand03, 4, 1, False) == "src"
    assert plan.loop_order(rand03, 4, 2, False) == "dst"
    assert plan.loop_order(rand03[:2] + [Node(24, 2964, 64)], 4, 1, False) == "dst"
    assert plan.loop_order([Node(54, 8, 4608), Node(24, 2964, 16)], 4, 1, False) == "dst"
    assert plan.loop_order([Node(3, 32, 64), Node(5, 256, 16)], 2, 4, False) == "src"  # a tie
    # rand01's, f32 -> bf16: 32 bytes (half a line) against 224
    rand01 = [Node(2, 552160, 552160), Node(17, 8, 32480), Node(290, 136, 112)]
    assert plan.loop_order(rand01, 4, 2, False) == "dst"
    assert plan.loop_order(rand02, 4, 2, True) == "dst"
    assert plan.loop_order(rand02[:1], 4, 2, False) == "dst"
    # f32 ABcd4b16a4b -> bdca: the tile reads a block of 256 bytes per outer position, the
    # next one 256 bytes on (source steps of 256 against 64, a line)
    blocked = [Node(4, 76032, 912384), Node(4, 64, 228096), Node(11, 256, 5184),
               Node(27, 2816, 192), Node(12, 304128, 16)]
    assert plan.loop_order(blocked, 4, 4, False) == "dst"
    assert plan.loop_order(blocked, 4, 4, False, block=256) == "src"
    assert plan.loop_order(blocked, 4, 4, False, block=512) == "dst"
    assert plan.loop_order(blocked, 4, 2, False, block=256) == "dst"  # 32-byte dst steps
    [(spec, f)] = bound((64, 32, 3, 5), "ABcd4b16a4b", "bdca")
    assert spec.kind == "tile" and f["a_n"] * f["b_n"] * 4 == f["src_str"][-1] == 256
    # both sides' steps are the blocks read and written at one position (rand06 of seed 6,
    # f16 cabd -> aBcd4b: 4 rows of 7 interleaved, 56 bytes each side): the source's, a tie
    tie = [Node(553, 322, 12096), Node(11, 28, 1008), Node(36, 178066, 28)]
    assert plan.loop_order(tie, 2, 2, False, block=56, dst_block=56) == "src"
    assert plan.loop_order(tie, 2, 2, False, block=56) == "dst"
    assert plan.loop_order(tie, 2, 2, False, block=28, dst_block=56) == "dst"
    [(spec, f), _] = bound((553, 46, 36, 7), "cabd", "aBcd4b", ("f16", "f16"))
    assert spec.kind == "interleave" and f["src_str"][-1] == 56 and f["dst_str"][-1] == 2016
    # end to end: runs of 256 bytes along a, "abcd" -> "cbad": the outer loops c (source
    # step 256 bytes, destination 7680) and b (1792, 1536) run in the source's order
    [(spec, f)] = bound((6, 5, 7, 64), "abcd", "cbad")
    assert (spec.kind, f["b_n"], f["n"], f["src_str"], f["dst_str"]) == (
        "run", 6, [5, 7], [1792, 256], [1536, 7680])


def test_tile_steps_evenly_spaced_rows_and_columns_without_tables():
    """plan._tile_even: nchw <-> nhwc and nChw16c -> nchw have rows (in src) and columns (in
    dst) evenly spaced; oihw -> OIhw16i16o's columns (16 i by 9 hw) are not; a conversion
    needs only its columns so (its rows are its buffer's)."""
    def even(dims, src, dst, dtypes=("f32", "f32")):
        return [f["even"] for spec, f in bound(dims, src, dst, dtypes) if spec.kind == "tile"]
    assert even((2, 64, 7, 9), "nchw", "nhwc") == [1]
    assert even((2, 64, 7, 9), "nhwc", "nchw") == [1]
    assert even((2, 64, 7, 9), "nChw16c", "nchw") == [1]
    assert even((32, 32, 3, 3), "oihw", "OIhw16i16o") == [0]
    assert plan._tile_even([0, 64, 200], [0, 8, 16], 64, 8, None) is False
    assert plan._tile_even([0, 64, 200], [0, 8, 16], 64, 8, plan.Conversion("f32", "s8", False))


def test_tile_rows_follow_each_other_by_a_runs():
    """A tile's a_run is the count of A's innermost node: each a_run rows of A (one position
    of its outer nodes) lie a_src bytes apart in src, so that a converting tile takes them in
    one call without scanning a_tab; a single node has all its rows in one run."""
    for dims, src, dst, runs in (((38, 21, 5, 3), "ABcd4b16a4b", "bdca", {16, 6}),  # 32 + 6 a
                                 ((2, 64, 7, 9), "nhwc", "nchw", {63}),  # one node: hw
                                 ((4, 13, 3, 11), "dcba", "aBcd8b", {8})):  # b of an 8b block
        pieces = [f for spec, f in bound(dims, src, dst, ("f32", "bf16")) if spec.kind == "tile"]
        assert pieces and {f["a_run"] for f in pieces} == runs, (src, dst)
        for f in pieces:
            rows = f["a_tab"][:f["a_n"]].reshape(-1, f["a_run"])
            assert (np.diff(rows, axis=1) == f["a_src"]).all()


def test_tile_stages_columns_that_start_anywhere_in_a_line(monkeypatch):
    """A streaming tile whose destination columns start anywhere in a line (4004 bytes
    apart, or lines apart at outer positions that are not) streams through a stage
    (plan._tile_staged) when an item's columns have all its rows, hold 24 lines (a move) or
    6 (a conversion) and the destination is half the bytes or more: not columns that start
    lines, nor shorter columns (stored plainly), nor a conversion into a quarter of the
    bytes. The results are the reference's, from 1, 2 and 3 threads (items carry their last
    partial lines to the next; threads flush theirs), for every element size, a conversion,
    destination padding (1001 rows in blocks of 1004), a last tile that overlaps the one
    before (203 or 1037 columns) and columns that move between outer positions."""
    def staged(dims, src, dst, dtypes=("f32", "f32")):  # (staged 2: test_staged_lines_...)
        return [(f["stream"] > 0, int(f["staged"] > 0)) for spec, f in
                bound(dims, src, dst, dtypes) if spec.kind == "tile"]
    assert staged((1001, 1037), "ab", "ba") == [(True, 1)]
    assert staged((1024, 1037), "ab", "ba") == [(True, 0)]  # columns start lines
    # the 67 columns of c start lines, but those of the outer b (4004 bytes apart) do not
    assert staged((1001, 16, 67), "abc", "cba") == [(True, 1)]
    assert staged((1001, 1037), "ab", "ba", ("s8", "f32")) == [(True, 1)]
    assert staged((1001, 1037), "ab", "ba", ("f32", "s8")) == [(False, 0)]
    assert staged((385, 2707), "ab", "ba") == [(True, 1)]  # 1540 bytes
    assert staged((383, 2707), "ab", "ba") == [(False, 0)]
    assert staged((97, 10837), "ab", "ba", ("s8", "f32")) == [(True, 1)]  # 388 bytes
    assert staged((95, 10837), "ab", "ba", ("s8", "f32")) == [(False, 0)]
    monkeypatch.setattr(plan, "STREAM_BYTES", 0)  # small calls stream too
    monkeypatch.setattr(plan, "cached", plan.cached.__wrapped__)
    rng = np.random.default_rng(11)
    cases = [((2001, 203), "ab", "ba", dt, dt, {}) for dt in ("u8", "f16", "f32", "f64")]
    cases += [((1001, 203), "ab", "ba", "s8", "f32", dict(scales=[0.5])),
              ((3, 1001, 37), "abc", "acB1004b", "f32", "f32", {}),
              ((2, 1037, 807), "abc", "acb", "bf16", "bf16", {}),
              ((401, 16, 67), "abc", "cba", "f32", "f32", {})]
    for dims, st, dt, sdt, ddt, attrs in cases:
        x = rng.integers(0, 100, dims).astype(np.float32)  # exact in every type
        src = (gen.Memory.from_array(x.astype(np.float64), st) if sdt == "f64"  # no conversion
               else gen.Memory.from_array(x, st, dtype=sdt))
        prim = gen.Reorder(src.desc, gen.MemoryDesc(dims, ddt, dt), **attrs)
        assert [f["staged"] > 0 for spec, f in prim._plan.bound] == [True], (dims, dt, sdt)
        want = x * np.float32(0.5) if attrs else x
        for threads in (1, 2, 3):
            out = gen.Memory(prim.dst_desc)
            prim(src, out, threads=threads)
            got = out.to_array().astype(np.float32)
            assert np.array_equal(got, want), (dims, dt, sdt, threads)
            if dt == "acB1004b":  # the padding rows are zeros
                raw = np.frombuffer(out.data, np.float32).reshape(3, 37, 1004)
                assert not raw[:, :, 1001:].any()


def test_staged_lines_made_in_registers_give_the_stages_bits(monkeypatch):
    """On a tier of 512-bit floats a staged tile of 4- or 8-byte elements makes its columns'
    lines in registers (plan._tile_lined: `staged` 2). It gives the stage's bytes (the plan
    with _tile_lined false), the reference's, at 1, 2 and 3 threads: f32 and f64 moves, s8 ->
    f32 with a scale, destination padding (1001 rows in blocks of 1004), columns that move
    between outer positions."""
    monkeypatch.setattr(plan, "STREAM_BYTES", 0)  # small calls stream too
    monkeypatch.setattr(plan, "cached", plan.cached.__wrapped__)
    lined = plan._tile_lined
    rng = np.random.default_rng(12)
    cases = [((2001, 203), "ab", "ba", dt, dt, {}) for dt in ("f32", "f64")]
    cases += [((1001, 203), "ab", "ba", "s8", "f32", dict(scales=[0.5])),
              ((3, 1001, 37), "abc", "acB1004b", "f32", "f32", {}),
              ((401, 16, 67), "abc", "cba", "f32", "f32", {})]
    for dims, st, dt, sdt, ddt, attrs in cases:
        x = rng.integers(-100, 100, dims).astype(np.float32)  # exact in every type
        src = (gen.Memory.from_array(x.astype(np.float64), st) if sdt == "f64"
               else gen.Memory.from_array(x, st, dtype=sdt))
        prims = []
        for rule in (lined, lambda spec: False):
            monkeypatch.setattr(plan, "_tile_lined", rule)
            prims.append(gen.Reorder(src.desc, gen.MemoryDesc(dims, ddt, dt), **attrs))
        [(spec, fields)] = prims[0]._plan.bound
        floats = TIERS[spec.isa].floats
        assert fields["staged"] == (2 if floats and floats.lanes == 16 else 1), (dims, dt, sdt)
        assert [f["staged"] for _, f in prims[1]._plan.bound] == [1]
        want = (x * np.float32(0.5) if attrs else x).astype(np.float64 if ddt == "f64"
                                                            else np.float32)
        for threads in (1, 2, 3):
            outs = [gen.Memory(prims[0].dst_desc) for _ in prims]
            for prim, out in zip(prims, outs):
                prim(src, out, threads=threads)
            assert bytes(outs[0].data) == bytes(outs[1].data), (dims, dt, sdt, threads)
            assert np.array_equal(outs[0].to_array(), want), (dims, dt, sdt, threads)


def test_tiles_prefetch_rows_apart_in_calls_past_the_cache(cache_size):
    """A tile prefetches its next work item's source rows when the call's bytes read and
    written are half llc_bytes() or more and its rows are a cache line or more apart:
    rand13 (cbdea -> aBcde4b, 64 MB, rows 11520 bytes apart) and nhwc -> nchw with 32
    channels (rows of 128 bytes) do, of 2 x 6.4 MB do not; s8 rows 16 bytes apart
    (ABcd16a16b -> ABcd16b16a) do not. A move spreads them over the item's column tiles (2)
    where it has 32 rows and 4 tiles or more (nhwc -> nchw: 64 rows of 4 tiles), not 2
    tiles of 16 columns (nChw16c -> nchw), nor items of 16 rows (rand13); a conversion
    fetches them as it converts (1). Neither a move whose next item reads on along the same
    rows (nchw -> nhwc with 56x56 pixels: B takes 7 chunks), nor rows of a line that follow
    each other (nChw16c -> nchw), nor a conversion to a quarter (f32 -> s8, u8), nor a move
    whose items read 512 bytes or more of each row at once (nchw -> nhwc with 16x16 pixels)
    prefetches: the hardware prefetcher follows what they read."""
    def prefetch(dims, src, dst, dtypes=("f32", "f32")):
        return [f["prefetch"] for spec, f in bound(dims, src, dst, dtypes) if spec.kind == "tile"]
    cache_size(32 << 20)
    # a move of short rows at once (rand13: 18 columns, 72 bytes), not rows of 1 KB
    assert prefetch((18, 89, 31, 10, 16), "cbdea", "aBcde4b") == [1]
    assert prefetch((512, 64, 16, 16), "nchw", "nhwc") == [0]
    assert prefetch((32, 64, 56, 56), "nhwc", "nchw") == [2]
    assert prefetch((8, 256, 28, 28), "nchw", "nhwc") == [0]
    assert prefetch((32, 64, 56, 56), "nChw16c", "nchw") == [0]
    assert prefetch((32, 32, 56, 56), "nhwc", "nchw") == [2]  # rows of 2 lines
    assert prefetch((32, 64, 56, 56), "nchw", "nhwc", ("f32", "bf16")) == [1]
    assert prefetch((2336, 11, 36, 12), "ABcd16a16b", "ABcd16b16a", ("s8", "f32")) == [0]
    assert prefetch((32, 64, 56, 56), "nchw", "nhwc") == [0]
    assert prefetch((32, 64, 56, 56), "nchw", "nhwc", ("f32", "s8")) == [0]
    assert prefetch((32, 64, 56, 56), "nhwc", "nchw", ("f32", "u8")) == [0]


def test_converting_runs_prefetch_ahead_in_calls_past_the_cache(cache_size):
    """A run kernel's conversions prefetch their source plan.RUN_AHEAD bytes ahead in a call
    that moves half of llc_bytes() or more (4 + 2 MiB f32 -> bf16 with 8 MiB), not in one of
    less (32 MiB), nor where gen counts no last-level cache (0), nor in a move or a widening
    conversion (s8 -> f32); the results are the bytes of the reference conversion either way,
    at 1 and 2 threads."""
    from convert_reference import reference_reorder
    dims = (2, 32, 128, 128)  # 4 MiB of f32

    def ahead(dims, dtypes):
        return [f["prefetch"] for spec, f in bound(dims, "nchw", "nchw", dtypes)
                if spec.kind == "run"]
    x = np.random.default_rng(10).standard_normal(dims).astype(np.float32)
    x[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, 3.0e38]
    want = reference_reorder(x, "bf16").tobytes()
    for llc, want_ahead in ((8 << 20, plan.RUN_AHEAD), (32 << 20, 0), (0, 0)):
        cache_size(llc)
        assert ahead(dims, ("f32", "bf16")) == [want_ahead], llc
        for threads in (1, 2):
            got = gen.reorder(gen.Memory.from_array(x, "nchw"),
                              gen.MemoryDesc(dims, "bf16", "nchw"), threads=threads)
            assert bytes(got.data) == want, (llc, threads)
    cache_size(1 << 20)
    assert ahead(dims, ("f32", "f32")) == [0]
    assert ahead(dims, ("f32", "s8")) == [plan.RUN_AHEAD]
    assert ahead(dims, ("s8", "f32")) == [0]


def test_converting_tiles_of_long_rows_take_a_heap_buffer(cache_size):
    """A converting tile whose item has a line's rows at most (64 for s8), narrowing f32 to a
    quarter, in a call that moves half of llc_bytes() or more, converts its rows into a buffer
    of plan.TILE_HEAP_BUFFER bytes from the heap where the L1 one would hold less than whole
    rows: nchw -> nChw16c of 16 rows of 16384, not rows of 1024 (256x64x32x32), not
    f32 -> bf16, nor items of 128 rows (rand18's), nor a call in the cache. The results are
    the same with either buffer, at any thread count, rows of 4 KiB (a line apart in the
    heap's buffer) too."""
    def buffer(dims, src, dst, dtypes=("f32", "s8")):
        return [f["buffer"] for spec, f in bound(dims, src, dst, dtypes) if spec.kind == "tile"]
    cache_size(32 << 20)
    assert buffer((8, 64, 128, 128), "nchw", "nChw16c") == [plan.TILE_HEAP_BUFFER]
    assert buffer((8, 64, 128, 128), "nchw", "nChw16c", ("f32", "u8")) == [plan.TILE_HEAP_BUFFER]
    assert buffer((8, 64, 128, 128), "nchw", "nChw16c", ("f32", "bf16")) == [0]
    assert buffer((8, 64, 128, 128), "nChw16c", "nchw", ("s8", "f32")) == [0]
    assert buffer((6, 48, 167, 146), "bdac", "aBcd4b", ("f32", "u8")) == [0]
    assert buffer((256, 64, 32, 32), "nchw", "nChw16c") == [0]  # 16 whole rows fill 16 KB
    assert buffer((2, 64, 128, 128), "nchw", "nChw16c") == [0]  # 10.5 MB moved
    # rows of 1517 elements: 16 of them fill 24 KB; rows of 4096 with a scale per channel
    # (4 KiB, converted one at a time, then a line apart in the buffer) into nChw16c and nhwc
    for dims, dst, mask in (((3, 32, 37, 41), "nChw16c", 0), ((2, 32, 64, 64), "nChw16c", 2),
                            ((2, 64, 64, 64), "nhwc", 2)):
        x = np.random.default_rng(12).integers(-100, 100, dims).astype(np.float32)
        scales = [2.0] * (dims[1] if mask else 1)
        want = np.clip(x * 2, -128, 127)  # exact products, saturated
        results = set()
        for llc in (1, 1 << 30):
            cache_size(llc)
            assert buffer(dims, "nchw", dst) == [plan.TILE_HEAP_BUFFER if llc == 1 else 0]
            src = gen.Memory.from_array(x, "nchw")
            for threads in (1, 2, 3):
                out = gen.reorder(src, gen.MemoryDesc(dims, "s8", dst), scales=scales,
                                  scale_mask=mask, threads=threads)
                assert np.array_equal(out.to_array().astype(np.float32), want), (llc, threads)
                results.add(bytes(out.data))
        assert len(results) == 1, dims


def test_runs_go_along_the_source_in_large_calls(cache_size):
    """The run kind walks runs of a line or more along the node that continues them in src
    in a large call (plan.large: it streams, or moves half of llc_bytes() or more), with
    plain stores too; along the destination's next node otherwise: rand07's shape (f32 -> u8,
    runs of 2576 elements) at 17.7 MB with 32 MiB of cache, and 1 GiB. Both give the bytes of
    the reference conversion."""
    from convert_reference import reference_reorder
    from reference import pack
    dims, kw = (16, 161, 20, 72), dict(scales=[0.5], dst_zero_point=100)

    def plan_of():
        prim = gen.Reorder(gen.MemoryDesc(dims, "f32", "dcba"),
                           gen.MemoryDesc(dims, "u8", "Acdb16a"), **kw)
        return prim, [(spec.kind, f["b_n"], f["stream"]) for spec, f in prim._plan.bound]

    x = np.random.default_rng(9).uniform(-300, 300, dims).astype(np.float32)
    want = pack(reference_reorder(x, "u8", scales=0.5, dst_zero_point=100), "Acdb16a")
    for size, b_n in ((32 << 20, 20), (1 << 30, 72)):
        cache_size(size)
        prim, bound = plan_of()
        assert bound == [("run", b_n, 0)], (size, bound)
        out = gen.Memory(prim.dst_desc)
        prim(gen.Memory.from_array(x, "dcba"), out)
        assert bytes(out.data) == want.tobytes(), size


def test_calls_that_fit_in_the_cache_never_stream(cache_size):
    """With llc_bytes() set (GEN_LLC_BYTES; by default the L3 on AMD), a call whose bytes
    read and written fit in it writes with plain stores from every kind, and one past it
    streams from any tile (nChw16c -> nchw too, 16 runs); a conversion that reads much more
    than it writes counts its reads; a value that is not a number of bytes is a gen.Error
    naming it."""
    cache_size(32 << 20)
    assert streams((8, 256, 28, 28), "nchw", "nhwc") == [("tile", 0)]  # 2 x 6.4 MB
    assert streams((8, 256, 28, 28), "nchw", "nChw8c") == [("interleave", 0)]
    # 16 whole rows: the interleave, in cache and streaming
    assert streams((8, 256, 28, 28), "nchw", "nChw16c") == [("interleave", 0)]
    assert streams((32, 64, 56, 56), "nchw", "nChw16c") == [("interleave", 1)]
    assert streams((32, 64, 56, 56), "nchw", "nhwc") == [("tile", 1)]  # 2 x 25.7 MB
    assert streams((32, 64, 56, 56), "nChw16c", "nchw") == [("tile", 1)]
    assert streams((32, 64, 56, 56), "nchw", "nChw8c") == [("interleave", 1)]
    f32_s8 = gen.Reorder(gen.MemoryDesc((8, 64, 128, 128), "f32", "nchw"),
                         gen.MemoryDesc((8, 64, 128, 128), "s8", "nchw"), scales=[0.5])
    # 33.5 MB into 8.4
    assert {f["stream"] for _, f in f32_s8._plan.bound} == {plan.ANY_THREADS}
    # expanding into a destination of 3/4 of the traffic or more, under 1.5x the cache,
    # streams at any thread count too (8.4 MB into 33.5)
    s8_f32 = gen.Reorder(gen.MemoryDesc((8, 64, 128, 128), "s8", "nchw"),
                         gen.MemoryDesc((8, 64, 128, 128), "f32", "nchw"), scales=[0.5])
    assert {f["stream"] for _, f in s8_f32._plan.bound} == {plan.ANY_THREADS}
    assert plan.stream_threads(25 << 20, traffic=50 << 20) == plan.ANY_THREADS
    assert plan.stream_threads(30 << 20, traffic=40 << 20) == plan.ANY_THREADS
    assert plan.stream_threads(16 << 20, traffic=(32 << 20) - 1) == 0
    assert plan.stream_threads((2 << 20) - 1, traffic=64 << 20) == 0  # under STREAM_BYTES
    assert not plan.streams(16 << 20, traffic=(32 << 20) - 1)
    assert plan.streams(16 << 20) and not plan.streams((16 << 20) - 1)
    cache_size("32M")
    with pytest.raises(gen.Error, match="GEN_LLC_BYTES.*'32M'"):
        plan.streams(1 << 30)


def test_tiles_stream_from_half_the_cache(cache_size):
    """A tile's stores, scattered, stream at one thread from half of llc_bytes() of traffic
    and at any thread count from 4/5 of it or from a destination of 9/32 of it
    (plan._tile_stream_threads), where a copy keeps plain stores up to llc_bytes(); never
    under STREAM_BYTES of destination."""
    cache_size(32 << 20)

    def stream(dims, src, dst, dtypes=("f32", "f32")):
        return [f["stream"] for spec, f in bound(dims, src, dst, dtypes)]
    assert stream((3, 64, 100, 100), "nchw", "nhwc") == [0]  # 15.4 MB moved
    assert stream((2, 64, 128, 128), "nchw", "nhwc") == [1]  # 16 MiB: half
    assert stream((4, 64, 128, 128), "nchw", "nhwc", ("f32", "bf16")) == [1]  # 8.4 MB dst
    assert stream((4, 64, 128, 128), "nchw", "nhwc") == [plan.ANY_THREADS]  # 32 MiB
    # s8 -> f32: 32.1 MB moved, and 40.1 MB
    assert stream((32, 64, 56, 56), "nchw", "nhwc", ("s8", "f32")) == [plan.ANY_THREADS]
    assert stream((40, 64, 56, 56), "nchw", "nhwc", ("s8", "f32")) == [plan.ANY_THREADS]
    assert plan._tile_stream_threads(2 << 20, 16 << 20) == 1
    assert plan._tile_stream_threads((2 << 20) - 1, 32 << 20) == 0
    assert plan._tile_stream_threads(2 << 20, (16 << 20) - 1) == 0
    assert plan._tile_stream_threads(2 << 20, 25 << 20) == 1
    assert plan._tile_stream_threads(2 << 20, -(-(128 << 20) // 5)) == plan.ANY_THREADS
    # a destination of 9/32 of the cache streams at any thread count: 9 MiB of 32
    assert stream((12, 64, 56, 56), "nchw", "nhwc") == [plan.ANY_THREADS]  # 9.6 MB
    assert stream((10, 64, 56, 56), "nchw", "nhwc") == [0]  # 8 MB, 16 MB moved
    assert plan._tile_stream_threads(9 << 20, 18 << 20) == plan.ANY_THREADS
    assert plan._tile_stream_threads((9 << 20) - 1, 18 << 20) == 1


@pytest.mark.parametrize("dtype", ["float16", "float32", "uint8"])
def test_narrow_b_under_a_mask_in_half_and_whole_tiles(dtype):
    """A B of 1 to 15 channels whose rows lie anywhere (nChw16c -> nchw) or follow each other
    (nhwc -> nchw) is read under a mask: in half-width tiles where B fits half a row (the
    tier's half vector has masked loads), else in whole ones. Pixel counts leave tails along
    A. Same bytes as the reference packing at 1 and 2 threads."""
    from reference import pack
    rng = np.random.default_rng(3)
    size = np.dtype(dtype).itemsize
    for channels in range(1, 16):
        for tag, pixels in (("nChw16c", (7, 9)), ("nhwc", (5, 13))):
            dims = (2, channels) + pixels
            x = rng.integers(0, 256, int(np.prod(dims)) * size, dtype=np.uint8).view(dtype)
            x = x.reshape(dims)
            prim = gen.Reorder(gen.MemoryDesc(dims, dtype, tag),
                               gen.MemoryDesc(dims, dtype, "nchw"))
            src = gen.Memory.from_array(x, tag)
            for threads in (1, 2):
                out = gen.Memory(prim.dst_desc)
                prim(src, out, threads=threads)
                assert bytes(out.data) == pack(x, "nchw").tobytes(), (dims, tag, prim.kernel)
