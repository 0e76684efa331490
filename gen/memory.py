"""`gen.Memory`: a descriptor plus the bytes it describes, and NumPy operands of ops."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes
from .errors import Error, checked, read_only
from .layout import MemoryDesc, concrete
from .problem import Layout

ALIGN = 64


@checked
class Memory:
    """`gen.Memory(desc, buffer=None)`: see API.md "Memory objects"."""

    __slots__ = ("desc", "data", "_addr")

    def __init__(self, desc, buffer=None):
        if not isinstance(desc, MemoryDesc):
            raise Error(f"desc must be a gen.MemoryDesc, got {desc!r}")
        nbytes = concrete(desc, "Memory").nbytes
        if buffer is None:
            try:
                raw = np.zeros(nbytes + ALIGN, np.uint8)
            except (MemoryError, ValueError):
                raise Error(f"cannot allocate {nbytes} bytes for {desc}") from None
            start = -raw.ctypes.data % ALIGN
            data = raw[start:start + nbytes]
        else:
            data = _wrap(buffer, desc)
        # immutable: ops trust that data holds desc.nbytes bytes at _addr
        object.__setattr__(self, "desc", desc)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "_addr", data.ctypes.data)

    __setattr__ = __delattr__ = read_only

    def __reduce__(self):  # a copy or a pickle owns a copy of the bytes, at its own address
        return (_memory_of_bytes, (self.desc, self.data.tobytes()))

    @classmethod
    def from_array(cls, array, format=None, dtype=None) -> "Memory":
        """Pack a logical NumPy array (any strides) into a new Memory of `format`."""
        from .ops.reorder import reorder
        src = Operand.of(array)
        dtype = src.dtype if dtype is None else dtypes.canonical(dtype)
        return reorder(src, MemoryDesc(src.dims, dtype, format))

    def to_array(self) -> np.ndarray:
        """The logical content as a new C-contiguous array of the table's NumPy dtype."""
        from .ops.reorder import run_reorder
        out = new_array(self.desc.dims, self.desc.dtype)
        run_reorder(Operand.of_memory(self), Operand.of(out), None)
        return out

    def __repr__(self):
        return f"Memory({self.desc!r})"


def _memory_of_bytes(desc, raw: bytes) -> Memory:
    mem = Memory(desc)
    mem.data[:] = np.frombuffer(raw, np.uint8)
    return mem


def check_call(src, dst, src_desc, dst_desc, what: str) -> "tuple[int, int]":
    """A primitive's call: two Memories of its descriptors that do not overlap. Returns
    their addresses."""
    for name, mem, want in (("src", src, src_desc), ("dst", dst, dst_desc)):
        if not isinstance(mem, Memory):
            raise Error(f"{name} must be a gen.Memory, got {type(mem).__name__}")
        if mem.desc is not want and mem.desc != want:
            raise Error(f"{name} desc {mem.desc} differs from the primitive's {want}")
    sa, da = src._addr, dst._addr
    if sa < da + dst_desc.nbytes and da < sa + src_desc.nbytes:
        raise Error(f"src and dst memory overlap; in-place {what} is not supported")
    return sa, da


