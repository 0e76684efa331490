"""Measured dispatch: every kernel choice of a problem gives the same bits, `gen.tune` keeps
the fastest in the primitive and in the process's wisdom, and wisdom files round-trip (and are
refused when they come from another build or are not wisdom)."""
import json
import os
import re
import stat
import sys

import numpy as np
import pytest

import gen
from gen import plan, wisdom
from gen import export as export_module
from gen.ops import resample as resample_op

import reference as ref
from checks import raises_gen, run_py, src_memory

# Layout pairs whose pieces have several kernel kinds: tile / interleave / run / strided,
# a padded destination (zero pieces), a conversion with per-channel scales.
PAIRS = [((2, 16, 9, 7), "nchw", "nhwc"), ((2, 8, 9, 7), "nchw", "nChw8c"),
         ((2, 21, 6, 5), "nchw", "nChw16c"), ((3, 4, 5, 6), "nhwc", "nchw"),
         ((35, 19, 3, 3), "oihw", "OIhw16i16o"), ((4, 6, 5, 3), "nchw", "nchw"),
         ((11, 9, 5, 4, 16), "cbdea", "aBcde4b")]


@pytest.fixture(autouse=True)
def no_wisdom():
    gen.forget_wisdom()
    yield
    gen.forget_wisdom()


def _every_choice(problem, convert):
    """Every (kinds, stream, order) combination of a problem's pieces (stream None: as
    guessed), each with one of the tiles' prefetch modes in turn."""
    combos = [()]
    for options in plan.choices(problem, convert):
        combos = [c + (k,) for c in combos for k in options]
    # the prefetch mode of stream s and order o: (s + o) % 3, so that every pair of stream and
    # prefetch, and of order and prefetch, meets
    return [wisdom.Choice(kinds, stream, order, wisdom.PREFETCH[(s + o) % 3])
            for kinds in combos for s, stream in enumerate((None, 0, 1))
            for o, order in enumerate(wisdom.ORDERS)]


def _fields(candidate):
    """{"stream": ..., "order": ..., "prefetch": ...} of a candidate's name in tune's result."""
    return dict(part.split("=") for part in candidate.split()[1:])


@pytest.mark.parametrize("dims,src,dst", PAIRS)
@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64"])
def test_every_choice_gives_the_reference_bits(dims, src, dst, dtype):
    rng = np.random.default_rng(0)
    a = ref.random_bits(dims, np.dtype(dtype), rng)
    s = src_memory(a, src)
    want = ref.pack(a, dst, gen.MemoryDesc(dims, dtype, dst).nbytes)
    guess = gen.Reorder(s.desc, gen.MemoryDesc(dims, dtype, dst))._plan
    choices = _every_choice(guess.problem, guess.convert)
    assert len(choices) >= 2
    for choice in choices:
        p = plan.Plan(guess.problem, guess.traffic, guess.dst_nbytes, guess.convert, choice)
        for threads in (1, 2):
            out = gen.Memory(gen.MemoryDesc(dims, dtype, dst))
            out.data[:] = 0xA5
            p.run(s._addr, out._addr, threads)
            assert out.data.tobytes() == want.tobytes(), (choice, threads, p.kernel)


def test_every_choice_of_a_conversion_gives_the_same_bits():
    dims = (2, 20, 7, 9)
    a = np.random.default_rng(1).uniform(-300, 300, dims).astype(np.float32)
    s = gen.Memory.from_array(a, "nchw")
    scales = np.linspace(0.25, 2.0, 20).astype(np.float32)
    dst = gen.MemoryDesc(dims, "s8", "nChw16c")
    prim = gen.Reorder(s.desc, dst, scales=scales, scale_mask=2, dst_zero_point=3)
    want = prim(s, gen.Memory(dst)).data.tobytes()
    guess = prim._plan
    for choice in _every_choice(guess.problem, guess.convert):
        p = plan.Plan(guess.problem, guess.traffic, guess.dst_nbytes, guess.convert, choice)
        out = gen.Memory(dst)
        p.run(s._addr, out._addr, 2, prim._attr[0])
        assert out.data.tobytes() == want, (choice, p.kernel)


