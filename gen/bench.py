"""`python cli.py bench`: time gen's kernels against a memory copy of the same traffic.

Every case (bench_cases.py: the fixed cases of the op issues, then `--random N` reorders drawn
with `--seed`) runs through its reusable primitive (creation excluded). Per case and thread
count the table gives the kernel chosen, the median time of many calls, GB/s = (bytes read +
bytes written) / time and the ratio to the copy ceiling: gen's own chunked multi-threaded
memcpy (a u8 -> u8 reorder of B = (read + written) // 2 bytes, GB/s = 2B / time). A case gen
refuses (gen.Error) is skipped with a note on stderr and exit status 1 (a case whose `--tune`
fails is timed as guessed, with a note and status 1).

`--peers` adds, per peer, its median time and "vs PEER" = peer time / gen time (> 1: gen is
faster): the in-process peers (gen/peers/: oneDNN, PyTorch, OpenVINO, each when this
interpreter has it) run on gen's own source buffer, are checked against gen's result first
(peers.checked) and are timed in the same rounds as gen and the copy, so drift hits all alike;
so is oneDNN v3.13, which runs in subprocesses (peers/sycl.py). A missing peer is a note on
stderr.

The closing summary, per thread count: the median ratio to copy over the DRAM-sized cases
(bytes moved >= DRAM_MIB), the lowest ratio of any case, and gen's speedup over the fastest
peer of each case (median, lowest).
"""
import json
import math
import os
import platform
import statistics
import sys
import time

import numpy as np

import gen

from . import bench_cases, peers, runtime
from .peers import sycl

WARM_S = 0.03         # untimed calls at the start of each round
ROUND_S = 0.05        # timed calls per round before switching to the next function
DRAM_MIB = 16         # bytes moved from which a case counts as DRAM-sized: past the L2s
MAX_RANDOM, MAX_MIN_TIME, MAX_REPEAT = 10000, 3600, 10 ** 6  # the options' bounds


def note(text):
    print("bench: " + text, file=sys.stderr)


def copy_ceiling(nbytes):
    """run_fn for the copy ceiling: gen's plain u8 -> u8 reorder (a chunked memcpy) of nbytes."""
    md = gen.MemoryDesc((nbytes,), "u8")
    prim, src, dst = gen.Reorder(md, md), gen.Memory(md), gen.Memory(md)
    src.data[:] = np.random.default_rng(1).integers(0, 256, nbytes, dtype=np.uint8)
    return lambda: prim(src, dst)


def local_round(fn):
    """The round of a function of this process: WARM_S seconds of untimed calls (a big working
    set needs several passes to settle in cache after another fn evicted it), then ROUND_S of
    timed calls, whose seconds it returns."""
    def round_(warm_s, round_s):
        clock = time.perf_counter
        end = clock() + warm_s
        while clock() < end:
            fn()
        samples, end = [], clock() + round_s
        while clock() < end:
            t0 = clock()
            fn()
            samples.append(clock() - t0)
        return samples
    return round_


def median_times(rounds, min_time, repeat):
    """Median seconds per call of each round function (local_round, or a subprocess peer's):
    they take turns, a round each, until every one has `repeat` timed calls and `min_time`
    seconds of them."""
    samples = [[] for _ in rounds]
    while any(len(s) < repeat or sum(s) < min_time for s in samples):
        for round_, s in zip(rounds, samples):
            s += round_(WARM_S, ROUND_S)
    return [statistics.median(s) for s in samples]


def ready_peers(in_process, job, case, n):
    """{peer name: Prepared} of the in-process peers that do `job` at n threads and agree with
    gen; a peer that fails (other than having no equivalent) is a note."""
    ready = {}
    for peer in in_process:
        try:
            peer.set_threads(n)
            ready[peer.name] = peers.checked(peer, job)
        except peers.Unsupported:
            pass
        except Exception as e:  # any library's error: that peer gets no time for this case
            note("%s peer, %s, %d threads: %s: %s" % (peer.name, case, n, type(e).__name__, e))
    return ready


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
    parser.add_argument("--random", type=int, default=20, metavar="N",
                        help="add N random reorders (layout pair, types, DRAM-sized dims; "
                             "named randNN; default 20)")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="seed of the random reorders (default 0)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON to FILE")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="also draw GB/s per case (gen, peers, copy ceiling) to FILE.png "
                             "(needs matplotlib: the `plot` extra)")
    parser.add_argument("--list", action="store_true", help="list the case names and exit")
    parser.add_argument("--peers", action="store_true",
                        help="also time oneDNN, PyTorch and OpenVINO where this interpreter "
                             "has them, and oneDNN v3.13 from ../shared/peers")
    parser.add_argument("--tune", action="store_true",
                        help="time gen's primitives after gen.tune at each thread count "
                             "(measured dispatch; the wisdom stays in this process)")


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


