"""`python cli.py bench`: time gen's kernels against a memory copy of the same traffic.

Every case runs through its reusable primitive (creation excluded). Per case and thread count
the table gives the kernel chosen, the median time of many calls, GB/s = (bytes read + bytes
written) / time (blocked buffers count their padded size; a sum reads dst too) and the ratio to
the copy ceiling: gen's own chunked multi-threaded memcpy (a u8 -> u8 reorder of
B = (read + written) // 2 bytes, GB/s = 2B / time), timed warm, in rounds interleaved with the
case so drift hits both alike. A case gen refuses (gen.Error, e.g. an attribute this build does
not have) is skipped with a note on stderr and exit status 1.

`--peers` also times, on the same cases and source values, one subprocess per thread count each:
- oneDNN v3.13 through ../shared/peers/onednn/dnnl.py (directory overridable with
  GEN_PEERS_DIR, venv with PEERS_VENV), attributes passed as oneDNN runtime src scales (same
  mask), zero points and a sum post-op; shuffles as oneDNN's shuffle on the same nchw / nhwc
  memory with group_size = C / group (its group_size is the size of a group, OpenVINO's group
  their number); resampling as oneDNN's resampling forward (forward_inference) and backward
  (diff_dst -> diff_src, with a forward_training hint) on the same layout, output size given
  (factors derived by oneDNN); "vs onednn" = oneDNN time / gen time (> 1: gen is faster);
- PyTorch (venv PEERS2_VENV, default /tmp/peers2; torch.set_num_threads) for the conversions it
  has between plain contiguous tensors: `quantize_per_tensor`, `.to(bfloat16 / float16)`,
  `dequantize`; `F.channel_shuffle` on a contiguous (nchw) or channels_last (nhwc) tensor;
  resampling forward as `F.interpolate(size=..., mode="nearest-exact" | "bilinear" |
  "trilinear", align_corners=False)` on a contiguous or channels_last(_3d) tensor, backward as
  the aten op autograd calls for it (`_upsample_nearest_exact2d_backward`,
  `upsample_bilinear2d_backward`, `upsample_trilinear3d_backward`), called directly so that
  only the backward is timed. These keep the layout; each allocates its result, as these calls
  do, from a warm heap (see _TORCH_ENV); "vs torch" likewise;
- OpenVINO (same venv) on the shuffles and the resampling forwards: a compiled one-op model
  (ShuffleChannels; Interpolate-11 with sizes, half_pixel, round_prefer_ceil, no antialias,
  nearest or linear_onnx, the settings of peers/others/NOTES.md that give oneDNN's semantics)
  with INFERENCE_NUM_THREADS, input and output bound to preallocated tensors, timed as a
  synchronous infer. Its tensors have no layout, so an nhwc (ndhwc) case is the same memory seen
  as an (N, H, W, C) tensor, shuffled on axis 3 or resampled on axes 1, 2 (1, 2, 3);
  "vs openvino" likewise.
Each peer's op is first checked against a NumPy reference on a small tensor of the same channels
and group (shuffle_check) or channels and factors (resample_check: API.md's formula, an exact
copy for nearest forward, else within 1e-5 relative + 1e-4); a peer that fails it gets no time
for that case. A missing peer gives a note on stderr and no columns: gen never needs them.

A case is a `Case(name, make, onednn, torch, openvino)`: `make()` returns (run_fn, bytes_read,
bytes_written, kernel_name) with `run_fn()` doing one call; `onednn` is (dnnl.bench kind, args,
kwargs) or None; `torch` and `openvino` are specs for _TORCH_SCRIPT and _OPENVINO_SCRIPT or None.
Resampling cases count read = src (diff_dst) and written = dst (diff_src).
"""
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import numpy as np

import gen

Case = namedtuple("Case", "name make onednn torch openvino", defaults=(None,))

WARM_S = 0.03         # untimed calls at the start of each round
ROUND_S = 0.05        # timed calls per round before switching to the other function