def _tuned(dims, src_tag, dst_tag, seed, repeat):
    """A tuned f32 reorder: (source array, its Memory, the destination descriptor, the
    primitive, tune's result)."""
    a = np.random.default_rng(seed).standard_normal(dims).astype(np.float32)
    s = gen.Memory.from_array(a, src_tag)
    dst = gen.MemoryDesc(dims, "f32", dst_tag)
    prim = gen.Reorder(s.desc, dst)
    return a, s, dst, prim, gen.tune(prim, threads=1, repeat=repeat)


def test_tune_keeps_a_measured_choice_and_the_bits():
    a, s, dst, prim, res = _tuned((4, 8, 28, 28), "nchw", "nChw8c", 2, 3)
    assert res["kernel"] == prim.kernel
    assert len(res["candidates"]) >= 3  # tile, interleave, strided (and streaming)
    assert all(t > 0 for t in res["candidates"].values())
    assert any(name.startswith(prim.kernel + " ") for name in res["candidates"])
    # the first candidate is the guess itself: streaming stores, loops and prefetches as guessed
    assert _fields(next(iter(res["candidates"]))) == {"stream": "auto", "order": "auto",
                                                      "prefetch": "auto"}
    out = prim(s, gen.Memory(dst))
    assert out.data.tobytes() == ref.pack(a, "nChw8c", dst.nbytes).tobytes()
    # wisdom: the functional call and a new primitive of the same problem take the choice
    assert gen.Reorder(s.desc, dst).kernel == prim.kernel
    assert gen.reorder(s, gen.Memory(dst)).data.tobytes() == out.data.tobytes()


def test_tune_times_the_other_loop_orders():
    """tune also times the loops in the destination's or the source's order where that is
    not the guess's: "abcd" -> "cbad" with runs along a guesses the source's order (see
    test_problem.test_loop_order_guess), so the destination's is the other candidate."""
    a, s, dst, prim, res = _tuned((6, 5, 7, 64), "abcd", "cbad", 4, 2)
    assert {_fields(name)["order"] for name in res["candidates"]} == {"auto", "dst"}
    assert np.array_equal(prim(s, gen.Memory(dst)).to_array(), a)


def test_tune_times_the_tiles_prefetches(monkeypatch):
    """tune also times the tiles with the prefetches the guess has not (none or some: see
    plan._tile_prefetch); the plans of the modes set the tile piece's prefetch field, and
    give the same bits. The tile is the only kind here, so that it is what tune keeps."""
    dims = (2, 64, 9, 9)
    a = np.random.default_rng(5).standard_normal(dims).astype(np.float32)
    s = gen.Memory.from_array(a, "nchw")
    dst = gen.MemoryDesc(dims, "f32", "nhwc")
    monkeypatch.setattr(plan, "choices", lambda *args, **kw: [["tile"]])
    prim = gen.Reorder(s.desc, dst)
    [(spec, fields)] = prim._plan.bound
    assert spec.kind == "tile"
    other = "off" if fields["prefetch"] else "on"
    res = gen.tune(prim, threads=1, repeat=2)
    assert {_fields(name)["prefetch"] for name in res["candidates"]} == {"auto", other}
    assert np.array_equal(prim(s, gen.Memory(dst)).to_array(), a)
    for mode, on in (("on", True), ("off", False)):
        p = plan.Plan(prim._plan.problem, prim._plan.traffic, prim._plan.dst_nbytes, None,
                      wisdom.Choice(("tile",), 0, "auto", mode))
        assert [f["prefetch"] > 0 for _, f in p.bound] == [on]
        out = gen.Memory(dst)
        p.run(s._addr, out._addr, 2)
        assert np.array_equal(out.to_array(), a), mode


