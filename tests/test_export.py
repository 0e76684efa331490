"""Acceptance tests for `python -m gen export` (shared/API.md "Runtime, registry, export" and
"Command line"; issue 6).

Every case exports one problem with the command line into a temporary directory, compiles
NAME.c with the contract's command line (portable C), with the flags of each vector tier the
CPU runs (-mavx2 -mfma -mf16c; plus -mavx512f/bw/vl/dq) and with -fopenmp, links shared libraries, loads them with ctypes
and runs NAME(src, dst) on gen.Memory buffers.  The result must equal gen's own result on the
same Memory, bit for bit (linear resampling too: every tier, the portable C's included, fuses
its taps' products alike) and,
for a spread of cases, an independent NumPy reference (tests/reference.py,
tests/convert_reference.py, tests/resample_reference.py).  Blocked padding in dst is zero.
"""
import ctypes
import itertools
import os
import re
import subprocess
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import gen
from gen import c_names, export as export_module

try:
    from . import reference as ref
    from . import convert_reference as cref
    from . import resample_reference as rref
except ImportError:  # tests/ is not a package
    import reference as ref
    import convert_reference as cref
    import resample_reference as rref

CC = os.environ.get("CC", "cc")
CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror"]
AVX2_FLAGS = ["-mavx2", "-mfma", "-mf16c"]
AVX512_FLAGS = ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq"] + AVX2_FLAGS
GARBAGE = 0x5A
_counter = itertools.count()


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


