"""Assertions and helpers shared by the spec tests."""
import os
import subprocess
import sys
import textwrap
import threading

import pytest

import gen
import reference as ref

GEN_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(gen.__file__)))


def raises_gen(fn, *names):
    """fn() must raise gen.Error (a ValueError) whose message names one of names."""
    with pytest.raises(gen.Error) as ei:
        fn()
    err = ei.value
    assert isinstance(err, ValueError)
    msg = str(err)
    assert msg.strip(), "empty error message"
    if names:
        flat = msg.replace(" ", "")
        assert any(str(n) in msg or str(n).replace(" ", "") in flat for n in names), (
            "message %r does not name any of %r" % (msg, names)
        )
    return msg


def child_env(**env_extra):
    """The environment of a fresh interpreter importing the same gen as this process, on its
    tier: no GEN_ variable but GEN_ISA (a suite run with a lower tier forced stays on it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEN_") or k == "GEN_ISA"}
    env["GEN_JIT"] = "0"  # no background builds into the user's cache unless a test asks
    env["PYTHONPATH"] = GEN_PARENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(env_extra)
    return env


def run_py(code, tmp_path, **env_extra):
    """Run code in a fresh interpreter importing the same gen as this process."""
    env = child_env(**env_extra)
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, "subprocess failed:\nSTDOUT:\n%s\nSTDERR:\n%s" % (p.stdout, p.stderr)
    return p


def desc(dims, dtype, spec):
    """A descriptor from a tag (or None) or from explicit strides."""
    if spec is None or isinstance(spec, str):
        return gen.MemoryDesc(dims, dtype, spec)
    return gen.MemoryDesc(dims, dtype, strides=spec)


def src_memory(a, spec):
    """A gen.Memory holding a in layout spec (bytes written by the reference packer)."""
    md = desc(a.shape, a.dtype, spec)
    m = gen.Memory(md)
    raw = ref.pack(a, spec)
    assert raw.size <= md.nbytes
    m.data[: raw.size] = raw
    return m


def run_threads(work, n):
    """work(i) in n Python threads at once; asserts that none hangs."""
    ts = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    assert not any(t.is_alive() for t in ts), "a thread hangs"
