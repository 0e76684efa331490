"""Export: one fixed problem as standalone C (`NAME.c`, `NAME.h`), API.md "Command line".

The C is rendered by the same templates from the same normalised problem and kernel choice
as gen's own call: the kernels of every tier, each compiled in when the compiler targets its
instruction sets (the best one wins; the scalar tier otherwise), with the problem's tables
(loop nests, scales, resampling taps) as constants.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import c_names, codegen, constants, dtypes, plan, registry
from .errors import Error
from .isa import TIERS as ISA_TIERS
from .layout import MemoryDesc, concrete
from .ops import reorder as reorder_op, resample as resample_op, shuffle as shuffle_op
from .problem import Layout

# The exported tiers, best first, with the compiler macros that enable each (-mavx2 defines
# __AVX2__, and so on).
TIERS = tuple((t.name, " && ".join(f"defined(__{f[2:].upper()}__)" for f in t.cflags))
              for t in sorted(ISA_TIERS.values(), key=lambda t: -t.rank))


@dataclass
class Source:
    """What one export writes: the problem (for the header) and its parts."""
    name: str
    about: list
    src_bytes: int
    dst_bytes: int
    reads_dst: bool = False
    plans: list = field(default_factory=list)  # reorder-kind Plans (pieces)
    convert: object = None  # the reorder's attributes (reorder_op.Attrs) or None
    resample: object = None  # a resample _Plan key, dst bytes
    mid: int = 0  # bytes of a staged reorder's intermediate: plans[0] writes it, plans[1] reads it


def _c_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name or "") or name in c_names.KEYWORDS:
        raise Error(f"--name {name!r} is not a C identifier")
    if c_names.taken(name):
        raise Error(f"--name {name!r} is taken by the C library or gen's own code; "
                    f"choose another")
    return name


def render(src: Source) -> "tuple[str, str]":
    """(NAME.c, NAME.h) of one export."""
    name = src.name
    arrays, calls = [], {t: [] for t, _ in TIERS}
    pieces = {t: [] for t, _ in TIERS}  # a tier's kernels may split a problem differently
    tables = {t: [] for t, _ in TIERS}  # and walk it through other offset tables
    plans = list(src.plans)
    specs = {t: [] for t, _ in TIERS}
    pairs = set()
    resample_init = ""
    if src.resample is not None:
        key, dst_nbytes = src.resample
        for tier, _ in TIERS:
            spec = resample_op.planned(key, dst_nbytes, tier=tier).spec
            specs[tier].append(spec)
            calls[tier].append(f"failed |= {spec.name}(src, dst, &{name}_resample, ithr, "
                               "nthr);")
        # the tables every tier's kernel reads: this process's plan (the wisdom of its tier)
        rp = resample_op.planned(key, dst_nbytes, tier=registry.isa())
        resample_init = constants.resample_init(name, rp.tables, arrays)
        if rp._zero is not None:
            plans.append(rp._zero)
    attr = ""
    if src.convert is not None:
        at = src.convert
        scales = constants.array(arrays, f"{name}_scales", "float", at.scales)
        dzp = float(at.dst_zero_point) if at.dst_zero_point else -0.0
        beta = 0.0 if at.sum_scale is None else at.sum_scale
        attr = (f".scales = {scales}, .src_zp = {constants.literal('float', at.src_zero_point)}, "
                f".dst_zp = {constants.literal('float', dzp)}, "
                f".beta = {constants.literal('float', beta)}, "
                f".sum = {int(at.sum_scale is not None)}")
    # each plan's source and destination: a staged reorder's steps meet in `mid`, the second
    # after every thread's share of the first (GEN_EXPORT_BARRIER)
    ends = [("src", "mid"), ("mid", "dst")] if src.mid else [("src", "dst")] * len(plans)
    for p, (a, b) in zip(plans, ends):
        if a == "mid":
            for tier, _ in TIERS:
                calls[tier].append("GEN_EXPORT_BARRIER")
        for tier, _ in TIERS:
            # gen's own tier as gen runs it (with its measured wisdom), the others as guessed
            choice = p.choice if tier == registry.isa() else None
            for spec, fields in plan.bind(p.problem, p.dst_nbytes, p.convert, tier, choice,
                                          p.traffic):
                specs[tier].append(spec)
                if spec.cvt:
                    pairs.add((spec.src, spec.dst))
                calls[tier].append(f"{spec.name}({a}, {b}, &{name}_pieces[{len(pieces[tier])}], "
                                   f"{'&at' if attr else 'at'}, ithr, nthr);")
                pieces[tier].append(constants.piece(fields, tables[tier],
                                           f"{name}_{tier}_{len(pieces[tier])}"))
    tiers = []
    for tier, macros in TIERS:
        unique = list({s.name: s for s in specs[tier]}.values())
        code = [codegen.render_convert(tier, sorted(pairs))]
        code += [codegen.render_kernel(s, linkage="static ") for s in unique]
        tiers.append({"macros": macros, "vector": bool(ISA_TIERS[tier].vectors),
                      "code": "\n".join(code), "calls": calls[tier], "pieces": pieces[tier],
                      "arrays": tables[tier]})
    traffic = src.src_bytes + src.dst_bytes
    ctx = dict(name=name, version=constants.version(), about=src.about,
               src_bytes=src.src_bytes,
               dst_bytes=src.dst_bytes, reads_dst=src.reads_dst, guard=f"GEN_EXPORT_{name}_H",
               common=codegen.render_common("scalar"), tiers=tiers, arrays=arrays,
               resample=resample_init, attr=attr, mid=src.mid,
               parallel=traffic >= 2 * plan.BYTES_PER_THREAD)
    return codegen.render("export.c.j2", **ctx), codegen.render("export.h.j2", **ctx)


# ---------------------------------------------------------------- the ops


def reorder_source(name, dims, src, dst, **attrs) -> Source:
    """`src`, `dst`: (dtype, tag)."""
    sd, dd = concrete(MemoryDesc(dims, *src), "--src"), concrete(MemoryDesc(dims, *dst), "--dst")
    at = reorder_op.attrs(sd.dims, sd.dtype, dd.dtype, **attrs)
    p = reorder_op._plan(sd.dims, Layout.of_desc(sd), Layout.of_desc(dd), dd.dtype, dd.nbytes, at)
    about = [f"reorder of dims {_dims(sd.dims)}: src {_desc(sd)} -> dst {_desc(dd)}",
             "attributes: " + _attrs(at)]
    staged = isinstance(p, reorder_op.Staged)
    return Source(_c_name(name), about, sd.nbytes, dd.nbytes,
                  bool(at and at.sum_scale is not None), list(p.steps) if staged else [p], at,
                  mid=p.nbytes if staged else 0)


def shuffle_source(name, dims, src, axis=1, group=1, backward=False) -> Source:
    desc = concrete(MemoryDesc(dims, *src), "--src")
    axis, group = shuffle_op.check(desc.dims, axis, group)
    layout = Layout.of_desc(desc)
    p = shuffle_op._plan(desc.dims, axis, group, backward, layout, layout, desc.itemsize,
                         desc.nbytes)
    op = "shuffle_channels_backward" if backward else "shuffle_channels"
    about = [f"{op} of dims {_dims(desc.dims)}, axis {axis}, group {group}: "
             f"src and dst {_desc(desc)}"]
    return Source(_c_name(name), about, desc.nbytes, desc.nbytes, plans=[p])


def resample_source(name, dims, src, alg, out_spatial, backward=False) -> Source:
    fwd_src = MemoryDesc(dims, *src)
    resample_op._rank(fwd_src.dims)
    resample_op._dtype(fwd_src.dtype)
    alg = resample_op._alg(alg)
    out = resample_op.out_spatial_of(fwd_src.dims[2:], out_spatial, None)
    # "any": the format gen.Resample chooses (channels-last), which the header then names
    fwd_src, fwd_dst = resample_op._chosen(fwd_src, MemoryDesc(fwd_src.dims[:2] + out, *src))
    s, d = (fwd_dst, fwd_src) if backward else (fwd_src, fwd_dst)
    key = resample_op._Key(s.dims, d.dims, Layout.of_desc(s), Layout.of_desc(d), s.dtype,
                           alg, backward)
    op = "resample_backward (src: diff_dst, dst: diff_src)" if backward else "resample"
    about = [f"{op}, alg {alg}: src {_dims(s.dims)} {_desc(s)} -> dst {_dims(d.dims)} "
             f"{_desc(d)}"]
    return Source(_c_name(name), about, s.nbytes, d.nbytes, resample=(key, d.nbytes))


def _dims(dims) -> str:
    return "x".join(map(str, dims))


def _desc(md) -> str:
    return f"{dtypes.name(md.dtype)}:{md.format or 'strides=' + str(md.strides)}"


def _attrs(at) -> str:
    if at is None:
        return "none"
    scales = ", ".join(f"{s:g}" for s in at.scales[:8]) + (" ..." if at.scales.size > 8 else "")
    out = [f"scales [{scales}] (mask {at.scale_mask})", f"src_zero_point {at.src_zero_point}",
           f"dst_zero_point {at.dst_zero_point}"]
    if at.sum_scale is not None:
        out.append(f"sum_scale {at.sum_scale:g}")
    return ", ".join(out)


def write(source: Source, out_dir) -> "tuple[Path, Path]":
    c, h = render(source)
    out = Path(out_dir)
    paths = out / f"{source.name}.c", out / f"{source.name}.h"
    written = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for path, text in zip(paths, (c, h)):
            path.write_text(text)
            written.append(path)
    except OSError as e:
        for path in written:  # no half export left behind
            path.unlink(missing_ok=True)
        where = e.filename if e.filename is not None else out_dir  # the file, or the folder
        raise Error(f"cannot write to {str(where)!r}: {e.strerror}") from None
    return paths
