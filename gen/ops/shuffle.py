"""ShuffleChannels (API.md "ShuffleChannels"), forward and backward, as a reorder.

With K = C // group, `y[.., k*group + g, ..] = x[.., g*K + k, ..]`: split the channel axis of
the source at K and of the destination at group, exchange the source's two halves, and the
shuffle is a plain reorder between the two views (the RFC's reshape and permute_axes). When a
block of the channel axis straddles the split (e.g. 16c with group 2 of 116 channels), the
source's channel axis is gathered through an index table instead, and the normaliser unrolls it.
The backward op is the shuffle with group K.
"""
from __future__ import annotations

import numbers
import time

import numpy as np

from .. import dtypes, plan, runtime
from ..errors import Error, SetOnce, checked
from ..layout import MemoryDesc, concrete
from ..memory import Memory, Operand, check_call, new_array, rank_of
from ..problem import Layout, NestError


def _integer(name, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise Error(f"{name} must be an integer, got {value!r}")
    return int(value)


def check(dims, axis, group):
    """(axis in [0, rank), group) validated against `dims`."""
    rank = len(dims)
    if rank == 0:
        raise Error("shuffle_channels needs a tensor of rank >= 1, got rank 0")
    axis, group = _integer("axis", axis), _integer("group", group)
    if not -rank <= axis < rank:
        raise Error(f"axis={axis} is out of range [{-rank}, {rank - 1}] for rank {rank}")
    axis %= rank
    channels = dims[axis]
    if not 1 <= group <= channels or channels % group:
        raise Error(f"group={group} must be in [1, {channels}] and divide the {channels} "
                    f"channels of axis {axis}")
    return axis, group


def _plan(dims, axis, group, backward, src: Layout, dst: Layout, esize, dst_nbytes):
    channels = dims[axis]
    if backward:
        group = channels // group
    per_group = channels // group
    s, d = src.split(axis, per_group), dst.split(axis, group)
    if s and d:
        split = dims[:axis] + (per_group, group) + dims[axis + 1:]
        try:
            return plan.cached(split, s.swap(axis), d, esize, dst_nbytes)
        except NestError:
            pass  # the two views' blocks do not nest: gather instead
    try:
        c = np.arange(channels)
        table = (c % group) * per_group + c // group
    except MemoryError:  # (plan.cached catches its own)
        raise Error(f"the gather table of {channels} channels does not fit in memory") from None
    return plan.cached(dims, src.gather(axis, table), dst, esize, dst_nbytes)


def _run(x, axis, group, backward, threads, op):
    t0 = time.perf_counter()
    if rank_of(x) == 0:
        raise Error("shuffle_channels needs a tensor of rank >= 1, got rank 0")
    src = Operand.of(x)
    axis, group = check(src.dims, axis, group)
    if isinstance(x, Memory):
        out = Memory(x.desc)
        dst = Operand.of_memory(out)
    else:
        out = new_array(src.dims, src.dtype)
        dst = Operand.of(out)
    p = _plan(src.dims, axis, group, backward, src.layout, dst.layout,
              dtypes.itemsize(src.dtype), dst.hi - dst.lo)
    kernel = p.run(src.addr, dst.addr, runtime.num_threads(threads))
    if runtime.VERBOSE:
        _verbose(op, kernel, src, axis, group, t0)
    return out


def _verbose(op, kernel, src: Operand, axis, group, t0):
    fmt = "array" if not isinstance(src.keep, Memory) else (src.keep.desc.format or "strided")
    runtime.verbose(f"exec,{op},{kernel},src:{dtypes.name(src.dtype)}:{fmt},"
                    f"{'x'.join(map(str, src.dims))},axis:{axis} group:{group},"
                    f"{(time.perf_counter() - t0) * 1e3:.4f}ms")


@checked
def shuffle_channels(x, axis=1, group=1, *, threads=None):
    """ShuffleChannels of x (NumPy array -> NumPy array, Memory -> Memory of the same desc)."""
    return _run(x, axis, group, False, threads, "shuffle_channels")


@checked
def shuffle_channels_backward(dy, axis=1, group=1, *, threads=None):
    """The inverse of shuffle_channels with the same axis and group."""
    return _run(dy, axis, group, True, threads, "shuffle_channels_backward")


@checked
class ShuffleChannels(SetOnce):
    """`gen.ShuffleChannels(desc, axis=1, group=1, backward=False)`: planned once, then
    `p(src_mem, dst_mem)` with Memories of `desc`."""

    def __init__(self, desc, axis=1, group=1, backward=False):
        if not isinstance(desc, MemoryDesc):
            raise Error(f"desc must be a gen.MemoryDesc, got {desc!r}")
        concrete(desc, "ShuffleChannels desc")
        self.axis, self.group = check(desc.dims, axis, group)
        if not isinstance(backward, (bool, np.bool_, numbers.Integral)) or backward not in (0, 1):
            raise Error(f"backward must be True or False, got {backward!r}")
        self.desc, self.backward = desc, bool(backward)
        layout = Layout.of_desc(desc)
        self._plan = _plan(desc.dims, self.axis, self.group, self.backward, layout, layout,
                           desc.itemsize, desc.nbytes)
        self._op = "shuffle_channels_backward" if backward else "shuffle_channels"

    @property
    def kernel(self) -> str:
        """The kernels a call runs ("jit:..." once specialised)."""
        return self._plan.kernel

    def __call__(self, src, dst, *, threads=None):
        t0 = time.perf_counter() if runtime.VERBOSE else 0
        sa, da = check_call(src, dst, self.desc, self.desc, "shuffle")
        kernel = self._plan.run(sa, da, runtime.num_threads(threads))
        if runtime.VERBOSE:
            _verbose(self._op, kernel, Operand.of_memory(src), self.axis, self.group, t0)
        return dst
