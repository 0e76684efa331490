"""`gen.tune(primitive)`: times the kernel choices that fit a primitive's problem and keeps the
fastest, in the primitive and in this process's wisdom (gen/wisdom.py).

For a reorder or shuffle the search is per piece (a problem has a few pieces, each with 1-4
kernel kinds), then for streaming stores on and off, then for the loops in the guessed order
(plan.loop_order), the destination's or the source's, then for tiles that prefetch their next
work item's source rows as guessed (plan._tile_prefetch), never or always. For a resampling
(one kernel) it is for streaming stores on and off, then for the prefetch of the source lines
of the items ahead as guessed, never or always (where the lines allow it). Each candidate plan
runs on scratch buffers of the primitive's descriptors, and its median time over `repeat`
calls counts.
"""
from __future__ import annotations

import time

from . import jit, plan, runtime, wisdom
from .errors import Error, checked
from .memory import Memory
from .ops import resample
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


class _Candidates:
    """The plans of one problem by wisdom.Choice, each timed once on scratch buffers. They run
    the generic kernels (no build for each); the plan kept is made again, to be specialised as
    any plan."""

    def __init__(self, make, call, repeat):
        self.make, self.call, self.repeat = make, call, repeat
        self.plans, self.timed = {}, {}

    def plan(self, choice):
        if choice not in self.plans:
            p = self.make(choice)
            p.jit = jit.Runs(0)
            self.plans[choice] = p
        return self.plans[choice]

    def faster(self, best, other):
        """`other` where it took less time than `best`, else `best`."""
        for c in (best, other):
            if c not in self.timed:
                p = self.plan(c)
                self.timed[c] = _median_s(lambda: self.call(p), self.repeat)
        return other if self.timed[other] < self.timed[best] else best

    def keep(self, primitive, best) -> dict:
        """Records `best` as wisdom, gives the primitive its plan; tune's result."""
        chosen = self.make(best)
        wisdom.record(chosen.key(), best)  # later plans of this problem take it
        primitive._plan = chosen  # its kernel is the primitive's
        return {"kernel": chosen.kernel,
                "candidates": {f"{self.plans[c].kernel} stream={c.stream} order={c.order} "
                               f"prefetch={c.prefetch}": round(t * 1e6, 2)
                               for c, t in self.timed.items()}}


@checked
def tune(primitive, *, threads=None, repeat: int = 7) -> dict:
    """Measures `primitive`'s kernel choices at `threads`, switches it to the fastest and
    records that as wisdom. Returns {"kernel": chosen kernel, "candidates": {"KERNELS
    stream=S order=O prefetch=P": us}}."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise Error(f"repeat must be a positive integer, got {repeat!r}")
    nthr = runtime.num_threads(threads)
    if isinstance(primitive, ResamplePrimitive):
        return _tune_resampling(primitive, nthr, repeat)
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
    search = _Candidates(
        lambda c: plan.Plan(guess.problem, guess.traffic, guess.dst_nbytes, guess.convert, c),
        lambda p: p.run(src._addr, dst._addr, nthr, attr), repeat)

    def bound(choice, *fields):
        """The fields of the choice's plan, per piece."""
        return [[f[x] for x in fields] for _, f in search.plan(choice).bound]

    best = wisdom.Choice(tuple(k[0] for k in kinds),
                         int(plan.streams(guess.dst_nbytes, traffic=guess.traffic)))
    for i, options in enumerate(kinds):
        for kind in options[1:]:
            best = search.faster(best, best._replace(
                kinds=best.kinds[:i] + (kind,) + best.kinds[i + 1:]))
    best = search.faster(best, best._replace(stream=1 - best.stream))
    # the loops around the kernels in the destination's or the source's order for every piece,
    # where that is not the guess's
    guessed = bound(best, "n", "src_str")
    for order in wisdom.ORDERS[1:]:
        other = best._replace(order=order)
        if bound(other, "n", "src_str") != guessed:
            best = search.faster(best, other)
    # the tiles with the prefetches the guess has not, where machines differ most: quarter-
    # narrowing tiles, which guess none, took 1.2-1.35x less time with them on Zen5 (rand10 at
    # 2 threads, rand14 and rand18 at 1 and 2), where Zen4 had them 1.15-1.5x slower
    guessed = bound(best, "prefetch")
    for mode in wisdom.PREFETCH[1:]:
        other = best._replace(prefetch=mode)
        if bound(other, "prefetch") != guessed:
            best = search.faster(best, other)
    return search.keep(primitive, best)


def _tune_resampling(primitive, nthr, repeat) -> dict:
    """tune of a resampling: streaming stores on and off (the guess's at nthr threads first),
    then its prefetches where the guess's differ."""
    src, dst = _scratch(primitive.src_desc), Memory(primitive.dst_desc)
    guess = primitive._plan
    search = _Candidates(lambda c: resample.planned(guess.problem, guess.dst_nbytes, choice=c),
                         lambda p: p.run(src._addr, dst._addr, nthr), repeat)
    best = wisdom.Choice((), int(nthr <= guess.tables.fields["stream"]))
    best = search.faster(best, best._replace(stream=1 - best.stream))
    guessed = search.plan(best).tables.fields["prefetch"]
    for mode in wisdom.PREFETCH[1:]:
        other = best._replace(prefetch=mode)
        if search.plan(other).tables.fields["prefetch"] != guessed:
            best = search.faster(best, other)
    return search.keep(primitive, best)
