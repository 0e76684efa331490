"""Large tensors (issue 8, item 5).

* A u8 tensor of dims (2^31 + 11, 2): 2^32 + 22 elements (more than 2^31) and 4 GiB + 22 bytes
  (more than 4 GiB) on each side, reordered "ab" -> "ba" (every source and destination offset
  above 2^31 and 2^32 is reached) and back "ba" -> "ab".  The source holds the byte
  ``offset % 251``, so every expected value is known by formula: the result is checked at named
  indices (start, end, the middle, around offsets 2^31 and 2^32 on either side) and then in full,
  chunk by chunk, against a 66 MB pattern (no NumPy reference of the whole tensor is ever made).
  Needs about 8.6 GB: skipped, with the reason, only when /proc/meminfo's MemAvailable is less.
  The buffers are NumPy allocations wrapped by gen.Memory(desc, buffer=...) (NumPy asks the
  kernel for huge pages, so touching 8.6 GB the first time costs seconds, not tens of seconds).
* A 256 MiB reorder at 2 threads (f32 nchw -> nChw16c with padded channels, and u8 nchw ->
  nhwc), checked in full against NumPy transposes.
* Results and tables too large for memory (in a process whose address space is capped, so
  that no allocation can succeed by overcommit): gen.Error, not MemoryError.
"""
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import gen

R = 2 ** 31 + 11           # rows of the huge tensor; 2 columns
L = 251 * (1 << 18)        # chunk (a multiple of 251, ~66 MB)


def mem_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def need_memory(nbytes):
    avail = mem_available()
    if avail is None:
        pytest.skip("cannot read MemAvailable from /proc/meminfo; this test needs %.1f GiB"
                    % (nbytes / 2 ** 30))
    if avail < nbytes:
        pytest.skip("needs %.1f GiB of free memory, MemAvailable is %.1f GiB"
                    % (nbytes / 2 ** 30, avail / 2 ** 30))


def _pattern(j=0, step=1):
    """(step * k + j) % 251 for k in [0, L), as u8."""
    return ((np.arange(L, dtype=np.int64) * step + j) % 251).astype(np.uint8)


def _expected_ba(offsets):
    """Byte at offset o of the "ba" destination: logical (i, j) = (o % R, o // R), whose source
    byte sits at offset 2 i + j of the "ab" source and holds (2 i + j) % 251."""
    o = np.asarray(offsets, dtype=np.int64)
    i, j = o % R, o // R
    return ((2 * i + j) % 251).astype(np.uint8)


def _windows(total, centres, half=1 << 16):
    out = []
    for c in centres:
        lo, hi = max(0, c - half), min(total, c + half)
        if lo < hi:
            out.append(np.arange(lo, hi, dtype=np.int64))
    return np.concatenate(out)


