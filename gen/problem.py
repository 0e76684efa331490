"""The one layout normaliser: a pair of layouts of the same dims -> a short loop nest.

A layout is given per logical axis as (size, stride) parts, most significant first, over the
axis' padded extent (`MemoryDesc.parts`, or one part per axis for a NumPy array). Every axis
is cut at every block boundary of either side; the pieces of the axis where both sides are
linear become nodes (n, src stride, dst stride). An axis whose size is not a multiple of a
block yields a few boxes (full blocks, then the tail); the product of the boxes of all axes
gives the copy pieces. The destination's padding is the rest of its padded space: zero pieces
with only a destination side. Each nest then drops size-1 nodes, is ordered for streaming
(destination strides descending) and merges nodes contiguous on both sides.

Strides here are in elements; `Piece.scaled` turns them into bytes for the kernels.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from .errors import Error


class NestError(Error):
    """The two layouts block an axis in extents that do not divide each other."""


@dataclass(frozen=True)
class Node:
    n: int
    src: int  # src stride (elements); 0 in zero pieces
    dst: int  # dst stride (elements)
    scl: int = 0  # stride in the reorder's scales (0: the scale does not change along it)


@dataclass(frozen=True)
class Piece:
    src_off: int
    dst_off: int
    nodes: tuple  # outermost first
    zero: bool = False  # write zeros (destination padding); src is not read
    pad: int = 0  # zeros written right after each run of the innermost node (dst stride 1)
    scl_off: int = 0  # index of the first element's scale
    gap: int = 0  # zeros written right after each element, up to the innermost node's stride


@dataclass(frozen=True)
class Problem:
    esize: int
    pieces: tuple

    def dump(self) -> str:
        """A readable listing of the nest, for debugging and verbose output."""
        out = []
        for p in self.pieces:
            nodes = " ".join(f"({n.n},{n.src},{n.dst}{f',{n.scl}' if n.scl else ''})"
                             for n in p.nodes)
            kind = "zero" if p.zero else "copy"
            pad = f" pad {p.pad}" if p.pad else ""
            pad += f" gap {p.gap}" if p.gap else ""
            out.append(f"{kind} @{p.src_off}->{p.dst_off}: {nodes}{pad}")
        return "\n".join(out)


@dataclass(frozen=True)
class Layout:
    """Parts per axis over the padded extent; `padded[a]` is that extent. An axis may instead
    map each index to an offset through a table (`gather`); the normaliser then unrolls it."""
    parts: tuple
    padded: tuple
    tables: tuple = ()  # per axis: None, or a tuple of offsets (empty: no tables)

    @classmethod
    def of_desc(cls, md) -> "Layout":
        return cls(tuple(tuple(md.parts(a)) for a in range(md.ndims)), md.padded_dims)

    @classmethod
    def strided(cls, dims, strides) -> "Layout":
        return cls(tuple(((d, s),) for d, s in zip(dims, strides)), tuple(dims))

    def split(self, axis, inner) -> "Layout | None":
        """The axis split in two: (index // inner, index % inner), or None when a part of the
        axis straddles `inner` unevenly (e.g. a 16c block split at 24)."""
        hi, lo, ext = [], [], 1
        for n, s in reversed(self.parts[axis]):
            if ext >= inner:
                hi.insert(0, (n, s))
            elif ext * n <= inner:
                lo.insert(0, (n, s))
                ext *= n
            else:  # the part holds the boundary: split it there, if it divides evenly
                f = inner // ext
                if inner % ext or n % f:
                    return None
                lo.insert(0, (f, s))
                hi.insert(0, (n // f, s * f))
                ext *= f
        if ext != inner:
            return None
        hi, lo = hi or [(1, 0)], lo or [(1, 0)]
        padded = tuple(math.prod(n for n, _ in side) for side in (hi, lo))
        return Layout(self.parts[:axis] + (tuple(hi), tuple(lo)) + self.parts[axis + 1:],
                      self.padded[:axis] + padded + self.padded[axis + 1:])

    def swap(self, axis) -> "Layout":
        """Axes `axis` and `axis + 1` exchanged."""
        parts, padded = list(self.parts), list(self.padded)
        for seq in (parts, padded):
            seq[axis], seq[axis + 1] = seq[axis + 1], seq[axis]
        return Layout(tuple(parts), tuple(padded))

    def gather(self, axis, indices) -> "Layout":
        """Index i of the axis reads what index indices[i] read (a permutation of the axis)."""
        tables = list(self.tables or (None,) * len(self.parts))
        tables[axis] = tuple(self.offset(axis, int(i)) for i in indices)
        return Layout(self.parts, self.padded, tuple(tables))

    def table(self, axis):
        return self.tables[axis] if self.tables else None

    def levels(self, axis):
        """Index extents at which the axis' parts start, innermost (1) first."""
        if self.table(axis) is not None:
            return [1]
        out, ext = [], 1
        for n, _ in reversed(self.parts[axis]):
            out.append(ext)
            ext *= n
        return out

    def stride(self, axis, level):
        """Offset step of moving the axis index by `level` (a multiple of a part's unit)."""
        if self.table(axis) is not None:
            return 0  # unrolled: its nodes have size 1
        ext = 1
        parts = self.parts[axis]
        for i, (n, s) in enumerate(reversed(parts)):
            if level < ext * n or i == len(parts) - 1:
                return s * (level // ext)
            ext *= n

    def offset(self, axis, index):
        if self.table(axis) is not None:
            return self.table(axis)[index]
        off = index * 0  # of index's kind (int or array)
        for n, s in reversed(self.parts[axis]):
            if n > 1:  # a size-1 part's stride is never used (and may exceed int64)
                off += (index % n) * s
            index = index // n
        return off


def _levels(axis, layouts):
    return sorted({lv for lay in layouts for lv in lay.levels(axis)})


def nest(axis, *layouts) -> bool:
    """Whether the layouts' block extents along the axis divide each other (8 and 16 do, 4
    and 6 do not)."""
    levels = _levels(axis, layouts)
    return all(hi % lo == 0 for lo, hi in zip(levels, levels[1:]))


def _chain(axis, dims, *layouts):
    if not nest(axis, *layouts):
        sides = " and ".join(str(lay.levels(axis)) for lay in layouts)
        raise NestError(f"blocks of axis {axis} (size {dims[axis]}) do not nest: "
                        f"block extents {sides}")
    return _levels(axis, layouts)


def _boxes(lo, hi, levels, unroll=False):
    """[lo, hi) as aligned boxes (start, count, level index): each box is `count` steps of
    levels[j] that stay inside one block of the next level (the top level is unbounded).
    Unrolled: one box per index."""
    if unroll:
        return [(i, 1, 0) for i in range(lo, hi)]
    out = []
    while lo < hi:
        j = max(i for i, lv in enumerate(levels) if lo % lv == 0 and lo + lv <= hi)
        count = (hi - lo) // levels[j]
        if j + 1 < len(levels):
            count = min(count, (levels[j + 1] - lo % levels[j + 1]) // levels[j])
        out.append((lo, count, j))
        lo += count * levels[j]
    return out


def _axis_nodes(axis, box, levels, src, dst, scl):
    """Nodes of one box of one axis, with the box' start offsets on each side (a missing
    side, None, has stride and offset 0)."""
    start, count, j = box

    def node(n, level):
        return Node(n, *(lay.stride(axis, level) if lay else 0 for lay in (src, dst, scl)))

    nodes = [node(count, levels[j])]
    nodes += [node(levels[i + 1] // levels[i], levels[i]) for i in reversed(range(j))]
    return tuple(lay.offset(axis, start) if lay else 0 for lay in (src, dst, scl)), nodes


def simplify(nodes):
    """Drop size-1 nodes, order for streaming, merge nodes contiguous on both sides."""
    nodes = sorted((n for n in nodes if n.n > 1), key=lambda n: (-abs(n.dst), -abs(n.src)))
    out = []
    for n in nodes:
        last = out[-1] if out else None
        if last and (last.src, last.dst, last.scl) == (n.src * n.n, n.dst * n.n, n.scl * n.n):
            out[-1] = Node(last.n * n.n, n.src, n.dst, n.scl)
        else:
            out.append(n)
    return tuple(out)


def _pieces(ranges, src, dst, scl, zero):
    """The product over axes of the boxes of each axis' range."""
    per_axis = []
    for axis, (lo, hi, levels) in enumerate(ranges):
        unroll = any(lay and lay.table(axis) is not None for lay in (src, dst))
        per_axis.append([_axis_nodes(axis, b, levels, src, dst, scl)
                         for b in _boxes(lo, hi, levels, unroll)])
    out = []
    for combo in itertools.product(*per_axis):
        nodes = [n for _, ns in combo for n in ns]
        src_off, dst_off, scl_off = (sum(offs[i] for offs, _ in combo) for i in range(3))
        out.append(Piece(src_off, dst_off, simplify(nodes), zero, scl_off=scl_off))
    return out


def normalise(dims, src: Layout, dst: Layout, esize: int, scl: "Layout | None" = None,
              fuse: bool = True) -> Problem:
    """The reorder of logical `dims` from `src` to `dst` as a Problem. `scl`, a plain layout
    (stride 0 on axes the scales do not depend on), indexes the reorder's scales. `fuse`:
    padding that continues a copied run is written by the copy piece."""
    nd = len(dims)
    copy = [(0, dims[a], _chain(a, dims, src, dst)) for a in range(nd)]
    pieces = _pieces(copy, src, dst, scl, False)
    # Destination padding: axes before `a` real, axis `a` in its padding, axes after padded.
    for a in range(nd):
        if dst.padded[a] == dims[a]:
            continue
        ranges = [(0, dims[b] if b < a else dst.padded[b], dst.levels(b)) for b in range(nd)]
        ranges[a] = (dims[a], dst.padded[a], dst.levels(a))
        pieces += _pieces(ranges, None, dst, None, True)
    if fuse:  # the cheap match first; the exact check when it leaves zero pieces
        fused = _fuse_gaps(_fuse_padding(pieces))
        pieces = (_fuse_pitch(pieces) if any(p.zero for p in fused) else None) or fused
    return Problem(esize, tuple(pieces))


def widened(problem: Problem, most: int) -> "Problem | None":
    """The problem in elements k times as large (the largest power of two k with k * esize
    <= most), or None: when every piece's innermost node is contiguous in dst (and in src,
    for a copy piece) and k divides its size, every other stride, every offset and every
    pad. A move of blocks into larger blocks then interleaves whole runs (s8 nChw4c ->
    nChw8c: runs of 4 bytes from 2 source blocks become 2 rows of 4-byte elements)."""
    k = most // problem.esize
    while k > 1 and not all(_widens(p, k) for p in problem.pieces):
        k //= 2
    if k < 2:
        return None
    out = []
    for p in problem.pieces:
        inner = p.nodes[-1]
        nodes = [Node(n.n, n.src // k, n.dst // k) for n in p.nodes[:-1]]
        inner = Node(inner.n // k, inner.src, 1)
        # a run followed by padding stays the innermost node, even of size 1
        nodes = simplify(nodes) + (inner,) if p.pad else simplify(nodes + [inner])
        out.append(Piece(p.src_off // k, p.dst_off // k, nodes, p.zero, p.pad // k))
    return Problem(problem.esize * k, tuple(out))


def _widens(piece: Piece, k: int) -> bool:
    if not piece.nodes:
        return False
    inner = piece.nodes[-1]
    strides = [n.dst for n in piece.nodes[:-1]] + [piece.dst_off, piece.pad, inner.n]
    if not piece.zero:
        strides += [n.src for n in piece.nodes[:-1]] + [piece.src_off]
    return (inner.dst == 1 and (piece.zero or inner.src == 1) and piece.scl_off == 0
            and not any(n.scl for n in piece.nodes) and all(v % k == 0 for v in strides))


# Runs (copy and zero pieces together) up to which _fuse_pitch checks its fusion exactly: at
# the limit about 90 MB of index arrays and a quarter of a second, once per problem (and only
# when _fuse_padding leaves zero pieces).
PITCH_RUNS = 1 << 21


def _fuse_pitch(pieces):
    """All the padding written by the copy pieces, or None: each copy piece's runs pad on to
    the pitch of its next node (the gap to the next run in dst), when these gaps are exactly
    the zero pieces' elements. Unlike _fuse_padding this needs no zero piece to match a copy
    piece: rand00's padding, one zero piece for two copy pieces, fuses."""
    copies = [p for p in pieces if not p.zero]
    zeros = [p for p in pieces if p.zero]
    if not zeros or not copies or any(not p.nodes or p.nodes[-1].dst != 1 for p in pieces):
        return None
    if any(len(c.nodes) < 2 or c.nodes[-2].dst <= c.nodes[-1].n for c in copies):
        return None
    if sum(math.prod(n.n for n in p.nodes[:-1]) for p in pieces) > PITCH_RUNS:
        return None
    gaps = [c.nodes[-2].dst - c.nodes[-1].n for c in copies]
    pad = _intervals([(c.dst_off + c.nodes[-1].n, c.nodes[:-1], g) for c, g in zip(copies, gaps)])
    zero = _intervals([(z.dst_off, z.nodes[:-1], z.nodes[-1].n) for z in zeros])
    if pad is None or zero is None or not all(np.array_equal(a, b) for a, b in zip(pad, zero)):
        return None
    return [Piece(c.src_off, c.dst_off, c.nodes, False, g, c.scl_off)
            for c, g in zip(copies, gaps)]


def _intervals(runs):
    """[start, end) destination intervals of (first start, outer nodes, length) runs, sorted,
    touching ones joined (as start and end arrays); None if two overlap."""
    starts = [first + nest_offsets(nodes, "dst") for first, nodes, _ in runs]
    ends = [at + length for at, (_, _, length) in zip(starts, runs)]
    starts, ends = np.concatenate(starts), np.concatenate(ends)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    if (starts[1:] < ends[:-1]).any():
        return None
    keep = np.concatenate([[True], starts[1:] != ends[:-1]])  # a start that no end touches
    return starts[keep], np.concatenate([ends[:-1][keep[1:]], ends[-1:]])


def grid_offsets(sizes, strides) -> np.ndarray:
    """Offsets of every index of axes of these sizes and strides, the first varying fastest."""
    off = np.zeros(1, np.int64)
    for n, stride in zip(sizes, strides):
        off = (np.arange(n, dtype=np.int64)[:, None] * stride + off[None, :]).ravel()
    return off


def nest_offsets(nest, side: str) -> np.ndarray:
    """Element offsets on `side` ("src" or "dst") of every position of a nest, the first node
    varying fastest (give it innermost first for the order the kernels walk it)."""
    return grid_offsets([node.n for node in nest], [getattr(node, side) for node in nest])


def _fuse_padding(pieces):
    """A zero piece that continues each innermost run of a copy piece (the padded tail of a
    block) becomes that piece's `pad`: one pass writes each destination line."""
    return _fuse_zeros(pieces, lambda c, start, walk, run: (
        c.nodes[-1].dst == 1 and start == c.dst_off + c.nodes[-1].n
        and walk == _dst_walk(c.nodes[:-1])),
        lambda c, run: Piece(c.src_off, c.dst_off, c.nodes, False, run, c.scl_off))


def _fuse_gaps(pieces):
    """A zero piece whose runs fill the gaps between the elements of a copy piece's
    innermost node (a block of which one element is real: the last of nChw16c with 17
    channels, 1 of 4 b in ABcd4b16a4b) becomes that piece's `gap`: each destination line is
    written once, in one pass, where the zero piece wrote its runs into lines the copy had
    left."""
    return _fuse_zeros(pieces, lambda c, start, walk, run: (
        c.nodes[-1].dst == run + 1 and start == c.dst_off + 1 and walk == _dst_walk(c.nodes)),
        lambda c, run: Piece(c.src_off, c.dst_off, c.nodes, False, 0, c.scl_off, run))


def _fuse_zeros(pieces, fits, fused):
    """Each zero piece whose runs `fits(copy piece, their first offset, the destination walk
    of their outer nodes, their length)` a copy piece without pad or gap becomes part of the
    first such piece: `fused(copy piece, run length)` replaces it."""
    out = list(pieces)
    for z in pieces:
        if not z.zero or not z.nodes:
            continue
        # its runs: the innermost node, or single elements (a size-1 node was dropped)
        outer, run = (z.nodes[:-1], z.nodes[-1].n) if z.nodes[-1].dst == 1 else (z.nodes, 1)
        walk = _dst_walk(outer)
        for i, c in enumerate(out):
            if (not c.zero and not c.pad and not c.gap and c.nodes
                    and fits(c, z.dst_off, walk, run)):
                out[i] = fused(c, run)
                out.remove(z)
                break
    return out


def _dst_walk(nodes):
    """The destination offsets a nest visits, as (size, dst stride) with the nodes that are
    contiguous on the destination side merged: a zero piece's nest (no source side) merges
    nodes its copy piece keeps apart for their source strides."""
    out = []
    for n in nodes:
        if out and out[-1][1] == n.n * n.dst:
            out[-1] = (out[-1][0] * n.n, n.dst)
        else:
            out.append((n.n, n.dst))
    return out
