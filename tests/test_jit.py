"""Run-time specialisation (issue 7 item 1; issue 8 item 4: two processes building the same
specialised kernel at once both succeed).

Each test runs gen in a child process with GEN_JIT=1 and a temporary GEN_CACHE_DIR (the rest
of the suite runs with GEN_JIT=0, see conftest.py). A child runs each problem through a
primitive twice on the generic kernels (the second run asks for the build), waits with
`gen.jit_wait`, then runs the specialised module: its bytes (padding included) must equal the
generic ones, at 1 and 2 threads and on buffers next to a protected page, and the logical
result must equal the NumPy reference.
"""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import gen
from gen import jit
from checks import child_env, raises_gen, run_py

HERE = os.path.dirname(os.path.abspath(__file__))

# One problem per kernel kind the JIT inlines: the kernel the generic path picks for each, and
# the problem (a reorder from src to dst, a shuffle of a Memory, a resampling of one).
CASES = [
    ("reorder_run_e1", {"dims": [3, 50, 700], "src": ["f32", "abc"],
                        "dst": ["f32", [35200, 704, 1]]}),
    ("reorder_tile_e4", {"dims": [2, 48, 33, 35], "src": ["f32", "nchw"], "dst": ["f32", "nhwc"]}),
    ("reorder_strided_e4", {"dims": [2, 3, 61, 67], "src": ["f32", "nchw"],
                            "dst": ["f32", "nhwc"]}),
    ("reorder_interleave4_e1", {"dims": [2, 4, 61, 71], "src": ["u8", "nchw"],
                                "dst": ["u8", "nhwc"]}),
    ("reorder_run_zero_e1", {"dims": [40, 17, 3, 3], "src": ["f32", "oihw"],
                             "dst": ["f32", "OIhw16i16o"]}),
    ("reorder_tile_f32_s8", {"dims": [2, 40, 33, 35], "src": ["f32", "nchw"],
                             "dst": ["s8", "nChw16c"],
                             "attrs": {"scales": [0.5 + c / 8 for c in range(40)],
                                       "scale_mask": 2, "dst_zero_point": 3}}),
    ("reorder_strided_f32_bf16", {"dims": [2, 24, 33, 35], "src": ["f32", "nhwc"],
                                  "dst": ["bf16", "nchw"], "attrs": {"sum_scale": 0.5}}),
    ("reorder_run_u8_f32", {"dims": [2, 24, 33, 35], "src": ["u8", "nchw"],
                            "dst": ["f32", "nchw"],
                            "attrs": {"scales": [0.25], "src_zero_point": 7}}),
    ("reorder_interleave4_e4", {"dims": [2, 24, 29, 31], "shuffle": ["f32", "nhwc"],
                                "group": 4}),
    ("reorder_strided_e4", {"dims": [2, 116, 9, 11], "shuffle": ["f32", "nChw16c"],
                            "group": 2}),
    ("resample_linear_f32", {"dims": [2, 16, 30, 30], "resample": ["f32", "nchw"],
                             "alg": "linear", "out": [61, 45]}),
    ("resample_nearest_e4", {"dims": [2, 17, 30, 30], "resample": ["f32", "nChw8c"],
                             "alg": "nearest", "out": [45, 41]}),
    ("resample_linear_bf16", {"dims": [2, 16, 30, 30], "resample": ["bf16", "nhwc"],
                              "alg": "linear", "out": [13, 29], "backward": True}),
    ("reorder_run_f32_bf16", {"dims": [4, 32, 9, 10, 7], "src": ["f32", "aBcde8b"],
                              "dst": ["bf16", "aecdb"]}),  # runs of 8 along the source
    ("reorder_tile_f32_u8", {"dims": [60, 13, 4, 46], "src": ["f32", "aBcd8b"],
                             "dst": ["u8", "dbca"],  # 5 of 8 channels: short runs gathered
                             "attrs": {"scales": [0.5], "dst_zero_point": 3}}),
    ("resample_nearest_e4", {"dims": [2, 8, 20, 40], "resample": ["f32", "nchw"],
                             "alg": "nearest", "out": [41, 80]}),  # rows unrolled (AVX2)
]