def test_tune_keeps_the_guess_of_a_reorder_through_an_intermediate(monkeypatch):
    """A reorder whose blocks do not nest past GATHER_INDICES runs two plans
    (reorder.Staged): tune times that guess alone, keeps it and records no wisdom."""
    from gen.ops import reorder as reorder_op
    monkeypatch.setattr(reorder_op, "GATHER_INDICES", 4)
    a = np.random.default_rng(4).standard_normal((9, 5)).astype(np.float32)
    s = gen.Memory.from_array(a, "Ab4a")
    prim = gen.Reorder(s.desc, gen.MemoryDesc(a.shape, "f32", "Ab3a"))
    staged = prim._plan
    assert isinstance(staged, reorder_op.Staged)
    res = gen.tune(prim, repeat=2)
    assert prim._plan is staged and not wisdom._known
    assert res["kernel"] == prim.kernel
    assert list(res["candidates"]) == [prim.kernel + " stream=auto order=auto prefetch=auto"]
    assert np.array_equal(prim(s, gen.Memory(prim.dst_desc)).to_array(), a)


def test_tune_shuffle():
    desc = gen.MemoryDesc((2, 12, 5, 6), "f32", "nhwc")
    sh = gen.ShuffleChannels(desc, group=3)
    res = gen.tune(sh, repeat=2)
    assert res["kernel"] == sh.kernel
    a = np.random.default_rng(3).standard_normal(desc.dims).astype(np.float32)
    out = sh(gen.Memory.from_array(a, "nhwc"), gen.Memory(desc)).to_array()
    want = a.reshape(2, 3, 4, 5, 6).transpose(0, 2, 1, 3, 4).reshape(desc.dims)
    assert np.array_equal(out, want)


@pytest.mark.parametrize("alg", ["nearest", "linear"])
def test_tune_resampling(alg, tmp_path):
    """A resampling's choices are its streaming stores, on and off, and (linear) its source
    lines' prefetches the guess has not; each gives the same bits, the kept one is the
    primitive's, a new primitive's (wisdom) and another process's through a file."""
    src, dst = gen.MemoryDesc((1, 4, 16, 16), "f32", "nchw"), \
        gen.MemoryDesc((1, 4, 32, 32), "f32", "nchw")
    a = np.random.default_rng(6).standard_normal(src.dims).astype(np.float32)
    s = gen.Memory.from_array(a, "nchw")
    r = gen.Resample(src, dst, alg=alg)
    want = r(s, gen.Memory(dst)).data.tobytes()
    guess = r._plan
    res = gen.tune(r, repeat=2)
    fields = [_fields(name) for name in res["candidates"]]
    assert guess.tables.fields["stream"] == 0  # 16 KB: plain stores, so the other is tried
    assert {f["stream"] for f in fields} == {"auto", "1"}
    other = "off" if guess.tables.fields["prefetch"] else "on"
    assert {f["prefetch"] for f in fields} == ({"auto", other} if alg == "linear" else {"auto"})
    assert res["kernel"] == r.kernel and r._plan.choice is not None
    assert r(s, gen.Memory(dst)).data.tobytes() == want
    assert gen.Resample(src, dst, alg=alg)._plan.choice == r._plan.choice
    for stream in (None, 0, 1):
        for mode in wisdom.PREFETCH:
            p = resample_op.planned(guess.problem, guess.dst_nbytes,
                                    choice=wisdom.Choice((), stream, "auto", mode))
            assert p.tables.fields["stream"] == {None: 0, 0: 0, 1: plan.ANY_THREADS}[stream]
            if alg == "linear":
                assert p.tables.fields["prefetch"] == {"auto": guess.tables.fields["prefetch"],
                                                       "on": 1, "off": 0}[mode]
            for threads in (1, 2):
                out = gen.Memory(dst)
                p.run(s._addr, out._addr, threads)
                assert out.data.tobytes() == want, (stream, mode, threads)
    path = tmp_path / "w.json"
    assert gen.save_wisdom(path) == 1
    code = f"""
        import gen
        src, dst = gen.MemoryDesc((1, 4, 16, 16), "f32", "nchw"), gen.MemoryDesc((1, 4, 32, 32), "f32", "nchw")
        assert gen.Resample(src, dst, alg={alg!r})._plan.choice is None
        assert gen.load_wisdom({str(path)!r}) == 1
        print(tuple(gen.Resample(src, dst, alg={alg!r})._plan.choice))
    """
    assert run_py(code, tmp_path).stdout.strip() == str(tuple(r._plan.choice))


