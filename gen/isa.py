"""ISA tiers: one table entry each, holding everything a template needs to know.

A tier lists the compiler flags that enable it, the cpu features it needs at run time
(checked with the compiler's cpuid builtin), and per vector width the intrinsics the
templates use: unaligned load/store, the streaming store, and the interleave ops the
transpose network is built from (see transpose.py), and the template of its vector
conversions (load / round / pack per dtype). Adding a tier is adding an entry.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Interleave:
    lo: str  # C expression with {a} and {b}: the low halves of each lane, interleaved
    hi: str
    lane: int  # bytes per lane the op works within


@dataclass(frozen=True)
class Vector:
    nbytes: int
    ctype: str
    load: str  # C function: (const ctype *) -> ctype
    store: str
    stream: str  # non-temporal store; needs an nbytes-aligned address
    interleave: dict  # chunk bytes -> Interleave
    zero: str  # an all-zero register
    # Joins two half-registers {lo} and {hi} (of the `half` vector type): when set, the
    # transpose's lane-crossing stage is done by the loads instead of by shuffles.
    combine: str = ""
    half: "Vector | None" = None
    # Two lanes {a}.lane[imm & 3], {b}.lane[imm >> 4 & 3] joined into one register (where
    # the interleave ops work within lanes narrower than the register).
    lanes: str = ""
    # Per element size: a load of the first {n} elements at {p} (a C expression, any
    # value), the others zero, never touching memory past them (the masked tile).
    maskload: dict = field(default_factory=dict)
    # Per element size: a store of the first {n} (1 <= n < all) elements of {v} at {p}.
    maskstore: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Floats:
    """The widest float register, for the arithmetic kernels (resampling's f32 loops)."""
    ctype: str  # __m256
    prefix: str  # _mm256: {prefix}_fmadd_ps and the other _ps intrinsics
    lanes: int


@dataclass(frozen=True)
class Isa:
    name: str
    rank: int  # higher is preferred
    cflags: tuple = ()
    features: tuple = ()  # names for __builtin_cpu_supports
    vectors: dict = field(default_factory=dict)  # bytes -> Vector
    fence: str = ""  # orders streaming stores before the kernel returns
    convert: str = ""  # template of the vector conversion snippets (templates/cvt_*.j2)
    floats: "Floats | None" = None
    convert_wide: str = ""  # template of 16-float conversion snippets, taken first where set


def _sse_interleaves():
    return {g: Interleave(f"_mm_unpacklo_epi{8 * g}({{a}}, {{b}})",
                          f"_mm_unpackhi_epi{8 * g}({{a}}, {{b}})", 16) for g in (1, 2, 4, 8)}


def _avx2_interleaves():
    out = {g: Interleave(f"_mm256_unpacklo_epi{8 * g}({{a}}, {{b}})",
                         f"_mm256_unpackhi_epi{8 * g}({{a}}, {{b}})", 16) for g in (1, 2, 4, 8)}
    out[16] = Interleave("_mm256_permute2x128_si256({a}, {b}, 0x20)",
                         "_mm256_permute2x128_si256({a}, {b}, 0x31)", 32)
    return out


def _avx2_maskloads(prefix, nbytes):
    """AVX2 loads of 4- and 8-byte elements under a mask of sign bits (lane i < n)."""
    lanes32 = ", ".join(str(i) for i in range(nbytes // 4))
    lanes64 = ", ".join(str(i) for i in reversed(range(nbytes // 8)))  # _set_: highest first
    return {4: f"{prefix}_maskload_epi32((const int *)({{p}}), {prefix}_cmpgt_epi32("
               f"{prefix}_set1_epi32({{n}}), {prefix}_setr_epi32({lanes32})))",
            8: f"{prefix}_maskload_epi64((const long long *)({{p}}), {prefix}_cmpgt_epi64("
               f"{prefix}_set1_epi64x({{n}}), {prefix}_set_epi64x({lanes64})))"}


def _avx512_maskloads(prefix):
    """AVX-512 BW/VL loads of every element size under a mask register (gen_lanes)."""
    return {e: f"{prefix}_maskz_loadu_epi{8 * e}(gen_lanes({{n}}), {{p}})" for e in (1, 2, 4, 8)}


# Stores of the first {n} (1 to 7) 4-byte lanes of {v}: AVX-512's under a mask register; for
# AVX2 a store of 4, 2 and 1 lanes as n's bits ask, not vmaskmovps, microcoded on AMD (NCHW 2x
# down linear, rows of 28 outputs, spent a sixth of its row step in that store; Zen4). A
# statement of its own, as exported C has no vector helpers outside the kernels.
_AVX2_MASKSTORE = {4: (
    "do {{ char *gen_p = (char *)({p}); const int64_t gen_n = {n}; "
    "__m128i gen_x = _mm256_castsi256_si128({v}); "
    "if (gen_n & 4) {{ _mm_storeu_si128((__m128i *)gen_p, gen_x); "
    "gen_x = _mm256_extracti128_si256({v}, 1); gen_p += 16; }} "
    "if (gen_n & 2) {{ _mm_storel_epi64((__m128i *)gen_p, gen_x); "
    "gen_x = _mm_srli_si128(gen_x, 8); gen_p += 8; }} "
    "if (gen_n & 1) {{ const int32_t gen_l = _mm_cvtsi128_si32(gen_x); "
    "memcpy(gen_p, &gen_l, 4); }} }} while (0)")}
_AVX512_MASKSTORE = {4: "_mm256_mask_storeu_epi32({p}, (__mmask8)gen_lanes({n}), {v})"}


_XMM = Vector(16, "__m128i", "_mm_loadu_si128", "_mm_storeu_si128", "_mm_stream_si128",
              _sse_interleaves(), "_mm_setzero_si128()", maskload=_avx2_maskloads("_mm", 16))
_YMM = Vector(32, "__m256i", "_mm256_loadu_si256", "_mm256_storeu_si256",
              "_mm256_stream_si256", _avx2_interleaves(), "_mm256_setzero_si256()",
              "_mm256_inserti128_si256(_mm256_castsi128_si256({lo}), {hi}, 1)", _XMM,
              "_mm256_permute2x128_si256({a}, {b}, {imm})", _avx2_maskloads("_mm256", 32),
              _AVX2_MASKSTORE)
_XMM512 = replace(_XMM, maskload=_avx512_maskloads("_mm"))
_YMM512 = replace(_YMM, half=_XMM512, maskload=_avx512_maskloads("_mm256"),
                  maskstore=_AVX512_MASKSTORE)

TIERS = {
    "scalar": Isa("scalar", 0),
    "avx2": Isa("avx2", 1, ("-mavx2", "-mfma", "-mf16c"), ("avx2", "fma", "f16c"),
                {16: _XMM, 32: _YMM}, "_mm_sfence()", "cvt_avx2.j2", Floats("__m256", "_mm256", 8)),
    # The avx2 tier's tables with 512-bit float arithmetic (see README "ISA tiers": 512-bit
    # transpose tiles measured slower at DRAM sizes; AVX512-BF16 rounds subnormals differently).
    "avx512": Isa("avx512", 2, ("-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq",
                                "-mavx2", "-mfma", "-mf16c"),
                  ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx2", "fma", "f16c"),
                  {16: _XMM512, 32: _YMM512}, "_mm_sfence()", "cvt_avx2.j2",
                  Floats("__m512", "_mm512", 16), "cvt_avx512.j2"),
}