CHILD = """
import json, sys, threading, time
sys.path.insert(0, {here!r})
import numpy as np, gen, guard, reference as ref, convert_reference as cref
import resample_reference as rref
from checks import desc

regions = []  # guarded buffers stay mapped

def memory(md, raw, where):
    if where is None:
        m = gen.Memory(md)
    else:
        m, region = guard.guarded_memory(md, where)
        regions.append(region)
    m.data[:] = raw
    return m

def raw_of(a, md, spec, rng):
    # a's bytes laid out as spec; the padding random, so that a kernel must zero it
    raw = rng.integers(0, 256, md.nbytes, dtype=np.uint8)
    packed = ref.pack(a, spec)
    lay = ref.make_layout(a.shape, spec)
    keep = ~np.repeat(ref.padding_mask(lay), a.dtype.itemsize)
    raw[:packed.size][keep] = packed[keep]
    return raw

def problem(case, rng):
    # (primitive, src desc and spec, dst desc and spec, logical src, old dst, check(got))
    dims = tuple(case["dims"])
    if "shuffle" in case:
        dt, spec = case["shuffle"]
        md = desc(dims, dt, spec)
        a = ref.random_bits(dims, cref.np_dtype(dt), rng)
        n, c, g = dims[0], dims[1], case["group"]
        want = a.reshape(n, g, c // g, -1).transpose(0, 2, 1, 3).reshape(dims)
        return (gen.ShuffleChannels(md, group=g), md, spec, md, spec, a, np.zeros_like(a),
                lambda got: ref.same_bits(got, want))
    if "resample" in case:
        dt, spec = case["resample"]
        big, small = dims, dims[:2] + tuple(case["out"])
        alg, backward = case["alg"], case.get("backward", False)
        sd, dd = (desc(small, dt, spec), desc(big, dt, spec)) if backward else \
            (desc(big, dt, spec), desc(small, dt, spec))
        a = rng.uniform(-4, 4, sd.dims).astype(cref.np_dtype(dt))
        prim = (gen.ResampleBackward if backward else gen.Resample)(sd, dd, alg=alg)
        if alg == "nearest" and not backward:
            return (prim, sd, spec, dd, spec, a, np.zeros(dd.dims, a.dtype),
                    lambda got: ref.same_bits(got, rref.nearest_gather(a, small[2:])))
        f = rref.backward if backward else rref.forward
        x, size = rref.to_f64(a), dd.dims[2:]
        want, scale = f(x, size, alg), f(np.abs(x), size, alg)
        tol = 2.0 ** -7 if dt == "bf16" else 1e-6  # API.md: one bf16 ulp, f32 relative 1e-6
        return (prim, sd, spec, dd, spec, a, np.zeros(dd.dims, a.dtype),
                lambda got: np.all(np.abs(rref.to_f64(got) - want) <= tol * (scale + 1e-30)))
    (st, spec), (dt, dspec) = case["src"], case["dst"]
    sd, dd = desc(dims, st, spec), desc(dims, dt, dspec)
    attrs = case.get("attrs", {{}})
    a = ref.random_bits(dims, cref.np_dtype(st), rng)
    old = ref.random_bits(dims, cref.np_dtype(dt), rng)
    want = cref.reference_reorder(a, dt, dst_old=old, **attrs)
    return (gen.Reorder(sd, dd, **attrs), sd, spec, dd, dspec, a, old,
            lambda got: cref.mismatches(got, want).size == 0)

def check(case, threads_meanwhile):
    rng = np.random.default_rng(len(case["dims"]) * 1000 + sum(case["dims"]))
    prim, sd, spec, dd, dspec, a, old, right = problem(case, rng)
    src_raw, dst_raw = raw_of(a, sd, spec, rng), raw_of(old, dd, dspec, rng)

    def call(threads, where=None):
        d = memory(dd, dst_raw, where)
        prim(memory(sd, src_raw, where), d, threads=threads)
        return d.data.tobytes()

    generic = call(1)
    assert call(2) == generic, "generic kernels: 2 threads differ from 1"
    stop, seen = threading.Event(), []

    def keep_calling():  # calls go on, from several threads, while the module is built
        while not stop.is_set():
            seen.append(call(2) == generic)
            time.sleep(0.002)

    ts = [threading.Thread(target=keep_calling) for _ in range(threads_meanwhile)]
    for t in ts:
        t.start()
    assert gen.jit_wait(120), "the build did not end"
    stop.set()
    for t in ts:
        t.join()
    assert all(seen), "a call during the build differs"
    kernel = prim.kernel
    for threads, where in ((1, None), (2, None), (2, "end"), (1, "start")):
        assert call(threads, where) == generic, (kernel, threads, where)
    got = ref.unpack(np.frombuffer(generic, np.uint8), dd.dims, dspec, a.dtype if "src" not in
                     case else cref.np_dtype(case["dst"][0]))
    assert right(got), (kernel, "differs from the reference")
    return kernel

cases = json.loads({cases!r})
print(json.dumps([check(case, 3 if i == 0 else 0) for i, case in enumerate(cases)]))
"""


