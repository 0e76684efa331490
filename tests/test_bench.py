"""`python cli.py bench`: options, the random group, the summary, the plot and the peers'
plumbing. Nothing here needs a peer: the real peers this interpreter has (oneDNN, PyTorch,
OpenVINO) run one tiny case each, and the ones it lacks must say why."""
import json
import sys

import numpy as np
import pytest

import gen
from gen import bench, bench_cases, bench_plot, peers, wisdom
from gen.cli import main
from gen.peers import onednn, sycl

QUICK = ["bench", "--min-time", "0", "--repeat", "1", "--threads", "1", "--random", "0"]
TINY = "f32 nchw->nhwc 1x3x224x224"


def run_bench(capsys, *argv):
    status = main(QUICK + list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("argv,message", [
    (["--threads", "0"], "bad --threads '0'"),
    (["--threads", "1,x"], "bad --threads '1,x'"),
    (["--random", "-1"], "bad --random -1"),
    (["--seed", "-1", "--random", "2"], "bad --seed -1"),
    (["--threads", "1,1"], "bad --threads '1,1'"),  # rows twice
    (["--threads", "100000"], "bad --threads '100000'"),  # run on 1024, labelled 100000
    (["--min-time", "inf"], "bad --min-time inf"),  # never ended
    (["--min-time", "nan"], "bad --min-time nan"),
    (["--repeat", "0"], "--repeat 0"),
    (["--min-time", "1e308"], "bad --min-time 1e+308"),  # bounds: runs of days otherwise
    (["--repeat", "10000000000000000000000"], "--repeat 10000000000000000000000"),
    (["--random", "100000000000", "--list"], "bad --random 100000000000"),  # all the memory
    (["no such case"], "no case matches no such case"),
    (["--", "-1x"], "no case matches -1x"),  # a case after "--" (not joined to an option)
])
def test_bad_options_are_one_line(capsys, argv, message):
    status, out, err = run_bench(capsys, *argv)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and message in err


@pytest.mark.parametrize("option", ["--json", "--plot"])
def test_unwritable_output_is_one_line_before_the_run(capsys, monkeypatch, tmp_path, option):
    monkeypatch.setattr(bench, "time_cases", None)  # the run must not start
    monkeypatch.setattr(bench_plot, "check", lambda: None)  # matplotlib or not
    for path in (tmp_path / "no" / "such" / "dir" / "b.out", tmp_path):
        status, out, err = run_bench(capsys, option, str(path), TINY)
        assert status == 2 and out == "" and err.count("\n") == 1, err
        assert option in err and str(path) in err


def test_a_failed_run_leaves_no_json_file(capsys, tmp_path):
    """The --json path is checked before the run, then removed where it was new: a run that
    stops on another bad option leaves nothing behind; a file that was there stays as it was."""
    path = tmp_path / "b.json"
    status, _, err = run_bench(capsys, "--json", str(path), "no such case")
    assert status == 2 and "no case matches" in err and not path.exists()
    path.write_text("kept")
    assert run_bench(capsys, "--json", str(path), "no such case")[0] == 2
    assert path.read_text() == "kept"


def test_plot_without_matplotlib_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    status, out, err = run_bench(capsys, "--plot", str(tmp_path / "b.png"), TINY)
    assert status == 2 and out == "" and err.count("\n") == 1 and "needs matplotlib" in err
    assert not (tmp_path / "b.png").exists()


def test_random_group_is_fixed_by_the_seed():
    a, b = bench_cases.random_cases(20, 0), bench_cases.random_cases(20, 0)
    assert [c.name for c in a] == [c.name for c in b]
    assert [c.name for c in bench_cases.random_cases(20, 1)] != [c.name for c in a]
    assert [c.name[:7] for c in a] == ["rand%02d " % i for i in range(20)]
    lo, hi = (m << 20 for m in bench_cases.RANDOM_MIB)
    moves, plain = set(), set()
    for case in a:
        _, (dims, src_tag, dst_tag, src_dt, dst_dt), attrs = case.onednn
        src = gen.MemoryDesc(dims, src_dt, src_tag)
        assert lo <= src.nelems * src.itemsize <= hi and src_tag != dst_tag
        # gen plans every pair it draws (creating the primitive allocates nothing)
        gen.Reorder(src, gen.MemoryDesc(dims, dst_dt, dst_tag),
                    scales=attrs.get("src_scales"), dst_zero_point=attrs.get("dst_zp", 0))
        moves.add(src_dt == dst_dt)
        plain |= {src.is_plain, gen.MemoryDesc(dims, dst_dt, dst_tag).is_plain}
    assert moves == plain == {True, False}  # moves and conversions, plain and blocked layouts


def test_list_includes_the_random_group(capsys):
    status = main(["bench", "--list", "--random", "2", "--seed", "5"])
    names = capsys.readouterr().out.splitlines()
    assert status == 0 and len(names) == len(bench_cases.CASES) + 2
    assert names[-2].startswith("rand00 ") and names[-1].startswith("rand01 ")


def test_short_run_writes_json_and_summary(capsys, tmp_path):
    path = tmp_path / "b.json"
    status, out, err = run_bench(capsys, "--json", str(path), TINY)
    assert status == 0
    doc = json.loads(path.read_text())
    (row,) = doc["rows"]
    assert row["case"] == TINY and row["threads"] == 1 and row["us"] > 0
    assert row["bytes_read"] == row["bytes_written"] == 3 * 224 * 224 * 4
    assert row["ratio"] == pytest.approx(row["gbps"] / row["copy_gbps"])
    (s,) = doc["summary"]
    assert s["min_ratio"] == row["ratio"] and s["dram_cases"] == 0  # 1.2 MB moved
    assert out.splitlines()[-1].startswith("# summary, 1 thread: ratio to copy min ")


def test_tuned_run_times_the_measured_choice(capsys, tmp_path):
    """--tune: each row's primitive is tuned at its thread count first (its wisdom recorded
    in this process), and the rows and the header say so."""
    gen.forget_wisdom()
    path = tmp_path / "b.json"
    try:
        status, out, err = run_bench(capsys, "--tune", "--threads", "1,2", "--json", str(path),
                                     TINY)
        assert status == 0
        assert [(r["threads"], r.get("tuned")) for r in json.loads(path.read_text())["rows"]] \
            == [(1, True), (2, True)]
        assert out.startswith("# gen bench: isa ") and out.splitlines()[0].endswith(", tuned")
        assert len(wisdom._known) == 1
    finally:
        gen.forget_wisdom()


def test_tuning_that_fails_is_a_note(capsys, monkeypatch):
    """A case whose tune fails (gen.Error) is timed as guessed, noted, and the run's status
    is 1, as for a case gen skips."""
    def refuse(prim, threads=None):
        raise gen.Error("no scratch memory")
    monkeypatch.setattr(gen, "tune", refuse)
    status, out, err = run_bench(capsys, "--tune", TINY)
    assert status == 1 and "not tuned: " + TINY in err and "no scratch memory" in err
    assert TINY in out


def row(case, threads, ratio, mib, **vs):
    r = {"case": case, "threads": threads, "ratio": ratio, "bytes_read": mib << 19,
         "bytes_written": mib << 19}
    r.update({"vs_" + p: v for p, v in vs.items()})
    return r


def test_summary_medians_and_minimums(capsys):
    rows = [row("a", 1, 0.9, 64, onednn=2.0, torch=1.5), row("b", 1, 0.5, 1, torch=3.0),
            row("c", 1, 1.1, 32), row("d", 1, 0.8, 16, onednn=0.7),
            {"case": "skipped", "threads": 1, "onednn_us": 1.0}]
    (s,) = bench.summary(rows, [1], ["onednn", "torch"])
    assert s["dram_cases"] == 3 and s["median_ratio_dram"] == 0.9
    assert (s["min_ratio"], s["min_ratio_case"]) == (0.5, "b")
    # best peer per case: a 1.5 (torch), b 3.0, d 0.7 (onednn)
    assert s["peer_cases"] == 3 and s["median_vs_best_peer"] == 1.5
    assert (s["min_vs_best_peer"], s["min_vs_best_peer_case"], s["min_vs_best_peer_peer"]) \
        == (0.7, "d", "onednn")
    bench.print_summary([s])
    assert capsys.readouterr().out == (
        "# summary, 1 thread: ratio to copy median 0.90 over 3 DRAM-sized cases (>= 16 MiB "
        "moved), min 0.50 (b); vs best peer median 1.50x, min 0.70x (d, onednn) over 3 cases\n")


def test_plot_draws_or_says_what_is_missing(tmp_path):
    rows = [dict(row("a", n, 0.9, 64, fake=2.0), gbps=10.0 * n, copy_gbps=12.0 * n,
                 fake_gbps=5.0) for n in (1, 2)]
    try:
        bench_plot.check()
    except ValueError as e:
        assert "pip install matplotlib" in str(e)
        return
    bench_plot.plot(rows, [1, 2], ["fake"], str(tmp_path / "b.png"), "title")
    assert (tmp_path / "b.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------- peers
class NumpyPeer:
    """A peer doing reorders with NumPy: right, or wrong by one element when `wrong`."""
    name = label = "numpy"

    def __init__(self, wrong=False, error=None):
        self.wrong, self.error, self.threads = wrong, error, []

    def set_threads(self, n):
        self.threads.append(n)

    def prepare(self, job):
        if self.error:
            raise self.error
        if job.op != "reorder":
            raise peers.Unsupported("reorders only")
        x = job.src.to_array()
        out = x.copy()
        out.flat[0] += self.wrong

        def run():
            out[...] = x
            out.flat[0] += self.wrong
        return peers.Prepared(run, lambda: out, "numpy")


def tiny_job():
    return bench_cases.reorder_case((2, 37, 5, 7), "nchw", "nChw16c").make()


def test_checked_accepts_the_same_result_and_refuses_another():
    job = tiny_job()
    assert peers.checked(NumpyPeer(), job).impl == "numpy"
    with pytest.raises(peers.Mismatch, match="at 1 of 2590 elements, by up to 1"):
        peers.checked(NumpyPeer(wrong=True), job)


def test_checked_tolerates_rounding_only_where_the_job_is_not_exact():
    job = bench_cases.resample_case((1, 2, 6, 6), True, "linear", "nchw").make()
    job.run()
    want = job.dst.to_array()

    class Rounding(NumpyPeer):
        def prepare(self, job):
            out = want * np.float32(1 + self.wrong)
            return peers.Prepared(lambda: None, lambda: out, "rounding")
    peers.checked(Rounding(1e-6), job)
    with pytest.raises(peers.Mismatch):
        peers.checked(Rounding(1e-3), job)
    with pytest.raises(peers.Mismatch):
        peers.checked(Rounding(1e-6), job._replace(exact=True))


def test_ready_peers_drops_unsupported_silently_and_notes_failures(capsys):
    job = tiny_job()
    good = NumpyPeer()
    ps = [good, NumpyPeer(error=peers.Unsupported("no")), NumpyPeer(wrong=True),
          NumpyPeer(error=RuntimeError("library says no"))]
    ready = bench.ready_peers(ps, job, "tiny", 2)
    assert list(ready) == ["numpy"] and good.threads == [2]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "Mismatch: result differs" in err[0]
    assert err[1] == "bench: numpy peer, tiny, 2 threads: RuntimeError: library says no"


def test_bench_run_with_an_in_process_peer(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(peers, "available", lambda note: [NumpyPeer()])
    monkeypatch.setenv("PEERS_VENV", str(tmp_path / "none"))
    path = tmp_path / "b.json"
    status, out, err = run_bench(capsys, "--peers", "--json", str(path), TINY)
    assert status == 0 and "onednn_sycl peer unavailable" in err
    lines = out.splitlines()
    assert lines[1] == "# numpy: numpy" and "vs numpy" in lines[2]
    (r,) = json.loads(path.read_text())["rows"]
    assert r["vs_numpy"] == pytest.approx(r["numpy_us"] / r["us"]) and r["numpy_impl"] == "numpy"
    assert r["numpy_gbps"] > 0
    assert "vs best peer median" in lines[-1]


def test_missing_peers_say_why(monkeypatch, tmp_path):
    monkeypatch.setenv("GEN_ONEDNN_LIB", str(tmp_path / "libdnnl.so.3"))
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "openvino", None)
    notes = []
    assert peers.available(notes.append) == []
    assert [n.split(":")[0] for n in notes] == ["%s peer unavailable" % m for m in peers.MODULES]
    assert "cannot load %s" % (tmp_path / "libdnnl.so.3") in notes[0]
    assert "cannot import torch" in notes[1] and "cannot import openvino" in notes[2]


def test_subprocess_peer_missing_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv("PEERS_VENV", str(tmp_path))
    notes = []
    assert sycl.start([1], notes.append) is None
    assert len(notes) == 1 and notes[0].startswith("onednn_sycl peer unavailable: ")


# A stand-in for ../shared/peers/onednn/dnnl.py: the subprocess peer's protocol without oneDNN.
# Its op counts its runs in a file per thread count and prints a line of its own on stdout, as
# DNNL_VERBOSE does; a reorder to "bad" fails to build; its FAKE_EXIT_AT-th run ends the
# process, its FAKE_RAISE_AT-th run fails, its FAKE_HANG_AT-th run never returns.
FAKE_DNNL = """
import os, time
class _Op:
    impl = "fake impl"
    runs = 0
    def run(self):
        time.sleep(1e-4)
        print("fake verbose line")
        _Op.runs += 1
        with open(os.environ["FAKE_RUNS"] + os.environ["DNNL_PEER_NTHR"], "a") as f:
            f.write("x")
        if _Op.runs == int(os.environ.get("FAKE_EXIT_AT", 0)):
            os._exit(3)
        if _Op.runs == int(os.environ.get("FAKE_RAISE_AT", 0)):
            raise RuntimeError("execute failed")
        if _Op.runs == int(os.environ.get("FAKE_HANG_AT", 0)):
            time.sleep(3600)
def _reorder(dims, src_tag, dst_tag, *args, **kw):
    if dst_tag == "bad":
        raise ValueError("could not create a reorder to bad")
    return _Op()
_PREP = {"reorder": _reorder}
"""


@pytest.fixture
def fake_v313(monkeypatch, tmp_path):
    """PEERS_VENV and GEN_PEERS_DIR of the stand-in; returns the path its runs are counted at
    (plus the thread count)."""
    (tmp_path / "peers" / "onednn").mkdir(parents=True)
    (tmp_path / "peers" / "onednn" / "dnnl.py").write_text(FAKE_DNNL)
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\nexec "%s" "$@"\n' % sys.executable)
    python.chmod(0o755)
    monkeypatch.setenv("PEERS_VENV", str(tmp_path / "venv"))
    monkeypatch.setenv("GEN_PEERS_DIR", str(tmp_path / "peers"))
    monkeypatch.setenv("FAKE_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(peers, "available", lambda note: [])
    monkeypatch.setattr(bench, "busy_cpus", lambda: 0)  # no load note: stderr is exact
    return str(tmp_path / "runs")


def test_subprocess_peer_is_timed_in_gen_rounds(capsys, tmp_path, fake_v313):
    path = tmp_path / "b.json"
    status, out, err = run_bench(capsys, "--peers", "--threads", "1,2", "--json", str(path), TINY)
    assert status == 0 and err == ""
    rows = json.loads(path.read_text())["rows"]
    assert [r["threads"] for r in rows] == [1, 2]
    for r in rows:
        assert r["onednn_sycl_impl"] == "fake impl" and r["onednn_sycl_us"] >= 100
        assert r["vs_onednn_sycl"] == pytest.approx(r["onednn_sycl_us"] / r["us"])
    # each thread count's own process ran rounds: a warm-up and timed calls, > 1 each
    for n in (1, 2):
        assert len(open(fake_v313 + str(n)).read()) > 2


def two_cases(monkeypatch, bad_first):
    """Two small reorders as the bench's cases; with bad_first the first one's peer spec has a
    destination the stand-in cannot build."""
    good = bench_cases.reorder_case((2, 3, 4, 5), "nchw", "nhwc")
    other = bench_cases.reorder_case((2, 3, 4, 5), "nchw", "bad" if bad_first else "nhwc")
    first = other._replace(make=good.make, name="first " + good.name)
    monkeypatch.setattr(bench_cases, "CASES", [first, good])
    return first, good


def test_subprocess_peer_failures_are_notes(capsys, monkeypatch, tmp_path, fake_v313):
    bad, good = two_cases(monkeypatch, bad_first=True)
    monkeypatch.setenv("FAKE_EXIT_AT", "3")
    path = tmp_path / "b.json"
    status, out, err = run_bench(capsys, "--peers", "--json", str(path))
    rows = json.loads(path.read_text())["rows"]
    # the case it cannot build, then the process ending in the next case's rounds: gen's
    # times stand, without the peer's
    assert status == 0 and len(rows) == 2 and not any("onednn_sycl_us" in r for r in rows)
    lines = err.splitlines()
    assert lines[0] == ("bench: onednn_sycl peer, %s, 1 threads: ValueError: could not "
                        "create a reorder to bad" % bad.name)
    assert lines[1] == "bench: onednn_sycl peer failed at 1 threads (exit 3): fake verbose line"
    assert lines[2].startswith("bench: %s, 1 threads: timed again without onednn_sycl" % good.name)
    assert len(lines) == 3


def test_subprocess_peer_that_hangs_is_killed_and_noted(capsys, monkeypatch, tmp_path,
                                                        fake_v313):
    first, good = two_cases(monkeypatch, bad_first=False)
    monkeypatch.setenv("FAKE_HANG_AT", "2")
    monkeypatch.setattr(sycl, "REPLY_S", 1)
    path = tmp_path / "b.json"
    status, out, err = run_bench(capsys, "--peers", "--json", str(path))
    rows = json.loads(path.read_text())["rows"]
    assert status == 0 and len(rows) == 2 and not any("onednn_sycl_us" in r for r in rows)
    assert err.splitlines() == [
        "bench: onednn_sycl peer failed at 1 threads (no reply within 1 s): fake verbose line",
        "bench: %s, 1 threads: timed again without onednn_sycl (its process is gone)" % first.name]


def test_subprocess_peer_error_in_a_round_drops_that_case_only(capsys, monkeypatch, tmp_path,
                                                                fake_v313):
    first, good = two_cases(monkeypatch, bad_first=False)
    monkeypatch.setenv("FAKE_RAISE_AT", "2")
    path = tmp_path / "b.json"
    status, out, err = run_bench(capsys, "--peers", "--json", str(path))
    rows = json.loads(path.read_text())["rows"]
    assert status == 0 and "onednn_sycl_us" not in rows[0] and rows[1]["onednn_sycl_us"] > 0
    assert err == ("bench: %s, 1 threads: timed again without onednn_sycl (RuntimeError: "
                   "execute failed)\n" % first.name)


def test_onednn_library_path(monkeypatch):
    monkeypatch.setenv("GEN_ONEDNN_LIB", "/some/libdnnl.so")
    assert onednn.library_path() == "/some/libdnnl.so"


TINY_CASES = [bench_cases.reorder_case((2, 37, 5, 7), "nchw", "nhwc"),
              bench_cases.reorder_case((2, 37, 5, 7), "nchw", "nChw16c", "f32", "s8",
                                       scales=[25.0]),
              bench_cases.reorder_case((2, 8, 5, 7), "nchw", "nchw", "s8", "f32", scales=[0.04],
                                       src_zero_point=3),
              bench_cases.shuffle_case((2, 12, 3, 5), 3, "nhwc"),
              bench_cases.resample_case((2, 8, 6, 10), False, "nearest", "nhwc"),
              bench_cases.resample_case((2, 8, 6, 10), True, "linear", "nchw", backward=True)]


@pytest.mark.parametrize("case", TINY_CASES, ids=lambda c: c.name)
def test_real_peers_agree_with_gen_on_a_tiny_case(case):
    """Each peer this interpreter has does the case like gen (or has no equivalent of it) at 1
    and 2 threads; each one it lacks says why."""
    notes = []
    found = peers.available(notes.append)
    assert len(found) + len(notes) == len(peers.MODULES)
    job = case.make()
    for peer in found:
        for n in (1, 2):
            try:
                peer.set_threads(n)
                prepared = peers.checked(peer, job)
            except peers.Unsupported:
                # oneDNN has every case of the list (a sequential build at 1 thread only)
                assert peer.name != "onednn" or n > 1
                continue
            assert prepared.impl
