"""The command line: `python cli.py <command>` or `python -m gen <command>`."""
from __future__ import annotations

import argparse
import sys

from . import bench
from .errors import Error


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gen", description="Generated C kernels for tensor "
                                "data movement.")
    sub = p.add_subparsers(dest="command", required=True)
    bench.add_arguments(sub.add_parser("bench", help="time the benchmark cases against a "
                                       "memory copy of the same traffic"))
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return {"bench": bench.run}[args.command](args)
    except Error as e:
        print(f"gen: error: {e}", file=sys.stderr)
        return 2
