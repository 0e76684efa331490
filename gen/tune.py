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


# Turns of each candidate's calls in a comparison (see _medians_s)
ROUNDS = 3


def _medians_s(calls, repeat: int) -> list:
    """Median seconds of each call over ROUNDS turns of it: one call to warm (pages, caches:
    what the call before left), then `repeat` timed; the turns alternate between the calls,
    so that the machine's drift hits all alike. A turn of calls, not single calls in turns:
    a call after another one's streaming stores would find none of its destination in the
    cache, where the same call repeated, as in use, finds it there."""
    times = [[] for _ in calls]
    for _ in range(ROUNDS):
        for call, t in zip(calls, times):
            call()
            for _ in range(repeat):
                t0 = time.perf_counter()
                call()
                t.append(time.perf_counter() - t0)
    return [sorted(t)[len(t) // 2] for t in times]


def _scratch(desc) -> Memory:
    """A source buffer whose pages are written: an untouched one maps the kernel's reads to a
    single zero page, which times a read from cache, not from memory. Byte 0x3c makes finite,
    normal values of every type."""
    m = Memory(desc)
    m.data[:] = 0x3C
    return m


class _Candidates:
    """The plans of one problem by wisdom.Choice, timed in pairs on scratch buffers, each
    specialised first as a plan run again is (README "Run-time specialisation"; not where that
    is off or the problem too small): the code that runs after tune is the code it timed. The
    generic kernels had other winners: linear NCHW 2x up at 2 threads 1.13x faster with
    streaming stores, specialised 1.26x slower (Zen5, alternating A/B)."""

    def __init__(self, make, call, repeat):
        self.make, self.call, self.repeat = make, call, repeat
        self.plans, self.timed = {}, {}

    def plan(self, choice):
        if choice not in self.plans:
            self.plans[choice] = self.make(choice)
        return self.plans[choice]

    def _specialised(self, choice):
        p = self.plan(choice)
        if p.jit.count is not None and p.jit.special is None:  # count None: never
            for _ in range(jit.SECOND_RUN):
                self.call(p)
            jit.jit_wait()
        return p

    def faster(self, best, other):
        """`other` where it took less time than `best`, timed in turns with it, else
        `best`."""
        a, b = self._specialised(best), self._specialised(other)
        self.timed[best], self.timed[other] = _medians_s(
            [lambda: self.call(a), lambda: self.call(b)], self.repeat)
        return other if self.timed[other] < self.timed[best] else best

    def keep(self, primitive, best) -> dict:
        """Records `best` as wisdom, gives the primitive its plan; tune's result."""
        chosen = self.plan(best)
        wisdom.record(chosen.key(), best)  # later plans of this problem take it
        primitive._plan = chosen  # its kernel is the primitive's
        return {"kernel": chosen.kernel,
                "candidates": {
                    f"{self.plans[c].kernel} stream={'auto' if c.stream is None else c.stream} "
                    f"order={c.order} prefetch={c.prefetch}": round(t * 1e6, 2)
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

    best = wisdom.Choice(tuple(k[0] for k in kinds), None)  # the guess
    for i, options in enumerate(kinds):
        for kind in options[1:]:
            best = search.faster(best, best._replace(
                kinds=best.kinds[:i] + (kind,) + best.kinds[i + 1:]))
    # streaming stores on and off at every thread count, where the guess's differ
    guessed = bound(best, "stream")
    for stream in (0, 1):
        other = best._replace(stream=stream)
        if bound(other, "stream") != guessed:
            best = search.faster(best, other)
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
    """tune of a resampling: from the guess, streaming stores on and off at every thread
    count, then its prefetches, where the guess's differ."""
    src, dst = _scratch(primitive.src_desc), Memory(primitive.dst_desc)
    guess = primitive._plan
    search = _Candidates(lambda c: resample.planned(guess.problem, guess.dst_nbytes, choice=c),
                         lambda p: p.run(src._addr, dst._addr, nthr), repeat)
    best = wisdom.Choice((), None)
    for field, options in (("stream", (0, 1)), ("prefetch", wisdom.PREFETCH[1:])):
        guessed = search.plan(best).tables.fields[field]
        for value in options:
            other = best._replace(**{field: value})
            if search.plan(other).tables.fields[field] != guessed:
                best = search.faster(best, other)
    return search.keep(primitive, best)
