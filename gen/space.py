"""The kernel list: every kernel spec the build instantiates, per ISA tier.

Kinds (the innermost work once a problem is normalised, see registry.choose):
- run:     a run contiguous on both sides, moved as bytes (or zero-filled);
- tile:    a 2-D tile whose unit strides differ (register transpose, line-whole stores);
- strided: the innermost node with any strides, element by element (or zero-filled);
- interleave: a few rows (2, 4, 8 or 16) of a src-contiguous node interleaved into one
  contiguous dst run (channels-last with few channels, ShuffleChannels in channels-last);
  rows past the source's are the destination's padding, zeros (nchw -> nChw8c with 3).
Each kind also comes per conversion (src dtype -> dst dtype of the table, scales, zero points,
sum): the same template with the conversion of convert.h.j2 fused in.
"""
from __future__ import annotations

from dataclasses import dataclass

from .dtypes import TABLE
from .isa import TIERS

ESIZES = (1, 2, 4, 8)
# The interleave kind's element sizes: also runs of 16 and 32 bytes taken as one element (a
# move into larger blocks, plan._interleaving)
INTERLEAVE_ESIZES = ESIZES + (16, 32)
KINDS = ("run", "tile", "strided")  # the kinds that also convert
GROUPS = (2, 4, 8, 16)  # rows of the interleave kind
RESAMPLE_DTYPES = ("f32", "bf16", "f16", "s8", "u8")
# A tile is W x W elements, a row one register. 2-byte elements in 16 rows of 32 bytes, not
# 8 of 16 (Zen4, alternating A/B, 1 / 2 threads): rand12 (f16 acb -> bac) 1.65 / 1.55-1.7x,
# bf16 nchw -> nhwc 32x64x56x56 1.0 / 1.3x, nhwc -> nchw 1.04-1.2 / 1.33x, aBcd4b -> abcd
# (narrow) 1.15x faster at 1 thread. But a conversion into them keeps 8 (CVT_TILE_WIDTH): its
# narrow B took 1.1-1.35x longer at 2 threads in 16 (rand02, f32 -> bf16 ABcd4b16a4b -> bdca,
# then behind oneDNN).
TILE_WIDTH = {1: 16, 2: 16, 4: 8, 8: 4}
CVT_TILE_WIDTH = {**TILE_WIDTH, 2: 8}
NARROW = (2, 4)  # tile: B widths under a row that it de-interleaves (see KernelSpec.narrow)
LINE = 64  # bytes: the tile kernel writes whole cache lines of the destination


@dataclass(frozen=True)
class KernelSpec:
    op: str
    kind: str
    esize: int
    zero: bool
    isa: str
    src: "str | None" = None  # conversions: the dtype names; esize is the dst's size
    dst: "str | None" = None
    groups: int = 0  # interleave: rows interleaved

    @property
    def cvt(self) -> str:
        """The conversion's C suffix (`f32_s8`), or "" for pure data movement."""
        return f"{self.src}_{self.dst}" if self.src else ""

    @property
    def src_size(self) -> int:
        return TABLE[self.src].size if self.src else self.esize

    @property
    def name(self) -> str:
        zero = "_zero" if self.zero else ""
        elems = f"_{self.cvt}" if self.cvt else f"_e{self.esize}"
        if self.op == "resample" and self.src:
            elems = f"_{self.src}"  # one dtype on both sides
        groups = self.groups or ""
        return f"{self.op}_{self.kind}{groups}{zero}{elems}_{self.isa}"

    @property
    def tile(self) -> int:
        return (CVT_TILE_WIDTH if self.cvt else TILE_WIDTH)[self.esize]

    @property
    def narrow(self) -> tuple:
        """Tile: the B widths under a row (NARROW) it also runs, its rows then following
        each other in the source (or in a conversion's buffer): blocked sources such as
        nChw4c or ABcd4b16a4b read along their small inner block."""
        return tuple(g for g in NARROW if g < self.tile) if self.vector else ()

    @property
    def masked(self) -> bool:
        """Tile: whether it also runs a B narrower than a row whose rows lie anywhere,
        reading each row under a mask (the tier's masked loads of this element size): nhwc
        -> nchw or nChw16c -> nchw with 3 channels (a conversion: rows of its buffer)."""
        return bool(self.vector and self.esize in self.vector.maskload)

    @property
    def lined(self) -> bool:
        """Tile: whether it may make a staged column's lines in registers (the template's
        _lined, plan._tile_lined): 4- and 8-byte elements in rows of 32 bytes on a tier of
        512-bit floats, whose two-source permutes shift a column's bytes to its line."""
        floats = TIERS[self.isa].floats
        return (self.esize in (4, 8) and self.tile * self.esize == 32 and floats is not None
                and floats.lanes == 16)

    @property
    def tile_a(self) -> int:
        """Elements of the dst-contiguous tile side per micro-kernel call: one cache line."""
        return max(self.tile, LINE // self.esize)

    @property
    def vector(self):
        """The register type of the tile rows, or None (portable C; elements a tile never
        takes)."""
        if self.esize not in TILE_WIDTH:
            return None
        return TIERS[self.isa].vectors.get(self.tile * self.esize)

    @property
    def lanes(self) -> int:
        """Interleave: elements of each row per vector step (one widest register)."""
        vectors = TIERS[self.isa].vectors
        return max(vectors) // self.esize if vectors else 1

    def describe(self) -> dict:
        if self.kind == "tile":
            layout = f"{self.tile}x{self.tile} transpose tile"
        else:
            layout = {"run": "contiguous run", "strided": "strided elements",
                      "interleave": f"{self.groups} rows interleaved",
                      "nearest": "any layout, nearest forward (copies)",
                      "linear": "any layout, weighted taps in f32"}[self.kind]
        if self.esize not in ESIZES:  # runs of elements taken whole (plan._interleaving)
            layout += f" (runs of {self.esize} bytes)"
        if self.op == "resample":
            dtypes = self.src or f"any {self.esize}-byte"
        elif self.cvt:
            dtypes = f"{self.src}->{self.dst}"
        else:
            dtypes = ("any" if self.kind == "run" or self.esize not in ESIZES
                      else f"any {self.esize}-byte")
        return {"name": self.name, "op": self.op, "isa": self.isa, "kind": self.kind,
                "dtypes": dtypes, "layout": layout + (", zero fill" if self.zero else "")}


def kernels(isa: str):
    """Every kernel of one tier, in a fixed order."""
    out = [KernelSpec("reorder", "run", 1, zero, isa) for zero in (False, True)]
    out += [KernelSpec("reorder", "tile", e, False, isa) for e in ESIZES]
    out += [KernelSpec("reorder", "strided", e, zero, isa) for e in ESIZES for zero in (False, True)]
    out += [KernelSpec("reorder", "interleave", e, False, isa, groups=g)
            for e in INTERLEAVE_ESIZES for g in GROUPS]
    for s, d in conversions():
        out += [KernelSpec("reorder", kind, TABLE[d].size, False, isa, s, d) for kind in KINDS]
    out += [KernelSpec("resample", "nearest", e, False, isa) for e in (1, 2, 4)]
    out += [KernelSpec("resample", "linear", TABLE[d].size, False, isa, d, d)
            for d in RESAMPLE_DTYPES]
    return out


def conversions():
    """Every (src, dst) dtype pair of the table, equal pairs included (scales or zero points
    make them arithmetic)."""
    return [(s, d) for s in TABLE for d in TABLE]
