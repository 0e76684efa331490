"""OpenVINO in this process (when `import openvino` works): the `openvino` column.

A compiled one-op model on the CPU plugin (INFERENCE_NUM_THREADS = the thread count, f32
precision, latency hint, one stream), its input and output bound to gen's source buffer and a
destination buffer of gen's descriptor, timed as a synchronous infer. Its tensors have no
layout, so a dense plain layout is the same memory seen as the tensor of its stored axis order
(nhwc: N, H, W, C). Ops, per job:
- ShuffleChannels on the stored position of the channel axis;
- resampling forward: Interpolate-11 with sizes, half_pixel, round_prefer_ceil, no antialias,
  nearest or linear_onnx (the settings of peers/others/NOTES.md that give oneDNN's semantics;
  OpenVINO's "linear" is a reference kernel), on the stored positions of the spatial axes;
- a reorder between dense plain layouts of one type without attributes: Transpose.
"""
import numpy as np

import gen

from . import Prepared, Unavailable, Unsupported

# gen's types whose NumPy arrays OpenVINO takes as they are (not bf16: ml_dtypes)
_TYPES = {"f32": "f32", "f16": "f16", "s8": "i8", "u8": "u8", "s32": "i32"}
_LETTERS = "abcdefghijkl"


def stored_order(desc):
    """The logical axes of a dense plain desc, outermost first (nhwc: 0, 2, 3, 1)."""
    if not desc.is_plain or desc.format is None or str(desc.dtype) not in _TYPES:
        raise Unsupported("no OpenVINO tensor for %r" % desc)
    return [_LETTERS.index(c) for c in desc.format]


class Peer:
    name = "openvino"

    def __init__(self):
        try:
            import openvino
            from openvino import opset13
            from openvino.opset11 import interpolate
        except ImportError as e:
            raise Unavailable("cannot import openvino (%s)" % e) from None
        self.ov, self.ops, self.interpolate = openvino, opset13, interpolate
        self.core = openvino.Core()
        self.label = "OpenVINO %s" % openvino.__version__
        self.threads = 1

    def set_threads(self, n):
        self.threads = n

    def prepare(self, job):
        ov, ops, p = self.ov, self.ops, job.params
        sd, dd = job.src.desc, job.dst.desc
        sorder, dorder = stored_order(sd), stored_order(dd)
        if job.op == "reorder":
            if sd.dtype != dd.dtype or any(p[k] for k in ("scales", "src_zero_point",
                                                           "dst_zero_point")) \
                    or p["sum_scale"] is not None:
                raise Unsupported("a Transpose moves values only")
            perm = np.array([sorder.index(a) for a in dorder], np.int64)

            def node(x):
                return ops.transpose(x, perm)
            impl = "Transpose"
        elif dorder != sorder or job.op == "resample_backward" or sd.dtype != "f32":
            raise Unsupported("OpenVINO peer: f32 shuffles and forward resampling")
        elif job.op == "shuffle_channels":
            def node(x):
                return ops.shuffle_channels(x, sorder.index(p["axis"]), p["group"])
            impl = "ShuffleChannels"
        else:
            def node(x):
                spatial = range(2, sd.ndims)
                pads = [0] * sd.ndims
                return self.interpolate(
                    x, np.array([dd.dims[a] for a in spatial], np.int64),
                    "nearest" if p["alg"] == "nearest" else "linear_onnx", "sizes", pads, pads,
                    coordinate_transformation_mode="half_pixel",
                    nearest_mode="round_prefer_ceil", antialias=False,
                    axes=np.array([sorder.index(a) for a in spatial], np.int64))
            impl = "Interpolate-11"
        dtype = gen.dtypes.numpy_dtype(sd.dtype)
        xs = job.src.data.view(dtype).reshape([sd.dims[a] for a in sorder])
        dst = gen.Memory(dd)
        ys = dst.data.view(dtype).reshape([dd.dims[a] for a in dorder])
        param = ops.parameter(list(xs.shape), getattr(ov.Type, _TYPES[str(sd.dtype)]))
        config = {"INFERENCE_NUM_THREADS": self.threads, "INFERENCE_PRECISION_HINT": "f32",
                  "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}
        compiled = self.core.compile_model(ov.Model([node(param)], [param]), "CPU", config)
        if tuple(compiled.output(0).shape) != ys.shape:
            raise Unsupported("its output is %s, not %s" % (compiled.output(0).shape, ys.shape))
        request = compiled.create_infer_request()
        request.set_input_tensor(ov.Tensor(xs, shared_memory=True))
        request.set_output_tensor(ov.Tensor(ys, shared_memory=True))

        # a synchronous infer runs in this thread (start_async + wait would add a hand-off to
        # an OpenVINO thread, ~80 us per call at 1 thread); it writes into ys in place
        def run():
            request.infer(share_outputs=True)
        run.keep = xs, ys
        # the layers that run: OpenVINO may add reorders or transposes around the op
        layers = [(r["layerType"].astype(str), r["primitiveType"].astype(str))
                  for r in (o.get_rt_info()
                            for o in compiled.get_runtime_model().get_ordered_ops())]
        impl = " ".join("%s:%s" % l for l in layers
                        if l[0] not in ("Input", "Output", "Const")) or impl
        return Prepared(run, dst.to_array, impl)