def source_data(dims, dt):
    """Source values: the draws dnnl.py makes for a shape (seed 0; _TORCH_SCRIPT repeats them),
    so gen and the peers convert the same numbers: full-range ints for s8/u8, else uniform(-4, 4),
    as f32 (converted by gen when the source type is another float)."""
    rng = np.random.default_rng(0)
    if dt == "s8":
        return rng.integers(-128, 128, size=dims).astype(np.int8)
    if dt == "u8":
        return rng.integers(0, 256, size=dims).astype(np.uint8)
    return rng.uniform(-4, 4, size=dims).astype(np.float32)


# torch's default contiguous layout, logical order = physical order
_TORCH_TAGS = ("nc", "ncw", "nchw", "ncdhw")


def torch_equivalent(dims, src_tag, dst_tag, src_dt, dst_dt, attrs):
    """The _TORCH_SCRIPT spec of the PyTorch call doing the same conversion (plain contiguous
    tensors, at most one scale, no sum), or None."""
    scales, src_zero_point, dst_zero_point = (attrs[k] for k in ("scales", "src_zero_point",
                                                                  "dst_zero_point"))
    if src_tag != dst_tag or src_tag not in _TORCH_TAGS or attrs["scale_mask"] \
            or attrs["sum_scale"] is not None or (scales is not None and len(scales) != 1):
        return None
    scale = 1.0 if scales is None else scales[0]
    spec = {"dims": list(dims), "src_dt": src_dt}
    if src_dt == "f32" and dst_dt in ("bf16", "f16") and scales is None \
            and not src_zero_point and not dst_zero_point:
        return dict(spec, op="to", dtype={"bf16": "bfloat16", "f16": "float16"}[dst_dt])
    if src_dt == "f32" and dst_dt in ("s8", "u8") and not src_zero_point:
        # torch divides by its scale: q = round(x / scale) + zero_point
        return dict(spec, op="quantize", dtype={"s8": "qint8", "u8": "quint8"}[dst_dt],
                    scale=1.0 / scale, zero_point=dst_zero_point)
    if src_dt in ("s8", "u8") and dst_dt == "f32" and not dst_zero_point:
        # dequantize: (q - zero_point) * scale
        return dict(spec, op="dequantize", scale=scale, zero_point=src_zero_point)
    return None


def reorder_case(dims, src_tag, dst_tag, src_dt="f32", dst_dt=None, *, scales=None,
                 scale_mask=0, src_zero_point=0, dst_zero_point=0, sum_scale=None):
    """A Case timing gen.Reorder between two tagged descriptors of `dims` with the attributes of
    API.md "Reorder"; the name ends with a word per attribute: scale (one), scale/c (per
    channel), scale/mM (other masks), zp (src zero point), dst-zp, sum."""
    dst_dt = dst_dt or src_dt
    scales = None if scales is None else [float(v) for v in np.atleast_1d(scales)]
    attrs = dict(scales=scales, scale_mask=scale_mask, src_zero_point=src_zero_point,
                 dst_zero_point=dst_zero_point, sum_scale=sum_scale)
    words = ["%s->%s" % (src_tag, dst_tag), "x".join(map(str, dims))]
    if scales is not None:
        words.append("scale" + {0: "", 2: "/c"}.get(scale_mask, "/m%d" % scale_mask))
    words += [w for w, on in (("zp", src_zero_point), ("dst-zp", dst_zero_point),
                              ("sum", sum_scale is not None)) if on]
    name = " ".join([src_dt if dst_dt == src_dt else "%s->%s" % (src_dt, dst_dt)] + words)

    def make():
        sd = gen.MemoryDesc(dims, src_dt, src_tag)
        dd = gen.MemoryDesc(dims, dst_dt, dst_tag)
        prim = gen.Reorder(sd, dd, **attrs)
        src = gen.Memory.from_array(source_data(dims, src_dt), src_tag, dtype=src_dt)
        dst = gen.Memory(dd)
        nread = sd.nbytes + (dd.nbytes if sum_scale is not None else 0)
        return (lambda: prim(src, dst)), nread, dd.nbytes, prim.kernel

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
    onednn = ("reorder", [list(dims), src_tag, dst_tag, src_dt, dst_dt], dnnl_kw)
    return Case(name, make, onednn,
                torch_equivalent(dims, src_tag, dst_tag, src_dt, dst_dt, attrs))


