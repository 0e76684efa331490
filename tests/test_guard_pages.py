"""No kernel reads or writes outside its buffers (issue 8, item 2).

Every case places the source and the destination in guard-page windows (tests/guard.py: mmap +
mprotect through ctypes), either both *ending* right before a PROT_NONE page or both *starting*
right after one, runs the op and checks the result against the independent references
(tests/reference.py, tests/convert_reference.py, tests/resample_reference.py).  A read or write
past either end is a SIGSEGV, so the cases run in a child process: one per ISA tier of
``gen.registry.supported()`` (``GEN_ISA`` set in its environment).  The child prints the name
of each case before running it, so a crash names the case that faulted.

Covered: reorder kernel kinds run / tile / strided / interleave (element sizes 1, 2, 4, 8, one
and two threads), zero fill of blocked padding, strided plain layouts with gaps, conversions with
per-axis scales, zero points and sum, NumPy sources inside a guarded window (reversed views),
shuffle_channels forward/backward (plain, blocked, a block straddling the split), resampling
nearest/linear forward/backward (1-3 spatial dims, plain, channels-last and blocked formats, all
five types).  The parent checks that the child saw every kernel kind (GEN_VERBOSE=1 lines).

Run the child by hand: ``GEN_ISA=scalar python tests/test_guard_pages.py child``.
"""
import json
import os
import subprocess
import sys
import traceback
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import guard  # noqa: E402
import reference as ref  # noqa: E402

BF16 = ref.BF16

# ---------------------------------------------------------------------------------- cases

# (dims, src tag or strides, dst tag or strides): over element sizes 1..8 these reach run, tile,
# strided, interleave and zero fill, with tails (odd sizes everywhere).
REORDER_PAIRS = [
    ((3, 5, 7, 9), "nchw", "nchw"),
    ((2, 37, 9, 11), "nchw", "nhwc"),
    ((2, 37, 9, 11), "nhwc", "nchw"),
    ((2, 21, 7, 5), "nchw", "nChw16c"),
    ((2, 21, 7, 5), "nChw8c", "nchw"),
    ((2, 21, 7, 5), "nChw16c", "nhwc"),
    ((3, 3, 7, 7), "nchw", "nhwc"),
    ((35, 19, 3, 3), "oihw", "OIhw4i16o4i"),
    ((17, 33, 3, 1), "ihwo", "OIhw16i16o"),
    ((2, 2, 9, 7), "nchw", "nhwc"),
    ((2, 4, 5, 13), "nchw", "nhwc"),
    ((3, 8, 7, 11), "nchw", "nhwc"),
    ((2, 3, 9, 11), "nchw", "nChw8c"),       # interleave with zero rows (the padding)
    ((2, 3, 5, 13), "nchw", "aBcd4b"),
    ((2, 3, 5, 13), "nchw", "nChw16c"),
    ((2, 2, 9, 7), "nhwc", "nchw"),
    ((37, 53), "ab", "ba"),
    ((53, 37), "ba", "ab"),
    ((1001,), "a", "A16a"),
    ((1001,), "A8a", "a"),
    ((3, 5, 7), (77, 15, 2), "abc"),          # strided plain source with gaps
    ((3, 5, 7), "acb", (1, 4, 24)),           # strided plain destination with gaps
    ((37, 3), (5, 1), "ba"),                  # tile rows narrower than a row, read under a
    ((2, 5, 9, 11), "nhwc", "nchw"),          # mask: with gaps, none after the end; and
    ((2, 3, 9, 11), "nChw16c", "nchw"),       # following each other
    ((2, 24, 5, 103), "nchw", "nhwc"),        # B of 515: a last chunk of 3 columns, masked
    ((3, 1, 5, 1, 7, 3), "abcdef", "fedcba"),
    ((3, 5, 7, 2, 3), "abcde", "aBCde4c2b"),
]
REORDER_DTYPES = [np.uint8, np.float16, np.float32, np.float64]
# Destinations of 2 MiB and more are written with streaming stores (whole lines only): odd
# sizes whose windows are not line-aligned.
LARGE_REORDERS = [
    ((5, 37, 67, 69), "nchw", "nhwc", np.float32),
    ((3, 67, 97, 131), "nchw", "nhwc", np.uint8),
    ((3, 37, 67, 69), "nchw", "nChw8c", np.float64),
    ((5, 3, 171, 173), "nchw", "nChw8c", np.float32),  # interleave, 4 MiB and more
    ((3, 37, 67, 69), "nhwc", "nChw16c", np.float16),
    ((1001, 1037), "ab", "ba", np.float32),  # columns of 4004 bytes: streamed through a stage
    ((2001, 1237), "ab", "ba", np.uint8),
    ((1201, 1037), "ab", "ba", np.float16),
    ((601, 517), "ab", "ba", np.float64),
    ((7, 37, 97, 131), "abcd", "bacd", np.uint8),    # run kind: odd runs of 12707 bytes
    ((5000, 101), "ab", "aB128b", np.float32),       # and runs of 404 bytes, 108 of padding
]

