"""Measured dispatch ("wisdom", as FFTW's planner keeps it): per problem, the kernel choice that
`gen.tune` timed fastest, used instead of the registry's guess by every later plan of that
problem in this process, and saved to / loaded from a JSON file.

A file is stamped with a hash of the kernel list and the plan constants: wisdom of another
build of gen (other kernels, other work sizes) is refused, never silently misapplied.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from collections import namedtuple

from . import codegen, space
from .errors import Error, checked
from .isa import TIERS

# A kernel kind per piece of the problem; whether large stores stream past the cache (1, at
# every thread count), not (0), or as the plan guesses per piece and thread count (None); the
# order of the loops around the kernel: ORDERS[0] the guess per piece (plan.loop_order), [1]
# the destination's, [2] the source's (smallest source stride innermost); and whether tiles
# prefetch their next work item's source rows, and run kernels' conversions their source
# ahead: PREFETCH[0] the guess (plan._tile_prefetch, plan.prefetches), [1] none, [2] all.
ORDERS = ("auto", "dst", "src")
PREFETCH = ("auto", "off", "on")
Choice = namedtuple("Choice", "kinds stream order prefetch", defaults=(ORDERS[0], PREFETCH[0]))
# The format written; files of format 2 (no prefetch, stream 0 or 1) are read too
FORMAT, FORMATS = "gen wisdom 3", ("gen wisdom 2", "gen wisdom 3")
_known: "dict[str, Choice]" = {}


def key(tier: str, problem, convert, dst_nbytes: int) -> str:
    """A stable name of one problem (dataclass reprs hold only ints and bools)."""
    text = repr((tier, problem, tuple(convert) if convert else None, dst_nbytes))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def stamp() -> str:
    """What a choice depends on besides the problem: the kernels and the work sizes."""
    names = [s.name for t in TIERS for s in space.kernels(t)]
    text = repr((names, sorted(codegen.CHUNKS.items())))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def lookup(problem_key: str) -> "Choice | None":
    return _known.get(problem_key)


def record(problem_key: str, choice: Choice) -> None:
    _known[problem_key] = choice
    _plans_changed()


@checked
def forget_wisdom() -> None:
    """Drop all wisdom of this process (plans made afterwards use the registry's guess)."""
    _known.clear()
    _plans_changed()


def _file_path(path):
    """`path` (str, bytes or os.PathLike) as a str; a file descriptor (an int, which open()
    would take and then close) or any other object is refused."""
    if isinstance(path, (str, bytes, os.PathLike)):
        name = os.fsdecode(os.fspath(path))
        if name and "\0" not in name:
            return name
    raise Error(f"wisdom path must be a non-empty file name without NUL (str, bytes or "
                f"os.PathLike), not {path!r}")


@checked
def save_wisdom(path) -> int:
    """Writes this process's wisdom to `path` (JSON); returns the number of problems."""
    path = _file_path(path)
    known = _known.copy()  # one step under the GIL: other threads may tune meanwhile
    data = {"format": FORMAT, "stamp": stamp(),
            "problems": {k: {"kinds": list(c.kinds), "stream": c.stream, "order": c.order,
                             "prefetch": c.prefetch} for k, c in sorted(known.items())}}
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"  # this thread's own
    try:
        if _special(path):  # a device or pipe (/dev/stdout): a rename would replace it
            # not blocking until a pipe has a reader (ENXIO instead), then blocking writes
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.set_blocking(fd, True)
            with open(fd, "w") as f:
                json.dump(data, f, indent=1)
            return len(known)
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.isfile(tmp):  # written, not renamed (path is a directory, say)
            os.remove(tmp)
        raise Error(f"cannot write wisdom to {str(path)!r}: {e.strerror}") from None
    return len(known)


def _special(path) -> bool:
    """Whether `path` is there and neither a regular file nor a directory."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode) and not os.path.isdir(path)
    except OSError:  # not there (or not reachable: the write will say why)
        return False


@checked
def load_wisdom(path) -> int:
    """Adds the wisdom of `path` (written by `save_wisdom` of the same gen build); returns the
    number of problems read."""
    path = _file_path(path)
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise Error(f"cannot read wisdom from {str(path)!r}: {e.strerror}") from None
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python goes
        raise Error(f"wisdom file {str(path)!r} is not JSON") from None
    if not isinstance(data, dict) or data.get("format") not in FORMATS:
        raise Error(f"wisdom file {str(path)!r} is not gen wisdom ({FORMAT!r})")
    if data.get("stamp") != stamp():
        raise Error(f"wisdom file {str(path)!r} was made by another build of gen "
                    f"(stamp {data.get('stamp')!r}, this build's {stamp()!r})")
    try:
        read = {k: _choice(v) for k, v in data["problems"].items()}
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
        raise Error(f"wisdom file {str(path)!r} is malformed") from None
    _known.update(read)
    _plans_changed()
    return len(read)


def _choice(entry) -> Choice:
    """A problem's entry of a wisdom file: kinds a list of names (a string would be read as
    its letters), stream 0, 1 or null (the guess), an order of ORDERS, a prefetch of PREFETCH
    (the guess where a file of an earlier gen has none); ValueError else."""
    kinds, order = entry["kinds"], entry["order"]
    prefetch, stream = entry.get("prefetch", PREFETCH[0]), entry["stream"]
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds) \
            or order not in ORDERS or prefetch not in PREFETCH \
            or stream is not None and (type(stream) is not int or stream not in (0, 1)):
        raise ValueError(entry)
    return Choice(tuple(kinds), stream, order, prefetch)


def _plans_changed() -> None:
    """Cached plans were made with the old wisdom."""
    from . import plan  # plan and resample import this module
    from .ops import resample
    plan.cached.cache_clear()
    resample._plan_of.cache_clear()
