"""Guard-page buffers for out-of-bounds tests (Linux, ctypes: mmap + mprotect).

A ``GuardedRegion(nbytes, where)`` maps ``npages + 2`` anonymous pages, makes the first and the
last one ``PROT_NONE`` and places an ``nbytes`` window in between:

* ``where="end"``:   the window's last byte is the byte right before the last (protected) page,
                     so any access past the end faults;
* ``where="start"``: the window's first byte is the first byte after the first (protected) page,
                     so any access before the start faults.

A fault is a SIGSEGV: the tests that use this run their cases in a subprocess.

``guarded_memory(desc, where)`` wraps such a window in a ``gen.Memory`` (``buffer=`` a writable
memoryview of exactly ``desc.nbytes`` bytes); ``guarded_array(shape, dtype, where)`` gives a NumPy
array over a window.  Regions stay mapped until ``close()`` (or forever: a test process that
maps a few hundred small regions does not need to unmap them).

Nothing here imports gen except ``guarded_memory``.
"""
import ctypes
import mmap
import os

import numpy as np

PROT_NONE = 0
PROT_READ = 1
PROT_WRITE = 2
MAP_PRIVATE = 0x02
MAP_ANONYMOUS = 0x20
PAGE = mmap.PAGESIZE

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.mprotect.restype = ctypes.c_int
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
MAP_FAILED = ctypes.c_void_p(-1).value


def _check(ok, what):
    if not ok:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


class GuardedRegion:
    """``nbytes`` readable/writable bytes with a PROT_NONE page right after (``where="end"``)
    or right before (``where="start"``) them."""

    def __init__(self, nbytes, where="end", fill=0):
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise ValueError("nbytes must be positive")
        if where not in ("end", "start"):
            raise ValueError(where)
        self.nbytes = nbytes
        self.where = where
        npages = -(-nbytes // PAGE)
        self.map_len = (npages + 2) * PAGE
        base = _libc.mmap(None, self.map_len, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        _check(base not in (None, MAP_FAILED), "mmap")
        self.base = base
        _check(_libc.mprotect(base, PAGE, PROT_NONE) == 0, "mprotect")
        last = base + (npages + 1) * PAGE
        _check(_libc.mprotect(last, PAGE, PROT_NONE) == 0, "mprotect")
        self.guard_before = base + PAGE          # first accessible byte
        self.guard_after = last                  # first protected byte after the window
        self.addr = last - nbytes if where == "end" else base + PAGE
        self._arr = (ctypes.c_ubyte * nbytes).from_address(self.addr)
        self.view = memoryview(self._arr).cast("B")
        if fill is not None:
            ctypes.memset(self.addr, fill, nbytes)

    def numpy(self):
        """A writable uint8 NumPy view of the window."""
        return np.frombuffer(self.view, dtype=np.uint8)

    def close(self):
        if self.base is not None:
            self.view.release()
            _libc.munmap(self.base, self.map_len)
            self.base = None


def guarded_memory(desc, where="end", fill=0):
    """(gen.Memory of desc over a guarded window of exactly desc.nbytes bytes, region)."""
    import gen

    region = GuardedRegion(desc.nbytes, where, fill)
    mem = gen.Memory(desc, buffer=region.view)
    assert mem.data.ctypes.data == region.addr, "gen.Memory copied the buffer"
    return mem, region


def guarded_array(shape, dtype, where="end"):
    """(C-contiguous NumPy array of shape/dtype over a guarded window, region)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    region = GuardedRegion(n, where)
    arr = region.numpy().view(dtype).reshape(shape)
    return arr, region


def touch_past_end_and_die():
    """Read the byte after an end-guarded window: must kill the process (self-test)."""
    r = GuardedRegion(13, "end")
    return ctypes.string_at(r.addr + r.nbytes, 1)


def touch_before_start_and_die():
    r = GuardedRegion(13, "start")
    return ctypes.string_at(r.addr - 1, 1)
