"""Every kernel of every ISA tier this machine runs gives the same bytes as the reference.

Each tier runs in its own process (GEN_ISA is read once per process)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from gen import registry

from reference import pack

# Layout pairs that, over element sizes 1..8, reach every kernel kind (run, tile, strided,
# interleave, zero fill) with and without tails.
PAIRS = [((3, 5, 7, 9), "nchw", "nchw"), ((2, 37, 9, 11), "nchw", "nhwc"),
         ((2, 37, 9, 11), "nhwc", "nchw"), ((2, 21, 6, 5), "nchw", "nChw16c"),
         ((2, 21, 6, 5), "nChw8c", "nchw"), ((3, 3, 7, 7), "nchw", "nhwc"),
         ((35, 19, 3, 3), "oihw", "OIhw4i16o4i"), ((17, 33, 2, 2), "ihwo", "OIhw16i16o"),
         ((2, 2, 9, 7), "nchw", "nhwc"), ((2, 4, 5, 13), "nchw", "nhwc"),
         ((3, 8, 7, 11), "nchw", "nhwc"), ((2, 3, 9, 11), "nchw", "nChw8c"),
         ((2, 3, 9, 11), "nchw", "nChw16c"), ((2, 10, 12, 11), "aBcd2b", "nchw"),
         ((3, 22, 13, 11), "aBcd4b", "nchw"), ((19, 21, 3, 2), "ABcd4b16a4b", "cdba"),
         ((2, 5, 9, 11), "nhwc", "nchw"), ((2, 3, 9, 11), "nChw16c", "nchw"),
         # B under a mask in half-width tiles (3, 6 channels) and whole ones (12)
         ((2, 6, 9, 11), "nChw16c", "nchw"), ((2, 12, 9, 11), "nhwc", "nchw"),
         ((2, 24, 5, 103), "nchw", "nhwc"),  # B of 515: a last chunk of 3 columns
         # into larger blocks: runs of 2-32 bytes interleaved as elements, padded tails
         ((2, 20, 5, 37), "aBcd4b", "aBcd8b"), ((2, 24, 5, 9), "aBcd8b", "aBcd16b"),
         ((2, 22, 5, 9), "aBcd2b", "aBcd8b"),
         ((19, 9, 3, 2), "badc", "ABcd4b16a4b"),  # zeros after each element: a gap
         ((70, 9, 3, 5), "ABcd4b16a4b", "bdca"),  # rows of 4 that follow each other 16 at a time
         # one channel of 16: gaps of 15 elements, each 256-element block's row built whole
         # (rows of 16 and 32 bytes) or element by element (64 and 128)
         ((2, 1, 9, 150), "nchw", "aBcd16b")]
DTYPES = ["uint8", "float16", "float32", "float64"]

SCRIPT = r"""
import json, sys, numpy as np, gen
out = {"isa": gen.isa(), "results": []}
for dims, src, dst in json.loads(sys.argv[1]):
    for dt in json.loads(sys.argv[2]):
        rng = np.random.default_rng(0)
        x = rng.integers(0, 256, size=int(np.prod(dims)) * np.dtype(dt).itemsize,
                         dtype=np.uint8).view(dt).reshape(dims)
        for threads in (1, 2):
            m = gen.Memory(gen.MemoryDesc(dims, dt, dst))
            m.data[:] = 0xA5
            gen.reorder(gen.Memory.from_array(x, src), m, threads=threads)
            out["results"].append(m.data.tobytes().hex())
