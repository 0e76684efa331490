"""Acceptance tests for the runtime surface: gen.isa, GEN_ISA, gen.kernels,
GEN_VERBOSE, gen.set_num_threads (shared/API.md, "Runtime, registry")."""
import json
import os
import re

import numpy as np
import pytest

import gen
from checks import GEN_PARENT, raises_gen, run_py

try:
    from . import reference as ref
except ImportError:  # tests/ is not a package
    import reference as ref



# A fixed set of reorders whose output bytes are hashed (all same-dtype copies).
WORKLOAD = r"""
import hashlib, json, sys
import numpy as np
import gen
import ml_dtypes

def data(shape, dt, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) * np.dtype(dt).itemsize
    return rng.integers(0, 256, n, dtype=np.uint8).view(dt).reshape(shape)

cases = [
    ((4, 35, 13, 17), np.float32, "nchw", "nhwc"),
    ((4, 35, 13, 17), np.float32, "nhwc", "nChw16c"),
    ((4, 35, 13, 17), np.uint8, "nchw", "nhwc"),
    ((4, 35, 13, 17), ml_dtypes.bfloat16, "nChw8c", "nchw"),
    ((35, 37, 3, 3), np.float32, "oihw", "OIhw4i16o4i"),
    ((35, 37, 3, 3), np.float16, "hwio", "OIhw16i16o"),
    ((2, 19, 21, 3, 3), np.float32, "goihw", "gOIhw16i16o"),
    ((33, 65), np.float64, "ab", "ba"),
    ((33, 65, 9), np.int16, "acb", "cab"),
]
out = {"isa": gen.isa(), "hashes": []}
for i, (shape, dt, t1, t2) in enumerate(cases):
    a = data(shape, dt, i)
    src = gen.reorder(a, t1)
    for threads in (1, 2):
        dst = gen.reorder(src, t2, threads=threads)
        out["hashes"].append(hashlib.sha256(bytes(dst.data)).hexdigest())
    back = gen.reorder(dst, t1)
    assert bytes(back.data) == bytes(src.data)
    assert dst.to_array().tobytes() == a.tobytes()
sys.stdout.write(json.dumps(out))
"""


def test_isa_is_one_word():
    isa = gen.isa()
    assert isinstance(isa, str)
    assert re.fullmatch(r"[A-Za-z0-9_.+-]+", isa), repr(isa)
    assert gen.isa() == isa


TIER_CHECK = r"""
import sys, hashlib, json
import numpy as np
import gen
import reference as ref
rng = np.random.default_rng(4242)
types = [np.uint8, np.int16, ref.BF16, np.float32, np.float64]
hashes = []
for i in range(60):
    nd = int(rng.integers(1, 5))
    dims = tuple(int(x) for x in rng.integers(1, 24 if nd > 2 else 70, nd))
    specs = []
    for _ in range(2):
        if rng.random() < 0.2:
            specs.append(ref.random_strides(rng, dims))
        else:
            specs.append(ref.random_tag(rng, nd, max_blocks=3, sizes=(2, 4, 8, 16)))
    dt = types[i % len(types)]
    a = ref.random_bits(dims, dt, rng)
    def md(spec):
        if isinstance(spec, str):
            return gen.MemoryDesc(dims, a.dtype, spec)
        return gen.MemoryDesc(dims, a.dtype, strides=spec)
    src = gen.Memory(md(specs[0]))
    raw = ref.pack(a, specs[0])
    src.data[:raw.size] = raw
    dst = gen.Memory(md(specs[1]))
    dst.data[:] = 0x77
    gen.reorder(src, dst, threads=1 + i % 2)
    got = ref.unpack(np.array(dst.data), dims, specs[1], a.dtype)
    assert ref.same_bits(got, a), (i, dims, specs, a.dtype)
    if isinstance(specs[1], str):
        assert bytes(dst.data) == ref.pack(a, specs[1]).tobytes(), (i, dims, specs)
    hashes.append(hashlib.sha256(got.tobytes()).hexdigest())
print(json.dumps({"isa": gen.isa(), "hashes": hashes}))
"""


def test_every_tier_against_reference(tmp_path):
    """The forced scalar tier and the default tier both match the reference."""
    tests_dir = os.path.dirname(os.path.abspath(ref.__file__))
    pp = GEN_PARENT + os.pathsep + tests_dir
    default = json.loads(run_py(TIER_CHECK, tmp_path, PYTHONPATH=pp).stdout)
    scalar = json.loads(run_py(TIER_CHECK, tmp_path, PYTHONPATH=pp, GEN_ISA="scalar").stdout)
    assert scalar["isa"] == "scalar"
    assert default["isa"] == gen.isa()
    assert default["hashes"] == scalar["hashes"]


