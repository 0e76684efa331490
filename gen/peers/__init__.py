"""The peers `python cli.py bench --peers` times in its own process, on gen's own jobs.

One module per peer (onednn, pytorch, openvino), each with a `Peer` class: constructing it
raises Unavailable, with the reason, when its library is missing (gen never needs one).
`peer.name` is its column, `peer.label` says what runs (version, library); `peer.set_threads(n)`
sets its thread count before `peer.prepare(job)`, which returns Prepared(run, result, impl):
`run()` does one call on gen's source buffer (the same values), `result()` is the logical
C-contiguous NumPy array (gen's dtype) of the last call. A job the peer has no equivalent for
raises Unsupported. `checked` compares the result with gen's before any timing, so a peer set
up wrongly cannot win by computing something else.

A job is bench_cases.Job: op ("reorder", "shuffle_channels", "resample",
"resample_backward"), src and dst (gen.Memory), params (the op's arguments) and exact (whether
the peer must give the same bits).
"""
import importlib
from collections import namedtuple

import numpy as np

Prepared = namedtuple("Prepared", "run result impl")

MODULES = ("onednn", "pytorch", "openvino")


class Unavailable(Exception):
    """The peer's library is not in this environment (or cannot run here)."""


class Unsupported(Exception):
    """The peer has no call doing this job."""


class Mismatch(Exception):
    """The peer's result is not gen's."""


def available(note):
    """The peers this interpreter can load; note(text) is told why each other one is not."""
    peers = []
    for name in MODULES:
        try:
            peers.append(importlib.import_module("." + name, __name__).Peer())
        except Unavailable as e:
            note("%s peer unavailable: %s" % (name, e))
    return peers


def checked(peer, job):
    """peer.prepare(job), after one call of the peer and of gen from the same destination
    agree: bit for bit where job.exact, else within rounding (integers by 1; f32 relative
    1e-5, bf16 2^-7, f16 2^-10, plus 1e-4 absolute: sums of products in another order)."""
    prepared = peer.prepare(job)
    job.run()
    want = job.dst.to_array()
    prepared.run()
    got = prepared.result()
    if got.shape != want.shape or got.dtype != want.dtype:
        raise Mismatch("result %s %s, gen's %s %s" % (got.dtype, got.shape, want.dtype,
                                                      want.shape))
    if job.exact:
        same = np.array_equal(got.view(np.uint8), want.view(np.uint8))
    elif np.issubdtype(want.dtype, np.integer):
        same = np.abs(got.astype(np.int64) - want).max(initial=0) <= 1
    else:
        rtol = {"bf16": 2 ** -7, "f16": 2 ** -10}.get(str(job.dst.desc.dtype), 1e-5)
        same = np.allclose(got.astype(np.float64), want.astype(np.float64), rtol, 1e-4)
    if not same:
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        raise Mismatch("result differs from gen's (at %d of %d elements, by up to %g)"
                       % (np.count_nonzero(diff), diff.size, diff.max()))
    return prepared
