"""Process-wide settings and facts: thread count, verbose output, memory available."""
from __future__ import annotations

import operator
import os
import sys

from .errors import Error, checked

_LEVEL = os.environ.get("GEN_VERBOSE", "0").strip()
VERBOSE = _LEVEL not in ("", "0")  # one line per executed op
# 2 and up: also a line per run-time specialisation built, loaded or failed (kept off level 1,
# whose contract is one line per op)
VERBOSE_JIT = _LEVEL.isdigit() and int(_LEVEL) >= 2


# Calls run with at most this many threads, whatever was asked: libgomp ends the process when
# the OS refuses a thread (10**5 did here), and no machine of ours has more cores.
MAX_THREADS = 1024


def _check_threads(n, what):
    try:
        count = None if isinstance(n, bool) else operator.index(n)
    except TypeError:  # not an integer (an array of several included)
        count = None
    if count is None or count < 1:
        raise Error(f"{what} must be a positive integer, got {n!r}")
    return min(count, MAX_THREADS)


def _default_threads() -> int:
    env = os.environ.get("GEN_NUM_THREADS", "").strip()
    if env:  # empty: unset
        try:
            return _check_threads(int(env), "GEN_NUM_THREADS")
        except ValueError:
            raise Error(f"GEN_NUM_THREADS must be a positive integer, got {env!r}") from None
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


_threads = None


@checked
def set_num_threads(n) -> None:
    global _threads
    _threads = _check_threads(n, "number of threads")


def num_threads(threads=None) -> int:
    """The thread count of a call: its `threads=` argument, else the process setting."""
    global _threads
    if threads is not None:
        return _check_threads(threads, "threads")
    if _threads is None:
        _threads = _default_threads()
    return _threads


# libgomp's threads do not survive fork(): in a child forked after its parent ran a parallel
# region, the next one waits for them forever. Such a child runs its calls on one thread.
_ran_team = False
_one_thread = False


def _forked() -> None:
    global _one_thread
    _one_thread = _one_thread or _ran_team


os.register_at_fork(after_in_child=_forked)


def team(nthr: int) -> int:
    """The threads a kernel call runs on, `nthr` as its plan sized it (see _forked)."""
    global _ran_team
    if _one_thread:
        return 1
    if nthr > 1:
        _ran_team = True
    return nthr


def verbose(line: str) -> None:
    # one write per line: lines of several threads (the JIT's) do not interleave
    sys.stderr.write(f"gen_verbose,{line}\n")
    sys.stderr.flush()


def _read_int(path) -> "int | None":
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def available_memory(proc="/proc", cgroups="/sys/fs/cgroup") -> "int | None":
    """Bytes this process may still allocate, None where that cannot be read: the kernel's
    MemAvailable and free swap, or the headroom under this process's memory cgroup limit
    (v2 or v1) where that is less (in a container /proc/meminfo shows the host's)."""
    have = None
    try:
        with open(f"{proc}/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        have = sum(int(fields[k].split()[0]) << 10 for k in ("MemAvailable", "SwapFree")
                   if k in fields) if "MemAvailable" in fields else None
    except (OSError, ValueError):
        pass
    try:
        with open(f"{proc}/self/cgroup") as f:
            groups = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        groups = []
    for _, controllers, path in (g for g in groups if len(g) == 3):
        if controllers == "":  # v2
            limit, used = f"{cgroups}{path}/memory.max", f"{cgroups}{path}/memory.current"
        elif "memory" in controllers.split(","):  # v1
            base = f"{cgroups}/memory{path}"
            limit, used = f"{base}/memory.limit_in_bytes", f"{base}/memory.usage_in_bytes"
        else:
            continue
        limit, used = _read_int(limit), _read_int(used)  # "max" (v2): no limit, None
        if limit is not None and used is not None and limit < 1 << 60:
            have = limit - used if have is None else min(have, limit - used)
    return have
