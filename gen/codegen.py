"""Renders kernel specs into C with Jinja: the one way this project produces C."""
from __future__ import annotations

import functools
from pathlib import Path

import jinja2

from .dtypes import TABLE
from .isa import TIERS
from .space import LINE, conversions
from .transpose import deinterleave, interleave, network

MAX_NODES = 24  # outer nodes a piece may have (problem.py never needs more than 2 per axis)
# Work-item sizes: large enough to amortise the item loop, small enough to balance threads.
CHUNKS = {"run_chunk": 1 << 16, "strided_chunk": 1 << 12, "strided_block": 256,
          "strided_dense": 1 << 13,  # bytes: a strided block's row built whole (with gaps)
          "tile_chunk": 1 << 9, "tile_lines": 4,  # at most (plan.py picks per problem)
          "cvt_tile_buffer": 1 << 14,  # bytes: a converting tile's buffer stays in L1
          "tile_stage": 1 << 12,  # bytes: a converting tile gathers short rows there
          "interleave_chunk": 1 << 10,
          "interleave_run": 1 << 11,  # bytes of a row an interleave reads through its buffer
          "pack_run": 64, "pack_line": 1 << 10,  # converting runs shorter than pack_run
          "direct_group": 8,  # outer positions per item of the resampling's direct path
          "prefetch_items": 4}  # resampling items of one line: lines fetched this far ahead


def template_dir() -> Path:
    """Installed: gen/templates (package data); in a checkout: the top-level templates/."""
    here = Path(__file__).resolve().parent
    for d in (here / "templates", here.parent / "templates"):
        if d.is_dir():
            return d
    raise FileNotFoundError("gen's templates/ folder is missing")


@functools.lru_cache(maxsize=None)
def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(template_dir())),
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True, keep_trailing_newline=True)