def shuffle_case(dims, group, layout):
    """A Case timing gen.ShuffleChannels forward on the channels (logical axis 1) of an f32
    Memory of `dims` (N, C, H, W) stored `layout` (nchw or nhwc)."""
    name = "f32 shuffle %s %s g%d" % (layout, "x".join(map(str, dims)), group)

    def make():
        md = gen.MemoryDesc(dims, "f32", layout)
        prim = gen.ShuffleChannels(md, axis=1, group=group)
        src = gen.Memory.from_array(source_data(dims, "f32"), layout)
        dst = gen.Memory(md)
        return (lambda: prim(src, dst)), md.nbytes, md.nbytes, prim.kernel

    spec = {"op": "channel_shuffle", "dims": list(dims), "group": group, "layout": layout}
    # oneDNN's group_size is the size of a group: C / group; check_group is what it must equal
    onednn = ("shuffle", [list(dims), 1, dims[1] // group, layout, "f32"], {"check_group": group})
    return Case(name, make, onednn, spec, spec)


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
        return (lambda: prim(x, y)), ind.nbytes, outd.nbytes, prim.kernel

    # dnnl.py's args: the input's dims (diff_dst backward), alg, the output's spatial dims
    onednn = ("resampling_bwd" if backward else "resampling_fwd",
              [list(in_dims), alg, list(out_dims[2:]), layout, "f32"], {})
    spec = {"op": "resample", "alg": alg, "src": list(src_dims), "dst": list(dst_dims),
            "layout": layout, "backward": backward}
    return Case(name, make, onednn, spec, None if backward else spec)


_SHAPES = [(32, 64, 56, 56), (8, 256, 28, 28), (1, 3, 224, 224)]
_PAIRS = [("nchw", "nhwc"), ("nhwc", "nchw"), ("nchw", "nChw16c"), ("nChw16c", "nchw"),
          ("nchw", "nChw8c")]
_CONV = (8, 64, 128, 128)
# per-channel scales 16 .. 31.75: channels spread uniform(-4, 4) over half to all of s8's range
_CHANNEL_SCALES = [16 + c / 4 for c in range(_CONV[1])]
CASES = [reorder_case(shape, s, d) for s, d in _PAIRS for shape in _SHAPES] + [
    reorder_case((256, 256, 3, 3), "oihw", "OIhw16i16o"),
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
    resample_case((2, 16, 16, 32, 32), True, "linear", layout, backward)
    for layout in ("ncdhw", "ndhwc") for backward in (False, True)]


def copy_ceiling(nbytes):
    """run_fn for the copy ceiling: gen's plain u8 -> u8 reorder (a chunked memcpy) of nbytes."""
    md = gen.MemoryDesc((nbytes,), "u8")
    prim, src, dst = gen.Reorder(md, md), gen.Memory(md), gen.Memory(md)
    src.data[:] = np.random.default_rng(1).integers(0, 256, nbytes, dtype=np.uint8)
    return lambda: prim(src, dst)


def median_times(fns, min_time, repeat):
    """Median seconds per call of each fn, caches warm. The fns take turns in rounds: WARM_S of
    untimed calls (a big working set needs several passes to settle in cache after another fn
    evicted it), then ROUND_S of timed calls; until every fn has `repeat` timed calls and
    `min_time` seconds of them."""
    clock = time.perf_counter
    samples = [[] for _ in fns]
    while any(len(s) < repeat or sum(s) < min_time for s in samples):
        for fn, s in zip(fns, samples):
            end = clock() + WARM_S
            while clock() < end:
                fn()
            end = clock() + ROUND_S
            while clock() < end:
                t0 = clock()
                fn()
                s.append(clock() - t0)
    return [statistics.median(s) for s in samples]


# ---------------------------------------------------------------------------- peers
# Each script reads {"cases": [spec, ...], "min_time", "repeat"} on stdin and prints one JSON
# list: per spec [median seconds, implementation] or an error message.
_CHECKS = """
import numpy as np

def shuffle_check(run, channels, group):
    # raise unless run(x), logical NCHW f32 in and out, is the NumPy reference of
    # ShuffleChannels(group) on a small x
    n, h, w = 2, 3, 5
    x = np.random.default_rng(1).uniform(-4, 4, (n, channels, h, w)).astype(np.float32)
    want = x.reshape(n, group, channels // group, h * w).transpose(0, 2, 1, 3).reshape(x.shape)
    if not np.array_equal(np.asarray(run(x)), want):
        raise AssertionError("not ShuffleChannels(group=%d) on %s" % (group, x.shape))

def resample_weights(n_in, n_out, alg):
    # the (n_out, n_in) matrix of API.md "Resampling" along one axis, in float64
    w = np.zeros((n_out, n_in))
    for o in range(n_out):
        if alg == "nearest":
            # round half away from zero of pos = (2o + 1) * in / (2 * out) - 1/2 > -1/2 is
            # floor(pos + 1/2): exact in integers
            w[o, (2 * o + 1) * n_in // (2 * n_out)] = 1
        else:
            pos = (o + 0.5) * n_in / n_out - 0.5
            i0 = int(np.floor(pos))
            for i, wi in ((i0, 1 - (pos - i0)), (i0 + 1, pos - i0)):
                w[o, min(max(i, 0), n_in - 1)] += wi
    return w

def resample_check(run, alg, backward, src_dims, dst_dims):
    # raise unless run(x, out_dims), logical f32 in and out, is the NumPy reference of the
    # resampling src_dims -> dst_dims (backward: its adjoint, x = diff_dst) on a small x of the
    # same channels and per-axis factors
    s = [4, 6, 10][5 - len(src_dims):]
    d = [n * b // a for n, a, b in zip(s, src_dims[2:], dst_dims[2:])]
    n, c = 2, src_dims[1]
    x_sp, y_sp = (d, s) if backward else (s, d)
    x = np.random.default_rng(1).uniform(-4, 4, [n, c] + x_sp).astype(np.float32)
    want = x.astype(np.float64)
    for ax, m in enumerate(y_sp, 2):
        w = (resample_weights(m, want.shape[ax], alg).T if backward
             else resample_weights(want.shape[ax], m, alg))
        want = np.moveaxis(np.tensordot(w, np.moveaxis(want, ax, 0), axes=(1, 0)), 0, ax)
    got = np.asarray(run(x, [n, c] + y_sp))
    # nearest forward copies values; sums and weighted sums may round differently in f32
    exact = alg == "nearest" and not backward
    if got.shape != want.shape or not (np.array_equal(got, want) if exact
                                       else np.allclose(got, want, 1e-5, 1e-4)):
        raise AssertionError("not %s resampling%s %s -> %s" % (
            alg, " backward" if backward else "", list(x.shape), [n, c] + y_sp))
"""

_ONEDNN_SCRIPT = _CHECKS + """
import json, sys
import dnnl
req = json.load(sys.stdin)
out = []
for kind, args, kw in req["cases"]:
    try:
        if kind == "shuffle":
            # args: dims, axis, group_size, tag, dt
            shuffle_check(lambda x: dnnl.shuffle(x, *args[1:]).logical, args[0][1],
                          kw.pop("check_group"))
        elif kind in ("resampling_fwd", "resampling_bwd"):
            # args: the input's dims (diff_dst backward), alg, the output's spatial dims, tag, dt
            bwd, alg = kind == "resampling_bwd", args[1]
            x_dims, y_dims = args[0], args[0][:2] + args[2]
            resample_check(lambda x, out: getattr(dnnl, kind)(x, alg, out[2:], *args[3:]).logical,
                           alg, bwd, *((y_dims, x_dims) if bwd else (x_dims, y_dims)))
        r = dnnl.bench(kind, tuple(args[0]), *args[1:], n=req["repeat"], min_time=req["min_time"],
                       **kw)
        out.append([r["median_s"], r["impl"]])
    except Exception as e:
        out.append("%s: %s" % (type(e).__name__, e))
print(json.dumps(out))
"""

# The peers timed in Python (PyTorch, OpenVINO) are _TIMED_HEAD + _CHECKS + a
# `call(spec)` returning (run_fn, impl) + _TIMED_LOOP.
_TIMED_HEAD = """
import json, os, statistics, sys, time
import numpy as np
nthr = int(os.environ["PEER_NTHR"])
req = json.load(sys.stdin)

def source(dims, dt):
    # the draws of gen.bench.source_data
    rng = np.random.default_rng(0)
    if dt == "s8":
        return rng.integers(-128, 128, size=dims).astype(np.int8)
    if dt == "u8":
        return rng.integers(0, 256, size=dims).astype(np.uint8)
    return rng.uniform(-4, 4, size=dims).astype(np.float32)

def median_s(fn):
    for _ in range(5):
        fn()
    ts, start = [], time.perf_counter()
    while len(ts) < req["repeat"] or time.perf_counter() - start < req["min_time"]:
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)
"""

_TIMED_LOOP = """
out = []
for spec in req["cases"]:
    try:
        fn, impl = call(spec)
        out.append([median_s(fn), impl])
    except Exception as e:
        out.append("%s: %s" % (type(e).__name__, e))
print(json.dumps(out))
"""

_TORCH_SCRIPT = _TIMED_HEAD + _CHECKS + """
import torch
torch.set_num_threads(nthr)

def resampler(spec):
    # (run(x, out_dims) -> y, memory format, name): forward F.interpolate; backward the op that
    # autograd of F.interpolate(size=...) calls (scales None), called directly so that only the
    # backward is timed. channels_last(_3d): the logical tensor stored nhwc / ndhwc; the result
    # keeps the layout
    nsp, linear = len(spec["src"]) - 2, spec["alg"] == "linear"
    fmt = torch.contiguous_format
    if spec["layout"] in ("nhwc", "ndhwc"):
        fmt = torch.channels_last if nsp == 2 else torch.channels_last_3d
    mode = {2: "bilinear", 3: "trilinear"}[nsp] if linear else "nearest-exact"
    if spec["backward"]:
        name = ("upsample_%s%dd_backward" % (mode, nsp) if linear
                else "_upsample_nearest_exact%dd_backward" % nsp)
        op = getattr(torch.ops.aten, name)
        extra = [False] if linear else []  # align_corners
        return (lambda g, out: op(g, list(g.shape[2:]), out, *extra)), fmt, name
    kw = {"align_corners": False} if linear else {}
    return (lambda x, out: torch.nn.functional.interpolate(x, size=out[2:], mode=mode, **kw),
            fmt, "F.interpolate(%s)" % mode)

def call(spec):
    if spec["op"] == "resample":
        run, fmt, name = resampler(spec)

        def checked(a, out):
            y = run(torch.from_numpy(a).contiguous(memory_format=fmt), out)
            if not y.is_contiguous(memory_format=fmt):
                raise AssertionError("%s did not keep the layout: strides %s" % (name, y.stride()))
            return y.numpy()
        resample_check(checked, spec["alg"], spec["backward"], spec["src"], spec["dst"])
        x_dims, y_dims = spec["src"], spec["dst"]
        if spec["backward"]:
            x_dims, y_dims = y_dims, x_dims
        x = torch.from_numpy(source(x_dims, "f32")).contiguous(memory_format=fmt)
        return (lambda: run(x, y_dims)), "%s %s" % (name, spec["layout"])
    if spec["op"] == "channel_shuffle":
        # channels_last: the logical NCHW tensor stored NHWC; the result keeps that layout
        fmt = torch.channels_last if spec["layout"] == "nhwc" else torch.contiguous_format
        g = spec["group"]
        shuffle_check(lambda a: torch.nn.functional.channel_shuffle(
            torch.from_numpy(a).contiguous(memory_format=fmt), g).numpy(), spec["dims"][1], g)
        x = torch.from_numpy(source(spec["dims"], "f32")).contiguous(memory_format=fmt)
        return (lambda: torch.nn.functional.channel_shuffle(x, g),
                "F.channel_shuffle(%s)" % spec["layout"])
    x = torch.from_numpy(source(spec["dims"], spec["src_dt"]))
    if spec["op"] == "to":
        dt = getattr(torch, spec["dtype"])
        return lambda: x.to(dt), "to(%s)" % spec["dtype"]
    if spec["op"] == "quantize":
        dt = getattr(torch, spec["dtype"])
        return (lambda: torch.quantize_per_tensor(x, spec["scale"], spec["zero_point"], dt),
                "quantize_per_tensor(%s)" % spec["dtype"])
    q = torch._make_per_tensor_quantized_tensor(x, spec["scale"], spec["zero_point"])
    return q.dequantize, "dequantize"
""" + _TIMED_LOOP

_OPENVINO_SCRIPT = _TIMED_HEAD + _CHECKS + """
import openvino as ov
from openvino import opset13 as ops
from openvino.opset11 import interpolate as interpolate11
core = ov.Core()
config = {"INFERENCE_NUM_THREADS": nthr, "INFERENCE_PRECISION_HINT": "f32",
          "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}

def one_op(x, layout, node):
    # (infer, y, impl): infer() runs the model node(parameter, perm) on the logical array x,
    # stored as `layout`, into the preallocated y (a logical view). OpenVINO sees the stored
    # order, channels last for nhwc / ndhwc: perm[i] is the logical axis stored i-th
    perm = tuple(range(x.ndim))
    if layout in ("nhwc", "ndhwc"):
        perm = (0,) + perm[2:] + (1,)
    xs = np.ascontiguousarray(x.transpose(perm))
    p = ops.parameter(list(xs.shape), ov.Type.f32)
    compiled = core.compile_model(ov.Model([node(p, perm)], [p]), "CPU", config)
    ys = np.empty(tuple(compiled.output(0).shape), np.float32)
    request = compiled.create_infer_request()
    request.set_input_tensor(ov.Tensor(xs, shared_memory=True))
    request.set_output_tensor(ov.Tensor(ys, shared_memory=True))

    # a synchronous infer runs in this thread: start_async + wait would add a hand-off to an
    # OpenVINO thread (~80 us per call at 1 thread); the result is already in ys, not copied
    def infer():
        request.infer(share_outputs=True)
    infer.buffers = xs, ys  # the request reads and writes them in place
    # the layers that run (OpenVINO may add reorders or transposes around the op)
    layers = [(r["layerType"].astype(str), r["primitiveType"].astype(str))
              for r in (o.get_rt_info() for o in compiled.get_runtime_model().get_ordered_ops())]
    impl = " ".join("%s:%s" % l for l in layers if l[0] not in ("Input", "Output", "Const"))
    return infer, ys.transpose(np.argsort(perm)), impl

def run_once(x, layout, node):
    infer, y, _ = one_op(x, layout, node)
    infer()
    return y

def interpolate(alg, sizes):
    # node(p, perm): Interpolate-11 of the spatial axes to `sizes` with the settings NOTES.md
    # gives for oneDNN's semantics (linear_onnx: OpenVINO's "linear" is a reference kernel)
    def node(p, perm):
        axes = [perm.index(a) for a in range(2, len(perm))]
        pads = [0] * len(perm)
        return interpolate11(p, np.array(sizes, np.int64),
                             "nearest" if alg == "nearest" else "linear_onnx", "sizes", pads,
                             pads, coordinate_transformation_mode="half_pixel",
                             nearest_mode="round_prefer_ceil", antialias=False,
                             axes=np.array(axes, np.int64))
    return node

def call(spec):
    layout = spec["layout"]
    if spec["op"] == "resample":
        alg = spec["alg"]
        resample_check(lambda x, out: run_once(x, layout, interpolate(alg, out[2:])), alg, False,
                       spec["src"], spec["dst"])
        infer, _, impl = one_op(source(spec["src"], "f32"), layout,
                                interpolate(alg, spec["dst"][2:]))
        return infer, "Interpolate-11 %s" % impl
    g = spec["group"]

    def node(p, perm):
        return ops.shuffle_channels(p, perm.index(1), g)
    shuffle_check(lambda x: run_once(x, layout, node), spec["dims"][1], g)
    infer, _, impl = one_op(source(spec["dims"], "f32"), layout, node)
    return infer, "ShuffleChannels(axis=%d) %s" % (3 if layout == "nhwc" else 1, impl)
""" + _TIMED_LOOP


def peers_dir():
    """../shared/peers next to the checkout (or in GEN_PEERS_DIR, or from the cwd), or None."""
    candidates = [os.environ.get("GEN_PEERS_DIR"),
                  Path(__file__).resolve().parents[2] / "shared" / "peers",
                  Path.cwd().parent / "shared" / "peers"]
    for c in candidates:
        if c and (Path(c) / "onednn" / "dnnl.py").is_file():
            return Path(c)
    return None


def peer_times(label, python, script, env, todo, threads, min_time, repeat):
    """{(case name, threads): (seconds, impl)} from `script` run by `python` with env(n), one
    process per thread count, on the (case name, spec) pairs of `todo`; failures go to stderr."""
    req = json.dumps({"cases": [spec for _, spec in todo], "min_time": min_time,
                      "repeat": repeat})
    result = {}
    for n in threads:
        proc = subprocess.run([str(python), "-c", script], input=req, env=env(n),
                              capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1]
            print("bench: %s peer failed at %d threads: %s" % (label, n, last), file=sys.stderr)
            continue
        for (name, _), r in zip(todo, json.loads(proc.stdout.strip().splitlines()[-1])):
            if isinstance(r, str):
                print("bench: %s peer, %s, %d threads: %s" % (label, name, n, r),
                      file=sys.stderr)
            else:
                result[name, n] = tuple(r)
    return result


def onednn_times(cases, threads, min_time, repeat):
    """oneDNN v3.13's peer_times, or {} with a note on stderr."""
    pdir = peers_dir()
    venv = Path(os.environ.get("PEERS_VENV", "/tmp/peers"))
    python = venv / "bin" / "python"
    if pdir is None or not python.exists():
        print("bench: oneDNN peer unavailable (%s); no onednn columns" %
              ("set GEN_PEERS_DIR" if pdir is None else "no venv %s, run onednn/setup.sh" % venv),
              file=sys.stderr)
        return {}

    def env(n):
        return dict(os.environ, DNNL_PEER_NTHR=str(n), PEERS_VENV=str(venv),
                    PYTHONPATH=str(pdir / "onednn"))

    todo = [(c.name, c.onednn) for c in cases if c.onednn]
    return peer_times("oneDNN", python, _ONEDNN_SCRIPT, env, todo, threads, min_time, repeat)


def peers2_python(label, column):
    """The python of the PyTorch / OpenVINO venv (PEERS2_VENV, default /tmp/peers2), or None
    with a note on stderr."""
    venv = Path(os.environ.get("PEERS2_VENV", "/tmp/peers2"))
    python = venv / "bin" / "python"
    if python.exists():
        return python
    print("bench: %s peer unavailable (no venv %s, run peers/others/setup.sh); no %s columns"
          % (label, venv, column), file=sys.stderr)
    return None


# glibc would mmap a torch result >= 32 MiB afresh each call (dequantize's f32): page faults
# would dominate; keep freed blocks so every torch result is a warm heap block
_TORCH_ENV = {"MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


def peers2_times(label, column, cases, threads, min_time, repeat):
    """peer_times of the peers2 venv's `column` peer ("torch" or "openvino") on the cases that
    have an equivalent, or {} with a note."""
    todo = [(c.name, getattr(c, column)) for c in cases if getattr(c, column)]
    python = peers2_python(label, column) if todo else None
    if python is None:
        return {}
    script = {"torch": _TORCH_SCRIPT, "openvino": _OPENVINO_SCRIPT}[column]
    extra = _TORCH_ENV if column == "torch" else {}

    def env(n):
        return dict(os.environ, PEER_NTHR=str(n), **extra)

    return peer_times(label, python, script, env, todo, threads, min_time, repeat)


# ---------------------------------------------------------------------------- command line
def add_arguments(parser):
    parser.add_argument("cases", nargs="*", metavar="CASE",
                        help="run only cases whose name contains one of these substrings")
    parser.add_argument("-k", dest="select", action="append", default=[], metavar="TEXT",
                        help="same as a positional CASE (may be repeated)")
    parser.add_argument("--threads", default="1,2",
                        help="comma-separated thread counts (default: 1,2)")
    parser.add_argument("--min-time", type=float, default=0.2, metavar="S",
                        help="time each case and its copy for at least S seconds (default 0.2)")
    parser.add_argument("--repeat", type=int, default=10, metavar="N",
                        help="and at least N calls (default 10)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON to FILE")
    parser.add_argument("--list", action="store_true", help="list the case names and exit")
    parser.add_argument("--peers", action="store_true",
                        help="also time oneDNN v3.13 (../shared/peers), PyTorch and OpenVINO "
                             "(/tmp/peers2) on the same cases")


def machine():
    try:
        with open("/proc/cpuinfo") as f:
            model = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or platform.machine()
    return "%s, %d cpus" % (model, os.cpu_count() or 1)


def busy_cpus():
    """Other processes running right now (fewest over ~50 ms), from /proc/stat; 0 if unknown."""
    counts = []
    for _ in range(10):
        try:
            with open("/proc/stat") as f:
                counts.append(next(int(l.split()[1]) for l in f if l.startswith("procs_running")))
        except (OSError, StopIteration):
            return 0
        time.sleep(0.005)
    return min(counts) - 1


def print_table(rows, peers):
    """peers: the names of the peer columns to show (onednn, torch, openvino)."""
    cols = [("case", "case", "%s"), ("threads", "threads", "%d"), ("kernel", "kernel", "%s"),
            ("us", "median us", "%.1f"), ("gbps", "GB/s", "%.2f"),
            ("copy_gbps", "copy GB/s", "%.2f"), ("ratio", "ratio", "%.2f")]
    for p in peers:
        cols += [(p + "_us", p + " us", "%.1f"), ("vs_" + p, "vs " + p, "%.2f")]
    cells = [[h for _, h, _ in cols]]
    cells += [[f % r[k] if r.get(k) is not None else "-" for k, _, f in cols] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(cols))]
    for line in cells:
        print("  ".join(c.ljust(w) if i in (0, 2) else c.rjust(w)
                        for i, (c, w) in enumerate(zip(line, widths))).rstrip())


def run(args):
    try:
        threads = [int(t) for t in args.threads.split(",")]
        if not threads or min(threads) < 1:
            raise ValueError
    except ValueError:
        print("bench: bad --threads %r (want e.g. 1,2)" % args.threads, file=sys.stderr)
        return 2
    wanted = args.cases + args.select
    cases = [c for c in CASES if not wanted or any(w in c.name for w in wanted)]
    if not cases:
        print("bench: no case matches %s (see --list)" % " ".join(wanted), file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(c.name for c in cases))
        return 0

    if busy_cpus() > 0:
        print("bench: other processes are running: timings will be noisy", file=sys.stderr)
    peers = {}
    if args.peers:
        peers = {"onednn": onednn_times(cases, threads, args.min_time, args.repeat),
                 "torch": peers2_times("PyTorch", "torch", cases, threads, args.min_time,
                                       args.repeat),
                 "openvino": peers2_times("OpenVINO", "openvino", cases, threads,
                                          args.min_time, args.repeat)}
    rows, status = [], 0
    for case in cases:
        try:
            fn, nread, nwritten, kernel = case.make()
        except gen.Error as e:
            print("bench: skipped %s: %s" % (case.name, e), file=sys.stderr)
            status, fn = 1, None
        if fn:
            copy_bytes = (nread + nwritten) // 2
            copy = copy_ceiling(copy_bytes)
        for n in threads:
            row = {"case": case.name, "threads": n}
            if fn:
                gen.set_num_threads(n)
                t, tc = median_times([fn, copy], args.min_time, args.repeat)
                row.update(kernel=kernel, us=t * 1e6, bytes_read=nread, bytes_written=nwritten,
                           gbps=(nread + nwritten) / t / 1e9, copy_gbps=2 * copy_bytes / tc / 1e9)
                row["ratio"] = row["gbps"] / row["copy_gbps"]
            for p, times in peers.items():
                if (case.name, n) in times:
                    tp, row[p + "_impl"] = times[case.name, n]
                    row[p + "_us"] = tp * 1e6
                    if fn:
                        row["vs_" + p] = tp / t
            # a case gen skipped still shows what the peers took
            if fn or any(p + "_us" in row for p in peers):
                rows.append(row)

    print("# gen bench: isa %s, %s" % (gen.isa(), machine()))
    print_table(rows, [p for p, times in peers.items() if times])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"isa": gen.isa(), "machine": machine(), "rows": rows}, f, indent=1)
    return status
