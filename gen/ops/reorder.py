"""Reorder: copy a tensor between memory formats and data types (API.md "Reorder").

Without scales, zero points, sum or a type change a reorder moves bytes (any movable dtype);
otherwise it runs the conversion kernels, which compute in f32
`dst = cvt(scale * (src - src_zero_point) [+ sum_scale * dst] + dst_zero_point)`.
"""
from __future__ import annotations

import functools
import math
import numbers
import time
from dataclasses import dataclass

import numpy as np

from .. import dtypes, plan, registry, runtime
from ..errors import Error, SetOnce, checked
from ..layout import MemoryDesc, concrete
from ..memory import Memory, Operand, check_call
from ..problem import Layout, nest

# Zero points are int32 values, as oneDNN's, whatever the data type (a u8 destination may take
# -3: the formula's saturation applies), used as the f32 nearest them
_ZERO_POINT_RANGE = (-2**31, 2**31 - 1)


@dataclass(frozen=True)
class Attrs:
    """Validated reorder attributes: what the plan depends on, and the values of a call."""
    convert: plan.Conversion
    scales: np.ndarray  # float32, one per index of the masked axes (row-major)
    scale_mask: int
    src_zero_point: int
    dst_zero_point: int
    sum_scale: "float | None"

    def scale_layout(self, dims) -> Layout:
        """Strides of the scale index per logical axis (0 where the mask bit is clear)."""
        strides, step = [0] * len(dims), 1
        for axis in reversed(range(len(dims))):
            if self.scale_mask >> axis & 1:
                strides[axis], step = step, step * dims[axis]
        return Layout.strided(dims, tuple(strides))

    def c_attr(self):
        """The gen_attr the kernels read, with the objects that must outlive the call."""
        ffi = registry.module().ffi
        at = ffi.new("gen_attr *")
        at.scales = ffi.cast("const float *", self.scales.ctypes.data)
        at.src_zp = float(self.src_zero_point)
        # + -0.0 is the exact identity (+ 0.0 would turn -0.0 into +0.0)
        at.dst_zp = float(self.dst_zero_point) if self.dst_zero_point else -0.0
        at.beta = 0.0 if self.sum_scale is None else self.sum_scale  # -0.0 kept
        at.sum = self.sum_scale is not None
        return at, self.scales


