"""oneDNN in this process: its C API through cffi in ABI mode (`ffi.dlopen`, no compiler).

The library is GEN_ONEDNN_LIB when set, else the current environment's lib/libdnnl.so.3 (where
the PyPI wheel `onednn-cpu-gomp` installs it), else the system loader's libdnnl.so.3. No header
is needed: the enum values that vary between versions (format tags, data types) are read from
the library's own `dnnl_*2str` tables, and the few fixed ones are checked against them at load.

Threads: only an OpenMP (or sequential) build can change its thread count inside one process;
`omp_set_num_threads` is looked up through the library's handle, so it is the OpenMP runtime
oneDNN runs on. A primitive is created after the thread count is set (oneDNN may size its
kernels by it).
"""
import ctypes.util
import os
import sys
from pathlib import Path

import numpy as np

import gen

from . import Prepared, Unavailable, Unsupported

_CDEF = """
typedef int64_t dnnl_dim_t;
typedef dnnl_dim_t dnnl_dims_t[12];
typedef struct dnnl_engine *dnnl_engine_t;
typedef struct dnnl_stream *dnnl_stream_t;
typedef struct dnnl_memory_desc *dnnl_memory_desc_t;
typedef struct dnnl_memory *dnnl_memory_t;
typedef struct dnnl_primitive_desc *dnnl_primitive_desc_t;
typedef struct dnnl_primitive_attr *dnnl_primitive_attr_t;
typedef struct dnnl_post_ops *dnnl_post_ops_t;
typedef struct dnnl_primitive *dnnl_primitive_t;
typedef struct { int arg; dnnl_memory_t memory; } dnnl_exec_arg_t;
typedef struct { int major; int minor; int patch; const char *hash;
                 unsigned cpu_runtime; unsigned gpu_runtime; } dnnl_version_t;

const dnnl_version_t *dnnl_version(void);
const char *dnnl_fmt_tag2str(int v);
const char *dnnl_dt2str(int v);
const char *dnnl_prop_kind2str(int v);
const char *dnnl_alg_kind2str(int v);
const char *dnnl_engine_kind2str(int v);
const char *dnnl_runtime2str(unsigned v);
const char *dnnl_status2str(int v);

int dnnl_engine_create(dnnl_engine_t *engine, int kind, size_t index);
int dnnl_engine_destroy(dnnl_engine_t engine);
int dnnl_stream_create(dnnl_stream_t *stream, dnnl_engine_t engine, unsigned flags);
int dnnl_stream_wait(dnnl_stream_t stream);
int dnnl_memory_desc_create_with_tag(dnnl_memory_desc_t *md, int ndims, const dnnl_dims_t dims,
                                     int data_type, int tag);
int dnnl_memory_desc_create_with_strides(dnnl_memory_desc_t *md, int ndims,
                                         const dnnl_dims_t dims, int data_type,
                                         const dnnl_dims_t strides);
int dnnl_memory_desc_destroy(dnnl_memory_desc_t md);
size_t dnnl_memory_desc_get_size(dnnl_memory_desc_t md);
int dnnl_memory_create(dnnl_memory_t *memory, dnnl_memory_desc_t md, dnnl_engine_t engine,
                       void *handle);
int dnnl_memory_destroy(dnnl_memory_t memory);
int dnnl_primitive_attr_create(dnnl_primitive_attr_t *attr);
int dnnl_primitive_attr_destroy(dnnl_primitive_attr_t attr);
int dnnl_primitive_attr_set_scales_mask(dnnl_primitive_attr_t attr, int arg, int mask);
int dnnl_primitive_attr_set_zero_points_mask(dnnl_primitive_attr_t attr, int arg, int mask);
int dnnl_primitive_attr_set_post_ops(dnnl_primitive_attr_t attr, dnnl_post_ops_t post_ops);
int dnnl_post_ops_create(dnnl_post_ops_t *post_ops);
int dnnl_post_ops_destroy(dnnl_post_ops_t post_ops);
int dnnl_post_ops_append_sum(dnnl_post_ops_t post_ops, float scale, int32_t zero_point,
                             int data_type);
int dnnl_reorder_primitive_desc_create(dnnl_primitive_desc_t *pd, dnnl_memory_desc_t src_md,
        dnnl_engine_t src_engine, dnnl_memory_desc_t dst_md, dnnl_engine_t dst_engine,
        dnnl_primitive_attr_t attr);
int dnnl_resampling_forward_primitive_desc_create(dnnl_primitive_desc_t *pd,
        dnnl_engine_t engine, int prop_kind, int alg_kind, const float *factors,
        dnnl_memory_desc_t src_md, dnnl_memory_desc_t dst_md, dnnl_primitive_attr_t attr);
int dnnl_resampling_backward_primitive_desc_create(dnnl_primitive_desc_t *pd,
        dnnl_engine_t engine, int alg_kind, const float *factors,
        dnnl_memory_desc_t diff_src_md, dnnl_memory_desc_t diff_dst_md,
        dnnl_primitive_desc_t hint_fwd_pd, dnnl_primitive_attr_t attr);
int dnnl_shuffle_forward_primitive_desc_create(dnnl_primitive_desc_t *pd,
        dnnl_engine_t engine, int prop_kind, dnnl_memory_desc_t src_md,
        dnnl_memory_desc_t dst_md, int axis, dnnl_dim_t group_size, dnnl_primitive_attr_t attr);
int dnnl_primitive_desc_query(dnnl_primitive_desc_t pd, int what, int index, void *result);
int dnnl_primitive_desc_destroy(dnnl_primitive_desc_t pd);
int dnnl_primitive_create(dnnl_primitive_t *primitive, dnnl_primitive_desc_t pd);
int dnnl_primitive_execute(dnnl_primitive_t primitive, dnnl_stream_t stream, int nargs,
                           const dnnl_exec_arg_t *args);
int dnnl_primitive_destroy(dnnl_primitive_t primitive);
void omp_set_num_threads(int n);
"""