@pytest.mark.parametrize("threads,other", [(1, "0"), (2, "1")])
def test_tune_times_stores_that_differ_at_its_thread_count(monkeypatch, threads, other):
    """A guess that streams at one thread only (as plan._tile_stream_threads gives some
    tiles; a resampling's, patched in here) runs the code of `stream=1` at one thread and of
    `stream=0` at two: tune times the other setting only."""
    monkeypatch.setattr(plan, "stream_threads", lambda *args, **kw: 1)
    gen.forget_wisdom()  # no plan cached from before the patch
    r = gen.Resample(gen.MemoryDesc((1, 4, 16, 16), "f32", "nchw"),
                     gen.MemoryDesc((1, 4, 32, 32), "f32", "nchw"), alg="nearest")
    assert r._plan.tables.fields["stream"] == 1
    res = gen.tune(r, threads=threads, repeat=2)
    assert {_fields(name)["stream"] for name in res["candidates"]} == {"auto", other}


def test_resampling_stream_choice_only_where_the_kernel_streams():
    """Linear resampling streams f32 only: another type's plan keeps no streaming stores
    whatever the choice, so tune has nothing to time there."""
    src, dst = gen.MemoryDesc((1, 4, 16, 16), "bf16", "nchw"), \
        gen.MemoryDesc((1, 4, 32, 32), "bf16", "nchw")
    r = gen.Resample(src, dst, alg="linear")
    p = resample_op.planned(r._plan.problem, r._plan.dst_nbytes, choice=wisdom.Choice((), 1))
    assert p.tables.fields["stream"] == 0
    assert {_fields(name)["stream"] for name in gen.tune(r, repeat=1)["candidates"]} == {"auto"}


def test_export_takes_the_wisdom_of_this_tier():
    """An exported resampling's tables are those of this process's plan, tuned choice
    included (every tier's kernel reads the same tables)."""
    args = ("k", (1, 16, 40, 40), ("f32", "nchw"), "nearest", (80, 80))
    stores = re.compile(r"\.stream = (\d+)")
    assert stores.findall(export_module.render(export_module.resample_source(*args))[0]) \
        != [str(plan.ANY_THREADS)]
    r = gen.Resample(gen.MemoryDesc((1, 16, 40, 40), "f32", "nchw"),
                     gen.MemoryDesc((1, 16, 80, 80), "f32", "nchw"), alg="nearest")
    wisdom.record(r._plan.key(), wisdom.Choice((), 1))
    assert stores.findall(export_module.render(export_module.resample_source(*args))[0]) \
        == [str(plan.ANY_THREADS)]


def test_tune_bad_input():
    prim = gen.Reorder(gen.MemoryDesc((2, 3), "f32", "ab"), gen.MemoryDesc((2, 3), "f32", "ba"))
    raises_gen(lambda: gen.tune(42), "int")
    raises_gen(lambda: gen.tune(prim, repeat=0), "repeat")
    raises_gen(lambda: gen.tune(prim, repeat=True), "repeat")
    raises_gen(lambda: gen.tune(prim, threads=0), "threads")


def _force(prim, kind):
    """Records `kind` for the primitive's problem (a choice tune could make)."""
    p = prim._plan
    kinds = tuple(kind if kind in options else options[0]
                  for options in plan.choices(p.problem, p.convert))
    wisdom.record(p.key(), wisdom.Choice(kinds, 0))
    plan.cached.cache_clear()