def _finite(name, value):
    """A float that stays finite as the f32 the kernels compute with."""
    if isinstance(value, (bool, np.bool_, str, bytes)) or np.iscomplexobj(value):
        raise Error(f"{name} must be a real number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        raise Error(f"{name} must be a real number finite in f32, got {value!r}") from None
    with np.errstate(over="ignore"):
        if not math.isfinite(v) or not np.isfinite(np.float32(v)):
            raise Error(f"{name} must be finite in f32, got {value!r}")
    return v


def _zero_point(name, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise Error(f"{name} must be an integer, got {value!r}")
    try:
        whole = float(value).is_integer()
    except OverflowError:  # an int past the floats: out of the range
        whole = False
    lo, hi = _ZERO_POINT_RANGE
    if not whole:
        raise Error(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    if not lo <= int(value) <= hi:
        raise Error(f"{name}={value!r} is out of the int32 range [{lo}, {hi}]")
    return int(value)


def _scales(scales, scale_mask, dims):
    if isinstance(scale_mask, (bool, np.bool_)) or not isinstance(scale_mask,
                                                                  (numbers.Integral, np.integer)):
        raise Error(f"scale_mask must be an integer, got {scale_mask!r}")
    mask = int(scale_mask)
    if mask < 0 or mask >> len(dims):
        raise Error(f"scale_mask={scale_mask!r} sets a bit at or beyond the rank {len(dims)}")
    if scales is None:
        if mask:
            raise Error(f"scale_mask={mask} given without scales")
        return np.ones(1, np.float32), 0
    try:
        given = np.asarray(scales)
        # real numbers only: no strings, complex values or bools (any shape of the right size:
        # a (C, H) array for mask 0b110 is read row-major); bf16 arrays are ml_dtypes' kind V
        real = given.dtype.kind in "iuf" or given.dtype == dtypes.numpy_dtype("bf16") or (
            given.dtype.kind == "O" and all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                                            for v in given.flat))
        if not real:
            raise TypeError
        with np.errstate(over="ignore"):  # a longdouble past the doubles: inf, refused below
            values = given.astype(np.float64).ravel()
    except (TypeError, ValueError, OverflowError):
        raise Error(f"scales must be real numbers finite in f32, got {scales!r}") from None
    want = math.prod(d for axis, d in enumerate(dims) if mask >> axis & 1)
    if values.size != want:
        raise Error(f"len(scales)={values.size} does not match scale_mask={mask}: the masked "
                    f"dims need {want}")
    with np.errstate(over="ignore"):
        f32 = values.astype(np.float32)
    bad = values[~np.isfinite(f32)]
    if bad.size:
        raise Error(f"scales must be finite in f32, got {bad[0]!r}")
    return f32, mask


def attrs(dims, src_dtype, dst_dtype, scales=None, scale_mask=0, src_zero_point=0,
          dst_zero_point=0, sum_scale=None) -> "Attrs | None":
    """Validated attributes, or None for a pure data movement (same dtype, no attribute)."""
    values, mask = _scales(scales, scale_mask, dims)
    # checked first: a bad zero point of a plain copy (0j, False) is refused as well
    src_zp = _zero_point("src_zero_point", src_zero_point)
    dst_zp = _zero_point("dst_zero_point", dst_zero_point)
    given = scales is not None or sum_scale is not None or src_zp != 0 or dst_zp != 0
    if not given and dtypes.name(src_dtype) == dtypes.name(dst_dtype):
        return None
    for side, dt in (("src", src_dtype), ("dst", dst_dtype)):
        if not isinstance(dt, str):
            what = "attributes" if dtypes.name(src_dtype) == dtypes.name(dst_dtype) else \
                f"type change {dtypes.name(src_dtype)} -> {dtypes.name(dst_dtype)}"
            raise Error(f"{what}: {side} dtype {dtypes.name(dt)} is not a conversion type "
                        f"({', '.join(dtypes.TABLE)})")
    beta = None if sum_scale is None else _finite("sum_scale", sum_scale)
    return Attrs(plan.Conversion(src_dtype, dst_dtype, beta is not None), values, mask,
                 src_zp, dst_zp, beta)


def _check_dims(src_dims, dst_dims):
    if tuple(src_dims) != tuple(dst_dims):
        raise Error(f"src dims {tuple(src_dims)} and dst dims {tuple(dst_dims)} differ")


def _dst_memory(dst, src: Operand) -> Memory:
    if isinstance(dst, Memory):
        return dst
    if isinstance(dst, MemoryDesc):
        return Memory(dst)
    if isinstance(dst, str):
        return Memory(MemoryDesc(src.dims, src.dtype, dst))
    raise Error(f"dst must be a gen.Memory, gen.MemoryDesc or format string, got {dst!r}")


# Axes whose blocks do not nest between src and dst are read through a table of their source
# offsets, a piece per combination of their indices (_gathered), in calls of at most
# GATHER_INDICES combinations and GATHER_BYTES moved; else through a dense intermediate
# (Staged), whose two passes cost less than the pieces past those. Zen4, 1 thread, f32 aBcd4b
# -> aBcd6b, gathered against staged: 2x48x16x16 (48 combinations) 9 us against 13,
# 4x96x16x16 38 against 47; 1x256x8x8 29 against 16, 1x4096x2x2 173 against 21, 8x48x28x28
# (2.4 MB) 179 against 158, 8x96x56x56 3.9 ms against 2.4 (2 threads 1.5 against 1.2),
# 8x12x224x224 12.9 ms against 3.9.
GATHER_INDICES = 128
GATHER_BYTES = 1 << 21


@functools.lru_cache(maxsize=256)
def _unnested(dims, src: Layout, dst: Layout) -> "tuple[tuple, int]":
    """The axes whose blocks do not nest between src and dst (A4a -> A3a), and their index
    combinations; plan.cached raises NestError on such axes, before it caches anything."""
    axes = tuple(axis for axis in range(len(dims)) if not nest(axis, src, dst))
    return axes, math.prod(dims[axis] for axis in axes)


@functools.lru_cache(maxsize=64)
def _gathered(dims, src: Layout, dst: Layout) -> Layout:
    """src with each axis whose blocks do not nest with dst's read through a table of its
    source offsets."""
    for axis in _unnested(dims, src, dst)[0]:
        src = src.gather(axis, range(dims[axis]))
    return src


class Staged:
    """A reorder whose blocks do not nest, past what _gathered takes (Ab16a -> Ab3a of 20000
    x 3): src moved into a dense row-major intermediate of its dtype, then that into dst with
    the attributes. A plain axis nests with any blocks, so each step is an ordinary plan; the
    intermediate is allocated per call (primitives may run in several threads at once)."""

    def __init__(self, first: plan.Plan, second: plan.Plan, nbytes: int):
        self.steps, self.nbytes = (first, second), nbytes

    @property
    def kernel(self) -> str:
        return "+".join(p.kernel for p in self.steps)

    def run(self, src_addr: int, dst_addr: int, threads: int, attr=None) -> str:
        try:
            tmp = np.empty(self.nbytes + 64, np.uint8)
        except MemoryError:
            raise Error(f"cannot allocate the {self.nbytes}-byte intermediate of a reorder "
                        f"whose blocks do not nest") from None
        mid = tmp.ctypes.data + (-tmp.ctypes.data) % 64
        first, second = self.steps
        return "+".join((first.run(src_addr, mid, threads), second.run(mid, dst_addr, threads,
                                                                      attr)))


def _plan(dims, src: Layout, dst: Layout, dst_dtype, dst_nbytes, at: "Attrs | None"):
    esize = dtypes.itemsize(dst_dtype)
    scales = () if at is None else (at.convert, at.scale_layout(dims))
    axes, count = _unnested(dims, src, dst)
    if not axes:
        return plan.cached(dims, src, dst, esize, dst_nbytes, *scales)
    src_esize = dtypes.TABLE[at.convert.src].size if at else esize
    moved = math.prod(dims) * (src_esize + esize)
    if count <= GATHER_INDICES and moved <= GATHER_BYTES:
        return plan.cached(dims, _gathered(dims, src, dst), dst, esize, dst_nbytes, *scales)
    strides = [math.prod(dims[axis + 1:]) for axis in range(len(dims))]
    mid, nbytes = Layout.strided(dims, tuple(strides)), math.prod(dims) * src_esize
    return Staged(plan.cached(dims, src, mid, src_esize, nbytes),
                  plan.cached(dims, mid, dst, esize, dst_nbytes, *scales), nbytes)


def run_reorder(src: Operand, dst: Operand, threads, at: "Attrs | None" = None) -> str:
    """Reorder between two operands of equal dims; returns the kernel name."""
    if src.lo < dst.hi and dst.lo < src.hi:
        raise Error("src and dst memory overlap; in-place reorders are not supported")
    p = _plan(src.dims, src.layout, dst.layout, dst.dtype, dst.hi - dst.lo, at)
    c_attr = at.c_attr() if at else (None,)
    return p.run(src.addr, dst.addr, runtime.num_threads(threads), c_attr[0])


@checked
def reorder(src, dst, *, scales=None, scale_mask=0, src_zero_point=0, dst_zero_point=0,
            sum_scale=None, threads=None) -> Memory:
    """Reorder src (Memory or array) into dst (Memory, MemoryDesc or format); returns dst."""
    t0 = time.perf_counter()
    s = Operand.of(src)
    out = _dst_memory(dst, s)
    _check_dims(s.dims, out.desc.dims)
    at = attrs(s.dims, s.dtype, out.desc.dtype, scales, scale_mask, src_zero_point,
               dst_zero_point, sum_scale)
    kernel = run_reorder(s, Operand.of_memory(out), threads, at)
    if runtime.VERBOSE:
        _verbose(kernel, s, out.desc, t0)
    return out


def _verbose(kernel, s: Operand, dst_desc, t0):
    src_fmt = "array" if not isinstance(s.keep, Memory) else (s.keep.desc.format or "strided")
    runtime.verbose(f"exec,reorder,{kernel},src:{dtypes.name(s.dtype)}:{src_fmt} "
                    f"dst:{dtypes.name(dst_desc.dtype)}:{dst_desc.format or 'strided'},"
                    f"{'x'.join(map(str, s.dims))},{(time.perf_counter() - t0) * 1e3:.4f}ms")


@checked
class Reorder(SetOnce):
    """`gen.Reorder(src_desc, dst_desc, **attrs)`: planned once, then `p(src_mem, dst_mem)`."""

    def __init__(self, src_desc, dst_desc, **attributes):
        for name, d in (("src_desc", src_desc), ("dst_desc", dst_desc)):
            if not isinstance(d, MemoryDesc):
                raise Error(f"{name} must be a gen.MemoryDesc, got {d!r}")
            concrete(d, f"Reorder {name}")
        known = {"scales", "scale_mask", "src_zero_point", "dst_zero_point", "sum_scale"}
        for k in attributes:
            if k not in known:
                raise Error(f"unknown reorder attribute {k!r}")
        _check_dims(src_desc.dims, dst_desc.dims)
        at = attrs(src_desc.dims, src_desc.dtype, dst_desc.dtype, **attributes)
        self.src_desc, self.dst_desc = src_desc, dst_desc
        self._plan = _plan(src_desc.dims, Layout.of_desc(src_desc), Layout.of_desc(dst_desc),
                           dst_desc.dtype, dst_desc.nbytes, at)
        self._attr = at.c_attr() if at else (None,)

    @property
    def kernel(self) -> str:
        """The kernels a call runs ("jit:..." once specialised)."""
        return self._plan.kernel

    def __call__(self, src, dst, *, threads=None):
        t0 = time.perf_counter() if runtime.VERBOSE else 0
        sa, da = check_call(src, dst, self.src_desc, self.dst_desc, "reorder")
        kernel = self._plan.run(sa, da, runtime.num_threads(threads), self._attr[0])
        if runtime.VERBOSE:
            _verbose(kernel, Operand.of_memory(src), self.dst_desc, t0)
        return dst
