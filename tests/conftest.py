"""The suite runs with run-time specialisation off (GEN_JIT=0, unless set): spec tests run
each problem more than once, and each would start a background build into the user's cache.
tests/test_jit.py turns it on for its own problems, with a temporary cache.
GEN_LLC_BYTES=0 makes the size floors of gen/plan.py alone decide streaming, so the
streaming cases stream whatever the machine's caches."""
import os

import pytest

os.environ.setdefault("GEN_JIT", "0")
os.environ.setdefault("GEN_LLC_BYTES", "0")


@pytest.fixture
def cache_size(monkeypatch):
    """set(value): GEN_LLC_BYTES for the plans made next; restored after. The caches of
    llc_bytes() and of the plans made under it are cleared both times."""
    from gen import plan
    from gen.ops import resample

    def clear():
        plan.llc_bytes.cache_clear()
        plan.cached.cache_clear()
        resample._plan_of.cache_clear()

    def set_size(value):
        monkeypatch.setenv("GEN_LLC_BYTES", str(value))
        clear()
    yield set_size
    monkeypatch.undo()
    clear()
