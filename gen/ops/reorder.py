"""Reorder: copy a tensor between memory formats (API.md "Reorder")."""
from __future__ import annotations

import time

from .. import dtypes, plan, runtime
from ..errors import Error
from ..layout import MemoryDesc
from ..memory import Memory, Operand
from ..problem import Layout


def _check_attrs(scales, scale_mask, src_zero_point, dst_zero_point, sum_scale):
    """Scales, zero points and sum come with the conversion kernels; refuse them clearly."""
    given = {"scales": scales is not None, "scale_mask": scale_mask != 0,
             "src_zero_point": src_zero_point != 0, "dst_zero_point": dst_zero_point != 0,
             "sum_scale": sum_scale is not None}
    bad = [k for k, v in given.items() if v]
    if bad:
        raise Error(f"reorder attribute {bad[0]} is not supported by this build "
                    f"(only layout changes without scales)")


def _check_pair(src_dims, src_dtype, dst_dims, dst_dtype):
    if tuple(src_dims) != tuple(dst_dims):
        raise Error(f"src dims {tuple(src_dims)} and dst dims {tuple(dst_dims)} differ")
    if dtypes.name(src_dtype) != dtypes.name(dst_dtype):
        raise Error(f"type change {dtypes.name(src_dtype)} -> {dtypes.name(dst_dtype)} is "
                    f"not supported by this build (same dtype on both sides)")


def _dst_memory(dst, src: Operand) -> Memory:
    if isinstance(dst, Memory):
        return dst
    if isinstance(dst, MemoryDesc):
        return Memory(dst)
    if isinstance(dst, str):
        return Memory(MemoryDesc(src.dims, src.dtype, dst))
    raise Error(f"dst must be a gen.Memory, gen.MemoryDesc or format string, got {dst!r}")


def run_reorder(src: Operand, dst: Operand, threads) -> str:
    """Reorder between two operands of equal dims and dtype; returns the kernel name."""
    if src.lo < dst.hi and dst.lo < src.hi:
        raise Error("src and dst memory overlap; in-place reorders are not supported")
    esize = dtypes.itemsize(src.dtype)
    p = plan.cached(src.dims, src.layout, dst.layout, esize, dst.hi - dst.lo)
    p.run(src.addr, dst.addr, runtime.num_threads(threads))
    return p.kernel


def reorder(src, dst, *, scales=None, scale_mask=0, src_zero_point=0, dst_zero_point=0,
            sum_scale=None, threads=None) -> Memory:
    """Copy src (Memory or array) into dst (Memory, MemoryDesc or format) and return dst."""
    t0 = time.perf_counter()
    _check_attrs(scales, scale_mask, src_zero_point, dst_zero_point, sum_scale)
    s = Operand.of(src)
    out = _dst_memory(dst, s)
    _check_pair(s.dims, s.dtype, out.desc.dims, out.desc.dtype)
    kernel = run_reorder(s, Operand.of_memory(out), threads)
    if runtime.VERBOSE:
        _verbose(kernel, s, out.desc, t0)
    return out


def _verbose(kernel, s: Operand, dst_desc, t0):
    src_fmt = "array" if not isinstance(s.keep, Memory) else (s.keep.desc.format or "strided")
    runtime.verbose(f"exec,reorder,{kernel},src:{dtypes.name(s.dtype)}:{src_fmt} "
                    f"dst:{dtypes.name(dst_desc.dtype)}:{dst_desc.format or 'strided'},"
                    f"{'x'.join(map(str, s.dims))},{(time.perf_counter() - t0) * 1e3:.4f}ms")


class Reorder:
    """`gen.Reorder(src_desc, dst_desc, **attrs)`: planned once, then `p(src_mem, dst_mem)`."""

    def __init__(self, src_desc, dst_desc, **attrs):
        for name, d in (("src_desc", src_desc), ("dst_desc", dst_desc)):
            if not isinstance(d, MemoryDesc):
                raise Error(f"{name} must be a gen.MemoryDesc, got {d!r}")
        known = {"scales", "scale_mask", "src_zero_point", "dst_zero_point", "sum_scale"}
        for k in attrs:
            if k not in known:
                raise Error(f"unknown reorder attribute {k!r}")
        _check_attrs(attrs.get("scales"), attrs.get("scale_mask", 0),
                     attrs.get("src_zero_point", 0), attrs.get("dst_zero_point", 0),
                     attrs.get("sum_scale"))
        _check_pair(src_desc.dims, src_desc.dtype, dst_desc.dims, dst_desc.dtype)
        self.src_desc, self.dst_desc = src_desc, dst_desc
        self._plan = plan.cached(src_desc.dims, Layout.of_desc(src_desc),
                                 Layout.of_desc(dst_desc), src_desc.itemsize, dst_desc.nbytes)
        self.kernel = self._plan.kernel

    def __call__(self, src, dst, *, threads=None):
        t0 = time.perf_counter()
        for name, mem, want in (("src", src, self.src_desc), ("dst", dst, self.dst_desc)):
            if not isinstance(mem, Memory):
                raise Error(f"{name} must be a gen.Memory, got {type(mem).__name__}")
            if mem.desc != want:
                raise Error(f"{name} desc {mem.desc} differs from the primitive's {want}")
        sa, da = src._addr, dst._addr
        if sa < da + self.dst_desc.nbytes and da < sa + self.src_desc.nbytes:
            raise Error("src and dst memory overlap; in-place reorders are not supported")
        self._plan.run(sa, da, runtime.num_threads(threads))
        if runtime.VERBOSE:
            _verbose(self.kernel, Operand.of_memory(src), self.dst_desc, t0)
        return dst
