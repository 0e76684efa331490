"""gen: generated C kernels for tensor data movement.

Everything public is importable from here; see API.md for the contract.
"""
from .errors import Error
from .layout import MemoryDesc
from .memory import Memory
from .ops.reorder import Reorder, reorder
from .ops.resample import Resample, ResampleBackward, resample, resample_backward
from .ops.shuffle import ShuffleChannels, shuffle_channels, shuffle_channels_backward
from .jit import jit_wait
from .registry import isa, kernels
from .runtime import set_num_threads
from .tune import tune
from .wisdom import forget_wisdom, load_wisdom, save_wisdom

__all__ = ["Error", "MemoryDesc", "Memory", "Reorder", "reorder", "ShuffleChannels",
           "shuffle_channels", "shuffle_channels_backward", "Resample", "ResampleBackward",
           "resample", "resample_backward", "isa", "kernels", "set_num_threads", "tune",
           "save_wisdom", "load_wisdom", "forget_wisdom", "jit_wait"]