# Values fixed by oneDNN v3's ABI (#defines and explicitly numbered enums); the enums among
# them are checked against the library's *2str tables in Library.__init__.
ARG_SRC, ARG_DST, ARG_DIFF_SRC, ARG_DIFF_DST = 1, 17, 129, 145
ARG_ATTR_SCALES, ARG_ATTR_ZERO_POINTS = 4096, 8192
ENGINE_CPU, STREAM_IN_ORDER = 1, 1
FORWARD_TRAINING, FORWARD_INFERENCE = 64, 96
ALG = {"nearest": 0x2fff0, "linear": 0x2fff1}
QUERY_IMPL_INFO_STR = 8          # position in dnnl_query_t, the same in v3.0 .. v3.13
RUNTIME_SEQ, RUNTIME_OMP = 1, 2
_ENUM_LIMIT = 4096               # scan of the format-tag table (v3.2 has ~900 entries)


def library_path():
    """The oneDNN library to load (see the module doc), or None."""
    env = os.environ.get("GEN_ONEDNN_LIB")
    if env:
        return env
    local = Path(sys.prefix) / "lib" / "libdnnl.so.3"
    if local.exists():
        return str(local)
    return ctypes.util.find_library("dnnl")


class Library:
    """One loaded oneDNN: an engine, a stream and the name -> value tables of its enums."""

    def __init__(self, path):
        import cffi
        self.ffi = ffi = cffi.FFI()
        ffi.cdef(_CDEF)
        try:
            self.lib = lib = ffi.dlopen(path)
        except OSError as e:
            raise Unavailable("cannot load %s: %s" % (path, e)) from None
        v = lib.dnnl_version()
        if v.major != 3:
            raise Unavailable("%s is oneDNN v%d; this binding speaks the v3 API" % (path, v.major))
        for fn, value, want in ((lib.dnnl_prop_kind2str, FORWARD_INFERENCE, "forward_inference"),
                                (lib.dnnl_prop_kind2str, FORWARD_TRAINING, "forward_training"),
                                (lib.dnnl_alg_kind2str, ALG["nearest"], "resampling_nearest"),
                                (lib.dnnl_alg_kind2str, ALG["linear"], "resampling_linear"),
                                (lib.dnnl_engine_kind2str, ENGINE_CPU, "cpu")):
            if self.string(fn(value)) != want:
                raise Unavailable("%s: enum value %#x is not %s" % (path, value, want))
        self.runtime = v.cpu_runtime
        if self.runtime not in (RUNTIME_SEQ, RUNTIME_OMP):
            raise Unavailable("%s runs on %s threads, whose count cannot change inside a "
                              "process (an OpenMP build such as onednn-cpu-gomp can)"
                              % (path, self.string(lib.dnnl_runtime2str(self.runtime))))
        self.label = "oneDNN v%d.%d.%d (%s, %s)" % (
            v.major, v.minor, v.patch, self.string(lib.dnnl_runtime2str(self.runtime)), path)
        self.tags = self._table(lib.dnnl_fmt_tag2str)
        self.dtypes = self._table(lib.dnnl_dt2str)
        engine, stream = ffi.new("dnnl_engine_t *"), ffi.new("dnnl_stream_t *")
        self.check(lib.dnnl_engine_create(engine, ENGINE_CPU, 0), "engine_create(cpu)",
                   Unavailable)
        self.engine = engine[0]
        self.check(lib.dnnl_stream_create(stream, self.engine, STREAM_IN_ORDER),
                   "stream_create", Unavailable)
        self.stream = stream[0]

    def string(self, p):
        return self.ffi.string(p).decode() if p != self.ffi.NULL else ""

    def _table(self, to_str):
        """name -> value of a dense enum, from its *2str function (aliases share a value, and
        the function names the generic one: aBcd16b, not nChw16c)."""
        names = (self.string(to_str(v)) for v in range(_ENUM_LIMIT))
        return {n: v for v, n in enumerate(names) if n and not n.startswith("unknown")}

    def check(self, status, what, error=RuntimeError):
        if status != 0:
            raise error("oneDNN %s failed: %s" % (what, self.string(self.lib.dnnl_status2str(
                status))))

    def set_threads(self, n):
        if self.runtime == RUNTIME_OMP:
            self.lib.omp_set_num_threads(n)
        elif n != 1:
            raise Unsupported("sequential build")

    # --- objects (each freed by the garbage collector) -------------------------------------
    def md(self, desc):
        """The memory descriptor of a gen.MemoryDesc: plain ones by strides, blocked ones by
        their generic tag when this oneDNN has it."""
        ffi, lib = self.ffi, self.lib
        dt = self.dtypes.get(str(desc.dtype))
        if dt is None:
            raise Unsupported("no %s data type" % desc.dtype)
        out, dims = ffi.new("dnnl_memory_desc_t *"), ffi.new("dnnl_dims_t", desc.dims)
        if desc.is_plain:
            status = lib.dnnl_memory_desc_create_with_strides(
                out, desc.ndims, dims, dt, ffi.new("dnnl_dims_t", desc.strides))
        elif desc.format in self.tags:
            status = lib.dnnl_memory_desc_create_with_tag(out, desc.ndims, dims, dt,
                                                          self.tags[desc.format])
        else:
            raise Unsupported("no format tag %s" % desc.format)
        self.check(status, "memory_desc_create(%r)" % desc, Unsupported)
        md = ffi.gc(out[0], lib.dnnl_memory_desc_destroy)
        if lib.dnnl_memory_desc_get_size(md) != desc.nbytes:
            raise Unsupported("its %r takes %d bytes, gen's %d" % (
                desc, lib.dnnl_memory_desc_get_size(md), desc.nbytes))
        return md

    def memory(self, md, array):
        """A memory object over a NumPy buffer (kept alive by the caller)."""
        out = self.ffi.new("dnnl_memory_t *")
        self.check(self.lib.dnnl_memory_create(out, md, self.engine,
                                               self.ffi.cast("void *", array.ctypes.data)),
                   "memory_create")
        return self.ffi.gc(out[0], self.lib.dnnl_memory_destroy)

    def pd(self, create, what, *args):
        out = self.ffi.new("dnnl_primitive_desc_t *")
        self.check(create(out, *args), what, Unsupported)
        return self.ffi.gc(out[0], self.lib.dnnl_primitive_desc_destroy)

    def attr(self):
        out = self.ffi.new("dnnl_primitive_attr_t *")
        self.check(self.lib.dnnl_primitive_attr_create(out), "primitive_attr_create")
        return self.ffi.gc(out[0], self.lib.dnnl_primitive_attr_destroy)

    def executable(self, pd, args, keep):
        """(run, impl): `run()` executes the primitive of `pd` on `args` [(arg, memory)] and
        waits; `keep` holds what the memories point into."""
        ffi, lib = self.ffi, self.lib
        out = ffi.new("dnnl_primitive_t *")
        self.check(lib.dnnl_primitive_create(out, pd), "primitive_create")
        prim = ffi.gc(out[0], lib.dnnl_primitive_destroy)
        impl = ffi.new("char **")
        self.check(lib.dnnl_primitive_desc_query(pd, QUERY_IMPL_INFO_STR, 0, impl), "query")
        cargs = ffi.new("dnnl_exec_arg_t[]", args)
        execute, wait, stream, n = lib.dnnl_primitive_execute, lib.dnnl_stream_wait, \
            self.stream, len(args)

        def run():
            if execute(prim, stream, n, cargs) or wait(stream):
                raise RuntimeError("oneDNN primitive_execute failed")
        run.keep = (pd, prim, cargs, args, keep)
        return run, self.string(impl[0])