def child(cases):
    return CHILD.format(here=HERE, cases=json.dumps([c for _, c in cases]))


def jit_env(cache, **extra):
    return dict(GEN_JIT="1", GEN_CACHE_DIR=str(cache), GEN_VERBOSE="2", **extra)


def verbose(stderr, event):
    """The GEN_VERBOSE lines of one jit event (built, loaded, failed)."""
    return [ln for ln in stderr.splitlines() if ln.startswith(f"gen_verbose,jit,{event},")]


def modules(cache):
    return sorted(p for p in os.listdir(cache) if p.endswith(".so"))


@pytest.mark.parametrize("tier", ["dispatched", "scalar"])
def test_specialised_equals_generic_and_reference(tmp_path, tier):
    """Every kernel kind (shuffles, conversions with scales and with sum, resampling): the
    specialised module gives the generic kernels' bytes and the reference's values."""
    cases = CASES if tier == "dispatched" else CASES[1:2] + CASES[5:6] + CASES[10:11]
    env = jit_env(tmp_path / "cache", **({"GEN_ISA": tier} if tier != "dispatched" else {}))
    p = run_py(child(cases), tmp_path, **env)
    kernels = json.loads(p.stdout)
    isa = tier if tier != "dispatched" else gen.isa()
    for (kind, _), kernel in zip(cases, kernels):
        assert kernel.startswith("jit:"), kernel
        assert f"{kind}_" in kernel and kernel.endswith(isa), (kind, kernel)
    # one module per problem, and one for a resampling's zero padding
    built = verbose(p.stderr, "built")
    assert len(built) >= len(cases) and not verbose(p.stderr, "failed"), p.stderr
    cache = tmp_path / "cache"
    assert sorted(os.listdir(cache)) == modules(cache) and len(modules(cache)) == len(built)


def test_specialised_tiles_spread_their_prefetches(tmp_path, cache_size):
    """Past the cache (GEN_LLC_BYTES=1; 2.4-2.5 MB, so that it streams), a tile that moves bytes
    in items of 32 rows or more and 4 column tiles or more prefetches the next item's rows
    spread over its column tiles in a specialised module (plan prefetch 2; the generic
    kernels fetch them at once): nhwc -> nchw storing whole lines (columns of 48x48 pixels)
    and staged (61x53, columns that start anywhere in a line: through the stage, or on
    avx512 their lines made in registers) give the generic kernels' bytes and the reference's
    values."""
    cases = [("reorder_tile_e4", {"dims": dims, "src": ["f32", "nhwc"], "dst": ["f32", "nchw"]})
             for dims in ([4, 64, 48, 48], [4, 48, 61, 53])]
    cache_size(1)
    for _, case in cases:
        dims = tuple(case["dims"])
        prim = gen.Reorder(gen.MemoryDesc(dims, "f32", case["src"][1]),
                           gen.MemoryDesc(dims, "f32", case["dst"][1]))
        assert [f["prefetch"] for _, f in prim._plan.bound] == [2], case
    assert [f["staged"] > 0 for _, f in prim._plan.bound] == [True]
    p = run_py(child(cases), tmp_path, **jit_env(tmp_path / "cache", GEN_LLC_BYTES="1"))
    assert all(k.startswith("jit:reorder_tile_e4") for k in json.loads(p.stdout)), p.stdout


