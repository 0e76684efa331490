"""The cases `python cli.py bench` times: the fixed list of the op issues and a random group.

A case is a `Case(name, make, onednn)`: `make()` builds gen's reusable primitive and its
Memories and returns a Job; `onednn` is the (dnnl.bench kind, args, kwargs) spec of the oneDNN
v3.13 subprocess peer (peers/sycl.py), or None. A Job is (run, nread, nwritten, prim, op,
src, dst, params, exact): `run()` does one call of gen into dst, the primitive `prim` (its
`kernel` names what runs: "jit:..." once specialised); nread / nwritten are the bytes
moved (blocked buffers count their padded size, a sum reads dst too; resampling reads src
(diff_dst) and writes dst (diff_src)); op, params and exact tell the in-process peers the
same problem (gen/peers/__init__.py).
"""
import math
from collections import namedtuple

import numpy as np

import gen
from gen import dtypes

Case = namedtuple("Case", "name make onednn")
Job = namedtuple("Job", "run nread nwritten prim op src dst params exact")


def source_data(dims, dt):
    """Source values: the draws dnnl.py makes for a shape (seed 0), so gen and the oneDNN
    subprocess convert the same numbers: full-range ints for s8/u8, else uniform(-4, 4), as f32
    (converted by gen when the source type is another float)."""
    rng = np.random.default_rng(0)
    if dt == "s8":
        return rng.integers(-128, 128, size=dims).astype(np.int8)
    if dt == "u8":
        return rng.integers(0, 256, size=dims).astype(np.uint8)
    return rng.uniform(-4, 4, size=dims).astype(np.float32)


def reorder_case(dims, src_tag, dst_tag, src_dt="f32", dst_dt=None, *, scales=None,
                 scale_mask=0, src_zero_point=0, dst_zero_point=0, sum_scale=None, label=""):
    """A Case timing gen.Reorder between two tagged descriptors of `dims` with the attributes of
    API.md "Reorder"; the name (after `label`) ends with a word per attribute: scale (one),
    scale/c (per channel), scale/mM (other masks), zp (src zero point), dst-zp, sum."""
    dst_dt = dst_dt or src_dt
    scales = None if scales is None else [float(v) for v in np.atleast_1d(scales)]
    attrs = dict(scales=scales, scale_mask=scale_mask, src_zero_point=src_zero_point,
                 dst_zero_point=dst_zero_point, sum_scale=sum_scale)
    words = ["%s->%s" % (src_tag, dst_tag), "x".join(map(str, dims))]
    if scales is not None:
        words.append("scale" + {0: "", 2: "/c"}.get(scale_mask, "/m%d" % scale_mask))
    words += [w for w, on in (("zp", src_zero_point), ("dst-zp", dst_zero_point),
                              ("sum", sum_scale is not None)) if on]
    name = label + " ".join([src_dt if dst_dt == src_dt else "%s->%s" % (src_dt, dst_dt)]
                            + words)
    moves = dst_dt == src_dt and scales is None and sum_scale is None \
        and not src_zero_point and not dst_zero_point

    def make():
        sd = gen.MemoryDesc(dims, src_dt, src_tag)
        dd = gen.MemoryDesc(dims, dst_dt, dst_tag)
        prim = gen.Reorder(sd, dd, **attrs)
        src = gen.Memory.from_array(source_data(dims, src_dt), src_tag, dtype=src_dt)
        dst = gen.Memory(dd)
        nread = sd.nbytes + (dd.nbytes if sum_scale is not None else 0)
        return Job(lambda: prim(src, dst), nread, dd.nbytes, prim, "reorder", src, dst, attrs,
                   moves)

    # oneDNN v3 multiplies by a src scale (dst = src_scale * (src - src_zp) / dst_scale + dst_zp)
    dnnl_kw = {}
    if scales is not None:
        dnnl_kw.update(src_scales=scales, scale_mask=scale_mask)
    if src_zero_point:
        dnnl_kw["src_zp"] = src_zero_point
    if dst_zero_point:
        dnnl_kw["dst_zp"] = dst_zero_point
    if sum_scale is not None:
        dnnl_kw["sum_beta"] = sum_scale
    return Case(name, make, ("reorder", [list(dims), src_tag, dst_tag, src_dt, dst_dt], dnnl_kw))


