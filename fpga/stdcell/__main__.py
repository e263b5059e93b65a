"""``python -m fpga.stdcell``: the same as ``python -m fpga stdcell``."""

import sys

from .cli import main

sys.exit(main())