def test_specialised_resampling_renders_the_row_steps_it_takes(tmp_path):
    """A specialised NCHW linear resampling renders only the 512-bit row steps its tables take
    (resample.Tables.row_steps): in rows of 28 (2x down) no row steps but 16 outputs at once
    straight from the source (fused), 16 outputs at once in rows of 80, 8 from 32 sources in
    2x up's backward; rows of 4 and 10 steps of 8 outputs unrolled whole (on AVX2); each gives
    the generic kernels' bytes and the reference's values."""
    cases = [("resample_linear_f32", {"dims": [2, 8, 30, 56], "resample": ["f32", "nchw"],
                                      "alg": "linear", "out": [15, 28]}),
             ("resample_linear_f32", {"dims": [2, 8, 20, 40], "resample": ["f32", "nchw"],
                                      "alg": "linear", "out": [41, 80]}),
             ("resample_linear_f32", {"dims": [2, 8, 14, 28], "resample": ["f32", "nchw"],
                                      "alg": "linear", "out": [28, 56], "backward": True})]
    tables = []
    for _, case in cases:
        dims, out = tuple(case["dims"]), tuple(case["dims"][:2]) + tuple(case["out"])
        src, dst = (out, dims) if case.get("backward") else (dims, out)
        prim = (gen.ResampleBackward if case.get("backward") else gen.Resample)(
            gen.MemoryDesc(src, "f32", "nchw"), gen.MemoryDesc(dst, "f32", "nchw"),
            alg="linear")
        tables.append(prim._plan.tables)
    assert [t.row_steps() for t in tables] == [
        {"steps16": False, "steps32": False, "fused": True, "row_unroll": 4},
        {"steps16": True, "steps32": False, "fused": False, "row_unroll": 10},
        {"steps16": False, "steps32": True, "fused": False, "row_unroll": 4}]
    p = run_py(child(cases), tmp_path, **jit_env(tmp_path / "cache"))
    kernels = json.loads(p.stdout)
    assert all(k.startswith("jit:resample_linear_f32") for k in kernels), p.stdout


def test_off_builds_nothing(tmp_path):
    code = """
    import numpy as np, gen
    md = gen.MemoryDesc((2, 48, 33, 35), "f32", "nchw")
    p = gen.Reorder(md, gen.MemoryDesc(md.dims, "f32", "nhwc"))
    s, d = gen.Memory(md), gen.Memory(p.dst_desc)
    for _ in range(4):
        p(s, d)
    assert gen.jit_wait(0) and not p.kernel.startswith("jit:"), p.kernel
    """
    p = run_py(code, tmp_path, **dict(jit_env(tmp_path / "cache"), GEN_JIT="0"))
    assert "jit" not in p.stderr
    assert not (tmp_path / "cache").exists()


