"""`python cli.py bench`: time gen's kernels against a memory copy of the same traffic.

Every case runs through its reusable primitive (creation excluded). Per case and thread count
the table gives the kernel chosen, the median time of many calls, GB/s = (bytes read + bytes
written) / time (blocked buffers count their padded size) and the ratio to the copy ceiling:
gen's own chunked multi-threaded memcpy (a u8 -> u8 reorder of B = (read + written) // 2
bytes, GB/s = 2B / time), timed warm, in rounds interleaved with the case so drift hits both
alike.

`--peers` also times oneDNN v3.13 on the same cases through ../shared/peers/onednn/dnnl.py
(directory overridable with GEN_PEERS_DIR, venv with PEERS_VENV), one subprocess per thread
count; "vs onednn" = oneDNN time / gen time (> 1: gen is faster). When the peer is missing a
note goes to stderr and the table has no peer columns: gen never needs it.

A case is a `Case(name, make, peer)`: `make()` returns (run_fn, bytes_read, bytes_written,
kernel_name) with `run_fn()` doing one call; `peer` is (dnnl.bench kind, args) or None.
Add cases (conversions, shuffles, resampling) to CASES.
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

Case = namedtuple("Case", "name make peer")

WARM_S = 0.03         # untimed calls at the start of each round
ROUND_S = 0.05        # timed calls per round before switching to the other function


def reorder_case(dims, src_tag, dst_tag, src_dt="f32", dst_dt=None):
    """A Case timing gen.Reorder between two tagged descriptors of `dims`."""
    dst_dt = dst_dt or src_dt
    dtypes = src_dt if dst_dt == src_dt else "%s->%s" % (src_dt, dst_dt)
    name = "%s %s->%s %s" % (dtypes, src_tag, dst_tag, "x".join(map(str, dims)))

    def make():
        sd = gen.MemoryDesc(dims, src_dt, src_tag)
        dd = gen.MemoryDesc(dims, dst_dt, dst_tag)
        prim = gen.Reorder(sd, dd)
        x = np.random.default_rng(0).uniform(-4, 4, dims).astype(np.float32)
        src, dst = gen.Memory.from_array(x, src_tag, dtype=src_dt), gen.Memory(dd)
        return (lambda: prim(src, dst)), sd.nbytes, dd.nbytes, prim.kernel

    return Case(name, make, ("reorder", [list(dims), src_tag, dst_tag, src_dt, dst_dt]))


_SHAPES = [(32, 64, 56, 56), (8, 256, 28, 28), (1, 3, 224, 224)]
_PAIRS = [("nchw", "nhwc"), ("nhwc", "nchw"), ("nchw", "nChw16c"), ("nChw16c", "nchw"),
          ("nchw", "nChw8c")]
CASES = [reorder_case(shape, s, d) for s, d in _PAIRS for shape in _SHAPES] + [
    reorder_case((256, 256, 3, 3), "oihw", "OIhw16i16o"),
]


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


# ---------------------------------------------------------------------------- oneDNN peer
_PEER_SCRIPT = """
import json, sys
import dnnl
req = json.load(sys.stdin)
out = []
for kind, args in req["cases"]:
    try:
        r = dnnl.bench(kind, tuple(args[0]), *args[1:], n=req["repeat"], min_time=req["min_time"])
        out.append([r["median_s"], r["impl"]])
    except Exception as e:
        print("onednn %s %s: %s" % (kind, args, e), file=sys.stderr)
        out.append(None)
print(json.dumps(out))
"""


def peers_dir():
    """../shared/peers next to the checkout (or in GEN_PEERS_DIR, or from the cwd), or None."""
    candidates = [os.environ.get("GEN_PEERS_DIR"),
                  Path(__file__).resolve().parents[2] / "shared" / "peers",
                  Path.cwd().parent / "shared" / "peers"]
    for c in candidates:
        if c and (Path(c) / "onednn" / "dnnl.py").is_file():
            return Path(c)
    return None


def onednn_times(cases, threads, min_time, repeat):
    """{(case name, threads): (seconds, impl)} from oneDNN v3.13, or {} with a note on stderr."""
    pdir = peers_dir()
    venv = Path(os.environ.get("PEERS_VENV", "/tmp/peers"))
    python = venv / "bin" / "python"
    if pdir is None or not python.exists():
        print("bench: oneDNN peer unavailable (%s); no peer columns" %
              ("set GEN_PEERS_DIR" if pdir is None else "no venv %s, run onednn/setup.sh" % venv),
              file=sys.stderr)
        return {}
    todo = [c for c in cases if c.peer]
    req = json.dumps({"cases": [c.peer for c in todo], "min_time": min_time, "repeat": repeat})
    result = {}
    for n in threads:
        env = dict(os.environ, DNNL_PEER_NTHR=str(n), PEERS_VENV=str(venv),
                   PYTHONPATH=str(pdir / "onednn"))
        proc = subprocess.run([str(python), "-c", _PEER_SCRIPT], input=req, env=env,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1]
            print("bench: oneDNN peer failed at %d threads: %s" % (n, last), file=sys.stderr)
            continue
        for case, r in zip(todo, json.loads(proc.stdout.strip().splitlines()[-1])):
            if r:
                result[case.name, n] = tuple(r)
    return result


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
                        help="also time oneDNN v3.13 (../shared/peers) on the same cases")


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
    cols = [("case", "case", "%s"), ("threads", "threads", "%d"), ("kernel", "kernel", "%s"),
            ("us", "median us", "%.1f"), ("gbps", "GB/s", "%.2f"),
            ("copy_gbps", "copy GB/s", "%.2f"), ("ratio", "ratio", "%.2f")]
    if peers:
        cols += [("onednn_us", "onednn us", "%.1f"), ("vs_onednn", "vs onednn", "%.2f")]
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
    peer = onednn_times(cases, threads, args.min_time, args.repeat) if args.peers else {}
    rows, status = [], 0
    for case in cases:
        try:
            fn, nread, nwritten, kernel = case.make()
        except gen.Error as e:
            print("bench: %s: %s" % (case.name, e), file=sys.stderr)
            status = 1
            continue
        copy_bytes = (nread + nwritten) // 2
        copy = copy_ceiling(copy_bytes)
        for n in threads:
            gen.set_num_threads(n)
            t, tc = median_times([fn, copy], args.min_time, args.repeat)
            row = {"case": case.name, "threads": n, "kernel": kernel, "us": t * 1e6,
                   "bytes_read": nread, "bytes_written": nwritten,
                   "gbps": (nread + nwritten) / t / 1e9, "copy_gbps": 2 * copy_bytes / tc / 1e9}
            row["ratio"] = row["gbps"] / row["copy_gbps"]
            if (case.name, n) in peer:
                tp, row["onednn_impl"] = peer[case.name, n]
                row["onednn_us"], row["vs_onednn"] = tp * 1e6, tp / t
            rows.append(row)

    print("# gen bench: isa %s, %s" % (gen.isa(), machine()))
    print_table(rows, bool(peer))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"isa": gen.isa(), "machine": machine(), "rows": rows}, f, indent=1)
    return status
