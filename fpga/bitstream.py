"""``qllm bitstream``: the board build's old entry point (:mod:`fpga.bridge.board`)."""

import sys

from qllm_cores.fpga.bridge.board import main

if __name__ == "__main__":
    sys.exit(main())
