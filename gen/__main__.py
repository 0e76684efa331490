"""`python -m gen ...`: the command line of gen/cli.py."""
import sys

from .cli import main

sys.exit(main())