def shuffle_case(dims, group, layout):
    """A Case timing gen.ShuffleChannels forward on the channels (logical axis 1) of an f32
    Memory of `dims` (N, C, H, W) stored `layout` (nchw or nhwc)."""
    name = "f32 shuffle %s %s g%d" % (layout, "x".join(map(str, dims)), group)

    def make():
        md = gen.MemoryDesc(dims, "f32", layout)
        prim = gen.ShuffleChannels(md, axis=1, group=group)
        src = gen.Memory.from_array(source_data(dims, "f32"), layout)
        dst = gen.Memory(md)
        return Job(lambda: prim(src, dst), md.nbytes, md.nbytes, prim, "shuffle_channels",
                   src, dst, {"axis": 1, "group": group}, True)

    # oneDNN's group_size is the size of a group: C / group; check_group is what it must equal
    return Case(name, make, ("shuffle", [list(dims), 1, dims[1] // group, layout, "f32"],
                             {"check_group": group}))


def resample_case(src_dims, up, alg, layout, backward=False):
    """A Case timing gen.Resample from f32 `src_dims` (N, C, spatial...) to every spatial dim
    doubled (`up`) or halved, both Memories stored `layout`; `backward` times gen.ResampleBackward
    of that resampling instead (diff_dst of the dst's dims -> diff_src of src_dims)."""
    dst_dims = tuple(src_dims[:2]) + tuple(d * 2 if up else d // 2 for d in src_dims[2:])
    name = "f32 resample %s %s %s %s%s" % (alg, layout, "x".join(map(str, src_dims)),
                                           "up2" if up else "down2", " bwd" if backward else "")
    in_dims, out_dims = (dst_dims, src_dims) if backward else (src_dims, dst_dims)

    def make():
        ind, outd = (gen.MemoryDesc(d, "f32", layout) for d in (in_dims, out_dims))
        prim = (gen.ResampleBackward if backward else gen.Resample)(ind, outd, alg=alg)
        x = gen.Memory.from_array(source_data(in_dims, "f32"), layout)
        y = gen.Memory(outd)
        # nearest forward copies values; sums and weighted sums may round differently
        return Job(lambda: prim(x, y), ind.nbytes, outd.nbytes, prim,
                   "resample_backward" if backward else "resample", x, y, {"alg": alg},
                   alg == "nearest" and not backward)

    # dnnl.py's args: the input's dims (diff_dst backward), alg, the output's spatial dims
    return Case(name, make, ("resampling_bwd" if backward else "resampling_fwd",
                             [list(in_dims), alg, list(out_dims[2:]), layout, "f32"], {}))


_SHAPES = [(32, 64, 56, 56), (8, 256, 28, 28), (1, 3, 224, 224)]
_PAIRS = [("nchw", "nhwc"), ("nhwc", "nchw"), ("nchw", "nChw16c"), ("nChw16c", "nchw"),
          ("nchw", "nChw8c")]
_CONV = (8, 64, 128, 128)
# per-channel scales 16 .. 31.75: channels spread uniform(-4, 4) over half to all of s8's range
_CHANNEL_SCALES = [16 + c / 4 for c in range(_CONV[1])]
CASES = [reorder_case(shape, s, d) for s, d in _PAIRS for shape in _SHAPES] + [
    reorder_case((256, 256, 3, 3), "oihw", "OIhw16i16o"),
    # channels-last into blocks (the run kind's short runs), and a 2-byte transpose
    reorder_case((32, 64, 56, 56), "nhwc", "nChw16c"),
    reorder_case((32, 64, 56, 56), "nchw", "nhwc", "bf16"),
    reorder_case(_CONV, "nchw", "nchw", "f32", "s8", scales=[25.0]),
    reorder_case(_CONV, "nchw", "nchw", "f32", "bf16"),
    reorder_case(_CONV, "nchw", "nchw", "f32", "f16"),
    reorder_case(_CONV, "nchw", "nchw", "s8", "f32", scales=[0.04], src_zero_point=3),
    reorder_case(_CONV, "nchw", "nChw16c", "f32", "s8", scales=_CHANNEL_SCALES, scale_mask=2),
] + [shuffle_case(dims, group, layout)
     for dims, group in [((32, 256, 28, 28), 4), ((1, 116, 28, 28), 2)]
     for layout in ("nchw", "nhwc")] + [
    resample_case((8, 64, 56, 56), up, alg, layout, backward)
    for alg in ("nearest", "linear") for layout in ("nchw", "nhwc") for up in (True, False)
    for backward in (False, True)] + [
    # oneDNN's own blocked layout (torch and OpenVINO have none: their columns stay empty)
    resample_case((8, 64, 56, 56), True, "linear", "nChw16c", backward)
    for backward in (False, True)] + [
    resample_case((2, 16, 16, 32, 32), True, "linear", layout, backward)
    for layout in ("ncdhw", "ndhwc") for backward in (False, True)]


# ---------------------------------------------------------------------------- random group
# Blocked formats of the random group, by rank: oneDNN's generic names (every oneDNN has these
# tags; gen parses the same grammar): channel blocks (nCw8c ... nCdhw16c), weight blocks
# (OIhw16i16o = ABcd16b16a, OIhw16o16i, Ohwi16o = Acdb16a, OIhw4i16o4i) and 4c. All blocks are
# 4, 8 or 16, so any two nest and gen takes every pair.
_BLOCKED = {
    3: ["aBc8b", "aBc16b", "ABc16b16a", "ABc16a16b", "Acb16a", "aBc4b"],
    4: ["aBcd8b", "aBcd16b", "ABcd16b16a", "ABcd16a16b", "Acdb16a", "ABcd4b16a4b", "aBcd4b"],
    5: ["aBcde8b", "aBcde16b", "ABcde16b16a", "ABcde16a16b", "aBcde4b"],
}
# (src, dst, attributes): plain moves of every width, the conversions of the fixed cases
_TYPES = [("f32", "f32", {})] * 6 + [
    ("bf16", "bf16", {}), ("f16", "f16", {}), ("s8", "s8", {}), ("u8", "u8", {}),
    ("f32", "bf16", {}), ("f32", "f16", {}), ("bf16", "f32", {}),
    ("f32", "s8", {"scales": [25.0]}), ("s8", "f32", {"scales": [0.04]}),
    ("f32", "u8", {"scales": [25.0], "dst_zero_point": 128})]
RANDOM_MIB = (4, 48)     # source sizes of the random group: past the L2, up to DRAM
_LETTERS = "abcde"


def _random_layout(rng, rank):
    """A plain permutation of the axes (half the time) or a blocked format of `rank`."""
    if rng.random() < 0.5:
        return "".join(_LETTERS[a] for a in rng.permutation(rank))
    return str(rng.choice(_BLOCKED[rank]))


def random_cases(count, seed):
    """`count` reorder Cases drawn with `seed`: rank 3 to 5, a type pair of _TYPES, two different
    layouts, and dims of 3 .. 200 (odd sizes give blocks a padded tail) scaled by the first
    so the source takes RANDOM_MIB MiB. Named "randNN ..."."""
    rng = np.random.default_rng(seed)
    lo, hi = (m << 20 for m in RANDOM_MIB)
    cases = []
    while len(cases) < count:
        rank = int(rng.choice([3, 4, 4, 4, 5]))
        src_dt, dst_dt, attrs = _TYPES[rng.integers(len(_TYPES))]
        src_tag, dst_tag = _random_layout(rng, rank), _random_layout(rng, rank)
        inner = [int(np.exp(rng.uniform(np.log(3), np.log(200)))) for _ in range(rank - 1)]
        size = dtypes.itemsize(src_dt) * math.prod(inner)
        target = np.exp(rng.uniform(np.log(lo), np.log(hi)))
        dims = (max(1, round(target / size)), *inner)
        if src_tag == dst_tag or not lo <= dims[0] * size <= hi:
            continue
        cases.append(reorder_case(dims, src_tag, dst_tag, src_dt, dst_dt,
                                  label="rand%02d " % len(cases), **attrs))
    return cases
