"""oneDNN v3.13 (the SYCL build of PyPI `onednn`) in a subprocess: the `onednn_sycl` column.

That build threads with TBB, which sizes its pool from the CPU affinity once, when the library
loads: a thread count needs a process of its own, so this peer cannot run in gen's process. It
runs ../shared/peers/onednn/dnnl.py (directory overridable with GEN_PEERS_DIR) with the python
of its venv (PEERS_VENV, default /tmp/peers; made by that folder's setup.sh), one process per
thread count (DNNL_PEER_NTHR), started once and kept for the whole bench. Each prepares one case
at a time and times a round of it when asked, so the bench times it in the same rounds as gen,
the copy and the in-process peers: drift of the host hits all alike. A process that does not
answer within REPLY_S seconds is killed and noted, as one that ends. The source values are
gen's (dnnl.py draws them as bench_cases.source_data does). Reorder attributes are passed as
oneDNN runtime src scales (same mask), zero points and a sum post-op; shuffles as oneDNN's
shuffle with group_size = C / group; resampling forward (forward_inference) and backward
(with a forward_training hint), output size given. Each shuffle and resampling is first
checked against a NumPy reference on a small tensor of the same channels and group
(shuffle_check) or channels and factors (resample_check: API.md's formula, an exact copy for
nearest forward, else within 1e-5 relative + 1e-4); a peer that fails gets no time for that
case.
"""
import json
import os
import select
import subprocess
import tempfile
from pathlib import Path

REPLY_S = 120  # seconds a peer process may take to answer (prepare a case, time a round)

# The script answers one JSON line per line of stdin: {"case": spec} prepares that case
# (checked, primitive created, buffers filled) and replies {"impl"}; {"round": [warm_s,
# round_s]} runs it untimed, then timed, and replies {"times"}; a failure replies {"error"}.
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
import json, os, sys, time
# replies go to the original stdout; whatever the library prints (DNNL_VERBOSE) to stderr
replies = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
import dnnl

def layout(tag, dims):
    # a generic plain tag (a permutation of "abcd..."): oneDNN's enum lacks most of them, so
    # the dense strides of that axis order
    letters = "abcdefghijkl"[:len(dims)]
    if sorted(tag) != list(letters):
        return tag
    strides, step = [0] * len(dims), 1
    for c in reversed(tag):
        strides[letters.index(c)] = step
        step *= dims[letters.index(c)]
    return strides

def prepare(kind, args, kw):
    if kind == "reorder":
        # args: dims, src_tag, dst_tag, src_dt, dst_dt
        args[1:3] = [layout(t, args[0]) for t in args[1:3]]
    elif kind == "shuffle":
        # args: dims, axis, group_size, tag, dt
        shuffle_check(lambda x: dnnl.shuffle(x, *args[1:]).logical, args[0][1],
                      kw.pop("check_group"))
    elif kind in ("resampling_fwd", "resampling_bwd"):
        # args: the input's dims (diff_dst backward), alg, the output's spatial dims, tag, dt
        bwd, alg = kind == "resampling_bwd", args[1]
        x_dims, y_dims = args[0], args[0][:2] + args[2]
        resample_check(lambda x, out: getattr(dnnl, kind)(x, alg, out[2:], *args[3:]).logical,
                       alg, bwd, *((y_dims, x_dims) if bwd else (x_dims, y_dims)))
    # the timers' own builder (dnnl.bench's): a shape stands for its seeded random source
    return dnnl._PREP[kind](tuple(args[0]), *args[1:], **kw)

op, clock = None, time.perf_counter
for line in sys.stdin:
    msg = json.loads(line)
    try:
        if "case" in msg:
            op = None  # free the previous case's buffers first
            op = prepare(*msg["case"])
            reply = {"impl": op.impl}
        else:
            warm_s, round_s = msg["round"]
            end = clock() + warm_s
            while clock() < end:
                op.run()
            times, end = [], clock() + round_s
            while clock() < end:
                t0 = clock()
                op.run()
                times.append(clock() - t0)
            reply = {"times": times}
    except Exception as e:
        reply = {"error": "%s: %s" % (type(e).__name__, e)}
    print(json.dumps(reply), file=replies, flush=True)