class Peer:
    """The oneDNN column of `bench --peers`: the library's primitive for each gen job, reading
    gen's own source buffer and writing a destination of gen's descriptor."""
    name = "onednn"

    def __init__(self):
        path = library_path()
        if path is None:
            raise Unavailable("no oneDNN library (pip install onednn-cpu-gomp, or set "
                              "GEN_ONEDNN_LIB to a libdnnl.so)")
        self.dnnl = Library(path)
        self.label = self.dnnl.label

    def set_threads(self, n):
        self.dnnl.set_threads(n)

    def prepare(self, job):
        d = self.dnnl
        dst = gen.Memory(job.dst.desc)  # 64-byte aligned, as gen's
        dst.data[:] = job.dst.data  # gen's destination as it is: a sum reads the same values
        src_md, dst_md = d.md(job.src.desc), d.md(job.dst.desc)
        src_mem, dst_mem = d.memory(src_md, job.src.data), d.memory(dst_md, dst.data)
        keep = [job.src, dst]
        p = job.params
        lib, null = d.lib, d.ffi.NULL
        if job.op == "reorder":
            attr = d.attr()
            args = [(ARG_SRC, src_mem), (ARG_DST, dst_mem)]
            self._attributes(attr, args, keep, p)
            pd = d.pd(lib.dnnl_reorder_primitive_desc_create, "reorder", src_md, d.engine,
                      dst_md, d.engine, attr)
        elif job.op == "shuffle_channels":
            # oneDNN's group_size is the size of a group, OpenVINO's (gen's) group their number
            args = [(ARG_SRC, src_mem), (ARG_DST, dst_mem)]
            pd = d.pd(lib.dnnl_shuffle_forward_primitive_desc_create, "shuffle", d.engine,
                      FORWARD_INFERENCE, src_md, dst_md, p["axis"],
                      job.src.desc.dims[p["axis"]] // p["group"], null)
        elif job.op == "resample":
            args = [(ARG_SRC, src_mem), (ARG_DST, dst_mem)]
            pd = d.pd(lib.dnnl_resampling_forward_primitive_desc_create, "resampling", d.engine,
                      FORWARD_INFERENCE, ALG[p["alg"]], null, src_md, dst_md, null)
        else:  # resample_backward: diff_dst (gen's source) -> diff_src (gen's destination)
            args = [(ARG_DIFF_DST, src_mem), (ARG_DIFF_SRC, dst_mem)]
            hint = d.pd(lib.dnnl_resampling_forward_primitive_desc_create, "resampling hint",
                        d.engine, FORWARD_TRAINING, ALG[p["alg"]], null, dst_md, src_md, null)
            pd = d.pd(lib.dnnl_resampling_backward_primitive_desc_create, "resampling bwd",
                      d.engine, ALG[p["alg"]], null, dst_md, src_md, hint, null)
            keep.append(hint)
        run, impl = d.executable(pd, args, keep)
        return Prepared(run, dst.to_array, impl)

    def _attributes(self, attr, args, keep, p):
        """API.md's reorder attributes as oneDNN v3's: scales of the source (oneDNN multiplies
        by a src scale), zero points, a sum post-op; runtime values as memories in `args`."""
        d = self.dnnl
        lib = d.lib
        runtime = []
        if p["scales"] is not None:
            d.check(lib.dnnl_primitive_attr_set_scales_mask(attr, ARG_SRC, p["scale_mask"]),
                    "set_scales_mask", Unsupported)
            runtime.append((ARG_ATTR_SCALES | ARG_SRC, np.array(p["scales"], np.float32)))
        for arg, zp in ((ARG_SRC, p["src_zero_point"]), (ARG_DST, p["dst_zero_point"])):
            if zp:
                d.check(lib.dnnl_primitive_attr_set_zero_points_mask(attr, arg, 0),
                        "set_zero_points_mask", Unsupported)
                runtime.append((ARG_ATTR_ZERO_POINTS | arg, np.array([zp], np.int32)))
        for arg, values in runtime:
            md = d.md(gen.MemoryDesc(values.shape, values.dtype))
            args.append((arg, d.memory(md, values)))
            keep.append(values)
        if p["sum_scale"] is not None:
            out = d.ffi.new("dnnl_post_ops_t *")
            d.check(lib.dnnl_post_ops_create(out), "post_ops_create")
            post_ops = d.ffi.gc(out[0], lib.dnnl_post_ops_destroy)
            d.check(lib.dnnl_post_ops_append_sum(post_ops, p["sum_scale"], 0, 0),
                    "post_ops_append_sum", Unsupported)
            d.check(lib.dnnl_primitive_attr_set_post_ops(attr, post_ops), "set_post_ops",
                    Unsupported)
