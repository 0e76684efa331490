"""oneDNN v3.13 (the SYCL build of PyPI `onednn`) in a subprocess: the `onednn_sycl` column.

That build threads with TBB, which sizes its pool from the CPU affinity once, when the library
loads: a thread count needs a process of its own, so this peer cannot run in gen's process. It
runs ../shared/peers/onednn/dnnl.py (directory overridable with GEN_PEERS_DIR) with the python
of its venv (PEERS_VENV, default /tmp/peers; made by that folder's setup.sh), one process per
thread count (DNNL_PEER_NTHR), on the same source values (dnnl.py draws them as
bench_cases.source_data does). Reorder attributes are passed as oneDNN runtime src scales
(same mask), zero points and a sum post-op; shuffles as oneDNN's shuffle with group_size =
C / group; resampling forward (forward_inference) and backward (with a forward_training hint),
output size given. Each shuffle and resampling is first checked against a NumPy reference on a
small tensor of the same channels and group (shuffle_check) or channels and factors
(resample_check: API.md's formula, an exact copy for nearest forward, else within 1e-5
relative + 1e-4); a peer that fails gets no time for that case.
"""
import json
import os
import subprocess
from pathlib import Path

# The script reads {"cases": [spec, ...], "min_time", "repeat"} on stdin and prints one JSON
# list: per spec [median seconds, implementation] or an error message.
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
import json, sys
import dnnl
req = json.load(sys.stdin)

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

out = []
for kind, args, kw in req["cases"]:
    try:
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
        r = dnnl.bench(kind, tuple(args[0]), *args[1:], n=req["repeat"], min_time=req["min_time"],
                       **kw)
        out.append([r["median_s"], r["impl"]])
    except Exception as e:
        out.append("%s: %s" % (type(e).__name__, e))
print(json.dumps(out))
"""

NAME = "onednn_sycl"


def peers_dir():
    """../shared/peers next to the checkout (or in GEN_PEERS_DIR, or from the cwd), or None."""
    candidates = [os.environ.get("GEN_PEERS_DIR"),
                  Path(__file__).resolve().parents[3] / "shared" / "peers",
                  Path.cwd().parent / "shared" / "peers"]
    for c in candidates:
        if c and (Path(c) / "onednn" / "dnnl.py").is_file():
            return Path(c)
    return None


def times(cases, threads, min_time, repeat, note):
    """{(case name, threads): (seconds, impl)} of the cases with a oneDNN spec, one process per
    thread count; note(text) is told of a missing venv and of each failure."""
    pdir = peers_dir()
    venv = Path(os.environ.get("PEERS_VENV", "/tmp/peers"))
    python = venv / "bin" / "python"
    if pdir is None or not python.exists():
        note("%s peer unavailable: %s" % (NAME, "set GEN_PEERS_DIR" if pdir is None else
                                          "no venv %s, run onednn/setup.sh" % venv))
        return {}
    todo = [(c.name, c.onednn) for c in cases if c.onednn]
    req = json.dumps({"cases": [spec for _, spec in todo], "min_time": min_time,
                      "repeat": repeat})
    result = {}
    for n in threads:
        env = dict(os.environ, DNNL_PEER_NTHR=str(n), PEERS_VENV=str(venv),
                   PYTHONPATH=str(pdir / "onednn"))
        proc = subprocess.run([str(python), "-c", _ONEDNN_SCRIPT], input=req, env=env,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1]
            note("%s peer failed at %d threads: %s" % (NAME, n, last))
            continue
        for (name, _), r in zip(todo, json.loads(proc.stdout.strip().splitlines()[-1])):
            if isinstance(r, str):
                note("%s peer, %s, %d threads: %s" % (NAME, name, n, r))
            else:
                result[name, n] = tuple(r)
    return result