HAVE_AVX2 = {"avx2", "fma", "f16c"} <= _cpu_flags()
HAVE_AVX512 = HAVE_AVX2 and {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= _cpu_flags()
# the vector builds this CPU runs: name -> compiler flags
VECTOR_BUILDS = {name: flags for name, flags, have in
                 (("avx2", AVX2_FLAGS, HAVE_AVX2), ("avx512", AVX512_FLAGS, HAVE_AVX512)) if have}


def seed_of(*x):
    return zlib.crc32(repr(x).encode())


# ------------------------------------------------------------------ running the command line


def run_cli(args, cwd):
    return subprocess.run([sys.executable, "-m", "gen", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def export(tmp_path, op, args, name):
    out = tmp_path / "out"
    r = run_cli(["export", op, *args, "--name", name, "-o", str(out)], cwd=tmp_path)
    assert r.returncode == 0, f"export failed ({r.returncode}): {r.stderr}"
    assert "Traceback" not in r.stderr
    c, h = out / f"{name}.c", out / f"{name}.h"
    assert c.is_file() and h.is_file(), list(out.iterdir())
    return out


def compile_c(cwd, args):
    r = subprocess.run([CC, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{' '.join([CC, *args])} failed:\n{r.stderr}"


class Exported:
    """One exported problem: its header text and a function per build."""

    def __init__(self, out, name, openmp_run=False):
        self.out, self.name = out, name
        self.header = (out / f"{name}.h").read_text()
        # The contract's command line, exactly (portable path); a shared library per build
        # (portable, each vector tier's flags, and with openmp_run each with -fopenmp too),
        # under the same -Werror; without openmp_run, an object under -fopenmp. The compiles
        # run at once: one after another, they took this file 4 of the suite's 9 minutes.
        builds = {"portable": []}
        builds.update(VECTOR_BUILDS)
        if openmp_run:
            builds["openmp"] = ["-fopenmp"]
            builds.update((name + "+openmp", flags + ["-fopenmp"])
                          for name, flags in VECTOR_BUILDS.items())
        objects = [CFLAGS + ["-c", f"{name}.c", "-o", f"{name}_contract.o"]]
        if not openmp_run:
            objects.append(CFLAGS + ["-fopenmp", "-c", f"{name}.c", "-o", f"{name}_omp.o"])
        libs = {b: f"lib{name}_{os.getpid()}_{next(_counter)}.so" for b in builds}
        commands = objects + [CFLAGS + flags + ["-fPIC", "-shared", f"{name}.c", "-o", libs[b],
                                                "-lm"] for b, flags in builds.items()]
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            list(pool.map(lambda args: compile_c(out, args), commands))
        self.builds = {b: ctypes.CDLL(str(out / so)) for b, so in libs.items()}

    def sizes(self, build):
        lib = self.builds[build]
        return (ctypes.c_size_t.in_dll(lib, f"{self.name}_src_bytes").value,
                ctypes.c_size_t.in_dll(lib, f"{self.name}_dst_bytes").value)

    def call(self, build, src_mem, dst_mem):
        fn = getattr(self.builds[build], self.name)
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        before = src_mem.data.tobytes()
        rc = fn(src_mem.data.ctypes.data, dst_mem.data.ctypes.data)
        assert rc == 0, f"{self.name} ({build}) returned {rc}"
        assert src_mem.data.tobytes() == before, f"{self.name} ({build}) modified src"
        return dst_mem

    def check_header(self, src_desc, dst_desc):
        n = self.name
        h = re.sub(r"\s+", " ", self.header)
        assert f"int {n}(const void *src, void *dst);" in h, self.header
        for which in ("src", "dst"):
            assert re.search(rf"extern const size_t (\w+, )?{n}_{which}_bytes\b", h), \
                self.header
        assert "restrict" not in h
        for build in self.builds:
            assert self.sizes(build) == (src_desc.nbytes, dst_desc.nbytes), build


def garbage(desc):
    m = gen.Memory(desc)
    m.data[:] = GARBAGE
    return m


def padding_bytes(desc):
    """Byte mask of desc's buffer: True where no logical element lives."""
    lay = ref.layout_of_desc(desc)
    isz = desc.nbytes // lay.footprint()
    full = np.zeros(desc.nbytes, dtype=bool)
    pad = np.repeat(ref.padding_mask(lay), isz)
    full[: pad.size] = pad
    return full


def assert_padding_zero(mem, what):
    mask = padding_bytes(mem.desc)
    if mask.any():
        bad = np.flatnonzero(mem.data[mask] != 0)
        assert bad.size == 0, f"{what}: {bad.size} padding bytes not zero"


def first_diff(a, b):
    a, b = np.frombuffer(a, np.uint8), np.frombuffer(b, np.uint8)
    d = np.flatnonzero(a != b)
    return f"{d.size} of {a.size} bytes differ, first at byte {d[0]}" if d.size else ""


def assert_same_bytes(got, want, what):
    g, w = got.data.tobytes(), want.data.tobytes()
    assert g == w, f"{what}: {first_diff(g, w)}"


# ------------------------------------------------------------------ reorder

# (id, dims, src DT:TAG, dst DT:TAG, attributes, check against the NumPy reference)
REORDERS = [
    ("nchw_nhwc", (2, 5, 3, 4), "f32:nchw", "f32:nhwc", {}, True),
    ("nchw_nChw16c_pad", (2, 19, 3, 3), "f32:nchw", "f32:nChw16c", {}, True),
    ("OIhw16i16o", (20, 19, 3, 3), "f32:oihw", "f32:OIhw16i16o", {}, True),
    ("f32_s8_scale", (2, 7, 3, 5), "f32:nchw", "s8:nhwc", {"scales": [0.375]}, True),
    ("f32_s8_per_channel", (2, 19, 2, 3), "f32:nchw", "s8:nChw16c",
     {"scales": "per_channel", "scale_mask": 2}, True),
    ("s8_f32_src_zp", (2, 6, 3, 4), "s8:nhwc", "f32:nchw", {"src_zero_point": -3}, True),
    ("f32_bf16", (2, 11, 3, 3), "f32:nchw", "bf16:nChw8c", {}, True),
    ("f16_u8_dst_zp", (2, 5, 4, 3), "f16:nchw", "u8:nhwc",
     {"scales": [2.5], "dst_zero_point": 128}, True),
    ("f32_s8_sum", (2, 19, 3, 2), "f32:nchw", "s8:nChw16c",
     {"scales": [4.0], "sum_scale": 0.5}, True),
    ("f32_f32_sum_nhwc", (2, 6, 3, 5), "f32:nhwc", "f32:nchw",
     {"sum_scale": -1.25, "dst_zero_point": 1}, True),
    ("weights_s8_mask1", (20, 19, 3, 3), "f32:oihw", "s8:OIhw4i16o4i",
     {"scales": "per_0", "scale_mask": 1}, False),
    # tiles whose B is narrower than a row: rows that follow each other, a converted gap
    ("narrow_move", (2, 8, 9, 11), "f32:aBcd4b", "f32:nchw", {}, True),
    ("narrow_f32_bf16", (3, 19, 5, 7), "f32:aBcd4b", "bf16:nchw", {"scales": [0.5]}, True),
    # channel blocks that do not nest (4 and 6): the channels read through a table
    ("blocks_4_6", (2, 10, 3, 5), "f32:aBcd4b", "s8:aBcd6b", {"scales": [0.5]}, True),
    # a tile's B of runs gathered (5 of 8 channels), zeros after each element (9 of 16 b)
    ("gathered_runs", (6, 13, 4, 46), "f32:aBcd8b", "u8:dbca", {"dst_zero_point": 3}, True),
    ("gaps", (18, 9, 3, 5), "f32:badc", "s8:ABcd4b16a4b", {"scales": [0.5]}, True),
    # negative values as the command line takes them ("--scales -1.5,2", "--sum-scale -0.5")
    ("negative_values", (2, 2, 3, 5), "f32:nchw", "s8:nhwc",
     {"scales": [-1.5, 2.0], "scale_mask": 2, "dst_zero_point": -3, "sum_scale": -0.5}, True),
    # large enough for the OpenMP path (traffic >= 2 x 128 KiB)
    ("big_nchw_nhwc", (2, 32, 24, 24), "f32:nchw", "f32:nhwc", {}, False),
    ("big_bf16_f32", (2, 40, 24, 24), "bf16:nChw16c", "f32:nhwc", {}, False),
    # blocks that do not nest over 22000 indices: two steps through an intermediate, the
    # second after every thread's first (an OpenMP barrier)
    ("big_staged", (22000, 3), "f32:Ab4a", "s8:Ab3a", {"scales": [0.5], "sum_scale": 0.5},
     True),
]


def _cli_attrs(attrs):
    """The options as a user types them: a value after its option, a negative one too."""
    args = []
    if "scales" in attrs:
        args += ["--scales", ",".join(repr(float(s)) for s in attrs["scales"])]
    for key in ("scale_mask", "src_zero_point", "dst_zero_point", "sum_scale"):
        if key in attrs:
            args += [f"--{key.replace('_', '-')}", repr(attrs[key])]
    return args


def _src_values(dtype, dims, rng, attrs):
    if not attrs and dtype in ("f32", "bf16", "f16"):
        return ref.random_bits(dims, cref.np_dtype(dtype), rng)  # NaN payloads kept by copies
    return cref.make_tensor(dtype, dims, rng)


@pytest.mark.parametrize("case", REORDERS, ids=[c[0] for c in REORDERS])
def test_reorder(tmp_path, case):
    cid, dims, src, dst, attrs, with_reference = case
    rng = np.random.default_rng(seed_of(cid))
    attrs = dict(attrs)
    if attrs.get("scales") == "per_channel":
        attrs["scales"] = list(rng.integers(-16, 17, size=dims[1]) / 8.0)
    elif attrs.get("scales") == "per_0":
        attrs["scales"] = list(rng.integers(1, 33, size=dims[0]) / 16.0)
    name = f"reorder_{cid}"
    sdt, stag = src.split(":")
    ddt, dtag = dst.split(":")
    sd, dd = gen.MemoryDesc(dims, sdt, stag), gen.MemoryDesc(dims, ddt, dtag)
    out = export(tmp_path, "reorder", ["--dims", "x".join(map(str, dims)), "--src", src,
                                       "--dst", dst, *_cli_attrs(attrs)], name)
    ex = Exported(out, name, openmp_run=cid.startswith("big"))
    ex.check_header(sd, dd)

    x = _src_values(sdt, dims, rng, attrs)
    src_mem = gen.Memory.from_array(x, format=stag)
    sum_mode = "sum_scale" in attrs
    if sum_mode:
        # dst is read: known old values (padding included, which must come out zero)
        old = cref.make_tensor(ddt, dims, rng) if ddt != "f32" else \
            rng.integers(-50, 50, size=dims).astype(np.float32)
        old_mem = gen.Memory.from_array(old, format=dtag)
        old_mem.data[padding_bytes(dd)] = GARBAGE

        def fresh():
            m = gen.Memory(dd)
            m.data[:] = old_mem.data
            return m
    else:
        fresh = lambda: garbage(dd)  # noqa: E731

    want = gen.reorder(src_mem, fresh(), **attrs)
    assert_padding_zero(want, "gen.reorder")
    if with_reference:
        r = cref.reference_reorder(
            x, ddt, scales=attrs.get("scales"), scale_mask=attrs.get("scale_mask", 0),
            src_zero_point=attrs.get("src_zero_point", 0),
            dst_zero_point=attrs.get("dst_zero_point", 0), sum_scale=attrs.get("sum_scale"),
            dst_old=old if sum_mode else None)
    for build in ex.builds:
        got = ex.call(build, src_mem, fresh())
        assert_same_bytes(got, want, f"{name} ({build}) vs gen.reorder")
        assert_padding_zero(got, f"{name} ({build})")
        if with_reference:
            logical = ref.unpack(got.data, dims, dtag, cref.np_dtype(ddt))
            cref.assert_same(logical, r, x, f"{name} ({build}) vs NumPy reference")


# ------------------------------------------------------------------ shuffle_channels

# (id, dims, DT:TAG, axis, group, backward)
SHUFFLES = [
    ("nchw_g3", (2, 6, 3, 4), "f32:nchw", 1, 3, False),
    ("nhwc_g4", (2, 8, 3, 3), "u8:nhwc", 1, 4, False),
    ("nChw16c_116_g2", (1, 116, 3, 3), "f32:nChw16c", 1, 2, False),
    ("nChw16c_116_g2_bwd", (1, 116, 3, 3), "f32:nChw16c", 1, 2, True),
    ("nChw8c_bf16_g3_bwd", (2, 12, 2, 3), "bf16:nChw8c", 1, 3, True),
    ("f64_axis3", (2, 3, 2, 6), "f64:nhwc", 3, 2, False),
    ("big_nhwc_g2", (2, 64, 16, 18), "f32:nhwc", 1, 2, False),
]


def shuffle_reference(x, axis, group, backward):
    shape = x.shape
    c = shape[axis]
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    g, k = (c // group, group) if backward else (group, c // group)
    y = x.reshape(outer, g, k, inner).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(y).reshape(shape)


@pytest.mark.parametrize("case", SHUFFLES, ids=[c[0] for c in SHUFFLES])
def test_shuffle(tmp_path, case):
    cid, dims, src, axis, group, backward = case
    dt, tag = src.split(":")
    desc = gen.MemoryDesc(dims, dt, tag)
    name = f"shuffle_{cid}"
    args = ["--dims", "x".join(map(str, dims)), "--src", src, f"--axis={axis}",
            f"--group={group}"] + (["--backward"] if backward else [])
    ex = Exported(export(tmp_path, "shuffle_channels", args, name), name,
                  openmp_run=cid.startswith("big"))
    ex.check_header(desc, desc)
    rng = np.random.default_rng(seed_of(cid))
    npdt = np.dtype(np.float64) if dt == "f64" else cref.np_dtype(dt)
    x = ref.random_bits(dims, npdt, rng)
    src_mem = gen.Memory.from_array(x, format=tag)
    op = gen.shuffle_channels_backward if backward else gen.shuffle_channels
    want = op(src_mem, axis=axis, group=group)
    assert want.desc == desc
    r = shuffle_reference(x, axis, group, backward)
    r_raw = ref.pack(r, tag, desc.nbytes)
    for build in ex.builds:
        got = ex.call(build, src_mem, garbage(desc))
        assert_same_bytes(got, want, f"{name} ({build}) vs gen")
        assert got.data.tobytes() == r_raw.tobytes(), \
            f"{name} ({build}) vs NumPy reference: {first_diff(got.data.tobytes(), r_raw.tobytes())}"


# ------------------------------------------------------------------ resample

# (id, dims (forward src), DT:TAG, alg, out spatial, backward)
RESAMPLES = [
    ("1d_ncw_linear_up", (2, 3, 7), "f32:ncw", "linear", (12,), False),
    ("1d_nwc_nearest_down_bwd", (2, 5, 9), "f32:nwc", "nearest", (4,), True),
    ("2d_nchw_linear", (1, 3, 5, 6), "f32:nchw", "linear", (9, 4), False),
    ("2d_nchw_linear_bwd", (1, 3, 5, 6), "f32:nchw", "linear", (9, 4), True),
    ("2d_nhwc_nearest", (2, 5, 6, 5), "f32:nhwc", "nearest", (3, 8), False),
    ("2d_nChw8c_linear_pad", (1, 10, 4, 4), "f32:nChw8c", "linear", (7, 3), False),
    ("2d_nChw8c_nearest_bwd", (1, 10, 4, 4), "f32:nChw8c", "nearest", (7, 3), True),
    ("2d_bf16_nChw16c_linear", (1, 20, 3, 5), "bf16:nChw16c", "linear", (6, 2), False),
    ("2d_u8_nhwc_nearest", (2, 4, 5, 3), "u8:nhwc", "nearest", (2, 7), False),
    ("3d_ncdhw_nearest", (1, 2, 3, 4, 5), "f32:ncdhw", "nearest", (5, 3, 7), False),
    ("3d_ndhwc_linear_bwd", (1, 3, 4, 3, 2), "f32:ndhwc", "linear", (2, 5, 3), True),
    ("3d_nCdhw8c_linear", (1, 9, 2, 3, 4), "f32:nCdhw8c", "linear", (3, 2, 6), False),
    ("big_2d_nhwc_linear", (1, 32, 24, 24), "f32:nhwc", "linear", (48, 36), False),
    # the direct path (a last axis that shrinks, runs of 40) with items of both images
    ("2d_nhwc_linear_down_grouped", (2, 40, 12, 20), "f32:nhwc", "linear", (3, 5), False),
    # the format gen.Resample chooses for "any" descriptors: channels-last
    ("3d_any_linear_bwd", (1, 3, 4, 3, 2), "f32:any", "linear", (2, 5, 3), True),
]


def _resample_values(dt, dims, rng):
    if dt in ("u8", "s8"):
        lo, hi = rref.INT_RANGE[dt]
        return rng.integers(lo, hi + 1, size=dims).astype(rref.NP_OF[dt])
    return rng.standard_normal(dims).astype(np.float32).astype(rref.NP_OF[dt])


@pytest.mark.parametrize("case", RESAMPLES, ids=[c[0] for c in RESAMPLES])
def test_resample(tmp_path, case):
    cid, dims, src, alg, out_sp, backward = case
    dt, tag = src.split(":")
    tag = {3: "nwc", 4: "nhwc", 5: "ndhwc"}[len(dims)] if tag == "any" else tag
    fwd_src = gen.MemoryDesc(dims, dt, tag)
    fwd_dst = gen.MemoryDesc(dims[:2] + out_sp, dt, tag)
    s, d = (fwd_dst, fwd_src) if backward else (fwd_src, fwd_dst)
    name = f"resample_{cid}"
    args = ["--dims", "x".join(map(str, dims)), "--src", src, "--alg", alg,
            "--out-spatial", "x".join(map(str, out_sp))] + (["--backward"] if backward else [])
    ex = Exported(export(tmp_path, "resample", args, name), name,
                  openmp_run=cid.startswith("big"))
    ex.check_header(s, d)
    rng = np.random.default_rng(seed_of(cid))
    x = _resample_values(dt, s.dims, rng)
    src_mem = gen.Memory.from_array(x, format=tag)
    if backward:
        want = gen.resample_backward(src_mem, alg=alg, in_spatial=dims[2:])
        exact = rref.backward(x, dims[2:], alg)
        mag = rref.backward_abs(x, dims[2:], alg)
    else:
        want = gen.resample(src_mem, alg=alg, out_spatial=out_sp)
        exact = rref.forward(x, out_sp, alg)
        mag = rref.forward_abs(x, out_sp, alg)
    assert want.desc == d
    assert_padding_zero(want, "gen")
    want_arr = want.to_array()
    for build in ex.builds:
        got = ex.call(build, src_mem, garbage(d))
        what = f"{name} ({build})"
        assert_padding_zero(got, what)
        got_arr = got.to_array()
        msg = rref.check(got_arr, exact, mag, dt)
        assert msg is None, f"{what} vs NumPy reference: {msg}"
        # every tier fuses the taps' products alike (the portable build too): the same bits
        assert_same_bytes(got, want, f"{what} vs gen")
    if alg == "nearest" and not backward:
        # nearest forward is a pure gather: a bitwise copy of the selected elements
        g = rref.nearest_gather(x, out_sp)
        assert ref.same_bits(want_arr, g)


# ------------------------------------------------------------------ the command line itself


OPTIONS = ["--dims", "--src", "--dst", "--scales", "--scale-mask", "--src-zero-point",
           "--dst-zero-point", "--sum-scale", "--axis", "--group", "--alg", "--out-spatial",
           "--backward", "--name", "-o"]


def test_export_help(tmp_path):
    r = run_cli(["export", "--help"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for word in OPTIONS + ["reorder", "shuffle_channels", "resample", "nearest", "linear"]:
        assert word in r.stdout, f"export --help does not mention {word}"


BAD = [
    ("unknown_op", ["export", "transpose", "--dims", "2x3", "--src", "f32:nc"]),
    ("bad_dims", ["export", "reorder", "--dims", "2xa", "--src", "f32:nc"]),
    # int() takes these, as 20x3 and 2x3: not sizes written as such
    ("dims_underscore", ["export", "reorder", "--dims", "2_0x3", "--src", "f32:nc"]),
    ("dims_other_digits", ["export", "reorder", "--dims", "\uff12x3", "--src", "f32:nc"]),
    ("dims_space", ["export", "reorder", "--dims", " 2x3", "--src", "f32:nc"]),
    ("sum_scale_minus_inf", ["export", "reorder", "--dims", "2x3", "--src", "f32:nc",
                             "--dst", "s8:nc", "--sum-scale", "-inf"]),
    ("zero_dim", ["export", "reorder", "--dims", "2x0", "--src", "f32:nc"]),
    ("unknown_dtype", ["export", "reorder", "--dims", "2x3", "--src", "f31:nc"]),
    ("unknown_tag", ["export", "reorder", "--dims", "2x3x4x5", "--src", "f32:nchx"]),
    ("tag_rank", ["export", "reorder", "--dims", "2x3", "--src", "f32:nchw"]),
    ("no_colon", ["export", "reorder", "--dims", "2x3", "--src", "f32"]),
    ("bad_dst_dtype", ["export", "reorder", "--dims", "2x3", "--src", "f32:nc",
                       "--dst", "q7:nc"]),
    ("scales_count", ["export", "reorder", "--dims", "2x3", "--src", "f32:nc", "--dst",
                      "s8:nc", "--scales", "1,2", "--scale-mask", "2"]),
    ("group", ["export", "shuffle_channels", "--dims", "1x6x2x2", "--src", "f32:nchw",
               "--group", "4"]),
    ("axis", ["export", "shuffle_channels", "--dims", "1x6x2x2", "--src", "f32:nchw",
              "--axis", "4"]),
    ("no_out_spatial", ["export", "resample", "--dims", "1x2x3x3", "--src", "f32:nchw"]),
    ("out_spatial_rank", ["export", "resample", "--dims", "1x2x3x3", "--src", "f32:nchw",
                          "--out-spatial", "4"]),
    ("bad_alg", ["export", "resample", "--dims", "1x2x3x3", "--src", "f32:nchw",
                 "--alg", "cubic", "--out-spatial", "4x4"]),
    ("resample_s32", ["export", "resample", "--dims", "1x2x3x3", "--src", "s32:nchw",
                      "--out-spatial", "4x4"]),
    ("resample_tables", ["export", "resample", "--dims", "2x6x3", "--src", "f32:abc",
                         "--out-spatial", "4000000000"]),  # tables of terabytes
]
# not identifiers, or names the exported C already uses: the library's, reserved ones, gen's
BAD_NAMES = ["1abc", "a-b", "int", "", "memcpy", "sqrtf", "size_t", "main", "_k", "NAN",
             "gen", "gen_piece", "GEN_MOVES", "resample_linear_f32_avx2", "omp_get_num_threads",
             "printf", "isdigit", "cabsf", "towlower", "strtok_r", "complex"]


def _check_one_line_error(r, what):
    assert r.returncode != 0, f"{what}: exit 0"
    assert "Traceback" not in r.stderr, f"{what}: {r.stderr}"
    lines = r.stderr.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].strip(), f"{what}: stderr {r.stderr!r}"


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_options(tmp_path, case):
    cid, args = case
    r = run_cli(args + ["--name", "k", "-o", str(tmp_path / "out")], cwd=tmp_path)
    _check_one_line_error(r, cid)
    assert not (tmp_path / "out" / "k.c").exists()


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_bad_name(tmp_path, bad):
    r = run_cli(["export", "reorder", "--dims", "2x3", "--src", "f32:nc", "--name", bad,
                 "-o", str(tmp_path / "out")], cwd=tmp_path)
    _check_one_line_error(r, f"--name {bad!r}")


def test_names_the_headers_declare_are_refused(tmp_path):
    """Every identifier of the system headers the exported C includes (as the compiler sees
    them with -fopenmp, macros included) is refused as --name, or is one a function may take:
    the accepted ones, all declared as `int NAME(const void *src, void *dst);` after those
    headers, compile in each build (with OpenMP, as README's command line; the C99 library's
    other names, GCC's built-ins, are checked by test_bad_name)."""
    out = export(tmp_path, "resample", ["--dims", "1x16x5x5", "--src", "f32:nChw16c",
                                        "--alg", "linear", "--out-spatial", "9x9"], "k")
    includes = sorted(set(re.findall(r"#include <([a-z0-9_]+\.h)>", (out / "k.c").read_text())))
    assert {"stdint.h", "math.h", "immintrin.h"} <= set(includes), includes
    head = "".join(f"#include <{h}>\n" for h in includes)
    (tmp_path / "headers.c").write_text(head)
    names = set()
    for flags, pattern in ((["-E", "-P"], r"\b[A-Za-z][A-Za-z0-9_]*\b"),  # every word
                           (["-E", "-dM"], r"#define ([A-Za-z][A-Za-z0-9_]*)")):  # macros
        r = subprocess.run([CC, "-std=c99", *flags, *AVX512_FLAGS, "-fopenmp", "headers.c"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        names |= set(re.findall(pattern, r.stdout))
    accepted, refused = [], []
    for name in sorted(names - c_names.KEYWORDS):
        try:
            export_module.reorder_source(name, (2, 3), ("f32", "ab"), ("f32", "ba"))
            accepted.append(name)
        except gen.Error:
            refused.append(name)
    assert {"memcpy", "sqrtf", "int8_t", "NAN"} <= set(refused)
    (tmp_path / "names.c").write_text(head + "".join(
        f"int {name}(const void *src, void *dst);\n" for name in accepted))
    for flags in [[], *VECTOR_BUILDS.values()]:
        compile_c(tmp_path, [*CFLAGS, *flags, "-fopenmp", "-c", "names.c", "-o", "names.o"])


@pytest.mark.parametrize("name", ["rem", "strided", "memory_reorder", "resample_up2"])
def test_names_near_the_reserved_ones_compile(tmp_path, name):
    out = export(tmp_path, "resample", ["--dims", "1x16x5x5", "--src", "f32:nChw16c",
                                        "--alg", "linear", "--out-spatial", "9x9"], name)
    for flags in [[], *VECTOR_BUILDS.values()]:
        compile_c(out, [*CFLAGS, *flags, "-c", f"{name}.c", "-o", f"{name}.o"])


def test_headers_of_names_that_differ_in_case_include_together(tmp_path):
    """Each header's include guard is its own (a name's case kept), not one a user's header
    of the same name in capitals would have: both headers declare their function."""
    for name, src, dst in (("pack", "f32:ab", "f32:ba"), ("PACK", "f32:ba", "f32:ab")):
        out = export(tmp_path, "reorder", ["--dims", "2x3", "--src", src, "--dst", dst], name)
    (out / "mine.h").write_text("#ifndef PACK_H\n#define PACK_H\n#endif\n")
    (out / "use.c").write_text(
        '#include "mine.h"\n#include "pack.h"\n#include "PACK.h"\n#include <stdio.h>\n'
        "int main(void) {\n    float a[6] = {0, 1, 2, 3, 4, 5}, b[6], c[6];\n"
        "    if (pack(a, b) || PACK(b, c)) return 1;\n"
        '    for (int i = 0; i < 6; ++i) printf("%g %g\\n", b[i], c[i]);\n    return 0;\n}\n')
    compile_c(out, [*CFLAGS, "use.c", "pack.c", "PACK.c", "-o", "use", "-lm"])
    r = subprocess.run([str(out / "use")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = np.array(r.stdout.split(), np.float32).reshape(6, 2)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(got[:, 0], a.T.ravel()) and np.array_equal(got[:, 1], a.ravel())


def test_failed_write_leaves_no_file(tmp_path):
    out = tmp_path / "out"
    (out / "k.h").mkdir(parents=True)  # the header cannot be written
    r = run_cli(["export", "reorder", "--dims", "2x3", "--src", "f32:nc", "--dst", "f32:cn",
                 "--name", "k", "-o", str(out)], cwd=tmp_path)
    _check_one_line_error(r, "k.h a directory")
    assert repr(str(out / "k.h")) in r.stderr  # the file, not its folder
    assert sorted(p.name for p in out.iterdir()) == ["k.h"]


def test_cli_py_by_path(tmp_path):
    """`python cli.py export ...` at the repository root is the same program."""
    cli = Path(__file__).resolve().parents[1] / "cli.py"
    if not cli.is_file():
        pytest.skip("no cli.py next to tests/")
    r = subprocess.run([sys.executable, str(cli), "export", "reorder", "--dims", "2x3",
                        "--src", "f32:nc", "--dst", "f32:cn", "--name", "k", "-o",
                        str(tmp_path / "out")], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "k.c").is_file() and (tmp_path / "out" / "k.h").is_file()
