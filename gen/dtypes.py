"""The dtype table: the single source of truth for element types.

Each entry gives the short name, the C type used by kernels, the NumPy dtype, the size and,
for integer types, the range conversions saturate to (the templates read these entries).
Pure data-movement ops also accept any other NumPy numeric dtype of 1, 2, 4 or 8 bytes
(complex64 included).
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .errors import Error


@dataclass(frozen=True)
class DType:
    name: str
    ctype: str
    numpy: np.dtype
    size: int
    lo: "int | None" = None  # integer types: the saturation range
    hi: "int | None" = None

    @property
    def is_int(self) -> bool:
        return self.lo is not None


TABLE = {
    "f32": DType("f32", "float", np.dtype(np.float32), 4),
    "bf16": DType("bf16", "uint16_t", np.dtype(ml_dtypes.bfloat16), 2),
    "f16": DType("f16", "uint16_t", np.dtype(np.float16), 2),
    "s8": DType("s8", "int8_t", np.dtype(np.int8), 1, -2**7, 2**7 - 1),
    "u8": DType("u8", "uint8_t", np.dtype(np.uint8), 1, 0, 2**8 - 1),
    "s32": DType("s32", "int32_t", np.dtype(np.int32), 4, -2**31, 2**31 - 1),
}
_BY_NUMPY = {d.numpy: d.name for d in TABLE.values()}
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
        dt = np.dtype(_MOVE_ONLY.get(dtype, dtype) if isinstance(dtype, str) else dtype)
    except (TypeError, ValueError, DeprecationWarning):  # the last under `-W error` ('a')
        raise Error(f"unknown dtype {dtype!r}") from None
    if dt in _BY_NUMPY:
        return _BY_NUMPY[dt]
    if dt.byteorder == ">":  # its name would not tell it from the native type's
        raise Error(f"dtype {dtype!r} is big-endian; gen takes native byte order "
                    f"(astype({dt.newbyteorder('=').str!r}) converts it)")
    if dt.kind not in "biufc" or dt.itemsize not in MOVE_SIZES:
        raise Error(f"unknown or unsupported dtype {dtype!r}")
    return dt


def numpy_dtype(dtype) -> np.dtype:
    return TABLE[dtype].numpy if isinstance(dtype, str) else dtype


def itemsize(dtype) -> int:
    return numpy_dtype(dtype).itemsize


def name(dtype) -> str:
    return dtype if isinstance(dtype, str) else dtype.name