print(json.dumps(out))
"""


def run_tier(tier):
    env = dict(os.environ, GEN_ISA=tier)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(PAIRS), json.dumps(DTYPES)],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def expected():
    out = []
    for dims, src, dst in PAIRS:
        for dt in DTYPES:
            rng = np.random.default_rng(0)
            x = rng.integers(0, 256, size=int(np.prod(dims)) * np.dtype(dt).itemsize,
                             dtype=np.uint8).view(dt).reshape(dims)
            out += [pack(x, dst).tobytes().hex()] * 2
    return out


@pytest.mark.parametrize("tier", registry.supported())
def test_tier_matches_reference(tier):
    got = run_tier(tier)
    assert got["isa"] == tier
    want = expected()
    bad = [i for i, (g, w) in enumerate(zip(got["results"], want)) if g != w]
    assert not bad and len(got["results"]) == len(want), \
        f"{tier}: cases {[(PAIRS[i // 8], DTYPES[i // 2 % 4]) for i in bad[:5]]} differ"


def test_gen_isa_higher_than_the_cpu_is_refused():
    env = dict(os.environ, GEN_ISA="nonsense")
    proc = subprocess.run([sys.executable, "-c", "import gen; gen.isa()"], env=env,
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "GEN_ISA" in proc.stderr


# Conversions: lines of every length class of the vector loops (16-float steps on avx512,
# 8-float ones, the scalar tail), and destinations large enough to stream (conftest sets
# GEN_LLC_BYTES=0, so from 2 MiB).
TYPES = ["f32", "bf16", "f16", "s8", "u8", "s32"]
CONVERSIONS = [(n, s, d, attrs) for n in (7, 100, 1003) for s in TYPES for d in TYPES
               for attrs in ({}, {"scales": 0.75, "src_zero_point": 3, "dst_zero_point": 2,
                                  "sum_scale": 0.5})]
CONVERSIONS += [((1 << 20) + 3, "f32", "bf16", {}), ((1 << 21) + 5, "s8", "f32", {"scales": 3.0})]

CONVERT_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
import numpy as np, gen, convert_reference as cr
out = {"isa": gen.isa(), "results": []}
for n, s, d, attrs in json.loads(sys.argv[1]):
    rng = np.random.default_rng(n)
    a, old = cr.make_tensor(s, (n,), rng), cr.make_tensor(d, (n,), rng)
    src, dst = gen.Memory(gen.MemoryDesc((n,), s)), gen.Memory(gen.MemoryDesc((n,), d))
    src.data[:] = np.ascontiguousarray(a).view(np.uint8)
    dst.data[:] = np.ascontiguousarray(old).view(np.uint8)
    gen.reorder(src, dst, **attrs)
    out["results"].append(bytes(dst.data).hex())
print(json.dumps(out))
"""


def run_script(script, cases, tier):
    """script's JSON output, run on `tier` with the cases and tests/ as arguments."""
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(cases), here],
                          env=dict(os.environ, GEN_ISA=tier), capture_output=True, text=True,
                          check=True)
    got = json.loads(proc.stdout)
    assert got["isa"] == tier
    return got


@pytest.mark.parametrize("tier", registry.supported())
def test_tier_conversions_match_reference(tier):
    import convert_reference as cr
    got = run_script(CONVERT_SCRIPT, CONVERSIONS, tier)
    for (n, s, d, attrs), raw in zip(CONVERSIONS, got["results"], strict=True):
        rng = np.random.default_rng(n)
        a, old = cr.make_tensor(s, (n,), rng), cr.make_tensor(d, (n,), rng)
        want = cr.reference_reorder(a, d, dst_old=old, **attrs)
        result = np.frombuffer(bytes.fromhex(raw), np.ascontiguousarray(want).dtype)
        cr.assert_same(result, want, a, f"{tier} {n} {s}->{d} {attrs}")


# Conversions that take two of the kernels' special paths, with the kind each tier runs:
# runs of 8, 16 and 24 along the node that continues them in the source (an odd count of them:
# pairs of runs of 8 and one left over), converted where they lie; and rows of a few elements
# apart in the source: 5 of 8 channels, whose runs B gathers on every tier
# (registry._runs_gathered), and 3 or 7 of 16, gathered and converted in one call by the
# masked tile (avx512).
RUN_LAYOUTS = [((2, 16, 3, 2, 5), "aBcde8b", "aecdb"), ((3, 32, 7), "aBc16b", "acb"),
               ((2, 48, 5), "aBc24b", "acb")]
APART_LAYOUTS = [((70, 13, 3, 7), "aBcd8b", "dbca"), ((2, 3, 9, 11), "nChw16c", "nchw"),
                 ((2, 7, 5, 9), "nChw16c", "nchw")]