def test_wisdom_file_round_trip(tmp_path):
    src, dst = gen.MemoryDesc((8, 64, 9, 9), "f32", "nchw"), \
        gen.MemoryDesc((8, 64, 9, 9), "f32", "nhwc")
    _force(gen.Reorder(src, dst), "strided")
    assert "strided" in gen.Reorder(src, dst).kernel
    path = tmp_path / "w.json"
    assert gen.save_wisdom(path) == 1
    gen.forget_wisdom()
    assert "tile" in gen.Reorder(src, dst).kernel
    code = f"""
        import gen
        src, dst = gen.MemoryDesc((8, 64, 9, 9), "f32", "nchw"), gen.MemoryDesc((8, 64, 9, 9), "f32", "nhwc")
        assert "tile" in gen.Reorder(src, dst).kernel
        assert gen.load_wisdom({str(path)!r}) == 1
        assert "strided" in gen.Reorder(src, dst).kernel, gen.Reorder(src, dst).kernel
        print("ok")
    """
    assert run_py(code, tmp_path).stdout.strip() == "ok"


def test_threads_save_wisdom_at_once(tmp_path):
    """Each save writes its own temporary file (they shared one per process: a thread's
    rename or clean-up took another's, FileNotFoundError) and renames it over the file."""
    import threading
    _force(gen.Reorder(gen.MemoryDesc((8, 64, 9, 9), "f32", "nchw"),
                       gen.MemoryDesc((8, 64, 9, 9), "f32", "nhwc")), "strided")
    path, failures = tmp_path / "w.json", []

    def saves():
        for _ in range(200):
            try:
                assert gen.save_wisdom(path) == 1
            except Exception as e:  # any failure, reported below
                failures.append(repr(e))
    threads = [threading.Thread(target=saves) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.json"]
    gen.forget_wisdom()
    assert gen.load_wisdom(path) == 1


def test_wisdom_file_keeps_the_loop_order(tmp_path):
    src, dst = gen.MemoryDesc((8, 64, 9, 9), "f32", "nchw"), \
        gen.MemoryDesc((8, 64, 9, 9), "f32", "nhwc")
    p = gen.Reorder(src, dst)._plan
    choice = wisdom.Choice(tuple(plan.choices(p.problem)[0][:1]), None, "src", "on")
    wisdom.record(p.key(), choice)
    assert gen.save_wisdom(tmp_path / "w.json") == 1
    gen.forget_wisdom()
    assert wisdom.lookup(p.key()) is None
    assert gen.load_wisdom(tmp_path / "w.json") == 1
    assert wisdom.lookup(p.key()) == choice
    # a file of a gen that did not choose prefetches (format 2): the guess
    data = json.loads((tmp_path / "w.json").read_text())
    assert data["format"] == wisdom.FORMAT == "gen wisdom 3"
    data["format"] = "gen wisdom 2"
    for entry in data["problems"].values():
        del entry["prefetch"]
    (tmp_path / "w.json").write_text(json.dumps(data))
    assert gen.load_wisdom(tmp_path / "w.json") == 1
    assert wisdom.lookup(p.key()) == choice._replace(prefetch="auto")


def test_wisdom_written_into_a_pipe(tmp_path):
    """A path that is a device or a pipe (/dev/stdout, /dev/null) is written into, not
    replaced by a file, as the rename of a temporary file would; a pipe nobody reads is an
    error, not a wait."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    raises_gen(lambda: gen.save_wisdom(fifo), "cannot write wisdom")
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert gen.save_wisdom(fifo) == 0
        got = os.read(reader, 1 << 16)
    finally:
        os.close(reader)
    assert json.loads(got)["format"] == wisdom.FORMAT
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_wisdom_files_that_are_refused(tmp_path):
    raises_gen(lambda: gen.load_wisdom(tmp_path / "missing.json"), "missing.json")
    bad = tmp_path / "bad.json"
    for text in ("not json", "[" * 100000 + "]" * 100000):  # deeper than Python recurses
        bad.write_text(text)
        raises_gen(lambda: gen.load_wisdom(bad), "JSON")
    bad.write_text(json.dumps({"format": "fftw"}))
    raises_gen(lambda: gen.load_wisdom(bad), "not gen wisdom")
    bad.write_text(json.dumps({"format": wisdom.FORMAT, "stamp": "0" * 32, "problems": {}}))
    raises_gen(lambda: gen.load_wisdom(bad), "another build")
    bad.write_text(json.dumps({"format": wisdom.FORMAT, "stamp": wisdom.stamp(),
                               "problems": {"k": {"kinds": 3}}}))
    raises_gen(lambda: gen.load_wisdom(bad), "malformed")
    bad.write_text(json.dumps({"format": wisdom.FORMAT, "stamp": wisdom.stamp(),
                               "problems": {"k": {"kinds": ["tile"], "stream": 0,
                                                  "order": "sideways"}}}))
    raises_gen(lambda: gen.load_wisdom(bad), "malformed")
    for entry in ({"kinds": "tile", "stream": 0, "order": "auto"},  # not read as 't', 'i', ...
                  {"kinds": ["tile"], "stream": float("inf"), "order": "auto"},  # int(inf)
                  {"kinds": [3], "stream": 0, "order": "auto"},
                  {"kinds": ["tile"], "stream": 0, "order": "auto", "prefetch": "sometimes"},
                  {"kinds": ["tile"], "stream": "on", "order": "auto"},
                  {"kinds": ["tile"], "stream": "1", "order": "auto"},
                  {"kinds": ["tile"], "stream": -5, "order": "auto"},
                  {"kinds": ["tile"], "stream": 2.9, "order": "auto"}):
        bad.write_text(json.dumps({"format": wisdom.FORMAT, "stamp": wisdom.stamp(),
                                   "problems": {"k": entry}}))
        raises_gen(lambda: gen.load_wisdom(bad), "malformed")
    raises_gen(lambda: gen.save_wisdom(tmp_path / "no" / "dir" / "w.json"), "cannot write")
    (tmp_path / "d").mkdir()
    raises_gen(lambda: gen.save_wisdom(tmp_path / "d"), "cannot write")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "d"]  # no temporary left


def test_wisdom_paths_that_are_not_file_names(tmp_path, monkeypatch):
    """None, a number (open() would take an int as a file descriptor, and close it) or an
    empty name: gen.Error naming the value, before any file is touched (save_wisdom(None)
    left a file 'None.<pid>.tmp'); bytes names work."""
    monkeypatch.chdir(tmp_path)
    for bad in (None, 1, True, 2.5, "", b"", "a\0b"):
        for fn in (gen.load_wisdom, gen.save_wisdom):
            raises_gen(lambda: fn(bad), repr(bad))
    assert list(tmp_path.iterdir()) == []
    name = bytes(tmp_path / "w.json")
    assert gen.save_wisdom(name) == gen.load_wisdom(name)


def test_wisdom_for_other_pieces_is_ignored():
    """A choice whose piece count does not fit the problem (a corrupted file) is not used."""
    src, dst = gen.MemoryDesc((2, 21, 6, 5), "f32", "nchw"), \
        gen.MemoryDesc((2, 21, 6, 5), "f32", "nChw16c")
    p = gen.Reorder(src, dst)._plan
    wisdom.record(p.key(), wisdom.Choice(("strided",) * 9, 1))
    plan.cached.cache_clear()
    q = gen.Reorder(src, dst)
    assert q._plan.choice is None and q.kernel == p.kernel


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16", "s8", "u8", "s32"])
def test_tune_times_on_written_sources(dtype):
    """tune's scratch source has every page written (an untouched buffer reads one shared
    zero page: a time from cache, not from memory) with finite, normal values."""
    m = sys.modules["gen.tune"]._scratch(gen.MemoryDesc((3, 5000), dtype))
    assert (m.data == 0x3C).all()
    values = m.to_array().astype(np.float64)
    assert np.isfinite(values).all() and (np.abs(values) > 1e-3).all()
