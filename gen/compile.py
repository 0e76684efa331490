"""Compiles the rendered kernels through cffi: one extension module per ISA tier.

setup.py calls `extensions()` at install time (setuptools builds them, in parallel).
This module must not import numpy or the rest of the runtime: the build loads it alone.
"""
from __future__ import annotations

import os

import cffi

from . import codegen, space
from .isa import TIERS

# No loop-to-memcpy/memset rewriting: the short loops of the kernels must stay inline.
# No FMA contraction: conversions round each operation, so every tier gives the same bits.
CFLAGS = ("-O3", "-std=gnu11", "-fopenmp", "-fno-strict-aliasing",
          "-fno-tree-loop-distribute-patterns", "-ffp-contract=off")
LDFLAGS = ("-fopenmp", "-lm")
# GEN_SANITIZE=1 at install: kernels built with AddressSanitizer and UBSan (run Python with
# the ASan runtime preloaded, see README "Guarantees").
SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer")


def flags(isa: str, sanitize: bool) -> "tuple[list, list]":
    """(compile flags, link flags) of one tier's code: the install's and the JIT's."""
    extra = list(SANITIZE) if sanitize else []
    return [*CFLAGS, *TIERS[isa].cflags, *extra], [*LDFLAGS, *extra]


def ffi_for(isa: str) -> cffi.FFI:
    specs = space.kernels(isa)
    ffi = cffi.FFI()
    ffi.cdef(codegen.cdef(specs))
    cflags, ldflags = flags(isa, os.environ.get("GEN_SANITIZE", "") not in ("", "0"))
    # The flags in the source: a build with other flags changes the file, so setuptools
    # recompiles instead of reusing objects of the previous build.
    source = f"/* cc {' '.join(cflags)} */\n" + codegen.render_module(isa, specs)
    ffi.set_source(codegen.module_name(isa), source, extra_compile_args=cflags,
                   extra_link_args=ldflags)
    return ffi


def extensions(source_dir: str):
    """setuptools Extensions for every tier; their C sources are written to source_dir."""
    return [ffi_for(isa).distutils_extension(source_dir) for isa in TIERS]
