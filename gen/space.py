"""The kernel list: every kernel spec the build instantiates, per ISA tier.

Kinds (the innermost work once a problem is normalised, see registry.choose):
- run:     a run contiguous on both sides, moved as bytes (or zero-filled);
- tile:    a 2-D tile whose unit strides differ (register transpose, line-whole stores);
- strided: the innermost node with any strides, element by element (or zero-filled).
"""
from __future__ import annotations

from dataclasses import dataclass

from .isa import TIERS

ESIZES = (1, 2, 4, 8)
TILE_WIDTH = {1: 16, 2: 8, 4: 8, 8: 4}  # tile is W x W elements; a row is one register
LINE = 64  # bytes: the tile kernel writes whole cache lines of the destination


@dataclass(frozen=True)
class KernelSpec:
    op: str
    kind: str
    esize: int
    zero: bool
    isa: str

    @property
    def name(self) -> str:
        zero = "_zero" if self.zero else ""
        return f"{self.op}_{self.kind}{zero}_e{self.esize}_{self.isa}"

    @property
    def tile(self) -> int:
        return TILE_WIDTH[self.esize]

    @property
    def tile_a(self) -> int:
        """Elements of the dst-contiguous tile side per micro-kernel call: one cache line."""
        return max(self.tile, LINE // self.esize)

    @property
    def vector(self):
        """The register type of the tile rows, or None (portable C)."""
        return TIERS[self.isa].vectors.get(self.tile * self.esize)

    def describe(self) -> dict:
        layout = {"run": "contiguous run", "strided": "strided elements",
                  "tile": f"{self.tile}x{self.tile} transpose tile"}[self.kind]
        dtypes = "any" if self.kind == "run" else f"any {self.esize}-byte"
        return {"name": self.name, "op": self.op, "isa": self.isa, "kind": self.kind,
                "dtypes": dtypes, "layout": layout + (", zero fill" if self.zero else "")}


def kernels(isa: str):
    """Every kernel of one tier, in a fixed order."""
    out = [KernelSpec("reorder", "run", 1, zero, isa) for zero in (False, True)]
    out += [KernelSpec("reorder", "tile", e, False, isa) for e in ESIZES]
    out += [KernelSpec("reorder", "strided", e, zero, isa) for e in ESIZES for zero in (False, True)]
    return out
