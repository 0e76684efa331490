"""`gen.tune(primitive)`: times the kernel choices that fit a primitive's problem and keeps the
fastest, in the primitive and in this process's wisdom (gen/wisdom.py).

The search is per piece (a problem has a few pieces, each with 1-4 kernel kinds), then for
streaming stores on and off, then for the loops in the guessed order (plan.loop_order), the
destination's or the source's, then for tiles that prefetch their next work item's source rows
as guessed (plan._tile_prefetch), never or always: each candidate plan runs on scratch buffers
of the primitive's descriptors, and its median time over `repeat` calls counts.
"""
from __future__ import annotations

import time

from . import jit, plan, runtime, wisdom
from .errors import Error, checked
from .memory import Memory
from .ops.reorder import Reorder
from .ops.resample import _Primitive as ResamplePrimitive
from .ops.shuffle import ShuffleChannels


def _median_s(call, repeat: int) -> float:
    call()  # warm: pages, caches
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def _scratch(desc) -> Memory:
    """A source buffer whose pages are written: an untouched one maps the kernel's reads to a
    single zero page, which times a read from cache, not from memory. Byte 0x3c makes finite,
    normal values of every type."""
    m = Memory(desc)
    m.data[:] = 0x3C
    return m


@checked
def tune(primitive, *, threads=None, repeat: int = 7) -> dict:
    """Measures `primitive`'s kernel choices at `threads`, switches it to the fastest and
    records that as wisdom. Returns {"kernel": chosen kernel, "candidates": {"KERNELS
    stream=S order=O prefetch=P": us}} (one candidate, named by its kernel alone, where there
    is no choice)."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise Error(f"repeat must be a positive integer, got {repeat!r}")
    nthr = runtime.num_threads(threads)
    if isinstance(primitive, ResamplePrimitive):
        # one kernel per resampling problem: nothing to choose, only to measure
        src, dst = _scratch(primitive.src_desc), Memory(primitive.dst_desc)
        t = _median_s(lambda: primitive(src, dst, threads=nthr), repeat)
        return {"kernel": primitive.kernel, "candidates": {primitive.kernel: round(t * 1e6, 2)}}
    if isinstance(primitive, Reorder):
        src, dst = _scratch(primitive.src_desc), Memory(primitive.dst_desc)
        attr = primitive._attr[0]
    elif isinstance(primitive, ShuffleChannels):
        src, dst, attr = _scratch(primitive.desc), Memory(primitive.desc), None
    else:
        raise Error(f"tune takes a gen.Reorder, gen.ShuffleChannels, gen.Resample or "
                    f"gen.ResampleBackward, got {type(primitive).__name__}")
    guess = primitive._plan
    kinds = plan.choices(guess.problem, guess.convert, guess.dst_nbytes, guess.traffic)
    plans, timed = {}, {}

    def plan_of(choice):
        if choice not in plans:
            p = plan.Plan(guess.problem, guess.traffic, guess.dst_nbytes, guess.convert, choice)
            p.jit = jit.Runs(0)  # candidates run the generic kernels: no build for each
            plans[choice] = p
        return plans[choice]

    def measure(choice):
        if choice not in timed:
            p = plan_of(choice)
            timed[choice] = _median_s(lambda: p.run(src._addr, dst._addr, nthr, attr), repeat)
        return timed[choice]

    def loops(choice):
        return [(f["n"], f["src_str"]) for _, f in plan_of(choice).bound]

    def prefetches(choice):
        return [f["prefetch"] for _, f in plan_of(choice).bound]

    best = wisdom.Choice(tuple(k[0] for k in kinds), int(plan.streams(guess.dst_nbytes, traffic=guess.traffic)))
    for i, options in enumerate(kinds):
        for kind in options[1:]:
            other = best._replace(kinds=best.kinds[:i] + (kind,) + best.kinds[i + 1:])
            if measure(other) < measure(best):
                best = other
    other = best._replace(stream=1 - best.stream)
    if measure(other) < measure(best):
        best = other
    # the loops around the kernels in the destination's or the source's order for every piece,
    # where that is not the guess's
    guessed = loops(best)
    for order in wisdom.ORDERS[1:]:
        other = best._replace(order=order)
        if loops(other) != guessed and measure(other) < measure(best):
            best = other
    # the tiles with the prefetches the guess has not, where machines differ most: quarter-
    # narrowing tiles, which guess none, took 1.2-1.35x less time with them on Zen5 (rand10 at
    # 2 threads, rand14 and rand18 at 1 and 2), where Zen4 had them 1.15-1.5x slower
    guessed = prefetches(best)
    for mode in wisdom.PREFETCH[1:]:
        other = best._replace(prefetch=mode)
        if prefetches(other) != guessed and measure(other) < measure(best):
            best = other
    chosen = plans[best]
    chosen.jit = jit.Runs(chosen.traffic)  # run again, it is specialised as any plan
    wisdom.record(chosen.key(), best)  # later plans of this problem take it
    primitive._plan = chosen  # its kernel is the primitive's
    return {"kernel": chosen.kernel,
            "candidates": {f"{plans[c].kernel} stream={c.stream} order={c.order} "
                           f"prefetch={c.prefetch}": round(t * 1e6, 2) for c, t in timed.items()}}