# (dims, src dtype, src tag, dst dtype, dst tag, attrs)
CONVERSIONS = [
    ((2, 19, 3, 5), "f32", "nchw", "s8", "nChw16c", {}),
    ((2, 19, 3, 5), "f32", "nchw", "u8", "nhwc", dict(scales="per_c", scale_mask=2)),
    ((2, 19, 3, 5), "s8", "nhwc", "f32", "nchw", dict(src_zero_point=-5)),
    ((2, 19, 3, 5), "u8", "nChw8c", "bf16", "nchw", dict(src_zero_point=3, scales=[0.5])),
    ((2, 19, 3, 5), "f32", "nchw", "bf16", "nChw16c", dict(sum_scale=0.5)),
    ((2, 19, 3, 5), "bf16", "nchw", "f16", "nhwc", {}),
    ((2, 19, 3, 5), "f16", "nhwc", "f32", "nhwc", {}),
    ((2, 19, 3, 5), "s32", "nchw", "u8", "nchw", dict(dst_zero_point=7)),
    ((2, 19, 3, 5), "f32", "nchw", "s32", "nchw", dict(scales="per_hw", scale_mask=12,
                                                        sum_scale=2.0)),
    ((3, 37), "f32", "ab", "s8", "ba", dict(scales="per_a", scale_mask=1)),
    ((1001,), "u8", "a", "f32", "A16a", {}),
    ((13, 7, 9), "bf16", "abc", "f32", "cab", {}),
    ((13, 7, 9), "f32", "abc", "f16", "acb", dict(dst_zero_point=-1, sum_scale=1.0)),
    ((3, 37, 67, 69), "f32", "nchw", "bf16", "nhwc", dict(scales="per_c", scale_mask=2)),
    ((3, 37, 67, 69), "u8", "nhwc", "f32", "nChw16c", dict(src_zero_point=3)),
    ((32, 11, 3, 4), "s8", "ABcd16a16b", "f32", "ABcd16b16a", dict(scales=[0.5])),  # gaps
    ((3, 26, 5, 6), "f32", "aBcd32b", "s8", "abcd", {}),
    ((40, 42, 33), "s8", "aBc16b", "f32", "cba", {}),  # short runs gathered into B
    ((35, 9, 3, 5), "f32", "badc", "u8", "ABcd4b16a4b", dict(dst_zero_point=3)),  # gaps
    ((5, 5, 67, 69), "f32", "nchw", "s8", "aBcd4b", {}),  # a gap that ends the buffer
    # a scale along c and d, the nodes B would gather: the blocks' short rows packed and
    # converted in one call
    ((40, 42, 3, 11), "s8", "aBcd16b", "f32", "dcba", dict(scales="per_hw", scale_mask=12)),
    ((37, 5, 29), "f32", (206, 1, 7), "u8", "cba", {}),  # gathered runs to the buffer's end
    ((40, 11), "s8", (16, 1), "f32", "ba", dict(scales=[0.5])),  # gaps, none after the end
    ((3, 5, 9, 11), "f32", "nhwc", "bf16", "nchw", {}),  # rows of 5: the masked tile
    ((3, 5, 9, 11), "f32", "nhwc", "s8", "nchw", dict(scales="per_c", scale_mask=2)),
    # >= 2 MiB destinations of columns a tile row apart, streamed (odd pixels: a tail tile)
    ((3, 37, 167, 169), "f32", "nchw", "s8", "nChw16c", dict(scales="per_c", scale_mask=2)),
    ((3, 19, 167, 169), "f32", "nchw", "bf16", "nChw8c", {}),
    ((3, 37, 127, 129), "u8", "nchw", "s8", "aBcd48b", dict(src_zero_point=3)),  # 3 tiles
    ((1001, 611), "s8", "ab", "f32", "ba", dict(scales=[0.5])),  # staged columns of 4004 bytes
]

