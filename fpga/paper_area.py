"""``qllm paper-area``: the same command as ``qllm paper-area``
(:mod:`fpga.paper.cli`), kept for the old entry point."""

import sys

from qllm_cores.fpga.paper.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