def print_table(rows, columns):
    """columns: the names of the peer columns to show."""
    cols = [("case", "case", "%s"), ("threads", "threads", "%d"), ("kernel", "kernel", "%s"),
            ("us", "median us", "%.1f"), ("gbps", "GB/s", "%.2f"),
            ("copy_gbps", "copy GB/s", "%.2f"), ("ratio", "ratio", "%.2f")]
    for p in columns:
        cols += [(p + "_us", p + " us", "%.1f"), ("vs_" + p, "vs " + p, "%.2f")]
    cells = [[h for _, h, _ in cols]]
    cells += [[f % r[k] if r.get(k) is not None else "-" for k, _, f in cols] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(cols))]
    for line in cells:
        print("  ".join(c.ljust(w) if i in (0, 2) else c.rjust(w)
                        for i, (c, w) in enumerate(zip(line, widths))).rstrip())


def summary(rows, threads, columns):
    """Per thread count: the dict of the closing line (see the module doc)."""
    out = []
    for n in threads:
        mine = [r for r in rows if r["threads"] == n and "ratio" in r]
        dram = [r["ratio"] for r in mine if r["bytes_read"] + r["bytes_written"] >= DRAM_MIB << 20]
        s = {"threads": n, "dram_cases": len(dram),
             "median_ratio_dram": statistics.median(dram) if dram else None}
        if mine:
            low = min(mine, key=lambda r: r["ratio"])
            s.update(min_ratio=low["ratio"], min_ratio_case=low["case"])
        # vs the fastest peer of each case: the smallest peer time / gen time
        best = [min((r["vs_" + p], p) for p in columns if "vs_" + p in r) + (r["case"],)
                for r in mine if any("vs_" + p in r for p in columns)]
        if best:
            low = min(best)
            s.update(peer_cases=len(best), median_vs_best_peer=statistics.median(
                b[0] for b in best), min_vs_best_peer=low[0], min_vs_best_peer_case=low[2],
                min_vs_best_peer_peer=low[1])
        out.append(s)
    return out


def print_summary(lines):
    for s in lines:
        text = "# summary, %d thread%s: ratio to copy" % (s["threads"],
                                                          "" if s["threads"] == 1 else "s")
        if s["dram_cases"]:
            text += " median %.2f over %d DRAM-sized cases (>= %d MiB moved)," % (
                s["median_ratio_dram"], s["dram_cases"], DRAM_MIB)
        if "min_ratio" in s:
            text += " min %.2f (%s)" % (s["min_ratio"], s["min_ratio_case"])
        if "peer_cases" in s:
            text += "; vs best peer median %.2fx, min %.2fx (%s, %s) over %d cases" % (
                s["median_vs_best_peer"], s["min_vs_best_peer"], s["min_vs_best_peer_case"],
                s["min_vs_best_peer_peer"], s["peer_cases"])
        print(text)


def options(args):
    """(threads, cases) of the command line, or raise ValueError with a one-line message."""
    try:
        threads = [int(t) for t in args.threads.split(",")]
        # each count once, and one the runtime runs as such (it caps larger ones)
        if min(threads) < 1 or max(threads) > runtime.MAX_THREADS \
                or len(set(threads)) < len(threads):
            raise ValueError
    except ValueError:
        raise ValueError("bad --threads %r (want distinct counts in 1..%d, e.g. 1,2)"
                         % (args.threads, runtime.MAX_THREADS)) from None
    # bounds a run could meet: larger ones are typing errors, not runs of days (or, listing
    # --random cases, of all the memory)
    if not 0 <= args.random <= MAX_RANDOM:
        raise ValueError("bad --random %d (want a count in 0..%d)" % (args.random, MAX_RANDOM))
    if args.seed < 0:  # NumPy's message named neither
        raise ValueError("bad --seed %d (want an integer >= 0)" % args.seed)
    if not 0 <= args.min_time <= MAX_MIN_TIME or not 1 <= args.repeat <= MAX_REPEAT:
        raise ValueError("bad --min-time %g / --repeat %d (want 0..%d / 1..%d)"  # NaN too
                         % (args.min_time, args.repeat, MAX_MIN_TIME, MAX_REPEAT))
    if args.plot:
        from . import bench_plot
        bench_plot.check()
    for opt, path in (("--json", args.json), ("--plot", args.plot)):
        if path and not args.list:  # found out now, not after minutes of timing
            new = not os.path.lexists(path)
            try:
                open(path, "a").close()
            except OSError as e:
                raise ValueError(f"bad {opt} {path!r}: {e.strerror}") from None
            if new:  # only a check: written after the run
                os.remove(path)
    wanted = args.cases + args.select
    cases = [c for c in bench_cases.CASES + bench_cases.random_cases(args.random, args.seed)
             if not wanted or any(w in c.name for w in wanted)]
    if not cases:
        raise ValueError("no case matches %s (see --list)" % " ".join(wanted))
    return threads, cases


