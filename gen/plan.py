"""A normalised Problem bound to kernels: the C task array one op call hands to `gen_run`.

Built once per problem (primitives keep theirs; the functional API caches them), so a call
is one C call with the GIL released.
"""
from __future__ import annotations

import functools
import math
from collections import namedtuple

from . import codegen, registry
from .dtypes import TABLE
from .errors import Error
from .problem import Layout, Problem, normalise

# A conversion's dtypes, and whether it adds beta * dst (then dst is read).
Conversion = namedtuple("Conversion", "src dst sum")
# Below this many bytes of traffic per thread, another thread costs more than it brings.
BYTES_PER_THREAD = 1 << 17
# Destinations at least this large are written with streaming stores where lines are whole.
STREAM_BYTES = 1 << 21


class Plan:
    """`convert` is None (move bytes) or Conversion(src, dst, sum): copy pieces then run the
    conversion kernels; the values (scales, zero points, beta) come with each call."""

    def __init__(self, problem, traffic: int, dst_nbytes: int, convert=None):
        mod = registry.module()
        esize = problem.esize  # dst's element size
        src_esize = TABLE[convert.src].size if convert else esize
        self.problem = problem
        self.traffic = traffic
        self._tasks = mod.ffi.new("gen_task[]", max(1, len(problem.pieces)))
        self._ntasks = len(problem.pieces)
        self._run = mod.lib.gen_run
        self._ffi = mod.ffi
        names = []
        for task, piece in zip(self._tasks, problem.pieces):
            pair = (convert.src, convert.dst) if convert and not piece.zero else None
            spec, a, b, outer = registry.choose(piece.nodes, piece.zero, esize, piece.pad,
                                                pair, tile=not (convert and convert.sum))
            if len(outer) > codegen.MAX_NODES:
                raise Error(f"layout pair needs {len(outer)} loop nodes, more than "
                            f"{codegen.MAX_NODES}")
            names.append(spec.name)
            task.fn = mod.ffi.addressof(mod.lib, spec.name)
            p = task.piece
            p.src_off, p.dst_off = piece.src_off * src_esize, piece.dst_off * esize
            p.scl_off = piece.scl_off
            p.nouter = len(outer)
            for k, node in enumerate(outer):
                p.n[k], p.src_str[k], p.dst_str[k] = node.n, node.src * src_esize, node.dst * esize
                p.scl_str[k] = node.scl
            p.a_n, p.a_src, p.a_dst, p.a_scl = a.n, a.src * src_esize, a.dst * esize, a.scl
            p.b_n, p.b_src, p.b_dst, p.b_scl = b.n, b.src * src_esize, b.dst * esize, b.scl
            p.pad = piece.pad * esize
            p.stream = int(dst_nbytes >= STREAM_BYTES)
        self.kernel = "+".join(dict.fromkeys(names))

    def run(self, src_addr: int, dst_addr: int, threads: int, attr=None) -> None:
        """`attr`: the conversion's gen_attr (cffi), None when moving bytes."""
        nthr = max(1, min(threads, self.traffic // BYTES_PER_THREAD))
        self._run(src_addr, dst_addr, attr if attr is not None else self._ffi.NULL,
                  self._tasks, self._ntasks, nthr)


@functools.lru_cache(maxsize=256)
def cached(dims: tuple, src: Layout, dst: Layout, esize: int, dst_nbytes: int,
           convert=None, scl: "Layout | None" = None) -> Plan:
    """The plan of one reorder problem (isa fixed per process, so not part of the key).
    `esize` is dst's element size; `scl` indexes the scales of a conversion."""
    problem = normalise(dims, src, dst, esize, scl)
    src_esize = TABLE[convert.src].size if convert else esize
    reads = src_esize + (esize if convert and convert.sum else 0)
    traffic = 0
    for piece in problem.pieces:
        n = math.prod(node.n for node in piece.nodes)
        runs = n // piece.nodes[-1].n if piece.nodes else 1
        traffic += n * esize + (0 if piece.zero else n * reads) + runs * piece.pad * esize
    return Plan(problem, traffic, dst_nbytes, convert)


def zero_fill(dims, dst: Layout, esize: int, dst_nbytes: int) -> Plan:
    """A plan writing only the padding of `dst` (for ops whose kernels write the real part)."""
    pieces = tuple(p for p in normalise(dims, dst, dst, esize, fuse=False).pieces if p.zero)
    problem = Problem(esize, pieces)
    traffic = sum(math.prod(n.n for n in p.nodes) for p in pieces) * esize
    return Plan(problem, traffic, dst_nbytes)
