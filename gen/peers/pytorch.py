"""PyTorch in this process (when `import torch` works): the `torch` column.

Tensors are views of gen's buffers with gen's strides, so torch runs on the same values and in
the same layout (a channels-last desc is a channels_last tensor). Calls, per job:
- reorder between plain layouts without attributes: `out.copy_(x)` into a preallocated tensor
  of the destination's strides (a permute and a type change where torch's conversion is the
  same: same type, float to float, s8/u8 to a float);
- f32 -> s8/u8 with one scale and no source zero point: `quantize_per_tensor(x, 1 / scale,
  dst_zero_point)` (torch divides by its scale); s8/u8 -> f32 with one scale and no destination
  zero point: `dequantize` of the tensor seen as quantized (scale, src_zero_point);
- shuffle on axis 1: `F.channel_shuffle`;
- resampling forward: `F.interpolate(size=..., mode="nearest-exact" | "linear" | "bilinear" |
  "trilinear", align_corners=False)`; backward: the aten op autograd calls for it
  (`_upsample_nearest_exact2d_backward`, `upsample_bilinear2d_backward`, ...), called directly
  so that only the backward is timed.
Every call but copy_ allocates its result, as these calls do (from a warm heap, see
_keep_heap); a result stored in another layout than gen's destination fails the check.
"""
import ctypes
import warnings

import ml_dtypes
import numpy as np

import gen

from . import Mismatch, Prepared, Unavailable, Unsupported

_TYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "s8": "int8", "u8": "uint8",
          "s32": "int32"}
_FLOATS = ("f32", "bf16", "f16")
_QUANTIZED = {"s8": "qint8", "u8": "quint8"}


def _keep_heap():
    """glibc would mmap a result >= 32 MiB afresh each call (dequantize's f32), and page faults
    would dominate: make it keep freed blocks, so every torch result is a warm heap block."""
    libc = ctypes.CDLL(None)
    m_trim_threshold, m_mmap_threshold = -1, -3
    for param in (m_trim_threshold, m_mmap_threshold):
        libc.mallopt(param, 1 << 30)


class Peer:
    name = "torch"

    def __init__(self):
        try:
            import torch
        except ImportError as e:
            raise Unavailable("cannot import torch (%s)" % e) from None
        self.torch = torch
        self.label = "PyTorch %s" % torch.__version__
        # the deprecation of quantized tensors, on stderr in the middle of the table
        warnings.filterwarnings("ignore", ".*quantize_per_tensor.*deprecated", UserWarning)
        _keep_heap()

    def set_threads(self, n):
        self.torch.set_num_threads(n)

    def tensor(self, mem):
        """A tensor viewing gen.Memory `mem`: its logical dims with its strides."""
        desc = mem.desc
        name = _TYPES.get(str(desc.dtype))
        if not desc.is_plain or name is None:
            raise Unsupported("no torch tensor for %r" % desc)
        flat = self.torch.from_numpy(mem.data).view(getattr(self.torch, name))
        return flat.as_strided(desc.dims, desc.strides)

    def prepare(self, job):
        torch, p = self.torch, job.params
        x, out_desc = self.tensor(job.src), job.dst.desc
        if job.op == "reorder":
            return self._reorder(job, x)
        if job.op == "shuffle_channels":
            if p["axis"] != 1:
                raise Unsupported("channel_shuffle shuffles axis 1")
            return self._allocating(lambda: torch.nn.functional.channel_shuffle(x, p["group"]),
                                    out_desc, "F.channel_shuffle")
        nsp, linear = x.dim() - 2, p["alg"] == "linear"
        mode = ("linear", "bilinear", "trilinear")[nsp - 1] if linear else "nearest-exact"
        if job.op == "resample":
            kw = {"align_corners": False} if linear else {}
            size = list(out_desc.dims[2:])
            return self._allocating(
                lambda: torch.nn.functional.interpolate(x, size=size, mode=mode, **kw),
                out_desc, "F.interpolate(%s)" % mode)
        name = ("upsample_%s%dd_backward" % (mode, nsp) if linear
                else "_upsample_nearest_exact%dd_backward" % nsp)
        op, extra = getattr(torch.ops.aten, name), [False] if linear else []  # align_corners
        sizes = list(x.shape[2:]), list(out_desc.dims)
        return self._allocating(lambda: op(x, *sizes, *extra), out_desc, name)

    def _reorder(self, job, x):
        torch, p = self.torch, job.params
        sdt, ddt = str(job.src.desc.dtype), str(job.dst.desc.dtype)
        scales, szp, dzp = p["scales"], p["src_zero_point"], p["dst_zero_point"]
        if p["sum_scale"] is not None or p["scale_mask"] or (scales and len(scales) != 1):
            raise Unsupported("no sum or per-axis scales")
        out = self.tensor(gen.Memory(job.dst.desc))
        if scales is None and not szp and not dzp and (
                sdt == ddt or ddt in _FLOATS and sdt in _FLOATS + ("s8", "u8")):
            return Prepared(lambda: out.copy_(x), lambda: self.array(out), "copy_")
        if x.stride() != out.stride():
            raise Unsupported("(de)quantize keeps the layout")
        if sdt == "f32" and ddt in _QUANTIZED and not szp:
            qtype, scale = getattr(torch, _QUANTIZED[ddt]), 1.0 / (scales or [1.0])[0]
            return self._allocating(lambda: torch.quantize_per_tensor(x, scale, dzp, qtype),
                                    job.dst.desc, "quantize_per_tensor(%s)" % _QUANTIZED[ddt])
        if sdt in _QUANTIZED and ddt == "f32" and not dzp:
            q = torch._make_per_tensor_quantized_tensor(x, (scales or [1.0])[0], szp)
            return self._allocating(q.dequantize, job.dst.desc, "dequantize")
        raise Unsupported("no torch call for %s -> %s with these attributes" % (sdt, ddt))

    def array(self, y):
        """The logical content of tensor y as a C-contiguous array of gen's NumPy type."""
        if y.is_quantized:
            y = y.int_repr()
        if y.dtype == self.torch.bfloat16:
            return y.contiguous().view(self.torch.int16).numpy().view(ml_dtypes.bfloat16)
        return np.ascontiguousarray(y.numpy())

    def _allocating(self, call, desc, impl):
        """Prepared for a call that returns a new tensor; its result must have desc's strides
        (size-1 axes aside)."""
        last = []

        def run():
            last[:] = [call()]

        def result():
            y = last[0]
            strides = [s for d, s in zip(desc.dims, y.stride()) if d > 1]
            want = [s for d, s in zip(desc.dims, desc.strides) if d > 1]
            if strides != want:
                raise Mismatch("%s stored its result with strides %s, gen's %s" % (
                    impl, tuple(y.stride()), desc.strides))
            return self.array(y)
        return Prepared(run, result, impl)
