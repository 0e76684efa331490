"""A normalised Problem bound to kernels: the C task array one op call hands to `gen_run`.

Built once per problem (primitives keep theirs; the functional API caches them), so a call
is one C call with the GIL released.
"""
from __future__ import annotations

import functools
import math

from . import codegen, registry
from .errors import Error
from .problem import Layout, normalise

# Below this many bytes of traffic per thread, another thread costs more than it brings.
BYTES_PER_THREAD = 1 << 17
# Destinations at least this large are written with streaming stores where lines are whole.
STREAM_BYTES = 1 << 21


class Plan:
    def __init__(self, problem, traffic: int, dst_nbytes: int):
        mod = registry.module()
        esize = problem.esize
        self.problem = problem
        self.traffic = traffic
        self._tasks = mod.ffi.new("gen_task[]", max(1, len(problem.pieces)))
        self._ntasks = len(problem.pieces)
        self._run = mod.lib.gen_run
        names = []
        for task, piece in zip(self._tasks, problem.pieces):
            spec, a, b, outer = registry.choose(piece.nodes, piece.zero, esize, piece.pad)
            if len(outer) > codegen.MAX_NODES:
                raise Error(f"layout pair needs {len(outer)} loop nodes, more than "
                            f"{codegen.MAX_NODES}")
            names.append(spec.name)
            task.fn = mod.ffi.addressof(mod.lib, spec.name)
            p = task.piece
            p.src_off, p.dst_off = piece.src_off * esize, piece.dst_off * esize
            p.nouter = len(outer)
            for k, node in enumerate(outer):
                p.n[k], p.src_str[k], p.dst_str[k] = node.n, node.src * esize, node.dst * esize
            p.a_n, p.a_src, p.a_dst = a.n, a.src * esize, a.dst * esize
            p.b_n, p.b_src, p.b_dst = b.n, b.src * esize, b.dst * esize
            p.pad = piece.pad * esize
            p.stream = int(dst_nbytes >= STREAM_BYTES)
        self.kernel = "+".join(dict.fromkeys(names))

    def run(self, src_addr: int, dst_addr: int, threads: int) -> None:
        nthr = max(1, min(threads, self.traffic // BYTES_PER_THREAD))
        self._run(src_addr, dst_addr, self._tasks, self._ntasks, nthr)


@functools.lru_cache(maxsize=256)
def cached(dims: tuple, src: Layout, dst: Layout, esize: int, dst_nbytes: int) -> Plan:
    """The plan of one reorder problem (isa fixed per process, so not part of the key)."""
    problem = normalise(dims, src, dst, esize)
    traffic = 0
    for piece in problem.pieces:
        n = math.prod(node.n for node in piece.nodes)
        runs = n // piece.nodes[-1].n if piece.nodes else 1
        traffic += (n * (1 if piece.zero else 2) + runs * piece.pad) * esize
    return Plan(problem, traffic, dst_nbytes)