"""

NAME = "onednn_sycl"
LABEL = "oneDNN v3.13 (SYCL build, a subprocess per thread count)"


def peers_dir():
    """../shared/peers next to the checkout (or in GEN_PEERS_DIR, or from the cwd), or None."""
    candidates = [os.environ.get("GEN_PEERS_DIR"),
                  Path(__file__).resolve().parents[3] / "shared" / "peers",
                  Path.cwd().parent / "shared" / "peers"]
    for c in candidates:
        if c and (Path(c) / "onednn" / "dnnl.py").is_file():
            return Path(c)
    return None


class Gone(Exception):
    """A round of the subprocess peer failed (noted if its process ended)."""


class Peer:
    """The running subprocesses, {threads: (Popen, its stderr file)}, each holding one
    prepared case."""

    def __init__(self, procs, note):
        self.procs, self.note = procs, note

    def _ask(self, n, msg):
        """The reply to msg from the process of n threads, or None if that process is gone
        or did not answer within REPLY_S seconds, then killed (noted once, with its exit
        status or the wait, and the last line it wrote to stderr)."""
        if n not in self.procs:
            return None
        proc, err = self.procs[n]
        hung = False
        try:
            proc.stdin.write(json.dumps(msg) + "\n")
            proc.stdin.flush()
            # one reply line per request: nothing is left in the reader's buffer to wait on
            hung = not select.select([proc.stdout], [], [], REPLY_S)[0]
            line = "" if hung else proc.stdout.readline()
        except OSError:
            line = ""
        if line:
            return json.loads(line)
        _end(proc, wait_s=0 if hung else 10)
        err.seek(0)
        last = (err.read().strip().splitlines() or ["nothing on stderr"])[-1]
        err.close()
        why = "no reply within %g s" % REPLY_S if hung else "exit %d" % proc.returncode
        self.note("%s peer failed at %d threads (%s): %s" % (NAME, n, why, last))
        del self.procs[n]
        return None

    def prepare(self, case, n):
        """(round, impl) for case at n threads, or None (no spec, or a failure, noted):
        round(warm_s, round_s) runs the case untimed for warm_s seconds, then timed for
        round_s, in the subprocess, and returns the seconds of each timed call."""
        if not case.onednn:
            return None
        r = self._ask(n, {"case": case.onednn})
        if r is None:
            return None
        if "error" in r:
            self.note("%s peer, %s, %d threads: %s" % (NAME, case.name, n, r["error"]))
            return None

        def round_(warm_s, round_s):
            got = self._ask(n, {"round": [warm_s, round_s]})
            if got is None or "error" in got:
                raise Gone(got["error"] if got else "its process is gone")
            return got["times"]
        return round_, r["impl"]

    def close(self):
        for proc, err in self.procs.values():
            _end(proc)
            err.close()
        self.procs = {}


def _end(proc, wait_s=10):
    """End a peer process: its pipes closed (a reply it is still writing fails, instead of
    blocking on a full pipe), then killed if it has not exited within wait_s seconds."""
    for pipe in (proc.stdin, proc.stdout):
        try:
            pipe.close()
        except OSError:  # a request still buffered for a process that is gone
            pass
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start(threads, note):
    """A Peer with a process per thread count in `threads`, or None with a note if this
    machine lacks the peer (no ../shared/peers, or no venv)."""
    pdir = peers_dir()
    venv = Path(os.environ.get("PEERS_VENV", "/tmp/peers"))
    python = venv / "bin" / "python"
    if pdir is None or not python.exists():
        note("%s peer unavailable: %s" % (NAME, "set GEN_PEERS_DIR" if pdir is None else
                                          "no venv %s, run onednn/setup.sh" % venv))
        return None
    peer = Peer({}, note)
    for n in threads:
        env = dict(os.environ, DNNL_PEER_NTHR=str(n), PEERS_VENV=str(venv),
                   PYTHONPATH=str(pdir / "onednn"))
        # stderr goes to a file: a pipe nobody reads could fill and stall the peer
        err = tempfile.TemporaryFile("w+", errors="replace")
        try:
            peer.procs[n] = (subprocess.Popen(
                [str(python), "-c", _ONEDNN_SCRIPT], env=env, text=True, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=err), err)
        except OSError as e:
            err.close()
            peer.close()
            note("%s peer unavailable: %s" % (NAME, e))
            return None
    return peer