def _tile_context(spec):
    vector = spec.vector
    if vector is None:
        return {"vector": None, "networks": [], "masked_networks": [], "even_networks": [],
                "store_rows": [], "narrow": [], "half": None, "half_masked": [],
                "half_rows": []}
    tiles = spec.tile_a // spec.tile
    nets = [network(vector, spec.esize, "s + ro[{row}]", f"t{t}", t * spec.tile)
            for t in range(tiles)]
    # the same registers, loaded under a mask of `cols` columns
    masked = [network(vector, spec.esize, "s + ro[{row}]", f"t{t}", t * spec.tile, cols="cols")
              for t in range(tiles)] if spec.masked else []
    # the same registers, rows `rs` bytes apart (evenly spaced: plan._tile_even)
    even = [network(vector, spec.esize, "s + {row} * rs", f"t{t}", t * spec.tile)
            for t in range(tiles)]
    assert all(v[1] == n[1] for variant in (masked, even) for v, n in zip(variant, nets))
    rows = _store_rows(nets, spec.tile)
    # a B of half a row or less: the masked networks of the half-width vector, where the
    # tier has one with masked loads of the element size (Zen4, nChw16c -> nchw with 3
    # channels: bf16 in 16 x 16 tiles took 1.15-1.55x as long as in 8 x 8; f32 in 4 x 4
    # tiles ran 1.15-1.25x faster than in 8 x 8)
    half = vector.half if masked and vector.half and spec.esize in vector.half.maskload else None
    half_masked = [network(half, spec.esize, "s + ro[{row}]", f"h{t}",
                           t * spec.tile // 2, cols="cols")
                   for t in range(spec.tile_a * 2 // spec.tile)] if half else []
    narrow = []
    for groups in spec.narrow:
        # rows per de-interleaved block; blocks per call: a cache line of each column
        block = spec.tile * spec.tile // groups
        stmts, stores = [], []
        for t in range(max(1, LINE // (block * spec.esize))):
            more, runs = deinterleave(vector, spec.esize, groups, "s + ro[{row}]",
                                      f"n{t}", t * block)
            stmts += more
            stores += [(g, t * block * spec.esize + off, reg)
                       for g, run in enumerate(runs) for off, reg in run]
        narrow.append((groups, len(stores) // groups * vector.nbytes // spec.esize,
                       stmts, stores))
    return {"vector": vector, "networks": nets, "masked_networks": masked,
            "even_networks": even, "store_rows": rows, "narrow": narrow, "half": half,
            "half_masked": half_masked, "half_rows": _store_rows(half_masked, spec.tile // 2)}


def _store_rows(nets, width):
    """Per tile column, (column, [(tile, the register that holds it)])."""
    return [(col, [(t, next(r for r, c in net[1].items() if c == col))
                   for t, net in enumerate(nets)]) for col in range(width)] if nets else []


def render_kernel(spec, linkage: str = "", spread: bool = False, steps16: bool = True,
                  steps32: bool = True, fused: bool = True, row_unroll: int = 0) -> str:
    """One kernel's C; `linkage` "static " keeps an exported file's kernels private. `spread`:
    a tile that moves bytes spreads its prefetches where a piece asks (prefetch 2), as only
    a specialised module renders it (the larger kernel changed the compiler's inlining of
    every other problem's micro kernels: rand08 1.25x slower). `steps16`, `steps32`, `fused`:
    the weighted resampling's wide row steps, which a specialised module renders only where
    its problem takes them (resample.Tables.row_steps), and `row_unroll`, the 8-wide steps
    of its rows when they unroll whole (0: not unrolled)."""
    ctx = dict(CHUNKS, spec=spec, isa=TIERS[spec.isa], vector=spec.vector,
               dt=TABLE[spec.src] if spec.src else None, linkage=linkage, line=LINE,
               spread=spread, steps16=steps16, steps32=steps32, fused=fused,
               row_unroll=row_unroll)
    if spec.kind == "tile":
        ctx.update(_tile_context(spec))
    if spec.kind == "interleave":
        vector = TIERS[spec.isa].vectors.get(spec.lanes * spec.esize)
        ctx["vector"] = vector
        ctx["statements"], ctx["stores"] = interleave(
            vector, spec.esize, spec.groups, "s + {row} * gs") if vector else ([], [])
    template = "resample.c.j2" if spec.op == "resample" else f"{spec.kind}.c.j2"
    return _env().get_template(template).render(ctx)


def render_module(isa: str, specs) -> str:
    """The C source of one tier's extension module: common header, conversions, runtime,
    kernels."""
    env = _env()
    parts = [render_common(isa), render_convert(isa, conversions()),
             env.get_template("runtime.c.j2").render(tiers=list(TIERS.values()))]
    parts += [render_kernel(s) for s in specs]
    return "\n".join(parts)


def render_common(isa: str) -> str:
    """The shared header: types of the kernel interface, the outer-loop helpers."""
    return _env().get_template("common.h.j2").render(isa=TIERS[isa], max_nodes=MAX_NODES)


def render_convert(isa: str, pairs) -> str:
    """The element conversions of the dtype table and the line converters of `pairs`."""
    tier = TIERS[isa]
    return _env().get_template("convert.h.j2").render(
        isa=tier, vec=bool(tier.convert), dtypes=list(TABLE.values()),
        pairs=[(TABLE[s], TABLE[d]) for s, d in pairs])


def render(template: str, **ctx) -> str:
    """Any other template (export's)."""
    return _env().get_template(template).render(**ctx)


def cdef(specs) -> str:
    """The declarations cffi needs for one module."""
    lines = [
        "#define GEN_MAX_NODES %d" % MAX_NODES,
        "typedef struct { int64_t src_off, dst_off, scl_off; int64_t nouter;",
        "  int64_t n[GEN_MAX_NODES], src_str[GEN_MAX_NODES], dst_str[GEN_MAX_NODES];",
        "  int64_t scl_str[GEN_MAX_NODES];",
        "  int64_t a_n, a_src, a_dst, a_scl; int64_t a_run; int64_t b_n, b_src, b_dst, b_scl;",
        "  int64_t c_n, c_src, c_dst;",
        "  int64_t pad; int64_t gap; int64_t stream; int64_t lines; int64_t prefetch;",
        "  int64_t even; int64_t staged; int64_t buffer;",
        "  const int64_t *a_tab, *b_tab; } gen_piece;",
        "typedef struct { const float *scales; float src_zp, dst_zp, beta; int32_t sum; } gen_attr;",
        "typedef void (*gen_kernel_fn)(const char *, char *, const gen_piece *, const gen_attr *,",
        "                              int, int);",
        "typedef struct { gen_kernel_fn fn; gen_piece piece; } gen_task;",
        "void gen_run(intptr_t src, intptr_t dst, const gen_attr *at, const gen_task *tasks,",
        "             int ntasks, int nthr);",
        "typedef struct { int64_t nouter; const int64_t *src_outer, *dst_outer, *run;",
        "  int64_t out[3]; const int64_t *start[3], *soff[3], *doff[3]; const float *w[3];",
        "  int64_t ntaps[2];",
        "  int64_t rows, stream; const int32_t *row_off, *win, *perm, *wide;",
        "  const int32_t *win16, *perm16, *fresh16; int64_t pairs; int64_t twins;",
        "  int64_t taps2, pitch, nseg, cw, rsize, kmax, direct, flat, group, prefetch, span;",
        "  const int32_t *idx2;",
        "  const float *w2;",
        "  const int64_t *seg, *soff2;",
        "  int64_t fused; const int32_t *fwin, *fperm; const float *fw; } gen_resample;",
        "typedef int (*gen_resample_fn)(const char *, char *, const gen_resample *, int, int);",
        "int gen_resample_run(intptr_t src, intptr_t dst, const gen_resample *r,",
        "                     gen_resample_fn fn, int nthr);",
    ]
    lines += [f"int gen_cpu_has_{t}(void);" for t in TIERS]
    for s in specs:
        if s.op == "resample":
            lines.append(f"int {s.name}(const char *, char *, const gen_resample *, int, int);")
        else:
            lines.append(f"void {s.name}(const char *, char *, const gen_piece *, "
                         "const gen_attr *, int, int);")
    return "\n".join(lines)


def module_name(isa: str) -> str:
    """Top-level, so that a checkout's gen/ sources (e.g. under `python -m pytest` in the
    checkout) still find the kernels the install built."""
    return f"_gen_kernels_{isa}"
