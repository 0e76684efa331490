"""The dtype table: the single source of truth for element types.

Each entry gives the short name, the C type used by kernels, the NumPy dtype, the size and,
for integer types, the range conversions saturate to (the templates read these entries).
Pure data-movement ops also accept any other NumPy numeric dtype of 1, 2, 4 or 8 bytes
(complex64 included).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .errors import Error


@dataclass(frozen=True)
class DType:
    name: str
    ctype: str
    numpy_type: "type | None"  # None: bf16, ml_dtypes' (see numpy)
    size: int
    lo: "int | None" = None  # integer types: the saturation range
    hi: "int | None" = None

    @property
    def is_int(self) -> bool:
        return self.lo is not None

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(self.numpy_type) if self.numpy_type else _bfloat16()


@lru_cache(maxsize=None)
def _bfloat16() -> np.dtype:
    """ml_dtypes' bfloat16, imported where a bf16 array is first made or read: ml_dtypes 0.7.0
    takes 0.6-0.8 s to import (0.6.0: 10 ms), which `import gen` and every command line paid."""
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


TABLE = {
    "f32": DType("f32", "float", np.float32, 4),
    "bf16": DType("bf16", "uint16_t", None, 2),
    "f16": DType("f16", "uint16_t", np.float16, 2),
    "s8": DType("s8", "int8_t", np.int8, 1, -2**7, 2**7 - 1),
    "u8": DType("u8", "uint8_t", np.uint8, 1, 0, 2**8 - 1),
    "s32": DType("s32", "int32_t", np.int32, 4, -2**31, 2**31 - 1),
}
# (bf16's is looked up apart: a bfloat16 dtype exists only once ml_dtypes is imported)
_BY_NUMPY = {d.numpy: d.name for d in TABLE.values() if d.numpy_type}
# Short names for the other movable NumPy types (API.md "Data types").
_MOVE_ONLY = {"f64": np.float64, "s16": np.int16, "u16": np.uint16, "s64": np.int64,
              "u64": np.uint64, "bool": np.bool_}
MOVE_SIZES = (1, 2, 4, 8)


def canonical(dtype) -> "str | np.dtype":
    """The short name for a table type, `np.dtype` for another movable NumPy type."""
    if isinstance(dtype, str) and dtype in TABLE:
        return str(dtype)  # a plain str, also for np.str_
    if dtype is None:  # np.dtype(None) would be float64
        raise Error("dtype None: name one (f32, bf16, ... or a NumPy type)")
    try:
        dt = _numpy_of(dtype)
    except (TypeError, ValueError, DeprecationWarning):  # the last under `-W error` ('a')
        raise Error(f"unknown dtype {dtype!r}") from None
    if dt in _BY_NUMPY:
        return _BY_NUMPY[dt]
    if "ml_dtypes" in sys.modules and dt == _bfloat16():
        return "bf16"
    if dt.byteorder == ">":  # its name would not tell it from the native type's
        raise Error(f"dtype {dtype!r} is big-endian; gen takes native byte order "
                    f"(astype({dt.newbyteorder('=').str!r}) converts it)")
    if dt.kind not in "biufc" or dt.itemsize not in MOVE_SIZES:
        raise Error(f"unknown or unsupported dtype {dtype!r}")
    return dt


def _numpy_of(dtype) -> np.dtype:
    """np.dtype(dtype), short names of _MOVE_ONLY too; a name NumPy knows only once ml_dtypes
    is imported ('bfloat16') is looked up again after that import."""
    if not isinstance(dtype, str):
        return np.dtype(dtype)
    try:
        return np.dtype(_MOVE_ONLY.get(dtype, dtype))
    except TypeError:
        if "ml_dtypes" in sys.modules:
            raise
        _bfloat16()
        return np.dtype(dtype)


def numpy_dtype(dtype) -> np.dtype:
    return TABLE[dtype].numpy if isinstance(dtype, str) else dtype


def itemsize(dtype) -> int:
    return TABLE[dtype].size if isinstance(dtype, str) else dtype.itemsize


def name(dtype) -> str:
    return dtype if isinstance(dtype, str) else dtype.name