# (dims, tag, dtype, axis, group)
SHUFFLES = [
    ((2, 12, 5, 7), "nchw", np.float32, 1, 3),
    ((2, 12, 5, 7), "nhwc", np.uint8, 1, 4),
    ((2, 116, 3, 3), "nChw16c", np.float32, 1, 2),   # a block straddles the split
    ((2, 24, 3, 5), "nChw8c", np.float16, 1, 3),
    ((3, 9, 7), "abc", np.float64, 2, 7),
    ((3, 9, 7), "acb", np.int8, -2, 3),
    ((1001,), "a", np.uint16, 0, 7),
    ((5, 6, 3, 2, 3), "abcde", np.float32, 1, 2),
]

# (N, C, in spatial, out spatial, format, dtype)
RESAMPLES = [
    (2, 3, (7,), (13,), "ncw", "f32"),
    (2, 19, (13,), (4,), "nwc", "bf16"),
    (2, 19, (9,), (5,), "nCw16c", "u8"),
    (1, 5, (7, 9), (13, 4), "nchw", "f32"),
    (2, 17, (5, 7), (9, 3), "nhwc", "f16"),
    (2, 21, (5, 3), (3, 7), "nChw8c", "s8"),
    (1, 19, (6, 5), (11, 9), "nChw16c", "f32"),
    (1, 3, (3, 5, 4), (5, 3, 7), "ncdhw", "u8"),
    (1, 17, (3, 2, 5), (2, 5, 3), "ndhwc", "f32"),
    (1, 19, (2, 3, 3), (3, 2, 5), "nCdhw16c", "bf16"),
    (1, 9, (30,), (29,), "ncw", "f32"),
    (1, 35, (8, 8), (16, 16), "nhwc", "f32"),
    (1, 32, (5, 7), (9, 13), "nhwc", "f32"),        # runs of whole vectors, moved inline
    (1, 35, (16, 16), (8, 8), "nhwc", "u8"),
    (1, 35, (67, 69), (133, 137), "nhwc", "f32"),   # >= 2 MiB destinations: streaming stores
    (1, 19, (67, 69), (133, 137), "nChw16c", "f32"),
    (2, 3, (67, 69), (211, 213), "nchw", "f32"),
    # 2x down forward (linear) and 2x up backward (nearest) take their steps straight from the
    # source, the last window of a row reaching past it (masked loads)
    (1, 3, (6, 40), (3, 20), "nchw", "f32"),
    (1, 3, (6, 56), (3, 28), "nchw", "f32"),
    (1, 3, (3, 20), (6, 40), "nchw", "f32"),
]


def _seed(*x):
    return zlib.crc32(repr(x).encode())


# ---------------------------------------------------------------------------------- child