def test_gen_isa_scalar_gives_identical_results(tmp_path):
    default = json.loads(run_py(WORKLOAD, tmp_path).stdout)
    scalar = json.loads(run_py(WORKLOAD, tmp_path, GEN_ISA="scalar").stdout)
    assert scalar["isa"] == "scalar"
    assert default["isa"] == gen.isa()
    assert default["hashes"] == scalar["hashes"]
    # and identical to this process
    h = []
    import hashlib
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, 4 * 35 * 13 * 17 * 4, dtype=np.uint8).view(np.float32)
    a = a.reshape(4, 35, 13, 17)
    src = gen.reorder(a, "nchw")
    h.append(hashlib.sha256(bytes(gen.reorder(src, "nhwc").data)).hexdigest())
    assert h[0] == default["hashes"][0]
    assert h[0] == hashlib.sha256(ref.pack(a, "nhwc").tobytes()).hexdigest()


def test_kernels_registry():
    ks = gen.kernels()
    assert isinstance(ks, list) and ks
    for k in ks:
        assert isinstance(k, dict)
        for key in ("name", "op", "isa", "dtypes", "layout"):
            assert key in k, (key, k)
        assert isinstance(k["name"], str) and k["name"]
        assert isinstance(k["op"], str) and k["op"]
        assert isinstance(k["isa"], str) and re.fullmatch(r"[A-Za-z0-9_.+-]+", k["isa"])
    ops = {k["op"] for k in ks}
    assert "reorder" in ops
    isas = {k["isa"] for k in ks}
    assert gen.isa() in isas
    assert "scalar" in isas  # GEN_ISA=scalar must have kernels to dispatch to
    for op in ops:
        sel = gen.kernels(op)
        assert sel == [k for k in ks if k["op"] == op]
    r = gen.kernels("reorder")
    assert r and all(k["op"] == "reorder" for k in r)
    assert len(r) == sum(1 for k in ks if k["op"] == "reorder")
    assert gen.kernels(op=None) == ks


def test_kernels_under_scalar_isa(tmp_path):
    code = """
    import json, gen
    ks = gen.kernels("reorder")
    print(json.dumps({"isa": gen.isa(), "isas": sorted({k["isa"] for k in ks})}))
    """
    out = json.loads(run_py(code, tmp_path, GEN_ISA="scalar").stdout)
    assert out["isa"] == "scalar"
    assert "scalar" in out["isas"]


VERBOSE_CODE = """
import numpy as np, gen
a = np.arange(3 * 5 * 7 * 11, dtype=np.float32).reshape(3, 5, 7, 11)
m = gen.reorder(a, "nhwc")
m2 = gen.reorder(m, "nChw16c")
p = gen.Reorder(m2.desc, gen.MemoryDesc((3, 5, 7, 11), "f32", "nchw"))
d = gen.Memory(gen.MemoryDesc((3, 5, 7, 11), "f32", "nchw"))
p(m2, d)
assert (d.to_array() == a).all()
"""


def test_verbose_one_line_per_op(tmp_path):
    p = run_py(VERBOSE_CODE, tmp_path, GEN_VERBOSE="1")
    lines = [ln for ln in p.stderr.splitlines() if "reorder" in ln]
    assert len(lines) == 3, p.stderr
    for ln in lines:
        assert re.search(r"3\D{1,3}5\D{1,3}7\D{1,3}11", ln), ln  # shapes
        assert "f32" in ln or "float32" in ln, ln  # dtypes
    assert "nChw16c" in lines[1] or "aBcd16b" in lines[1], lines[1]  # formats
    assert "reorder" not in p.stdout


def test_silent_without_verbose(tmp_path):
    p = run_py(VERBOSE_CODE, tmp_path)
    assert p.stdout == ""
    assert p.stderr == ""
    assert os.listdir(tmp_path) == []  # nothing written to the working directory
    p = run_py(VERBOSE_CODE, tmp_path, GEN_ISA="scalar")
    assert p.stdout == "" and p.stderr == ""


def test_set_num_threads_results_identical():
    rng = np.random.default_rng(9)
    a = ref.random_bits((8, 40, 17, 19), np.float32, rng)
    exp = ref.pack(a, "nChw16c").tobytes()
    try:
        res = []
        for n in (1, 2, 1, 3):
            gen.set_num_threads(n)
            out = gen.reorder(a, "nChw16c")
            res.append(bytes(out.data))
            back = gen.reorder(out, "nhwc")
            assert bytes(back.data) == ref.pack(a, "nhwc").tobytes()
        assert all(r == exp for r in res)
    finally:
        gen.set_num_threads(os.cpu_count() or 1)


@pytest.mark.parametrize("bad", [-1, "two", 1.5, np.array([1, 2]), True])
def test_set_num_threads_invalid(bad):
    try:
        with pytest.raises(gen.Error) as ei:
            gen.set_num_threads(bad)
        assert str(ei.value).strip()
    finally:
        gen.set_num_threads(os.cpu_count() or 1)