def test_more_than_2_31_elements_and_4_gib_u8():
    sd = gen.MemoryDesc((R, 2), "u8", "ab")
    dd = gen.MemoryDesc((R, 2), "u8", "ba")
    n = sd.nbytes
    assert n == dd.nbytes == 2 * R and n > 4 * 2 ** 30 and R * 2 > 2 ** 31
    need_memory(2 * n + (600 << 20))
    t_start = time.perf_counter()

    sb = np.empty(n, np.uint8)
    db = np.empty(n, np.uint8)
    P = _pattern()
    for c in range(0, n, L):
        k = min(L, n - c)
        sb[c:c + k] = P[:k]
    src = gen.Memory(sd, buffer=sb)
    dst = gen.Memory(dd, buffer=db)
    assert np.shares_memory(np.asarray(src.data), sb)

    # ---- "ab" -> "ba": destination offset o = j * R + i <- source offset 2 i + j
    gen.reorder(src, dst)
    t_fwd = time.perf_counter()
    # named indices: dst offsets near the start, the end, the row boundary (j: 0 -> 1), 2^31,
    # 2^32; logical rows i whose source offsets 2i + j are near 2^31 and 2^32
    centres = [0, R, n, n // 2, 2 ** 31, 2 ** 32, 2 ** 30, R + 2 ** 30, 2 ** 31 - 1, R + R - 1,
               2 ** 32 - R, R + 2 ** 31 - 7]
    off = _windows(n, centres)
    got = db[off]
    want = _expected_ba(off)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, "dst offsets %s: got %s want %s" % (
        off[bad[:8]].tolist(), got[bad[:8]].tolist(), want[bad[:8]].tolist())
    # random samples over the whole buffer
    rnd = np.random.default_rng(0).integers(0, n, 1 << 20, dtype=np.int64)
    assert np.array_equal(db[rnd], _expected_ba(rnd))
    # in full, chunk by chunk: row j of the destination is (2 i + j) % 251 over i
    for j in (0, 1):
        Q = _pattern(j, step=2)
        row = db[j * R:(j + 1) * R]
        for c in range(0, R, L):
            k = min(L, R - c)
            if not np.array_equal(row[c:c + k], Q[:k]):
                b = np.flatnonzero(row[c:c + k] != Q[:k])
                raise AssertionError("dst row %d elements %s differ" % (j, (c + b[:8]).tolist()))
    assert np.array_equal(sb[:L], P), "source modified"
    assert np.array_equal(sb[n - 1000:], _pattern()[(n - 1000) % 251:(n - 1000) % 251 + 1000])

    # ---- back "ba" -> "ab" into the cleared source: the pattern again
    sb[:] = 0
    gen.reorder(dst, src, threads=2)
    off = _windows(n, [0, n, n // 2, 2 ** 31, 2 ** 32, R, 2 * R - 1])
    assert np.array_equal(sb[off], (off % 251).astype(np.uint8)), "back: named offsets differ"
    for c in range(0, n, L):
        k = min(L, n - c)
        if not np.array_equal(sb[c:c + k], P[:k]):
            b = np.flatnonzero(sb[c:c + k] != P[:k])
            raise AssertionError("back: src offsets %s differ" % ((c + b[:8]).tolist(),))
    t_end = time.perf_counter()
    print("huge u8 reorder: setup+forward %.1f s, total %.1f s" % (t_fwd - t_start,
                                                                     t_end - t_start))


def test_256_mib_reorder_two_threads_blocked_f32():
    dims = (4, 67, 491, 509)            # 255.5 MiB of f32; C = 67 padded to 80 in nChw16c
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2 ** 32, size=dims, dtype=np.uint32).view(np.float32)  # any bits
    assert a.nbytes > 255 * 2 ** 20
    dst = gen.Memory(gen.MemoryDesc(dims, "f32", "nChw16c"))
    np.asarray(dst.data)[:] = 0xA5
    out = gen.reorder(a, dst, threads=2)
    assert out is dst
    # independent formula: pad C to 80, split it into 5 x 16, move the 16 innermost
    pad = np.zeros((4, 80, 491, 509), np.uint32)
    pad[:, :67] = a.view(np.uint32)
    want = np.ascontiguousarray(pad.reshape(4, 5, 16, 491, 509).transpose(0, 1, 3, 4, 2))
    del pad
    got = np.asarray(dst.data).view(np.uint32).reshape(want.shape)
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)
        raise AssertionError("%d elements differ, first at %s" % (len(bad), bad[:5].tolist()))


def test_256_mib_reorder_two_threads_u8_transpose():
    dims = (2, 3, 6007, 7451)           # 256.1 MiB of u8, nchw -> nhwc with 3 channels
    rng = np.random.default_rng(2)
    a = rng.integers(0, 256, size=dims, dtype=np.uint8)
    src = gen.Memory.from_array(a, "nchw")
    before = bytes(src.data[:1 << 20]), bytes(src.data[-(1 << 20):])
    dst = gen.Memory(gen.MemoryDesc(dims, "u8", "nhwc"))
    gen.reorder(src, dst, threads=2)
    want = np.ascontiguousarray(a.transpose(0, 2, 3, 1)).reshape(-1)
    assert np.array_equal(np.asarray(dst.data), want)
    assert (bytes(src.data[:1 << 20]), bytes(src.data[-(1 << 20):])) == before


