"""The suite runs with run-time specialisation off (GEN_JIT=0, unless set): spec tests run
each problem more than once, and each would start a background build into the user's cache.
tests/test_jit.py turns it on for its own problems, with a temporary cache.
GEN_LLC_BYTES=0 makes the size floors of gen/plan.py alone decide streaming, so the
streaming cases stream whatever the machine's caches."""
import os

os.environ.setdefault("GEN_JIT", "0")
os.environ.setdefault("GEN_LLC_BYTES", "0")
