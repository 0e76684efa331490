"""The command line: `python cli.py <command>` or `python -m gen <command>`."""
from __future__ import annotations

import argparse
import os
import re
import sys

from . import bench
from .errors import Error


class _Parser(argparse.ArgumentParser):
    """Bad options are one line on stderr and exit status 2 (no usage dump)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gen", description="Generated C kernels for tensor data movement.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    bench.add_arguments(sub.add_parser("bench", help="time the benchmark cases against a "
                                       "memory copy of the same traffic"))
    _export_arguments(sub.add_parser(
        "export", help="write one fixed problem as standalone C (NAME.c, NAME.h)",
        description="Write one fixed problem as standalone, dependency-free C: NAME.c and "
                    "NAME.h in DIR, defining `int NAME(const void *src, void *dst);` (returns "
                    "0) and the constants NAME_src_bytes / NAME_dst_bytes. It compiles with "
                    "`cc -std=c99 -O2 -c NAME.c` (portable C) and uses the AVX2 kernels with "
                    "-mavx2 -mfma -mf16c or -march=native; OpenMP (-fopenmp) is optional."))
    return p


def _sizes(text: str):
    words = text.lower().split("x")
    # ASCII digits only: int() would also take "2_0", " 2" and other scripts' digits
    if not all(w.isascii() and w.isdigit() for w in words):
        raise argparse.ArgumentTypeError(f"{text!r} is not sizes like 2x3x4")
    return tuple(int(w) for w in words)


def _typed_tag(text: str):
    dtype, sep, tag = text.partition(":")
    if not sep or not dtype or not tag:
        raise argparse.ArgumentTypeError(f"{text!r} is not DT:TAG (e.g. f32:nchw)")
    return dtype, tag


def _floats(text: str):
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not numbers like 0.5,2") from None


def _export_arguments(p):
    p.add_argument("op", choices=["reorder", "shuffle_channels", "resample"],
                   help="the op to export")
    p.add_argument("--dims", type=_sizes, required=True,
                   help="logical dims of the source, e.g. 8x64x56x56 (for --backward: the "
                        "forward problem's source)")
    p.add_argument("--src", type=_typed_tag, required=True, metavar="DT:TAG",
                   help="source dtype and format, e.g. f32:nchw (for shuffle and resample the "
                        "result has the same ones)")
    p.add_argument("--dst", type=_typed_tag, metavar="DT:TAG",
                   help="reorder: destination dtype and format (default: --src's)")
    p.add_argument("--scales", type=_floats, help="reorder: scales S,S,... (one per index "
                   "of the masked axes, row-major)")
    p.add_argument("--scale-mask", type=int, metavar="M",
                   help="reorder: bit i set = one scale per index of axis i (default 0)")
    p.add_argument("--src-zero-point", type=int, metavar="Z",
                   help="reorder: subtracted from the source (default 0)")
    p.add_argument("--dst-zero-point", type=int, metavar="Z",
                   help="reorder: added to the result (default 0)")
    p.add_argument("--sum-scale", type=float, metavar="B",
                   help="reorder: add B * the destination's old value (then dst is read)")
    p.add_argument("--axis", type=int, metavar="A",
                   help="shuffle_channels: the channel axis (default 1)")
    p.add_argument("--group", type=int, metavar="G",
                   help="shuffle_channels: number of groups (default 1)")
    p.add_argument("--alg", choices=["nearest", "linear"],
                   help="resample: the algorithm (default nearest)")
    p.add_argument("--out-spatial", type=_sizes, metavar="O0xO1...",
                   help="resample: output spatial dims (required for resample)")
    p.add_argument("--backward", action="store_const", const=True,
                   help="export the backward op of the same forward problem (resample: src "
                        "is diff_dst, dims N, C, out-spatial; dst is diff_src, the --dims; "
                        "shuffle_channels: shuffle_channels_backward)")
    p.add_argument("--name", required=True, help="C name of the function and the files")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="directory to write NAME.c and NAME.h to (created if missing)")


# The options of each op, with their defaults (argparse leaves them None, so that an option
# given is seen even at its default value): another op's option given is an error.
_OP_OPTIONS = {
    "reorder": {"dst": None, "scales": None, "scale_mask": 0, "src_zero_point": 0,
                "dst_zero_point": 0, "sum_scale": None},
    "shuffle_channels": {"axis": 1, "group": 1, "backward": False},
    "resample": {"alg": "nearest", "out_spatial": None, "backward": False},
}


def _export(args) -> int:
    from . import export
    mine = _OP_OPTIONS[args.op]
    for options in _OP_OPTIONS.values():
        for opt in options:
            if opt not in mine and getattr(args, opt) is not None:
                owners = " and ".join(op for op, o in _OP_OPTIONS.items() if opt in o)
                raise Error(f"--{opt.replace('_', '-')} is not an option of {args.op} "
                            f"(only of {owners})")
    for opt, default in mine.items():
        if getattr(args, opt) is None:
            setattr(args, opt, default)
    if args.op == "reorder":
        src = export.reorder_source(
            args.name, args.dims, args.src, args.dst or args.src, scales=args.scales,
            scale_mask=args.scale_mask, src_zero_point=args.src_zero_point,
            dst_zero_point=args.dst_zero_point, sum_scale=args.sum_scale)
    elif args.op == "shuffle_channels":
        src = export.shuffle_source(args.name, args.dims, args.src, args.axis, args.group,
                                    args.backward)
    else:
        if args.out_spatial is None:
            raise Error("resample needs --out-spatial")
        src = export.resample_source(args.name, args.dims, args.src, args.alg,
                                     args.out_spatial, args.backward)
    for path in export.write(src, args.output):
        print(path)
    return 0


# A word that starts with "-" then a digit or ".", or "inf" or "nan": a negative number
_NEGATIVE = re.compile(r"-(\.?\d|inf|nan)", re.IGNORECASE)


def _value_options(p) -> set:
    """The long options of p and of its commands that take a value."""
    out = set()
    for action in p._actions:  # (argparse has no public list of them)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= _value_options(sub)
        elif action.nargs != 0:
            out.update(s for s in action.option_strings if s.startswith("--"))
    return out


def _joined(argv, options):
    """argv with each negative number that follows one of `options` joined to it
    ("--scales=-1,2"): argparse takes only plain ones ("-1", "-0.5") for values, "-1,2" and
    "-1e-3" for options. Words after "--" are left as they are."""
    out = []
    for word in argv:
        if out and out[-1] in options and "--" not in out and _NEGATIVE.match(word):
            out[-1] += "=" + word
        else:
            out.append(word)
    return out


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(_joined(sys.argv[1:] if argv is None else argv, _value_options(p)))
    try:
        return {"bench": bench.run, "export": _export}[args.command](args)
    except Error as e:
        print(f"gen: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader left (`bench --list | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