def time_cases(cases, threads, args, in_process, v313):
    """(rows, exit status) of timing every case at every thread count: gen, the copy of the
    same bytes and the peers that do the case (in_process; v313, a sycl.Peer or None) take
    turns in median_times' rounds."""
    rows, status = [], 0
    for case in cases:
        try:
            job = case.make()
        except gen.Error as e:
            note("skipped %s: %s" % (case.name, e))
            status, job = 1, None
        if job:
            moved = job.nread + job.nwritten
            copy = copy_ceiling(moved // 2)
            # A problem run again is specialised (README "Run-time specialisation"): time the
            # module later calls run, with no compiler running meanwhile.
            for f in (job.run, job.run, copy, copy):
                f()
            gen.jit_wait()
        for n in threads:
            row = {"case": case.name, "threads": n}
            # (name, round function, implementation) of each timed side
            sides = []
            if job:
                gen.set_num_threads(n)
                if args.tune:  # the measured choice (tune specialises what it times)
                    try:
                        gen.tune(job.prim, threads=n)
                        row["tuned"] = True
                    except gen.Error as e:  # its scratch buffers, say: the guess is timed
                        note("not tuned: %s, %d threads: %s" % (case.name, n, e))
                        status = 1
                sides += [("gen", local_round(job.run), None), ("copy", local_round(copy), None)]
                sides += [(name, local_round(p.run), p.impl)
                          for name, p in ready_peers(in_process, job, case.name, n).items()]
            remote = v313.prepare(case, n) if v313 else None
            if remote:
                sides.append((sycl.NAME,) + remote)
            try:
                secs = median_times([r for _, r, _ in sides], args.min_time, args.repeat)
            except sycl.Gone as e:  # noted; time the others again
                sides.pop()
                note("%s, %d threads: timed again without %s (%s)" % (case.name, n, sycl.NAME, e))
                secs = median_times([r for _, r, _ in sides], args.min_time, args.repeat)
            if job:
                t, tc = secs[0], secs[1]
                row.update(kernel=job.prim.kernel, us=t * 1e6, bytes_read=job.nread,
                           bytes_written=job.nwritten, gbps=moved / t / 1e9,
                           copy_gbps=2 * (moved // 2) / tc / 1e9)
                row["ratio"] = row["gbps"] / row["copy_gbps"]
            for (name, _, impl), tp in zip(sides, secs):
                if name in ("gen", "copy"):
                    continue
                row.update({name + "_us": tp * 1e6, name + "_impl": impl})
                if job:
                    row.update({"vs_" + name: tp / t, name + "_gbps": moved / tp / 1e9})
            # a case gen skipped still shows what the peers took
            if sides:
                rows.append(row)
    return rows, status


def run(args):
    try:
        threads, cases = options(args)
    except ValueError as e:
        note(str(e))
        return 2
    if args.list:
        print("\n".join(c.name for c in cases))
        return 0

    if busy_cpus() > 0:
        note("other processes are running: timings will be noisy")
    in_process, labels, v313 = [], {}, None
    if args.peers:
        in_process = peers.available(note)
        labels = {p.name: p.label for p in in_process}
        v313 = sycl.start(threads, note)
        if v313:
            labels[sycl.NAME] = sycl.LABEL
    try:
        rows, status = time_cases(cases, threads, args, in_process, v313)
    finally:
        if v313:
            v313.close()

    columns = [p for p in labels if any(p + "_us" in r for r in rows)]
    lines = summary(rows, threads, columns)
    print("# gen bench: isa %s, %s%s" % (gen.isa(), machine(), ", tuned" if args.tune else ""))
    for name in columns:
        print("# %s: %s" % (name, labels[name]))
    print_table(rows, columns)
    print_summary(lines)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"isa": gen.isa(), "machine": machine(), "peers": labels, "rows": rows,
                       "summary": lines}, f, indent=1)
    if args.plot:
        from . import bench_plot
        bench_plot.plot(rows, threads, columns, args.plot, "gen bench: isa %s, %s" % (
            gen.isa(), machine()))
    return status
