#!/usr/bin/env python3
"""`python cli.py ...` is `python -m gen ...`: see gen/cli.py."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# Prefer the installed gen (it carries the compiled kernels) over this checkout's sources.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
try:
    from gen.cli import main
except ImportError:
    sys.path.insert(0, HERE)
    from gen.cli import main

if __name__ == "__main__":
    sys.exit(main())
