"""Builds one run-time specialised module; gen/jit.py runs this file (by path: it imports
only cffi) in a child process, because cffi's compile changes the working directory and the
environment of its process, and the compiler's output must reach a log, not the user.

`python jit_build.py REQUEST.json`: the request names the module, its cdef, source and
flags, the private directory to compile in, and the final path. The module is moved there
with os.replace, so that another process finds either no file or a whole one. The file
ends with TRAILER and the SHA-256 of the bytes before them (the loader ignores what follows
the module; gen/jit.py checks them before it loads one: a file cut short or damaged since,
loaded, ended the process with SIGBUS or SIGILL).
"""
import hashlib
import json
import os
import shutil
import signal
import sys

import cffi

TRAILER = b"gen-jit-sha256:"


def main(request_file):
    with open(request_file) as f:
        req = json.load(f)
    try:
        ffi = cffi.FFI()
        ffi.cdef(req["cdef"])
        ffi.set_source(req["name"], req["source"], extra_compile_args=req["cflags"],
                       extra_link_args=req["ldflags"])
        built = ffi.compile(tmpdir=req["tmpdir"])
        with open(built, "rb") as f:
            digest = hashlib.sha256(f.read()).digest()
        with open(built, "ab") as f:
            f.write(TRAILER + digest)
        os.replace(built, req["final"])
    finally:
        # done even when the process that asked has exited meanwhile, or when this one is
        # interrupted (SIGINT, SIGTERM: its session's group, or itself)
        shutil.rmtree(req["tmpdir"], ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # cleans up as on Ctrl-C
    main(sys.argv[1])