def _desc(gen, dims, dtype, spec):
    if isinstance(spec, str):
        return gen.MemoryDesc(dims, dtype, spec)
    return gen.MemoryDesc(dims, dtype, strides=spec)


def _src(gen, a, spec, where, dtype=None):
    md = _desc(gen, a.shape, a.dtype if dtype is None else dtype, spec)
    m, r = guard.guarded_memory(md, where)
    raw = ref.pack(a, spec)
    m.data[: raw.size] = raw
    return m, r


def _dst(gen, dims, dtype, spec, where, fill=0xA5):
    md = _desc(gen, dims, dtype, spec)
    return guard.guarded_memory(md, where, fill=fill)


def _check_layout(mem, want, spec, what):
    raw = np.array(mem.data, copy=True)
    got = ref.unpack(raw, want.shape, ref.make_layout(want.shape, spec), want.dtype)
    if not ref.same_bits(got, want):
        return "%s: logical content differs" % what
    if isinstance(spec, str):
        exp = ref.pack(want, spec)
        if exp.size != raw.size or not np.array_equal(exp, raw):
            return "%s: bytes differ (padding not zero?)" % what
    return None


def ref_shuffle(x, axis, group):
    ax = axis % x.ndim
    c = x.shape[ax]
    outer = int(np.prod(x.shape[:ax], dtype=np.int64))
    inner = int(np.prod(x.shape[ax + 1:], dtype=np.int64))
    y = x.reshape(outer, group, c // group, inner).transpose(0, 2, 1, 3).reshape(x.shape)
    return np.ascontiguousarray(y)


def ref_unshuffle(y, axis, group):
    ax = axis % y.ndim
    c = y.shape[ax]
    outer = int(np.prod(y.shape[:ax], dtype=np.int64))
    inner = int(np.prod(y.shape[ax + 1:], dtype=np.int64))
    x = y.reshape(outer, c // group, group, inner).transpose(0, 2, 1, 3).reshape(y.shape)
    return np.ascontiguousarray(x)


def cases():
    """Yield (name, fn): fn() runs one guarded case and returns None or a failure message."""
    import gen
    import convert_reference as cr
    import resample_reference as rr

    wheres = ("end", "start")

    for dims, s, d in REORDER_PAIRS:
        for dt in REORDER_DTYPES:
            for where in wheres:
                for threads in (1, 2):
                    def fn(dims=dims, s=s, d=d, dt=dt, where=where, threads=threads):
                        a = ref.random_bits(dims, dt, np.random.default_rng(_seed(dims, s, d)))
                        src, _ = _src(gen, a, s, where)
                        before = bytes(src.data)
                        dst, _ = _dst(gen, dims, dt, d, where)
                        gen.reorder(src, dst, threads=threads)
                        if bytes(src.data) != before:
                            return "source modified"
                        return _check_layout(dst, a, d, "reorder")
                    yield "reorder %s %s %s->%s %s t%d" % (
                        dims, np.dtype(dt).name, s, d, where, threads), fn

    for dims, s, d, dt in LARGE_REORDERS:
        for where in wheres:
            def fn(dims=dims, s=s, d=d, dt=dt, where=where):
                a = ref.random_bits(dims, dt, np.random.default_rng(_seed(dims, s, d)))
                src, _ = _src(gen, a, s, where)
                before = bytes(src.data)
                dst, _ = _dst(gen, dims, dt, d, where)
                gen.reorder(src, dst, threads=2)
                if bytes(src.data) != before:
                    return "source modified"
                return _check_layout(dst, a, d, "reorder")
            yield "large reorder %s %s %s->%s %s" % (dims, np.dtype(dt).name, s, d, where), fn

    for dims, sdt, s, ddt, d, attrs in CONVERSIONS:
        for where in wheres:
            def fn(dims=dims, sdt=sdt, s=s, ddt=ddt, d=d, attrs=attrs, where=where):
                rng = np.random.default_rng(_seed(dims, sdt, ddt, s, d))
                a = cr.make_tensor(sdt, dims, rng)
                kw = dict(attrs)
                if kw.get("scales") == "per_c":
                    kw["scales"] = list(rng.uniform(-3, 3, dims[1]))
                elif kw.get("scales") == "per_hw":
                    kw["scales"] = list(rng.uniform(-3, 3, dims[2] * dims[3]))
                elif kw.get("scales") == "per_a":
                    kw["scales"] = list(rng.uniform(-3, 3, dims[0]))
                src, _ = _src(gen, a, s, where)
                before = bytes(src.data)
                old = cr.random_values(ddt, int(np.prod(dims)), rng).reshape(dims)
                dst, _ = _dst(gen, dims, ddt, d, where)
                raw = ref.pack(old, d)
                dst.data[: raw.size] = raw
                gen.reorder(src, dst, threads=2, **kw)
                if bytes(src.data) != before:
                    return "source modified"
                want = cr.reference_reorder(a, ddt, dst_old=old, **kw)
                got = ref.unpack(np.array(dst.data), dims, ref.make_layout(dims, d), want.dtype)
                msg = cr.describe_mismatch(got, want, a)
                if msg:
                    return msg
                lay = ref.make_layout(dims, d)
                pad = np.repeat(ref.padding_mask(lay), want.dtype.itemsize)
                if np.asarray(dst.data)[: pad.size][pad].any():
                    return "padding not zero"
                return None
            yield "convert %s %s:%s->%s:%s %s %s" % (dims, sdt, s, ddt, d, sorted(attrs), where), fn

    for dims, tag, dt, axis, group in SHUFFLES:
        for where in wheres:
            for backward in (False, True):
                def fn(dims=dims, tag=tag, dt=dt, axis=axis, group=group, where=where,
                       backward=backward):
                    a = ref.random_bits(dims, dt, np.random.default_rng(_seed(dims, tag, axis)))
                    src, _ = _src(gen, a, tag, where)
                    before = bytes(src.data)
                    dst, _ = _dst(gen, dims, dt, tag, where)
                    p = gen.ShuffleChannels(src.desc, axis=axis, group=group, backward=backward)
                    p(src, dst)
                    if bytes(src.data) != before:
                        return "source modified"
                    want = (ref_unshuffle if backward else ref_shuffle)(a, axis, group)
                    return _check_layout(dst, want, tag, "shuffle")
                yield "shuffle %s %s %s axis=%d group=%d bwd=%s %s" % (
                    dims, tag, np.dtype(dt).name, axis, group, backward, where), fn

    for n, c, sp_in, sp_out, fmt, dt in RESAMPLES:
        for alg in ("nearest", "linear"):
            for where in wheres:
                def fn(n=n, c=c, sp_in=sp_in, sp_out=sp_out, fmt=fmt, dt=dt, alg=alg,
                       where=where):
                    rng = np.random.default_rng(_seed(n, c, sp_in, sp_out, fmt, dt, alg))
                    x = _resample_data((n, c) + sp_in, dt, rng)
                    src, _ = _src(gen, x, fmt, where)
                    before = bytes(src.data)
                    dst, _ = _dst(gen, (n, c) + sp_out, dt, fmt, where)
                    gen.Resample(src.desc, dst.desc, alg=alg)(src, dst)
                    if bytes(src.data) != before:
                        return "source modified"
                    y = ref.unpack(np.array(dst.data), (n, c) + sp_out,
                                   ref.make_layout((n, c) + sp_out, fmt), rr.NP_OF[dt])
                    if alg == "nearest":
                        if not ref.same_bits(y, rr.nearest_gather(x, sp_out)):
                            return "nearest forward differs"
                    else:
                        msg = rr.check(y, rr.forward(x, sp_out, alg),
                                       rr.forward_abs(x, sp_out, alg), dt)
                        if msg:
                            return "forward: " + msg
                    if _pad_nonzero(dst):
                        return "forward: padding not zero"
                    # backward: diff_dst of the output size -> diff_src of the input size
                    dy = _resample_data((n, c) + sp_out, dt, rng)
                    dsrc, _ = _src(gen, dy, fmt, where)
                    before = bytes(dsrc.data)
                    ddst, _ = _dst(gen, (n, c) + sp_in, dt, fmt, where)
                    gen.ResampleBackward(dsrc.desc, ddst.desc, alg=alg)(dsrc, ddst)
                    if bytes(dsrc.data) != before:
                        return "backward: diff_dst modified"
                    dx = ref.unpack(np.array(ddst.data), (n, c) + sp_in,
                                    ref.make_layout((n, c) + sp_in, fmt), rr.NP_OF[dt])
                    msg = rr.check(dx, rr.backward(dy, sp_in, alg), rr.backward_abs(dy, sp_in, alg),
                                   dt)
                    if msg:
                        return "backward: " + msg
                    if _pad_nonzero(ddst):
                        return "backward: padding not zero"
                    return None
                yield "resample %s %s %s->%s %s %s %s" % (
                    fmt, dt, (n, c) + sp_in, sp_out, alg, where, "fwd+bwd"), fn

    # NumPy sources living in a guarded window (plain and reversed views)
    for where in wheres:
        def fn(where=where):
            base, _ = guard.guarded_array((3, 37, 5, 7), np.float32, where)
            base[...] = np.random.default_rng(3).standard_normal(base.shape)
            for view in (base, base[::-1, ::-1, ::-1, ::-1], base.transpose(0, 2, 3, 1)):
                snap = view.copy()
                out = gen.reorder(view, "nChw16c")
                if not np.array_equal(out.to_array(), snap):
                    return "reorder of a NumPy view differs"
                y = gen.shuffle_channels(view, axis=1, group=view.shape[1])
                if not np.array_equal(y, ref_shuffle(snap, 1, view.shape[1])):
                    return "shuffle of a NumPy view differs"
                z = gen.resample(view, alg="nearest", out_spatial=(4, 9))
                if not ref.same_bits(z, rr.nearest_gather(snap, (4, 9))):
                    return "resample of a NumPy view differs"
                if not np.array_equal(view, snap):
                    return "NumPy source modified"
            u8, _ = guard.guarded_array((2, 3, 9, 11), np.uint8, where)
            u8[...] = np.arange(u8.size, dtype=np.uint64).reshape(u8.shape) % 251
            out = gen.reorder(u8[:, :, ::-1, :], "nhwc")
            if not np.array_equal(out.to_array(), u8[:, :, ::-1, :]):
                return "u8 reversed view differs"
            return None
        yield "numpy sources in guarded windows %s" % where, fn


def _resample_data(shape, dt, rng):
    import resample_reference as rr
    if dt == "s8":
        return rng.integers(-128, 128, size=shape).astype(np.int8)
    if dt == "u8":
        return rng.integers(0, 256, size=shape).astype(np.uint8)
    # positive floats: bf16/f16 linear tolerance is one ulp of the exact result
    return rng.uniform(0.5, 8.0, size=shape).astype(np.float32).astype(rr.NP_OF[dt])


def _pad_nonzero(mem):
    lay = ref.layout_of_desc(mem.desc)
    if lay.is_plain:
        return False
    isz = mem.data.size // lay.footprint()
    mask = np.repeat(ref.padding_mask(lay), isz)
    return bool(np.asarray(mem.data)[: mask.size][mask].any())


def child_main():
    import gen

    failures = []
    n = 0
    for name, fn in cases():
        print("CASE", name, flush=True)
        n += 1
        try:
            msg = fn()
        except Exception:
            msg = "exception: " + traceback.format_exc()
        if msg:
            failures.append([name, msg])
    print("RESULT " + json.dumps({"isa": gen.isa(), "cases": n, "failures": failures}),
          flush=True)


# ---------------------------------------------------------------------------------- tests

if __name__ != "__main__":
    import pytest

    from gen import registry

    def _run_child(tier):
        env = dict(os.environ, GEN_ISA=tier, GEN_VERBOSE="1")
        env.pop("GEN_NUM_THREADS", None)
        return subprocess.run([sys.executable, os.path.abspath(__file__), "child"], env=env,
                              cwd="/tmp", capture_output=True, text=True, timeout=600)

    def _kernels(stderr):
        names = set()
        for line in stderr.splitlines():
            f = line.split(",")
            if len(f) > 4 and f[0] == "gen_verbose" and f[1] == "exec":
                names.update(f[3].split("+"))
        return names

    @pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mmap/mprotect via libc: Linux")
    @pytest.mark.parametrize("tier", registry.supported())
    def test_guard_pages_every_kernel(tier):
        p = _run_child(tier)
        out = p.stdout.splitlines()
        started = [l[5:] for l in out if l.startswith("CASE ")]
        if p.returncode != 0:
            raise AssertionError(
                "child (GEN_ISA=%s) died with return code %d (%s) in case %r\nstderr tail:\n%s"
                % (tier, p.returncode, "SIGSEGV: out-of-bounds access" if p.returncode == -11
                   else "", started[-1] if started else None,
                   "\n".join(l for l in p.stderr.splitlines()
                             if not l.startswith("gen_verbose"))[-3000:]))
        res = json.loads([l for l in out if l.startswith("RESULT ")][-1][7:])
        assert res["isa"] == tier
        assert res["cases"] == len(started) and res["cases"] > 300
        assert not res["failures"], "\n".join("%s: %s" % tuple(f) for f in res["failures"][:10])
        k = _kernels(p.stderr)
        kinds = {"run", "tile", "strided", "interleave2", "interleave4", "interleave8",
                 "interleave16"}
        seen = {part for name in k for part in name.split("_")}
        missing = kinds - seen
        assert not missing, "kernel kinds never run: %s (saw %s)" % (missing, sorted(k))
        assert any("_zero_" in name for name in k), "no zero-fill kernel ran: %s" % sorted(k)
        for alg in ("resample_nearest", "resample_linear"):
            assert any(name.startswith(alg) for name in k), (alg, sorted(k))
        assert any(name.startswith("reorder_") and "_f32_s8_" in name for name in k), sorted(k)
        assert all(name.endswith("_" + tier) for name in k if name.startswith(("reorder", "resample"))), \
            "a kernel of another tier ran: %s" % sorted(n for n in k if not n.endswith(tier))

    @pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
    @pytest.mark.parametrize("fn", ["touch_past_end_and_die", "touch_before_start_and_die"])
    def test_guard_helper_really_faults(fn):
        """The helper is effective: touching the byte past the end (before the start) kills
        the process with SIGSEGV."""
        code = "import sys; sys.path.insert(0, %r); import guard; guard.%s()" % (HERE, fn)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == -11, (p.returncode, p.stderr[-500:])

    def test_guarded_memory_wraps_without_copy():
        import gen
        md = gen.MemoryDesc((3, 5, 7), "f32", "aCb4c")
        m, r = guard.guarded_memory(md, "end")
        assert m.data.ctypes.data + md.nbytes == r.guard_after
        m2, r2 = guard.guarded_memory(md, "start")
        assert m2.data.ctypes.data == r2.guard_before
        x = np.arange(105, dtype=np.float32).reshape(3, 5, 7)
        gen.reorder(x, m)
        assert np.array_equal(m.to_array(), x)
        gen.reorder(m, m2)
        assert bytes(m.data) == bytes(m2.data)
        del m, m2
        r.close()
        r2.close()


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "child":
    child_main()