def test_gen_num_threads_env(tmp_path):
    code = WORKLOAD
    one = json.loads(run_py(code, tmp_path, GEN_NUM_THREADS="1").stdout)
    two = json.loads(run_py(code, tmp_path, GEN_NUM_THREADS="2").stdout)
    assert one["hashes"] == two["hashes"]


def test_empty_environment_values_are_unset(monkeypatch):
    """GEN_NUM_THREADS and GEN_LLC_BYTES of blanks: unset (the defaults); a digit that is not
    ASCII ('²', which str.isdigit accepts and int refuses): gen.Error naming it."""
    from gen import plan, runtime
    monkeypatch.setattr(runtime, "_threads", None)
    monkeypatch.setenv("GEN_NUM_THREADS", "  ")
    assert runtime.num_threads() == runtime._default_threads() >= 1
    monkeypatch.setenv("GEN_LLC_BYTES", " ")
    plan.llc_bytes.cache_clear()
    assert plan.llc_bytes() >= 0
    monkeypatch.setenv("GEN_LLC_BYTES", "\u00b2")
    plan.llc_bytes.cache_clear()
    raises_gen(plan.llc_bytes, "GEN_LLC_BYTES")
    monkeypatch.undo()
    plan.llc_bytes.cache_clear()


def test_thread_count_capped():
    """More threads than the OS will create would end the process (libgomp): capped."""
    from gen import runtime
    assert runtime.num_threads(10 ** 5) == runtime.MAX_THREADS
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    assert np.array_equal(gen.reorder(x, "cba", threads=10 ** 5).to_array(), x)


def test_primitive_attributes_are_read_only():
    """A primitive's plan was made for its descs and attributes: setting one raises
    gen.Error (also an AttributeError), and the primitive still runs its own problem."""
    md, up = gen.MemoryDesc((1, 4, 6), "f32"), gen.MemoryDesc((1, 4, 12), "f32")
    big = gen.MemoryDesc((64, 64, 64), "f32")
    prims = {"src_desc": gen.Reorder(md, gen.MemoryDesc((1, 4, 6), "f32", "acb")),
             "desc": gen.ShuffleChannels(md, group=2),
             "dst_desc": gen.Resample(md, up, alg="linear"),
             "alg": gen.ResampleBackward(up, md, alg="linear")}
    for name, p in prims.items():
        with pytest.raises(AttributeError):
            setattr(p, name, big)
        with pytest.raises(gen.Error, match=name):
            setattr(p, name, big)
    x = gen.Memory.from_array(np.arange(24, dtype=np.float32).reshape(1, 4, 6))
    y = prims["desc"](x, gen.Memory(md))
    assert np.array_equal(y.to_array(), np.arange(24.0).reshape(1, 2, 2, 6)
                          .transpose(0, 2, 1, 3).reshape(1, 4, 6))


def test_primitives_copy_and_pickle():
    """A copy, a deep copy or an unpickled primitive (made again from its arguments: its plan
    holds C objects, which pickle refused with TypeError) runs as the original does."""
    import copy
    import pickle
    md, up = gen.MemoryDesc((2, 19, 3, 5), "f32"), gen.MemoryDesc((2, 19, 7, 4), "f32")
    prims = [gen.Reorder(md, gen.MemoryDesc(md.dims, "s8", "nChw16c"), scales=[0.5] * 19,
                         scale_mask=2, dst_zero_point=3),
             gen.ShuffleChannels(md, axis=1, group=19, backward=True),
             gen.Resample(md, up, alg="linear"), gen.ResampleBackward(up, md, alg="linear")]
    for p in prims:
        src_desc = p.desc if isinstance(p, gen.ShuffleChannels) else p.src_desc
        dst_desc = p.desc if isinstance(p, gen.ShuffleChannels) else p.dst_desc
        x = gen.Memory.from_array(np.random.default_rng(5).standard_normal(src_desc.dims)
                                  .astype(np.float32), src_desc.format)
        want = bytes(p(x, gen.Memory(dst_desc)).data)
        for q in (copy.copy(p), copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
            assert type(q) is type(p) and q is not p and q.kernel == p.kernel
            assert bytes(q(x, gen.Memory(dst_desc)).data) == want
    # the arguments as they were: a list of scales changed since does not reach the copies
    scales = [0.5] * 19
    p = gen.Reorder(md, gen.MemoryDesc(md.dims, "s8", "nChw16c"), scales=scales, scale_mask=2)
    x = gen.Memory.from_array(np.ones(md.dims, np.float32))
    want = bytes(p(x, gen.Memory(p.dst_desc)).data)
    scales[:] = [100.0] * 19
    for q in (copy.copy(p), copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert bytes(q(x, gen.Memory(p.dst_desc)).data) == want
