"""A problem's tables as C initialisers: the gen_piece fields, a resampling's taps, scales.

Export (NAME.c) and run-time specialisation (jit.py) write the same constants; the arrays
they refer to are collected as dicts {name, ctype, data} for templates/constants.j2.
"""
from __future__ import annotations

from importlib import metadata

import numpy as np

PIECE_FIELDS = ("src_off", "dst_off", "scl_off", "nouter", "n", "src_str", "dst_str", "scl_str",
                "a_n", "a_src", "a_dst", "a_scl", "a_run", "b_n", "b_src", "b_dst", "b_scl",
                "c_n", "c_src", "c_dst", "pad", "gap",
                "stream", "lines", "prefetch", "even", "staged", "buffer", "a_tab",
                "b_tab")


def literal(ctype, value) -> str:
    if ctype == "float":
        return float(value).hex() + "f"
    return str(int(value))


def array(arrays, name, ctype, values) -> str:
    arrays.append({"name": name, "ctype": ctype,
                   "data": [literal(ctype, v) for v in np.asarray(values).ravel()] or
                   [literal(ctype, 0)]})
    return name


def piece(fields, arrays, prefix) -> str:
    """One gen_piece initialiser; its tables (tile offsets) go to `arrays` as prefix_KEY."""
    parts = []
    for key in PIECE_FIELDS:
        v = fields[key]
        if isinstance(v, np.ndarray):
            v = array(arrays, f"{prefix}_{key}", "int64_t", v)
        elif isinstance(v, list):
            v = "{" + ", ".join(map(str, v or [0])) + "}"
        parts.append(f".{key} = {0 if v is None else v}")
    return ", ".join(parts)


def resample_init(name, tables, arrays) -> str:
    parts = []
    for key, value in tables.fields.items():
        if isinstance(value, dict):
            items = [_value(f"{name}_{key}_{k}", v, arrays) for k, v in sorted(value.items())]
            parts.append(f".{key} = {{{', '.join(items)}}}")
        else:
            parts.append(f".{key} = {_value(f'{name}_{key}', value, arrays)}")
    return ", ".join(parts)


def _value(cname, value, arrays) -> str:
    if isinstance(value, tuple):
        return array(arrays, cname, value[0], value[1])
    return str(value)


def version() -> str:
    try:
        return metadata.version("gen")
    except metadata.PackageNotFoundError:
        return "(checkout)"
