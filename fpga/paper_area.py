"""``python -m fpga.paper_area``: the same command as ``python -m fpga paper-area``
(:mod:`fpga.paper.cli`), kept for the old entry point."""

import sys

from fpga.paper.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
