"""`gen.tune(primitive)`: times the kernel choices that fit a primitive's problem and keeps the
fastest, in the primitive and in this process's wisdom (gen/wisdom.py).

The search starts from the guess. For a reorder or shuffle it is per piece (a problem has a
few pieces, each with 1-4 kernel kinds), then for streaming stores off and on, then for the
loops in the destination's or the source's order (plan.loop_order guesses), then for tiles
that prefetch their next work item's source rows, and converting runs their source ahead,
never or always (plan._tile_prefetch and plan.prefetches guess). For a resampling (one
kernel) it is for streaming stores off and on, then for the prefetch of the source lines of
the items ahead, never or always (where the lines allow it).
A candidate is timed only where it runs code at the tuned thread count that no candidate
timed before (nor the best so far) runs; it runs on scratch buffers of the primitive's
descriptors, in turns with the best so far (_medians_s), and the lower median wins.
"""
from __future__ import annotations

import time

import numpy as np

from . import jit, plan, runtime, wisdom
from .errors import Error, checked
from .memory import Memory
from .ops import resample
from .ops.reorder import Reorder, Staged
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


def _comparable(value):
    """`value` (a plan's fields: dicts, lists, tuples, NumPy arrays, numbers) as nested tuples
    that compare equal where the values are equal, arrays by their bytes."""
    if isinstance(value, np.ndarray):
        return value.dtype.str, value.shape, value.tobytes()
    if isinstance(value, dict):
        return tuple(sorted((k, _comparable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_comparable(v) for v in value)
    return value


def _scratch(desc) -> Memory:
    """A source buffer whose pages are written: an untouched one maps the kernel's reads to a
    single zero page, which times a read from cache, not from memory. Byte 0x3c makes finite,
    normal values of every type."""
    m = Memory(desc)
    m.data[:] = 0x3C
    return m


class _Candidates:
    """The plans of one problem by wisdom.Choice, compared two at a time on scratch buffers,
    each specialised first as a plan run again is (README "Run-time specialisation"; not
    where that is off or the problem too small): the code that runs after tune is the code it
    timed. The generic kernels had other winners: linear NCHW 2x up at 2 threads 1.13x faster
    with streaming stores, specialised 1.26x slower (Zen5, alternating A/B).
    `make(choice)` gives a plan, `call(plan)` runs it once, `runs(plan)` is what of the plan
    decides the code a call runs at the tuned thread count (see code)."""

    def __init__(self, make, call, runs, repeat):
        self.make, self.call, self.runs, self.repeat = make, call, runs, repeat
        self.plans, self.codes, self.timed = {}, {}, {}

    def plan(self, choice):
        if choice not in self.plans:
            self.plans[choice] = self.make(choice)
        return self.plans[choice]

    def code(self, choice):
        """What decides the code the choice's plan runs: a stream field of 1 (one thread
        streams) and one of any thread count run alike at one thread."""
        if choice not in self.codes:
            self.codes[choice] = self.runs(self.plan(choice))
        return self.codes[choice]

    def faster(self, best, other):
        """`other` where it runs code not timed yet (nor `best`'s) and took less time, timed
        in turns with `best`, else `best`."""
        if any(self.code(other) == self.code(c) for c in (best, *self.timed)):
            return best
        pair = [self.plan(best), self.plan(other)]
        waiting = [p for p in pair if p.jit.count is not None and p.jit.special is None]
        for p in waiting:  # count None: never specialised
            for _ in range(jit.SECOND_RUN):
                self.call(p)
        if waiting:
            jit.jit_wait()
        self.timed[best], self.timed[other] = _medians_s(
            [lambda: self.call(pair[0]), lambda: self.call(pair[1])], self.repeat)
        return other if self.timed[other] < self.timed[best] else best

    def search(self, best, field, values):
        """`best` with each of `values` for `field` in turn, the faster kept."""
        for value in values:
            best = self.faster(best, best._replace(**{field: value}))
        return best

    def keep(self, primitive, best) -> dict:
        """Records `best` as wisdom, gives the primitive its plan (made again where its
        requested build did not load: the new one asks for it again); tune's result."""
        chosen = self.plan(best)
        if chosen.jit.count is not None and chosen.jit.special is None:
            chosen = self.make(best)
        wisdom.record(chosen.key(), best)  # later plans of this problem take it
        primitive._plan = chosen  # its kernel is the primitive's
        if best not in self.timed:  # no other candidate: the guess, timed alone
            self.timed[best], = _medians_s([lambda: self.call(chosen)], self.repeat)
        return {"kernel": chosen.kernel,
                "candidates": {
                    f"{self.plans[c].kernel} "
                    f"stream={'auto' if c.stream is None else c.stream} "
                    f"order={c.order} prefetch={c.prefetch}": round(t * 1e6, 2)
                    for c, t in self.timed.items()}}


@checked
def tune(primitive, *, threads=None, repeat: int = 7) -> dict:
    """Measures `primitive`'s kernel choices at `threads`, switches it to the fastest and
    records that as wisdom. Returns {"kernel": chosen kernel, "candidates": {"KERNELS
    stream=S order=O prefetch=P": us}} (the guess: stream=auto order=auto prefetch=auto). A
    reorder through an intermediate (reorder.Staged) keeps its guess, timed alone."""
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
    if isinstance(guess, Staged):  # two plans through an intermediate: timed, not tuned
        t, = _medians_s([lambda: guess.run(src._addr, dst._addr, nthr, attr)], repeat)
        return {"kernel": guess.kernel, "candidates": {
            f"{guess.kernel} stream=auto order=auto prefetch=auto": round(t * 1e6, 2)}}
    kinds = plan.choices(guess.problem, guess.convert, guess.dst_nbytes, guess.traffic)

    def runs(p):
        team = p.team(nthr)
        return _comparable([(spec.name, {**f, "stream": team <= f["stream"]})
                            for spec, f in p.bound])

    search = _Candidates(
        lambda c: plan.Plan(guess.problem, guess.traffic, guess.dst_nbytes, guess.convert, c),
        lambda p: p.run(src._addr, dst._addr, nthr, attr), runs, repeat)
    best = wisdom.Choice(tuple(k[0] for k in kinds), None)  # the guess
    for i, options in enumerate(kinds):
        best = search.search(best, "kinds",
                             [best.kinds[:i] + (k,) + best.kinds[i + 1:] for k in options[1:]])
    best = search.search(best, "stream", (0, 1))
    best = search.search(best, "order", wisdom.ORDERS[1:])
    # the prefetches (tiles', converting runs'), where machines differ most: quarter-narrowing
    # tiles, which guess none, took 1.2-1.35x less time with them on Zen5 (rand10 at 2 threads,
    # rand14 and rand18 at 1 and 2), where Zen4 had them 1.15-1.5x slower
    best = search.search(best, "prefetch", wisdom.PREFETCH[1:])
    return search.keep(primitive, best)


def _tune_resampling(primitive, nthr, repeat) -> dict:
    """tune of a resampling: from the guess, streaming stores off and on at every thread
    count, then its prefetches."""
    src, dst = _scratch(primitive.src_desc), Memory(primitive.dst_desc)
    guess = primitive._plan

    def runs(p):
        fields = p.tables.fields
        return _comparable({**fields, "stream": p.team(nthr) <= fields["stream"]})

    search = _Candidates(lambda c: resample.planned(guess.problem, guess.dst_nbytes, choice=c),
                         lambda p: p.run(src._addr, dst._addr, nthr), runs, repeat)
    best = search.search(wisdom.Choice((), None), "stream", (0, 1))
    return search.keep(primitive, search.search(best, "prefetch", wisdom.PREFETCH[1:]))