TOO_LARGE = textwrap.dedent("""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
    import numpy as np, gen
    def odd(rows):  # rows x 4 floats over 64 bytes: the rows at stride 0, the floats 1 byte apart
        return np.ndarray((rows, 4), np.float32, bytearray(64), 0, (0, 1))
    cases = {
        "resample result": lambda: gen.resample(np.zeros((1, 1, 4), np.float32),
                                                out_spatial=(10 ** 12,)),
        "shuffle result": lambda: gen.shuffle_channels(
            np.broadcast_to(np.float32(1), (2 ** 20, 2 ** 20)), group=2),
        "gather table": lambda: gen.ShuffleChannels(
            gen.MemoryDesc((1, 3 * 2 ** 36), "u8", "aB16b"), group=2 ** 36),
        "reorder tables": lambda: gen.Reorder(gen.MemoryDesc((3 * 2 ** 30, 2 ** 30), "u8"),
                                              gen.MemoryDesc((3 * 2 ** 30, 2 ** 30), "u8", "ba")),
        # sources of strides that are not multiples of the item size, read through a copy
        "odd strides copy": lambda: gen.reorder(odd(2 ** 40), "ab"),
        "odd strides shuffle": lambda: gen.shuffle_channels(odd(2 ** 33), axis=1, group=2),
    }
    for name, fn in cases.items():
        try:
            fn()
            print(name, "no error")
        except gen.Error as e:
            print(name, "gen.Error", e)
        except BaseException as e:
            print(name, type(e).__name__, e)
""")


def test_resample_tables_larger_than_the_memory_available_are_refused(monkeypatch):
    """Before they are built: their pages would be found missing only when touched (the
    kernel's out-of-memory killer then ends the process)."""
    from gen import runtime
    monkeypatch.setattr(runtime, "available_memory", lambda: 1 << 20)
    src = gen.MemoryDesc((1, 1, 2, 3), "f32")
    with pytest.raises(gen.Error, match=r"too large to plan: its tables need about \d+ bytes, "
                                        r"more than the 1048576 available"):
        gen.Resample(src, gen.MemoryDesc((1, 1, 1, 4099), "f32"), alg="linear")
    with pytest.raises(gen.Error, match="too large to plan"):
        gen.resample(np.zeros((1, 1, 2, 3), np.float32), out_spatial=(4099, 1))
    assert gen.Resample(src, gen.MemoryDesc((1, 1, 1, 1021), "f32"), alg="linear")
    # outer positions count too (three int64 each): N x C of 2**14 with a small spatial size
    with pytest.raises(gen.Error, match="too large to plan"):
        gen.Resample(gen.MemoryDesc((1, 1 << 14, 2, 3), "u8"),
                     gen.MemoryDesc((1, 1 << 14, 3, 3), "u8"))


def test_available_memory_reads_meminfo_swap_and_the_cgroup_limit(tmp_path):
    """MemAvailable and free swap, or the headroom under a memory cgroup's limit (v2 or v1)
    where less: in a container /proc/meminfo shows the host's memory."""
    from gen import runtime
    proc, groups = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text("MemTotal: 9000 kB\nMemAvailable: 1000 kB\nSwapFree: 500 kB\n")
    (proc / "self" / "cgroup").write_text("0::/box\n")
    assert runtime.available_memory(str(proc), str(groups)) == 1500 << 10  # no limit files
    (groups / "box").mkdir(parents=True)
    (groups / "box" / "memory.max").write_text("max\n")
    (groups / "box" / "memory.current").write_text("100\n")
    assert runtime.available_memory(str(proc), str(groups)) == 1500 << 10  # no limit
    (groups / "box" / "memory.max").write_text("4196\n")
    assert runtime.available_memory(str(proc), str(groups)) == 4096
    (proc / "self" / "cgroup").write_text("4:memory:/v1box\n3:cpu:/\n")
    (groups / "memory" / "v1box").mkdir(parents=True)
    (groups / "memory" / "v1box" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (groups / "memory" / "v1box" / "memory.usage_in_bytes").write_text("5\n")
    assert runtime.available_memory(str(proc), str(groups)) == 1500 << 10  # unlimited
    (groups / "memory" / "v1box" / "memory.limit_in_bytes").write_text("1005\n")
    assert runtime.available_memory(str(proc), str(groups)) == 1000
    (proc / "meminfo").unlink()
    assert runtime.available_memory(str(proc), str(groups)) == 1000
    (proc / "self" / "cgroup").unlink()
    assert runtime.available_memory(str(proc), str(groups)) is None


def test_too_large_for_memory_is_a_gen_error():
    r = subprocess.run([sys.executable, "-c", TOO_LARGE], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 6 and all(" gen.Error " in line for line in lines), r.stdout
