"""Run-time specialisation: a problem run again gets a compiled module of its own.

A plan (plan.Plan: reorder, shuffle; resample._Plan) asks for it on its SECOND_RUN-th run,
when it moves at least MIN_TRAFFIC bytes. The module is rendered from the same templates as
the installed kernels (templates/jit.c.j2): the plan's kernels with inline linkage and its
tables as constants (pieces as `static const gen_piece`, a resampling's taps as arrays), so
that gcc folds sizes and strides into the inlined kernels, and one entry point that runs them
in one OpenMP region as gen_run does. Same tier, same flags, same bits.

One background thread renders and builds, one plan at a time; the compiler runs in a child
process (jit_build.py), so calls go on meanwhile, on the generic kernels, and the GIL is free.
Built modules are cached on disk (GEN_CACHE_DIR) under a hash of their source, flags and
versions: another process loads the file instead of compiling. A build that fails (no
compiler, unwritable cache) leaves the plan on the generic kernels and says why in a
GEN_VERBOSE=2 line.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _cffi_backend

from . import codegen, compile, constants, registry, runtime
from .errors import Error, checked
from .jit_build import TRAILER

SECOND_RUN = 2
# Below this many bytes moved per call a call costs about the same either way (~2 us of
# Python and dispatch; a specialised kernel saves setup and loop overhead of a few hundred
# ns), so the build would not pay for itself.
MIN_TRAFFIC = 1 << 16
# Table elements (a resampling's taps) a module may hold as constants: 2^20 is about 8 MB of
# C, a few seconds of gcc.
MAX_TABLE = 1 << 20
# Pieces a module may run: each inlines its kernel, and gcc's time grows faster than their
# count (a shuffle of nChw16c gathering its channels: 117 pieces built in 3.8 s, 259 in 19 s;
# a reorder between blocks that do not nest, a piece per index of those axes: 4096 had not
# built after 5 minutes). The bench's problems have 9 at most.
MAX_PIECES = 128
BUILD_TIMEOUT = 600  # seconds: a hung compiler gives up, the plan stays generic
LINKAGE = "static inline __attribute__((always_inline)) "
# `at` as void *: the caller's gen_attr belongs to the installed module's ffi, and cffi
# passes a pointer of another ffi's type only as void *.
CDEF = "int gen_jit_run(intptr_t src, intptr_t dst, const void *at, int nthr);"
BUILDER = Path(__file__).with_name("jit_build.py")


def enabled() -> bool:
    """GEN_JIT: "1" (default) or "0"."""
    value = os.environ.get("GEN_JIT", "1").strip()
    if value not in ("0", "1", ""):
        raise Error(f"GEN_JIT must be 0 or 1, got {value!r}")
    return value != "0"


def worth(traffic: int, table: int = 0, pieces: int = 1) -> bool:
    """Whether a plan moving `traffic` bytes per call, with `table` elements of tables and
    `pieces` pieces, is specialised when run again (reads GEN_JIT: gen.Error when bad)."""
    return enabled() and traffic >= MIN_TRAFFIC and table <= MAX_TABLE and pieces <= MAX_PIECES


class Runs:
    """A plan's side of specialisation: counts its runs, asks for its module at the
    SECOND_RUN-th, then holds the module's entry point. The plan gives `kernel` (its name)
    and `jit_parts()`: ((spec, gen_piece fields) per piece, (spec, Tables) of a resampling
    or None)."""

    def __init__(self, traffic: int, table: int = 0, pieces: int = 1):
        self.count = 0 if worth(traffic, table, pieces) else None  # None: never specialised
        self.requested = False
        self.special = None  # (entry point, kernel name) once the module is loaded

    def ran(self, plan) -> None:
        if self.count is None:
            return
        runs = self.count = self.count + 1  # a local: some thread sees SECOND_RUN
        if runs == SECOND_RUN:
            with _lock:  # once, though several threads may see it
                if self.requested:
                    return
                self.requested = True
            _worker.put(plan)

    def switch(self, plan, entry) -> None:
        """From now on the plan's calls run `entry`, `int gen_jit_run(src, dst, at, nthr)`."""
        # GEN_VERBOSE's exec lines keep naming the kernels (as gen.kernels() lists them);
        # the plan's `kernel` attribute says that its own module runs them
        self.special = (entry, plan.kernel)
        plan.kernel = "jit:" + plan.kernel


def cache_dir() -> Path:
    """GEN_CACHE_DIR, else the user's cache folder ($XDG_CACHE_HOME/gen, ~/.cache/gen)."""
    env = os.environ.get("GEN_CACHE_DIR", "").strip()
    if env:  # absolute: the build runs in a directory of its own
        return Path(env).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".cache") / "gen"


class _Worker:
    """The background thread and its queue of plans; `pending` counts those not done."""

    def __init__(self):
        self.queue = queue.SimpleQueue()
        self.done = threading.Condition()
        self.pending = 0
        self.thread = None
        self.modules = {}  # name -> loaded module (a file is loaded once per process)

    def put(self, plan) -> None:
        with self.done:
            self.pending += 1
            if self.thread is None:
                self.thread = threading.Thread(target=self.work, name="gen-jit", daemon=True)
                self.thread.start()
        self.queue.put(plan)

    def work(self) -> None:
        while True:
            plan = self.queue.get()
            try:
                _specialise(plan, self.modules)
            except Exception as e:  # whatever fails, calls stay generic
                if runtime.VERBOSE_JIT:
                    reason = " ".join(str(e).split()) or type(e).__name__
                    runtime.verbose(f"jit,failed,{plan.kernel},{reason}")
            finally:
                with self.done:
                    self.pending -= 1
                    self.done.notify_all()