def _start(cache, tmp_path):
    return subprocess.Popen([sys.executable, "-c", child(CASES[1:2])], cwd=str(tmp_path),
                            env=child_env(**jit_env(cache)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def two_builders(tmp_path_factory):
    """Two processes started together with one empty cache, building the same module."""
    tmp = tmp_path_factory.mktemp("two")
    procs = [_start(tmp / "cache", tmp) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    return tmp / "cache", [(p.returncode, out, err) for p, (out, err) in zip(procs, outs)]


def test_two_processes_build_the_same_module(two_builders):
    cache, results = two_builders
    for code, out, err in results:
        assert code == 0, err
        assert json.loads(out)[0].startswith("jit:"), out
        assert len(verbose(err, "built") + verbose(err, "loaded")) == 1, err
    assert sorted(os.listdir(cache)) == modules(cache) and len(modules(cache)) == 1


def test_second_process_loads_the_cache(two_builders, tmp_path):
    cache, _ = two_builders
    before = {n: os.stat(cache / n).st_mtime_ns for n in os.listdir(cache)}
    t0 = time.perf_counter()
    p = run_py(child(CASES[1:2]), tmp_path, **jit_env(cache))
    assert json.loads(p.stdout)[0].startswith("jit:")
    assert len(verbose(p.stderr, "loaded")) == 1 and not verbose(p.stderr, "built"), p.stderr
    assert {n: os.stat(cache / n).st_mtime_ns for n in os.listdir(cache)} == before
    assert time.perf_counter() - t0 < 30


@pytest.mark.parametrize("damage", ["cut", "flipped"])
def test_a_damaged_module_is_built_again(tmp_path, damage):
    """A cached module cut short (it ended the process with SIGBUS when loaded) or with bytes
    changed since it was built: the next process builds it again, with the right bytes."""
    cache = tmp_path / "cache"
    run_py(child(CASES[1:2]), tmp_path, **jit_env(cache))
    (name,) = modules(cache)
    data = bytearray((cache / name).read_bytes())
    if damage == "cut":
        data = data[:4096]
    else:
        data[len(data) // 2:len(data) // 2 + 64] = bytes(64)
    (cache / name).write_bytes(bytes(data))
    p = run_py(child(CASES[1:2]), tmp_path, **jit_env(cache))
    assert json.loads(p.stdout)[0].startswith("jit:") and len(verbose(p.stderr, "built")) == 1
    p = run_py(child(CASES[1:2]), tmp_path, **jit_env(cache))
    assert len(verbose(p.stderr, "loaded")) == 1, p.stderr


def test_a_relative_cache_folder(tmp_path):
    """GEN_CACHE_DIR relative to the process's directory (the build runs in another one: it
    failed there, and nothing was specialised)."""
    p = run_py(child(CASES[1:2]), tmp_path, **jit_env("rel/cache"))
    assert json.loads(p.stdout)[0].startswith("jit:") and not verbose(p.stderr, "failed")
    assert len(modules(tmp_path / "rel" / "cache")) == 1


@pytest.mark.parametrize("broken", ["compiler", "cache"])
def test_failed_build_leaves_calls_working(tmp_path, broken):
    """No compiler, or a cache folder that cannot be made: calls stay on the generic kernels
    (same bytes), the failure is a GEN_VERBOSE line, and nothing else reaches stderr."""
    cache = tmp_path / "cache"
    if broken == "cache":
        cache.write_text("a file where the folder should be")
    env = jit_env(cache, **({"CC": "/bin/false"} if broken == "compiler" else {}))
    p = run_py(child(CASES[1:2]), tmp_path, **env)
    assert not json.loads(p.stdout)[0].startswith("jit:")
    assert len(verbose(p.stderr, "failed")) == 1, p.stderr
    assert all(ln.startswith("gen_verbose,") for ln in p.stderr.splitlines()), p.stderr
    env.pop("GEN_VERBOSE")
    assert run_py(child(CASES[1:2]), tmp_path, **env).stderr == ""


def test_an_interrupted_build_removes_its_folder(tmp_path):
    """The builder (gen/jit_build.py, a child process) removes its private folder when it is
    interrupted in the compiler (Ctrl-C reaches the process group; the folder stayed, with
    the request, the log and the C source, since the parent's clean-up does not run as it
    exits)."""
    folder = tmp_path / ".build-x"
    folder.mkdir()
    slow_cc = tmp_path / "cc.sh"
    slow_cc.write_text("#!/bin/sh\nsleep 60\n")
    slow_cc.chmod(0o755)
    request = folder / "request.json"
    request.write_text(json.dumps({
        "name": "_gen_jit_stops", "cdef": "int f(void);", "source": "int f(void) { return 0; }",
        "cflags": [], "ldflags": [], "tmpdir": str(folder), "final": str(tmp_path / "m.so")}))
    proc = subprocess.Popen([sys.executable, str(jit.BUILDER), str(request)], cwd=folder,
                            env=dict(os.environ, CC=str(slow_cc)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(2)  # in the compiler
    os.killpg(proc.pid, 2)  # SIGINT, as Ctrl-C
    assert proc.wait(timeout=120) != 0
    assert not folder.exists() and not (tmp_path / "m.so").exists()


def test_a_build_past_the_timeout_ends_with_its_compiler(tmp_path, monkeypatch):
    """The builder runs in a session of its own (Ctrl-C to the caller's group does not stop a
    build that would finish); past BUILD_TIMEOUT its whole group is killed, the compiler too
    (it went on alone), and the build is a failure that leaves no folder."""
    slow_cc = tmp_path / "cc.sh"
    slow_cc.write_text(f"#!/bin/sh\necho $$ > {tmp_path / 'pid'}\nexec sleep 60\n")
    slow_cc.chmod(0o755)
    monkeypatch.setenv("CC", str(slow_cc))
    monkeypatch.setattr(jit, "BUILD_TIMEOUT", 3)
    cache = tmp_path / "cache"
    with pytest.raises(gen.Error, match="took more than 3 s"):
        jit._build("_gen_jit_slow", "int gen_jit_run(intptr_t s, intptr_t d, const void *a, "
                   "int n) { return 0; }", [], [], cache / "m.so")
    pid = int((tmp_path / "pid").read_text())
    for _ in range(50):  # reaped by init once killed
        if not os.path.exists(f"/proc/{pid}"):
            break
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}"), "the compiler outlived the build"
    assert list(cache.iterdir()) == []


def test_folders_of_killed_builds_are_swept(tmp_path):
    """A build folder older than two build timeouts (its processes were killed: no build
    lives that long) is removed by the next build into the cache; a recent one is not."""
    cache = tmp_path / "cache"
    stale, recent = cache / ".build-stale", cache / ".build-recent"
    for folder in (stale, recent):
        folder.mkdir(parents=True)
        (folder / "request.json").write_text("{}")
    old = time.time() - 2 * jit.BUILD_TIMEOUT - 60
    os.utime(stale, (old, old))
    p = run_py(child(CASES[1:2]), tmp_path, **jit_env(cache))
    assert json.loads(p.stdout)[0].startswith("jit:")
    assert not stale.exists() and recent.exists()


def test_plans_of_many_pieces_are_not_specialised(monkeypatch):
    """A module inlines each piece's kernel: a reorder between blocks that do not nest (a
    piece per channel) stays generic, where a nesting pair of the same size is specialised."""
    from gen.ops import reorder as reorder_op
    monkeypatch.setenv("GEN_JIT", "1")
    monkeypatch.setattr(reorder_op, "GATHER_INDICES", 1 << 10)  # gathered, not staged
    md = gen.MemoryDesc((1, 517, 8, 9), "f32", "aBcd4b")  # dims no other test plans
    many = gen.Reorder(md, gen.MemoryDesc(md.dims, "f32", "aBcd6b"))
    few = gen.Reorder(md, gen.MemoryDesc(md.dims, "f32", "aBcd8b"))
    assert len(many._plan.bound) > jit.MAX_PIECES and many._plan.jit.count is None
    assert len(few._plan.bound) <= jit.MAX_PIECES and few._plan.jit.count is not None


def test_bad_values(monkeypatch):
    monkeypatch.setenv("GEN_JIT", "yes")
    md = gen.MemoryDesc((3, 5, 67, 71), "f32", "nchw")  # a problem no other test plans
    raises_gen(lambda: gen.Reorder(md, gen.MemoryDesc(md.dims, "f32", "nhwc")), "GEN_JIT")
    for timeout in (-1, "1", True, float("nan")):
        raises_gen(lambda: gen.jit_wait(timeout), "timeout")
    assert gen.jit_wait(0) is True
