"""``python -m qllm_cores.golden.paper``: :func:`golden.paper.main`."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