def _reset() -> None:
    global _worker, _lock
    _worker, _lock = _Worker(), threading.Lock()


_reset()
# A forked child has no worker thread: it starts its own, and its parent's queue is not its.
os.register_at_fork(after_in_child=_reset)


@checked
def jit_wait(timeout=None) -> bool:
    """`gen.jit_wait`: wait until every requested specialisation is built (or failed);
    False when `timeout` seconds passed first."""
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
                not timeout >= 0:
            raise Error(f"timeout must be None or a number of seconds >= 0, got {timeout!r}")
    worker = _worker
    with worker.done:
        return worker.done.wait_for(lambda: worker.pending == 0, timeout)


def source(pieces, resample, cflags) -> str:
    """The C of one plan's module (templates/jit.c.j2): `pieces`, (spec, gen_piece fields)
    per piece, or `resample`, the (spec, Tables) of a resampling."""
    isa = registry.isa()
    specs = [spec for spec, _ in pieces] + ([resample[0]] if resample else [])
    arrays, init, name = [], "", "gen_jit_problem"  # the tables' prefix
    if resample:
        init = constants.resample_init(name, resample[1], arrays)
    inits = [constants.piece(fields, arrays, f"{name}_{i}")
             for i, (_, fields) in enumerate(pieces)]
    return codegen.render(
        "jit.c.j2", name=name, version=constants.version(), isa=isa, cflags=" ".join(cflags),
        common=codegen.render_common(isa),
        convert=codegen.render_convert(isa, sorted({(s.src, s.dst) for s, _ in pieces
                                                    if s.cvt})),
        kernels="\n".join(codegen.render_kernel(s, LINKAGE, spread=any(
                              f.get("prefetch") == 2 for t, f in pieces if t.name == s.name),
                              **(resample[1].row_steps() if resample else {}))
                          for s in {s.name: s for s in specs}.values()),
        arrays=arrays, pieces=inits, resample=init, calls=[spec.name for spec, _ in pieces],
        resample_kernel=resample[0].name if resample else "")


def _specialise(plan, modules) -> None:
    # The sanitisers only where their runtime is loaded (a GEN_SANITIZE=1 install run as the
    # README says): a sanitised module loaded without it would end the process.
    cflags, ldflags = compile.flags(registry.isa(), _asan_loaded())
    text = source(*plan.jit_parts(), cflags)  # names gen's version and the compile flags
    digest = hashlib.sha256("\0".join(
        [text, *ldflags, _cffi_backend.__version__, sys.version]).encode()).hexdigest()
    name = f"_gen_jit_{digest[:32]}"
    path = cache_dir() / (name + importlib.machinery.EXTENSION_SUFFIXES[0])
    t0 = time.perf_counter()
    how = "loaded"
    module = modules.get(name)
    if module is None:
        try:
            module = _load(name, path)
        except ImportError:  # not built yet (or a damaged file: built again)
            _build(name, text, cflags, ldflags, path)
            module, how = _load(name, path), "built"
        modules[name] = module
    plan.jit.switch(plan, module.lib.gen_jit_run)
    if runtime.VERBOSE_JIT:
        runtime.verbose(f"jit,{how},{plan.kernel},{path},{time.perf_counter() - t0:.2f}s")


def _load(name, path: Path):
    """The module at `path`, once its trailer shows it whole (jit_build.TRAILER), else
    ImportError (a damaged file: built again)."""
    try:
        data = path.read_bytes()
    except OSError:
        raise ImportError(f"no module at {path}") from None
    end = len(data) - len(TRAILER) - 32  # the trailer, then a SHA-256 digest
    body, mark, digest = data[:end], data[end:-32], data[-32:]
    if end < 0 or mark != TRAILER or hashlib.sha256(body).digest() != digest:
        raise ImportError(f"{path} is not a whole gen module")
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
    loader.exec_module(module)
    return module


def _sweep(folder: Path) -> None:
    """Removes the build directories in `folder` older than two build timeouts: left by a
    build whose processes were killed (no build lives that long)."""
    old = time.time() - 2 * BUILD_TIMEOUT
    for entry in folder.glob(".build-*"):
        try:
            if entry.stat().st_mtime < old:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:  # removed by another process meanwhile
            pass


def _build(name, text, cflags, ldflags, path: Path) -> None:
    """Compiles in a private directory next to `path`; the child moves the module to `path`
    with os.replace, so a process that finds `path` finds a whole file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _sweep(path.parent)
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=path.parent))
    except OSError as e:
        raise Error(f"cannot write the cache folder {str(path.parent)!r}: {e.strerror}") \
            from None
    try:
        request_file = tmp / "request.json"
        request_file.write_text(json.dumps({
            "name": name, "cdef": CDEF, "source": text, "cflags": cflags,
            "ldflags": ldflags, "tmpdir": str(tmp), "final": str(path)}))
        with open(tmp / "build.log", "w+") as log:
            # the log, not a pipe, and a session of its own (Ctrl-C in this process's group
            # does not reach it): a child that outlives this process still finishes, then
            # removes its folder; past the timeout its whole group goes, the compiler too
            child = subprocess.Popen([sys.executable, str(BUILDER), str(request_file)], cwd=tmp,
                                     stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
            try:
                code = child.wait(timeout=BUILD_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                raise Error(f"the build took more than {BUILD_TIMEOUT} s") from None
            if code:
                log.seek(0)
                lines = log.read().strip().splitlines()
                raise Error(f"the build failed: {lines[-1] if lines else code}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _asan_loaded() -> bool:
    return hasattr(ctypes.CDLL(None), "__asan_init")