def _wrap(buffer, desc) -> np.ndarray:
    if isinstance(buffer, np.ndarray):  # not through memoryview, which refuses bfloat16
        readonly, contiguous = not buffer.flags.writeable, buffer.flags.c_contiguous
        objects = buffer.dtype.hasobject

        def as_bytes():  # a plain array's bytes (np.matrix too)
            return np.asarray(buffer).reshape(-1).view(np.uint8)
    else:
        try:
            view = memoryview(buffer)
        except TypeError:
            raise Error(f"buffer must support the buffer protocol, got "
                        f"{type(buffer).__name__}") from None
        readonly, contiguous, objects = view.readonly, view.c_contiguous, "O" in view.format

        def as_bytes():
            return np.frombuffer(view.cast("B") if view.ndim != 1 or view.format != "B"
                                 else view, np.uint8)
    if readonly:
        raise Error("buffer is read-only; a Memory must be writable")
    if not contiguous:
        raise Error("buffer must be C-contiguous (its bytes are read in row-major order)")
    if objects:  # Python object references: writing bytes over them would crash
        raise Error(f"buffer of Python objects ({type(buffer).__name__}) cannot hold tensor data")
    try:
        data = as_bytes()
    except (TypeError, ValueError) as e:
        raise Error(f"buffer {type(buffer).__name__} cannot be read as bytes: {e}") from None
    if data.nbytes < desc.nbytes:
        raise Error(f"buffer of {data.nbytes} bytes is too small for {desc} "
                    f"({desc.nbytes} bytes)")
    if data.ctypes.data % desc.itemsize:
        raise Error(f"buffer address {data.ctypes.data:#x} is misaligned for "
                    f"{dtypes.name(desc.dtype)} ({desc.itemsize}-byte elements)")
    return data[:desc.nbytes]


@dataclass(frozen=True)
class Operand:
    """What an op needs of a source or destination: logical dims, dtype, layout, address
    and the byte range it touches (for the overlap check)."""
    dims: tuple
    dtype: object
    layout: Layout
    addr: int
    lo: int
    hi: int
    keep: object  # the object that owns the bytes, kept alive during the call

    @classmethod
    def of_memory(cls, mem: Memory) -> "Operand":
        d = mem.desc
        return cls(d.dims, d.dtype, Layout.of_desc(d), mem._addr, mem._addr,
                   mem._addr + d.nbytes, mem)

    @classmethod
    def of(cls, obj) -> "Operand":
        if isinstance(obj, Operand):
            return obj
        if isinstance(obj, Memory):
            return cls.of_memory(obj)
        arr = _as_array(obj)
        dtype = dtypes.canonical(arr.dtype)
        if arr.ndim == 0 or arr.size == 0:
            raise Error(f"array of shape {arr.shape} has no elements to describe")
        esize = arr.itemsize
        # the bytes the caller's array spans (the overlap check), also where a copy is read
        addr = arr.__array_interface__["data"][0]
        steps = [(d - 1) * s for d, s in zip(arr.shape, arr.strides)]
        lo = addr + sum(s for s in steps if s < 0)
        hi = addr + sum(s for s in steps if s > 0) + esize
        if any(s % esize for s in arr.strides):  # read through a contiguous copy
            try:
                arr = np.ascontiguousarray(arr)
            except (MemoryError, ValueError):
                raise Error(f"cannot allocate a contiguous copy of the {dtypes.name(dtype)} "
                            f"array of shape {arr.shape} (its strides {arr.strides} are not "
                            f"multiples of its item size)") from None
            addr = arr.__array_interface__["data"][0]
        layout = Layout.strided(arr.shape, tuple(s // esize for s in arr.strides))
        return cls(tuple(arr.shape), dtype, layout, addr, lo, hi, arr)


def rank_of(obj) -> int:
    """The rank of an op's input (a Memory, or anything NumPy reads) before it is checked."""
    return obj.desc.ndims if isinstance(obj, Memory) else _as_array(obj).ndim


def new_array(dims, dtype) -> np.ndarray:
    """An op's NumPy result, or gen.Error when it cannot be allocated."""
    try:
        return np.empty(dims, dtypes.numpy_dtype(dtype))
    except (MemoryError, ValueError):
        raise Error(f"cannot allocate a {dtypes.name(dtype)} result of dims {tuple(dims)}") \
            from None


def _as_array(obj) -> np.ndarray:
    if isinstance(obj, np.ndarray):
        return obj
    try:
        if hasattr(obj, "__dlpack__") and not hasattr(obj, "__array_interface__"):
            return np.from_dlpack(obj)
        return np.asarray(obj)
    except Exception as e:  # NumPy raises many types for objects it cannot view
        raise Error(f"cannot read a tensor from {type(obj).__name__}: {e}") from None