RUN_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
import numpy as np, gen, convert_reference as cr, reference as ref
out = {"isa": gen.isa(), "kernels": [], "gathered": [], "results": []}
for dims, stag, dtag, s, d, attrs in json.loads(sys.argv[1]):
    a = cr.make_tensor(s, tuple(dims), np.random.default_rng(len(dims)))
    src = gen.Memory(gen.MemoryDesc(dims, s, stag))
    src.data[:] = ref.pack(a, stag)
    for threads in (1, 2):
        dst = gen.Memory(gen.MemoryDesc(dims, d, dtag))
        dst.data[:] = 0xA5  # padding the kernel does not write stays visible
        p = gen.Reorder(src.desc, dst.desc, **attrs)
        p(src, dst, threads=threads)
        out["kernels"].append(p.kernel)
        out["gathered"].append(any(f["c_n"] > 1 for s, f in p._plan.bound if s.kind == "tile"))
        out["results"].append(bytes(dst.data).hex())
print(json.dumps(out))
"""


@pytest.mark.parametrize("tier", registry.supported())
def test_tier_special_conversion_paths_match_reference(tier):
    import convert_reference as cr
    from reference import unpack
    cases = [(dims, stag, dtag, s, d, attrs) for dims, stag, dtag in RUN_LAYOUTS + APART_LAYOUTS
             for s in ("f32", "bf16", "s8") for d in TYPES
             for attrs in ({}, {"scales": 0.75, "src_zero_point": 3, "dst_zero_point": 2})
             if s != d or attrs]
    got = run_script(RUN_SCRIPT, cases, tier)
    kernels = list(zip([c for c in cases for _ in (1, 2)], got["kernels"], strict=True))
    assert all(k == f"reorder_run_{s}_{d}_{tier}" for (dims, stag, dtag, s, d, _), k in kernels
               if (dims, stag, dtag) in RUN_LAYOUTS)
    gathered = [g for c, g in zip([c for c in cases for _ in (1, 2)], got["gathered"])
                if tuple(c[:3]) == APART_LAYOUTS[0]]
    assert gathered and all(gathered)
    if tier == "avx512":  # the masked tile converts rows apart from 2- and 4-byte sources
        assert all(k == f"reorder_tile_{s}_{d}_{tier}" for (dims, stag, dtag, s, d, _), k in
                   kernels if (dims, stag, dtag) == APART_LAYOUTS[1] and s != "s8")
    for k, (dims, stag, dtag, s, d, attrs) in enumerate(cases):
        a = cr.make_tensor(s, tuple(dims), np.random.default_rng(len(dims)))
        want = cr.reference_reorder(a, d, **attrs)
        for raw in got["results"][2 * k:2 * k + 2]:
            result = unpack(np.frombuffer(bytes.fromhex(raw), np.uint8), tuple(dims), dtag,
                            np.ascontiguousarray(want).dtype)
            cr.assert_same(result, want, a, f"{tier} {dims} {stag}->{dtag} {s}->{d} {attrs}")


# Converting tiles whose B (src-contiguous, here a's inner block) is narrower than a row, into
# a destination whose wide blocks are mostly padding: the padding rows are zeros on every
# tier (the narrow de-interleaving calls, which read every row from the conversion's buffer,
# are not taken where the destination is padded: they wrote rows of earlier items there)
PADDED_TILES = [((2, 2), "Ab4a", "aB64b", "f32", "f32", {"scales": 0.5}),
                ((3, 5), "Ab4a", "aB128b", "f32", "bf16", {}),
                ((2, 3), "Ab4a", "aB4b32b", "f32", "f16", {}),
                ((4, 2), "Ab4a", "aB3b64b", "f32", "s8", {"scales": 2.0}),
                ((2, 6), "Ab4a", "aB128b", "bf16", "bf16", {"src_zero_point": 1}),
                ((5, 3), "Ab2a", "aB64b", "s8", "f32", {"dst_zero_point": 1})]


@pytest.mark.parametrize("tier", registry.supported())
def test_tier_padded_narrow_tiles_write_zero_padding(tier):
    import convert_reference as cr
    from reference import pack
    got = run_script(RUN_SCRIPT, PADDED_TILES, tier)
    for k, (dims, stag, dtag, s, d, attrs) in enumerate(PADDED_TILES):
        a = cr.make_tensor(s, tuple(dims), np.random.default_rng(len(dims)))
        want = pack(cr.reference_reorder(a, d, **attrs), dtag).tobytes().hex()
        assert got["results"][2 * k:2 * k + 2] == [want, want], (tier, dims, stag, dtag, s, d)
